//! A shard schedules with every match policy `shardsched query -P` takes, and runs jobs
//! whose jobspecs offer alternatives (or-slots, `xor_slot`), as Fluxion's flexible traverser
//! matches them. The expected placements are what `shardsched query` (byte-identical with
//! Fluxion's resource-query on these) gives on the same graph and jobspecs.

use shardsched_proto::msg::client_shard::{IdempotencyKey, Submit};
use shardsched_proto::msg::{Generation, JobState, MatchPolicy, NodeGen, QueueConfig, QueuePolicy};
use shardsched_resource::ResourceGraph;
use shardsched_shard::{CoreOptions, ShardCore};

/// Some time in 2027, ms.
const NOW: u64 = 1_800_000_000_000;

const NODES: [&str; 4] = ["n0", "n1", "n2", "n3"];

/// cluster → n0..n3 (perf_class 3, 2, 1, 2) → 4 cores each.
fn graph() -> ResourceGraph {
    let mut nodes = vec![
        r#"{"id": "0", "metadata": {"type": "cluster", "name": "c0", "id": 0, "paths": {"containment": "/c0"}}}"#
            .to_string(),
    ];
    let mut edges = Vec::new();
    let mut uniq = 1;
    for (i, (name, class)) in NODES.iter().zip([3, 2, 1, 2]).enumerate() {
        let node = uniq;
        nodes.push(format!(
            r#"{{"id": "{node}", "metadata": {{"type": "node", "name": "{name}", "id": {i}, "rank": {i}, "properties": {{"perf_class": "{class}"}}, "paths": {{"containment": "/c0/{name}"}}}}}}"#
        ));
        edges.push(format!(r#"{{"source": "0", "target": "{node}"}}"#));
        uniq += 1;
        for c in 0..4 {
            let id = i * 4 + c;
            nodes.push(format!(
                r#"{{"id": "{uniq}", "metadata": {{"type": "core", "id": {id}, "paths": {{"containment": "/c0/{name}/core{id}"}}}}}}"#
            ));
            edges.push(format!(r#"{{"source": "{node}", "target": "{uniq}"}}"#));
            uniq += 1;
        }
    }
    let text = format!(
        r#"{{"graph": {{"nodes": [{}], "edges": [{}]}}}}"#,
        nodes.join(", "),
        edges.join(", ")
    );
    shardsched_resource::read_jgf(&text).expect("graph")
}

fn core(match_policy: &str) -> ShardCore {
    let queue = QueueConfig {
        name: "batch".into(),
        queue_policy: QueuePolicy::Easy,
        match_policy: MatchPolicy::parse(match_policy).expect("a policy query takes"),
        queue_depth: 32,
        reservation_depth: 1,
        default_duration_ms: 60_000,
        max_duration_ms: 3_600_000,
        definition: NODES.iter().map(|n| n.to_string()).collect(),
        enabled: true,
        started: true,
        array_elements_max: shardsched_proto::limits::ARRAY_ELEMENTS_DEFAULT,
    };
    let owned: Vec<NodeGen> = NODES
        .iter()
        .map(|n| NodeGen {
            node: n.to_string(),
            generation: Generation(1),
        })
        .collect();
    ShardCore::with_graph(graph(), &queue, 3, &owned, CoreOptions::default()).expect("core")
}

/// Submits `jobspec` (JSON), schedules, and returns the running job's nodes and the number
/// of cores its R gives it.
fn run_one(core: &mut ShardCore, key: u8, jobspec: &str) -> (Vec<String>, usize) {
    let submit = Submit {
        idempotency_key: IdempotencyKey([key; 16]),
        jobspec_json: jobspec.to_string(),
        urgency: None,
        array: None,
        signature: None,
    };
    let job = core.handle_submit(NOW, "alice", &submit).expect("accepted");
    core.tick(NOW).expect("tick");
    let record = core.job(job.id).expect("job");
    assert_eq!(record.state, JobState::Running, "{jobspec}");
    let r: serde_json::Value =
        serde_json::from_str(record.r_json.as_deref().expect("R")).expect("R is JSON");
    let cores = r["execution"]["R_lite"]
        .as_array()
        .expect("R_lite")
        .iter()
        .map(|e| {
            let ranks = shardsched_resource::parse_idset(e["rank"].as_str().expect("rank"), 64)
                .expect("ranks")
                .len();
            let cores = e["children"]["core"].as_str().expect("cores");
            ranks
                * shardsched_resource::parse_idset(cores, 64)
                    .expect("cores")
                    .len()
        })
        .sum();
    (record.nodes.clone(), cores)
}

/// `node[1] -> slot[1] -> core[1]`, for an hour.
const ONE_CORE_ON_A_NODE: &str = r#"{"version": 9999, "resources": [{"type": "node", "count": 1, "with": [{"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 1}]}]}], "tasks": [{"command": ["app"], "slot": "task", "count": {"per_slot": 1}}], "attributes": {"system": {"duration": 3600}}}"#;

#[test]
fn a_shard_schedules_with_every_policy_query_takes() {
    // (policy, the node of the first job, its cores: whole nodes under *nodex)
    let cases: &[(&str, &str, usize)] = &[
        ("first", "n3", 1),
        ("firstnodex", "n3", 4),
        ("high", "n3", 1),
        ("low", "n0", 1),
        ("hinode", "n3", 1),
        ("lonode", "n0", 1),
        ("hinodex", "n3", 4),
        ("lonodex", "n0", 4),
        // Lowest perf_class first.
        ("variation", "n2", 1),
        // Stop-on-1 visits the highest ids first even when preferring low ones.
        (
            "policy=low node_centric=true stop_on_1_matches=true",
            "n3",
            1,
        ),
        ("policy=low node_centric=true node_exclusive=true", "n0", 4),
    ];
    for &(policy, node, cores) in cases {
        let mut core = core(policy);
        let (nodes, n) = run_one(&mut core, 1, ONE_CORE_ON_A_NODE);
        assert_eq!((nodes, n), (vec![node.to_string()], cores), "{policy}");
    }
    // Under variation a second one-core job stays on n2 (class 1, cores free); a whole
    // node's worth of cores then goes to the next class, n1 and n3 tying at 2: n1, the
    // first in graph order.
    let mut core = core("variation");
    run_one(&mut core, 1, ONE_CORE_ON_A_NODE);
    assert_eq!(run_one(&mut core, 2, ONE_CORE_ON_A_NODE).0, ["n2"]);
    let four = ONE_CORE_ON_A_NODE.replace(
        r#""type": "core", "count": 1"#,
        r#""type": "core", "count": 4"#,
    );
    assert_eq!(run_one(&mut core, 3, &four), (vec!["n1".to_string()], 4));
}

#[test]
fn a_job_may_offer_alternatives() {
    let job = |resources: &str| {
        format!(
            r#"{{"version": 9999, "resources": {resources}, "tasks": [{{"command": ["app"], "slot": "a", "count": {{"per_slot": 1}}}}], "attributes": {{"system": {{"duration": 3600}}}}}}"#
        )
    };
    // Or-slots: a node with either 3 cores or 5 cores (no node has 5): the 3-core slot.
    let or_slots = job(
        r#"[{"type": "node", "count": 1, "with": [{"type": "slot", "count": 1, "label": "a", "with": [{"type": "core", "count": 3}]}, {"type": "slot", "count": 1, "label": "b", "with": [{"type": "core", "count": 5}]}]}]"#,
    );
    // xor_slot: gpus (none here) or 2 cores.
    let xor_slots = job(
        r#"[{"type": "node", "count": 1, "with": [{"type": "xor_slot", "count": 1, "label": "a", "with": [{"type": "gpu", "count": 1}]}, {"type": "xor_slot", "count": 1, "label": "b", "with": [{"type": "core", "count": 2}]}]}]"#,
    );
    // (policy, nodes and cores of the or-slot job, then of the xor_slot job)
    let cases = [
        ("first", ("n3", 3), ("n2", 2)),
        ("high", ("n3", 3), ("n2", 2)),
        ("lonodex", ("n0", 4), ("n1", 4)),
    ];
    for (policy, or, xor) in cases {
        let mut core = core(policy);
        let got = run_one(&mut core, 1, &or_slots);
        assert_eq!(got, (vec![or.0.to_string()], or.1), "{policy}: or-slots");
        let got = run_one(&mut core, 2, &xor_slots);
        assert_eq!(got, (vec![xor.0.to_string()], xor.1), "{policy}: xor_slot");
    }
}

/// Every policy a queue may name reaches the shard's matcher as what `query -P` makes of the
/// same text: the wire's names and knobs read back by the matcher's own parser.
#[test]
fn every_wire_policy_is_a_matcher_policy() {
    let knobs = (0..16u8).map(MatchPolicy::Knobs);
    for p in MatchPolicy::ALL.into_iter().chain(knobs) {
        let m = shardsched_matcher::MatchPolicy::parse(p.as_str()).expect("the matcher reads it");
        if let MatchPolicy::Knobs(bits) = p {
            let want = (bits & 1 != 0, bits & 2 != 0, bits & 4 != 0, bits & 8 != 0);
            let got = (
                m.prefer_high,
                m.node_centric,
                m.node_exclusive,
                m.stop_at_first,
            );
            assert_eq!(got, want, "{}", p.as_str());
        }
    }
}
