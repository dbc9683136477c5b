//! The executor task: carries out the core's actions (launches on threads of their own,
//! kills, files removed), watches the jobs until their processes are all gone, and relays
//! their PMI barriers ([`super::fences`]).

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;

use shardsched_node_core::Action;
use shardsched_node_core::pmi::{Fence, FenceCollector};
use shardsched_process::files::read_json;
use shardsched_proto::msg::JobId;
use shardsched_proto::msg::agent::{JobEnd, NodeLaunch};
use tokio::sync::mpsc;

use super::fences::{relay, send_fence};
use super::{Event, ExecInput};
use crate::executor::{self, EXEC_POLL_INTERVAL, Executor};
use crate::layout::{fence_file, job_dir};

/// One job the executor watches.
pub(super) struct WatchedJob {
    pub(super) dir: PathBuf,
    /// Multi-node jobs: the job's nodes and this node's rank, for the PMI relay.
    pub(super) launch: Option<Box<NodeLaunch>>,
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
    /// PMI fences from the job's other agents, whose tasks reached a barrier before this
    /// agent's launch was done: relayed once it is (dropping them would leave the barrier
    /// waiting for good). At most [`EARLY_FENCES_MAX`].
    fences: Vec<(String, Fence, bool)>,
}

/// The most fences kept for one job while its launch is under way (one per other node and
/// barrier, for jobs of up to this many nodes), and for jobs whose launch has not arrived
/// yet, all together (the oldest dropped first).
const EARLY_FENCES_MAX: usize = 4096;

/// Carries out the core's actions, watches the jobs, relays PMI fences.
pub(super) async fn executor_task(
    executor: Arc<Executor>,
    node: String,
    endpoint: quinn::Endpoint,
    mut inputs: mpsc::UnboundedReceiver<ExecInput>,
    events: mpsc::Sender<Event>,
) {
    let state_dir = executor.settings.state_dir.clone();
    executor.start_spares();
    let mut watched: BTreeMap<JobId, WatchedJob> = BTreeMap::new();
    let mut collectors: BTreeMap<JobId, FenceCollector> = BTreeMap::new();
    // Supervisors this agent started say when they exit: their job is looked at then.
    let (exited_tx, mut exited) = mpsc::unbounded_channel::<JobId>();
    // Launches run on threads of their own (files, cgroups, the prolog, the supervisor's
    // start all block), so that one agent starts several jobs at once; what arrives for a
    // job meanwhile waits here.
    let (started_tx, mut started) = mpsc::unbounded_channel::<Started>();
    let mut launching: BTreeMap<JobId, Launching> = BTreeMap::new();
    // Fences for jobs this agent has not heard of yet: another node's task can reach its
    // first barrier before this node's launch arrives from the shard.
    let mut unclaimed: VecDeque<(JobId, String, Fence, bool)> = VecDeque::new();
    let mut tick = tokio::time::interval(EXEC_POLL_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            input = inputs.recv() => match input {
                None => return,
                Some(ExecInput::Spawn { queue, launch, lease_deadline_ms }) => {
                    let job = launch.job;
                    let fences = unclaimed.iter().filter(|f| f.0 == job).map(|(_, from, fence, done)| (from.clone(), fence.clone(), *done)).collect();
                    unclaimed.retain(|f| f.0 != job);
                    launching.insert(job, Launching { fences, ..Launching::default() });
                    let (executor, started_tx, exited_tx) = (Arc::clone(&executor), started_tx.clone(), exited_tx.clone());
                    let runtime = tokio::runtime::Handle::current();
                    tokio::task::spawn_blocking(move || {
                        let on_exit = Box::new(move || { let _ = exited_tx.send(job); });
                        let result = runtime.block_on(executor.spawn(&queue, &launch, lease_deadline_ms, on_exit));
                        let _ = started_tx.send(Started { launch, result });
                    });
                }
                Some(ExecInput::Action(Action::Kill { job, why })) => {
                    match launching.get_mut(&job) {
                        Some(waiting) => waiting.kill = Some(why),
                        None => executor::request_kill(&state_dir, job, &why),
                    }
                }
                Some(ExecInput::Action(Action::RemoveFiles(job))) => {
                    executor.remove_files(job);
                }
                Some(ExecInput::Watch(job)) => {
                    let dir = job_dir(&state_dir, job);
                    watched.entry(job).or_insert(WatchedJob { dir, launch: None, next_epoch: 0, child_running: false });
                }
                Some(ExecInput::Action(Action::PersistLease { .. } | Action::Spawn { .. })) => {}
                Some(ExecInput::Fence { from, job, fence, done }) => match launching.get_mut(&job) {
                    Some(waiting) if waiting.fences.len() < EARLY_FENCES_MAX => waiting.fences.push((from, fence, done)),
                    Some(_) => tracing::warn!(%job, %from, "too many PMI fences before the launch: dropped"),
                    None if !watched.contains_key(&job) => {
                        if unclaimed.len() == EARLY_FENCES_MAX {
                            unclaimed.pop_front();
                        }
                        unclaimed.push_back((job, from, fence, done));
                    }
                    None => relay(&node, &endpoint, &watched, &mut collectors, job, &from, fence, done),
                },
            },
            Some(Started { launch, result }) = started.recv() => {
                let job = launch.job;
                let waiting = launching.remove(&job).unwrap_or_default();
                match result {
                    Ok(pid) => {
                        let dir = job_dir(&state_dir, job);
                        let multi = launch.nodes.len() > 1;
                        watched.insert(job, WatchedJob { dir, launch: multi.then_some(launch), next_epoch: 0, child_running: !waiting.exited });
                        let _ = events.send(Event::Spawned { job, pid }).await;
                        if let Some(why) = waiting.kill {
                            executor::request_kill(&state_dir, job, &why);
                        }
                        if waiting.exited {
                            let _ = exited_tx.send(job);
                        }
                        for (from, fence, done) in waiting.fences {
                            relay(&node, &endpoint, &watched, &mut collectors, job, &from, fence, done);
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
                    executor.check_ended(job)
                }) {
                    watched.remove(&job);
                    collectors.remove(&job);
                    job_ended(&executor, &node, &events, job, end).await;
                }
            }
            // With nothing to poll (no job, or only jobs whose supervisors will say when
            // they exit), the agent does not wake at all for its jobs.
            _ = tick.tick(), if watched.values().any(WatchedJob::polled) => {
                let mut ended = Vec::new();
                for (&job, watch) in &mut watched {
                    if !watch.child_running && let Some(end) = executor.check_ended(job) {
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
                    job_ended(&executor, &node, &events, job, end).await;
                }
            }
        }
    }
}

/// A watched job's processes are all gone: its epilog, then the core hears of its end.
async fn job_ended(
    executor: &Executor,
    node: &str,
    events: &mpsc::Sender<Event>,
    job: JobId,
    end: JobEnd,
) {
    crate::site::epilog(&executor.settings, job, node).await;
    let _ = events.send(Event::Ended { job, end }).await;
}
