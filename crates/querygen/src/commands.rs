//! Random command streams: 3 to 30 commands of resource-query's language, mixing the match
//! operations with cancels, status changes, properties, `find` expressions and the commands
//! that print to standard output only (`info`, `list`, `stat`); [`with_partial_cancels`]
//! splices partial cancels into one. Every stream ends with `quit`: without it Fluxion's
//! resource-query spins at end of input.

use std::fmt::Write as _;

use rand::Rng;
use rand::seq::IndexedRandom;
use rand_chacha::ChaCha8Rng;

use crate::graph::Graph;
use crate::jobspec::Features;

/// Fewest and most commands of a stream (before `quit`).
pub const STREAM_COMMANDS_MIN: usize = 3;
pub const STREAM_COMMANDS_MAX: usize = 30;

/// What a stream can say, with how often each is drawn.
#[derive(Clone, Copy)]
enum Kind {
    Allocate,
    OrElseReserve,
    WithSatisfiability,
    Satisfiability,
    WithoutAllocating,
    MultiMatch,
    Cancel,
    CancelStats,
    SetDown,
    SetUp,
    GetStatus,
    SetProperty,
    GetProperty,
    Find,
    Info,
    List,
    Stat,
    Comment,
}

/// Kinds only an extended case draws: features beyond the core tier of the conformance
/// cases.
fn is_extended(k: Kind) -> bool {
    matches!(
        k,
        Kind::WithoutAllocating | Kind::MultiMatch | Kind::CancelStats | Kind::Find
    )
}

const KINDS: [(Kind, u32); 18] = [
    (Kind::Allocate, 24),
    (Kind::OrElseReserve, 18),
    (Kind::WithSatisfiability, 10),
    (Kind::Satisfiability, 6),
    (Kind::WithoutAllocating, 2),
    (Kind::MultiMatch, 3),
    (Kind::Cancel, 12),
    (Kind::CancelStats, 2),
    (Kind::SetDown, 5),
    (Kind::SetUp, 3),
    (Kind::GetStatus, 2),
    (Kind::SetProperty, 2),
    (Kind::GetProperty, 2),
    (Kind::Find, 6),
    (Kind::Info, 3),
    (Kind::List, 1),
    (Kind::Stat, 1),
    (Kind::Comment, 1),
];

/// A vertex path to name: mostly a node, sometimes another vertex or one that is not there.
fn some_path(rng: &mut ChaCha8Rng, g: &Graph) -> String {
    let nodes = g.paths_of("node");
    match rng.random_range(0..10) {
        0 => format!("{}/nosuch0", g.vertices[0].path),
        1 | 2 => g
            .vertices
            .choose(rng)
            .map(|v| v.path.clone())
            .unwrap_or_default(),
        _ => nodes.choose(rng).map(|s| s.to_string()).unwrap_or_default(),
    }
}

/// A hostlist of one or two node names (`node3`, `node[0-1]`).
fn hostlist(rng: &mut ChaCha8Rng, g: &Graph) -> String {
    let nodes: Vec<_> = g.vertices.iter().filter(|v| v.ty == "node").collect();
    let Some(a) = nodes.choose(rng) else {
        return "node0".to_string();
    };
    match nodes
        .iter()
        .find(|b| b.basename == a.basename && b.id == a.id + 1)
    {
        Some(_) if rng.random_bool(0.5) => format!("{}[{}-{}]", a.basename, a.id, a.id + 1),
        _ => a.name.clone(),
    }
}

/// A `find` expression of one to three terms.
fn find_expr(rng: &mut ChaCha8Rng, g: &Graph, jobs: u64) -> String {
    let term = |rng: &mut ChaCha8Rng| -> String {
        let job = rng.random_range(1..=jobs.max(1));
        match rng.random_range(0..12) {
            0 => "status=up".into(),
            1 => "status=down".into(),
            2 | 3 => "sched-now=allocated".into(),
            4 => "sched-now=free".into(),
            5 => "sched-future=reserved".into(),
            6 => "sched-future=free".into(),
            7 => format!("jobid-alloc={job}"),
            8 => format!("jobid-reserved={job}"),
            9 => format!("jobid-span={job}"),
            10 => format!("names={}", hostlist(rng, g)),
            _ => "property=perf_class".into(),
        }
    };
    let mut s = term(rng);
    for _ in 0..rng.random_range(0..=2) {
        let op = *[" and ", " or ", " "].choose(rng).unwrap_or(&" and ");
        let t = term(rng);
        if rng.random_bool(0.15) {
            let u = term(rng);
            let _ = write!(s, "{op}({t} or {u})");
        } else {
            let _ = write!(s, "{op}{t}");
        }
    }
    s
}

