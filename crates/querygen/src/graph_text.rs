//! The text forms of a generated graph: its recipe as GRUG GraphML, and its expansion as
//! JGF (the same vertices, names, ids and ranks Fluxion's GRUG reader would make).

use std::fmt::Write as _;

use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde_json::json;

use crate::graph::{Graph, Template};

/// The GraphML key declarations every recipe starts with (as Fluxion's own recipes).
const GRUG_KEYS: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
    <key id="root" for="node" attr.name="root" attr.type="int"><default>0</default></key>
    <key id="type" for="node" attr.name="type" attr.type="string"/>
    <key id="basename" for="node" attr.name="basename" attr.type="string"/>
    <key id="unit" for="node" attr.name="unit" attr.type="string"/>
    <key id="size" for="node" attr.name="size" attr.type="long"><default>1</default></key>
    <key id="subsystem" for="node" attr.name="subsystem" attr.type="string"><default>containment</default></key>
    <key id="e_subsystem" for="edge" attr.name="e_subsystem" attr.type="string"><default>containment</default></key>
    <key id="relation" for="edge" attr.name="relation" attr.type="string"><default>contains</default></key>
    <key id="rrelation" for="edge" attr.name="rrelation" attr.type="string"><default>in</default></key>
    <key id="id_scope" for="edge" attr.name="id_scope" attr.type="int"><default>0</default></key>
    <key id="id_start" for="edge" attr.name="id_start" attr.type="int"><default>0</default></key>
    <key id="id_stride" for="edge" attr.name="id_stride" attr.type="int"><default>1</default></key>
    <key id="gen_method" for="edge" attr.name="gen_method" attr.type="string"><default>MULTIPLY</default></key>
    <key id="multi_scale" for="edge" attr.name="multi_scale" attr.type="int"><default>1</default></key>
    <key id="as_tgt_subsystem" for="edge" attr.name="as_tgt_subsystem" attr.type="string"><default>containment</default></key>
    <key id="as_tgt_uplvl" for="edge" attr.name="as_tgt_uplvl" attr.type="int"><default>1</default></key>
    <key id="as_src_uplvl" for="edge" attr.name="as_src_uplvl" attr.type="int"><default>1</default></key>
"#;

impl Graph {
    /// The recipe as GRUG GraphML.
    pub fn to_grug(&self) -> String {
        let mut templates = Vec::new();
        let mut edges = Vec::new();
        collect(&self.root, None, &mut templates, &mut edges);
        let mut s = String::from(GRUG_KEYS);
        let _ = writeln!(
            s,
            "    <graph id=\"{}\" edgedefault=\"directed\">",
            self.name
        );
        for (i, t) in templates.iter().enumerate() {
            let _ = writeln!(s, "        <node id=\"{}\">", t.key);
            if i == 0 {
                s.push_str("            <data key=\"root\">1</data>\n");
            }
            let _ = writeln!(s, "            <data key=\"type\">{}</data>", t.ty);
            let _ = writeln!(
                s,
                "            <data key=\"basename\">{}</data>",
                t.basename
            );
            if t.size != 1 {
                let _ = writeln!(s, "            <data key=\"size\">{}</data>", t.size);
            }
            if !t.unit.is_empty() {
                let _ = writeln!(s, "            <data key=\"unit\">{}</data>", t.unit);
            }
            s.push_str("        </node>\n");
        }
        for (parent, child) in edges {
            let e = &child.edge;
            let _ = writeln!(
                s,
                "        <edge id=\"{parent}2{}\" source=\"{parent}\" target=\"{}\">",
                child.key, child.key
            );
            if e.id_scope != 0 {
                let _ = writeln!(
                    s,
                    "            <data key=\"id_scope\">{}</data>",
                    e.id_scope
                );
            }
            if e.id_start != 0 {
                let _ = writeln!(
                    s,
                    "            <data key=\"id_start\">{}</data>",
                    e.id_start
                );
            }
            if e.id_stride != 1 {
                let _ = writeln!(
                    s,
                    "            <data key=\"id_stride\">{}</data>",
                    e.id_stride
                );
            }
            let _ = writeln!(
                s,
                "            <data key=\"multi_scale\">{}</data>",
                e.scale
            );
            s.push_str("        </edge>\n");
        }
        s.push_str("    </graph>\n</graphml>\n");
        s
    }

