//! Queue table changes that take queues away (`queue remove`, `reload`), carried out over
//! several batches: a removal must see each removed queue's shard hold no job, and disable
//! it in the same step, before the core removes the queue. The steps are decided here; the
//! driver (and the simulator) only carry the commands and bring back the answers.
//!
//! ```text
//! begin_remove / begin_reload              → a removal, by RemovalId
//!   [remove --give-to, owning nodes]  Moving   until the move is over (removals_tick),
//!                                              or REMOVE_MOVE_WAIT_MS: answered without
//!                                              the removal, with what to type later
//!   for each queue, in order          Asking   `Jobs` (limit 1) through the shard's ordered
//!                                              link: any job refuses the removal; then
//!                                              check_removable (owned nodes, moves)
//!   for each queue with a shard       Holding  `DisableIfIdle` (the shard refuses while it
//!                                              holds a job: no submit slips in between)
//!                                     Pulling  the driver pulls its finished jobs into the
//!                                              history store (removal_pulled)
//!   all held                          → saw_idle, then remove_queue / reload: removals_done
//!   refused at any step               → removals_done, with SetQueueState for the queues
//!                                       held so far (their state as the core has it)
//! ```
//!
//! A shard whose connection ends while a removal waits on it, or holds it, refuses the
//! removal: a restarted shard takes its queue state from its registration, so a queue it
//! held may be enabled again. Removals are not journaled: a coordinator that restarts has
//! none, and the admin, who got no answer, asks again.

use std::collections::BTreeMap;

use shardsched_wire::msg::{JobsQuery, MoveId, Refusal, RefusalCode, UserFilter, coord_shard};

mod end;
#[cfg(test)]
mod tests;

use super::reconfig::policy;
use super::{ConnId, Core, QueueCommand, Reconfig};
use crate::config::Config;

/// How long `queue remove --give-to` waits for its move before it answers, ms. The queue
/// has no job, so its nodes are idle and the move takes a few round trips; past this, the
/// admin is told to remove it again once the move is done.
pub const REMOVE_MOVE_WAIT_MS: u64 = 10_000;

/// Removals in progress at once; past it, a removal is refused as busy.
pub const REMOVALS_MAX: usize = 64;

/// How many live jobs the removal check asks a shard for (any is too many).
const LIVE_JOBS_ASKED: u32 = 1;

/// Identifies one removal until it is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RemovalId(pub u64);

/// What [`Core::begin_remove`] did.
#[derive(Debug)]
pub enum Begun {
    /// Done at once (nothing to wait for): the change, to write and then tell.
    Done(Reconfig),
    /// Under way: its end comes through [`Core::removals_done`].
    Pending(RemovalId),
}

/// A step a removal needs the driver to carry out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemovalCommand {
    /// The removal; the answer goes back with it.
    pub removal: RemovalId,
    /// The queue it concerns.
    pub queue: String,
    /// Its shard's connection.
    pub conn: ConnId,
    /// What to do.
    pub step: RemovalStep,
}

/// See [`RemovalCommand`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RemovalStep {
    /// Send this on the shard's ordered link; its answer goes to [`Core::removal_answer`].
    Ask(coord_shard::Request),
    /// Pull the queue's finished jobs into the history store; the outcome goes to
    /// [`Core::removal_pulled`].
    PullHistory,
}

/// A removal's end, once its batch is written.
#[derive(Debug)]
pub struct RemovalDone {
    /// The removal.
    pub removal: RemovalId,
    /// The change made (stops and restarts to tell), or why there is none.
    pub outcome: Result<Reconfig, Refusal>,
    /// Queues held for a removal that was refused, given their state back.
    pub re_enable: Vec<QueueCommand>,
}

/// The change a removal makes once its shards are held.
#[derive(Debug)]
enum Change {
    /// `queue remove QUEUE`.
    Remove(String),
    /// `reload`, with the file read again.
    Reload(Box<Config>),
}

/// Where a removal is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// `remove --give-to`: waiting for `move_id` until `deadline_ms`.
    Moving { move_id: MoveId, deadline_ms: u64 },
    /// Checking queue `at` (its job list asked when `sent`).
    Asking { at: usize, sent: bool },
    /// Disabling queue `at` at its shard.
    Holding { at: usize, sent: bool },
    /// Queue `at`'s history being pulled.
    Pulling { at: usize, sent: bool },
}

