//! hwloc's XML as `lstopo --of xml` (or `hwloc-gather-topology`) writes it: one `<topology>`
//! holding one root `<object>`, objects nested as the machine nests them, each with its
//! `type` and other attributes and its `<info name= value=>` pairs. Everything else
//! (`<distances>`, `<page_type>`, `<userdata>`, `<support>`, …) is skipped. Values are not
//! interpreted here (see the parent module).
//!
//! The input is bounded before anything grows: [`HWLOC_XML_BYTES_MAX`] bytes,
//! [`HWLOC_OBJECTS_MAX`] objects and [`HWLOC_DEPTH_MAX`] nested elements.

use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::Reader;

use crate::error::{Location, ReadError};
use crate::xml::{LineIndex, attributes};

/// The largest hwloc XML read, in bytes. A large node's topology (hundreds of cores, their
/// caches and PUs, a few dozen PCI devices) is a few hundred kilobytes.
pub const HWLOC_XML_BYTES_MAX: usize = 64 << 20;

/// The most `<object>` elements one topology may hold.
pub const HWLOC_OBJECTS_MAX: usize = 1 << 20;

/// The deepest element nesting accepted (a real topology is under 20 levels; the bound
/// keeps the normalisation's recursion shallow).
pub const HWLOC_DEPTH_MAX: usize = 64;

/// One `<object>` as written.
pub(super) struct Object {
    /// The `type` attribute (`Machine`, `Package`, `Socket`, `Cache`, `Core`, `OSDev`, …).
    pub(super) kind: String,
    pub(super) line: usize,
    pub(super) attrs: Vec<(String, String)>,
    pub(super) infos: Vec<(String, String)>,
    /// Child objects, in document order.
    pub(super) children: Vec<usize>,
}

impl Object {
    pub(super) fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The first `<info>` of that name, as hwloc's `hwloc_obj_get_info_by_name` finds it.
    pub(super) fn info(&self, name: &str) -> Option<&str> {
        self.infos
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A parsed topology: `objects[0]` is the root.
pub(super) struct Document {
    pub(super) objects: Vec<Object>,
    /// Written by hwloc 1.x (no `version` attribute on `<topology>`): NUMA nodes are normal
    /// objects with children there, where hwloc 2 makes them memory children.
    pub(super) v1: bool,
}

/// What an open element is.
enum Open {
    Topology,
    Object(usize),
    Other,
}

pub(super) fn read_document(text: &str) -> Result<Document, ReadError> {
    if text.len() > HWLOC_XML_BYTES_MAX {
        return Err(ReadError::limit(
            Location::None,
            format!("an hwloc XML of {} bytes", text.len()),
            HWLOC_XML_BYTES_MAX,
        ));
    }
    let lines = LineIndex::new(text);
    let mut reader = Reader::from_str(text);
    let mut objects: Vec<Object> = Vec::new();
    let mut v1 = true;
    let mut stack: Vec<Open> = Vec::new();
    loop {
        let pos = usize::try_from(reader.buffer_position()).unwrap_or(usize::MAX);
        let event = reader.read_event().map_err(|e| {
            let at = usize::try_from(reader.error_position()).unwrap_or(usize::MAX);
            ReadError::invalid(
                Location::Line(lines.line(at)),
                format!("malformed XML: {e}"),
            )
        })?;
        let line = lines.line(pos);
        let (start, empty) = match &event {
            Event::Start(e) => (Some(e), false),
            Event::Empty(e) => (Some(e), true),
            Event::End(_) => {
                stack.pop();
                continue;
            }
            Event::Eof => break,
            _ => continue,
        };
        let Some(e) = start else { continue };
        if stack.len() >= HWLOC_DEPTH_MAX {
            return Err(ReadError::limit(
                Location::Line(line),
                "element nesting",
                HWLOC_DEPTH_MAX,
            ));
        }
        let open = open_element(e, line, stack.last(), &mut objects, &mut v1)?;
        if !empty {
            stack.push(open);
        }
    }
    if let Some(open) = stack.last() {
        let what = match open {
            Open::Topology => "<topology>",
            Open::Object(_) => "an <object>",
            Open::Other => "an element",
        };
        let msg = format!("unexpected end of input: {what} is not closed");
        return Err(ReadError::invalid(Location::None, msg));
    }
    if objects.is_empty() {
        return Err(ReadError::invalid(
            Location::None,
            "no <topology> with a root <object>",
        ));
    }
    Ok(Document { objects, v1 })
}

/// Classifies a start tag by its parent and records what it declares.
fn open_element(
    e: &BytesStart<'_>,
    line: usize,
    parent: Option<&Open>,
    objects: &mut Vec<Object>,
    v1: &mut bool,
) -> Result<Open, ReadError> {
    let at = Location::Line(line);
    let name = e.local_name();
    let name = name.as_ref();
    Ok(match (parent, name) {
        (None, "topology") => {
            let attrs = attributes(e, line)?;
            *v1 = !attrs.iter().any(|(k, _)| k == "version");
            Open::Topology
        }
        (None, _) => {
            let found = name;
            return Err(ReadError::invalid(
                at,
                format!("expected <topology>, found <{found}>"),
            ));
        }
        (Some(Open::Topology), "object") if !objects.is_empty() => {
            return Err(ReadError::invalid(at, "a second root <object>"));
        }
        (Some(Open::Topology), "object") | (Some(Open::Object(_)), "object") => {
            if objects.len() >= HWLOC_OBJECTS_MAX {
                return Err(ReadError::limit(at, "hwloc objects", HWLOC_OBJECTS_MAX));
            }
            let attrs = attributes(e, line)?;
            let Some(kind) = attrs.iter().find(|(k, _)| k == "type").map(|(_, v)| v) else {
                return Err(ReadError::invalid(at, "<object> has no type"));
            };
            let id = objects.len();
            objects.push(Object {
                kind: kind.clone(),
                line,
                attrs,
                infos: Vec::new(),
                children: Vec::new(),
            });
            if let Some(Open::Object(p)) = parent
                && let Some(p) = objects.get_mut(*p)
            {
                p.children.push(id);
            }
            Open::Object(id)
        }
        (Some(Open::Object(o)), "info") => {
            let attrs = attributes(e, line)?;
            let get = |k: &str| attrs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
            // hwloc ignores an info without a name or a value.
            if let (Some(n), Some(v), Some(obj)) = (get("name"), get("value"), objects.get_mut(*o))
            {
                obj.infos.push((n, v));
            }
            Open::Other
        }
        _ => Open::Other,
    })
}
