//! Who owns which node (intent), with fencing numbers, and what of it is kept on disk.
//!
//! # The rule at start
//!
//! 1. Each queue owns the nodes its `owns` names (inside its definition, named by no other
//!    queue: [`Config`] checks it), started or not.
//! 2. Started queues, in name order, each own the rest of their definition minus the nodes
//!    an earlier rule or queue already gave: definitions of started queues may overlap, and
//!    a node defined by several of them goes to the first (that is what lets the others
//!    take it by a move while all run).
//! 3. Then stopped queues, in name order, own what is left of their definitions: nodes that
//!    no started queue defines. A stopped queue over batch's nodes (standby) therefore owns
//!    nothing, while a stopped queue over otherwise free nodes keeps them ready, so that
//!    starting it needs no move.
//! 4. Every other node is unassigned.
//!
//! # Generations and what is durable
//!
//! A node's [`Generation`] is bumped whenever its owner changes, and the coordinator journals
//! it ([`Durable`]) before any shard hears of it, so a shard can refuse a command older than
//! one it has seen. Across restarts the owner computed from the (possibly edited) configuration is
//! compared with the durable one: same owner, same generation; different owner, generation + 1.
//! A node first seen gets generation 1 if owned, 0 if not.
//!
//! # Moves outlive restarts
//!
//! An owner set by a node move (`queue move`, `start --take`) is an admin's decision, not
//! the configuration's: such a node ([`NodeIntent::kept`]) keeps its durable owner across
//! restarts as long as that queue still defines it, instead of going back to the owner the
//! rule above gives. A node of an unfinished move (named by [`Durable::moves`]) keeps its
//! durable owner and generation whatever the configuration says, so that the move resumes
//! exactly where it was (docs/MOVES.md).
//!
//! Generator ids (the FLUID field naming a shard) are assigned once per queue name and kept
//! forever, even for queues removed from the configuration, so a job id never names two
//! shards.

use std::collections::{BTreeMap, BTreeSet};

use shardsched_wire::fluid::GENERATOR_ID_MAX;
use shardsched_wire::msg::Generation;

use crate::config::Config;
use crate::moves::{MoveRecord, NodeIntent};
use crate::records::Durable;

/// The first generator id handed out (0 is left unused, so it never names a shard).
pub const GENERATOR_ID_FIRST: u16 = 1;

/// What a start begins from, before the unfinished moves are replayed over it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Start {
    /// Every node of the cluster with its intent, in cluster order.
    pub nodes: Vec<(String, NodeIntent)>,
    /// Queue name → generator id, for every queue ever configured.
    pub generators: BTreeMap<String, u16>,
}

/// Durable state could not be used with the configuration.
#[derive(Debug, thiserror::Error)]
pub enum DurableError {
    /// An unfinished move names a queue or node the configuration no longer has.
    #[error(
        "the move journal names {what}, which the configuration no longer has; \
         restore it in the configuration to let move {move_id} finish"
    )]
    MoveTarget {
        /// The move.
        move_id: u64,
        /// The queue or node, described.
        what: String,
    },
    /// Every generator id is in use.
    #[error("no generator id left for queue {queue} (all {GENERATOR_ID_MAX} are assigned)")]
    GeneratorsExhausted {
        /// The queue that needed one.
        queue: String,
    },
}

/// `known` with a fresh generator id for every name of `queues` it lacks (ids of known
/// names are kept, and an id is never given to a second name). Errors name the first queue
/// left without one.
pub fn assign_generators<'a>(
    known: &BTreeMap<String, u16>,
    queues: impl IntoIterator<Item = &'a str>,
) -> Result<BTreeMap<String, u16>, DurableError> {
    let mut generators = known.clone();
    for queue in queues {
        if generators.contains_key(queue) {
            continue;
        }
        let id = generators
            .values()
            .max()
            .map_or(Some(GENERATOR_ID_FIRST), |m| m.checked_add(1))
            .filter(|&id| id <= GENERATOR_ID_MAX)
            .ok_or_else(|| DurableError::GeneratorsExhausted {
                queue: queue.to_owned(),
            })?;
        generators.insert(queue.to_owned(), id);
    }
    Ok(generators)
}

