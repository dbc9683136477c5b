//! A seed's system: a small random cluster and queues whose definitions overlap, written as
//! the configuration file the coordinator reads (so `Config::parse` checks it as it checks
//! a real one), and the jobs clients submit.

use std::path::Path;

use rand::Rng;
use rand::seq::IndexedRandom;
use rand_chacha::ChaCha8Rng;
use shardsched_coordinator_core::Config;
use shardsched_jobspec::Shorthand;

/// Fewest and most nodes in a seed's cluster.
const NODES: std::ops::RangeInclusive<usize> = 4..=8;
/// Fewest and most queues at start.
const QUEUES: std::ops::RangeInclusive<usize> = 2..=4;
/// Longest job, seconds (sim executor, time scale 1).
pub(crate) const JOB_SECONDS_MAX: u64 = 60;
/// Every user's `max_running` (docs/POLICIES.md, "Limits"): the checker counts each
/// user's running jobs over every shard against it.
pub(crate) const MAX_RUNNING_EACH: u64 = 2;
/// User bob's `max_running`.
pub(crate) const MAX_RUNNING_BOB: u64 = 1;
/// Queue policies a queue may get.
pub(crate) const POLICIES: [&str; 4] = ["fcfs", "easy", "hybrid", "conservative"];

/// A seed's system.
pub(crate) struct Setup {
    /// The coordinator's configuration file.
    pub(crate) config: Config,
    /// The cluster's node names.
    pub(crate) nodes: Vec<String>,
    /// Jobspecs clients pick from (JSON): 1 or 2 whole nodes, 1 s to [`JOB_SECONDS_MAX`].
    pub(crate) jobspecs: Vec<String>,
}

/// Draws a seed's system.
pub(crate) fn draw(rng: &mut ChaCha8Rng, limits: bool) -> Result<Setup, String> {
    let node_count = rng.random_range(NODES);
    let nodes: Vec<String> = (0..node_count).map(|i| format!("node{i}")).collect();
    let queue_count = rng.random_range(QUEUES);
    // Each node is in one queue's definition for sure, and in the others' by chance.
    let mut definitions: Vec<Vec<usize>> = vec![Vec::new(); queue_count];
    for n in 0..node_count {
        let home = rng.random_range(0..queue_count);
        for (q, def) in definitions.iter_mut().enumerate() {
            if q == home || rng.random_bool(0.5) {
                def.push(n);
            }
        }
    }
    for def in definitions.iter_mut().filter(|d| d.is_empty()) {
        def.push(rng.random_range(0..node_count));
    }
    let queues: Vec<TableQueue> = definitions
        .into_iter()
        .enumerate()
        .map(|(q, definition)| TableQueue {
            name: format!("q{q}"),
            definition,
            policy: POLICIES.choose(rng).copied().unwrap_or("fcfs"),
            // The default queue starts; others may start stopped.
            started: q == 0 || rng.random_bool(0.75),
        })
        .collect();
    let config = config_file(node_count, &queues, limits)?;
    let jobspecs = (0..8)
        .map(|_| {
            let shorthand = Shorthand {
                nodes: Some(rng.random_range(1..=2)),
                duration: rng.random_range(1..=JOB_SECONDS_MAX),
                command: vec!["app".to_owned()],
                ..Shorthand::default()
            };
            shorthand
                .to_jobspec()
                .map(|j| j.to_json().to_string())
                .map_err(|e| format!("a drawn jobspec does not build: {e}"))
        })
        .collect::<Result<_, _>>()?;
    Ok(Setup {
        config,
        nodes,
        jobspecs,
    })
}

/// One queue of a configuration file the simulator writes.
pub(crate) struct TableQueue {
    pub(crate) name: String,
    /// Node indices.
    pub(crate) definition: Vec<usize>,
    pub(crate) policy: &'static str,
    pub(crate) started: bool,
}

/// The configuration file of a seed's cluster of `node_count` nodes with `queues` (the
/// default queue is `q0`), with `[limits]` and `[fairshare]` when `limits` says, parsed as the coordinator
/// parses a real one: at start, and again for a `reload`.
pub(crate) fn config_file(
    node_count: usize,
    queues: &[TableQueue],
    limits: bool,
) -> Result<Config, String> {
    let mut text = format!(
        "default_queue = \"q0\"\n\n[cluster.inline]\nname = \"sim\"\n\n\
         [[cluster.inline.nodes]]\nhosts = \"node[0-{}]\"\nsockets = 1\ncores_per_socket = 2\n\n\
         [agents]\nheartbeat_timeout = \"30s\"\nreturn_to_service = true\n",
        node_count - 1
    );
    if limits {
        text.push_str(&format!(
            "\n[limits]\nmax_running = {MAX_RUNNING_EACH}\n\n\
             [limits.users.bob]\nmax_running = {MAX_RUNNING_BOB}\n\n\
             [fairshare]\nhalf_life = \"10m\"\n"
        ));
    }
    for q in queues {
        text.push_str(&format!(
            "\n[queues.{}]\nnodes = \"{}\"\npolicy = \"{}\"\n\
             default_duration = \"30s\"\nmax_duration = \"10m\"\nstarted = {}\n",
            q.name,
            hostlist(&q.definition),
            q.policy,
            q.started
        ));
    }
    Config::parse(&text, "sim.toml", Path::new("."))
        .map_err(|e| format!("the drawn configuration does not parse: {e}\n{text}"))
}

/// `node[0,3,5]` for node indices.
pub(crate) fn hostlist(indices: &[usize]) -> String {
    let list: Vec<String> = indices.iter().map(usize::to_string).collect();
    format!("node[{}]", list.join(","))
}
