//! The pure core of the node agent (`shardsched node`): which shard may start work on this
//! node, the table of the jobs it runs here, the lease that kills them when their shard
//! falls silent, and the reports. No I/O, no clock, no threads: the agent's driver (crate
//! `shardsched-node`) passes every input in with the time, and carries out the
//! [`Action`]s the core asks for. The same core runs under property tests and, later, a
//! simulator.
//!
//! # The rules it keeps
//!
//! - **Fencing.** A launch is accepted only from the node's current owner (the queue whose
//!   shard the coordinator named) at the owner's current generation. The agent learns a new
//!   owner only from the coordinator ([`AgentCore::handle_owner`]: registration, a move's
//!   `Acquire`, a cancelled move's return), never from a shard, and only at a newer
//!   generation. While any process of another shard's job remains, the new owner's launches
//!   are refused: a node never runs two shards' jobs at once.
//! - **Kills** are accepted only from the shard that launched the job.
//! - **A launch starts a run once.** A launch of a live job, or a repeat of the launch
//!   that started a run ended here (delivered again after the job was killed), starts
//!   nothing; a job launched anew after its run ended here (requeued: the new run has its
//!   own R) runs again.
//! - **The lease.** Every request from a shard renews that shard's lease. A shard whose
//!   jobs run here and that has not been heard from for half the heartbeat timeout has them
//!   killed ([`AgentCore::tick`]), before the coordinator marks the node down (at the whole
//!   timeout) and the shard requeues them: a requeued job never runs twice. The shard takes
//!   them as killed only a lease (and more) after the last request it *sent* here (see the
//!   `lease` module). The time of the last renewal is persisted now and then
//!   ([`Action::PersistLease`]), never later than it was, so a restarted agent does not
//!   grant a lease longer than the shard believes.
//! - **Reports** say, per job, whether processes may still run (launching, running,
//!   stopping) or how they ended; an ended job is reported until its shard says it has
//!   recorded the end ([`AgentCore::handle_renew`]'s `seen`).
//!
//! # The loop
//!
//! ```text
//! driver                                   core
//! ──────                                   ────
//! coordinator: Owner{queue, generation} ─► handle_owner
//! shard: Launch / Kill / Renew / Forget ─► handle_launch / handle_kill / handle_renew / …
//! supervisor started / ended ────────────► handle_spawned / handle_ended
//! timer ─────────────────────────────────► tick(now)
//!                                          take_actions() ─► Spawn, Kill, RemoveFiles,
//!                                                            PersistLease
//! ```
//!
//! ```
//! use shardsched_node_core::{Action, AgentCore};
//! use shardsched_wire::msg::agent::{NodeOwner, OwnerChange};
//! use shardsched_wire::msg::Generation;
//!
//! let mut core = AgentCore::new("node3", 30_000);
//! let owner = NodeOwner { queue: "batch".into(), generation: Generation(4) };
//! core.handle_owner(0, owner, OwnerChange::Registered).unwrap();
//! assert!(core.clean_of("batch"));
//! assert!(core.take_actions().is_empty());
//! ```

mod core;
mod lease;
pub mod pmi;
mod refused;

pub use crate::core::{Action, AgentCore, Recovered};
pub use crate::lease::LEASE_PERSIST_FRACTION;
pub use crate::refused::Refused;
