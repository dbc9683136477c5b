//! Recipe → graph: Fluxion's `resource_gen` depth-first emitter, step for step.
//!
//! The rules are documented on the [`grug`](super) module.
//!
//! Vertices of templates outside the containment subsystem are marked outside containment.
//!
//! Every string of the recipe (types, basenames, units, subsystems) is interned once, before
//! the walk; a generated vertex is then a handful of integers pushed onto the builder's
//! columns (see [`GraphBuilder::add_vertex_syms`]).

use std::collections::HashMap;

use super::ids::sibling_ids;
use super::recipe::{GenMethod, Recipe, RecipeEdge};
use crate::error::{GRAPH_VERTICES_MAX, Location, ReadError};
use crate::graph::{CONTAINMENT, GraphBuilder, ResourceGraph, Siblings, Status, VertexId};
use crate::intern::Sym;

/// The most edges an `ASSOCIATE_*` rule may create (an all-to-all association grows as the
/// product of its two sides).
const ASSOCIATE_EDGES_MAX: usize = 2 * GRAPH_VERTICES_MAX;

/// One step of the depth-first walk over the recipe.
#[derive(Clone, Copy)]
enum Step {
    /// A template is discovered (a root template emits its subsystem's root here).
    Discover(usize),
    /// A tree edge (by index) generates its target's vertices.
    TreeEdge(usize),
    /// A template is finished: its tree edge's scale leaves the path.
    Finish,
}

/// Boost's `depth_first_search` over the recipe, as a list of steps: it starts at the
/// containment root template, then at every template still undiscovered, in file order; from
/// a template it follows the out-edges in file order. The walk depends on the recipe alone.
fn walk(recipe: &Recipe) -> Vec<Step> {
    let n = recipe.templates.len();
    let mut out_edges: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, e) in recipe.edges.iter().enumerate() {
        out_edges[e.source].push(i);
    }
    let containment_root = recipe
        .templates
        .iter()
        .position(|t| t.root && t.subsystem == CONTAINMENT);
    let mut steps = Vec::new();
    let mut discovered = vec![false; n];
    for start in containment_root.into_iter().chain(0..n) {
        if discovered[start] {
            continue;
        }
        // Iterative DFS: (template, index of its next out-edge).
        discovered[start] = true;
        steps.push(Step::Discover(start));
        let mut stack = vec![(start, 0usize)];
        while let Some(top) = stack.last_mut() {
            let (u, k) = *top;
            if let Some(&e) = out_edges[u].get(k) {
                top.1 += 1;
                let v = recipe.edges[e].target;
                if !discovered[v] {
                    steps.push(Step::TreeEdge(e));
                    discovered[v] = true;
                    steps.push(Step::Discover(v));
                    stack.push((v, 0));
                }
            } else {
                stack.pop();
                steps.push(Step::Finish);
            }
        }
    }
    steps
}

/// How many vertices and edges the walk creates, when only `MULTIPLY` rules do (an
/// association's count depends on paths); `None` otherwise or past the vertex bound.
fn count(recipe: &Recipe, steps: &[Step]) -> Option<(usize, usize)> {
    let mut per_template = vec![0usize; recipe.templates.len()];
    let mut rooted: Vec<&str> = Vec::new();
    let (mut vertices, mut edges) = (0usize, 0usize);
    for &step in steps {
        match step {
            Step::Discover(t) => {
                let template = &recipe.templates[t];
                if template.root && !rooted.contains(&template.subsystem.as_str()) {
                    rooted.push(&template.subsystem);
                    per_template[t] += 1;
                    vertices += 1;
                }
            }
            Step::TreeEdge(e) => {
                let e = &recipe.edges[e];
                if e.gen_method != GenMethod::Multiply {
                    return None;
                }
                let new =
                    per_template[e.source].checked_mul(usize::try_from(e.multi_scale).ok()?)?;
                per_template[e.target] += new;
                vertices = vertices.checked_add(new)?;
                edges += new;
                if vertices > GRAPH_VERTICES_MAX {
                    return None;
                }
            }
            Step::Finish => {}
        }
    }
    Some((vertices, edges))
}

