//! `job output`: what a job's task wrote, read where it was written: in the job's
//! directory under the exec executor, on the node that ran the task (through its agent)
//! under the agents executor. Simulated jobs write nothing.

use std::path::PathBuf;

use shardsched_proto::msg::client_shard::{OutputChunk, OutputQuery};
use shardsched_proto::msg::{JobState, Refusal, RefusalCode};
use shardsched_proto::{Peer, Reply};
use tokio::sync::{mpsc, oneshot};

use crate::exec::{STDERR_FILE, STDOUT_FILE, job_dir};
use crate::job::JobRecord;
use crate::snapshot::Snapshot;

/// Where a shard reads its jobs' output.
#[derive(Clone, Debug)]
pub(crate) enum OutputSource {
    /// Simulated jobs: there is none.
    None,
    /// The exec executor's jobs directory.
    Exec(PathBuf),
    /// The agents task, which asks the agent of the node that ran the task.
    Agents(mpsc::Sender<OutputAsk>),
}

/// A read of a task's output, for the agents task.
#[derive(Debug)]
pub(crate) struct OutputAsk {
    /// The job (it has started: it has its R).
    pub(crate) job: Box<JobRecord>,
    /// What to read.
    pub(crate) query: OutputQuery,
    /// Where the answer goes.
    pub(crate) reply: oneshot::Sender<Reply<OutputChunk>>,
}

/// Reads what `query` asks for, for `peer` (the job's owner or an admin).
pub(crate) async fn read(
    source: &OutputSource,
    snapshot: &Snapshot,
    peer: &Peer,
    query: OutputQuery,
) -> Reply<OutputChunk> {
    let refuse = |code, message: String| Err(Refusal::new(code, message));
    let Some(job) = snapshot.job(query.job) else {
        return refuse(
            RefusalCode::NotFound,
            format!("no job {} in queue {}", query.job, snapshot.queue()),
        );
    };
    if !peer.may_read_job(&job.owner) {
        return refuse(
            RefusalCode::Forbidden,
            format!(
                "job {} is {}'s: only its owner and admins read its output",
                job.id, job.owner
            ),
        );
    }
    if job.r_json.is_none() {
        return refuse(
            RefusalCode::NotFound,
            format!("job {} has not started: it has no output yet", job.id),
        );
    }
    match source {
        OutputSource::None => refuse(
            RefusalCode::NotFound,
            format!(
                "queue {} simulates its jobs: they write no output",
                snapshot.queue()
            ),
        ),
        OutputSource::Exec(jobs_dir) => {
            if query.task != 0 {
                return refuse(
                    RefusalCode::NotFound,
                    format!("job {} ran one command, task 0 (exec executor)", job.id),
                );
            }
            let file = if query.stderr {
                STDERR_FILE
            } else {
                STDOUT_FILE
            };
            let path = job_dir(jobs_dir, job.id).join(file);
            let ended = !matches!(job.state, JobState::Pending | JobState::Running);
            read_file(&path, query.offset, query.max_bytes, ended)
        }
        OutputSource::Agents(asks) => {
            let (reply, answer) = oneshot::channel();
            let ask = OutputAsk {
                job: Box::new(job.clone()),
                query,
                reply,
            };
            let stopping = || Refusal::new(RefusalCode::Unavailable, "the shard is stopping");
            asks.send(ask).await.map_err(|_| stopping())?;
            answer.await.map_err(|_| stopping())?
        }
    }
}

/// Up to `max` bytes of `path` from `offset`; complete when the job has `ended` and this is
/// the file's end.
fn read_file(path: &std::path::Path, offset: u64, max: u32, ended: bool) -> Reply<OutputChunk> {
    let bytes = crate::exec::files::read_range(path, offset, max, None)
        .map_err(|e| Refusal::new(RefusalCode::Internal, format!("{}: {e}", path.display())))?;
    let complete = ended && (bytes.len() as u64) < u64::from(max);
    Ok(OutputChunk { bytes, complete })
}
