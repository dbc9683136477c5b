//! One move, timed: the request, the coordinator's answer, the donor's `released` line and
//! the recipient's `up` lines, all on CLOCK_MONOTONIC; and the job-end phase.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use shardsched_client::output::now_ms;
use shardsched_client::{Client, StateDir, new_key, wire_error};
use shardsched_jobspec::Shorthand;
use shardsched_proto::msg::client_coord::{self, MoveRequest};
use shardsched_proto::msg::client_shard::{Request, Response, Submit};
use shardsched_proto::msg::{JobId, MoveId, Route};
use shardsched_proto::state_dir::TRANSITIONS_FILE;
use shardsched_shard::driver::transitions::{LogLine, monotonic_ns};

use super::log_tail::LogTail;
use super::{FINISH_POLL, JOB_END_SPACING_MS, MOVE_TIMEOUT, TIME_SCALE};

/// The client and the two queues' transition logs: what every phase measures with.
pub struct MoveBench {
    client: Client,
    left: LogTail,
    right: LogTail,
}

/// One move's times, ns after its request was sent.
pub struct Moved {
    /// The coordinator's answer (the move is journaled).
    pub answered_ns: u64,
    /// The donor's last `released` line (written when it applied `Release`, before its
    /// journal commit).
    pub released_ns: u64,
    /// The recipient's last `up` line.
    pub last_up_ns: u64,
}

impl MoveBench {
    /// Connects to the `up` in `dir`, whose queues are `left` and `right`.
    pub async fn connect(dir: &Path) -> Result<MoveBench> {
        let state = StateDir::at(dir.to_owned());
        Ok(MoveBench {
            client: Client::connect(&state).await?,
            left: LogTail::new(state.shard_dir("left").join(TRANSITIONS_FILE)),
            right: LogTail::new(state.shard_dir("right").join(TRANSITIONS_FILE)),
        })
    }

    /// Closes the client.
    pub async fn close(&self) {
        self.client.close().await;
    }

    /// Moves `nodes` and waits until all are up in the recipient.
    pub async fn move_nodes(&mut self, nodes: &[String], from: &str, to: &str) -> Result<Moved> {
        self.left.skip_to_end()?;
        self.right.skip_to_end()?;
        let request = client_coord::Request::Move(MoveRequest {
            nodes: nodes.to_vec(),
            from: from.to_owned(),
            to: to.to_owned(),
            deadline_ms: None,
            dry_run: false,
        });
        let sent = monotonic_ns();
        let move_id = match self.client.coordinator(&request).await {
            Ok(client_coord::Response::Done { move_id }) => move_id,
            Ok(other) => bail!("the coordinator answered a move with {other:?}"),
            Err(e) => return Err(wire_error(e, "coordinator")),
        };
        let answered = monotonic_ns();
        let tail = if to == "left" {
            &mut self.left
        } else {
            &mut self.right
        };
        let ups = tail.wait_up(nodes).await?;
        let last = ups.values().copied().max().unwrap_or(sent);
        let donor = if to == "left" {
            &mut self.right
        } else {
            &mut self.left
        };
        let released = donor
            .lines_since_skip()?
            .iter()
            .filter(|l| l.kind == "released")
            .map(|l| l.at_ns)
            .max()
            .unwrap_or(sent);
        // The nodes are up; the move is finished once the coordinator journaled the
        // recipient's acknowledgements (the next move of these nodes waits for that).
        self.wait_finished(move_id).await?;
        Ok(Moved {
            answered_ns: ns_between(sent, answered),
            released_ns: ns_between(sent, released),
            last_up_ns: ns_between(sent, last),
        })
    }

