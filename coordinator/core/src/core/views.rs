//! What clients read: the routing table, `queue list`, `resource list`, and `jobs` (planned
//! here, asked of the shards by the driver, merged here).
//!
//! Intent and observation meet only in these views, and each field says which it is:
//! owners, generations and enabled come from intent; node states, counters and "started"
//! (scheduling *now*) need a connected shard and come from its last report.

use std::collections::{BTreeSet, HashMap};

use shardsched_wire::Peer;
use shardsched_wire::limits::JOBS_PER_RESPONSE_MAX;
use shardsched_wire::msg::client_coord::{MoveInfo, MoveNodeInfo};
use shardsched_wire::msg::{
    JobList, JobsQuery, MoveId, NodeState, NodeStatus, QueueStatus, Refusal, RefusalCode, Route,
    RouteTable, UserFilter, bounds,
};

use shardsched_resource::encode_hostlist;

use super::{ConnId, Core};
use crate::moves::limits::MOVE_VIEW_NODE_ROWS_MAX;
use crate::moves::{MoveNodeState, MoveStatus, MoveView, MovingStep};

/// How to answer a `jobs` request: which shards to ask, with which query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobsPlan {
    /// The query to send each shard: the user filter made explicit (a shard sees the
    /// coordinator as its peer, so "mine" must become the client's name) and the limit
    /// bounded.
    pub query: JobsQuery,
    /// The shards to ask: queue and connection.
    pub ask: Vec<(String, ConnId)>,
    /// Queues whose shard is not connected: the answer cannot be complete.
    pub offline: Vec<String>,
    /// Rows to return at most.
    pub limit: usize,
}

impl Core {
    /// The routing table: one route per queue whose shard is registered, by queue name.
    pub fn routes(&self) -> RouteTable {
        let routes = self
            .config
            .queues
            .iter()
            .zip(&self.queues)
            .zip(&self.shards)
            .filter_map(|((q, state), link)| {
                link.as_ref().map(|link| Route {
                    queue: q.name.clone(),
                    address: link.address,
                    generator_id: self.generator_id(&q.name).unwrap_or_default(),
                    enabled: state.enabled,
                    started: state.started,
                    reason: self.queue_reason(&q.name).unwrap_or_default().to_owned(),
                })
            })
            .collect();
        let offline = self
            .config
            .queues
            .iter()
            .zip(&self.shards)
            .filter(|(_, link)| link.is_none())
            .map(|(q, _)| q.name.clone())
            .collect();
        RouteTable {
            epoch: self.epoch,
            default_queue: Some(self.config.default_queue.clone()),
            routes,
            offline,
        }
    }

    /// Every queue's status, by name. `started` is true only while the queue is started
    /// *and* its shard is connected; node and job counters come from the shard's last report
    /// (zero while it is offline or has not reported); definition, owned nodes (intent: a
    /// node on its way in counts) and the disable reason are the coordinator's.
    pub fn queue_list(&self) -> Vec<QueueStatus> {
        self.config
            .queues
            .iter()
            .enumerate()
            .map(|(qi, q)| {
                let state = &self.queues[qi];
                let link = self.shards[qi].as_ref();
                let report = link.and_then(|l| l.report.as_ref());
                let owned: Vec<usize> = self.owned_indices(qi).collect();
                let nodes_up = report.map_or(0, |r| {
                    owned
                        .iter()
                        .filter(|n| r.nodes.get(n).is_some_and(|s| s.state == NodeState::Up))
                        .count()
                });
                QueueStatus {
                    name: q.name.clone(),
                    enabled: state.enabled,
                    started: state.started && link.is_some(),
                    queue_policy: q.policy,
                    match_policy: q.match_policy,
                    nodes_defined: count(q.definition.len()),
                    nodes_owned: count(owned.len()),
                    nodes_up: count(nodes_up),
                    jobs_pending: report.map_or(0, |r| r.queue.jobs_pending),
                    jobs_running: report.map_or(0, |r| r.queue.jobs_running),
                    pending_reasons: report
                        .map_or_else(Default::default, |r| r.queue.pending_reasons),
                    online: link.is_some(),
                    definition: encode_hostlist(&self.config.node_names(&q.definition)),
                    owned: encode_hostlist(&self.config.node_names(&owned)),
                    reason: self.queue_reason(&q.name).unwrap_or_default().to_owned(),
                }
            })
            .collect()
    }

