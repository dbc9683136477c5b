//! The agent's durable record of the launches it started: `launches.log` in its state
//! directory, one line per launch (`{job, queue, generation}`), made durable before the
//! job's supervisor starts. A restarted agent reads it back (with each job's directory) to
//! know which of its jobs were launched here and by whom ([`crate::executor::recover`]).
//!
//! One log rather than a file per job (`owner.json`, which earlier agents wrote and a
//! restarted agent still reads) because of what durability costs: a file of its own cost
//! each launch a new inode, an fsync of the file and one of its directory; an append to
//! the log costs one `fdatasync`, and launches made at the same time share it (group
//! commit: the first to sync covers every line appended before it, the others wait for
//! it).
//!
//! ```text
//! launch thread:  append line ─► durable? ──yes──► go on (start the supervisor)
//!                                   │ no
//!                      a sync under way? ─yes─► wait for it, look again
//!                                   │ no
//!                      fdatasync (lock released: others append meanwhile)
//! ```
//!
//! The log is rewritten whole (atomically, durably) at start and once it holds more than
//! [`LAUNCH_LOG_RECORDS_COMPACT`] lines and twice as many as the jobs it still names (a job
//! is no longer named once its files are removed).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};
use shardsched_process::FileError;
use shardsched_process::files::{read_bounded, write_atomic};
use shardsched_proto::msg::{Generation, JobId};

/// The log's file in the agent's state directory.
pub const LAUNCH_LOG_FILE: &str = "launches.log";

/// Lines past which the log is rewritten with only the jobs it still names (when they are
/// fewer than half of its lines).
pub const LAUNCH_LOG_RECORDS_COMPACT: usize = 4096;

/// The largest log read back at start, bytes (it is compacted long before: a line is under
/// a hundred bytes, and an agent holds at most `AGENT_JOBS_MAX` jobs).
pub const LAUNCH_LOG_BYTES_MAX: u64 = 64 << 20;

/// Who launched a job here, read back by a restarted agent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Launcher {
    /// The queue.
    pub queue: String,
    /// The generation.
    pub generation: Generation,
}

/// One line of the log.
#[derive(Serialize, Deserialize)]
struct Record {
    job: JobId,
    queue: String,
    generation: Generation,
}

/// See the module documentation.
pub struct LaunchLog {
    path: PathBuf,
    /// [`LAUNCH_LOG_RECORDS_COMPACT`] (fewer in tests).
    compact_at: usize,
    state: Mutex<LogState>,
    /// Signalled when a sync ends.
    synced: Condvar,
}

struct LogState {
    /// Opened for appending.
    file: Arc<File>,
    /// Lines appended since the log was opened, and how many of them are durable.
    appended: u64,
    durable: u64,
    /// A launch's thread is syncing the file (the others wait for it).
    syncing: bool,
    /// An append failed part way: the file may end in a torn line, so it is rewritten
    /// before the next append.
    torn: bool,
    /// Lines in the file.
    lines: usize,
    /// The last launch of each job still named.
    jobs: BTreeMap<JobId, Launcher>,
}

