//! Property tests: ownership, generations and configuration files, over arbitrary
//! definitions.

use std::path::Path;

use proptest::prelude::*;

use super::*;
use crate::config::{Cluster, MatchPolicy, QueueDef, QueuePolicy};
use crate::ownership::{Start, assign_owners, reconcile};
use crate::records::Durable;

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
        owns: Vec::new(),
        started,
        enabled: true,
    }
}

/// Up to 6 queues over a cluster of up to 40 nodes, any definitions, any started flags,
/// some with `owns` (a part of their definition no earlier queue owns).
fn arbitrary_config() -> impl Strategy<Value = Config> {
    (2usize..40).prop_flat_map(|n| {
        let one = (
            proptest::collection::btree_set(0..n, 1..n.min(12)),
            any::<bool>(),
            proptest::collection::btree_set(0..n, 0..3),
        );
        proptest::collection::vec(one, 1..6).prop_map(move |queues| {
            let mut claimed = std::collections::BTreeSet::new();
            let queues = queues
                .into_iter()
                .enumerate()
                .map(|(i, (def, started, wanted))| {
                    let mut q = queue(i, def.iter().copied().collect(), started);
                    q.owns = wanted
                        .into_iter()
                        .filter(|n| def.contains(n) && claimed.insert(*n))
                        .collect();
                    q
                })
                .collect();
            Config {
                origin: "proptest".into(),
                cluster: cluster(n),
                default_queue: "q0".into(),
                queues,
                array_elements_max: 100,
                history_days: 90,
                agents: Default::default(),
                http_listen: None,
                limits: Default::default(),
                fairshare: None,
            }
        })
    })
}

/// The owner the rules give node `n`: the queue whose `owns` names it, else the first
/// started queue (by name) defining it, else the first stopped one.
fn expected_owner(config: &Config, n: usize) -> Option<usize> {
    let defining = |started: Option<bool>| {
        config
            .queues
            .iter()
            .position(|q| q.definition.contains(&n) && started.is_none_or(|s| q.started == s))
    };
    config
        .queues
        .iter()
        .position(|q| q.owns.contains(&n))
        .or_else(|| defining(Some(true)))
        .or_else(|| defining(None))
}

/// What the journal holds after a start from `start` (no move, no admin state).
fn journaled(start: &Start) -> Durable {
    Durable {
        limits: None,
        allowances: Vec::new(),
        fairshare: None,
        generators: start.generators.clone(),
        nodes: start.nodes.iter().cloned().collect(),
        ..Durable::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Whatever the definitions: every owned node is in its owner's definition, `owns`
    /// comes first, then started queues by name, and stopped queues only own what no started
    /// queue defines.
    #[test]
    fn ownership_invariants(config in arbitrary_config()) {
        let owners = assign_owners(&config);
        prop_assert_eq!(owners.len(), config.cluster.nodes.len());
        for (n, owner) in owners.iter().enumerate() {
            prop_assert_eq!(*owner, expected_owner(&config, n));
            if let Some(q) = owner {
                prop_assert!(config.queues[*q].definition.contains(&n));
            }
        }
        // Built in code or loaded, the core starts with exactly these owners.
        let (core, durable) = Core::new(config.clone(), &Durable::default(), 0)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(core.invariants(), Ok(()));
        for (qi, q) in config.queues.iter().enumerate() {
            let mine: Vec<usize> = (0..owners.len()).filter(|&n| owners[n] == Some(qi)).collect();
            prop_assert_eq!(core.owned_by(&q.name), config.node_names(&mine));
        }
        let mut ids: Vec<u16> = durable.generators.values().copied().collect();
        ids.sort_unstable();
        ids.dedup();
        prop_assert_eq!(ids.len(), config.queues.len());
    }

    /// Generations never go back, and move exactly where the owner changed.
    #[test]
    fn generations_are_fencing_numbers(config in arbitrary_config(), flips in proptest::collection::vec(any::<bool>(), 6)) {
        let first = assign_owners(&config);
        let start1 = reconcile(&config, first.clone(), &Durable::default())
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let durable1 = journaled(&start1);
        let mut edited = config.clone();
        for (q, flip) in edited.queues.iter_mut().zip(&flips) {
            q.started ^= *flip;
        }
        let second = assign_owners(&edited);
        let start2 = reconcile(&edited, second.clone(), &durable1)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        for n in 0..first.len() {
            let name = |qi: Option<usize>, c: &Config| qi.map(|i| c.queues[i].name.clone());
            let (g1, g2) = (start1.nodes[n].1.generation, start2.nodes[n].1.generation);
            if name(first[n], &config) == name(second[n], &edited) {
                prop_assert_eq!(g2, g1);
            } else {
                prop_assert_eq!(g2.0, g1.0 + 1);
            }
        }
        prop_assert_eq!(&start1.generators, &start2.generators);
        let start3 = reconcile(&edited, second, &journaled(&start2))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(start3, start2);
    }

    /// A configuration file with overlapping definitions (started or not) and disjoint
    /// `owns` is accepted, and gives the same owners as the configuration built in code:
    /// every node a started queue defines is owned by a started queue or by an `owns`.
    #[test]
    fn config_files_with_overlaps_load_with_the_same_owners(config in arbitrary_config()) {
        let mut text = format!(
            "default_queue = \"q0\"\n[cluster.inline]\n[[cluster.inline.nodes]]\nhosts = \"node[0-{}]\"\ncores_per_socket = 1\n",
            config.cluster.nodes.len() - 1
        );
        for q in &config.queues {
            let hosts = shardsched_resource::encode_hostlist(&config.node_names(&q.definition));
            text.push_str(&format!("[queues.{}]\nnodes = \"{hosts}\"\nstarted = {}\n", q.name, q.started));
            if !q.owns.is_empty() {
                let owns = shardsched_resource::encode_hostlist(&config.node_names(&q.owns));
                text.push_str(&format!("owns = \"{owns}\"\n"));
            }
        }
        let parsed = Config::parse(&text, "proptest.toml", Path::new("."))
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        let owners = assign_owners(&parsed);
        prop_assert_eq!(&owners, &assign_owners(&config));
        for q in parsed.queues.iter().filter(|q| q.started) {
            for &n in &q.definition {
                let owner = owners[n].map(|i| &parsed.queues[i]);
                prop_assert!(owner.is_some_and(|o| o.started || o.owns.contains(&n)), "{}", text);
            }
        }
    }
}
