//! The agent process: one task owns the [`AgentCore`]; the others only carry bytes.
//!
//! ```text
//! coordinator link ─ register, heartbeats; Owner{..} on its connection ─┐
//! accept loop ────── shards: Launch, Kill, Renew, Forget, Output ───────┼─► core task ─► executor task
//!                    agents: Fence, FenceDone ─────────────────► executor │     (actions)   (spawn, kill,
//! executor ───────── Spawned, Ended ────────────────────────────────────┘                  watch, relay)
//! ```

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use shardsched_node_core::pmi::{Fence, FenceCollector};
use shardsched_node_core::{Action, AgentCore, Refused};
use shardsched_process::files::{read_json, read_range, write_atomic};
use shardsched_process::plan::now_ms;
use shardsched_proto::msg::agent::{AgentReport, JobEnd, NodeLaunch, NodeOwner, OwnerChange};
use shardsched_proto::msg::shard_node::{OutputChunk, OutputRequest};
use shardsched_proto::msg::{JobId, Refusal, RefusalCode};
use shardsched_proto::msg::{coord_node, node_coord, node_node, shard_node};
use shardsched_proto::{Credentials, Peer, Role, Session, accept, connect, serve, tls};
use std::sync::Arc;

use tokio::sync::{Notify, mpsc, oneshot};

use crate::executor::{self, EXEC_POLL_INTERVAL, ExecSettings};
use crate::layout::{
    ADDRESS_FILE, LEASE_DEADLINES_FILE, LEASES_FILE, PLAN_FILE, fence_file, job_dir, output_file,
};
use crate::plan::Plan;

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
    let found = executor::recover(&state_dir);
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
    tokio::spawn(accept_loop(
        endpoint.clone(),
        events_tx.clone(),
        exec_tx.clone(),
    ));
    let heartbeat_now = Arc::new(Notify::new());
    tokio::spawn(coordinator_link(
        endpoint.clone(),
        options.coordinator,
        address,
        events_tx.clone(),
        Arc::clone(&heartbeat_now),
    ));
    if let Some((script, every)) = options.health.clone() {
        tokio::spawn(health_checks(
            script,
            every,
            options.name.clone(),
            events_tx.clone(),
        ));
    }
    tokio::spawn(executor_task(
        options.exec.clone(),
        options.name.clone(),
        endpoint,
        exec_rx,
        events_tx,
    ));
    tokio::select! {
        () = core_task(core, leases, events, exec_tx, state_dir, heartbeat_now) => Ok(()),
        () = shardsched_proto::shutdown_signal() => {
            tracing::info!("node agent stopping; its jobs' supervisors keep running");
            if let Some(cgroups) = &cgroups {
                cgroups.remove_empty();
            }
            Ok(())
        }
    }
}

/// A shard's renewal whose answer waits for the agent's report to change (protocol 14).
struct HeldRenewal {
    /// The digest of the report the shard has.
    since: u64,
    /// When to answer anyway, ms.
    until_ms: u64,
    reply: oneshot::Sender<Result<shard_node::Response, Refusal>>,
}

/// The one task that owns the core.
async fn core_task(
    mut core: AgentCore,
    mut leases: BTreeMap<String, u64>,
    mut events: mpsc::Receiver<Event>,
    exec: mpsc::UnboundedSender<ExecInput>,
    state_dir: PathBuf,
    heartbeat_now: Arc<Notify>,
) {
    let mut held: Vec<HeldRenewal> = Vec::new();
    loop {
        let wake_at = held
            .iter()
            .map(|h| h.until_ms)
            .chain(core.next_wake_ms())
            .min();
        let wake = wake_at
            .map(|at| Duration::from_millis(at.saturating_sub(now_ms())))
            .unwrap_or(IDLE_WAKE);
        let event = tokio::select! {
            event = events.recv() => match event {
                Some(event) => Some(event),
                None => return,
            },
            () = tokio::time::sleep(wake) => None,
        };
        let now = now_ms();
        if let Some(event) = event {
            let before = core.unhealthy().map(str::to_owned);
            held.extend(handle(&mut core, now, event, &state_dir));
            if core.unhealthy() != before.as_deref() {
                tracing::warn!(unhealthy = ?core.unhealthy(), "the node's health changed; telling the coordinator");
                heartbeat_now.notify_one();
            }
        }
        core.tick(now);
        for action in core.take_actions() {
            match action {
                Action::PersistLease { queue, heard_ms } => {
                    leases.insert(queue, heard_ms);
                    persist_leases(&state_dir, &leases, core.lease_ms());
                }
                Action::Spawn { queue, launch } => {
                    let lease_deadline_ms = core
                        .lease_deadline_ms(&queue)
                        .unwrap_or_else(|| now.saturating_add(core.lease_ms()));
                    let _ = exec.send(ExecInput::Spawn {
                        queue,
                        launch,
                        lease_deadline_ms,
                    });
                }
                action => {
                    let _ = exec.send(ExecInput::Action(action));
                }
            }
        }
        answer_held(&core, now, &mut held);
    }
}

