//! Generators and independent oracles for the matcher's property tests.
//!
//! - [`GraphShape`]: a random containment tree (cluster → racks → nodes → sockets → cores,
//!   gpus, memory pools), built with [`GraphBuilder`].
//! - [`JobShape`]: a random general-form jobspec (version 9999) in one of the shapes Fluxion's
//!   tests use, sometimes with an RFC 31 constraint, rendered as YAML or JSON text and read
//!   back with `shardsched_jobspec::parse`. Sibling requests never share a type: Fluxion gives
//!   `[slot[1]→core[1], slot[1]→core[1]]` a single core (its `flexible/test008` expects
//!   exactly that), so the count oracle would not apply to them.
//! - Oracles that know nothing of traversals: over-commit and closure checks, per-type count
//!   checks, constraints evaluated from RFC 31, the writers' output against the allocation,
//!   and a rebuild of the calendars from the live jobs.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use proptest::prelude::*;
use shardsched_jobspec::{Constraint, Jobspec};
use shardsched_matcher::{Allocation, Matcher, PLAN_BASE, PLAN_HORIZON, PruneFilters, SchedState};
use shardsched_resource::{CONTAINMENT, GraphBuilder, ResourceGraph, Status, VertexId, VertexSpec};

// ---------------------------------------------------------------------------------------------
// Graphs

/// One socket: its cores, gpus and memory pools (sizes in GB).
#[derive(Clone, Debug)]
pub struct SocketShape {
    pub cores: u8,
    pub gpus: u8,
    pub mems: Vec<i64>,
}

/// One node: its sockets, and whether it has the properties `ssd` and `big`.
#[derive(Clone, Debug)]
pub struct NodeShape {
    pub sockets: Vec<SocketShape>,
    pub ssd: bool,
    pub big: bool,
}

/// cluster → racks → nodes → sockets; without racks the nodes hang from the cluster.
#[derive(Clone, Debug)]
pub struct GraphShape {
    pub racks: Vec<Vec<NodeShape>>,
    pub no_racks: bool,
}

/// cluster → 1–3 racks → 1–4 nodes → 1–2 sockets → 1–4 cores, 0–1 gpu, 0–2 memory of 1–4;
/// one graph in eight has no racks.
pub fn graph_shape() -> impl Strategy<Value = GraphShape> {
    let socket = (1..=4u8, 0..=1u8, proptest::collection::vec(1..=4i64, 0..=2))
        .prop_map(|(cores, gpus, mems)| SocketShape { cores, gpus, mems });
    let node =
        (proptest::collection::vec(socket, 1..=2), 0..4u8).prop_map(|(sockets, p)| NodeShape {
            sockets,
            ssd: p & 1 != 0,
            big: p & 2 != 0,
        });
    let rack = proptest::collection::vec(node, 1..=4);
    (proptest::collection::vec(rack, 1..=3), 0..8u8).prop_map(|(racks, r)| GraphShape {
        racks,
        no_racks: r == 0,
    })
}

