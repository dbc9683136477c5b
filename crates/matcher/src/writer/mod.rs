//! Match writers: how a match is printed, byte for byte as resource-query prints it.
//!
//! | `-F` | what |
//! |---|---|
//! | `simple` | a line per vertex, children first, `      ---tiny0[1:s]` |
//! | `pretty_simple` | the same lines in reverse, `exclusive`/`shared` spelled out |
//! | `jgf` / `jgf_shorthand` | the taken subgraph as JSON Graph Format |
//! | `rlite` | the R_lite array of RFC 20 |
//! | `rv1` / `rv1_nosched` / `rv1_shorthand` | RFC 20 R, with the JGF under `scheduling` or not |
//!
//! A writer is fed one vertex at a time in the update walk's order, and the edge into each
//! vertex right after it ([`MatchWriter::feed`]), then asked for its text
//! ([`MatchWriter::emit`]). As in Fluxion it is one object for a whole session and keeps a
//! few things between matches: R's `attributes` (the last queue named), `jgf_shorthand`'s
//! writer mark once set, and core/gpu ids seen outside any node.

mod jgf;
mod json;
mod parents;
mod rlite;

use shardsched_resource::{CONTAINMENT, ResourceGraph, VertexId};

use crate::alloc::{Allocation, Depth, LeftOut};
use crate::dfu::Labels;
use jgf::jgf_vertex;
pub use json::Json;
use parents::parents_exclusive;
use rlite::Rlite;

/// Output format of match results (resource-query's `-F`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writer {
    Simple,
    PrettySimple,
    Jgf,
    JgfShorthand,
    Rlite,
    Rv1,
    Rv1NoSched,
    Rv1Shorthand,
}

/// Why a writer could not produce its text (resource-query then reports the match as
/// failed without consuming the job id).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WriterError {
    #[error("the match has vertices but no edges, or edges but no vertices")]
    Unbalanced,
    #[error("nothing with a node to write")]
    Empty,
    #[error("a negative id or rank cannot be written as an idset")]
    NegativeId,
}

impl Writer {
    /// Parses resource-query's `-F` names.
    pub fn parse(s: &str) -> Option<Writer> {
        Some(match s {
            "simple" => Writer::Simple,
            "pretty_simple" => Writer::PrettySimple,
            "jgf" => Writer::Jgf,
            "jgf_shorthand" => Writer::JgfShorthand,
            "rlite" => Writer::Rlite,
            "rv1" => Writer::Rv1,
            "rv1_nosched" => Writer::Rv1NoSched,
            "rv1_shorthand" => Writer::Rv1Shorthand,
            _ => return None,
        })
    }

    /// A fresh writer of this format.
    pub fn session(self) -> MatchWriter {
        MatchWriter {
            kind: self,
            text: String::new(),
            line_starts: Vec::new(),
            nodes: Vec::new(),
            edges: Vec::new(),
            rlite: Rlite::default(),
            times: (0, 0),
            attrs: Vec::new(),
            incomplete: false,
        }
    }

    /// Renders one allocation with a fresh writer; text formats end with a newline. An
    /// allocation a writer cannot print gives an empty text.
    pub fn render(self, g: &ResourceGraph, a: &Allocation) -> String {
        let mut w = self.session();
        w.feed(g, &Labels::default(), a);
        let mut out = String::new();
        let _ = w.emit(&mut out);
        out
    }
}

/// A writer of one session (see the module doc).
#[derive(Clone, Debug)]
pub struct MatchWriter {
    kind: Writer,
    /// simple / pretty_simple lines, in the order fed (pretty_simple prints them reversed),
    /// and, for pretty_simple, where each starts in `text`.
    text: String,
    line_starts: Vec<usize>,
    /// JGF nodes and edges.
    nodes: Vec<Json>,
    edges: Vec<Json>,
    rlite: Rlite,
    times: (i64, i64),
    /// R's `attributes.system.scheduler` entries, kept from match to match.
    attrs: Vec<(String, String)>,
    /// `jgf_shorthand`: a vertex under an exclusive parent was left out (never reset).
    incomplete: bool,
}

/// One vertex as the update walk hands it to a writer.
#[derive(Clone, Copy, Debug)]
pub struct Emitted<'a> {
    pub v: VertexId,
    pub needs: i64,
    pub exclusive: bool,
    pub excl_parent: bool,
    /// Depth in the walk (root = 0).
    pub depth: Depth,
    pub label: Option<&'a str>,
}

/// The start of a simple writer's line down to depth 31: six blanks, then three dashes a
/// level.
const SIMPLE_PREFIX: &str = concat!(
    "      ",
    "------------------------------------------------",
    "------------------------------------------------"
);