/// Writes the persisted renewals, and the deadlines the jobs' supervisors watch.
fn persist_leases(state_dir: &Path, leases: &BTreeMap<String, u64>, lease_ms: u64) {
    let deadlines: BTreeMap<&String, u64> = leases
        .iter()
        .map(|(queue, heard)| (queue, heard.saturating_add(lease_ms)))
        .collect();
    for (file, bytes) in [
        (LEASES_FILE, serde_json::to_vec(leases)),
        (LEASE_DEADLINES_FILE, serde_json::to_vec(&deadlines)),
    ] {
        let written = bytes.map_err(|e| e.to_string()).and_then(|bytes| {
            write_atomic(&state_dir.join(file), &bytes).map_err(|e| e.to_string())
        });
        if let Err(e) = written {
            tracing::warn!(file, error = %e, "cannot persist the lease renewals");
        }
    }
}

/// Answers the held renewals whose shard's report is no longer the agent's, or whose hold
/// ran out (and forgets those whose shard stopped waiting).
fn answer_held(core: &AgentCore, now: u64, held: &mut Vec<HeldRenewal>) {
    held.retain(|h| !h.reply.is_closed());
    if held.is_empty() {
        return;
    }
    let report = core.report();
    let digest = report.digest();
    let (due, waiting): (Vec<_>, Vec<_>) = std::mem::take(held)
        .into_iter()
        .partition(|h| h.since != digest || now >= h.until_ms);
    *held = waiting;
    for h in due {
        let _ = h
            .reply
            .send(Ok(shard_node::Response::Report(report.clone())));
    }
}

/// Handles one event; a renewal to hold comes back.
fn handle(
    core: &mut AgentCore,
    now: u64,
    event: Event,
    state_dir: &std::path::Path,
) -> Option<HeldRenewal> {
    match event {
        Event::Shard {
            from,
            request,
            reply,
        } => {
            let answer = match request {
                shard_node::Request::Launch(launch) => core
                    .handle_launch(now, &from, launch)
                    .map(|()| shard_node::Response::Launched)
                    .map_err(|e| refusal(e, RefusalCode::Stale)),
                shard_node::Request::Kill { job, why } => core
                    .handle_kill(now, &from, job, &why)
                    .map(|()| shard_node::Response::Killing)
                    .map_err(|e| refusal(e, RefusalCode::Forbidden)),
                shard_node::Request::Renew {
                    seen,
                    since,
                    hold_ms,
                } => {
                    let report = core.handle_renew(now, &from, &seen);
                    if let Some(since) = since
                        && hold_ms > 0
                        && report.digest() == since
                    {
                        return Some(HeldRenewal {
                            since,
                            until_ms: now.saturating_add(u64::from(hold_ms)),
                            reply,
                        });
                    }
                    Ok(shard_node::Response::Report(report))
                }
                shard_node::Request::Forget { jobs } => {
                    core.handle_forget(now, &from, &jobs);
                    Ok(shard_node::Response::Forgotten)
                }
                shard_node::Request::Output(req) => output(core, &from, state_dir, &req),
            };
            let _ = reply.send(answer);
        }
        Event::Owner {
            owner,
            change,
            reply,
        } => {
            let _ = reply.send(core.handle_owner(now, owner, change));
        }
        Event::Registered {
            heartbeat_timeout_ms,
        } => core.set_heartbeat_timeout(heartbeat_timeout_ms),
        Event::Report(reply) => {
            let _ = reply.send(core.report());
        }
        Event::Spawned { job, pid } => core.handle_spawned(now, job, pid),
        Event::Ended { job, end } => core.handle_ended(now, job, end),
        Event::Health(unhealthy) => core.set_health(unhealthy),
    }
    None
}

