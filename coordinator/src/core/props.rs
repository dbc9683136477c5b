//! Property tests: ownership, generations and configuration files, over arbitrary
//! definitions.

use std::path::Path;

use proptest::prelude::*;

use super::*;
use crate::config::{Cluster, MatchPolicy, QueueDef, QueuePolicy};
use crate::ownership::{Durable, assign_owners, reconcile};

fn cluster(nodes: usize) -> Cluster {
    Cluster::from_spec(format!(
        "[[nodes]]\nhosts = \"node[0-{}]\"\ncores_per_socket = 1\n",
        nodes - 1
    ))
    .expect("cluster")
}

fn queue(i: usize, definition: Vec<usize>, started: bool) -> QueueDef {
    QueueDef {
        name: format!("q{i}"),
        policy: QueuePolicy::Fcfs,
        match_policy: MatchPolicy::First,
        queue_depth: 32,
        reservation_depth: 1,
        default_duration_ms: 60_000,
        max_duration_ms: 0,
        definition,
        started,
        enabled: true,
    }
}

/// Up to 6 queues over a cluster of up to 40 nodes, any definitions, any started flags.
fn arbitrary_config() -> impl Strategy<Value = Config> {
    (2usize..40).prop_flat_map(|n| {
        let one = (
            proptest::collection::btree_set(0..n, 1..n.min(12)),
            any::<bool>(),
        );
        proptest::collection::vec(one, 1..6).prop_map(move |queues| Config {
            origin: "proptest".into(),
            cluster: cluster(n),
            default_queue: "q0".into(),
            queues: queues
                .into_iter()
                .enumerate()
                .map(|(i, (def, started))| queue(i, def.into_iter().collect(), started))
                .collect(),
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Whatever the definitions: every owned node is in its owner's definition, started
    /// queues are served first, and stopped queues only own what no started queue defines.
    #[test]
    fn ownership_invariants(config in arbitrary_config()) {
        let owners = assign_owners(&config);
        prop_assert_eq!(owners.len(), config.cluster.nodes.len());
        for (n, owner) in owners.iter().enumerate() {
            let defining: Vec<usize> = config.queues.iter().enumerate()
                .filter(|(_, q)| q.definition.contains(&n)).map(|(i, _)| i).collect();
            let started_defining: Vec<usize> = defining.iter().copied()
                .filter(|&i| config.queues[i].started).collect();
            match owner {
                None => prop_assert!(defining.is_empty()),
                Some(q) => {
                    prop_assert!(defining.contains(q));
                    // The first started queue (by name) defining the node owns it, else the
                    // first stopped one.
                    let expected = started_defining.first().or(defining.first());
                    prop_assert_eq!(Some(q), expected);
                }
            }
        }
        // A valid configuration never has two started queues wanting one node, so each
        // started queue owns its whole definition.
        if crate::config::check(&config).is_ok() {
            let (core, durable) = Core::new(config.clone(), &Durable::default(), 0)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            for q in config.queues.iter().filter(|q| q.started) {
                prop_assert_eq!(core.owned_by(&q.name), config.node_names(&q.definition));
            }
            let mut ids: Vec<u16> = durable.generators.values().copied().collect();
            ids.sort_unstable();
            ids.dedup();
            prop_assert_eq!(ids.len(), config.queues.len());
        }
    }

    /// Generations never go back, and move exactly where the owner changed.
    #[test]
    fn generations_are_fencing_numbers(config in arbitrary_config(), flips in proptest::collection::vec(any::<bool>(), 6)) {
        let first = assign_owners(&config);
        let (own1, durable1) = reconcile(&config, first.clone(), &Durable::default())
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut edited = config.clone();
        for (q, flip) in edited.queues.iter_mut().zip(&flips) {
            q.started ^= *flip;
        }
        let second = assign_owners(&edited);
        let (own2, durable2) = reconcile(&edited, second.clone(), &durable1)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        for n in 0..first.len() {
            let name = |qi: Option<usize>, c: &Config| qi.map(|i| c.queues[i].name.clone());
            if name(first[n], &config) == name(second[n], &edited) {
                prop_assert_eq!(own2.generation[n], own1.generation[n]);
            } else {
                prop_assert_eq!(own2.generation[n].0, own1.generation[n].0 + 1);
            }
        }
        prop_assert_eq!(own1.generator, own2.generator);
        let (_, durable3) = reconcile(&edited, second, &durable2)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(durable3, durable2);
    }

    /// A configuration file is accepted exactly when its started definitions are disjoint,
    /// and then no node is owned by two started queues.
    #[test]
    fn config_files_accept_exactly_disjoint_started_queues(config in arbitrary_config()) {
        let mut text = format!(
            "default_queue = \"q0\"\n[cluster.inline]\n[[cluster.inline.nodes]]\nhosts = \"node[0-{}]\"\ncores_per_socket = 1\n",
            config.cluster.nodes.len() - 1
        );
        for q in &config.queues {
            let hosts = shardsched_resource::encode_hostlist(&config.node_names(&q.definition));
            text.push_str(&format!("[queues.{}]\nnodes = \"{hosts}\"\nstarted = {}\n", q.name, q.started));
        }
        let parsed = Config::parse(&text, "proptest.toml", Path::new("."));
        prop_assert_eq!(parsed.is_ok(), crate::config::check(&config).is_ok(), "{}", text);
        if let Ok(parsed) = parsed {
            let owners = assign_owners(&parsed);
            for q in parsed.queues.iter().filter(|q| q.started) {
                for &n in &q.definition {
                    prop_assert_eq!(owners[n].map(|i| parsed.queues[i].name.as_str()), Some(q.name.as_str()));
                }
            }
        }
    }
}