impl MatchWriter {
    /// The format.
    pub fn kind(&self) -> Writer {
        self.kind
    }

    /// Feeds every vertex of `a` and the edge into each, in order, and its window.
    pub fn feed(&mut self, g: &ResourceGraph, labels: &Labels, a: &Allocation) {
        self.feed_with_refused(g, labels, a, &[]);
    }

    /// [`MatchWriter::feed`], with the edges into vertices the match left out (each after
    /// the number of kept vertices given: see [`crate::Matcher::last_refused`]).
    pub fn feed_with_refused(
        &mut self,
        g: &ResourceGraph,
        labels: &Labels,
        a: &Allocation,
        refused: &[LeftOut],
    ) {
        self.feed_on(g, g, CONTAINMENT, labels, a, refused);
    }

    /// [`MatchWriter::feed_with_refused`] for a walk of the dominant subsystem `subsystem`
    /// along `tree`.
    pub fn feed_on(
        &mut self,
        g: &ResourceGraph,
        tree: &dyn crate::dfu::Tree,
        subsystem: &str,
        labels: &Labels,
        a: &Allocation,
        refused: &[LeftOut],
    ) {
        let vertices = a.vertices();
        if let Some(pretty) = self.simple() {
            // A line per vertex: no labels, no edges, no parent's exclusivity to find.
            for av in vertices.iter() {
                self.simple_line(g, pretty, av.v, av.needs, av.exclusive, av.depth);
            }
            self.times = (a.at, crate::end_of(a));
            return;
        }
        let (parent_excl, left_parent_excl) = parents_exclusive(g, tree, &vertices, refused);
        let refused_edge = |w: &mut MatchWriter, at: usize| {
            for (r, &excl) in refused.iter().zip(&left_parent_excl) {
                if r.kept == at
                    && let Some(p) = g.parent(r.vertex.v)
                {
                    w.emit_edge(g, p, r.vertex.v, excl, CONTAINMENT);
                }
            }
        };
        for (i, av) in vertices.iter().enumerate() {
            refused_edge(self, i);
            let label = labels.get(&av.v.0).map(|l| l.1.as_str());
            self.emit_vertex(
                g,
                &Emitted {
                    v: av.v,
                    needs: av.needs,
                    exclusive: av.exclusive,
                    excl_parent: parent_excl[i],
                    depth: av.depth,
                    label,
                },
                None,
            );
            // The edge the walk came by: where vertices share parents, from the next vertex
            // one level up (post-order); else from the parent.
            if av.v != tree.root() {
                let up = if tree.is_dag() {
                    vertices[i + 1..]
                        .iter()
                        .find(|x| x.depth < av.depth)
                        .filter(|x| x.depth + 1 == av.depth)
                        .map(|x| x.v)
                        .or_else(|| tree.parent(av.v))
                } else {
                    tree.parent(av.v)
                };
                if let Some(p) = up {
                    self.emit_edge(g, p, av.v, parent_excl[i], subsystem);
                }
            }
        }
        refused_edge(self, vertices.len());
        self.times = (a.at, crate::end_of(a));
    }

    /// Sets the window R reports (Fluxion's `emit_tm`).
    pub fn set_times(&mut self, start: i64, end: i64) {
        self.times = (start, end);
    }

    /// Sets R's `attributes.system.scheduler.<k>` (kept for every later match).
    pub fn emit_attr(&mut self, k: &str, v: &str) {
        match self.attrs.iter_mut().find(|e| e.0 == k) {
            Some(e) => e.1 = v.to_string(),
            None => self.attrs.push((k.to_string(), v.to_string())),
        }
    }

    /// Takes one vertex (`agfilter`: the `find` command's filter usage, by type name).
    pub fn emit_vertex(
        &mut self,
        g: &ResourceGraph,
        e: &Emitted<'_>,
        agfilter: Option<&[(String, String)]>,
    ) {
        match self.kind {
            Writer::Simple | Writer::PrettySimple => {
                let pretty = self.kind == Writer::PrettySimple;
                self.simple_line(g, pretty, e.v, e.needs, e.exclusive, e.depth);
            }
            Writer::Jgf => self.nodes.push(jgf_vertex(g, e, agfilter)),
            Writer::JgfShorthand => self.shorthand_vertex(g, e, agfilter),
            Writer::Rlite | Writer::Rv1NoSched => self.rlite.vertex(g, e.v),
            Writer::Rv1 => {
                self.rlite.vertex(g, e.v);
                self.nodes.push(jgf_vertex(g, e, agfilter));
            }
            Writer::Rv1Shorthand => {
                self.rlite.vertex(g, e.v);
                self.shorthand_vertex(g, e, agfilter);
            }
        }
    }