/// Part of a task's output, for the shard that launched the job.
fn output(
    core: &AgentCore,
    from: &str,
    state_dir: &std::path::Path,
    req: &OutputRequest,
) -> Result<shard_node::Response, Refusal> {
    match core.launcher(req.job) {
        Some(queue) if queue == from => {}
        Some(_) => {
            return Err(refusal(
                "the job is another queue's",
                RefusalCode::Forbidden,
            ));
        }
        None => return Err(refusal("no such job on this node", RefusalCode::NotFound)),
    }
    let ended = core.job(req.job).is_some_and(|s| !s.is_live());
    // Output the jobspec sent to a file of its own is read from there, only if the job's
    // user owns it (the agent is root; the user named the path).
    let dir = job_dir(state_dir, req.job);
    let plan = read_json::<Plan>(&dir.join(PLAN_FILE)).ok().flatten();
    let named = plan.as_ref().and_then(|p| {
        let path = if req.stderr { &p.stderr } else { &p.stdout };
        path.clone()
            .map(|path| (path, p.run_as.as_ref().map(|u| u.uid)))
    });
    let (path, owner) = named.unwrap_or_else(|| (output_file(&dir, req.rank, req.stderr), None));
    let bytes = read_range(&path, req.offset, req.max_bytes, owner)
        .map_err(|e| refusal(e, RefusalCode::Internal))?;
    let complete = ended && (bytes.len() as u64) < u64::from(req.max_bytes);
    Ok(shard_node::Response::Output(OutputChunk {
        bytes,
        complete,
    }))
}

/// Accepts shards and other agents.
async fn accept_loop(
    endpoint: quinn::Endpoint,
    events: mpsc::Sender<Event>,
    exec: mpsc::UnboundedSender<ExecInput>,
) {
    while let Some(incoming) = endpoint.accept().await {
        let events = events.clone();
        let exec = exec.clone();
        tokio::spawn(async move {
            let session = match accept(incoming).await {
                Ok(session) => session,
                Err(e) => {
                    tracing::debug!(error = %e, "connection refused");
                    return;
                }
            };
            match session.peer().role {
                Role::Shard => serve_shard(session, events).await,
                Role::Node => serve_peer(session, exec).await,
                _ => session.close(),
            }
        });
    }
}

async fn serve_shard(session: Session, events: mpsc::Sender<Event>) {
    let _ = serve(session, move |peer: Peer, request: shard_node::Request| {
        let events = events.clone();
        async move {
            let (reply, answer) = oneshot::channel();
            let event = Event::Shard {
                from: peer.name,
                request,
                reply,
            };
            if events.send(event).await.is_err() {
                return Err(refusal("the agent is stopping", RefusalCode::Unavailable));
            }
            answer
                .await
                .unwrap_or_else(|_| Err(refusal("the agent is stopping", RefusalCode::Unavailable)))
        }
    })
    .await;
}

async fn serve_peer(session: Session, exec: mpsc::UnboundedSender<ExecInput>) {
    let _ = serve(session, move |peer: Peer, request: node_node::Request| {
        let exec = exec.clone();
        async move {
            let (fence, done) = match request {
                node_node::Request::Fence(f) => (f, false),
                node_node::Request::FenceDone(f) => (f, true),
            };
            let _ = exec.send(ExecInput::Fence {
                from: peer.name,
                job: fence.job,
                fence: Fence {
                    epoch: fence.epoch,
                    kvs: fence.kvs,
                },
                done,
            });
            Ok(node_node::Response::Ack)
        }
    })
    .await;
}

/// Registers with the coordinator, sends heartbeats, and serves its `Owner` requests;
/// reconnects whenever the connection fails.
async fn coordinator_link(
    endpoint: quinn::Endpoint,
    coordinator: SocketAddr,
    listen: SocketAddr,
    events: mpsc::Sender<Event>,
    heartbeat_now: Arc<Notify>,
) {
    loop {
        let registered =
            registered_session(&endpoint, coordinator, listen, &events, &heartbeat_now).await;
        if let Err(e) = registered {
            tracing::warn!(%coordinator, error = %e, "cannot reach the coordinator; retrying");
        }
        tokio::time::sleep(COORDINATOR_RETRY).await;
    }
}

async fn report(events: &mpsc::Sender<Event>) -> Option<AgentReport> {
    let (tx, rx) = oneshot::channel();
    events.send(Event::Report(tx)).await.ok()?;
    rx.await.ok()
}