impl GraphShape {
    /// Builds the graph. Nodes are numbered across the cluster and carry their rank; sockets,
    /// cores, gpus and memory are numbered per node (GRUG's `id_scope = 1`).
    pub fn build(&self) -> ResourceGraph {
        let mut b = GraphBuilder::new();
        let cluster = b.add_vertex(VertexSpec::new("cluster", "cluster", 0));
        let mut node_id = 0i64;
        for (ri, rack) in self.racks.iter().enumerate() {
            let r = if self.no_racks {
                cluster
            } else {
                let r = b.add_vertex(VertexSpec::new("rack", "rack", ri as i64));
                b.add_edge(cluster, r, CONTAINMENT);
                r
            };
            for node in rack {
                let mut spec = VertexSpec::new("node", "node", node_id);
                spec.rank = node_id;
                for (has, p) in [(node.ssd, "ssd"), (node.big, "big")] {
                    if has {
                        spec.properties.insert(p.into(), String::new());
                    }
                }
                let n = b.add_vertex(spec);
                b.add_edge(r, n, CONTAINMENT);
                let (mut core_id, mut gpu_id, mut mem_id) = (0i64, 0i64, 0i64);
                for (si, socket) in node.sockets.iter().enumerate() {
                    let add = |b: &mut GraphBuilder, parent, mut spec: VertexSpec| {
                        spec.rank = node_id;
                        let v = b.add_vertex(spec);
                        b.add_edge(parent, v, CONTAINMENT);
                        v
                    };
                    let s = add(&mut b, n, VertexSpec::new("socket", "socket", si as i64));
                    for _ in 0..socket.cores {
                        add(&mut b, s, VertexSpec::new("core", "core", core_id));
                        core_id += 1;
                    }
                    for _ in 0..socket.gpus {
                        add(&mut b, s, VertexSpec::new("gpu", "gpu", gpu_id));
                        gpu_id += 1;
                    }
                    for &size in &socket.mems {
                        let mut spec = VertexSpec::new("memory", "memory", mem_id);
                        spec.size = size;
                        spec.unit = "GB".into();
                        add(&mut b, s, spec);
                        mem_id += 1;
                    }
                }
                node_id += 1;
            }
        }
        b.finish().expect("a generated tree is a valid graph")
    }
}

// ---------------------------------------------------------------------------------------------
// Jobspecs

/// A count as a jobspec writes it.
#[derive(Clone, Copy, Debug)]
pub enum Cnt {
    Exact(u64),
    /// `{min, max, operator: '+', operand: 1}`.
    Range(u64, u64),
    /// `{min, max, operator: '*', operand: 2}`.
    Doubling(u64, u64),
}

impl Cnt {
    pub fn min(self) -> u64 {
        match self {
            Cnt::Exact(n) | Cnt::Range(n, _) | Cnt::Doubling(n, _) => n,
        }
    }

    fn range(self) -> Option<(u64, u64, &'static str, u64)> {
        match self {
            Cnt::Exact(_) => None,
            Cnt::Range(a, b) => Some((a, b, "+", 1)),
            Cnt::Doubling(a, b) => Some((a, b, "*", 2)),
        }
    }
}

/// One resource request.
#[derive(Clone, Debug)]
pub struct Req {
    pub kind: &'static str,
    pub count: Cnt,
    pub exclusive: Option<bool>,
    pub with: Vec<Req>,
}

impl Req {
    fn new(kind: &'static str, count: Cnt, with: Vec<Req>) -> Req {
        Req {
            kind,
            count,
            exclusive: None,
            with,
        }
    }
}

/// A jobspec: its resources, its duration (0 = no duration), its RFC 31 constraint, and
/// how to write it.
#[derive(Clone, Debug)]
pub struct JobShape {
    pub resources: Vec<Req>,
    pub duration: u64,
    pub constraint: Option<Constraint>,
    pub yaml: bool,
}

fn cnt(lo: u64, hi: u64) -> impl Strategy<Value = Cnt> {
    prop_oneof![
        6 => (lo..=hi).prop_map(Cnt::Exact),
        2 => (lo..=hi, 0..=2u64).prop_map(|(a, d)| Cnt::Range(a, a + d)),
        1 => (lo..=hi, 1..=3u64).prop_map(|(a, d)| Cnt::Doubling(a, a + d)),
    ]
}

/// Optional gpu and memory beside cores.
fn extras() -> impl Strategy<Value = Vec<Req>> {
    (any::<bool>(), proptest::option::of(1..=4u64)).prop_map(|(gpu, mem)| {
        let mut v = Vec::new();
        if gpu {
            v.push(Req::new("gpu", Cnt::Exact(1), vec![]));
        }
        if let Some(m) = mem {
            v.push(Req::new("memory", Cnt::Exact(m), vec![]));
        }
        v
    })
}

/// No `exclusive` key (mostly), or `true`, or `false`.
fn exclusive() -> impl Strategy<Value = Option<bool>> {
    prop_oneof![4 => Just(None), 1 => Just(Some(true)), 1 => Just(Some(false))]
}

