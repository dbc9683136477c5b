//! GraphML → recipe: the templates and edges of a GRUG, with every value resolved.
//!
//! GraphML declares its attributes with `<key id=… for=node|edge|all attr.name=…>` and an
//! optional `<default>`; a `<data key=…>` inside a `<node>` or `<edge>` gives a value. A value
//! comes from the element's own `<data>`, else from the declared default, else it is what
//! Boost's GraphML reader would leave in Fluxion's structs: the empty string or 0. Nothing
//! else is assumed, so a recipe that declares other defaults gets them.
//!
//! Each value remembers the line it came from (its `<data>`, or the key's `<default>`), so
//! that an error points at the text to fix.

use std::collections::HashMap;

use super::xml::{Document, Element, Key, read_document};
use crate::error::{Location, ReadError};

/// How a recipe edge generates its targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum GenMethod {
    Multiply,
    AssociateIn,
    AssociateByPathIn,
}

/// A resource template (a GraphML `<node>`).
#[derive(Clone, Debug)]
pub(super) struct Template {
    pub id: String,
    pub line: usize,
    pub root: bool,
    pub kind: String,
    pub basename: String,
    pub unit: String,
    pub size: i64,
    pub subsystem: String,
}

/// A generation rule (a GraphML `<edge>`).
#[derive(Clone, Debug)]
pub(super) struct RecipeEdge {
    /// The edge's `id`, or `source->target` when it has none (for messages).
    pub name: String,
    pub line: usize,
    pub source: usize,
    pub target: usize,
    pub e_subsystem: String,
    pub id_scope: i64,
    pub id_start: i64,
    pub id_stride: i64,
    pub gen_method: GenMethod,
    pub multi_scale: i64,
    pub as_tgt_subsystem: String,
    pub as_tgt_uplvl: i64,
    pub as_src_uplvl: i64,
}

/// A parsed recipe: templates and edges in file order.
#[derive(Clone, Debug)]
pub(super) struct Recipe {
    pub templates: Vec<Template>,
    pub edges: Vec<RecipeEdge>,
}

/// Parses GraphML text into a [`Recipe`].
pub(super) fn parse(text: &str) -> Result<Recipe, ReadError> {
    let doc = read_document(text)?;
    resolve(doc)
}

/// Values of one element: its own data by attribute name, then the declared defaults.
struct Values<'a> {
    what: String,
    line: usize,
    data: HashMap<&'a str, (&'a str, usize)>,
    defaults: &'a HashMap<&'a str, (&'a str, usize)>,
}

impl Values<'_> {
    /// The value and its line, or "" at the element's line when nothing gives one.
    fn get(&self, name: &str) -> (&str, usize) {
        self.data
            .get(name)
            .or_else(|| self.defaults.get(name))
            .copied()
            .unwrap_or(("", self.line))
    }

    fn string(&self, name: &str) -> String {
        self.get(name).0.to_string()
    }

    fn int(&self, name: &str) -> Result<i64, ReadError> {
        let (v, line) = self.get(name);
        if v.is_empty() {
            return Ok(0);
        }
        v.parse().map_err(|_| {
            let msg = format!("{}: {name} {v:?} is not an integer", self.what);
            ReadError::invalid(Location::Line(line), msg)
        })
    }

    fn error(&self, name: &str, message: &str) -> ReadError {
        let (v, line) = self.get(name);
        ReadError::invalid(
            Location::Line(line),
            format!("{}: {name} {v:?} {message}", self.what),
        )
    }
}