/// One removal in progress.
#[derive(Debug)]
struct Removal {
    change: Change,
    /// The queues it takes away, each with its shard's connection when it began.
    queues: Vec<(String, Option<ConnId>)>,
    /// `remove --give-to`: the move's half, done.
    giving: Option<Reconfig>,
    /// Queues disabled at their shards so far, with the connection that did it.
    held: Vec<(String, ConnId)>,
    phase: Phase,
}

/// Every removal in progress, and those ended and not yet handed out.
#[derive(Debug, Default)]
pub(super) struct Removals {
    next_id: u64,
    active: BTreeMap<RemovalId, Removal>,
    done: Vec<RemovalDone>,
}

impl Core {
    /// `queue remove QUEUE [--give-to R]`. A queue that owns nodes and has somewhere to
    /// give them has them moved first (one move, started at `now_ms`); the removal waits
    /// for it ([`REMOVE_MOVE_WAIT_MS`]). Then its shard is checked and held (see the
    /// module documentation).
    pub fn begin_remove(
        &mut self,
        now_ms: u64,
        queue: &str,
        give_to: Option<&str>,
    ) -> Result<Begun, Refusal> {
        self.check_remove_request(queue, give_to)?;
        self.check_removals_room()?;
        if give_to.is_none() || self.owned_by(queue).is_empty() {
            return Ok(Begun::Pending(self.begin(
                now_ms,
                Change::Remove(queue.to_owned()),
                None,
                None,
            )));
        }
        let giving = self.remove_queue(now_ms, queue, give_to)?;
        let Some(move_id) = giving.move_id else {
            return Ok(Begun::Done(giving));
        };
        let moving = Phase::Moving {
            move_id,
            deadline_ms: now_ms.saturating_add(REMOVE_MOVE_WAIT_MS),
        };
        let change = Change::Remove(queue.to_owned());
        Ok(Begun::Pending(self.begin(
            now_ms,
            change,
            Some(giving),
            Some(moving),
        )))
    }

    /// `reload`, with `file` the configuration file read again: the queues it lacks are
    /// checked and held first, then [`Core::reload`].
    pub fn begin_reload(&mut self, now_ms: u64, file: Config) -> Result<RemovalId, Refusal> {
        self.check_removals_room()?;
        Ok(self.begin(now_ms, Change::Reload(Box::new(file)), None, None))
    }

    /// Time passed: removals whose move is over go on; those past their wait are answered
    /// without the removal.
    pub fn removals_tick(&mut self, now_ms: u64) {
        let ids: Vec<RemovalId> = self.removals.active.keys().copied().collect();
        for id in ids {
            let Some(Phase::Moving {
                move_id,
                deadline_ms,
            }) = self.removals.active.get(&id).map(|r| r.phase)
            else {
                continue;
            };
            if self.move_finished(move_id) {
                // Its shards as they are now: one may have reconnected during the move.
                let queues = self.removals.active.get(&id).map(|r| self.shards_of(r));
                if let (Some(r), Some(queues)) = (self.removals.active.get_mut(&id), queues) {
                    r.queues = queues;
                }
                self.removal_went(now_ms, id, Ok(Phase::Asking { at: 0, sent: false }));
            } else if now_ms >= deadline_ms {
                let Some(r) = self.removals.active.remove(&id) else {
                    continue;
                };
                let mut giving = r.giving.unwrap_or_default();
                let queue = r.queues.first().map(|(q, _)| q.as_str()).unwrap_or("");
                giving.changes.push(format!(
                    "move {} is not done yet: `shardsched queue remove {queue}` removes the \
                     queue once `shardsched queue moves` shows it completed",
                    move_id.0
                ));
                self.removals.done.push(RemovalDone {
                    removal: id,
                    outcome: Ok(giving),
                    re_enable: Vec::new(),
                });
            }
        }
    }

    /// When a removal's wait for its move runs out, if one waits.
    pub fn removals_next_wakeup(&self) -> Option<u64> {
        self.removals
            .active
            .values()
            .filter_map(|r| match r.phase {
                Phase::Moving { deadline_ms, .. } => Some(deadline_ms),
                _ => None,
            })
            .min()
    }