/// slot[s] → core[c] (+ gpu, memory).
fn slot_of_cores() -> impl Strategy<Value = Req> {
    (cnt(1, 2), cnt(1, 3), extras(), 0..4u8).prop_map(|(s, c, ex, p)| {
        let mut with = vec![Req::new("core", c, vec![])];
        // Extras are rarer than plain cores.
        if p == 0 {
            with.extend(ex);
        }
        Req::new("slot", s, with)
    })
}

/// The resource part of a jobspec, in one of the usual shapes.
pub fn resources() -> impl Strategy<Value = Vec<Req>> {
    prop_oneof![
        // node[n] → slot[s] → core[c], the node maybe exclusive.
        (cnt(1, 3), slot_of_cores(), proptest::option::of(Just(true))).prop_map(|(n, s, x)| {
            let mut node = Req::new("node", n, vec![s]);
            node.exclusive = x;
            vec![node]
        }),
        // slot[s] → core[c].
        slot_of_cores().prop_map(|s| vec![s]),
        // node[n], exclusive.
        cnt(1, 3).prop_map(|n| {
            let mut node = Req::new("node", n, vec![]);
            node.exclusive = Some(true);
            vec![node]
        }),
        // socket[k] → core[c] (no slot: shared unless marked exclusive).
        (cnt(1, 2), cnt(1, 3), extras(), exclusive(), exclusive()).prop_map(
            |(k, c, ex, xs, xc)| {
                let mut core = Req::new("core", c, vec![]);
                core.exclusive = xc;
                let mut with = vec![core];
                with.extend(ex);
                let mut socket = Req::new("socket", k, with);
                socket.exclusive = xs;
                vec![socket]
            }
        ),
        // Two top-level requests of different types: an exclusive node and loose cores.
        (cnt(1, 2), cnt(1, 2)).prop_map(|(n, c)| {
            let mut node = Req::new("node", n, vec![]);
            node.exclusive = Some(true);
            vec![node, Req::new("core", c, vec![])]
        }),
        // cluster → rack → node[n] → slot[s] → socket → core[c].
        (cnt(1, 2), cnt(1, 2), cnt(1, 3)).prop_map(|(n, s, c)| {
            let socket = Req::new("socket", Cnt::Exact(1), vec![Req::new("core", c, vec![])]);
            let slot = Req::new("slot", s, vec![socket]);
            let node = Req::new("node", n, vec![slot]);
            let rack = Req::new("rack", Cnt::Exact(1), vec![node]);
            vec![Req::new("cluster", Cnt::Exact(1), vec![rack])]
        }),
        // slot[s] → node[1]: whole nodes through a slot.
        cnt(1, 3).prop_map(|s| vec![Req::new(
            "slot",
            s,
            vec![Req::new("node", Cnt::Exact(1), vec![])]
        )]),
        // node[n] → socket[1] → slot[s] → core[c].
        (cnt(1, 2), slot_of_cores()).prop_map(|(n, s)| {
            let socket = Req::new("socket", Cnt::Exact(1), vec![s]);
            vec![Req::new("node", n, vec![socket])]
        }),
        // core[c] alone (shared).
        cnt(1, 4).prop_map(|c| vec![Req::new("core", c, vec![])]),
    ]
}

/// An RFC 31 constraint on nodes: properties `ssd`/`big` (or `^`), hostlists and rank
/// sets over the first dozen nodes, and and/or/not of those.
pub fn constraint() -> impl Strategy<Value = Constraint> {
    let props = proptest::sample::subsequence(vec!["ssd", "^ssd", "big", "^big"], 1..=2)
        .prop_map(|ps| Constraint::Properties(ps.into_iter().map(String::from).collect()));
    let hosts = (0..8u32, 0..4u32)
        .prop_map(|(a, d)| Constraint::Hostlist(vec![format!("node[{a}-{}]", a + d)]));
    let ranks =
        (0..8u32, 0..4u32).prop_map(|(a, d)| Constraint::Ranks(vec![format!("{a}-{}", a + d)]));
    let leaf = prop_oneof![3 => props, 1 => hosts, 1 => ranks];
    leaf.prop_recursive(2, 6, 2, |inner| {
        let args = proptest::collection::vec(inner, 1..=2);
        prop_oneof![
            args.clone().prop_map(Constraint::And),
            args.clone().prop_map(Constraint::Or),
            args.prop_map(Constraint::Not),
        ]
    })
}

