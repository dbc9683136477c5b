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
//! A node's [`Generation`] is bumped whenever its owner changes, and the coordinator writes it
//! ([`Durable`]) before any shard hears of it, so a shard can refuse a command older than one
//! it has seen. Across restarts the owner computed from the (possibly edited) configuration is
//! compared with the durable one: same owner, same generation; different owner, generation + 1.
//! A node first seen gets generation 1 if owned, 0 if not.
//!
//! # Moves outlive restarts
//!
//! An owner set by a node move (`queue move`, `start --take`) is an admin's decision, not
//! the configuration's: such a node ([`DurableNode::moved`]) keeps its durable owner across
//! restarts as long as that queue still defines it, instead of going back to the owner the
//! rule above gives. A node of an unfinished move (named by [`Durable::moves`]) keeps its
//! durable owner and generation whatever the configuration says, so that the move resumes
//! exactly where it was (docs/MOVES.md).
//!
//! Generator ids (the FLUID field naming a shard) are assigned once per queue name and kept
//! forever, even for queues removed from the configuration, so a job id never names two
//! shards.

use std::collections::BTreeMap;

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use shardsched_proto::fluid::GENERATOR_ID_MAX;
use shardsched_proto::msg::{Generation, NodeFlags};

use crate::config::Config;
use crate::moves::MoveRecord;

/// Version of the [`Durable`] file format.
pub const DURABLE_FORMAT: u32 = 1;
/// The first generator id handed out (0 is left unused, so it never names a shard).
pub const GENERATOR_ID_FIRST: u16 = 1;

/// What the coordinator keeps on disk between runs: generator ids and each node's owner and
/// generation. Encoded as TOML by [`Durable::to_toml`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Durable {
    /// [`DURABLE_FORMAT`].
    pub format: u32,
    /// Queue name → generator id, for every queue ever configured.
    #[serde(default)]
    pub generators: BTreeMap<String, u16>,
    /// Node name → owner and generation, for every node ever seen.
    #[serde(default)]
    pub nodes: BTreeMap<String, DurableNode>,
    /// The move journal, compacted: the records of the moves not finished when it was
    /// written ([`MoveMachine::active_records`](crate::moves::MoveMachine::active_records)).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moves: Vec<MoveRecord>,
    /// The id the next move gets (0 when no move was ever made: ids start at 1).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub next_move_id: u64,
    /// The queue table as changed at run time (`queue add|remove|update`); it replaces the
    /// configuration file's queues until `reload` (`None`: the file is authoritative).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_table: Option<crate::queue_table::RuntimeQueues>,
    /// Queue name → the run-time state an admin set (enable/disable/start/stop). A queue
    /// absent here runs as its configuration says; one present keeps the admin's state
    /// across restarts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub queues: BTreeMap<String, DurableQueue>,
}

/// A queue's run-time state as an admin set it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DurableQueue {
    /// Accepts submissions.
    pub enabled: bool,
    /// Schedules.
    pub started: bool,
    /// Why it was disabled (empty when enabled, or when no reason was given).
    #[serde(default)]
    pub reason: String,
}

/// One node's durable ownership.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DurableNode {
    /// Owning queue; absent when unassigned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Its generation.
    pub generation: u64,
    /// The owner was set by a node move (see the module documentation).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub moved: bool,
    /// Marked down by an admin, with the reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down: Option<String>,
    /// Drained by an admin, with the reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drained: Option<String>,
}

impl DurableNode {
    /// The node's admin flags, if it has any.
    pub fn flags(&self) -> Option<NodeFlags> {
        (self.down.is_some() || self.drained.is_some()).then(|| NodeFlags {
            down: self.down.clone(),
            drained: self.drained.clone(),
        })
    }
}

/// The coordinator's intent for every node, plus each queue's generator id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ownership {
    /// Owner per node (index into [`Config::queues`]), by node index.
    pub owner: Vec<Option<usize>>,
    /// Generation per node, by node index.
    pub generation: Vec<Generation>,
    /// Generator id per queue, by queue index.
    pub generator: Vec<u16>,
}

/// Durable state could not be used.
#[derive(Debug, thiserror::Error)]
pub enum DurableError {
    /// The file is not a durable state of a format this build reads.
    #[error("coordinator state is unreadable: {0}")]
    Decode(String),
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

impl Durable {
    /// Parses a durable state written by [`Durable::to_toml`].
    pub fn from_toml(text: &str) -> Result<Durable, DurableError> {
        let durable: Durable =
            toml::from_str(text).map_err(|e| DurableError::Decode(e.to_string()))?;
        if durable.format != DURABLE_FORMAT {
            return Err(DurableError::Decode(format!(
                "format {} (this build reads {DURABLE_FORMAT})",
                durable.format
            )));
        }
        Ok(durable)
    }

    /// The state as TOML text.
    pub fn to_toml(&self) -> String {
        // Only strings, integers and maps: serialization cannot fail.
        toml::to_string(self).unwrap_or_default()
    }
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
/// the owner changed) and generator ids (kept, new queues get fresh ones). Returns the
/// ownership and the durable state to write before anything is sent.
pub fn reconcile(
    config: &Config,
    mut owner: Vec<Option<usize>>,
    previous: &Durable,
) -> Result<(Ownership, Durable), DurableError> {
    keep_moved_owners(config, &mut owner, previous)?;
    let mut next = Durable {
        format: DURABLE_FORMAT,
        generators: previous.generators.clone(),
        nodes: previous.nodes.clone(),
        moves: previous.moves.clone(),
        next_move_id: previous.next_move_id,
        queue_table: previous.queue_table.clone(),
        queues: previous.queues.clone(),
    };
    let mut generator = Vec::with_capacity(config.queues.len());
    for q in &config.queues {
        let id = match next.generators.get(&q.name) {
            Some(&id) => id,
            None => {
                let id = next
                    .generators
                    .values()
                    .max()
                    .map_or(Some(GENERATOR_ID_FIRST), |m| m.checked_add(1))
                    .filter(|&id| id <= GENERATOR_ID_MAX)
                    .ok_or_else(|| DurableError::GeneratorsExhausted {
                        queue: q.name.clone(),
                    })?;
                next.generators.insert(q.name.clone(), id);
                id
            }
        };
        generator.push(id);
    }

    let mut generation = Vec::with_capacity(owner.len());
    for (node, owned_by) in config.cluster.nodes.iter().zip(&owner) {
        let owner_name = owned_by
            .and_then(|qi| config.queues.get(qi))
            .map(|q| q.name.clone());
        let previous_node = next.nodes.get(&node.name);
        let (g, moved) = match previous_node {
            None => (u64::from(owner_name.is_some()), false),
            Some(prev) if prev.owner == owner_name => (prev.generation, prev.moved),
            Some(prev) => (prev.generation.saturating_add(1), false),
        };
        // Admin flags belong to the node, whoever owns it.
        let (down, drained) =
            previous_node.map_or((None, None), |p| (p.down.clone(), p.drained.clone()));
        next.nodes.insert(
            node.name.clone(),
            DurableNode {
                owner: owner_name,
                generation: g,
                moved,
                down,
                drained,
            },
        );
        generation.push(Generation(g));
    }
    Ok((
        Ownership {
            owner,
            generation,
            generator,
        },
        next,
    ))
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
        if !(prev.moved || is_pinned) {
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

fn is_zero(v: &u64) -> bool {
    *v == 0
}