impl std::fmt::Debug for LaunchLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaunchLog")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl LaunchLog {
    /// Opens the log in `state_dir` (made if missing) and rewrites it with the jobs it
    /// names for which `present` holds (their directories are still there); a torn last
    /// line, from a crash during an append that was never acknowledged, is dropped.
    pub fn open(state_dir: &Path, present: impl Fn(JobId) -> bool) -> Result<LaunchLog, FileError> {
        let path = state_dir.join(LAUNCH_LOG_FILE);
        let mut jobs = read_log(&path)?;
        jobs.retain(|job, _| present(*job));
        let file = rewrite(&path, &jobs)?;
        Ok(LaunchLog {
            path,
            compact_at: LAUNCH_LOG_RECORDS_COMPACT,
            state: Mutex::new(LogState {
                file,
                appended: 0,
                durable: 0,
                syncing: false,
                torn: false,
                lines: jobs.len(),
                jobs,
            }),
            synced: Condvar::new(),
        })
    }

    /// The last launch of each job the log names.
    pub fn launchers(&self) -> BTreeMap<JobId, Launcher> {
        self.lock().jobs.clone()
    }

    /// Records that `launcher` launched `job` here; durable when this returns.
    pub fn record(&self, job: JobId, launcher: &Launcher) -> Result<(), FileError> {
        let line = line_of(job, launcher).map_err(|e| self.bad(e.to_string()))?;
        let mut state = self.lock();
        if state.torn || self.compaction_due(&state) {
            self.compact(&mut state)?;
        }
        if let Err(e) = (&*state.file).write_all(&line) {
            state.torn = true;
            return Err(FileError::io(&self.path, e));
        }
        state.appended += 1;
        state.lines += 1;
        state.jobs.insert(job, launcher.clone());
        let mine = state.appended;
        while state.durable < mine {
            if state.syncing {
                state = self
                    .synced
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            state.syncing = true;
            let upto = state.appended;
            let file = Arc::clone(&state.file);
            drop(state);
            let synced = file.sync_data();
            state = self.lock();
            state.syncing = false;
            if synced.is_ok() {
                state.durable = state.durable.max(upto);
            }
            self.synced.notify_all();
            synced.map_err(|e| FileError::io(&self.path, e))?;
        }
        Ok(())
    }

    /// `job`'s files are removed: the log no longer names it (from its next rewrite).
    pub fn forget(&self, job: JobId) {
        self.lock().jobs.remove(&job);
    }

    fn compaction_due(&self, state: &LogState) -> bool {
        state.lines > self.compact_at && state.lines > 2 * state.jobs.len()
    }

    /// Rewrites the log with the jobs it names; every line appended so far is then durable.
    fn compact(&self, state: &mut LogState) -> Result<(), FileError> {
        state.file = rewrite(&self.path, &state.jobs)?;
        state.lines = state.jobs.len();
        state.durable = state.appended;
        state.torn = false;
        Ok(())
    }

    fn bad(&self, message: String) -> FileError {
        FileError::BadFile {
            path: self.path.clone(),
            message,
        }
    }

    fn lock(&self) -> MutexGuard<'_, LogState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The last record of each job in the log at `path` (none if there is no log). Lines that
/// do not parse (a torn last line) are skipped.
fn read_log(path: &Path) -> Result<BTreeMap<JobId, Launcher>, FileError> {
    let mut jobs = BTreeMap::new();
    let Some(text) = read_bounded(path, LAUNCH_LOG_BYTES_MAX)? else {
        return Ok(jobs);
    };
    for line in text.split(|&b| b == b'\n') {
        if let Ok(record) = serde_json::from_slice::<Record>(line) {
            let launcher = Launcher {
                queue: record.queue,
                generation: record.generation,
            };
            jobs.insert(record.job, launcher);
        }
    }
    Ok(jobs)
}

/// `job`'s line in the log, its newline included.
fn line_of(job: JobId, launcher: &Launcher) -> serde_json::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(&Record {
        job,
        queue: launcher.queue.clone(),
        generation: launcher.generation,
    })?;
    line.push(b'\n');
    Ok(line)
}

