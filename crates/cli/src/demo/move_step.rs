//! The demo's move: a node busy in one running queue moves to another running queue whose
//! definition overlaps the first's (docs/MOVES.md). Told as it happens: the node is
//! outgoing in its donor while its job runs on, released when the job ends, and up in the
//! recipient right after; then it goes back, idle, so the demo leaves the cluster as it
//! found it.

use std::time::Instant;

use anyhow::{Result, bail};
use shardsched_jobspec::{Constraint, Shorthand};
use shardsched_proto::Role;
use shardsched_proto::msg::client_coord::{MoveInfo, MoveNodeInfo, MoveRequest, Request, Response};
use shardsched_proto::msg::{JobState, MoveId, QueueStatus};
use shardsched_resource::decode_hostlist;

use super::{DEMO_POLL_INTERVAL, submit_jobspec, wait_for};
use shardsched_client::output::human_duration;
use shardsched_client::{Client, wire_error};

/// How long the busy node's job runs (simulated), in seconds.
const MOVE_JOB_SECS: u64 = 4;

/// A node one started queue owns that another started queue's definition has.
struct Candidate {
    node: String,
    from: String,
    to: String,
}

/// The first node (in the donors' name order) that `queues` could move between two of
/// them: owned by a started queue, in another started queue's definition.
fn candidate(queues: &[QueueStatus]) -> Option<Candidate> {
    let hosts = |list: &str| decode_hostlist(list).unwrap_or_default();
    let started: Vec<&QueueStatus> = queues.iter().filter(|q| q.started && q.online).collect();
    for from in &started {
        for to in started.iter().filter(|q| q.name != from.name) {
            let defined = hosts(&to.definition);
            if let Some(node) = hosts(&from.owned).into_iter().find(|n| defined.contains(n)) {
                return Some(Candidate {
                    node,
                    from: from.name.clone(),
                    to: to.name.clone(),
                });
            }
        }
    }
    None
}

/// Step "a busy node moves": see the module documentation. Skipped, saying why, when no
/// two started queues overlap or the demo's certificate is not an admin's.
pub(super) async fn run(
    client: &Client,
    queues: &[QueueStatus],
    started: Instant,
    deadline: Instant,
) -> Result<()> {
    let Some(Candidate { node, from, to }) = candidate(queues) else {
        say!("   skipped: no two started queues have overlapping definitions");
        return Ok(());
    };
    if client.me().is_none_or(|p| p.role != Role::Admin) {
        say!("   skipped: moving nodes needs an admin certificate");
        return Ok(());
    }
    let at = || format!("+{:>6.2}s", started.elapsed().as_secs_f64());
    let shorthand = Shorthand {
        nodes: Some(1),
        duration: MOVE_JOB_SECS,
        command: vec!["sleep".into(), MOVE_JOB_SECS.to_string()],
        queue: Some(from.clone()),
        ..Shorthand::default()
    };
    let mut jobspec = shorthand.to_jobspec()?;
    jobspec.attributes.constraints = Some(Constraint::Hostlist(vec![node.clone()]));
    let job = submit_jobspec(client, &from, &jobspec).await?;
    let running = wait_for(client, job, deadline, |j| j.state != JobState::Pending).await?;
    say!(
        "   {} {job}  {from:<8} runs on {node} ({}s); {to}'s definition has {node} too",
        at(),
        MOVE_JOB_SECS
    );
    if running.state != JobState::Running {
        bail!("the job on {node} is {}, not running", running.state);
    }

    let move_id = move_node(client, &node, &from, &to).await?;
    say!(
        "   {} shardsched queue move {node} --from {from} --to {to}: move {}",
        at(),
        move_id.0
    );
    let outgoing = wait_node(client, move_id, &node, deadline, |n| {
        n.state != "outgoing" || n.expected_free_ms.is_some()
    })
    .await?;
    if outgoing.state == "outgoing" {
        let free_in = outgoing
            .expected_free_ms
            .map(|t| t.saturating_sub(shardsched_client::output::now_ms()))
            .unwrap_or(0);
        say!(
            "   {} {node} is outgoing in {from}: its job runs on, untouched; {to} plans on it in {}",
            at(),
            human_duration(free_in)
        );
    }
    let ended = wait_for(client, job, deadline, |j| !j.state.is_active()).await?;
    say!("   {} {job} {} on {node}", at(), ended.state);
    let up = wait_node(client, move_id, &node, deadline, |n| n.state == "up").await?;
    let end_ms = ended.end_ms.unwrap_or_default();
    let since =
        |t: Option<u64>| t.map_or("?".to_owned(), |t| human_duration(t.saturating_sub(end_ms)));
    say!(
        "   {} {node} released by {from} {} after the job's end, up in {to} {} after it",
        at(),
        since(up.released_ms),
        since(up.acquired_ms)
    );

    // Back where it was: idle now, so it moves at once.
    let back = move_node(client, &node, &to, &from).await?;
    wait_node(client, back, &node, deadline, |n| n.state == "up").await?;
    say!(
        "   {} {node} moved back to {from} (move {}), idle",
        at(),
        back.0
    );
    Ok(())
}