/// Generates the graph a recipe describes.
pub(super) fn generate(recipe: &Recipe) -> Result<ResourceGraph, ReadError> {
    let steps = walk(recipe);
    let mut builder = GraphBuilder::new();
    builder.allow_shared_children();
    // Allocate the graph once when its size is known from the recipe.
    if let Some((vertices, edges)) = count(recipe, &steps) {
        builder.reserve(vertices, edges);
    }
    let templates = recipe
        .templates
        .iter()
        .map(|t| TemplateSyms {
            siblings: Siblings {
                kind: builder.intern(&t.kind),
                basename: builder.intern(&t.basename),
                unit: builder.intern(&t.unit),
                size: t.size,
                status: Status::Up,
            },
            subsystem: builder.intern(&t.subsystem),
            outside: t.subsystem != CONTAINMENT,
            node: t.kind == "node",
        })
        .collect();
    let edges = recipe
        .edges
        .iter()
        .map(|e| EdgeSyms {
            e_subsystem: builder.intern(&e.e_subsystem),
            as_tgt_subsystem: builder.intern(&e.as_tgt_subsystem),
        })
        .collect();
    let mut g = Generator {
        recipe,
        templates,
        edges,
        builder,
        generated: vec![Vec::new(); recipe.templates.len()],
        scales: Vec::new(),
        // Only associations look up paths, so only they need each vertex's parents.
        track_parents: recipe
            .edges
            .iter()
            .any(|e| e.gen_method != GenMethod::Multiply),
        parents: HashMap::new(),
        roots: HashMap::new(),
        associate_edges: 0,
        node_rank: -1,
    };
    for step in steps {
        match step {
            Step::Discover(t) => g.discover(t),
            Step::TreeEdge(e) => g.tree_edge(e)?,
            Step::Finish => {
                g.scales.pop();
            }
        }
    }
    Ok(g.builder.finish()?)
}

/// A template's strings, interned in the builder, and what its vertices share.
struct TemplateSyms {
    /// Type, basename, unit, size and status.
    siblings: Siblings,
    subsystem: Sym,
    /// Whether the template is outside the containment subsystem.
    outside: bool,
    /// Whether its vertices are nodes (Fluxion ranks those).
    node: bool,
}

/// A rule's subsystems, interned in the builder.
struct EdgeSyms {
    e_subsystem: Sym,
    as_tgt_subsystem: Sym,
}

struct Generator<'r> {
    recipe: &'r Recipe,
    templates: Vec<TemplateSyms>,
    edges: Vec<EdgeSyms>,
    builder: GraphBuilder,
    /// Vertices generated from (or associated with) each template, in order.
    generated: Vec<Vec<VertexId>>,
    /// `multi_scale` of each tree edge on the DFS path, innermost last.
    scales: Vec<i64>,
    /// Whether `parents` is kept (the recipe has associations).
    track_parents: bool,
    /// Per subsystem: the parent of each vertex (`u32::MAX` for none), grown on demand.
    parents: HashMap<Sym, Vec<u32>>,
    /// Per subsystem: its root vertex.
    roots: HashMap<Sym, VertexId>,
    associate_edges: usize,
    /// The last rank given to a node.
    node_rank: i64,
}

