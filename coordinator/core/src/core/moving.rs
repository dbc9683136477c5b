//! The core's side of node moves: admin requests become moves of the pure
//! [`MoveMachine`], the machine's journal records become the durable state the driver
//! writes, and its commands go to the shards' connections.
//!
//! The driver's part, after any call that may have moved something:
//!
//! ```text
//!   core.journal_take()  ─► Some(write) ─► write.delta to the journal (fsync)
//!                                        ─► core.journal_done(&write)
//!   core.moves_to_send() ─► [(queue, conn, request)] ─► send; on answer
//!                                                       core.moves_answer(...)
//!   every core.moves_next_wakeup(): core.moves_tick(now)
//! ```
//!
//! A write carries the records of every move changed since the last one, compacted
//! ([`MoveMachine::records_of`]), and the node records the moves changed: it makes every
//! record handed out so far durable at once (the machine applies a record when it queues
//! it), which is why one token covers them all.

use shardsched_resource::encode_hostlist;
use shardsched_wire::msg::coord_shard::{FreeAt, ReleaseState, Request, Response};
use shardsched_wire::msg::shard_coord::{HeldNode, Released};
use shardsched_wire::msg::{MoveId, Refusal, RefusalCode};

use super::{ConnId, Core};
use crate::moves::{MoveError, MoveRecord, MoveStatus, MoveView};

/// A command for a connected shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoveCommand {
    /// The queue.
    pub queue: String,
    /// Its shard's connection.
    pub conn: ConnId,
    /// The command.
    pub request: Request,
}

impl Core {
    /// Moves `nodes` to queue `to` from whichever queues own them now: one move per donor.
    /// All or nothing: every node must be known, owned by some queue, in `to`'s definition
    /// and in no unfinished move. Nodes `to` already owns (and that are not moving) are left
    /// alone. Returns the first move's id (`None`: nothing to move).
    pub fn move_nodes(
        &mut self,
        now_ms: u64,
        nodes: &[String],
        to: &str,
    ) -> Result<Option<MoveId>, Refusal> {
        self.queue_index(to).ok_or_else(|| self.no_such_queue(to))?;
        self.check_known(nodes)?;
        let mut unassigned = Vec::new();
        let mut by_donor: Vec<(String, Vec<String>)> = Vec::new();
        for n in nodes {
            match self.moves.owner_of(n) {
                None => unassigned.push(n.as_str()),
                Some(owner) if owner == to && self.moves.moving(n).is_none() => {}
                Some(owner) => match by_donor.iter_mut().find(|(d, _)| d == owner) {
                    Some((_, list)) => list.push(n.clone()),
                    None => by_donor.push((owner.to_owned(), vec![n.clone()])),
                },
            }
        }
        if !unassigned.is_empty() {
            return Err(Refusal::new(
                RefusalCode::Invalid,
                format!(
                    "unassigned nodes cannot be moved (no queue owns them): {}",
                    encode_hostlist(&unassigned)
                ),
            ));
        }
        self.start_moves(now_ms, &by_donor, to)
    }

    /// Moves `nodes` from queue `from` to queue `to` (`queue move --from --to`): every
    /// node must be owned by `from`, in `to`'s definition, and in no unfinished move. Past
    /// `deadline_ms` the donor cancels the jobs still holding them.
    pub fn move_between(
        &mut self,
        now_ms: u64,
        nodes: &[String],
        from: &str,
        to: &str,
        deadline_ms: Option<u64>,
    ) -> Result<MoveId, Refusal> {
        self.check_move(nodes, from, to)?;
        let id = self
            .moves
            .start_move(now_ms, nodes, from, to, deadline_ms)
            .map_err(refusal)?;
        tracing::info!(move_id = id.0, %from, %to, nodes = %encode_hostlist(nodes), "move started");
        self.after_move_input();
        Ok(id)
    }

    /// Whether [`Core::move_between`] would accept this move now; changes nothing.
    pub fn check_move(&self, nodes: &[String], from: &str, to: &str) -> Result<(), Refusal> {
        self.queue_index(from)
            .ok_or_else(|| self.no_such_queue(from))?;
        self.queue_index(to).ok_or_else(|| self.no_such_queue(to))?;
        self.moves.check_start(nodes, from, to).map_err(refusal)
    }

    /// Whether move `move_id` is over (completed, cancelled, or long forgotten).
    pub fn move_finished(&self, move_id: MoveId) -> bool {
        self.moves
            .move_view(move_id)
            .is_none_or(|m| m.status != MoveStatus::Active)
    }

    /// Every unfinished move, then the finished ones still remembered (`queue moves`).
    pub fn moves(&self) -> Vec<MoveView> {
        self.moves.moves()
    }

    /// Cancels a move: its nodes not yet released go back to the donor. Returns them.
    pub fn cancel_move(&mut self, now_ms: u64, move_id: MoveId) -> Result<Vec<String>, Refusal> {
        let returned = self.moves.cancel_move(now_ms, move_id).map_err(refusal)?;
        self.after_move_input();
        Ok(returned)
    }

    /// A shard registered (after [`Core::register`]): everything unacknowledged for it is
    /// sent again.
    pub fn moves_registered(&mut self, now_ms: u64, queue: &str, held: &[HeldNode]) {
        self.moves.shard_registered(now_ms, queue, held);
        // The machine also queues the assignment; the registration answer built by
        // `register` is the one sent, after the driver made the journal durable.
        while self.moves.poll_assignment().is_some() {}
        self.after_move_input();
    }