async fn move_node(client: &Client, node: &str, from: &str, to: &str) -> Result<MoveId> {
    let request = Request::Move(MoveRequest {
        nodes: vec![node.to_owned()],
        from: from.to_owned(),
        to: to.to_owned(),
        deadline_ms: None,
        dry_run: false,
    });
    match client
        .coordinator(&request)
        .await
        .map_err(|e| wire_error(e, "coordinator"))?
    {
        Response::Done {
            move_id: Some(id), ..
        } => Ok(id),
        other => bail!("the coordinator answered queue move with {other:?}"),
    }
}

/// Polls `queue moves` until `done` holds for `node` in move `move_id`; its row then.
async fn wait_node(
    client: &Client,
    move_id: MoveId,
    node: &str,
    deadline: Instant,
    done: impl Fn(&MoveNodeInfo) -> bool,
) -> Result<MoveNodeInfo> {
    loop {
        let moves: Vec<MoveInfo> = match client
            .coordinator(&Request::Moves)
            .await
            .map_err(|e| wire_error(e, "coordinator"))?
        {
            Response::Moves { moves, .. } => moves,
            other => bail!("the coordinator answered queue moves with {other:?}"),
        };
        let row = moves
            .into_iter()
            .find(|m| m.move_id == move_id)
            .and_then(|m| m.nodes.into_iter().find(|n| n.node == node));
        match row {
            Some(row) if done(&row) => return Ok(row),
            _ if Instant::now() > deadline => {
                bail!("gave up waiting for {node} in move {}", move_id.0)
            }
            _ => tokio::time::sleep(DEMO_POLL_INTERVAL).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(name: &str, definition: &str, owned: &str) -> QueueStatus {
        QueueStatus {
            name: name.into(),
            enabled: true,
            started: true,
            queue_policy: shardsched_proto::msg::QueuePolicy::Fcfs,
            match_policy: shardsched_proto::msg::MatchPolicy::First,
            nodes_defined: 0,
            nodes_owned: 0,
            nodes_up: 0,
            jobs_pending: 0,
            jobs_running: 0,
            online: true,
            definition: definition.into(),
            owned: owned.into(),
            reason: String::new(),
            pending_reasons: Default::default(),
        }
    }

    #[test]
    fn the_candidate_is_a_donors_node_in_the_recipients_definition() {
        let queues = [
            queue("batch", "node[0-111]", "node[0-111]"),
            queue("debug", "node[96-127]", "node[112-127]"),
        ];
        let c = candidate(&queues).expect("a candidate");
        assert_eq!(
            (c.node.as_str(), c.from.as_str(), c.to.as_str()),
            ("node96", "batch", "debug")
        );
        let apart = [
            queue("batch", "node[0-111]", "node[0-111]"),
            queue("debug", "node[112-127]", "node[112-127]"),
        ];
        assert!(candidate(&apart).is_none());
    }
}
