//! The simulator proves what the processes run only while it drives the cores through the
//! same entry points as their drivers. This test reads the drivers' sources
//! (`coordinator/src/driver`, `shard/src/driver`, the shard's agents task
//! `shard/src/agents`, the node agent's `node/src`) and the simulator's, collects the core
//! methods each calls (on a `core`, an `AgentCore` or the agents executor's `runs`), and fails when a driver calls one the simulator does not (unless
//! it is listed below as the driver's alone, with why), or when the simulator reaches
//! past the cores into a machine of theirs (a re-implemented driver, as the old move
//! harness's `World` was).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Core methods only a driver calls, and why the simulator does not need them.
const DRIVER_ONLY: &[(&str, &str)] = &[
    // Reads for clients: views, not decisions.
    ("routes", "the routing table, published for clients"),
    ("queue_list", "`queue list`"),
    ("resources_page", "`resource list`"),
    ("move_list", "`queue moves`"),
    ("move_of", "`queue moves --id`, and what waits for one move"),
    ("jobs_plan", "the `jobs` fan-out"),
    ("snapshot", "the snapshot reads are served from"),
    ("owned", "log fields"),
    ("shard", "a connected shard's address, for logs and probes"),
    ("epoch", "when to republish the routing table"),
    // Reads for `/metrics` and the status page (crates/telemetry).
    ("resources", "the coordinator's node gauges"),
    ("queue_manager", "a shard's queue gauges"),
    (
        "check_move",
        "`queue move --dry-run` asks the donor's shard, changing nothing",
    ),
    // A node agent's reads for its driver: health checks, `job output`, logs.
    (
        "set_health",
        "the health check script: sim nodes are healthy",
    ),
    ("unhealthy", "logs when the health changes"),
    ("launcher", "`job output`: sim tasks write none"),
    ("address_of", "`job output`: which agent to ask"),
    (
        "renew_soon",
        "the pushed end: simulated agents answer renewals at once (they hold none), so no \
         answer comes early to renew after",
    ),
    ("limits", "`shardsched limits`: the table, read"),
    // Not simulated yet.
    (
        "set_limit",
        "`limits set` at run time: sim seeds take their limits from the configuration only \
         (odd seeds), so a changed limit's new grants are not drawn yet",
    ),
    (
        "job_facts_plan",
        "dependencies across queues (docs/POLICIES.md): sim jobs have none yet",
    ),
];

/// Names that would mean the simulator drives a core's inner machine itself.
const INNER_MACHINES: &[&str] = &["MoveMachine", "NodeTable::", "QueueManager::"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file under `dir`, read.
fn sources(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                out.push((path, text));
            }
        }
    }
    out.sort();
    out
}

/// The methods called on a core in `text` (comments left out): `core.NAME(` and
/// `self.core.NAME(` (across line breaks), and `Core::NAME` / `ShardCore::NAME` (called,
/// or passed as a function).
fn core_calls(text: &str) -> BTreeSet<String> {
    let code: String = text
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let flat: String = code.split_whitespace().collect();
    let mut calls = BTreeSet::new();
    for (marker, called) in [("core.", true), ("Core::", false), ("runs.", true)] {
        let mut rest = flat.as_str();
        while let Some(at) = rest.find(marker) {
            rest = &rest[at + marker.len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let is_call = !called || rest[name.len()..].starts_with('(');
            if is_call && name.starts_with(|c: char| c.is_lowercase()) {
                calls.insert(name);
            }
        }
    }
    calls
}

fn calls_under(dirs: &[&str]) -> BTreeSet<String> {
    dirs.iter()
        .flat_map(|d| sources(&root().join(d)))
        .flat_map(|(_, text)| core_calls(&text))
        .collect()
}

#[test]
fn the_simulator_calls_every_core_entry_point_the_drivers_call() {
    let drivers = calls_under(&[
        "coordinator/src/driver",
        "shard/src/driver",
        "shard/src/agents",
        "node/src",
    ]);
    let sim = calls_under(&["crates/sim/src"]);
    // The drivers must really be read: a few calls every driver makes.
    for known in [
        "journal_take",
        "moves_to_send",
        "handle_coordinator",
        "tick",
        "handle_launch",
        "renewed",
    ] {
        assert!(
            drivers.contains(known),
            "no driver calls {known}: {drivers:?}"
        );
    }
    let driver_only: BTreeSet<&str> = DRIVER_ONLY.iter().map(|(n, _)| *n).collect();
    let missing: Vec<&String> = drivers
        .iter()
        .filter(|c| !sim.contains(*c) && !driver_only.contains(c.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "the drivers call core entry points the simulator does not: {missing:?} \
         (drive them from crates/sim, or list them in DRIVER_ONLY with why)"
    );
    let stale: Vec<&&str> = driver_only
        .iter()
        .filter(|n| !drivers.contains(**n) || sim.contains(**n))
        .collect();
    assert!(
        stale.is_empty(),
        "DRIVER_ONLY lists calls no driver makes, or the simulator makes too: {stale:?}"
    );
}

#[test]
fn the_simulator_drives_no_inner_machine_of_a_core() {
    for (path, text) in sources(&root().join("crates/sim/src")) {
        for name in INNER_MACHINES {
            assert!(
                !text.contains(name),
                "{} uses {name}: the simulator drives the cores, not their parts",
                path.display()
            );
        }
    }
}

#[test]
fn calls_are_found_across_line_breaks() {
    let text = "self.core\n    .register_shard(now, r);\nShardCore::start(&a);\ncore.tick (x)\n\
        /// [`Core::in_a_comment`]\nx.and_then(Core::passed);";
    let found = core_calls(text);
    let expected = ["passed", "register_shard", "start", "tick"];
    assert_eq!(
        found,
        expected.iter().map(|s| (*s).to_owned()).collect(),
        "{found:?}"
    );
}
