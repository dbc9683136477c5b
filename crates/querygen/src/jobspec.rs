//! Random jobspecs shaped after a generated graph: a chain of the graph's levels
//! (cluster, rack, node, socket), a slot inserted at some level, cores, gpus and memory at
//! the bottom; counts that mostly fit and sometimes do not, count ranges, `exclusive`
//! flags, or-slots and `xor_slot` alternatives (for `-T flexible`), version 1 and 9999.
//!
//! Each jobspec comes with the features it exercises, so the runner can report agreement
//! per feature.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use rand::Rng;
use rand::seq::IndexedRandom;
use rand_chacha::ChaCha8Rng;

use crate::graph::Template;

/// A resource count: fixed, or a range with Fluxion's optional operator and operand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Count {
    Fixed(i64),
    Range {
        min: i64,
        max: Option<i64>,
        operator: Option<&'static str>,
        operand: Option<i64>,
    },
}

/// One entry of `resources` (or of a `with`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub ty: String,
    pub count: Count,
    pub exclusive: Option<bool>,
    pub label: Option<String>,
    pub with: Vec<Request>,
}

/// A generated jobspec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Jobspec {
    pub version: u32,
    pub resources: Vec<Request>,
    pub duration: Option<u64>,
    pub queue: Option<&'static str>,
    /// The slot label the task names.
    pub task_slot: String,
}

/// Features of a jobspec (names used in reports).
pub type Features = BTreeSet<&'static str>;

fn req(ty: &str, count: Count) -> Request {
    Request {
        ty: ty.to_string(),
        count,
        exclusive: None,
        label: None,
        with: Vec::new(),
    }
}

/// The templates from the root down to a random template that holds cores.
fn random_chain<'a>(rng: &mut ChaCha8Rng, root: &'a Template) -> Vec<&'a Template> {
    let mut chains = Vec::new();
    let mut stack = vec![vec![root]];
    while let Some(chain) = stack.pop() {
        let last = chain[chain.len() - 1];
        if last.children.iter().any(|c| c.ty == "core") {
            chains.push(chain.clone());
        }
        for c in &last.children {
            if !c.children.is_empty() {
                let mut next = chain.clone();
                next.push(c);
                stack.push(next);
            }
        }
    }
    chains.choose(rng).cloned().unwrap_or_else(|| vec![root])
}

/// A count near `avail` (copies available per parent): mostly within, sometimes above, and
/// sometimes a range.
fn count(rng: &mut ChaCha8Rng, avail: i64, f: &mut Features) -> Count {
    let avail = avail.max(1);
    let mut n = rng.random_range(1..=avail);
    if rng.random_bool(0.25) {
        n = 1;
    }
    if rng.random_bool(0.04) {
        n = avail + rng.random_range(1..=3);
        f.insert("over-count");
    }
    if rng.random_bool(0.08) {
        f.insert("range");
        let max = n + rng.random_range(0..=avail);
        // Fluxion wants all or none of max, operator and operand; the rare `{min, max}`
        // checks that both refuse it the same way.
        return match rng.random_range(0..10) {
            0..=2 => Count::Range {
                min: n,
                max: None,
                operator: None,
                operand: None,
            },
            3 => {
                f.insert("bad-range");
                Count::Range {
                    min: n,
                    max: Some(max),
                    operator: None,
                    operand: None,
                }
            }
            4..=6 => Count::Range {
                min: n,
                max: Some(max),
                operator: Some("+"),
                operand: Some(1),
            },
            _ => Count::Range {
                min: n,
                max: Some(max.max(2 * n)),
                operator: Some("*"),
                operand: Some(2),
            },
        };
    }
    Count::Fixed(n)
}