/// A jobspec with a duration of 1–30 s, or (rarely) none, sometimes a constraint, written
/// as YAML or JSON.
pub fn job_shape() -> impl Strategy<Value = JobShape> {
    (
        resources(),
        prop_oneof![9 => 1..=30u64, 1 => Just(0u64)],
        prop_oneof![3 => Just(None), 1 => constraint().prop_map(Some)],
        any::<bool>(),
    )
        .prop_map(|(resources, duration, constraint, yaml)| JobShape {
            resources,
            duration,
            constraint,
            yaml,
        })
}

impl JobShape {
    /// The jobspec text.
    pub fn text(&self) -> String {
        if self.yaml {
            self.yaml_text()
        } else {
            self.json_text()
        }
    }

    fn json_text(&self) -> String {
        fn res(r: &Req) -> serde_json::Value {
            let mut m = serde_json::Map::new();
            m.insert("type".into(), r.kind.into());
            m.insert(
                "count".into(),
                match r.count {
                    Cnt::Exact(n) => n.into(),
                    _ => {
                        let (a, b, op, k) = r.count.range().unwrap_or_default();
                        serde_json::json!({"min": a, "max": b, "operator": op, "operand": k})
                    }
                },
            );
            if let Some(x) = r.exclusive {
                m.insert("exclusive".into(), x.into());
            }
            if r.kind == "slot" {
                m.insert("label".into(), "task".into());
            }
            if !r.with.is_empty() {
                m.insert("with".into(), r.with.iter().map(res).collect());
            }
            serde_json::Value::Object(m)
        }
        let mut js = serde_json::json!({
            "version": 9999,
            "resources": self.resources.iter().map(res).collect::<Vec<_>>(),
            "tasks": [{"command": ["app"], "slot": "task", "count": {"per_slot": 1}}],
        });
        let mut system = serde_json::Map::new();
        if self.duration > 0 {
            system.insert("duration".into(), self.duration.into());
        }
        if let Some(c) = &self.constraint {
            system.insert("constraints".into(), c.to_json());
        }
        if !system.is_empty() {
            js["attributes"] = serde_json::json!({ "system": system });
        }
        js.to_string()
    }

    fn yaml_text(&self) -> String {
        fn res(out: &mut String, r: &Req, indent: usize) {
            let pad = " ".repeat(indent);
            let _ = writeln!(out, "{pad}- type: {}", r.kind);
            match r.count.range() {
                None => {
                    let _ = writeln!(out, "{pad}  count: {}", r.count.min());
                }
                Some((a, b, op, k)) => {
                    let _ = writeln!(
                        out,
                        "{pad}  count: {{min: {a}, max: {b}, operator: '{op}', operand: {k}}}"
                    );
                }
            }
            if let Some(x) = r.exclusive {
                let _ = writeln!(out, "{pad}  exclusive: {x}");
            }
            if r.kind == "slot" {
                let _ = writeln!(out, "{pad}  label: task");
            }
            if !r.with.is_empty() {
                let _ = writeln!(out, "{pad}  with:");
                for c in &r.with {
                    res(out, c, indent + 4);
                }
            }
        }
        let mut out = String::from("version: 9999\nresources:\n");
        for r in &self.resources {
            res(&mut out, r, 2);
        }
        out.push_str("tasks:\n  - command: [app]\n    slot: task\n    count: {per_slot: 1}\n");
        if self.duration > 0 || self.constraint.is_some() {
            out.push_str("attributes:\n  system:\n");
        }
        if self.duration > 0 {
            let _ = writeln!(out, "    duration: {}", self.duration);
        }
        if let Some(c) = &self.constraint {
            // JSON is YAML's flow style.
            let _ = writeln!(out, "    constraints: {}", c.to_json());
        }
        out
    }

