//! Each request that reaches the core, matched once to its core call: the one dispatch
//! the shard's driver and the simulator (`crates/sim`) both go through, so that what the
//! simulator proves is what the process runs. Also the two decisions a driver makes around
//! a (re)registration: which core to start ([`ShardCore::start`]) and what a later
//! assignment changes ([`ShardCore::reassigned`]).
//!
//! ```text
//!   client submit / cancel / urgency → ShardCore::handle_client
//!   coordinator command              → ShardCore::handle_coordinator   (move steps, queue
//!                                      state, node flags, dry runs, DisableIfIdle,
//!                                      Reconfigure)
//!   first registration's answer      → ShardCore::start (new, or restored from the journal)
//!   a re-registration's answer       → ShardCore::reassigned
//!   after either of the last two     → ShardCore::take_restart: the process exits for its
//!                                      supervisor to start it again (module `redefine`)
//! ```
//!
//! Reads (`Jobs`, `JobInfo`, `Output`; the coordinator's `Jobs` and `History`) are answered
//! by the driver (from the published snapshot, or a node's agent): they never reach the
//! core, and are refused here with [`RefusalCode::Internal`] should one arrive.

use shardsched_wire::Peer;
use shardsched_wire::msg::shard_coord::Assignment;
use shardsched_wire::msg::{Refusal, RefusalCode, client_shard, coord_shard};
use shardsched_wire::rpc::{Reply, Rpc};

use super::{CoreOptions, ShardCore};
use crate::error::ShardError;
use crate::journal::Restored;
use crate::nodes::Flag;

impl ShardCore {
    /// The core for a first registration's `assignment`: a new one when the journal
    /// read back nothing, else the journal's node table and jobs under the assignment
    /// ([`ShardCore::restored`]).
    pub fn start(
        assignment: &Assignment,
        options: CoreOptions,
        now_ms: u64,
        restored: &Restored,
    ) -> Result<ShardCore, ShardError> {
        if restored.is_empty() {
            ShardCore::new(assignment, options)
        } else {
            Ok(ShardCore::restored(assignment, options, now_ms, restored)?.0)
        }
    }

    /// A client's request that changes the core: submit, cancel or an urgency change, for
    /// `peer` (from its certificate).
    pub fn handle_client(
        &mut self,
        now_ms: u64,
        peer: &Peer,
        request: &client_shard::Request,
    ) -> Reply<client_shard::Response> {
        use client_shard::{Request, Response};
        match request {
            Request::Submit(submit) => {
                self.handle_submit(now_ms, &peer.name, submit)
                    .map(|s| Response::Submitted {
                        id: s.id,
                        duplicate: s.duplicate,
                    })
            }
            Request::Cancel { ids } => {
                Ok(Response::Cancelled(self.handle_cancel(now_ms, peer, ids)))
            }
            Request::Urgency { ids, change } => Ok(Response::Urgency(
                self.handle_urgency(now_ms, peer, ids, *change),
            )),
            Request::Jobs(_) | Request::JobInfo { .. } | Request::Output(_) => {
                Err(answered_by_the_driver(request))
            }
        }
    }

