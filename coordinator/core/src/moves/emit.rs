//! Commands derived from a move's state. Nothing here remembers what was sent: every
//! command a move still needs is computed again from its phases, which is what makes
//! re-sending after a loss, a reconnection or a coordinator restart the same code path as
//! the first send.

use shardsched_wire::msg::NodeGen;
use shardsched_wire::msg::coord_shard::{
    Acquire, CancelJobs, Incoming, IncomingNode, Reclaim, Release, Request, Withdraw,
};

use super::limits::NODES_PER_COMMAND_MAX;
use super::state::{Move, Phase};
use super::types::Transmit;

/// Which of a move's commands to derive.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Want<'a> {
    /// Also ask the donor again about nodes it already said are busy (a reconnected donor
    /// may have lost the answer's context; the answer is idempotent).
    pub(crate) force_release: bool,
    /// Only commands for this queue's shard.
    pub(crate) only_queue: Option<&'a str>,
}

/// The commands `mv` still needs at `now`, at most [`NODES_PER_COMMAND_MAX`] nodes each.
pub(crate) fn commands(mv: &Move, now: u64, want: Want<'_>) -> Vec<Transmit> {
    let mut release = Vec::new();
    let mut incoming = Vec::new();
    let mut acquire = Vec::new();
    let mut reclaim = Vec::new();
    let mut withdraw = Vec::new();
    let mut cancel_jobs = Vec::new();
    let deadline_passed = !mv.cancelled && mv.deadline_ms.is_some_and(|d| now >= d);
    for (name, node) in &mv.nodes {
        let ng = NodeGen {
            node: name.clone(),
            generation: node.generation,
        };
        match &node.phase {
            Phase::Outgoing {
                answered,
                expected_free_ms,
                incoming_acked,
                cancel_acked,
                ..
            } => {
                let overdue = expected_free_ms.is_none_or(|t| t <= now);
                if want.force_release || !answered || overdue {
                    release.push(ng.clone());
                }
                // Only once the donor answered the release: before, the recipient would
                // learn nothing it can plan with (no free time yet), and its journal commit
                // of the `incoming` node would run beside the donor's of the release, on
                // the same disk where the daemons share one, slowing the commit the move
                // waits for (`bench moves`: 0.80 against 0.47 ms, one idle node's move
                // 0.5–0.6 ms longer). A node the donor releases at once is never incoming:
                // `Acquire` brings it up from not owned.
                let free = mv.free_by(*expected_free_ms);
                if *answered && *incoming_acked != Some(free) {
                    incoming.push(IncomingNode {
                        node: ng.clone(),
                        expected_free_ms: free,
                    });
                }
                // Only once the donor answered the release: it then holds the node
                // outgoing (journaled before it answered), so the cancel finds it so. Sent
                // beside the release, the cancel may be handled first (each request is its
                // own stream) and acknowledged as a no-op on a node not yet outgoing, and
                // the job would run on past the deadline.
                if deadline_passed && *answered && !cancel_acked {
                    cancel_jobs.push(ng);
                }
            }
            Phase::Released => acquire.push(ng),
            Phase::Returning {
                reclaim_acked,
                withdraw_acked,
            } => {
                if !reclaim_acked {
                    reclaim.push(ng.clone());
                }
                if !withdraw_acked {
                    withdraw.push(ng);
                }
            }
            Phase::Acquired | Phase::Returned => {}
        }
    }
    let id = mv.id;
    let mut out = Vec::new();
    // Donor first, then recipient: on an ordered link the recipient hears of a node after
    // the donor stopped allocating on it.
    let (from, to) = (mv.from.as_str(), mv.to.as_str());
    push(&mut out, want, from, release, |nodes| {
        Request::Release(Release { move_id: id, nodes })
    });
    push(&mut out, want, from, cancel_jobs, |nodes| {
        Request::CancelJobs(CancelJobs { move_id: id, nodes })
    });
    push(&mut out, want, from, reclaim, |nodes| {
        Request::Reclaim(Reclaim { move_id: id, nodes })
    });
    push(&mut out, want, to, incoming, |nodes| {
        Request::Incoming(Incoming { move_id: id, nodes })
    });
    push(&mut out, want, to, withdraw, |nodes| {
        Request::Withdraw(Withdraw { move_id: id, nodes })
    });
    push(&mut out, want, to, acquire, |nodes| {
        Request::Acquire(Acquire {
            move_id: id,
            nodes,
            flags: Default::default(),
        })
    });
    out
}

/// Appends one command per chunk of `nodes` for `queue`, unless `want` excludes the queue.
fn push<T: Clone>(
    out: &mut Vec<Transmit>,
    want: Want<'_>,
    queue: &str,
    nodes: Vec<T>,
    make: impl Fn(Vec<T>) -> Request,
) {
    if want.only_queue.is_some_and(|q| q != queue) {
        return;
    }
    for chunk in nodes.chunks(NODES_PER_COMMAND_MAX) {
        out.push(Transmit {
            queue: queue.to_owned(),
            request: make(chunk.to_vec()),
        });
    }
}