/// Turns the document into templates and edges, checking every value.
fn resolve(doc: Document) -> Result<Recipe, ReadError> {
    let mut key_by_id: HashMap<&str, &Key> = HashMap::new();
    let mut node_defaults: HashMap<&str, (&str, usize)> = HashMap::new();
    let mut edge_defaults: HashMap<&str, (&str, usize)> = HashMap::new();
    for key in &doc.keys {
        if key_by_id.insert(&key.id, key).is_some() {
            let msg = format!("key {:?} is declared twice", key.id);
            return Err(ReadError::invalid(Location::Line(key.line), msg));
        }
        if let Some((value, line)) = &key.default {
            if matches!(key.for_.as_str(), "node" | "all") {
                node_defaults.insert(&key.name, (value, *line));
            }
            if matches!(key.for_.as_str(), "edge" | "all") {
                edge_defaults.insert(&key.name, (value, *line));
            }
        }
    }
    let mut templates = Vec::with_capacity(doc.nodes.len());
    let mut index: HashMap<&str, usize> = HashMap::new();
    for el in &doc.nodes {
        let id = el.id.clone().unwrap_or_default();
        let what = format!("node {id:?}");
        if index
            .insert(el.id.as_deref().unwrap_or_default(), templates.len())
            .is_some()
        {
            return Err(ReadError::invalid(
                Location::Line(el.line),
                format!("{what} twice"),
            ));
        }
        let v = element_values(el, what, "node", &key_by_id, &node_defaults)?;
        let t = Template {
            id,
            line: el.line,
            root: v.int("root")? != 0,
            kind: v.string("type"),
            basename: v.string("basename"),
            unit: v.string("unit"),
            size: v.int("size")?,
            subsystem: v.string("subsystem"),
        };
        if t.kind.is_empty() {
            return Err(v.error("type", "is empty: every template needs a type"));
        }
        if t.subsystem.is_empty() {
            return Err(v.error("subsystem", "is empty"));
        }
        if t.size < 1 {
            return Err(v.error("size", "must be at least 1"));
        }
        templates.push(t);
    }

    let mut edges = Vec::with_capacity(doc.edges.len());
    for el in &doc.edges {
        let name = el
            .id
            .clone()
            .unwrap_or_else(|| format!("{}->{}", el.source, el.target));
        let what = format!("edge {name:?}");
        let end = |id: &str, which: &str| {
            index.get(id).copied().ok_or_else(|| {
                let msg = format!("{what}: {which} {id:?} is not a node of the recipe");
                ReadError::invalid(Location::Line(el.line), msg)
            })
        };
        let (source, target) = (end(&el.source, "source")?, end(&el.target, "target")?);
        let v = element_values(el, what, "edge", &key_by_id, &edge_defaults)?;
        let gen_method = match v.get("gen_method").0 {
            "MULTIPLY" => GenMethod::Multiply,
            "ASSOCIATE_IN" => GenMethod::AssociateIn,
            "ASSOCIATE_BY_PATH_IN" => GenMethod::AssociateByPathIn,
            _ => {
                let msg = "is not MULTIPLY, ASSOCIATE_IN or ASSOCIATE_BY_PATH_IN";
                return Err(v.error("gen_method", msg));
            }
        };
        let e = RecipeEdge {
            name,
            line: el.line,
            source,
            target,
            e_subsystem: v.string("e_subsystem"),
            id_scope: v.int("id_scope")?,
            id_start: v.int("id_start")?,
            id_stride: v.int("id_stride")?,
            gen_method,
            multi_scale: v.int("multi_scale")?,
            as_tgt_subsystem: v.string("as_tgt_subsystem"),
            as_tgt_uplvl: v.int("as_tgt_uplvl")?,
            as_src_uplvl: v.int("as_src_uplvl")?,
        };
        if e.e_subsystem.is_empty() {
            return Err(v.error("e_subsystem", "is empty"));
        }
        for (field, value) in [
            ("multi_scale", e.multi_scale),
            ("as_tgt_uplvl", e.as_tgt_uplvl),
            ("as_src_uplvl", e.as_src_uplvl),
        ] {
            if value < 0 {
                return Err(v.error(field, "must not be negative"));
            }
        }
        edges.push(e);
    }
    check_roots(&templates, &edges, doc.graph_line.unwrap_or(0))?;
    Ok(Recipe { templates, edges })
}

/// The values of element `el` (a `kind`, named `what` in errors): its `<data>` by attribute
/// name (the last one wins, as in Boost) over the keys' `defaults`.
fn element_values<'a>(
    el: &'a Element,
    what: String,
    kind: &str,
    key_by_id: &HashMap<&str, &'a Key>,
    defaults: &'a HashMap<&'a str, (&'a str, usize)>,
) -> Result<Values<'a>, ReadError> {
    let mut data = HashMap::new();
    for (key, value, line) in &el.data {
        let Some(k) = key_by_id.get(key.as_str()) else {
            let msg = format!("{what}: data key {key:?} is not declared");
            return Err(ReadError::invalid(Location::Line(*line), msg));
        };
        if k.for_ != kind && k.for_ != "all" {
            let msg = format!("{what}: key {key:?} is declared for {}, not {kind}", k.for_);
            return Err(ReadError::invalid(Location::Line(*line), msg));
        }
        data.insert(k.name.as_str(), (value.as_str(), *line));
    }
    Ok(Values {
        what,
        line: el.line,
        data,
        defaults,
    })
}

/// One root per subsystem, one in containment, and no edge into a root.
fn check_roots(
    templates: &[Template],
    edges: &[RecipeEdge],
    graph_line: usize,
) -> Result<(), ReadError> {
    let mut roots: HashMap<&str, &Template> = HashMap::new();
    for t in templates.iter().filter(|t| t.root) {
        if let Some(first) = roots.insert(&t.subsystem, t) {
            let msg = format!(
                "node {:?}: a second root of subsystem {:?} (the first is {:?})",
                t.id, t.subsystem, first.id
            );
            return Err(ReadError::invalid(Location::Line(t.line), msg));
        }
    }
    if !roots.contains_key(crate::graph::CONTAINMENT) {
        let msg = "no root template: mark the top template of the containment subsystem \
                   with <data key=\"root\">1</data>";
        return Err(ReadError::invalid(Location::Line(graph_line), msg));
    }
    if let Some(e) = edges.iter().find(|e| templates[e.target].root) {
        let msg = format!(
            "edge {:?}: its target {:?} is a root",
            e.name, templates[e.target].id
        );
        return Err(ReadError::invalid(Location::Line(e.line), msg));
    }
    Ok(())
}
