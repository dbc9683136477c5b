//! Workload replay: the queue manager (`shardsched-qmanager`) driven through a recorded or
//! synthetic workload in virtual time, for `shardsched replay` and `shardsched workload`.
//!
//! Kept apart from the queue manager so that the scheduling core is the state machine alone:
//! a shard links no workload reader, generator or random number generator. Nothing here
//! models the scheduler; the decisions are the real queue manager's.
//!
//! - [`swf`] reads and writes the Standard Workload Format (bounded: every line and the line
//!   count have a named maximum);
//! - [`replay`] drives a [`shardsched_qmanager::QueueManager`] in virtual time and measures
//!   the scheduler time it took;
//! - [`metrics`] computes the standard measures (utilisation, waits, bounded slowdown);
//! - [`workload`] generates synthetic workloads from a seed;
//! - [`check`] verifies a replayed schedule from its output file alone.

pub mod check;
pub mod metrics;
pub mod replay;
pub mod swf;
pub mod workload;