async fn registered_session(
    endpoint: &quinn::Endpoint,
    coordinator: SocketAddr,
    listen: SocketAddr,
    events: &mpsc::Sender<Event>,
    heartbeat_now: &Notify,
) -> Result<(), String> {
    let session = connect(
        endpoint,
        coordinator,
        Role::Coordinator,
        shardsched_proto::identity::COORDINATOR_NAME,
    )
    .await
    .map_err(|e| e.to_string())?;
    let report_now = report(events).await.ok_or("the agent is stopping")?;
    let answer = session
        .request(&node_coord::Request::Register {
            listen,
            report: report_now,
        })
        .await
        .map_err(|e| e.to_string())?;
    let node_coord::Response::Registered {
        owner,
        heartbeat_interval_ms,
        heartbeat_timeout_ms,
    } = answer
    else {
        return Err("the coordinator did not answer the registration".to_owned());
    };
    let _ = events
        .send(Event::Registered {
            heartbeat_timeout_ms,
        })
        .await;
    if let Some(owner) = owner {
        let (reply, answer) = oneshot::channel();
        let _ = events
            .send(Event::Owner {
                owner,
                change: OwnerChange::Registered,
                reply,
            })
            .await;
        if let Ok(Err(e)) = answer.await {
            tracing::warn!(error = %e, "the coordinator's owner was refused");
        }
    }
    let owner_events = events.clone();
    tokio::spawn(serve(
        session.clone(),
        move |_peer, request: coord_node::Request| {
            let events = owner_events.clone();
            async move {
                let coord_node::Request::Owner { owner, change } = request;
                let (reply, answer) = oneshot::channel();
                events
                    .send(Event::Owner {
                        owner,
                        change,
                        reply,
                    })
                    .await
                    .map_err(|_| refusal("the agent is stopping", RefusalCode::Unavailable))?;
                match answer.await {
                    Ok(Ok(())) => Ok(coord_node::Response::Ack),
                    Ok(Err(e)) => Err(refusal(e, RefusalCode::Stale)),
                    Err(_) => Err(refusal("the agent is stopping", RefusalCode::Unavailable)),
                }
            }
        },
    ));
    let interval = Duration::from_millis(heartbeat_interval_ms.max(100));
    loop {
        // Every interval, and at once when the node's health changed.
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            () = heartbeat_now.notified() => {}
        }
        let report_now = report(events).await.ok_or("the agent is stopping")?;
        session
            .request(&node_coord::Request::Heartbeat(report_now))
            .await
            .map_err(|e| e.to_string())?;
    }
}

/// Runs the site's health check every `every`, and tells the core what it says.
async fn health_checks(
    script: PathBuf,
    every: Duration,
    node: String,
    events: mpsc::Sender<Event>,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let unhealthy = executor::health_check(&script, &node).await.err();
        if events.send(Event::Health(unhealthy)).await.is_err() {
            return;
        }
    }
}

/// One job the executor watches.
struct WatchedJob {
    dir: PathBuf,
    /// Multi-node jobs: the job's nodes and this node's rank, for the PMI relay.
    launch: Option<Box<NodeLaunch>>,
    /// The next barrier whose puts this node has not sent yet.
    next_epoch: u32,
    /// Its supervisor is this agent's child and has not exited: its reaper says when it
    /// does, and the poll leaves it alone (unless its PMI barriers need relaying).
    child_running: bool,
}

impl WatchedJob {
    /// Whether the poll has anything to look at for this job: its end (a supervisor an
    /// earlier agent started, or processes left behind), or its barriers.
    fn polled(&self) -> bool {
        !self.child_running || self.launch.is_some()
    }
}

/// A launch carried out (its supervisor's pid, or why not).
struct Started {
    launch: Box<NodeLaunch>,
    result: Result<u32, executor::SpawnError>,
}

/// What arrived for a job while its launch was under way.
#[derive(Default)]
struct Launching {
    /// A kill, with its reason.
    kill: Option<String>,
    /// Its supervisor already exited.
    exited: bool,
}