    /// `Some(pretty)` for the line writers (`simple`, `pretty_simple`), which print a line
    /// per vertex and nothing of edges or labels.
    fn simple(&self) -> Option<bool> {
        match self.kind {
            Writer::Simple => Some(false),
            Writer::PrettySimple => Some(true),
            _ => None,
        }
    }

    /// Appends `v`'s line of a `simple` (or `pretty_simple`) writer. Inline: `feed_on`'s loop
    /// calls it for every vertex a match takes (most of what `query` prints).
    #[inline(always)]
    fn simple_line(
        &mut self,
        g: &ResourceGraph,
        pretty: bool,
        v: VertexId,
        needs: i64,
        exclusive: bool,
        depth: Depth,
    ) {
        if pretty {
            // Printed last first: where each line starts.
            self.line_starts.push(self.text.len());
        }
        let line = &mut self.text;
        // Six blanks and three dashes a level, in one copy when the depth is in
        // `SIMPLE_PREFIX` (the lines are most of what `query` prints); for the usual depths
        // a copy of known length, which the compiler writes in place of a `memcpy` call.
        macro_rules! prefix {
            ($($d:literal)*) => {
                match depth {
                    $($d => line.push_str(&SIMPLE_PREFIX[..6 + 3 * ($d + 1)]),)*
                    _ => match SIMPLE_PREFIX.get(..6 + 3 * (depth as usize + 1)) {
                        Some(prefix) => line.push_str(prefix),
                        None => {
                            line.push_str("      ");
                            for _ in 0..=depth {
                                line.push_str("---");
                            }
                        }
                    },
                }
            };
        }
        prefix!(0 1 2 3 4 5 6 7);
        // By hand rather than `writeln!`: this line is most of what `query` prints.
        line.push_str(g.name(v));
        line.push('[');
        shardsched_resource::graph::push_int(line, needs);
        // The mode with the line's end, each a constant (one copy of known length).
        match (pretty, exclusive) {
            (false, true) => line.push_str(":x]\n"),
            (false, false) => line.push_str(":s]\n"),
            (true, true) => line.push_str(":exclusive]\n"),
            (true, false) => line.push_str(":shared]\n"),
        }
    }

    fn shorthand_vertex(
        &mut self,
        g: &ResourceGraph,
        e: &Emitted<'_>,
        agfilter: Option<&[(String, String)]>,
    ) {
        if e.excl_parent {
            self.incomplete = true;
        } else {
            self.nodes.push(jgf_vertex(g, e, agfilter));
        }
    }

    /// Takes the edge `parent → child` of `subsystem`.
    pub fn emit_edge(
        &mut self,
        g: &ResourceGraph,
        parent: VertexId,
        child: VertexId,
        excl_parent: bool,
        subsystem: &str,
    ) {
        let shorthand = matches!(self.kind, Writer::JgfShorthand | Writer::Rv1Shorthand);
        if !matches!(self.kind, Writer::Jgf | Writer::Rv1) && !shorthand {
            return;
        }
        if shorthand && excl_parent {
            self.incomplete = true;
            return;
        }
        let mut o = Json::obj();
        o.set("source", Json::Str(g.uniq_id(parent).to_string()));
        o.set("target", Json::Str(g.uniq_id(child).to_string()));
        if subsystem != CONTAINMENT {
            let mut m = Json::obj();
            m.set("subsystem", Json::Str(subsystem.to_string()));
            o.set("metadata", m);
        }
        self.edges.push(o);
    }

    /// The JGF object of what was fed, and clears it; `None` when nothing was fed.
    fn take_jgf(&mut self) -> Result<Option<Json>, WriterError> {
        let (nv, ne) = (self.nodes.len(), self.edges.len());
        if nv == 0 && ne == 0 {
            return Ok(None);
        }
        if nv == 0 || ne == 0 {
            return Err(WriterError::Unbalanced);
        }
        let mut inner = Json::obj();
        inner.set("nodes", Json::Arr(std::mem::take(&mut self.nodes)));
        inner.set("edges", Json::Arr(std::mem::take(&mut self.edges)));
        let mut o = Json::obj();
        o.set("graph", inner);
        let shorthand = matches!(self.kind, Writer::JgfShorthand | Writer::Rv1Shorthand);
        if shorthand && self.incomplete {
            o.set("writer", Json::Str("fluxion:jgf_shorthand".into()));
        }
        Ok(Some(o))
    }

