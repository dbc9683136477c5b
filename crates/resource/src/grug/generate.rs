//! Recipe → graph: Fluxion's `resource_gen` depth-first emitter, step for step.
//!
//! The rules are documented on the [`grug`](super) module.
//!
//! Vertices of templates outside the containment subsystem are marked outside containment.

use std::collections::HashMap;

use super::recipe::{GenMethod, Recipe, RecipeEdge, Template};
use crate::error::{GRAPH_VERTICES_MAX, Location, ReadError};
use crate::graph::{CONTAINMENT, GraphBuilder, ResourceGraph, VertexId, VertexSpec};

/// The most edges an `ASSOCIATE_*` rule may create (an all-to-all association grows as the
/// product of its two sides).
const ASSOCIATE_EDGES_MAX: usize = 2 * GRAPH_VERTICES_MAX;

/// Generates the graph a recipe describes.
pub(super) fn generate(recipe: &Recipe) -> Result<ResourceGraph, ReadError> {
    let n = recipe.templates.len();
    let mut out_edges: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, e) in recipe.edges.iter().enumerate() {
        out_edges[e.source].push(i);
    }
    let mut g = Generator {
        recipe,
        builder: GraphBuilder::new(),
        generated: vec![Vec::new(); n],
        scales: Vec::new(),
        parents: HashMap::new(),
        roots: HashMap::new(),
        associate_edges: 0,
    };
    let containment_root = recipe
        .templates
        .iter()
        .position(|t| t.root && t.subsystem == CONTAINMENT);
    let mut discovered = vec![false; n];
    for start in containment_root.into_iter().chain(0..n) {
        if discovered[start] {
            continue;
        }
        // Iterative DFS: (template, index of its next out-edge).
        discovered[start] = true;
        g.discover(start);
        let mut stack = vec![(start, 0usize)];
        while let Some(top) = stack.last_mut() {
            let (u, k) = *top;
            if let Some(&e) = out_edges[u].get(k) {
                top.1 += 1;
                let v = recipe.edges[e].target;
                if !discovered[v] {
                    g.tree_edge(&recipe.edges[e])?;
                    discovered[v] = true;
                    g.discover(v);
                    stack.push((v, 0));
                }
            } else {
                stack.pop();
                g.scales.pop();
            }
        }
    }
    Ok(g.builder.finish()?)
}

struct Generator<'r> {
    recipe: &'r Recipe,
    builder: GraphBuilder,
    /// Vertices generated from (or associated with) each template, in order.
    generated: Vec<Vec<VertexId>>,
    /// `multi_scale` of each tree edge on the DFS path, innermost last.
    scales: Vec<i64>,
    /// Per subsystem: the parent of each vertex (`u32::MAX` for none), grown on demand.
    parents: HashMap<String, Vec<u32>>,
    /// Per subsystem: its root vertex.
    roots: HashMap<String, VertexId>,
    associate_edges: usize,
}