    /// The steps removals need carried out now, each once.
    pub fn removals_to_send(&mut self) -> Vec<RemovalCommand> {
        let mut out = Vec::new();
        for (&id, r) in &mut self.removals.active {
            let (at, sent) = match &mut r.phase {
                Phase::Moving { .. } => continue,
                Phase::Asking { at, sent }
                | Phase::Holding { at, sent }
                | Phase::Pulling { at, sent } => (*at, sent),
            };
            if *sent {
                continue;
            }
            let Some((queue, Some(conn))) = r.queues.get(at) else {
                continue;
            };
            *sent = true;
            let step = match r.phase {
                Phase::Asking { .. } => RemovalStep::Ask(live_jobs_query()),
                Phase::Holding { .. } => RemovalStep::Ask(coord_shard::Request::DisableIfIdle),
                _ => RemovalStep::PullHistory,
            };
            out.push(RemovalCommand {
                removal: id,
                queue: queue.clone(),
                conn: *conn,
                step,
            });
        }
        out
    }

    /// A shard's answer to a removal's [`RemovalStep::Ask`] (or why there is none). An
    /// answer for a removal that is over, or to a step it is not at, is ignored.
    pub fn removal_answer(
        &mut self,
        now_ms: u64,
        removal: RemovalId,
        answer: Result<coord_shard::Response, Refusal>,
    ) {
        let Some(r) = self.removals.active.get_mut(&removal) else {
            return;
        };
        let outcome = match (r.phase, answer) {
            (Phase::Asking { at, sent: true }, Ok(coord_shard::Response::Jobs(list))) => {
                if list.jobs.is_empty() && !list.truncated {
                    let queue = r.queues[at].0.clone();
                    self.check_removable(&queue).map(|()| Phase::Asking {
                        at: at + 1,
                        sent: false,
                    })
                } else {
                    Err(policy(format!(
                        "queue {} has jobs (pending or running): cancel them or wait for them \
                         to end (jobs cannot move between queues)",
                        r.queues[at].0
                    )))
                }
            }
            (Phase::Holding { at, sent: true }, Ok(coord_shard::Response::Ack { .. })) => {
                let (queue, conn) = &r.queues[at];
                if let Some(conn) = conn {
                    r.held.push((queue.clone(), *conn));
                }
                Ok(Phase::Pulling { at, sent: false })
            }
            (Phase::Asking { at, sent: true } | Phase::Holding { at, sent: true }, Ok(other)) => {
                Err(Refusal::new(
                    RefusalCode::Unavailable,
                    format!("queue {}'s shard answered with {other:?}", r.queues[at].0),
                ))
            }
            (Phase::Asking { sent: true, .. } | Phase::Holding { sent: true, .. }, Err(e)) => {
                Err(e)
            }
            _ => return,
        };
        self.removal_went(now_ms, removal, outcome);
    }

    /// The driver pulled (or could not pull) a held queue's finished jobs into the history
    /// store ([`RemovalStep::PullHistory`]).
    pub fn removal_pulled(&mut self, now_ms: u64, removal: RemovalId, pulled: Result<(), Refusal>) {
        let Some(r) = self.removals.active.get(&removal) else {
            return;
        };
        let Phase::Pulling { at, sent: true } = r.phase else {
            return;
        };
        let next = pulled.map(|()| Phase::Holding {
            at: at + 1,
            sent: false,
        });
        self.removal_went(now_ms, removal, next);
    }

    /// Removals that ended since the last call, once their batch is written: answer the
    /// admin (after telling the shards the [`Reconfig`]'s stops and restarts, or the
    /// `re_enable` commands).
    pub fn removals_done(&mut self) -> Vec<RemovalDone> {
        std::mem::take(&mut self.removals.done)
    }