    /// The R object of what was fed (clearing it), when there is one.
    fn take_r(&mut self, scheduling: bool) -> Result<Option<Json>, WriterError> {
        if self.rlite.is_empty() {
            return Ok(None);
        }
        if scheduling && self.nodes.is_empty() && self.edges.is_empty() {
            return Ok(None);
        }
        let (r_lite, nodelist, properties) = self.rlite.take()?;
        let mut exec = Json::obj();
        exec.set("R_lite", r_lite);
        exec.set("nodelist", nodelist);
        if let Some(p) = properties {
            exec.set("properties", p);
        }
        exec.set("starttime", Json::Int(self.times.0));
        exec.set("expiration", Json::Int(self.times.1));
        let mut o = Json::obj();
        o.set("version", Json::Int(1));
        o.set("execution", exec);
        if scheduling {
            if let Some(j) = self.take_jgf()? {
                o.set("scheduling", j);
            }
            if !self.attrs.is_empty() {
                let mut sched = Json::obj();
                for (k, v) in &self.attrs {
                    sched.set(k, Json::Str(v.clone()));
                }
                let mut system = Json::obj();
                system.set("scheduler", sched);
                let mut attrs = Json::obj();
                attrs.set("system", system);
                o.set("attributes", attrs);
            }
        }
        Ok(Some(o))
    }

    /// Appends the simple lines fed (pretty_simple: last first), and clears them.
    fn take_lines(&mut self, out: &mut String) {
        if self.kind == Writer::PrettySimple {
            let mut end = self.text.len();
            for &start in self.line_starts.iter().rev() {
                out.push_str(&self.text[start..end]);
                end = start;
            }
        } else {
            out.push_str(&self.text);
        }
        self.text.clear();
        self.line_starts.clear();
    }

    /// Appends the text of what was fed since the last emit (Fluxion's `emit`), and clears
    /// it.
    pub fn emit(&mut self, out: &mut String) -> Result<(), WriterError> {
        match self.kind {
            Writer::Simple | Writer::PrettySimple => self.take_lines(out),
            Writer::Jgf | Writer::JgfShorthand => {
                if let Some(j) = self.take_jgf()? {
                    out.push_str(&j.dump());
                    out.push('\n');
                }
            }
            Writer::Rlite => {
                if self.rlite.is_empty() {
                    return Err(WriterError::Empty);
                }
                let (r_lite, _, _) = self.rlite.take()?;
                out.push_str(&r_lite.dump());
                out.push('\n');
            }
            Writer::Rv1NoSched => {
                if let Some(r) = self.take_r(false)? {
                    out.push_str(&r.dump());
                    out.push('\n');
                }
            }
            Writer::Rv1 | Writer::Rv1Shorthand => {
                if let Some(r) = self.take_r(true)? {
                    out.push_str(&r.dump());
                    out.push('\n');
                }
            }
        }
        Ok(())
    }

    /// What `find` prints of what was fed (Fluxion's `emit_json` as resource-query's find
    /// prints it), and clears it: `None` when there is nothing to print.
    pub fn emit_find(&mut self) -> Result<Option<String>, WriterError> {
        match self.kind {
            Writer::Simple | Writer::PrettySimple => {
                let mut text = String::new();
                self.take_lines(&mut text);
                Ok((!text.is_empty()).then_some(text))
            }
            Writer::Jgf | Writer::JgfShorthand => {
                Ok(self.take_jgf()?.map(|j| format!("{}\n", j.dump())))
            }
            Writer::Rlite => {
                if self.rlite.is_empty() {
                    return Err(WriterError::Empty);
                }
                let (r_lite, _, _) = self.rlite.take()?;
                Ok(Some(format!("{}\n", r_lite.dump())))
            }
            Writer::Rv1NoSched => Ok(self.take_r(false)?.map(|r| format!("{}\n", r.dump()))),
            Writer::Rv1 | Writer::Rv1Shorthand => {
                Ok(self.take_r(true)?.map(|r| format!("{}\n", r.dump())))
            }
        }
    }
}

/// RFC 20 R of `a` as a value (for the shards, which hand it to the executor):
/// `rv1_nosched`'s content, or `rv1`'s with the JGF under `scheduling`.
pub fn rv1(g: &ResourceGraph, a: &Allocation, with_sched: bool) -> serde_json::Value {
    let kind = if with_sched {
        Writer::Rv1
    } else {
        Writer::Rv1NoSched
    };
    let mut w = kind.session();
    w.feed(g, &Labels::default(), a);
    match w.take_r(with_sched) {
        Ok(Some(r)) => r.to_value(),
        _ => {
            let end = crate::end_of(a);
            serde_json::json!({"version": 1, "execution": {"R_lite": [], "nodelist": [],
                "starttime": a.at, "expiration": end}})
        }
    }
}

/// Vertex ids of `a` (for tests and checkers).
pub fn vertex_ids(a: &Allocation) -> Vec<VertexId> {
    a.iter().map(|v| v.v).collect()
}
