//! The shard's pure core: one queue's node table, job table, queue manager and sim
//! executor, and the records it journals — no I/O, no clock, no randomness. The process
//! around it (QUIC, the journal on disk, the exec executor's processes, timers) is
//! `shardsched-shard`, which drives it; a deterministic simulator can drive it the same way.
//!
//! # The one loop to understand
//!
//! ```text
//!   inputs, each with now_ms:   handle_submit, handle_cancel, set_queue_state,
//!                               handle_release/incoming/acquire/reclaim/withdraw/cancel_jobs,
//!                               apply_assignment, set_node_flag (down, drained),
//!                               handle_job_ended (exec)
//!   then once per batch:        tick(now_ms)  — sim completions, scheduling passes
//!   outputs, polled:            take_journal()      records to make durable first
//!                               take_transitions()  node up/down/released, for the log
//!                               take_released()     reports for the coordinator
//!                               take_exec_actions() launches and kills (exec)
//!   reads:                      snapshot(), status(now), held(), next_wakeup_ms()
//!   checks:                     invariants()  (debug_assert!s guard each transition too)
//! ```
//!
//! A driver commits what `take_journal` returned before it publishes the snapshot or
//! answers the batch, so what a client was told survives a crash; a restarted shard is
//! rebuilt with [`ShardCore::restored`] from what the journal read back.
//!
//! ```
//! use shardsched_wire::msg::client_shard::{IdempotencyKey, Submit};
//! use shardsched_wire::msg::{Generation, JobState, MatchPolicy, NodeGen, QueueConfig, QueuePolicy};
//! use shardsched_shard_core::{CoreOptions, ShardCore};
//!
//! let cluster = shardsched_resource::read_cluster_spec(
//!     "name = \"c\"\n[[nodes]]\nhosts = \"n[0-1]\"\ncores_per_socket = 4\n").unwrap();
//! let graph = shardsched_resource::keep_types(&cluster, shardsched_resource::SCHEDULER_TYPES).unwrap();
//! let queue = QueueConfig {
//!     name: "batch".into(), queue_policy: QueuePolicy::Easy, match_policy: MatchPolicy::First,
//!     queue_depth: 32, reservation_depth: 1, default_duration_ms: 60_000,
//!     max_duration_ms: 3_600_000, definition: vec!["n0".into(), "n1".into()],
//!     enabled: true, started: true, array_elements_max: 100_000,
//! };
//! let owned = vec![NodeGen { node: "n0".into(), generation: Generation(1) }];
//! let mut core = ShardCore::with_graph(graph, &queue, 7, &owned, CoreOptions::default()).unwrap();
//!
//! let jobspec = shardsched_jobspec::Shorthand { tasks: Some(2), duration: 10,
//!     command: vec!["app".into()], ..Default::default() }.to_jobspec().unwrap();
//! let submit = Submit { idempotency_key: IdempotencyKey([1; 16]),
//!     jobspec_json: jobspec.to_json().to_string(), urgency: None, array: None,
//!     signature: None };
//! let now = 1_800_000_000_000;
//! let job = core.handle_submit(now, "alice", &submit).unwrap();
//! core.tick(now).unwrap();                      // the batch is scheduled: it starts
//! assert_eq!(core.job(job.id).unwrap().state, JobState::Running);
//! assert_eq!(core.job(job.id).unwrap().nodes, vec!["n0"]);  // only owned nodes
//! assert_eq!(core.next_wakeup_ms(), Some(now + 10_000));   // when its sim run ends
//! core.tick(now + 10_000).unwrap();
//! assert_eq!(core.job(job.id).unwrap().state, JobState::Completed);
//! assert_eq!(core.invariants(), Ok(()));
//! ```
//!
//! # Who owns what
//!
//! - [`nodes::NodeTable`]: every node's generation, holding (owned, outgoing, incoming, not
//!   owned) and flags (drained, down, with reasons) — the only copy; what is up, what the
//!   queue manager may use and the status report are computed from it;
//! - the job side of [`ShardCore`]: the [`table::JobTable`] of records (shared with
//!   snapshots copy-on-write), the live pending and running sets, sim ends and the exec
//!   executor's kill plans — kept equal to the queue manager's view of its jobs;
//! - the queue manager ([`shardsched_qmanager`]): pending order, allocations, reservations;
//! - the outbox: journal records, transitions, `Released` reports and exec actions until
//!   the driver takes them.
//!
//! # Modules
//!
//! - [`core`]: [`ShardCore`] — submit, cancel, queue state, moves, nodes down/up, drain,
//!   tick, exec launches/kills/ends, status, restore, invariants;
//! - [`nodes`]: the node table and the move commands it applies;
//! - [`job`], [`table`]: the job records and the copy-on-write table that holds them;
//! - [`journal`]: the records the shard journals (its own types), and [`journal::MemJournal`];
//! - [`snapshot`]: the immutable view reads are served from;
//! - [`assign`]: from the coordinator's assignment to a graph and queue parameters;
//! - [`exec`]: the exec executor's job-directory layout and [`exec::JobEnd`];
//! - [`limits`]: every bound of the core, named.

pub mod agents;
pub mod assign;
pub mod core;
pub mod error;
pub mod exec;
pub mod history;
pub mod job;
pub mod journal;
pub mod limits;
pub mod nodes;
pub mod snapshot;
pub mod status_rows;
pub mod table;

pub use crate::core::{
    CoreExecutor, CoreOptions, ExecAction, ReportClock, RestoreSummary, ShardCore, Submitted,
    Transition, TransitionKind, Violation,
};
pub use error::ShardError;
pub use job::{Hold, JobRecord, LimitHold, Reason};
pub use snapshot::Snapshot;
