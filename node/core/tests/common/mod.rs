//! Launches and owners for the core's tests.

#![allow(dead_code)]

use shardsched_node_core::AgentCore;
use shardsched_wire::Fluid;
use shardsched_wire::msg::agent::{JobNode, NodeLaunch, NodeOwner, OwnerChange, SignedJobspec};
use shardsched_wire::msg::{Generation, JobId};

/// The heartbeat timeout of the tests: a 15 s lease.
pub const TIMEOUT_MS: u64 = 30_000;

pub fn job(n: u64) -> JobId {
    Fluid(n << 30)
}

pub fn owner(queue: &str, generation: u64) -> NodeOwner {
    NodeOwner {
        queue: queue.to_owned(),
        generation: Generation(generation),
    }
}

/// A one-task launch of `job` on `node` at `generation`.
pub fn launch(node: &str, job: JobId, generation: u64) -> Box<NodeLaunch> {
    Box::new(NodeLaunch {
        job,
        generation: Generation(generation),
        signed: SignedJobspec {
            jobspec_json: "{}".into(),
            cert_pem: String::new(),
            signature: Vec::new(),
        },
        nodes: vec![JobNode {
            node: node.to_owned(),
            agent: "127.0.0.1:9".parse().expect("addr"),
            first_rank: 0,
            ntasks: 1,
            cores: vec![0],
            gpus: vec![],
        }],
        node_rank: 0,
        time_limit_ms: 0,
        kill_grace_ms: 1_000,
        env: Vec::new(),
        r_json: "{}".into(),
    })
}

/// A core for `node3` owned by `queue` at `generation`.
pub fn owned(queue: &str, generation: u64) -> AgentCore {
    let mut core = AgentCore::new("node3", TIMEOUT_MS);
    core.handle_owner(0, owner(queue, generation), OwnerChange::Registered)
        .expect("owner");
    core
}