/// A random stream over `graph` naming the jobspec files `jobspecs`; `extended` allows
/// `find`, `multi-match`, `without_allocating` and `cancel … stats`; `variation` first
/// gives nodes `perf_class` properties for the variation-aware policy.
pub fn random_commands(
    rng: &mut ChaCha8Rng,
    g: &Graph,
    jobspecs: &[String],
    extended: bool,
    variation: bool,
) -> (String, Features) {
    let mut f = Features::new();
    let mut s = String::new();
    if variation {
        for p in g.paths_of("node") {
            if rng.random_bool(0.7) {
                let class = rng.random_range(0..=4);
                let _ = writeln!(s, "set-property {p} perf_class={class}");
            }
        }
    }
    // Job ids handed out so far (an upper bound: satisfiability and parse errors take none).
    let mut jobs: u64 = 0;
    let n = rng.random_range(STREAM_COMMANDS_MIN..=STREAM_COMMANDS_MAX);
    let js = |rng: &mut ChaCha8Rng| jobspecs.choose(rng).cloned().unwrap_or_default();
    for _ in 0..n {
        let kind = KINDS
            .choose_weighted(
                rng,
                |&(k, w)| if extended || !is_extended(k) { w } else { 0 },
            )
            .map(|(k, _)| *k)
            .unwrap_or(Kind::Allocate);
        let some_job = |rng: &mut ChaCha8Rng| {
            if jobs == 0 || rng.random_bool(0.1) {
                jobs + 3
            } else {
                rng.random_range(1..=jobs)
            }
        };
        match kind {
            Kind::Allocate => {
                jobs += 1;
                let _ = writeln!(s, "match allocate {}", js(rng));
            }
            Kind::OrElseReserve => {
                f.insert("reserve");
                jobs += 1;
                let _ = writeln!(s, "match allocate_orelse_reserve {}", js(rng));
            }
            Kind::WithSatisfiability => {
                f.insert("with-satisfiability");
                jobs += 1;
                let _ = writeln!(s, "match allocate_with_satisfiability {}", js(rng));
            }
            Kind::Satisfiability => {
                f.insert("satisfiability");
                let _ = writeln!(s, "match satisfiability {}", js(rng));
            }
            Kind::WithoutAllocating => {
                f.insert("without-allocating");
                let _ = writeln!(s, "match without_allocating {}", js(rng));
            }
            Kind::MultiMatch => {
                f.insert("multi-match");
                let k = rng.random_range(2..=3);
                jobs += k;
                let files: Vec<String> = (0..k).map(|_| js(rng)).collect();
                let _ = writeln!(s, "multi-match allocate {}", files.join(" "));
            }
            Kind::Cancel => {
                f.insert("cancel");
                let _ = writeln!(s, "cancel {}", some_job(rng));
            }
            Kind::CancelStats => {
                f.insert("cancel-stats");
                let _ = writeln!(s, "cancel {} stats", some_job(rng));
            }
            Kind::SetDown | Kind::SetUp => {
                f.insert("set-status");
                let status = if matches!(kind, Kind::SetDown) {
                    "down"
                } else {
                    "up"
                };
                let _ = writeln!(s, "set-status {} {status}", some_path(rng, g));
            }
            Kind::GetStatus => {
                f.insert("get-status");
                let _ = writeln!(s, "get-status {}", some_path(rng, g));
            }
            Kind::SetProperty => {
                f.insert("property");
                let key = ["perf_class", "color", "arch"]
                    .choose(rng)
                    .unwrap_or(&"color");
                let _ = writeln!(
                    s,
                    "set-property {} {key}={}",
                    some_path(rng, g),
                    rng.random_range(0..3)
                );
            }
            Kind::GetProperty => {
                f.insert("property");
                let _ = writeln!(s, "get-property {}", some_path(rng, g));
            }
            Kind::Find => {
                f.insert("find");
                let _ = writeln!(s, "find {}", find_expr(rng, g, jobs));
            }
            Kind::Info => {
                f.insert("stdout-commands");
                let _ = writeln!(s, "info {}", some_job(rng));
            }
            Kind::List => {
                f.insert("stdout-commands");
                s.push_str("list\n");
            }
            Kind::Stat => {
                f.insert("stdout-commands");
                s.push_str("stat\n");
            }
            Kind::Comment => s.push_str("# a comment\n"),
        }
    }
    s.push_str("quit\n");
    (s, f)
}