impl Generator<'_> {
    fn discover(&mut self, t: usize) {
        let template = &self.recipe.templates[t];
        let subsystem = self.templates[t].subsystem;
        if !template.root || self.roots.contains_key(&subsystem) {
            return;
        }
        let v = self.emit(t, 0);
        self.roots.insert(subsystem, v);
        self.generated[t].push(v);
    }

    fn emit(&mut self, t: usize, id: i64) -> VertexId {
        let s = self.templates[t].siblings;
        let rank = self.next_rank(t, 1).unwrap_or(-1);
        let v = self
            .builder
            .add_vertex_syms(s.kind, s.basename, None, id, rank, s.size, s.unit, s.status);
        if self.templates[t].outside {
            self.builder.mark_outside_containment(v);
        }
        v
    }

    /// The rank of the first of `count` new vertices of template `t`, counting them:
    /// Fluxion gives nodes ranks 0, 1, 2… in creation order, every other vertex -1 (`None`).
    fn next_rank(&mut self, t: usize, count: usize) -> Option<i64> {
        if !self.templates[t].node {
            return None;
        }
        let first = self.node_rank + 1;
        self.node_rank += count as i64;
        Some(first)
    }

    fn link(&mut self, parent: VertexId, child: VertexId, subsystem: Sym) {
        self.builder.add_edge_sym(parent, child, subsystem);
        let parents = self.parents.entry(subsystem).or_default();
        if parents.len() <= child.index() {
            parents.resize(child.index() + 1, u32::MAX);
        }
        if parents[child.index()] == u32::MAX {
            parents[child.index()] = parent.0;
        }
    }

    fn tree_edge(&mut self, index: usize) -> Result<(), ReadError> {
        let e = &self.recipe.edges[index];
        match e.gen_method {
            GenMethod::Multiply => self.multiply(index)?,
            GenMethod::AssociateIn | GenMethod::AssociateByPathIn => {
                // Fluxion records a level's scale for multiplying edges only (and pops one
                // at every finished recipe vertex, while any are left).
                self.associate(index)?;
                return Ok(());
            }
        }
        self.scales.push(e.multi_scale);
        Ok(())
    }

    fn multiply(&mut self, index: usize) -> Result<(), ReadError> {
        let e = &self.recipe.edges[index];
        let sources = std::mem::take(&mut self.generated[e.source]);
        let scale = usize::try_from(e.multi_scale).unwrap_or(usize::MAX);
        let total = sources
            .len()
            .checked_mul(scale)
            .and_then(|c| c.checked_add(self.builder.len()));
        if total.is_none_or(|t| t > GRAPH_VERTICES_MAX) {
            let what = format!(
                "edge {:?}: {} × {} vertices of {:?}",
                e.name,
                sources.len(),
                e.multi_scale,
                self.recipe.templates[e.target].id
            );
            return Err(ReadError::limit(
                Location::Line(e.line),
                what,
                GRAPH_VERTICES_MAX,
            ));
        }
        // Below the vertex bound, so the count fits; every new vertex is a new child.
        let count = sources.len() * scale;
        let subsystem = self.edges[index].e_subsystem;
        self.builder.reserve(count, count);
        self.generated[e.target].reserve_exact(count);
        let mut parents = match self.track_parents {
            true => self.parents.remove(&subsystem).unwrap_or_default(),
            false => Vec::new(),
        };
        if self.track_parents {
            parents.resize(self.builder.len() + count, u32::MAX);
        }
        let mut result = Ok(());
        let siblings = self.templates[e.target].siblings;
        for (j, &parent) in sources.iter().enumerate() {
            let ids = match sibling_ids(e, &self.scales, j as i64) {
                Ok(ids) => ids,
                Err(err) => {
                    result = Err(err);
                    break;
                }
            };
            let first_rank = self.next_rank(e.target, ids.len());
            let added = self
                .builder
                .add_children_syms(parent, subsystem, &siblings, ids, first_rank);
            if self.templates[e.target].outside {
                for v in added.clone() {
                    self.builder.mark_outside_containment(VertexId(v));
                }
            }
            if let Some(p) = parents.get_mut(added.start as usize..added.end as usize) {
                p.fill(parent.0);
            }
            self.generated[e.target].extend(added.map(VertexId));
        }
        if self.track_parents {
            self.parents.insert(subsystem, parents);
        }
        self.generated[e.source] = sources;
        result
    }

    fn associate(&mut self, index: usize) -> Result<(), ReadError> {
        let e = &self.recipe.edges[index];
        let EdgeSyms {
            e_subsystem,
            as_tgt_subsystem,
        } = self.edges[index];
        let kind = self.templates[e.target].siblings.kind;
        let candidates: Vec<VertexId> = (0..self.builder.len() as u32)
            .map(VertexId)
            .filter(|&v| self.builder.vertex_kind(v) == kind)
            .filter(|&v| self.path(v, as_tgt_subsystem).is_some())
            .collect();
        let sources = self.generated[e.source].clone();
        let pairs: Vec<(VertexId, VertexId)> = if e.gen_method == GenMethod::AssociateIn {
            let count = sources.len().saturating_mul(candidates.len());
            self.charge(e, count)?;
            sources
                .iter()
                .flat_map(|&s| candidates.iter().map(move |&c| (s, c)))
                .filter(|(s, c)| s != c)
                .collect()
        } else {
            let mut by_prefix: HashMap<String, Vec<VertexId>> = HashMap::new();
            for &c in &candidates {
                if let Some(p) = self.path_prefix(c, as_tgt_subsystem, e.as_tgt_uplvl) {
                    by_prefix.entry(p).or_default().push(c);
                }
            }
            let mut pairs = Vec::new();
            for &s in &sources {
                let Some(p) = self.path_prefix(s, as_tgt_subsystem, e.as_src_uplvl) else {
                    continue;
                };
                let matched = by_prefix.get(&p).map_or(&[][..], Vec::as_slice);
                self.charge(e, matched.len())?;
                pairs.extend(matched.iter().filter(|&&c| c != s).map(|&c| (s, c)));
            }
            pairs
        };
        let mut seen = vec![false; self.builder.len()];
        for &v in &self.generated[e.target] {
            seen[v.index()] = true;
        }
        for (s, c) in pairs {
            self.link(s, c, e_subsystem);
            if !seen[c.index()] {
                seen[c.index()] = true;
                self.generated[e.target].push(c);
            }
        }
        Ok(())
    }

    /// Counts association edges against [`ASSOCIATE_EDGES_MAX`].
    fn charge(&mut self, e: &RecipeEdge, count: usize) -> Result<(), ReadError> {
        self.associate_edges = self.associate_edges.saturating_add(count);
        if self.associate_edges > ASSOCIATE_EDGES_MAX {
            let what = format!("edge {:?}: associations", e.name);
            return Err(ReadError::limit(
                Location::Line(e.line),
                what,
                ASSOCIATE_EDGES_MAX,
            ));
        }
        Ok(())
    }

    /// Names from the root of `subsystem` down to `v`, or `None` if `v` is not a member.
    fn path(&self, v: VertexId, subsystem: Sym) -> Option<Vec<&str>> {
        let root = *self.roots.get(&subsystem)?;
        let parents = self.parents.get(&subsystem);
        let mut names = Vec::new();
        let mut cur = v;
        loop {
            names.push(self.builder.vertex_name(cur));
            if cur == root {
                break;
            }
            let p = parents
                .and_then(|p| p.get(cur.index()))
                .copied()
                .unwrap_or(u32::MAX);
            if p == u32::MAX || names.len() > self.builder.len() {
                return None;
            }
            cur = VertexId(p);
        }
        names.reverse();
        Some(names)
    }

    /// The path of `v` in `subsystem` without its last `uplvl` components, as `/a/b`.
    fn path_prefix(&self, v: VertexId, subsystem: Sym, uplvl: i64) -> Option<String> {
        let names = self.path(v, subsystem)?;
        let keep = names.len().checked_sub(usize::try_from(uplvl).ok()?)?;
        if keep == 0 {
            return None;
        }
        Some(
            names[..keep]
                .iter()
                .fold(String::new(), |acc, n| acc + "/" + n),
        )
    }
}
