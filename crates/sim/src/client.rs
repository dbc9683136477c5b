//! Clients and admins: the random workload (submits, retried with the same idempotency key
//! until answered; cancels) and the random admin actions, drawn from what `queue list`,
//! `resource list` and `queue moves` would show (the coordinator core's views), so that
//! most of them are ones the coordinator accepts.

use rand::Rng;
use rand::seq::IndexedRandom;
use rand_chacha::ChaCha8Rng;
use shardsched_coordinator_core::core::{Core, NodeFlag};
use shardsched_coordinator_core::moves::MoveStatus;
use shardsched_wire::msg::agent::JobSignature;
use shardsched_wire::msg::client_coord::{QueueAction, QueueAdmin, QueueSpec};
use shardsched_wire::msg::client_shard::{self, IdempotencyKey, Submit};
use shardsched_wire::msg::{JobId, MatchPolicy, QueuePolicy};
use shardsched_wire::rpc::Reply;

use crate::check::{Invariant, Violation, broken};
use crate::coord::{Admin, ReloadFile};
use crate::setup::{POLICIES, TableQueue, config_file, hostlist};
use shardsched_coordinator_core::Config;

/// The users submitting.
const USERS: [&str; 2] = ["alice", "bob"];
/// The ticket of a cancel (its answer changes nothing in the ledger).
pub(crate) const CANCEL_TICKET: u64 = u64::MAX;

/// One logical submission (one idempotency key), and what came of it.
#[derive(Debug)]
pub(crate) struct Submission {
    pub(crate) queue: String,
    pub(crate) owner: &'static str,
    request: client_shard::Request,
    /// The id it was acknowledged with.
    pub(crate) id: Option<JobId>,
    /// Answered for good (acknowledged or refused): not sent again.
    done: bool,
}

/// See the module documentation.
#[derive(Debug, Default)]
pub(crate) struct Clients {
    submissions: Vec<Submission>,
    /// Submits are signed (a seed whose shards run jobs through node agents, which run
    /// only signed jobs; the simulated agents check no signature).
    pub(crate) signed: bool,
}

impl Clients {
    /// A submit to send: a new one to a random queue, or (half the time, if any) one
    /// whose answer never came, again with its key. Returns its ticket.
    pub(crate) fn submit(
        &mut self,
        rng: &mut ChaCha8Rng,
        queues: &[String],
        jobspecs: &[String],
    ) -> Option<(u64, &Submission)> {
        let unanswered: Vec<usize> = (0..self.submissions.len())
            .filter(|&i| !self.submissions[i].done)
            .collect();
        let ticket = match unanswered.choose(rng) {
            Some(&i) if rng.random_bool(0.5) => i,
            _ => {
                let queue = queues.choose(rng)?.clone();
                let jobspec = jobspecs.choose(rng)?.clone();
                let mut key = [0u8; 16];
                key[..8].copy_from_slice(&(self.submissions.len() as u64).to_le_bytes());
                self.submissions.push(Submission {
                    queue,
                    owner: USERS.choose(rng).copied().unwrap_or("alice"),
                    request: client_shard::Request::Submit(Submit {
                        idempotency_key: IdempotencyKey(key),
                        jobspec_json: jobspec,
                        urgency: None,
                        array: None,
                        signature: self.signed.then(|| JobSignature {
                            cert_pem: "sim".to_owned(),
                            signature: vec![0],
                        }),
                    }),
                    id: None,
                    done: false,
                });
                self.submissions.len() - 1
            }
        };
        let submission = &self.submissions[ticket];
        Some((ticket as u64, submission))
    }

    /// The request of a submission.
    pub(crate) fn request(submission: &Submission) -> client_shard::Request {
        submission.request.clone()
    }