/// Carries out the core's actions, watches the jobs, relays PMI fences.
async fn executor_task(
    settings: ExecSettings,
    node: String,
    endpoint: quinn::Endpoint,
    mut inputs: mpsc::UnboundedReceiver<ExecInput>,
    events: mpsc::Sender<Event>,
) {
    let settings = Arc::new(settings);
    let mut watched: BTreeMap<JobId, WatchedJob> = BTreeMap::new();
    let mut collectors: BTreeMap<JobId, FenceCollector> = BTreeMap::new();
    // Supervisors this agent started say when they exit: their job is looked at then.
    let (exited_tx, mut exited) = mpsc::unbounded_channel::<JobId>();
    // Launches run on threads of their own (files, cgroups, the prolog, the supervisor's
    // start all block), so that one agent starts several jobs at once; what arrives for a
    // job meanwhile waits here.
    let (started_tx, mut started) = mpsc::unbounded_channel::<Started>();
    let mut launching: BTreeMap<JobId, Launching> = BTreeMap::new();
    let mut tick = tokio::time::interval(EXEC_POLL_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            input = inputs.recv() => match input {
                None => return,
                Some(ExecInput::Spawn { queue, launch, lease_deadline_ms }) => {
                    let job = launch.job;
                    launching.insert(job, Launching::default());
                    let (settings, started_tx, exited_tx) = (Arc::clone(&settings), started_tx.clone(), exited_tx.clone());
                    let runtime = tokio::runtime::Handle::current();
                    tokio::task::spawn_blocking(move || {
                        let on_exit = Box::new(move || { let _ = exited_tx.send(job); });
                        let result = runtime.block_on(executor::spawn(&settings, &queue, &launch, lease_deadline_ms, on_exit));
                        let _ = started_tx.send(Started { launch, result });
                    });
                }
                Some(ExecInput::Action(Action::Kill { job, why })) => {
                    match launching.get_mut(&job) {
                        Some(waiting) => waiting.kill = Some(why),
                        None => executor::request_kill(&settings.state_dir, job, &why),
                    }
                }
                Some(ExecInput::Action(Action::RemoveFiles(job))) => {
                    executor::remove_files(&settings.state_dir, job);
                }
                Some(ExecInput::Watch(job)) => {
                    let dir = job_dir(&settings.state_dir, job);
                    watched.entry(job).or_insert(WatchedJob { dir, launch: None, next_epoch: 0, child_running: false });
                }
                Some(ExecInput::Action(Action::PersistLease { .. } | Action::Spawn { .. })) => {}
                Some(ExecInput::Fence { from, job, fence, done }) => {
                    relay(&node, &endpoint, &watched, &mut collectors, job, &from, fence, done);
                }
            },
            Some(Started { launch, result }) = started.recv() => {
                let job = launch.job;
                let waiting = launching.remove(&job).unwrap_or_default();
                match result {
                    Ok(pid) => {
                        let dir = job_dir(&settings.state_dir, job);
                        let multi = launch.nodes.len() > 1;
                        watched.insert(job, WatchedJob { dir, launch: multi.then_some(launch), next_epoch: 0, child_running: !waiting.exited });
                        let _ = events.send(Event::Spawned { job, pid }).await;
                        if let Some(why) = waiting.kill {
                            executor::request_kill(&settings.state_dir, job, &why);
                        }
                        if waiting.exited {
                            let _ = exited_tx.send(job);
                        }
                    }
                    Err(refused) => {
                        let end = refused.end();
                        tracing::warn!(%job, cause = %end.cause, why = %end.note, "launch refused");
                        let _ = events.send(Event::Ended { job, end }).await;
                    }
                }
            }
            Some(job) = exited.recv() => {
                if let Some(waiting) = launching.get_mut(&job) {
                    waiting.exited = true;
                } else if let Some(end) = watched.get_mut(&job).and_then(|w| {
                    w.child_running = false;
                    executor::check_ended(&w.dir)
                }) {
                    watched.remove(&job);
                    collectors.remove(&job);
                    job_ended(&settings, &node, &events, job, end).await;
                }
            }
            // With nothing to poll (no job, or only jobs whose supervisors will say when
            // they exit), the agent does not wake at all for its jobs.
            _ = tick.tick(), if watched.values().any(WatchedJob::polled) => {
                let mut ended = Vec::new();
                for (&job, watch) in &mut watched {
                    if !watch.child_running && let Some(end) = executor::check_ended(&watch.dir) {
                        ended.push((job, end));
                        continue;
                    }
                    if let Some(launch) = &watch.launch
                        && let Ok(Some(kvs)) = read_json::<Vec<(String, String)>>(&fence_file(&watch.dir, watch.next_epoch, false))
                    {
                        let fence = Fence { epoch: watch.next_epoch, kvs };
                        watch.next_epoch += 1;
                        send_fence(&node, &endpoint, launch, &mut collectors, &watch.dir, fence);
                    }
                }
                for (job, end) in ended {
                    watched.remove(&job);
                    collectors.remove(&job);
                    job_ended(&settings, &node, &events, job, end).await;
                }
            }
        }
    }
}

/// A watched job's processes are all gone: its epilog, then the core hears of its end.
async fn job_ended(
    settings: &ExecSettings,
    node: &str,
    events: &mpsc::Sender<Event>,
    job: JobId,
    end: JobEnd,
) {
    executor::epilog(settings, job, node).await;
    let _ = events.send(Event::Ended { job, end }).await;
}

/// This node's puts of a barrier: to the leader (node rank 0), or, on the leader, into its
/// collector.
fn send_fence(
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
fn relay(
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
