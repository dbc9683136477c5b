//! GraphML as a GRUG uses it: `<key>` declarations and the `<node>`s and `<edge>`s of one
//! `<graph>`, with their `<data>`, each remembered with its line. Other elements are skipped;
//! nested or repeated graphs are refused. Values are not interpreted here (see `recipe`).

use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::Reader;

use crate::error::{Location, ReadError};
use crate::xml::{LineIndex, attributes};

/// A `<key>` declaration.
pub(super) struct Key {
    pub(super) id: String,
    pub(super) line: usize,
    pub(super) for_: String,
    pub(super) name: String,
    pub(super) default: Option<(String, usize)>,
}

/// A `<node>` or `<edge>` as written: attributes and `(key id, value, line)` data.
pub(super) struct Element {
    pub(super) line: usize,
    pub(super) id: Option<String>,
    pub(super) source: String,
    pub(super) target: String,
    pub(super) data: Vec<(String, String, usize)>,
}

/// What an open element is, for the parser's stack.
enum Open {
    Graphml,
    Key(usize),
    Default {
        key: usize,
        line: usize,
    },
    Graph,
    Node(usize),
    Edge(usize),
    Data {
        owner: Owner,
        key: String,
        line: usize,
    },
    Other,
}

#[derive(Clone, Copy)]
enum Owner {
    Node(usize),
    Edge(usize),
}

/// Everything read from the XML, before values are resolved.
#[derive(Default)]
pub(super) struct Document {
    pub(super) keys: Vec<Key>,
    pub(super) nodes: Vec<Element>,
    pub(super) edges: Vec<Element>,
    pub(super) graph_line: Option<usize>,
}

/// One open element: what it is, its tag name and its line.
type Frame = (Open, String, usize);

pub(super) fn read_document(text: &str) -> Result<Document, ReadError> {
    let lines = LineIndex::new(text);
    let mut reader = Reader::from_str(text);
    let mut doc = Document::default();
    let mut stack: Vec<Frame> = Vec::new();
    let mut buf = String::new();
    loop {
        let pos = usize::try_from(reader.buffer_position()).unwrap_or(usize::MAX);
        let event = reader.read_event().map_err(|e| {
            let at = usize::try_from(reader.error_position()).unwrap_or(usize::MAX);
            let msg = format!("malformed XML: {e}");
            ReadError::invalid(Location::Line(lines.line(at)), msg)
        })?;
        let line = lines.line(pos);
        match event {
            Event::Start(e) => {
                let open = open_element(&e, line, &stack, &mut doc)?;
                stack.push((open, e.local_name().as_ref().to_string(), line));
                buf.clear();
            }
            Event::Empty(e) => {
                let open = open_element(&e, line, &stack, &mut doc)?;
                close_element(open, "", &mut doc);
                buf.clear();
            }
            Event::End(_) => {
                if let Some((open, _, _)) = stack.pop() {
                    close_element(open, buf.trim(), &mut doc);
                }
                buf.clear();
            }
            Event::Text(t) => buf.push_str(&t.xml10_content()),
            Event::CData(t) => buf.push_str(&t.xml10_content()),
            Event::GeneralRef(r) => {
                let resolved = match r.resolve_char_ref() {
                    Ok(Some(c)) => Some(c.to_string()),
                    Ok(None) => quick_xml::escape::resolve_predefined_entity(&r).map(String::from),
                    Err(_) => None,
                };
                let Some(s) = resolved else {
                    let msg = format!("unknown or invalid entity &{};", &*r);
                    return Err(ReadError::invalid(Location::Line(line), msg));
                };
                buf.push_str(&s);
            }
            Event::Eof => break,
            Event::Comment(_) | Event::Decl(_) | Event::PI(_) | Event::DocType(_) => {}
        }
    }
    if let Some((_, name, line)) = stack.last() {
        let msg = format!("unexpected end of input: <{name}> opened here is not closed");
        return Err(ReadError::invalid(Location::Line(*line), msg));
    }
    if doc.graph_line.is_none() {
        return Err(ReadError::invalid(
            Location::None,
            "no <graphml> element with a <graph>",
        ));
    }
    Ok(doc)
}

/// Classifies a start tag by its parent and records what it declares.
fn open_element(
    e: &BytesStart<'_>,
    line: usize,
    stack: &[Frame],
    doc: &mut Document,
) -> Result<Open, ReadError> {
    let at = Location::Line(line);
    let name = e.local_name();
    let name = name.as_ref();
    let attrs = attributes(e, line)?;
    let attr = |k: &str| {
        attrs
            .iter()
            .rev()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
    };
    let need = |k: &str| {
        attr(k).ok_or_else(|| ReadError::invalid(at.clone(), format!("<{name}> has no {k}")))
    };
    let parent = stack.last().map(|(o, _, _)| o);
    Ok(match (parent, name) {
        (None, "graphml") => Open::Graphml,
        (None, _) => {
            return Err(ReadError::invalid(
                at,
                format!("expected <graphml>, found <{name}>"),
            ));
        }
        (Some(Open::Graphml), "key") => {
            let id = need("id")?;
            let name = attr("attr.name").unwrap_or_else(|| id.clone());
            let for_ = attr("for").unwrap_or_else(|| "all".to_string());
            doc.keys.push(Key {
                id,
                line,
                for_,
                name,
                default: None,
            });
            Open::Key(doc.keys.len() - 1)
        }
        (Some(Open::Key(k)), "default") => Open::Default { key: *k, line },
        (Some(Open::Graphml), "graph") => {
            if doc.graph_line.is_some() {
                return Err(ReadError::invalid(at, "only one <graph> is supported"));
            }
            doc.graph_line = Some(line);
            Open::Graph
        }
        (Some(_), "graph") => {
            return Err(ReadError::invalid(at, "nested <graph> is not supported"));
        }
        (Some(Open::Graph), "node") => {
            let id = Some(need("id")?);
            let (source, target) = (String::new(), String::new());
            doc.nodes.push(Element {
                line,
                id,
                source,
                target,
                data: vec![],
            });
            Open::Node(doc.nodes.len() - 1)
        }
        (Some(Open::Graph), "edge") => {
            let (id, source, target) = (attr("id"), need("source")?, need("target")?);
            doc.edges.push(Element {
                line,
                id,
                source,
                target,
                data: vec![],
            });
            Open::Edge(doc.edges.len() - 1)
        }
        (Some(Open::Node(n)), "data") => Open::Data {
            owner: Owner::Node(*n),
            key: need("key")?,
            line,
        },
        (Some(Open::Edge(n)), "data") => Open::Data {
            owner: Owner::Edge(*n),
            key: need("key")?,
            line,
        },
        _ => Open::Other,
    })
}

fn close_element(open: Open, text: &str, doc: &mut Document) {
    match open {
        Open::Default { key, line } => {
            if let Some(k) = doc.keys.get_mut(key) {
                k.default = Some((text.to_string(), line));
            }
        }
        Open::Data { owner, key, line } => {
            let element = match owner {
                Owner::Node(n) => doc.nodes.get_mut(n),
                Owner::Edge(n) => doc.edges.get_mut(n),
            };
            if let Some(el) = element {
                el.data.push((key, text.to_string(), line));
            }
        }
        _ => {}
    }
}
