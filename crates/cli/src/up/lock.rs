//! `up`'s hold on its state directory: one system per directory, even after a SIGKILL.
//!
//! Two advisory locks (flock(2), through [`std::fs::File::try_lock`]), both kept in the
//! state directory and never deleted:
//!
//! - [`UP_LOCK_FILE`] (`up.pid`): held **exclusive** by `up` for its whole life; it also
//!   holds `up`'s pid, for the message another `up` prints;
//! - [`PROCESSES_LOCK_FILE`] (`processes.lock`): held **shared** by every coordinator and
//!   shard `up` starts, each through its own open file, for its own life (they are given
//!   its path with the hidden flag `--up-lock`, see [`hold_shared`]).
//!
//! A new `up` takes `up.pid` (refused: an `up` lives, named by its pid), then tries an
//! exclusive lock on `processes.lock` and drops it at once (refused: the coordinator or
//! shards of an `up` that died, e.g. SIGKILLed, still serve; they are named by their pids,
//! read from `/proc/locks`). Only then does it touch anything in the directory: before this
//! lock, a second `up` deleted the live coordinator's `address` and rewrote its certificate.
//!
//! Why each child takes its own lock rather than inheriting `up`'s locked descriptor: an
//! inherited descriptor passes on to every descendant, and exec jobs' supervisors are meant
//! to outlive their shard (docs/EXEC.md): they would keep the directory locked after a clean
//! stop. A child cannot close a descriptor it only knows by number without unsafe code.
//! A lock a process took by path ends with that process, however it ends (the kernel drops
//! it), so nothing is ever judged from a stale pid in a file.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use shardsched_client::StateDir;
#[cfg(doc)]
use shardsched_proto::state_dir::{PROCESSES_LOCK_FILE, UP_LOCK_FILE};

/// `up`'s exclusive lock on a state directory; released when dropped (or when `up` dies).
pub struct UpLock {
    _file: File,
    processes: PathBuf,
}

impl UpLock {
    /// Takes the directory, or says who has it. Creates nothing but the two lock files.
    pub fn take(dir: &StateDir) -> Result<UpLock> {
        let root = dir.root();
        let path = dir.up_lock_file();
        let mut file = open_lock_file(&path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                let who = match text.trim().parse::<u32>() {
                    Ok(pid) => format!("pid {pid}"),
                    Err(_) => "its pid is not written yet".to_owned(),
                };
                bail!(
                    "another `shardsched up` ({who}) is running with {}: stop it first, or \
                     use --dir for a second system",
                    root.display()
                );
            }
            Err(TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("locking {}", path.display()));
            }
        }
        let processes = dir.processes_lock_file();
        let probe = open_lock_file(&processes)?;
        match probe.try_lock() {
            Ok(()) => drop(probe),
            Err(TryLockError::WouldBlock) => {
                let holders = lock_holders(&processes);
                let named = if holders.is_empty() {
                    "processes this user may not see".to_owned()
                } else {
                    holders
                        .iter()
                        .map(|&pid| describe_pid(pid))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let pids: Vec<String> = holders.iter().map(u32::to_string).collect();
                bail!(
                    "{} is still in use by the processes of a `shardsched up` that is gone \
                     (killed?): {named}. They still serve; stop them first{}, or use --dir \
                     for a second system",
                    root.display(),
                    if pids.is_empty() {
                        String::new()
                    } else {
                        format!(" (`kill {}`)", pids.join(" "))
                    }
                );
            }
            Err(TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("locking {}", processes.display()));
            }
        }
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| writeln!(file, "{}", std::process::id()))
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(UpLock {
            _file: file,
            processes,
        })
    }

    /// The path children are given with `--up-lock`.
    pub fn processes_lock(&self) -> &Path {
        &self.processes
    }
}

/// The start of every process `up` starts (coordinator, shard, node agent): the shared
/// lock on `up_lock` when `up` gave one ([`hold_shared`]; held while the returned file
/// lives, so keep it for the whole life of the process), then the process's logs in
/// `format`.
pub fn start_child(
    up_lock: Option<&Path>,
    format: shardsched_telemetry::LogFormat,
) -> Result<Option<File>> {
    let held = up_lock.map(hold_shared).transpose()?;
    shardsched_telemetry::logs::init(format);
    Ok(held)
}

/// For `coordinator --up-lock FILE` and `shard --up-lock FILE`: a shared lock on `FILE`,
/// held while the returned file lives (keep it for the whole life of the process). Waits
/// while a starting `up` probes the lock (an instant).
pub fn hold_shared(path: &Path) -> Result<File> {
    let file = open_lock_file(path)?;
    file.lock_shared()
        .with_context(|| format!("locking {}", path.display()))?;
    Ok(file)
}

fn open_lock_file(path: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))
}

/// The pids holding a flock on `path`, from `/proc/locks` (empty when it cannot be read).
fn lock_holders(path: &Path) -> Vec<u32> {
    let (Ok(meta), Ok(locks)) = (
        std::fs::metadata(path),
        std::fs::read_to_string("/proc/locks"),
    ) else {
        return Vec::new();
    };
    let id = format!(
        "{:02x}:{:02x}:{}",
        rustix::fs::major(meta.dev()),
        rustix::fs::minor(meta.dev()),
        meta.ino()
    );
    let mut pids: Vec<u32> = locks
        .lines()
        .filter_map(|line| {
            // `1: FLOCK  ADVISORY  READ 1234 fe:00:6381731 0 EOF`; waiters have `->`.
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                [_, "FLOCK", _, _, pid, file, ..] if *file == id => pid.parse().ok(),
                _ => None,
            }
        })
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// `pid 123 (coordinator)`, `pid 124 (shard batch)`: what a process is, from its command
/// line.
fn describe_pid(pid: u32) -> String {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<String> = cmdline
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let arg_after = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
    };
    let what = match args.get(1).map(String::as_str) {
        Some("coordinator") => "coordinator".to_owned(),
        Some("shard") => match arg_after("--queue") {
            // A queue name is letters, digits, `-` and `_` (docs/CONFIG.md).
            Some(queue) => format!("shard {queue}"),
            None => "shard".to_owned(),
        },
        _ => return format!("pid {pid}"),
    };
    format!("pid {pid} ({what})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_holder_is_found_in_proc_locks() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = StateDir::at(dir.path().to_owned()).processes_lock_file();
        assert!(lock_holders(&path).is_empty());
        let _held = hold_shared(&path).expect("lock");
        if std::fs::metadata("/proc/locks").is_err() {
            eprintln!("skipped: no /proc/locks");
            return;
        }
        assert_eq!(lock_holders(&path), vec![std::process::id()]);
    }
}