    /// Waits until the coordinator no longer lists `move_id` as active.
    async fn wait_finished(&self, move_id: Option<MoveId>) -> Result<()> {
        let Some(id) = move_id else {
            return Ok(());
        };
        let deadline = Instant::now() + MOVE_TIMEOUT;
        loop {
            let one = client_coord::Request::MoveOf { move_id: id };
            let moves = match self.client.coordinator(&one).await {
                Ok(client_coord::Response::Moves { moves, .. }) => moves,
                Ok(other) => bail!("the coordinator answered queue moves with {other:?}"),
                Err(e) => return Err(wire_error(e, "coordinator")),
            };
            if !moves
                .iter()
                .any(|m| m.move_id == id && m.status == "active")
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "move {} still active after {} s",
                    id.0,
                    MOVE_TIMEOUT.as_secs()
                );
            }
            tokio::time::sleep(FINISH_POLL).await;
        }
    }

    /// Phase 4: `count` jobs on `left`, their nodes moved to `right` while they run; per node,
    /// job end → up, by the donor's `released` line and by the job's `end_ms`.
    pub async fn job_ends(&mut self, count: u64) -> Result<(Vec<u64>, Vec<u64>)> {
        if count == 0 {
            // (A move needs a node: with none the coordinator refuses it.)
            return Ok((Vec::new(), Vec::new()));
        }
        let routes = self.client.routes().await?;
        let Some(route) = routes.queue("left").cloned() else {
            bail!("queue left has no route");
        };
        // Wall − monotonic, to put `end_ms` on the logs' clock.
        let offset_ns =
            i128::from(now_ms()) * 1_000_000 - i128::try_from(monotonic_ns()).unwrap_or(0);
        let mut ids = Vec::new();
        for i in 0..count {
            // Simulated seconds; the spacing in real time is JOB_END_SPACING_MS.
            let secs = (1000 + i * JOB_END_SPACING_MS) * TIME_SCALE / 1000;
            let jobspec = Shorthand {
                nodes: Some(1),
                exclusive: true,
                duration: secs,
                command: vec!["sleep".into(), secs.to_string()],
                queue: Some("left".into()),
                ..Shorthand::default()
            }
            .to_jobspec()
            .context("building the job-end jobspec")?;
            let request = Request::Submit(Submit {
                idempotency_key: new_key(),
                jobspec_json: jobspec.to_json().to_string(),
                urgency: None,
                array: None,
                signature: None,
            });
            match self.client.ask_shard(&route, &request).await? {
                Response::Submitted { id, .. } => ids.push(id),
                other => bail!("unexpected answer to a submit: {other:?}"),
            }
        }
        let running = jobs_of(&self.client, &route, &ids).await?;
        let mut nodes = Vec::new();
        for id in &ids {
            match running.get(id).and_then(|j| j.nodes.first()) {
                Some(node) if running[id].end_ms.is_none() => nodes.push(node.clone()),
                _ => bail!("job {id} did not start at once, or ended before its node moved"),
            }
        }
        self.move_nodes(&nodes, "left", "right").await?;
        // Every node is up in right now; the donor's released lines are in its log.
        let released = self.left.lines_since_skip()?;
        let ups = self.right.lines_since_skip()?;
        let ended = jobs_of(&self.client, &route, &ids).await?;
        let (mut by_released, mut by_end_ms) = (Vec::new(), Vec::new());
        for (id, node) in ids.iter().zip(&nodes) {
            let up = find(&ups, node, "up").context("no up line")?;
            let rel = find(&released, node, "released").context("no released line")?;
            by_released.push(ns_between(rel, up));
            if let Some(end_ms) = ended.get(id).and_then(|j| j.end_ms) {
                let end_mono = i128::from(end_ms) * 1_000_000 - offset_ns;
                by_end_ms
                    .push(u64::try_from(i128::try_from(up).unwrap_or(0) - end_mono).unwrap_or(0));
            }
        }
        Ok((by_released, by_end_ms))
    }
}

fn ns_between(from: u128, to: u128) -> u64 {
    u64::try_from(to.saturating_sub(from)).unwrap_or(u64::MAX)
}

fn find(lines: &[LogLine], node: &str, kind: &str) -> Option<u128> {
    lines
        .iter()
        .find(|l| l.node == node && l.kind == kind)
        .map(|l| l.at_ns)
}

/// The jobs `ids` as `route`'s shard lists them, by id.
async fn jobs_of(
    client: &Client,
    route: &Route,
    ids: &[JobId],
) -> Result<BTreeMap<JobId, shardsched_proto::msg::JobSummary>> {
    let wanted: HashSet<JobId> = ids.iter().copied().collect();
    let jobs = crate::system::shard_jobs(client, route, &wanted).await?;
    Ok(jobs.into_iter().map(|j| (j.id, j)).collect())
}
