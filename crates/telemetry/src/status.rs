//! What the status page shows, computed from the coordinator's views.
//!
//! The coordinator's core is the one owner of node state; the page holds no copy of it. On
//! each request (and for the live feed, every [`FEED_INTERVAL`](crate::http::FEED_INTERVAL)
//! while a browser watches) the HTTP server asks the coordinator for its views through
//! [`StatusSource`] — the same replies `queue list`, `resource list` and `queue moves` get —
//! and turns them into the page's JSON here.
//!
//! **What the page may show.** The coordinator does not hold user names, job names or
//! jobspecs (those stay in the shards), so the page never shows them. Bound to loopback
//! ([`Exposure::Full`]) it shows everything the views hold; bound to any other address
//! ([`Exposure::Redacted`]) it leaves out what people wrote and what names jobs: the
//! admins' reasons for a node down or drained or a queue disabled, the shards' pending
//! reasons, and the ids of the jobs holding a moving node (their count stays). A person who
//! needs those reads them with the CLI, whose certificate says who they are.

use std::future::Future;
use std::pin::Pin;

use serde::Serialize;
use shardsched_wire::msg::client_coord::MoveInfo;
use shardsched_wire::msg::{NodeState, NodeStatus, PendingReasons, QueueStatus};

/// The coordinator's views at one instant: the page's and the view-derived metrics' input.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterStatus {
    /// When the views were taken, ms since the Unix epoch (coordinator clock).
    pub time_ms: u64,
    /// The queue a submit without `-q` goes to.
    pub default_queue: Option<String>,
    /// `queue list`.
    pub queues: Vec<QueueStatus>,
    /// `resource list`, in cluster order.
    pub nodes: Vec<NodeStatus>,
    /// `queue moves`: unfinished moves, then the newest finished ones.
    pub moves: Vec<MoveInfo>,
}

/// Why the views could not be had (the coordinator is stopping, or its core did not answer).
#[derive(Debug, thiserror::Error)]
#[error("the coordinator's views are not available: {0}")]
pub struct StatusUnavailable(pub String);

/// The future of a [`StatusSource::status`] call.
pub type StatusFuture<'a> =
    Pin<Box<dyn Future<Output = Result<ClusterStatus, StatusUnavailable>> + Send + 'a>>;

/// Where the HTTP server gets the coordinator's views: implemented by the coordinator's
/// driver, which asks its core as it would for a client's request.
pub trait StatusSource: Send + Sync + 'static {
    /// The views now.
    fn status(&self) -> StatusFuture<'_>;
}

/// How much the page shows, by where it is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Exposure {
    /// Bound to loopback: everything the views hold.
    Full,
    /// Bound elsewhere: no free text and no job ids (see the module doc).
    Redacted,
}

impl Exposure {
    /// [`Exposure::Full`] for a loopback address, else [`Exposure::Redacted`].
    pub fn for_address(addr: std::net::SocketAddr) -> Exposure {
        if addr.ip().is_loopback() {
            Exposure::Full
        } else {
            Exposure::Redacted
        }
    }
}

/// The page's JSON (`/api/status`, and each event of `/api/events`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StatusPage {
    /// When the views were taken, ms since the Unix epoch.
    pub time_ms: u64,
    /// How much this page shows.
    pub exposure: Exposure,
    /// The default queue.
    pub default_queue: Option<String>,
    /// Every queue, in configuration order.
    pub queues: Vec<PageQueue>,
    /// Every node, in cluster order.
    pub nodes: Vec<PageNode>,
    /// Unfinished moves first, then the newest finished ones.
    pub moves: Vec<PageMove>,
}

/// One queue on the page.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PageQueue {
    pub name: String,
    pub enabled: bool,
    pub started: bool,
    /// Its shard is registered.
    pub online: bool,
    pub policy: String,
    pub nodes_defined: u32,
    pub nodes_owned: u32,
    pub nodes_up: u32,
    pub jobs_pending: u32,
    pub jobs_running: u32,
    /// Why it was disabled (`None` when redacted or none was given).
    pub reason: Option<String>,
    /// Its pending jobs counted by why they wait (counts only: shown off loopback too).
    pub pending_reasons: PendingReasons,
}

/// One node on the page.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PageNode {
    pub name: String,
    /// Its owning queue (`None`: no queue owns it).
    pub queue: Option<String>,
    /// `up`, `down`, `drained`, `draining`, `outgoing`, `incoming`, `not-owned`.
    pub state: &'static str,
    pub jobs_running: u32,
    /// Why it is down or drained, or where it is moving (`None` when redacted).
    pub reason: Option<String>,
}

/// One move on the page.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PageMove {
    pub id: u64,
    pub from: String,
    pub to: String,
    /// `active`, `completed` or `cancelled`.
    pub status: String,
    pub started_ms: u64,
    pub deadline_ms: Option<u64>,
    pub nodes: Vec<PageMoveNode>,
}