    /// Every node (or `queue`'s owned nodes) in cluster order: owner and generation from
    /// intent; state from the owner's last report, `down` when its shard is offline or has
    /// not reported it, `not-owned` for unassigned nodes.
    pub fn resources(&self, queue: Option<&str>) -> Result<Vec<NodeStatus>, Refusal> {
        let only = match queue {
            Some(q) => Some(self.queue_index(q).ok_or_else(|| self.no_such_queue(q))?),
            None => None,
        };
        let queue_index: HashMap<&str, usize> = self
            .config
            .queues
            .iter()
            .enumerate()
            .map(|(qi, q)| (q.name.as_str(), qi))
            .collect();
        let rows = self
            .moves
            .nodes()
            .iter()
            .enumerate()
            .filter_map(|(n, (name, intent, _))| {
                let owner = intent
                    .owner
                    .as_deref()
                    .and_then(|o| queue_index.get(o).copied());
                if only.is_some() && owner != only {
                    return None;
                }
                let seen = owner
                    .and_then(|qi| self.shards[qi].as_ref())
                    .and_then(|l| l.report.as_ref())
                    .and_then(|r| r.nodes.get(&n));
                let state = match (owner, seen) {
                    (None, _) => NodeState::NotOwned,
                    (Some(_), Some(s)) => s.state,
                    (Some(_), None) => NodeState::Down,
                };
                let mut row = NodeStatus {
                    name: name.to_owned(),
                    queue: intent.owner.clone(),
                    state,
                    generation: intent.generation,
                    jobs_running: seen.map_or(0, |s| s.jobs_running),
                    reason: seen.and_then(|s| s.reason.clone()),
                    usage: seen.map(|s| s.usage).unwrap_or_default(),
                };
                self.overlay_intent(n, &mut row);
                Some(row)
            })
            .collect();
        Ok(rows)
    }

    /// The page of [`Core::resources`] from row `start` that fits `budget` bytes, and
    /// where the next page starts (`None`: this was the last).
    pub fn resources_page(
        &self,
        queue: Option<&str>,
        start: u32,
        budget: usize,
    ) -> Result<(Vec<NodeStatus>, Option<u32>), Refusal> {
        let rows = self.resources(queue)?;
        let skip = usize::try_from(start).unwrap_or(usize::MAX);
        let (nodes, more) = bounds::fit_rows(rows.into_iter().skip(skip), budget);
        let sent = u32::try_from(nodes.len()).unwrap_or(u32::MAX);
        Ok((nodes, more.then(|| start.saturating_add(sent))))
    }

    /// `queue moves`, by move id, and whether moves were left out: when the node rows would
    /// not fit one answer, unfinished moves are kept first, then the newest finished ones.
    pub fn move_list(&self) -> (Vec<MoveInfo>, bool) {
        let views = self.moves();
        let mut by_priority: Vec<&MoveView> = views.iter().collect();
        by_priority.sort_by_key(|v| (v.status != MoveStatus::Active, std::cmp::Reverse(v.move_id)));
        let mut rows = 0usize;
        let mut kept = BTreeSet::new();
        let mut truncated = false;
        for view in by_priority {
            rows = rows.saturating_add(view.nodes.len());
            if rows > MOVE_VIEW_NODE_ROWS_MAX {
                truncated = true;
                break;
            }
            kept.insert(view.move_id);
        }
        let moves: Vec<MoveInfo> = views
            .into_iter()
            .filter(|v| kept.contains(&v.move_id))
            .map(move_info)
            .collect();
        let (moves, cut) = bounds::fit_reply(moves);
        (moves, truncated || cut)
    }

    /// One move as [`Core::move_list`] shows it (none when it is not remembered), and
    /// whether its rows were cut to fit a reply.
    pub fn move_of(&self, move_id: MoveId) -> (Vec<MoveInfo>, bool) {
        let moves: Vec<MoveInfo> = self
            .moves
            .move_view(move_id)
            .map(move_info)
            .into_iter()
            .collect();
        bounds::fit_reply(moves)
    }

    /// Adds what the coordinator knows and a shard's report may not say: a node moving
    /// (outgoing in its donor until released, then incoming in its recipient until up
    /// there), and the admin's flags (drained, down) on a node reported up.
    fn overlay_intent(&self, n: usize, row: &mut NodeStatus) {
        if let Some(moving) = self.moves.moving_node(&row.name) {
            match moving.step {
                MovingStep::InDonor => {
                    // The donor still has it: its report is the observation that counts.
                    let seen = self
                        .queue_index(moving.from)
                        .and_then(|qi| self.shards[qi].as_ref())
                        .and_then(|l| l.report.as_ref())
                        .and_then(|r| r.nodes.get(&n));
                    row.state = match seen {
                        Some(s) if s.state != NodeState::Down => NodeState::Outgoing,
                        _ => NodeState::Down,
                    };
                    row.jobs_running = seen.map_or(0, |s| s.jobs_running);
                    row.queue = Some(moving.from.to_owned());
                    row.reason = Some(format!(
                        "moving to {} (move {})",
                        moving.to, moving.move_id.0
                    ));
                }
                MovingStep::Released => {
                    row.state = NodeState::Incoming;
                    row.queue = Some(moving.to.to_owned());
                    row.reason = Some(format!("from {} (move {})", moving.from, moving.move_id.0));
                }
            }
            return;
        }
        let Some(flags) = self.node_flags(&row.name) else {
            return;
        };
        if !matches!(
            row.state,
            NodeState::Up | NodeState::Drained | NodeState::Down
        ) {
            return;
        }
        if let Some(reason) = flags.down {
            row.state = NodeState::Down;
            row.reason = Some(reason);
        } else if let Some(reason) = flags.drained
            && row.state == NodeState::Up
        {
            row.state = NodeState::Drained;
            row.reason = Some(reason);
        }
    }