    /// A coordinator's command: one core call each (move steps, queue state, node flags,
    /// dry runs, `DisableIfIdle`).
    pub fn handle_coordinator(
        &mut self,
        now_ms: u64,
        request: &coord_shard::Request,
    ) -> Reply<coord_shard::Response> {
        use coord_shard::{Request, Response};
        let ack = |()| Response::Ack { stale: Vec::new() };
        match request {
            Request::SetQueueState { enabled, started } => {
                self.set_queue_state(*enabled, *started);
                Ok(ack(()))
            }
            Request::DisableIfIdle => self.disable_if_idle().map(ack),
            Request::SetNodeState {
                nodes,
                down,
                reason,
            } => self
                .set_node_flag(now_ms, nodes, Flag::Down, down.then_some(reason.as_str()))
                .map(ack),
            Request::SetNodeDrain {
                nodes,
                drained,
                reason,
            } => self
                .set_node_flag(
                    now_ms,
                    nodes,
                    Flag::Drained,
                    drained.then_some(reason.as_str()),
                )
                .map(ack),
            Request::DryRunRelease { nodes } => self.dry_run_release(nodes).map(Response::DryRun),
            Request::Release(r) => Ok(self.handle_release(now_ms, r)),
            Request::Incoming(r) => Ok(self.handle_incoming(now_ms, r)),
            Request::Acquire(r) => Ok(self.handle_acquire(now_ms, r)),
            Request::Reclaim(r) => Ok(self.handle_reclaim(now_ms, r)),
            Request::Withdraw(r) => Ok(self.handle_withdraw(now_ms, r)),
            Request::CancelJobs(r) => Ok(self.handle_cancel_jobs(now_ms, r)),
            Request::JobFacts { ids } => Ok(Response::JobFacts(self.job_facts(ids))),
            Request::Facts(facts) => {
                self.handle_job_facts(now_ms, facts);
                Ok(ack(()))
            }
            Request::SetLimits(limits) => {
                self.set_limits(limits.clone());
                Ok(ack(()))
            }
            Request::Allowances(grants) => {
                self.handle_allowances(now_ms, grants);
                Ok(ack(()))
            }
            Request::FairShare(update) => {
                self.handle_fairshare(now_ms, update);
                Ok(ack(()))
            }
            Request::Reconfigure(change) => Ok(self.handle_reconfigure(now_ms, change)),
            Request::Jobs(_) | Request::History(_) => Err(answered_by_the_driver(request)),
        }
    }

    /// Applies what a re-registration handed back: the queue's state and definition, what
    /// it owns and receives, node flags, the generator id. The queue's policies are fixed
    /// for the life of the core: a change there asks for a restart
    /// ([`ShardCore::take_restart`]).
    pub fn reassigned(&mut self, assignment: &Assignment) {
        let named: Vec<&str> = crate::assign::assigned_nodes(assignment).collect();
        if let Err(why) = self.take_config(&assignment.queue, &named) {
            self.restart_for(why);
        }
        self.set_limits(assignment.limits.clone());
        self.assign_allowances(&assignment.allowances);
        self.reassign_fairshare(assignment.fairshare.as_ref());
        self.apply_assignment(
            &assignment.owned,
            &assignment.incoming,
            Some(&assignment.flags),
        );
        if let Err(e) = self.set_generator_id(assignment.generator_id) {
            tracing::error!(queue = %self.queue, error = %e, "cannot use the new generator id");
        }
    }
}

/// The refusal for a request the driver answers itself (reads from the snapshot), should
/// one reach the core.
fn answered_by_the_driver<R: Rpc>(request: &R) -> Refusal {
    Refusal::new(
        RefusalCode::Internal,
        format!(
            "{} is answered by the driver, not by the core",
            request.kind()
        ),
    )
}

#[cfg(test)]
mod tests {
    use shardsched_wire::msg::QueueConfig;

    #[test]
    fn all_but_the_match_policy_and_the_durations_apply_in_place() {
        let running = QueueConfig {
            name: "q".into(),
            queue_policy: shardsched_wire::msg::QueuePolicy::Fcfs,
            match_policy: shardsched_wire::msg::MatchPolicy::First,
            queue_depth: 32,
            reservation_depth: 64,
            default_duration_ms: 60_000,
            max_duration_ms: 0,
            definition: vec!["node0".into()],
            enabled: true,
            started: true,
            array_elements_max: shardsched_wire::limits::ARRAY_ELEMENTS_DEFAULT,
        };
        let flags = QueueConfig {
            enabled: false,
            started: false,
            ..running.clone()
        };
        assert!(running.applies_in_place(&flags));
        let policy = QueueConfig {
            queue_policy: shardsched_wire::msg::QueuePolicy::Easy,
            queue_depth: 8,
            reservation_depth: 2,
            array_elements_max: 10,
            ..running.clone()
        };
        assert!(running.applies_in_place(&policy));
        let matching = QueueConfig {
            match_policy: shardsched_wire::msg::MatchPolicy::LoNode,
            ..running.clone()
        };
        assert!(!running.applies_in_place(&matching));
        let durations = QueueConfig {
            default_duration_ms: 1_000,
            ..running.clone()
        };
        assert!(!running.applies_in_place(&durations));
        let longest = QueueConfig {
            max_duration_ms: 1_000,
            ..running.clone()
        };
        assert!(!running.applies_in_place(&longest));
        let definition = QueueConfig {
            definition: vec!["node0".into(), "node1".into()],
            ..running.clone()
        };
        assert!(running.applies_in_place(&definition));
    }
}
