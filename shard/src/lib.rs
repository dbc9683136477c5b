//! One queue's scheduling shard: the whole cluster graph with only the queue's nodes
//! available, its own queue manager, a job table, and the `sim` executor — a pure core — plus
//! the async driver that connects it to the coordinator and serves clients over QUIC, and
//! the `exec` executor that really runs jobs under supervisor processes ([`exec`]).
//!
//! # The shard's loop
//!
//! ```text
//!   clients ──QUIC──► serve(client_shard) ─┐ submit, cancel        ┌─► reads: jobs, job info
//!   coordinator ────► serve(coord_shard) ──┤ queue state           │   (from the snapshot,
//!                                          ▼                       │    never waiting)
//!                         bounded mpsc (COMMAND_QUEUE_CAPACITY)     │
//!                                          ▼                       │
//!   core task:  take every queued request (≤ BATCH_REQUESTS_MAX) ──►│ ShardCore::handle_*
//!               then ONE ShardCore::tick(now): sim completions + scheduling, once
//!               ShardCore::take_journal() → the journal's committer (group commit, fsync)
//!   publisher:  once that commit is durable: publish the Snapshot ──┘
//!               (arc-swap), answer the batch
//!   core task:  meanwhile on to the next batch, or sleep until a request or next_wakeup_ms()
//! ```
//!
//! Batching is what makes thousands of submits per second possible: the fixed costs of
//! scheduling (a cycle's re-plan of reservations, the walk over the queue's head, the
//! snapshot) are paid once per batch instead of once per job. The batch is scheduled right
//! after it is taken in — never on a fixed tick — so a job submitted to a cluster with room
//! is allocated before its submit is even answered. The snapshot is published *before* the
//! answers go out, so a client that was told `Submitted` finds its job in `jobs`; and both
//! wait for the batch's journal commit, so what a client was told survives a SIGKILL
//! (docs/JOURNAL.md; a restarted shard rebuilds itself with [`ShardCore::restore`]).
//!
//! # The pure core
//!
//! [`ShardCore`] does no I/O and reads no clock: each input carries `now_ms`, and the
//! queue manager's decisions come out of [`ShardCore::tick`] into the job table. It is what
//! the tests drive directly (see `core/tests.rs` and the property test), and what the driver
//! drives for real.
//!
//! ```
//! use shardsched_proto::msg::client_shard::{IdempotencyKey, Submit};
//! use shardsched_proto::msg::{Generation, JobState, NodeGen, QueueConfig};
//! use shardsched_proto::msg::{MatchPolicy, QueuePolicy};
//! use shardsched_shard::{CoreOptions, ShardCore};
//!
//! let cluster = shardsched_resource::read_cluster_spec(
//!     "name = \"c\"\n[[nodes]]\nhosts = \"n[0-1]\"\ncores_per_socket = 4\n").unwrap();
//! let graph = shardsched_resource::keep_types(&cluster, shardsched_resource::SCHEDULER_TYPES).unwrap();
//! let queue = QueueConfig {
//!     name: "batch".into(), queue_policy: QueuePolicy::Easy, match_policy: MatchPolicy::First,
//!     queue_depth: 32, reservation_depth: 1, default_duration_ms: 60_000,
//!     max_duration_ms: 3_600_000, definition: vec!["n0".into(), "n1".into()],
//!     enabled: true, started: true,
//! };
//! let owned = vec![NodeGen { node: "n0".into(), generation: Generation(1) }];
//! let mut core = ShardCore::with_graph(graph, &queue, 7, &owned, CoreOptions::default()).unwrap();
//!
//! let jobspec = shardsched_jobspec::Shorthand { tasks: Some(2), duration: 10,
//!     command: vec!["app".into()], ..Default::default() }.to_jobspec().unwrap();
//! let submit = Submit { idempotency_key: IdempotencyKey([1; 16]),
//!     jobspec_json: jobspec.to_json().to_string(), priority: None };
//! let now = 1_800_000_000_000;
//! let job = core.handle_submit(now, "alice", &submit).unwrap();
//! core.tick(now).unwrap();                      // the batch is scheduled: it starts
//! assert_eq!(core.job(job.id).unwrap().state, JobState::Running);
//! assert_eq!(core.job(job.id).unwrap().nodes, vec!["n0"]);  // only owned nodes
//! assert_eq!(core.next_wakeup_ms(), Some(now + 10_000));   // when its sim run ends
//! core.tick(now + 10_000).unwrap();
//! assert_eq!(core.job(job.id).unwrap().state, JobState::Completed);
//! ```
//!
//! # Modules
//!
//! - [`core`]: [`ShardCore`] — submit, cancel, queue state, ownership, nodes down/up, tick,
//!   exec launches/kills/ends, status;
//! - [`exec`]: the exec executor — job directories, the supervisor, `recover`;
//! - [`job`], [`table`]: the job records and the copy-on-write table that holds them;
//! - [`journal`]: the records the shard journals and how they are read back;
//! - [`snapshot`]: the immutable view reads are served from;
//! - [`assign`]: from the coordinator's assignment to a graph and queue parameters;
//! - [`driver`]: credentials, QUIC, registration, the core task, the exec task, shutdown;
//! - [`limits`]: every bound, named.

pub mod assign;
pub mod core;
pub mod driver;
pub mod error;
pub mod exec;
pub mod job;
pub mod journal;
pub mod limits;
pub mod moves;
pub mod snapshot;
pub mod table;

pub use crate::core::{
    CoreExecutor, CoreOptions, ExecAction, RestoreSummary, ShardCore, Submitted,
};
pub use driver::{ExecOptions, Executor, ShardOptions, init_logging, run, run_until_signal};
pub use error::{DriverError, RESTART_EXIT_STATUS, ShardError};
pub use job::{JobRecord, Reason};
pub use snapshot::Snapshot;