    /// Plans a `jobs` request from `peer`: the shards to ask and the query to send them.
    /// Asking for one queue whose shard is offline is refused; asking for all queues asks the
    /// connected ones and lists the others in [`JobsPlan::offline`].
    pub fn jobs_plan(&self, peer: &Peer, query: &JobsQuery) -> Result<JobsPlan, Refusal> {
        let limit = match query.limit as usize {
            0 => JOBS_PER_RESPONSE_MAX,
            n => n.min(JOBS_PER_RESPONSE_MAX),
        };
        let mut sent = query.clone();
        sent.limit = u32::try_from(limit).unwrap_or(u32::MAX);
        if sent.user == UserFilter::Mine {
            sent.user = UserFilter::Named(peer.name.clone());
        }
        let mut ask = Vec::new();
        let mut offline = Vec::new();
        for (qi, q) in self.config.queues.iter().enumerate() {
            if query.queue.as_ref().is_some_and(|only| *only != q.name) {
                continue;
            }
            match &self.shards[qi] {
                Some(link) => ask.push((q.name.clone(), link.conn)),
                None => offline.push(q.name.clone()),
            }
        }
        if let Some(only) = &query.queue {
            if ask.is_empty() && offline.is_empty() {
                return Err(self.no_such_queue(only));
            }
            if ask.is_empty() {
                return Err(Refusal::new(
                    RefusalCode::Unavailable,
                    format!("queue {only}'s shard is not connected"),
                ));
            }
        }
        Ok(JobsPlan {
            query: sent,
            ask,
            offline,
            limit,
        })
    }
}

/// Merges the shards' answers to a [`JobsPlan`]: newest first (submit time, then id), at most
/// `plan.limit` rows. `truncated` is set when rows were cut, when a shard cut its own list,
/// and when a shard could not be asked (`failed`) or is offline — the list is then known to
/// be incomplete.
pub fn merge_jobs(plan: &JobsPlan, answers: Vec<JobList>, failed: usize) -> JobList {
    let mut truncated = failed > 0 || !plan.offline.is_empty();
    let mut jobs = Vec::with_capacity(answers.iter().map(|a| a.jobs.len()).sum());
    for answer in answers {
        truncated |= answer.truncated;
        jobs.extend(answer.jobs);
    }
    jobs.sort_by_key(|j| std::cmp::Reverse((j.submit_ms, j.id)));
    if jobs.len() > plan.limit {
        jobs.truncate(plan.limit);
        truncated = true;
    }
    // Each shard's part fits a frame; all of them together may not.
    let (jobs, cut) = bounds::fit_reply(jobs);
    JobList {
        jobs,
        truncated: truncated || cut,
    }
}

/// A move as `queue moves` shows it.
fn move_info(view: MoveView) -> MoveInfo {
    let status = match view.status {
        MoveStatus::Active => "active",
        MoveStatus::Completed => "completed",
        MoveStatus::Cancelled => "cancelled",
    };
    let nodes = view
        .nodes
        .into_iter()
        .map(|n| {
            let (state, expected_free_ms, jobs) = match n.state {
                MoveNodeState::Outgoing {
                    expected_free_ms,
                    jobs,
                } => ("outgoing", expected_free_ms, jobs),
                MoveNodeState::Released => ("released", None, Vec::new()),
                MoveNodeState::Up => ("up", None, Vec::new()),
                MoveNodeState::Returning => ("returning", None, Vec::new()),
                MoveNodeState::Returned => ("returned", None, Vec::new()),
            };
            MoveNodeInfo {
                node: n.node,
                generation: n.generation,
                state: state.to_owned(),
                expected_free_ms,
                jobs,
                requested_ms: view.started_ms,
                released_ms: n.released_ms,
                acquired_ms: n.acquired_ms,
            }
        })
        .collect();
    MoveInfo {
        move_id: view.move_id,
        from: view.from,
        to: view.to,
        status: status.to_owned(),
        started_ms: view.started_ms,
        deadline_ms: view.deadline_ms,
        nodes,
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