    /// The jobspec, read back from its text.
    pub fn jobspec(&self) -> Jobspec {
        let text = self.text();
        shardsched_jobspec::parse(&text)
            .unwrap_or_else(|e| panic!("generated jobspec does not parse: {e}\n{text}"))
    }

    /// Least units of each requested type the whole request needs (products of minimum
    /// counts along the request tree; memory counts GB).
    /// Units of each type the jobspec's resources take, at least: Fluxion takes only what
    /// is held exclusively (slot contents, `exclusive: true` and what is below them) and
    /// the resources above such requests (shared); a shared request with nothing exclusive
    /// below it is matched but not taken.
    pub fn required(&self) -> BTreeMap<&'static str, i64> {
        fn walk(r: &Req, mult: i64, taken_in: bool, out: &mut BTreeMap<&'static str, i64>) -> bool {
            let m = mult * r.count.min() as i64;
            let taken = taken_in || r.exclusive == Some(true);
            let below = taken || r.kind == "slot";
            let mut any = false;
            for c in &r.with {
                any |= walk(c, m, below, out);
            }
            if r.kind != "slot" && (taken || any) {
                *out.entry(r.kind).or_default() += m;
            }
            taken || any
        }
        let mut out = BTreeMap::new();
        for r in &self.resources {
            walk(r, 1, false, &mut out);
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Oracles

/// End of an allocation's window.
pub fn end_of(a: &Allocation) -> i64 {
    a.at.saturating_add(i64::try_from(a.duration).unwrap_or(i64::MAX))
}

/// The live allocations and reservations of `m`, as the checker takes them.
pub fn live(m: &Matcher) -> Vec<(u64, &Allocation)> {
    m.jobs().map(|(id, j)| (id, &j.alloc)).collect()
}

/// Whether `v` and all its ancestors are up.
pub fn effectively_up(g: &ResourceGraph, v: VertexId) -> bool {
    let mut cur = Some(v);
    while let Some(x) = cur {
        if g.status(x) != Status::Up {
            return false;
        }
        cur = g.parent(x);
    }
    true
}

/// Over-commit and exclusivity from first principles: every allocation is closed upwards,
/// takes 1..=size units of each vertex, and while a job holds a vertex exclusively nobody
/// else touches it.
pub fn own_overcommit_check(g: &ResourceGraph, allocs: &[(u64, &Allocation)]) -> Vec<String> {
    let mut out = Vec::new();
    let mut uses: BTreeMap<u32, Vec<(u64, i64, i64, bool)>> = BTreeMap::new();
    for &(job, a) in allocs {
        let mine: BTreeSet<u32> = a.iter().map(|v| v.v.0).collect();
        if mine.len() != a.len() {
            out.push(format!("job {job}: a vertex is listed twice"));
        }
        if !mine.contains(&g.root().0) {
            out.push(format!("job {job}: the root is not in the allocation"));
        }
        for av in a {
            if let Some(p) = g.parent(av.v)
                && !mine.contains(&p.0)
            {
                out.push(format!("job {job}: {} without its parent", g.path(av.v)));
            }
            if av.needs < 1 || av.needs > g.size(av.v) {
                out.push(format!(
                    "job {job}: {} takes {} of {}",
                    g.path(av.v),
                    av.needs,
                    g.size(av.v)
                ));
            }
            uses.entry(av.v.0)
                .or_default()
                .push((job, a.at, end_of(a), av.exclusive));
        }
    }
    for (v, us) in uses {
        for (i, &(ja, sa, ea, xa)) in us.iter().enumerate() {
            for &(jb, sb, eb, xb) in &us[i + 1..] {
                if (xa || xb) && sa < eb && sb < ea {
                    out.push(format!(
                        "{}: jobs {ja} [{sa},{ea}) and {jb} [{sb},{eb}) overlap and one is exclusive",
                        g.path(VertexId(v))
                    ));
                }
            }
        }
    }
    out
}

/// Whether `a` holds, on vertices that are up (with all their ancestors), at least the
/// units of each type the jobspec requires.
pub fn counts_satisfied(g: &ResourceGraph, job: &JobShape, a: &Allocation) -> Result<(), String> {
    for (kind, need) in job.required() {
        let got: i64 = a
            .iter()
            .filter(|av| g.kind_str(av.v) == kind && effectively_up(g, av.v))
            .map(|av| if kind == "memory" { av.needs } else { 1 })
            .sum();
        if got < need {
            return Err(format!(
                "{kind}: got {got} usable units, the jobspec needs {need}"
            ));
        }
    }
    Ok(())
}

/// Whether node `v` meets `c`, read straight from RFC 31: `properties` all present (`^p`:
/// absent), `hostlist`/`ranks` contain the node, `and`/`or` as named, `not` the negation of
/// the conjunction of its arguments.
pub fn admits(c: &Constraint, g: &ResourceGraph, v: VertexId) -> bool {
    match c {
        Constraint::Properties(ps) => ps.iter().all(|p| match p.strip_prefix('^') {
            Some(p) => !g.has_property(v, p),
            None => g.has_property(v, p),
        }),
        Constraint::Hostlist(hs) => hs.iter().any(|h| {
            shardsched_resource::decode_hostlist(h)
                .is_ok_and(|hosts| hosts.iter().any(|x| x == g.name(v)))
        }),
        Constraint::Ranks(rs) => rs.iter().any(|r| {
            shardsched_resource::parse_idset(r, 1 << 20)
                .is_ok_and(|ids| u64::try_from(g.rank(v)).is_ok_and(|k| ids.contains(&k)))
        }),
        Constraint::And(cs) => cs.iter().all(|c| admits(c, g, v)),
        Constraint::Or(cs) => cs.iter().any(|c| admits(c, g, v)),
        Constraint::Not(cs) => !cs.iter().all(|c| admits(c, g, v)),
    }
}

/// Every node of `a` meets the job's constraint.
pub fn constraint_holds(g: &ResourceGraph, job: &JobShape, a: &Allocation) -> Result<(), String> {
    let Some(c) = &job.constraint else {
        return Ok(());
    };
    for av in a {
        if g.kind_str(av.v) == "node" && !admits(c, g, av.v) {
            return Err(format!("{} does not meet {}", g.path(av.v), c.to_json()));
        }
    }
    Ok(())
}

/// Rebuilds the calendars from scratch out of the live jobs and compares them with the
/// matcher's at every instant where something changes: the calendars must hold exactly the
/// live jobs (nothing leaked by a cancel, nothing lost). Rebuilding also fails on an
/// over-commit, as the planners refuse spans that do not fit.
pub fn calendars_match_live_jobs(
    m: &Matcher,
    filters: &PruneFilters,
    now: i64,
) -> Result<(), String> {
    let g = &m.graph;
    let _ = filters;
    let mut fresh = m.fresh_state();
    for (id, j) in m.jobs() {
        m.commit_into(&mut fresh, &j.alloc)
            .map_err(|e| format!("re-committing job {id} on fresh calendars: {e}"))?;
    }
    let horizon_end = PLAN_BASE + PLAN_HORIZON as i64;
    let mut times: BTreeSet<i64> = [PLAN_BASE, now].into();
    for (_, j) in m.jobs() {
        for t in [
            j.alloc.at - 1,
            j.alloc.at,
            end_of(&j.alloc) - 1,
            end_of(&j.alloc),
        ] {
            if (PLAN_BASE..horizon_end).contains(&t) {
                times.insert(t);
            }
        }
    }
    let st = &m.state;
    for v in g.vertices() {
        let types = |s: &SchedState| s.aggregate(v).map(|a| a.types.clone());
        if types(st) != types(&fresh) {
            return Err(format!("{}: aggregate types differ", g.path(v)));
        }
        for &t in &times {
            let (a, b) = (
                st.usage(v, g.size(v), t, 1),
                fresh.usage(v, g.size(v), t, 1),
            );
            if a != b {
                return Err(format!(
                    "{} at {t}: the calendars say {a:?}, the live jobs make it {b:?}",
                    g.path(v)
                ));
            }
            for &ty in types(st).iter().flat_map(|t| t.iter()) {
                let a = st.agg_avail(v, ty, t, 1);
                let b = fresh.agg_avail(v, ty, t, 1);
                if a != b {
                    return Err(format!(
                        "{} at {t}: {:?} {} free below, live jobs leave {:?}",
                        g.path(v),
                        a,
                        g.str(ty),
                        b
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Every writer renders `a`; the JSON ones give JSON, `simple` one line per vertex, and R
/// lists exactly the allocation's nodes, cores and gpus and its time window.
pub fn writers_agree(g: &ResourceGraph, a: &Allocation) -> Result<(), String> {
    use shardsched_matcher::Writer;
    for name in ["simple", "pretty_simple", "jgf", "rv1", "rv1_nosched"] {
        let w = Writer::parse(name).ok_or_else(|| format!("no writer {name}"))?;
        let text = w.render(g, a);
        if name.contains("simple") {
            if text.lines().count() != a.len() {
                return Err(format!(
                    "{name}: {} lines for {} vertices",
                    text.lines().count(),
                    a.len()
                ));
            }
            continue;
        }
        if name.starts_with("rv1") && text.is_empty() {
            // Fluxion's R writers fail (print nothing) when no core or gpu under a node is
            // allocated: R_lite would be empty (`slot->node` on a node with no cores
            // listed, checked with resource-query).
            let node = g.sym("node");
            let in_r = a.iter().any(|av| {
                matches!(g.kind_str(av.v), "core" | "gpu")
                    && node.and_then(|n| g.ancestor_of_kind(av.v, n)).is_some()
            });
            if in_r {
                return Err(format!("{name}: no text for an allocation with an R"));
            }
            continue;
        }
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{name}: not JSON: {e}"))?;
        if !name.starts_with("rv1") {
            continue;
        }
        let x = &v["execution"];
        if x["starttime"] != a.at || x["expiration"] != end_of(a) {
            return Err(format!(
                "{name}: window {} to {}",
                x["starttime"], x["expiration"]
            ));
        }
        let count = |kind: &str| a.iter().filter(|av| g.kind_str(av.v) == kind).count();
        let mut listed: BTreeMap<String, usize> = BTreeMap::new();
        for e in x["R_lite"].as_array().into_iter().flatten() {
            let ids = |t: &serde_json::Value| {
                shardsched_resource::parse_idset(t.as_str().unwrap_or(""), 1 << 20)
                    .map_err(|err| format!("{name}: bad idset {t}: {err}"))
            };
            let ranks = ids(&e["rank"])?.len();
            *listed.entry("node".into()).or_default() += ranks;
            for (kind, set) in e["children"].as_object().into_iter().flatten() {
                *listed.entry(kind.clone()).or_default() += ranks * ids(set)?.len();
            }
        }
        for kind in ["node", "core", "gpu"] {
            // Cores and gpus outside any node are not in R.
            let want = if kind == "node" {
                count(kind)
            } else {
                let node = g.sym("node");
                a.iter()
                    .filter(|av| g.kind_str(av.v) == kind)
                    .filter(|av| node.and_then(|n| g.ancestor_of_kind(av.v, n)).is_some())
                    .count()
            };
            let got = listed.get(kind).copied().unwrap_or(0);
            if got != want {
                return Err(format!(
                    "{name}: R_lite lists {got} {kind}, the allocation has {want}"
                ));
            }
        }
        let hosts: usize = x["nodelist"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|h| {
                shardsched_resource::decode_hostlist(h.as_str().unwrap_or("")).map(|v| v.len())
            })
            .sum::<Result<usize, _>>()
            .map_err(|e| format!("{name}: bad nodelist: {e}"))?;
        if hosts != count("node") {
            return Err(format!(
                "{name}: nodelist has {hosts} hosts, the allocation {} nodes",
                count("node")
            ));
        }
    }
    Ok(())
}

/// Policies under test.
pub const POLICIES: &[&str] = &[
    "first",
    "high",
    "low",
    "hinode",
    "lonode",
    "hinodex",
    "lonodex",
    "firstnodex",
];
/// Prune filters under test.
pub const FILTERS: &[&str] = &["", "ALL:core", "ALL:core,ALL:node"];
