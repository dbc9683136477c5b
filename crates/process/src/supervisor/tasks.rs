//! A supervisor's tasks: the files the jobspec carries, each task started (its PMI socket,
//! its output files, its process group), when each started, and waiting for one to end.

use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{ExitStatus, Stdio};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::unix::OwnedWriteHalf;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use crate::files::write_replace;
use crate::plan::{Plan, TASK_RANK, TASKS_STARTED_FILE, output_file};

/// When each of this node's tasks started: the moment its spawn returned (the task's
/// program exec'd), CLOCK_REALTIME µs, written to [`TASKS_STARTED_FILE`] once all are
/// started, as `RANK MICROSECONDS` lines. How long a launch took to the moment the tasks
/// run, without what a task's own start-up costs (`bench e2e --agents` reads it).
#[derive(Default)]
pub(super) struct TasksStarted {
    lines: String,
}

impl TasksStarted {
    /// Task `rank` has just started.
    pub(super) fn record(&mut self, rank: u32) {
        let us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros());
        self.lines.push_str(&format!("{rank} {us}\n"));
    }

    /// Writes the record into the job's directory (a failure is only said: the record is
    /// for people and benchmarks, nothing waits on it).
    pub(super) fn write(&self, dir: &Path) {
        if let Err(e) = write_replace(&dir.join(TASKS_STARTED_FILE), self.lines.as_bytes()) {
            eprintln!("cannot write when the tasks started: {e}");
        }
    }
}

/// One running task.
pub(super) struct Task {
    pub(super) child: Child,
    pub(super) pgid: u32,
    pub(super) status: Option<ExitStatus>,
}

/// Writes the files the jobspec carries (a batch script) into the job's directory, as the
/// job's user (the supervisor already is), with their modes.
pub(super) fn write_carried_files(dir: &Path, plan: &Plan) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    for file in &plan.files {
        let path = dir.join(&file.name);
        std::fs::write(&path, file.data.as_bytes())
            .and_then(|()| {
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(file.mode))
            })
            .map_err(|e| format!("cannot write the job's file {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Starts the task of `rank`: its PMI socket, its output files, its process.
pub(super) fn start_task(
    dir: &Path,
    plan: &Plan,
    rank: u32,
    lines: &mpsc::Sender<(u32, String)>,
) -> Result<(Task, OwnedWriteHalf), String> {
    let (ours, theirs) =
        std::os::unix::net::UnixStream::pair().map_err(|e| format!("PMI socket: {e}"))?;
    // The task's end must survive exec: std opens everything close-on-exec. Only this
    // thread spawns, so no other child can inherit it by accident.
    rustix::io::fcntl_setfd(&theirs, rustix::io::FdFlags::empty())
        .map_err(|e| format!("PMI socket: {e}"))?;
    // A file the jobspec names is shared by the node's tasks (appended to, as Flux's shell
    // does with `--output`); else each task has its own in the job's directory.
    let open = |stderr: bool| {
        let named = if stderr { &plan.stderr } else { &plan.stdout };
        let opened = match named {
            Some(path) if plan.truncate_output => {
                std::fs::File::create(path).map_err(|e| (path.clone(), e))
            }
            Some(path) => std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| (path.clone(), e)),
            None => {
                let path = output_file(dir, rank, stderr);
                std::fs::File::create(&path).map_err(|e| (path, e))
            }
        };
        opened.map_err(|(path, e)| format!("cannot open {}: {e}", path.display()))
    };
    let (stdout, stderr) = (open(false)?, open(true)?);
    let (program, args) = plan
        .command
        .split_first()
        .ok_or_else(|| "the job has no command".to_owned())?;
    let mut command = Command::new(program);
    if !plan.inherit_env {
        command.env_clear();
    }
    command
        .args(args)
        .envs(plan.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env(TASK_RANK, rank.to_string())
        .env("PMI_FD", theirs.as_raw_fd().to_string())
        .env("PMI_RANK", rank.to_string())
        .env("PMI_SIZE", plan.size.to_string())
        .current_dir(&plan.cwd)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0)
        .kill_on_drop(false);
    let child = command
        .spawn()
        .map_err(|e| format!("cannot start {program:?} in {}: {e}", plan.cwd.display()))?;
    drop(theirs);
    let pgid = child.id().unwrap_or(0);
    ours.set_nonblocking(true)
        .map_err(|e| format!("PMI socket: {e}"))?;
    let stream = tokio::net::UnixStream::from_std(ours).map_err(|e| format!("PMI socket: {e}"))?;
    let (read, write) = stream.into_split();
    let lines = lines.clone();
    tokio::spawn(async move {
        let mut reader = BufReader::new(read).lines();
        while let Ok(Some(line)) = reader.next_line().await {
            if lines.send((rank, line)).await.is_err() {
                break;
            }
        }
    });
    Ok((
        Task {
            child,
            pgid,
            status: None,
        },
        write,
    ))
}

/// Waits until one more task ends (forever when none is left running).
pub(super) async fn any_exit(tasks: &mut BTreeMap<u32, Task>) {
    let waits = tasks
        .values_mut()
        .filter(|t| t.status.is_none())
        .map(|t| Box::pin(async move { (t.child.wait().await.ok(), t) }));
    let waits: Vec<_> = waits.collect();
    if waits.is_empty() {
        return std::future::pending().await;
    }
    let ((status, task), _, _) = futures_select_all(waits).await;
    task.status = status.or(Some(ExitStatus::from_raw(0)));
}

/// `select_all` over boxed futures, without a futures dependency.
async fn futures_select_all<F: std::future::Future + Unpin>(
    mut futures: Vec<F>,
) -> (F::Output, usize, Vec<F>) {
    std::future::poll_fn(move |cx| {
        for i in 0..futures.len() {
            if let std::task::Poll::Ready(out) = std::pin::Pin::new(&mut futures[i]).poll(cx) {
                let rest = std::mem::take(&mut futures);
                return std::task::Poll::Ready((out, i, rest));
            }
        }
        std::task::Poll::Pending
    })
    .await
}