/// Replaces the log at `path` with one line per job, durably; the new file, opened for
/// appending.
fn rewrite(path: &Path, jobs: &BTreeMap<JobId, Launcher>) -> Result<Arc<File>, FileError> {
    let mut bytes = Vec::new();
    for (&job, launcher) in jobs {
        bytes.extend(line_of(job, launcher).map_err(|e| FileError::BadFile {
            path: path.to_owned(),
            message: e.to_string(),
        })?);
    }
    write_atomic(path, &bytes)?;
    let file = OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(|e| FileError::io(path, e))?;
    Ok(Arc::new(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launcher(queue: &str, generation: u64) -> Launcher {
        Launcher {
            queue: queue.to_owned(),
            generation: Generation(generation),
        }
    }

    fn job(n: u64) -> JobId {
        shardsched_proto::Fluid(n)
    }

    #[test]
    fn launches_survive_a_restart_the_last_one_of_a_job_counts_and_a_torn_line_is_dropped() {
        let dir = tempfile::tempdir().expect("dir");
        let log = LaunchLog::open(dir.path(), |_| true).expect("open");
        log.record(job(1), &launcher("alpha", 3)).expect("record");
        log.record(job(2), &launcher("beta", 4)).expect("record");
        log.record(job(1), &launcher("alpha", 5)).expect("record");
        drop(log);
        // A crash in the middle of an append (never acknowledged) leaves a torn line.
        let mut file = OpenOptions::new()
            .append(true)
            .open(dir.path().join(LAUNCH_LOG_FILE))
            .expect("open");
        file.write_all(b"{\"job\":").expect("write");
        drop(file);

        let log = LaunchLog::open(dir.path(), |_| true).expect("reopen");
        let found = log.launchers();
        assert_eq!(
            found,
            BTreeMap::from([
                (job(1), launcher("alpha", 5)),
                (job(2), launcher("beta", 4))
            ])
        );
        // Rewritten at open: one line per job, the torn one gone, and appends go on.
        let text = std::fs::read_to_string(dir.path().join(LAUNCH_LOG_FILE)).expect("read");
        assert_eq!(text.lines().count(), 2, "{text}");
        log.record(job(3), &launcher("alpha", 5)).expect("record");
        drop(log);
        assert_eq!(
            LaunchLog::open(dir.path(), |_| true)
                .expect("reopen")
                .launchers()
                .len(),
            3
        );
    }

    #[test]
    fn only_jobs_still_present_and_not_forgotten_are_kept() {
        let dir = tempfile::tempdir().expect("dir");
        let log = LaunchLog::open(dir.path(), |_| true).expect("open");
        for n in 1..=3 {
            log.record(job(n), &launcher("alpha", 1)).expect("record");
        }
        log.forget(job(1));
        assert_eq!(log.launchers().len(), 2);
        drop(log);
        // Job 1 is still in the file (forgotten only in memory), and its directory gone;
        // job 2's directory is gone too.
        let log = LaunchLog::open(dir.path(), |j| j == job(3)).expect("reopen");
        assert_eq!(
            log.launchers(),
            BTreeMap::from([(job(3), launcher("alpha", 1))])
        );
    }

    #[test]
    fn a_long_log_is_compacted_to_the_jobs_it_still_names() {
        let dir = tempfile::tempdir().expect("dir");
        let mut log = LaunchLog::open(dir.path(), |_| true).expect("open");
        log.compact_at = 16;
        for n in 0..=16 {
            log.record(job(n), &launcher("alpha", 1)).expect("record");
            if n > 0 {
                log.forget(job(n - 1));
            }
        }
        // The next append finds the log long and mostly forgotten: rewritten first.
        log.record(job(1 << 40), &launcher("alpha", 1))
            .expect("record");
        let text = std::fs::read_to_string(dir.path().join(LAUNCH_LOG_FILE)).expect("read");
        assert_eq!(text.lines().count(), 2, "the last job and the new one");
        assert_eq!(log.launchers().len(), 2);
    }

    #[test]
    fn concurrent_launches_are_all_recorded() {
        let dir = tempfile::tempdir().expect("dir");
        let log = Arc::new(LaunchLog::open(dir.path(), |_| true).expect("open"));
        let threads: Vec<_> = (0..8u64)
            .map(|t| {
                let log = Arc::clone(&log);
                std::thread::spawn(move || {
                    for n in 0..50 {
                        log.record(job(t * 1000 + n), &launcher("alpha", t))
                            .expect("record");
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("thread");
        }
        {
            let state = log.lock();
            assert_eq!(state.durable, 400);
            assert!(!state.syncing);
        }
        drop(log);
        let found = LaunchLog::open(dir.path(), |_| true)
            .expect("reopen")
            .launchers();
        assert_eq!(found.len(), 400);
        assert_eq!(found.get(&job(7049)), Some(&launcher("alpha", 7)));
    }
}