/// Each node's owner at start (see the module documentation), by node index.
pub fn assign_owners(config: &Config) -> Vec<Option<usize>> {
    let mut owner = vec![None; config.cluster.nodes.len()];
    for (qi, q) in config.queues.iter().enumerate() {
        for &n in &q.owns {
            if let Some(slot @ None) = owner.get_mut(n) {
                *slot = Some(qi);
            }
        }
    }
    for pass_started in [true, false] {
        for (qi, q) in config.queues.iter().enumerate() {
            if q.started != pass_started {
                continue;
            }
            // After the started pass every node a started queue defines has an owner, so
            // a stopped queue takes only nodes no started queue defines.
            for &n in &q.definition {
                if let Some(slot @ None) = owner.get_mut(n) {
                    *slot = Some(qi);
                }
            }
        }
    }
    owner
}

/// Combines the owners at start with the previous durable state: generations (bumped where
/// the owner changed), admin flags (the node's, whoever owns it) and generator ids (kept;
/// new queues get fresh ones).
pub fn reconcile(
    config: &Config,
    mut owner: Vec<Option<usize>>,
    previous: &Durable,
) -> Result<Start, DurableError> {
    keep_moved_owners(config, &mut owner, previous)?;
    let generators = assign_generators(
        &previous.generators,
        config.queues.iter().map(|q| q.name.as_str()),
    )?;
    let nodes = config
        .cluster
        .nodes
        .iter()
        .zip(&owner)
        .map(|(node, owned_by)| {
            let owner = owned_by
                .and_then(|qi| config.queues.get(qi))
                .map(|q| q.name.clone());
            let before = previous.nodes.get(&node.name);
            let (generation, kept) = match before {
                None => (u64::from(owner.is_some()), false),
                Some(prev) if prev.owner == owner => (prev.generation.0, prev.kept),
                Some(prev) => (prev.generation.0.saturating_add(1), false),
            };
            let intent = NodeIntent {
                owner,
                generation: Generation(generation),
                kept,
                down: before.and_then(|p| p.down.clone()),
                drained: before.and_then(|p| p.drained.clone()),
            };
            (node.name.clone(), intent)
        })
        .collect();
    Ok(Start { nodes, generators })
}

/// Overrides the configuration's owners with the durable ones where a move set them (see the
/// module documentation). An unfinished move naming a queue or node the configuration no
/// longer has is an error: the move could neither finish nor be returned.
fn keep_moved_owners(
    config: &Config,
    owner: &mut [Option<usize>],
    previous: &Durable,
) -> Result<(), DurableError> {
    let mut pinned: BTreeSet<&str> = BTreeSet::new();
    for record in &previous.moves {
        if let MoveRecord::Started {
            move_id,
            from,
            to,
            nodes,
            ..
        } = record
        {
            for q in [from, to] {
                if !config.queues.iter().any(|c| &c.name == q) {
                    return Err(DurableError::MoveTarget {
                        move_id: move_id.0,
                        what: format!("queue {q}"),
                    });
                }
            }
            for ng in nodes {
                if !config.cluster.nodes.iter().any(|n| n.name == ng.node) {
                    return Err(DurableError::MoveTarget {
                        move_id: move_id.0,
                        what: format!("node {}", ng.node),
                    });
                }
                pinned.insert(&ng.node);
            }
        }
    }
    for (n, node) in config.cluster.nodes.iter().enumerate() {
        let Some(prev) = previous.nodes.get(&node.name) else {
            continue;
        };
        let is_pinned = pinned.contains(node.name.as_str());
        if !(prev.kept || is_pinned) {
            continue;
        }
        let Some(qi) = prev
            .owner
            .as_ref()
            .and_then(|o| config.queues.iter().position(|q| &q.name == o))
        else {
            continue;
        };
        if (is_pinned || config.queues[qi].definition.contains(&n))
            && let Some(slot) = owner.get_mut(n)
        {
            *slot = Some(qi);
        }
    }
    Ok(())
}