    /// The answer to submission `ticket`: the id it was acknowledged with, if it was.
    /// One key must always be one job.
    pub(crate) fn answered(
        &mut self,
        ticket: u64,
        answer: &Reply<client_shard::Response>,
    ) -> Result<Option<(JobId, String)>, Violation> {
        let Some(submission) = usize::try_from(ticket)
            .ok()
            .and_then(|i| self.submissions.get_mut(i))
        else {
            return Ok(None);
        };
        match answer {
            Ok(client_shard::Response::Submitted { id, .. }) => {
                if let Some(before) = submission.id.filter(|b| b != id) {
                    return Err(broken(
                        Invariant::I4,
                        format!(
                            "one idempotency key was acknowledged as job {before} and as job {id}"
                        ),
                    ));
                }
                submission.id = Some(*id);
                submission.done = true;
                Ok(Some((*id, submission.queue.clone())))
            }
            // Unavailable: tried again later; any other refusal is final.
            Err(r) if r.code == shardsched_wire::msg::RefusalCode::Unavailable => Ok(None),
            _ => {
                submission.done = true;
                Ok(None)
            }
        }
    }
}

/// A random admin request, drawn from the coordinator's views.
pub(crate) fn admin(rng: &mut ChaCha8Rng, core: &Core, nodes: &[String]) -> Option<Admin> {
    let queues: Vec<String> = core
        .config()
        .queues
        .iter()
        .map(|q| q.name.clone())
        .collect();
    let queue = queues.choose(rng)?.clone();
    let other = queues.iter().filter(|q| **q != queue).collect::<Vec<_>>();
    let other = other.choose(rng).map(|q| (*q).clone());
    Some(match rng.random_range(0..100) {
        0..30 => {
            let to = other?;
            let owned = core.owned_by(&queue);
            let count = rng.random_range(1..=owned.len().clamp(1, 2));
            let picked: Vec<String> = owned.choose_multiple(rng, count).cloned().collect();
            let deadline_ms = rng.random_bool(0.5).then(|| rng.random_range(500..=15_000));
            Admin::Move {
                nodes: picked,
                from: queue,
                to,
                deadline_ms,
            }
        }
        30..38 => Admin::MoveNodes {
            nodes: vec![nodes.choose(rng)?.clone()],
            to: queue,
        },
        38..50 => {
            let active: Vec<_> = core
                .moves()
                .into_iter()
                .filter(|m| m.status == MoveStatus::Active)
                .map(|m| m.move_id)
                .collect();
            Admin::CancelMove(*active.choose(rng)?)
        }
        50..72 => {
            let action = match rng.random_range(0..4) {
                0 => QueueAction::Enable,
                1 => QueueAction::Disable,
                2 => QueueAction::Start {
                    take: rng.random_bool(0.5),
                },
                _ => QueueAction::Stop,
            };
            let release_to = (action == QueueAction::Stop && rng.random_bool(0.5))
                .then_some(other)
                .flatten();
            Admin::Queue(QueueAdmin {
                queue,
                action,
                reason: "sim".to_owned(),
                release_to,
            })
        }
        72..88 => {
            let flag = if rng.random_bool(0.5) {
                NodeFlag::Down
            } else {
                NodeFlag::Drained
            };
            Admin::Flag {
                nodes: vec![nodes.choose(rng)?.clone()],
                flag,
                on: rng.random_bool(0.5),
                reason: "sim".to_owned(),
            }
        }
        88..91 => Admin::Add(QueueSpec {
            name: format!("q{}", core.config().queues.len() + rng.random_range(0..3)),
            nodes: Some(random_nodes(rng, nodes.len())),
            policy: Some(policy(rng)),
            stopped: rng.random_bool(0.3),
            ..spec_defaults()
        }),
        91..94 => {
            // Mostly a queue that owns nothing (one that owns nodes is refused unless it
            // gives them away).
            let idle: Vec<&String> = queues
                .iter()
                .filter(|q| core.owned_by(q).is_empty())
                .collect();
            let queue = match idle.choose(rng) {
                Some(q) if rng.random_bool(0.7) => (*q).clone(),
                _ => queue,
            };
            let give_to = queues
                .iter()
                .filter(|q| **q != queue)
                .collect::<Vec<_>>()
                .choose(rng)
                .map(|q| (*q).clone())
                .filter(|_| !core.owned_by(&queue).is_empty() || rng.random_bool(0.3));
            Admin::Remove { queue, give_to }
        }
        94..96 => Admin::Reload(ReloadFile(Box::new(reload_file(rng, core, nodes)?))),
        _ => Admin::Update(QueueSpec {
            name: queue,
            nodes: rng.random_bool(0.5).then(|| random_nodes(rng, nodes.len())),
            policy: rng.random_bool(0.5).then(|| policy(rng)),
            // A match policy is what a shard restarts for (a queue policy, the
            // definition are taken in place).
            match_policy: rng.random_bool(0.25).then(|| match_policy(rng)),
            give_to: other.filter(|_| rng.random_bool(0.5)),
            ..spec_defaults()
        }),
    })
}

