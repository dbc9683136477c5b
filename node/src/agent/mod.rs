//! The agent process: one task owns the [`AgentCore`]; the others only carry bytes.
//!
//! ```text
//! coordinator link ─ register, heartbeats; Owner{..} on its connection ─┐
//! accept loop ────── shards: Launch, Kill, Renew, Forget, Output ───────┼─► core task ─► executor task
//!                    agents: Fence, FenceDone ─────────────────► executor │     (actions)   (spawn, kill,
//! executor ───────── Spawned, Ended ────────────────────────────────────┘                  watch, relay)
//! ```
//!
//! Each task lives in a module of its own: [`core_task`] (the core, held renewals, output
//! reads), [`links`] (the connections: shards and agents accepted, the coordinator's
//! link, the health check), [`jobs`] (the executor task: launches, kills, ends) and
//! [`fences`] (PMI barriers relayed between the agents of a job).

mod core_task;
mod fences;
mod jobs;
mod links;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use shardsched_node_core::pmi::Fence;
use shardsched_node_core::{Action, AgentCore, Refused};
use shardsched_process::files::{read_json, write_atomic};
use shardsched_process::plan::now_ms;
use shardsched_proto::msg::agent::{AgentReport, JobEnd, NodeLaunch, NodeOwner, OwnerChange};
use shardsched_proto::msg::{JobId, Refusal, RefusalCode, shard_node};
use shardsched_proto::{Credentials, Role, tls};
use tokio::sync::{Notify, mpsc, oneshot};

use crate::executor::{self, ExecSettings, Executor};
use crate::layout::{ADDRESS_FILE, LEASES_FILE};

/// The heartbeat timeout assumed until the coordinator says its own, ms.
pub const HEARTBEAT_TIMEOUT_DEFAULT_MS: u64 = 30_000;

/// How long the core task sleeps when its core has no deadline (every event ticks it
/// anyway; an idle agent should not wake for nothing).
const IDLE_WAKE: Duration = Duration::from_secs(60);

/// Most events queued for the core task.
const EVENTS_QUEUED_MAX: usize = 4096;

/// How long the agent waits between attempts to reach the coordinator.
const COORDINATOR_RETRY: Duration = Duration::from_millis(500);

/// What `shardsched node` was told.
#[derive(Clone, Debug)]
pub struct NodeOptions {
    /// The node (and the certificate's name).
    pub name: String,
    /// The coordinator's address.
    pub coordinator: SocketAddr,
    /// Where to listen for shards and other agents.
    pub listen: SocketAddr,
    /// The executor's settings.
    pub exec: ExecSettings,
    /// The site's health check and how often it runs (Slurm's HealthCheckProgram): a
    /// failure drains the node with its output as the reason.
    pub health: Option<(PathBuf, Duration)>,
}

/// What reaches the core task.
enum Event {
    Shard {
        from: String,
        request: shard_node::Request,
        reply: oneshot::Sender<Result<shard_node::Response, Refusal>>,
    },
    Owner {
        owner: NodeOwner,
        change: OwnerChange,
        reply: oneshot::Sender<Result<(), Refused>>,
    },
    Registered {
        heartbeat_timeout_ms: u64,
    },
    Report(oneshot::Sender<AgentReport>),
    Spawned {
        job: JobId,
        pid: u32,
    },
    Ended {
        job: JobId,
        end: JobEnd,
    },
    /// The health check's word: `None` fit, else why not.
    Health(Option<String>),
}

/// What reaches the executor task.
enum ExecInput {
    Action(Action),
    /// The core's `Spawn`, with when the launching shard's lease runs out.
    Spawn {
        queue: String,
        launch: Box<NodeLaunch>,
        lease_deadline_ms: u64,
    },
    /// A job a restarted agent found running: watch it again.
    Watch(JobId),
    Fence {
        from: String,
        job: JobId,
        fence: Fence,
        done: bool,
    },
}

fn refusal(e: impl std::fmt::Display, code: RefusalCode) -> Refusal {
    Refusal::new(code, e.to_string())
}

/// Runs the agent until the process is told to stop.
pub async fn run(options: NodeOptions) -> Result<(), String> {
    let creds = options.exec.creds.clone();
    let me = creds.identity().map_err(|e| e.to_string())?;
    if me.role != Role::Node || me.name != options.name {
        return Err(format!(
            "the certificate is {me}, not node {}: issue one with `shardsched cert issue --role \
             node --name {}`",
            options.name, options.name
        ));
    }
    let endpoint = tls::server_endpoint(&creds, options.listen).map_err(|e| e.to_string())?;
    let address = endpoint.local_addr().map_err(|e| e.to_string())?;
    let state_dir = options.exec.state_dir.clone();
    let cgroups = options.exec.cgroups.clone();
    write_atomic(
        &state_dir.join(ADDRESS_FILE),
        format!("{address}\n").as_bytes(),
    )
    .map_err(|e| e.to_string())?;
    let leases: BTreeMap<String, u64> = read_json(&state_dir.join(LEASES_FILE))
        .ok()
        .flatten()
        .unwrap_or_default();
    if options.exec.as_root {
        executor::open_jobs_dir(&state_dir)?;
    }
    let executor = Arc::new(Executor::open(options.exec.clone())?);
    let found = executor.recover();
    tracing::info!(node = %options.name, %address, recovered = found.len(), "node agent up");
    let core = AgentCore::recover(
        &options.name,
        HEARTBEAT_TIMEOUT_DEFAULT_MS,
        now_ms(),
        found,
        &leases,
    );
    let (events_tx, events) = mpsc::channel(EVENTS_QUEUED_MAX);
    let (exec_tx, exec_rx) = mpsc::unbounded_channel();
    // Jobs found running are watched again from the first moment.
    for job in core.report().jobs {
        if job.state.is_live() {
            let _ = exec_tx.send(ExecInput::Watch(job.job));
        }
    }
    tokio::spawn(links::accept_loop(
        endpoint.clone(),
        events_tx.clone(),
        exec_tx.clone(),
    ));
    let heartbeat_now = Arc::new(Notify::new());
    tokio::spawn(links::coordinator_link(
        endpoint.clone(),
        options.coordinator,
        address,
        events_tx.clone(),
        Arc::clone(&heartbeat_now),
    ));
    if let Some((script, every)) = options.health.clone() {
        tokio::spawn(links::health_checks(
            script,
            every,
            options.name.clone(),
            events_tx.clone(),
        ));
    }
    tokio::spawn(jobs::executor_task(
        Arc::clone(&executor),
        options.name.clone(),
        endpoint,
        exec_rx,
        events_tx,
    ));
    tokio::select! {
        () = core_task::core_task(core, leases, events, exec_tx, state_dir, heartbeat_now) => Ok(()),
        () = shardsched_proto::shutdown_signal() => {
            tracing::info!("node agent stopping; its jobs' supervisors keep running");
            executor.stop_spares().await;
            if let Some(cgroups) = &cgroups {
                cgroups.remove_empty();
            }
            Ok(())
        }
    }
}

/// Builds credentials from a state directory's `ca.pem`, `cert.pem`, `key.pem`.
pub fn load_credentials(state_dir: &std::path::Path) -> Result<Credentials, String> {
    use shardsched_proto::state_dir::{CA_CERT_FILE, CERT_FILE, KEY_FILE};
    Credentials::load(
        &state_dir.join(CA_CERT_FILE),
        &state_dir.join(CERT_FILE),
        &state_dir.join(KEY_FILE),
    )
    .map_err(|e| format!("the agent's certificate in {}: {e}", state_dir.display()))
}