/// The rv1exec R file a stream's `partial-cancel` commands name.
pub const PARTIAL_R_FILE: &str = "r0.json";

/// Splices one or two `partial-cancel JOB rv1exec r0.json [stats]` commands into `stream`
/// (before its `quit`, each naming a job handed out before it where there is one) and
/// returns the stream with the R file they name: an rv1exec R of one to three of the
/// graph's node ranks. `None` for a graph without nodes.
pub fn with_partial_cancels(
    rng: &mut ChaCha8Rng,
    g: &Graph,
    stream: &str,
) -> Option<(String, String)> {
    let ranks: Vec<i64> = g
        .vertices
        .iter()
        .filter(|v| v.ty == "node" && v.rank >= 0)
        .map(|v| v.rank)
        .collect();
    let first = *ranks.choose(rng)?;
    let mut named = vec![first];
    for _ in 0..rng.random_range(0..=2) {
        if let Some(&r) = ranks.choose(rng) {
            named.push(r);
        }
    }
    named.sort_unstable();
    named.dedup();
    let idset: Vec<String> = named.iter().map(i64::to_string).collect();
    let r = format!(
        "{{\"version\": 1, \"execution\": {{\"R_lite\": [{{\"rank\": \"{}\", \
         \"children\": {{\"core\": \"0\"}}}}], \"nodelist\": [\"node0\"], \
         \"starttime\": 0, \"expiration\": 0}}}}\n",
        idset.join(",")
    );
    let mut lines: Vec<String> = stream.lines().map(String::from).collect();
    for _ in 0..rng.random_range(1..=2) {
        let (at, handed_out) = splice_point(rng, &lines);
        let job = rng.random_range(1..=handed_out.max(1));
        let stats = if rng.random_bool(0.3) { " stats" } else { "" };
        lines.insert(
            at,
            format!("partial-cancel {job} rv1exec {PARTIAL_R_FILE}{stats}"),
        );
    }
    Some((joined(&lines), r))
}

/// Where to splice a command into a stream's `lines`: a position before its `quit` (the
/// last line), and how many job ids the commands before it hand out.
fn splice_point(rng: &mut ChaCha8Rng, lines: &[String]) -> (usize, u64) {
    let at = rng.random_range(0..lines.len());
    let handed_out = lines[..at]
        .iter()
        .filter(|l| l.starts_with("match allocate") || l.starts_with("multi-match"))
        .count() as u64;
    (at, handed_out)
}

