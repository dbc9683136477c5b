//! The node agent, `shardsched node`: one per compute node, it runs the tasks of the jobs
//! allocated there, as the users who submitted them, each job in a cgroup of its own.
//!
//! Its decisions are made by the pure core, [`shardsched_node_core::AgentCore`] (fencing,
//! the table, the lease); this crate is the driver around it: QUIC with the coordinator
//! (registration, heartbeats, the owner at each hand-over), with shards (launch, kill,
//! renew, output) and with other agents (PMI fences); and the executor that turns the
//! core's actions into job directories, cgroups and supervisors
//! (`shardsched_process::supervisor`, the `shardsched-supervisor` binary), which outlive
//! the agent.

pub mod agent;
pub mod cgroup;
pub mod executor;
pub mod launch_log;
pub mod layout;
pub mod plan;
pub mod site;
pub mod spares;
pub mod user;