/// The bottom of a request: what a slot (or the last level) holds, from the container's
/// leaf templates (cores always; gpus, memory, ssd sometimes).
fn leaves(rng: &mut ChaCha8Rng, container: &Template, f: &mut Features) -> Vec<Request> {
    let mut out = Vec::new();
    let leaf = |ty: &str| container.children.iter().find(|c| c.ty == ty);
    if let Some(core) = leaf("core") {
        out.push(req("core", count(rng, core.edge.scale, f)));
    }
    match leaf("gpu") {
        Some(g) if rng.random_bool(0.35) => {
            f.insert("gpu");
            out.push(req("gpu", count(rng, g.edge.scale, f)));
        }
        None if rng.random_bool(0.03) => {
            f.insert("gpu-absent");
            out.push(req("gpu", Count::Fixed(1)));
        }
        _ => {}
    }
    if let Some(m) = leaf("memory")
        && rng.random_bool(0.35)
    {
        f.insert("memory");
        out.push(req("memory", count(rng, m.edge.scale * m.size, f)));
    }
    if rng.random_bool(0.2) && out.len() > 1 {
        out.reverse();
    }
    out
}

/// Slots holding `members`: one slot, or (with `alternatives`, sometimes) or-slots /
/// `xor_slot` alternatives with different members.
fn slots(
    rng: &mut ChaCha8Rng,
    container: &Template,
    members: Vec<Request>,
    alternatives: bool,
    f: &mut Features,
) -> (Vec<Request>, String) {
    let label = ["default", "task", "corelevel"]
        .choose(rng)
        .copied()
        .unwrap_or("default")
        .to_string();
    let mut first = req("slot", count(rng, 2, f));
    first.label = Some(label.clone());
    first.with = members;
    let kind = rng.random_range(0..100);
    if !alternatives || kind >= 40 {
        return (vec![first], label);
    }
    let xor = kind < 18;
    f.insert(if xor { "xor-slots" } else { "or-slots" });
    let mut out = vec![first];
    for k in 1..rng.random_range(2..=3) {
        let mut s = req("slot", count(rng, 2, f));
        s.label = Some(if xor && rng.random_bool(0.5) {
            label.clone()
        } else {
            format!("{label}{k}")
        });
        s.with = leaves(rng, container, f);
        out.push(s);
    }
    if xor {
        for s in &mut out {
            s.ty = "xor_slot".to_string();
        }
    }
    (out, label)
}

/// A random jobspec for the graph whose recipe is `root`; `extended` allows the flexible
/// traverser's or-slots and `xor_slot`s.
pub fn random_jobspec(
    rng: &mut ChaCha8Rng,
    root: &Template,
    extended: bool,
) -> (Jobspec, Features) {
    let mut f = Features::new();
    let mut chain = random_chain(rng, root);
    let container = chain[chain.len() - 1];
    // Where the request starts: the node level most often.
    let node_at = chain.iter().position(|t| t.ty == "node");
    let start = match node_at {
        Some(n) if rng.random_bool(0.5) => n,
        _ => rng.random_range(0..chain.len()),
    };
    chain.drain(..start);
    if chain.len() > 2 && rng.random_bool(0.05) {
        f.insert("skip-level");
        let k = rng.random_range(1..chain.len() - 1);
        chain.remove(k);
    }
    // The slot goes right above chain[slot_at] (slot_at == len: around the leaves).
    let no_slot = rng.random_bool(0.06);
    let slot_at = if rng.random_bool(0.6) {
        chain.len()
    } else {
        rng.random_range(0..=chain.len())
    };
    if no_slot {
        f.insert("no-slot");
    }
    let mut inner = leaves(rng, container, &mut f);
    let mut task_slot = "default".to_string();
    for k in (0..=chain.len()).rev() {
        if k == slot_at && !no_slot {
            let (s, label) = slots(rng, container, inner, extended, &mut f);
            inner = s;
            task_slot = label;
        }
        if k == 0 {
            break;
        }
        let t = chain[k - 1];
        let avail = if k == 1 {
            // The top level counts copies in the whole graph.
            total_copies(root, t)
        } else {
            t.edge.scale
        };
        let mut r = req(t.ty, count(rng, avail, &mut f));
        if rng.random_bool(0.15) {
            f.insert("exclusive");
            r.exclusive = Some(true);
        } else if rng.random_bool(0.03) {
            r.exclusive = Some(false);
        }
        r.with = inner;
        inner = vec![r];
    }
    // Error paths, rarely: Fluxion refuses siblings of one type and unknown types.
    if rng.random_bool(0.015) && !inner.is_empty() {
        f.insert("same-type-siblings");
        let again = inner[0].clone();
        inner.push(again);
    }
    if rng.random_bool(0.01) {
        f.insert("unknown-type");
        inner[0].with.push(req("bb", Count::Fixed(1)));
    }
    let version = if rng.random_bool(0.25) { 1 } else { 9999 };
    f.insert(if version == 1 { "v1" } else { "v9999" });
    let duration = if rng.random_bool(0.03) {
        f.insert("no-duration");
        None
    } else {
        [60, 1800, 3600, 3600, 7200, 57600].choose(rng).copied()
    };
    let queue = if rng.random_bool(0.04) {
        f.insert("queue");
        ["debug", "batch"].choose(rng).copied()
    } else {
        None
    };
    let js = Jobspec {
        version,
        resources: inner,
        duration,
        queue,
        task_slot,
    };
    (js, f)
}