    /// The expanded graph as JGF. `shuffle_edges` lists edges in a random order (graph
    /// order is the order of the edge list) and `shuffle_ranks` gives nodes permuted ranks.
    pub fn to_jgf(&self, rng: &mut ChaCha8Rng, shuffle_edges: bool, shuffle_ranks: bool) -> String {
        let mut ranks: Vec<i64> = self
            .vertices
            .iter()
            .filter(|v| v.rank >= 0)
            .map(|v| v.rank)
            .collect();
        if shuffle_ranks {
            ranks.shuffle(rng);
        }
        let mut next_rank = ranks.into_iter();
        let nodes: Vec<serde_json::Value> = self
            .vertices
            .iter()
            .map(|v| {
                let rank = if v.rank >= 0 {
                    next_rank.next().unwrap_or(v.rank)
                } else {
                    -1
                };
                json!({
                    "id": v.uniq_id.to_string(),
                    "metadata": {
                        "type": v.ty,
                        "basename": v.basename,
                        "name": v.name,
                        "id": v.id,
                        "uniq_id": v.uniq_id,
                        "rank": rank,
                        "exclusive": false,
                        "unit": v.unit,
                        "size": v.size,
                        "paths": {"containment": v.path},
                    }
                })
            })
            .collect();
        let mut edges: Vec<serde_json::Value> = self
            .vertices
            .iter()
            .filter_map(|v| {
                v.parent.map(|p| {
                    json!({
                        "source": p.to_string(),
                        "target": v.uniq_id.to_string(),
                        "metadata": {"subsystem": "containment"},
                    })
                })
            })
            .collect();
        if shuffle_edges {
            edges.shuffle(rng);
        }
        let doc = json!({"graph": {"nodes": nodes, "edges": edges}});
        let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        text.push('\n');
        text
    }

    /// A JGF R holding vertex `top` and everything below it exclusively, with its ancestors
    /// shared, with the vertices and fields Fluxion's `jgf` writer gives a match that took
    /// `top` whole (children before parents; `basename` and `name` only where they differ
    /// from what the type and id give, `size` where not 1; each vertex's keys in JSON's
    /// order, which readers ignore): what `update … jgf FILE` reads back.
    pub fn subtree_r_jgf(&self, top: usize) -> String {
        let mut inside = vec![false; self.vertices.len()];
        inside[top] = true;
        for (i, v) in self.vertices.iter().enumerate() {
            // Creation order puts parents before children.
            if let Some(p) = v.parent {
                inside[i] |= inside[p];
            }
        }
        // Post-order of the subtree, then the ancestors upwards.
        let mut order = Vec::new();
        self.post_order(top, &inside, &mut order);
        order.extend(std::iter::successors(self.vertices[top].parent, |&p| {
            self.vertices[p].parent
        }));
        let nodes: Vec<serde_json::Value> = order
            .iter()
            .map(|&i| {
                let v = &self.vertices[i];
                let mut m = serde_json::Map::new();
                m.insert("type".into(), json!(v.ty));
                if v.basename != v.ty {
                    m.insert("basename".into(), json!(v.basename));
                }
                if v.name != format!("{}{}", v.basename, v.id) {
                    m.insert("name".into(), json!(v.name));
                }
                m.insert("id".into(), json!(v.id));
                m.insert("rank".into(), json!(v.rank));
                if !v.unit.is_empty() {
                    m.insert("unit".into(), json!(v.unit));
                }
                if inside[i] {
                    m.insert("exclusive".into(), json!(true));
                    if v.size != 1 {
                        m.insert("size".into(), json!(v.size));
                    }
                }
                m.insert("paths".into(), json!({"containment": v.path}));
                json!({"id": v.uniq_id.to_string(), "metadata": m})
            })
            .collect();
        let edges: Vec<serde_json::Value> = order
            .iter()
            .filter_map(|&i| {
                let v = &self.vertices[i];
                v.parent.map(|p| {
                    json!({"source": self.vertices[p].uniq_id.to_string(),
                           "target": v.uniq_id.to_string()})
                })
            })
            .collect();
        let mut text = json!({"graph": {"nodes": nodes, "edges": edges}}).to_string();
        text.push('\n');
        text
    }

    fn post_order(&self, at: usize, inside: &[bool], out: &mut Vec<usize>) {
        for (i, v) in self.vertices.iter().enumerate() {
            if v.parent == Some(at) && inside[i] {
                self.post_order(i, inside, out);
            }
        }
        out.push(at);
    }

    /// Paths of the vertices of type `ty`, in creation order.
    pub fn paths_of(&self, ty: &str) -> Vec<&str> {
        self.vertices
            .iter()
            .filter(|v| v.ty == ty)
            .map(|v| v.path.as_str())
            .collect()
    }

    /// Names of the vertices of type `ty`, in creation order.
    pub fn names_of(&self, ty: &str) -> Vec<&str> {
        self.vertices
            .iter()
            .filter(|v| v.ty == ty)
            .map(|v| v.name.as_str())
            .collect()
    }
}

/// Templates in pre-order and the (parent key, child) recipe edges in the same order.
fn collect<'a>(
    t: &'a Template,
    parent: Option<&'a str>,
    templates: &mut Vec<&'a Template>,
    edges: &mut Vec<(&'a str, &'a Template)>,
) {
    templates.push(t);
    if let Some(p) = parent {
        edges.push((p, t));
    }
    for c in &t.children {
        collect(c, Some(&t.key), templates, edges);
    }
}