impl Generator<'_> {
    fn discover(&mut self, t: usize) {
        let template = &self.recipe.templates[t];
        if !template.root || self.roots.contains_key(&template.subsystem) {
            return;
        }
        let v = self.emit(template, 0);
        self.roots.insert(template.subsystem.clone(), v);
        self.generated[t].push(v);
    }

    fn emit(&mut self, template: &Template, id: i64) -> VertexId {
        let mut spec = VertexSpec::new(&template.kind, &template.basename, id);
        spec.size = template.size;
        spec.unit.clone_from(&template.unit);
        let v = self.builder.add_vertex(spec);
        if template.subsystem != CONTAINMENT {
            self.builder.mark_outside_containment(v);
        }
        v
    }

    fn link(&mut self, parent: VertexId, child: VertexId, subsystem: &str) {
        self.builder.add_edge(parent, child, subsystem);
        let parents = self.parents.entry(subsystem.to_string()).or_default();
        if parents.len() <= child.index() {
            parents.resize(child.index() + 1, u32::MAX);
        }
        if parents[child.index()] == u32::MAX {
            parents[child.index()] = parent.0;
        }
    }

    fn tree_edge(&mut self, e: &RecipeEdge) -> Result<(), ReadError> {
        match e.gen_method {
            GenMethod::Multiply => self.multiply(e)?,
            GenMethod::AssociateIn | GenMethod::AssociateByPathIn => self.associate(e)?,
        }
        self.scales.push(e.multi_scale);
        Ok(())
    }

    fn multiply(&mut self, e: &RecipeEdge) -> Result<(), ReadError> {
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
        let template = &self.recipe.templates[e.target];
        let mut result = Ok(());
        'outer: for (j, &parent) in sources.iter().enumerate() {
            for i in 0..e.multi_scale {
                let id = match self.gen_id(e, i, j as i64) {
                    Ok(id) => id,
                    Err(err) => {
                        result = Err(err);
                        break 'outer;
                    }
                };
                let v = self.emit(template, id);
                self.link(parent, v, &e.e_subsystem);
                self.generated[e.target].push(v);
            }
        }
        self.generated[e.source] = sources;
        result
    }

    /// Fluxion's `gen_id`: the id of the `i`-th child of the `j`-th source vertex.
    fn gen_id(&self, e: &RecipeEdge, i: i64, j: i64) -> Result<i64, ReadError> {
        let overflow = || {
            let msg = format!("edge {:?}: the generated id overflows", e.name);
            ReadError::invalid(Location::Line(e.line), msg)
        };
        if e.id_scope < 0 {
            return Ok(-1);
        }
        let step = i.checked_mul(e.id_stride).ok_or_else(overflow)?;
        if e.id_scope == 0 {
            return e.id_start.checked_add(step).ok_or_else(overflow);
        }
        let scope = usize::try_from(e.id_scope)
            .unwrap_or(usize::MAX)
            .min(self.scales.len());
        let mut wrap: i64 = 1;
        for s in self.scales.iter().rev().take(scope) {
            wrap = wrap.checked_mul(*s).ok_or_else(overflow)?;
        }
        let block = match wrap {
            0 => 0,
            w => j % w,
        };
        let base = block
            .checked_mul(e.multi_scale)
            .and_then(|b| b.checked_mul(e.id_stride))
            .ok_or_else(overflow)?;
        e.id_start
            .checked_add(base)
            .and_then(|b| b.checked_add(step))
            .ok_or_else(overflow)
    }

    fn associate(&mut self, e: &RecipeEdge) -> Result<(), ReadError> {
        let kind = &self.recipe.templates[e.target].kind;
        let candidates: Vec<VertexId> = (0..self.builder.len() as u32)
            .map(VertexId)
            .filter(|&v| self.builder.vertex(v).kind == *kind)
            .filter(|&v| self.path(v, &e.as_tgt_subsystem).is_some())
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
                if let Some(p) = self.path_prefix(c, &e.as_tgt_subsystem, e.as_tgt_uplvl) {
                    by_prefix.entry(p).or_default().push(c);
                }
            }
            let mut pairs = Vec::new();
            for &s in &sources {
                let Some(p) = self.path_prefix(s, &e.as_tgt_subsystem, e.as_src_uplvl) else {
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
            self.link(s, c, &e.e_subsystem);
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
    fn path(&self, v: VertexId, subsystem: &str) -> Option<Vec<String>> {
        let root = *self.roots.get(subsystem)?;
        let parents = self.parents.get(subsystem);
        let mut names = Vec::new();
        let mut cur = v;
        loop {
            let spec = self.builder.vertex(cur);
            names.push(
                spec.name
                    .clone()
                    .unwrap_or_else(|| format!("{}{}", spec.basename, spec.id)),
            );
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
    fn path_prefix(&self, v: VertexId, subsystem: &str, uplvl: i64) -> Option<String> {
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