/// How many vertices of template `t` the expanded graph has.
fn total_copies(root: &Template, t: &Template) -> i64 {
    fn walk(node: &Template, t: &Template, above: i64) -> Option<i64> {
        let here = above * node.edge.scale;
        if std::ptr::eq(node, t) {
            return Some(here);
        }
        node.children.iter().find_map(|c| walk(c, t, here))
    }
    // The root's own edge scale is not a multiplier.
    if std::ptr::eq(root, t) {
        return 1;
    }
    root.children
        .iter()
        .find_map(|c| walk(c, t, 1))
        .unwrap_or(1)
}

impl Jobspec {
    /// The jobspec as YAML, in the block style of Fluxion's test jobspecs.
    pub fn to_yaml(&self) -> String {
        let mut s = format!("version: {}\nresources:\n", self.version);
        for r in &self.resources {
            write_request(&mut s, r, 1);
        }
        let _ = write!(
            s,
            "tasks:\n  - command: [ \"app\" ]\n    slot: {}\n    count:\n      per_slot: 1\n",
            self.task_slot
        );
        // Fluxion requires `attributes`, even empty.
        if self.duration.is_none() && self.queue.is_none() {
            s.push_str("attributes:\n  system: {}\n");
            return s;
        }
        s.push_str("attributes:\n  system:\n");
        if let Some(d) = self.duration {
            let _ = writeln!(s, "    duration: {d}");
        }
        if let Some(q) = self.queue {
            let _ = writeln!(s, "    queue: {q}");
        }
        s
    }
}

fn write_request(s: &mut String, r: &Request, depth: usize) {
    let pad = "  ".repeat(depth);
    let _ = writeln!(s, "{pad}- type: {}", r.ty);
    match &r.count {
        Count::Fixed(n) => {
            let _ = writeln!(s, "{pad}  count: {n}");
        }
        Count::Range {
            min,
            max,
            operator,
            operand,
        } => {
            let _ = writeln!(s, "{pad}  count:\n{pad}    min: {min}");
            if let Some(m) = max {
                let _ = writeln!(s, "{pad}    max: {m}");
            }
            if let Some(o) = operator {
                let _ = writeln!(s, "{pad}    operator: \"{o}\"");
            }
            if let Some(o) = operand {
                let _ = writeln!(s, "{pad}    operand: {o}");
            }
        }
    }
    if let Some(x) = r.exclusive {
        let _ = writeln!(s, "{pad}  exclusive: {x}");
    }
    if let Some(l) = &r.label {
        let _ = writeln!(s, "{pad}  label: {l}");
    }
    if !r.with.is_empty() {
        let _ = writeln!(s, "{pad}  with:");
        for w in &r.with {
            write_request(s, w, depth + 2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::random_graph;
    use rand::SeedableRng;

    #[test]
    fn jobspecs_are_yaml_with_a_slot_or_say_they_have_none() {
        for seed in 0..200 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let g = random_graph(&mut rng);
            let (js, f) = random_jobspec(&mut rng, &g.root, seed % 2 == 0);
            let yaml = js.to_yaml();
            assert!(yaml.starts_with("version: "), "{yaml}");
            let has_slot = yaml.contains("type: slot") || yaml.contains("type: xor_slot");
            assert_eq!(has_slot, !f.contains("no-slot"), "seed {seed}:\n{yaml}");
            assert!(yaml.contains("type: core"), "seed {seed}:\n{yaml}");
        }
    }
}