/// The stream of `lines`, each ended by a newline.
fn joined(lines: &[String]) -> String {
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

/// The JGF R file a stream's `update` commands name.
pub const UPDATE_R_FILE: &str = "u0.json";

/// Splices one `update allocate|reserve jgf u0.json ID AT 3600` into `stream` (before its
/// `quit`) and returns the stream with the R it names: one of the graph's nodes (or, with
/// none, a child of the root) taken whole, as a match that took it would have written it.
/// The id is one past those handed out before it, or a little further; `AT` is 0 or a
/// later hour. `None` for a graph of one vertex.
pub fn with_update(rng: &mut ChaCha8Rng, g: &Graph, stream: &str) -> Option<(String, String)> {
    let nodes: Vec<usize> = (0..g.vertices.len())
        .filter(|&i| g.vertices[i].ty == "node")
        .collect();
    let children: Vec<usize> = (0..g.vertices.len())
        .filter(|&i| g.vertices[i].parent == Some(0))
        .collect();
    let top = *nodes.choose(rng).or_else(|| children.choose(rng))?;
    let r = g.subtree_r_jgf(top);
    let mut lines: Vec<String> = stream.lines().map(String::from).collect();
    let (at, handed_out) = splice_point(rng, &lines);
    let id = handed_out + rng.random_range(1..=3);
    let op = if rng.random_bool(0.7) {
        "allocate"
    } else {
        "reserve"
    };
    let start = *[0, 0, 3600, 7200].choose(rng).unwrap_or(&0);
    lines.insert(
        at,
        format!("update {op} jgf {UPDATE_R_FILE} {id} {start} 3600"),
    );
    Some((joined(&lines), r))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::random_graph;
    use rand::SeedableRng;

    #[test]
    fn streams_have_3_to_30_commands_and_end_with_quit() {
        for seed in 0..100 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let g = random_graph(&mut rng);
            let (s, _) = random_commands(&mut rng, &g, &["j0.yaml".to_string()], true, false);
            let lines: Vec<&str> = s.lines().collect();
            assert_eq!(lines.last(), Some(&"quit"));
            let n = lines.len() - 1;
            assert!(
                (STREAM_COMMANDS_MIN..=STREAM_COMMANDS_MAX).contains(&n),
                "{n}"
            );
        }
    }

    #[test]
    fn partial_cancels_come_before_quit_and_name_node_ranks() {
        for seed in 0..50 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let g = random_graph(&mut rng);
            let (s, _) = random_commands(&mut rng, &g, &["j0.yaml".to_string()], true, false);
            let Some((spliced, r)) = with_partial_cancels(&mut rng, &g, &s) else {
                continue;
            };
            let lines: Vec<&str> = spliced.lines().collect();
            assert_eq!(lines.last(), Some(&"quit"));
            let added = lines.len() - s.lines().count();
            assert!((1..=2).contains(&added), "{added}");
            assert!(lines.iter().any(|l| l.starts_with("partial-cancel ")));
            let v: serde_json::Value = serde_json::from_str(&r).expect("R is JSON");
            let idset = v["execution"]["R_lite"][0]["rank"].as_str().expect("ranks");
            for rank in idset.split(',') {
                let rank: i64 = rank.parse().expect("a rank");
                assert!(g.vertices.iter().any(|v| v.ty == "node" && v.rank == rank));
            }
        }
    }

    #[test]
    fn an_update_comes_before_quit_and_holds_one_subtree_exclusively_under_shared_ancestors() {
        let mut drawn = 0;
        for seed in 0..50 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let g = random_graph(&mut rng);
            let (s, _) = random_commands(&mut rng, &g, &["j0.yaml".to_string()], true, false);
            let Some((spliced, r)) = with_update(&mut rng, &g, &s) else {
                continue;
            };
            drawn += 1;
            let lines: Vec<&str> = spliced.lines().collect();
            assert_eq!(lines.last(), Some(&"quit"));
            assert_eq!(lines.len(), s.lines().count() + 1);
            assert_eq!(lines.iter().filter(|l| l.starts_with("update ")).count(), 1);
            let v: serde_json::Value = serde_json::from_str(&r).expect("R is JSON");
            let nodes = v["graph"]["nodes"].as_array().expect("nodes");
            let edges = v["graph"]["edges"].as_array().expect("edges");
            assert_eq!(
                edges.len() + 1,
                nodes.len(),
                "a tree: one edge per non-root"
            );
            // Children before parents: the last is the root, shared; the exclusive ones
            // come first, each path below the first shared vertex's.
            let last = &nodes[nodes.len() - 1]["metadata"];
            assert_eq!(last["paths"]["containment"], g.vertices[0].path.as_str());
            let top = nodes
                .iter()
                .rposition(|n| n["metadata"]["exclusive"] == true)
                .expect("an exclusive vertex");
            assert!(
                nodes[..=top]
                    .iter()
                    .all(|n| n["metadata"]["exclusive"] == true)
            );
            assert!(
                nodes[top + 1..]
                    .iter()
                    .all(|n| n["metadata"]["exclusive"].is_null())
            );
            let top_path = nodes[top]["metadata"]["paths"]["containment"]
                .as_str()
                .expect("path");
            let below = format!("{top_path}/");
            for n in &nodes[..top] {
                let p = n["metadata"]["paths"]["containment"]
                    .as_str()
                    .expect("path");
                assert!(p.starts_with(&below), "{p} under {top_path}");
            }
            let whole = g
                .vertices
                .iter()
                .filter(|v| v.path.starts_with(&below))
                .count();
            assert_eq!(top, whole, "every vertex below {top_path}");
        }
        assert!(drawn > 40, "{drawn}");
    }
}
