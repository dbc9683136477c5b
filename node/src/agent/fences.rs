//! PMI barriers across a job's nodes: each node's puts go to the leader (node rank 0),
//! which sends the whole space back to every other node's agent; each agent hands it to its
//! supervisor through the job's directory.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use shardsched_node_core::pmi::{Fence, FenceCollector};
use shardsched_process::files::write_atomic;
use shardsched_proto::msg::agent::NodeLaunch;
use shardsched_proto::msg::{JobId, node_node};
use shardsched_proto::{Role, connect};

use super::jobs::WatchedJob;
use crate::layout::fence_file;

/// This node's puts of a barrier: to the leader (node rank 0), or, on the leader, into its
/// collector.
pub(super) fn send_fence(
    node: &str,
    endpoint: &quinn::Endpoint,
    launch: &NodeLaunch,
    collectors: &mut BTreeMap<JobId, FenceCollector>,
    dir: &std::path::Path,
    fence: Fence,
) {
    let Some(leader) = launch.nodes.first() else {
        return;
    };
    if launch.node_rank == 0 {
        let collector = collectors
            .entry(launch.job)
            .or_insert_with(|| FenceCollector::new(launch.nodes.len()));
        let epoch = fence.epoch;
        if let Some(all) = collector.add(node, fence) {
            finish_fence(endpoint, launch, dir, epoch, all);
        }
        return;
    }
    let request = node_node::Request::Fence(node_node::Fence {
        job: launch.job,
        epoch: fence.epoch,
        kvs: fence.kvs,
    });
    tokio::spawn(send_to(
        endpoint.clone(),
        leader.agent,
        leader.node.clone(),
        request,
    ));
}

/// The leader has every node's puts: the whole space to its own supervisor and to each
/// other node's agent.
fn finish_fence(
    endpoint: &quinn::Endpoint,
    launch: &NodeLaunch,
    dir: &std::path::Path,
    epoch: u32,
    all: Vec<(String, String)>,
) {
    write_fence_in(dir, epoch, &all);
    for other in launch.nodes.iter().skip(1) {
        let request = node_node::Request::FenceDone(node_node::Fence {
            job: launch.job,
            epoch,
            kvs: all.clone(),
        });
        tokio::spawn(send_to(
            endpoint.clone(),
            other.agent,
            other.node.clone(),
            request,
        ));
    }
}

fn write_fence_in(dir: &std::path::Path, epoch: u32, kvs: &[(String, String)]) {
    if let Ok(bytes) = serde_json::to_vec(kvs) {
        let _ = write_atomic(&fence_file(dir, epoch, true), &bytes);
    }
}

/// A fence from another agent: the leader collects it, a follower hands the whole space to
/// its supervisor. Only from an agent whose node is one of the job's.
#[allow(clippy::too_many_arguments)]
pub(super) fn relay(
    node: &str,
    endpoint: &quinn::Endpoint,
    watched: &BTreeMap<JobId, WatchedJob>,
    collectors: &mut BTreeMap<JobId, FenceCollector>,
    job: JobId,
    from: &str,
    fence: Fence,
    done: bool,
) {
    let Some(watch) = watched.get(&job) else {
        return;
    };
    let Some(launch) = &watch.launch else { return };
    if !launch.nodes.iter().any(|n| n.node == from) || from == node {
        tracing::warn!(%job, %from, "a fence from an agent that is not one of the job's");
        return;
    }
    if done {
        if launch.nodes.first().is_some_and(|l| l.node == from) {
            write_fence_in(&watch.dir, fence.epoch, &fence.kvs);
        }
        return;
    }
    if launch.node_rank != 0 {
        return;
    }
    let collector = collectors
        .entry(job)
        .or_insert_with(|| FenceCollector::new(launch.nodes.len()));
    let epoch = fence.epoch;
    if let Some(all) = collector.add(from, fence) {
        finish_fence(endpoint, launch, &watch.dir, epoch, all);
    }
}

async fn send_to(
    endpoint: quinn::Endpoint,
    addr: SocketAddr,
    name: String,
    request: node_node::Request,
) {
    let result = async {
        let session = connect(&endpoint, addr, Role::Node, &name)
            .await
            .map_err(|e| e.to_string())?;
        let answer = session.request(&request).await.map_err(|e| e.to_string());
        session.close();
        answer
    }
    .await;
    if let Err(e) = result {
        tracing::warn!(to = %name, error = %e, "cannot send a PMI fence");
    }
}