    /// A donor's report that nodes of a move became free.
    pub fn moves_released(
        &mut self,
        now_ms: u64,
        conn: ConnId,
        shard_name: &str,
        released: &Released,
    ) -> Result<(), Refusal> {
        let qi = self.registered(conn, shard_name)?;
        let queue = self.config.queues[qi].name.clone();
        let mut released = released.clone();
        released
            .nodes
            .retain(|ng| self.released_clean(&ng.node, &queue));
        self.moves.handle_released(now_ms, &queue, &released);
        self.after_move_input();
        Ok(())
    }

    /// A shard's answer to a move command.
    pub fn moves_answer(
        &mut self,
        now_ms: u64,
        queue: &str,
        request: &Request,
        response: &Response,
    ) {
        match response {
            Response::Releasing { nodes, stale } => {
                let nodes: Vec<ReleaseState> = nodes
                    .iter()
                    .filter(|n| n.free != FreeAt::Now || self.released_clean(&n.node.node, queue))
                    .cloned()
                    .collect();
                self.moves.handle_releasing(now_ms, queue, &nodes, stale);
            }
            Response::Ack { stale } => self.moves.handle_ack(now_ms, queue, request, stale),
            Response::Jobs(_)
            | Response::History(_)
            | Response::DryRun(_)
            | Response::JobFacts(_) => {}
        }
        self.after_move_input();
    }

    /// Time passes: re-sends and deadlines.
    pub fn moves_tick(&mut self, now_ms: u64) {
        self.moves.tick(now_ms);
        self.after_move_input();
    }

    /// When [`Core::moves_tick`] next has work.
    pub fn moves_next_wakeup(&self) -> Option<u64> {
        self.moves.next_wakeup_ms()
    }

    /// Commands whose records are durable, for connected shards (a command for a queue
    /// whose shard is offline is dropped: it is sent again when the shard registers). An
    /// `Acquire` or a `Reclaim` also queues the nodes' new owner for their agents
    /// ([`Core::agents_to_send`]), whether or not the shard is connected.
    pub fn moves_to_send(&mut self) -> Vec<MoveCommand> {
        let mut out = Vec::new();
        while let Some(t) = self.moves.poll_transmit() {
            self.owner_for_agents(&t.queue, &t.request);
            let conn = self
                .queue_index(&t.queue)
                .and_then(|qi| self.shards[qi].as_ref())
                .map(|link| link.conn);
            if let Some(conn) = conn {
                out.push(MoveCommand {
                    queue: t.queue,
                    conn,
                    request: t.request,
                });
            }
        }
        out
    }

    /// Whether a donor's word that `node` is free can be taken: its agent (if it has one)
    /// reports no process of the donor's jobs, or is gone ([`Core::agent_clean_of`]).
    /// Otherwise the release waits: the move machine asks the donor again at its re-send
    /// interval, and the agent's next report decides (an unreachable agent's node waits
    /// until it reports, or until it is marked down for its silence).
    fn released_clean(&self, node: &str, donor: &str) -> bool {
        if !self.has_agent(node) {
            return true;
        }
        let clean = self.agent_clean_of(node, donor);
        if clean && self.agent_gone(node) {
            tracing::info!(%node, %donor, "released: the node's agent is gone (its node marked down for its silence); the donor's jobs there ended");
        } else if clean {
            tracing::info!(%node, %donor, "released: no process of the donor's jobs on the node, as its agent reports");
        } else {
            tracing::info!(%node, %donor, "release waits: the node's agent has not reported it clean of the donor's jobs");
        }
        clean
    }

    /// Starts one move per donor, after checking them all.
    pub(super) fn start_moves(
        &mut self,
        now_ms: u64,
        by_donor: &[(String, Vec<String>)],
        to: &str,
    ) -> Result<Option<MoveId>, Refusal> {
        for (from, nodes) in by_donor {
            self.moves.check_start(nodes, from, to).map_err(refusal)?;
        }
        let mut first = None;
        for (from, nodes) in by_donor {
            let id = self
                .moves
                .start_move(now_ms, nodes, from, to, None)
                .map_err(refusal)?;
            tracing::info!(move_id = id.0, %from, %to, nodes = %encode_hostlist(nodes), "move started");
            first.get_or_insert(id);
        }
        self.after_move_input();
        Ok(first)
    }

    /// After each input to the move machine: takes its new records for the next journal
    /// write (the node table marks the nodes they changed itself; the last token is kept
    /// for the driver), bumps the epoch when owners changed, and checks the invariants.
    /// Nothing is copied out of the machine: owners, generations and flags stay in its
    /// node table.
    fn after_move_input(&mut self) {
        let mut owners_changed = false;
        while let Some((token, record)) = self.moves.poll_journal() {
            self.move_pending = Some(token);
            self.dirty.moves.insert(record.move_id());
            self.dirty.next_move_id = true;
            self.dirty.steps.insert(record.kind());
            self.dirty.steps_took.extend(self.moves.steps_took(&record));
            owners_changed |= matches!(
                record,
                MoveRecord::Started { .. } | MoveRecord::Cancelled { .. }
            );
        }
        if owners_changed {
            self.bump();
        }
        self.debug_check();
    }
}

/// A move refusal for the client, with the code its kind deserves.
pub(super) fn refusal(e: MoveError) -> Refusal {
    let code = match &e {
        MoveError::NoSuchQueue(_) | MoveError::NoSuchNode(_) | MoveError::NoSuchMove(_) => {
            RefusalCode::NotFound
        }
        MoveError::AlreadyMoving { .. } => RefusalCode::Policy,
        MoveError::Busy(_) => RefusalCode::Unavailable,
        MoveError::SameQueue(_)
        | MoveError::NoNodes
        | MoveError::TooManyNodes { .. }
        | MoveError::NotOwned { .. }
        | MoveError::NotInDefinition { .. } => RefusalCode::Invalid,
    };
    Refusal::new(code, e.to_string())
}

#[cfg(test)]
mod tests;