/// One node of a move on the page.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PageMoveNode {
    pub node: String,
    /// `outgoing`, `released`, `up`, `returning` or `returned`.
    pub step: String,
    /// Outgoing: when its jobs are expected to have ended.
    pub expected_free_ms: Option<u64>,
    /// Outgoing: how many of the donor's jobs still hold it.
    pub jobs: usize,
    /// Their ids, F58 (empty when redacted).
    pub job_ids: Vec<String>,
    pub released_ms: Option<u64>,
    pub acquired_ms: Option<u64>,
}

/// A node's state as flux-core words it, and as `resource list` prints it: a drained node
/// still running jobs is `draining` until they end.
pub fn node_state(node: &NodeStatus) -> &'static str {
    if node.state == NodeState::Drained && node.jobs_running > 0 {
        "draining"
    } else {
        node.state.as_str()
    }
}

impl StatusPage {
    /// The page for `status`, showing what `exposure` allows.
    pub fn new(status: &ClusterStatus, exposure: Exposure) -> StatusPage {
        let full = exposure == Exposure::Full;
        let text = |t: &Option<String>| t.clone().filter(|_| full);
        StatusPage {
            time_ms: status.time_ms,
            exposure,
            default_queue: status.default_queue.clone(),
            queues: status
                .queues
                .iter()
                .map(|q| PageQueue {
                    name: q.name.clone(),
                    enabled: q.enabled,
                    started: q.started,
                    online: q.online,
                    policy: q.queue_policy.to_string(),
                    nodes_defined: q.nodes_defined,
                    nodes_owned: q.nodes_owned,
                    nodes_up: q.nodes_up,
                    jobs_pending: q.jobs_pending,
                    jobs_running: q.jobs_running,
                    reason: text(&Some(q.reason.clone()).filter(|r| !r.is_empty())),
                    pending_reasons: q.pending_reasons,
                })
                .collect(),
            nodes: status
                .nodes
                .iter()
                .map(|n| PageNode {
                    name: n.name.clone(),
                    queue: n.queue.clone(),
                    state: node_state(n),
                    jobs_running: n.jobs_running,
                    reason: text(&n.reason),
                })
                .collect(),
            moves: status
                .moves
                .iter()
                .map(|m| PageMove {
                    id: m.move_id.0,
                    from: m.from.clone(),
                    to: m.to.clone(),
                    status: m.status.clone(),
                    started_ms: m.started_ms,
                    deadline_ms: m.deadline_ms,
                    nodes: m
                        .nodes
                        .iter()
                        .map(|n| PageMoveNode {
                            node: n.node.clone(),
                            step: n.state.clone(),
                            expected_free_ms: n.expected_free_ms,
                            jobs: n.jobs.len(),
                            job_ids: if full {
                                n.jobs.iter().map(ToString::to_string).collect()
                            } else {
                                Vec::new()
                            },
                            released_ms: n.released_ms,
                            acquired_ms: n.acquired_ms,
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use shardsched_wire::fluid::Fluid;
    use shardsched_wire::msg::client_coord::MoveNodeInfo;
    use shardsched_wire::msg::{Generation, MoveId};

    fn status() -> ClusterStatus {
        ClusterStatus {
            time_ms: 1_000,
            default_queue: Some("batch".into()),
            queues: Vec::new(),
            nodes: vec![NodeStatus {
                name: "node0".into(),
                queue: Some("batch".into()),
                state: NodeState::Drained,
                generation: Generation(3),
                jobs_running: 1,
                reason: Some("alice's fan is loud".into()),
                usage: Default::default(),
            }],
            moves: vec![MoveInfo {
                move_id: MoveId(7),
                from: "batch".into(),
                to: "debug".into(),
                status: "active".into(),
                started_ms: 900,
                deadline_ms: None,
                nodes: vec![MoveNodeInfo {
                    node: "node1".into(),
                    generation: Generation(4),
                    state: "outgoing".into(),
                    expected_free_ms: Some(5_000),
                    jobs: vec![Fluid(12_345)],
                    requested_ms: 900,
                    released_ms: None,
                    acquired_ms: None,
                }],
            }],
        }
    }

    #[test]
    fn loopback_shows_reasons_and_job_ids_and_elsewhere_neither() {
        let full = StatusPage::new(&status(), Exposure::Full);
        assert_eq!(full.nodes[0].state, "draining");
        assert_eq!(full.nodes[0].reason.as_deref(), Some("alice's fan is loud"));
        assert_eq!(full.moves[0].nodes[0].job_ids.len(), 1);

        let redacted = StatusPage::new(&status(), Exposure::Redacted);
        assert_eq!(redacted.nodes[0].reason, None);
        assert_eq!(redacted.moves[0].nodes[0].jobs, 1);
        assert!(redacted.moves[0].nodes[0].job_ids.is_empty());
        let json = serde_json::to_string(&redacted).unwrap_or_default();
        assert!(!json.contains("alice"), "{json}");
    }

    #[test]
    fn exposure_follows_the_bound_address() {
        let at = |s: &str| Exposure::for_address(s.parse().unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(at("127.0.0.1:8080"), Exposure::Full);
        assert_eq!(at("[::1]:8080"), Exposure::Full);
        assert_eq!(at("0.0.0.0:8080"), Exposure::Redacted);
        assert_eq!(at("192.0.2.1:8080"), Exposure::Redacted);
    }
}