/// The configuration file as an admin edits it before `reload`: the same cluster; queues
/// that own nothing may go (never the default `q0`), a new one may come; each kept queue's
/// definition keeps the nodes it owns (else the reload is refused) and may lose or gain
/// others, overlapping other queues'.
fn reload_file(rng: &mut ChaCha8Rng, core: &Core, nodes: &[String]) -> Option<Config> {
    let index = |name: &str| nodes.iter().position(|n| n == name);
    let mut queues = Vec::new();
    for q in &core.config().queues {
        let owned: Vec<usize> = core
            .owned_by(&q.name)
            .iter()
            .filter_map(|n| index(n))
            .collect();
        if q.name != "q0" && owned.is_empty() && rng.random_bool(0.5) {
            continue;
        }
        let mut definition: Vec<usize> = (0..nodes.len())
            .filter(|n| {
                owned.contains(n)
                    || (q.definition.contains(n) && rng.random_bool(0.8))
                    || rng.random_bool(0.15)
            })
            .collect();
        if definition.is_empty() {
            definition.push(rng.random_range(0..nodes.len()));
        }
        queues.push(TableQueue {
            name: q.name.clone(),
            definition,
            policy: POLICIES.choose(rng).copied().unwrap_or("fcfs"),
            started: q.started,
        });
    }
    if rng.random_bool(0.3) {
        let name = format!("q{}", core.config().queues.len() + rng.random_range(0..3));
        if !queues.iter().any(|q| q.name == name) {
            let mut definition: Vec<usize> =
                (0..nodes.len()).filter(|_| rng.random_bool(0.5)).collect();
            if definition.is_empty() {
                definition.push(rng.random_range(0..nodes.len()));
            }
            queues.push(TableQueue {
                name,
                definition,
                policy: POLICIES.choose(rng).copied().unwrap_or("fcfs"),
                started: rng.random_bool(0.75),
            });
        }
    }
    queues.sort_by(|a, b| a.name.cmp(&b.name));
    let limits = !core.config().limits.limits.is_empty();
    config_file(nodes.len(), &queues, limits).ok()
}

/// A random non-empty hostlist of the cluster's nodes.
fn random_nodes(rng: &mut ChaCha8Rng, count: usize) -> String {
    let mut picked: Vec<usize> = (0..count).filter(|_| rng.random_bool(0.5)).collect();
    if picked.is_empty() {
        picked.push(rng.random_range(0..count));
    }
    hostlist(&picked)
}

fn policy(rng: &mut ChaCha8Rng) -> QueuePolicy {
    QueuePolicy::ALL
        .choose(rng)
        .copied()
        .unwrap_or(QueuePolicy::Fcfs)
}

fn match_policy(rng: &mut ChaCha8Rng) -> MatchPolicy {
    [MatchPolicy::First, MatchPolicy::LoNode, MatchPolicy::HiNode]
        .choose(rng)
        .copied()
        .unwrap_or(MatchPolicy::First)
}

fn spec_defaults() -> QueueSpec {
    QueueSpec {
        name: String::new(),
        nodes: None,
        policy: None,
        match_policy: None,
        queue_depth: None,
        reservation_depth: None,
        default_duration: Some("30s".to_owned()),
        max_duration: Some("10m".to_owned()),
        stopped: false,
        give_to: None,
    }
}