    /// A connection ended: removals waiting on its shard, or holding it, are refused.
    pub(super) fn removals_disconnected(&mut self, conn: ConnId) {
        let ids: Vec<RemovalId> = self
            .removals
            .active
            .iter()
            .filter(|(_, r)| r.waits_on(conn) || r.held.iter().any(|(_, c)| *c == conn))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            let refusal = Refusal::new(
                RefusalCode::Unavailable,
                "a removed queue's shard disconnected during the removal; ask again",
            );
            // A refused removal changes nothing, so the time does not matter.
            self.end_removal(id, Err(refusal), 0);
        }
    }

    /// Each of `queues` with its shard's connection now, if connected.
    fn with_shards(&self, queues: Vec<String>) -> Vec<(String, Option<ConnId>)> {
        queues
            .into_iter()
            .map(|q| {
                let conn = self.shard(&q).map(|l| l.conn);
                (q, conn)
            })
            .collect()
    }

    /// The queues of `r` with their shards' connections now.
    fn shards_of(&self, r: &Removal) -> Vec<(String, Option<ConnId>)> {
        self.with_shards(r.queues.iter().map(|(q, _)| q.clone()).collect())
    }

    fn check_removals_room(&self) -> Result<(), Refusal> {
        if self.removals.active.len() >= REMOVALS_MAX {
            return Err(Refusal::new(
                RefusalCode::Unavailable,
                format!("{REMOVALS_MAX} queue removals are under way; wait for one to end"),
            ));
        }
        Ok(())
    }

    fn begin(
        &mut self,
        now_ms: u64,
        change: Change,
        giving: Option<Reconfig>,
        phase: Option<Phase>,
    ) -> RemovalId {
        let names = match &change {
            Change::Remove(queue) => vec![queue.clone()],
            Change::Reload(file) => self.removed_by(file),
        };
        let queues = self.with_shards(names);
        self.removals.next_id += 1;
        let id = RemovalId(self.removals.next_id);
        let removal = Removal {
            change,
            queues,
            giving,
            held: Vec::new(),
            phase: phase.unwrap_or(Phase::Asking { at: 0, sent: false }),
        };
        self.removals.active.insert(id, removal);
        self.advance_removal(now_ms, id);
        id
    }

    /// A step of `id` went to `next`, or refused the removal.
    fn removal_went(&mut self, now_ms: u64, id: RemovalId, next: Result<Phase, Refusal>) {
        match next {
            Ok(phase) => {
                if let Some(r) = self.removals.active.get_mut(&id) {
                    r.phase = phase;
                }
                self.advance_removal(now_ms, id);
            }
            Err(refusal) => self.end_removal(id, Err(refusal), now_ms),
        }
    }

    /// Skips the steps that need no shard (the core's own checks for a queue without one,
    /// which [`Core::remove_queue`] and [`Core::reload`] refuse anyway), and ends the
    /// removal once every queue is held.
    fn advance_removal(&mut self, now_ms: u64, id: RemovalId) {
        loop {
            let Some(r) = self.removals.active.get_mut(&id) else {
                return;
            };
            let n = r.queues.len();
            match r.phase {
                Phase::Asking { at, .. } if at >= n => {
                    r.phase = Phase::Holding { at: 0, sent: false };
                }
                Phase::Asking { at, .. } if r.queues[at].1.is_none() => {
                    let queue = r.queues[at].0.clone();
                    if let Err(refusal) = self.check_removable(&queue) {
                        return self.end_removal(id, Err(refusal), now_ms);
                    }
                    if let Some(r) = self.removals.active.get_mut(&id) {
                        r.phase = Phase::Asking {
                            at: at + 1,
                            sent: false,
                        };
                    }
                }
                Phase::Holding { at, .. } if at >= n => {
                    // A queue that had no shard when it was looked at may have one now: a
                    // restarted shard that registered meanwhile was neither asked nor held
                    // (and may have taken jobs since).
                    let unasked: Vec<String> = r
                        .queues
                        .iter()
                        .filter(|(_, conn)| conn.is_none())
                        .map(|(q, _)| q.clone())
                        .collect();
                    let registered = unasked.into_iter().find(|q| self.shard(q).is_some());
                    let outcome = match registered {
                        Some(queue) => Err(Refusal::new(
                            RefusalCode::Unavailable,
                            format!(
                                "queue {queue}'s shard registered during the removal; ask again"
                            ),
                        )),
                        None => Ok(()),
                    };
                    return self.end_removal(id, outcome, now_ms);
                }
                Phase::Holding { at, .. } if r.queues[at].1.is_none() => {
                    r.phase = Phase::Holding {
                        at: at + 1,
                        sent: false,
                    };
                }
                _ => return,
            }
        }
    }
}

impl Removal {
    /// Whether it waits for an answer from the shard on `conn`.
    fn waits_on(&self, conn: ConnId) -> bool {
        match self.phase {
            Phase::Moving { .. } => false,
            Phase::Asking { at, sent }
            | Phase::Holding { at, sent }
            | Phase::Pulling { at, sent } => {
                sent && self.queues.get(at).is_some_and(|(_, c)| *c == Some(conn))
            }
        }
    }
}

/// Whether the shard holds any pending or running job. Read-only.
fn live_jobs_query() -> coord_shard::Request {
    coord_shard::Request::Jobs(JobsQuery {
        queue: None,
        user: UserFilter::All,
        include_inactive: false,
        limit: LIVE_JOBS_ASKED,
        states: Vec::new(),
        name: None,
    })
}
