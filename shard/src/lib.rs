//! One queue's scheduling shard as a process: the driver around the pure core
//! ([`shardsched_shard_core`], re-exported here) that connects it to the coordinator,
//! serves clients over QUIC, journals what it changes, and really runs jobs with the `exec`
//! executor ([`exec`]). The core decides; this crate only moves bytes and time.
//!
//! # The shard's loop
//!
//! ```text
//!   clients ──QUIC──► serve(client_shard) ─┐ submit, cancel        ┌─► reads: jobs, job info
//!   coordinator ────► serve(coord_shard) ──┤ queue state, moves    │   (from the snapshot,
//!                                          ▼                       │    never waiting)
//!                         bounded mpsc (COMMAND_QUEUE_CAPACITY)     │
//!                                          ▼                       │
//!   core task:  take every queued request (≤ BATCH_REQUESTS_MAX) ──►│ ShardCore::handle_*
//!               then ONE ShardCore::tick(now): sim completions + scheduling, once
//!               ShardCore::take_journal() → the journal's committer (group commit, fsync)
//!   publisher:  once that commit is durable: publish the Snapshot ──┘
//!               (arc-swap), answer the batch, hand launches/kills to the exec task
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
//! (docs/JOURNAL.md; a restarted shard rebuilds its core with [`ShardCore::restored`]).
//!
//! # Who owns what
//!
//! The core task alone owns the [`ShardCore`] (the node table, the job side, the queue
//! manager). Other tasks hold only what they are handed: the published [`Snapshot`]
//! (reads), the journal's committer thread (durability), the exec task (processes), the
//! transition log and the `Released` queue (reports to the coordinator).
//!
//! # Modules
//!
//! - [`driver`]: credentials, QUIC, registration, the core task, the exec task, shutdown;
//! - [`journal`]: the core's records on disk (format `shardsched-shard-journal v1`);
//! - [`exec`]: the exec executor — job directories, the supervisor, `recover`;
//! - [`limits`]: every bound of the driver (and the core's, re-exported);
//! - re-exported from the core: [`core`], [`nodes`], [`job`], [`table`], [`snapshot`],
//!   [`assign`].

pub mod agents;
pub mod driver;
pub mod error;
pub mod exec;
pub mod journal;
pub mod limits;

pub use shardsched_shard_core::{
    CoreExecutor, CoreOptions, ExecAction, JobRecord, Reason, RestoreSummary, ShardCore, Snapshot,
    Submitted, Transition, TransitionKind, assign, core, job, nodes, snapshot, status_rows, table,
};

pub use driver::{ExecOptions, Executor, ShardOptions, run};
pub use error::{DriverError, RESTART_EXIT_STATUS, ShardError};
