//! The queue manager: one queue's pending jobs, ordered and driven through the matcher by a
//! queue policy (fcfs, easy, hybrid, conservative), as a pure state machine.
//!
//! Each shard runs one [`QueueManager`] over its own resource graph. It does no I/O, reads
//! no clock and draws no random numbers: the caller passes time in and takes decisions out,
//! so the same core runs in a shard, under a deterministic simulator, and in virtual time
//! in replay (crate `shardsched-replay`). The loop a reader must understand:
//!
//! 1. inputs — [`QueueManager::submit`], [`QueueManager::cancel`],
//!    [`QueueManager::complete`] (a job ended at `now`),
//!    [`QueueManager::set_availability`] (a vertex went up or down),
//!    [`QueueManager::set_priority`], [`QueueManager::hold`] and
//!    [`QueueManager::release`] (a job kept out of the pending order, and let back in);
//! 2. [`QueueManager::schedule`]`(now)` — one cycle of the policy (see [`cycle`] for what
//!    a cycle does and how it avoids asking the matcher questions whose answer cannot have
//!    changed);
//! 3. outputs — [`QueueManager::poll_event`] until `None`: jobs started with their
//!    allocation (R), reservations made or lost, jobs denied, completed, cancelled.
//!
//! Pending jobs are ordered by priority (higher first), then submit time, then arrival
//! order. A job that could never fit the queue's *definition* (the graph it was built with)
//! is denied at submit; one that fits the definition but not what is up now waits aside,
//! does not count against the queue depth, and comes back when availability changes.
//! Durations: a job without one gets the queue's default; one above the maximum is denied;
//! backfill needs finite durations (a job of unlimited duration blocks every reservation
//! behind it).
//!
//! ```
//! use shardsched_jobspec::Shorthand;
//! use shardsched_qmanager::{Event, JobRequest, Params, QueuePolicy, QueueManager};
//!
//! let graph = shardsched_resource::generated_cluster(4).build().unwrap();
//! let mut qm = QueueManager::new(graph, Params::with_policy(QueuePolicy::Easy)).unwrap();
//! let job = |id, nodes, duration| JobRequest {
//!     id,
//!     jobspec: Shorthand { nodes: Some(nodes), duration, command: vec!["app".into()],
//!                          ..Shorthand::default() }.to_jobspec().unwrap(),
//!     priority: 0,
//!     submit_time: 0,
//!     user: 1,
//! };
//! qm.submit(job(1, 3, 100)).unwrap(); // starts now
//! qm.submit(job(2, 4, 100)).unwrap(); // must wait for job 1: reserved at 100
//! qm.submit(job(3, 1, 50)).unwrap();  // fits before the reservation: backfilled
//! qm.submit(job(4, 1, 500)).unwrap(); // would delay job 2: waits
//! qm.schedule(0).unwrap();
//! let events: Vec<Event> = std::iter::from_fn(|| qm.poll_event()).collect();
//! let started: Vec<u64> = events.iter().filter_map(|e| match e {
//!     Event::Started { id, .. } => Some(*id),
//!     _ => None,
//! }).collect();
//! assert_eq!(started, vec![1, 3]);
//! assert!(events.contains(&Event::Reserved { id: 2, at: 100 }));
//! ```
//!
//! Replaying workloads through it (`shardsched replay`: the Standard Workload Format, virtual
//! time, synthetic workloads, the schedule checker) is the crate `shardsched-replay`'s work.

pub mod cycle;
pub mod error;
pub mod event;
mod held;
mod hold;
mod keep;
pub mod params;
mod place;
pub mod queue;
mod redefine;
mod replan;
mod reservations;
mod restore;
mod shapes;
mod sweep;
#[cfg(test)]
mod test_support;
mod whole;
mod without;

pub use cycle::CycleKind;
pub use error::QueueError;
pub use event::{DenyReason, Event, JobId, JobRequest, JobView, WaitReason};
pub use hold::{hold_id, is_hold_id};
pub use keep::{KEEP_CHECK_INSTANTS_MAX, KEEP_CHECK_RESERVATIONS_MAX};
pub use params::{DEPTH_MAX, Params, QUEUE_DEPTH_DEFAULT, QueuePolicy, RESERVATION_DEPTH_DEFAULT};
pub use queue::{FREED_INTERVALS_MAX, QueueManager, Stats};
pub use shapes::SHAPES_MAX;
pub use whole::WHOLE_NODE_ROUNDS_MAX;
