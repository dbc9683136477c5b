//! A job's cgroups, as its supervisor and its starter use them: join, count, kill,
//! remove. (Making them is the node agent's: `shardsched_node::cgroup`.)
//!
//! Only cgroups the agent created for the job are ever named here (their paths are written
//! in the job's plan and directory), and a cgroup holding the calling process is never
//! killed.

use std::fs;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The cgroups made for one job.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobCgroups {
    /// The unified hierarchy's (counts and kills).
    pub unified: Option<PathBuf>,
    /// The v1 controllers' (cpuset, devices, pids, freezer), created by the agent.
    pub v1: Vec<PathBuf>,
}

impl JobCgroups {
    /// Puts process `pid` in every one of the job's cgroups it is not in yet (the
    /// supervisor does it for itself before it starts tasks, which inherit them; a spare
    /// supervisor is in the unified one from its start). A move is not made when not
    /// needed: each costs the mover an RCU grace period, even into its own cgroup.
    pub fn attach(&self, pid: u32) -> std::io::Result<()> {
        for dir in self.all() {
            if !holds(dir, pid) {
                fs::write(dir.join("cgroup.procs"), pid.to_string())?;
            }
        }
        Ok(())
    }

    /// The pids in the job's unified cgroup.
    pub fn pids(&self) -> Vec<u32> {
        self.unified.as_deref().map(procs).unwrap_or_default()
    }

    /// Whether any process of the job remains.
    pub fn populated(&self) -> bool {
        let Some(dir) = &self.unified else {
            return false;
        };
        match fs::read_to_string(dir.join("cgroup.events")) {
            Ok(events) => events.lines().any(|l| l.trim() == "populated 1"),
            Err(_) => !self.pids().is_empty(),
        }
    }

    /// SIGKILLs every process of the job (`cgroup.kill`, or each pid where the kernel has
    /// none). Refused for a cgroup holding this process.
    pub fn kill_all(&self) -> std::io::Result<()> {
        let me = std::process::id();
        let pids = self.pids();
        if pids.contains(&me) {
            return Err(std::io::Error::other(
                "refusing to kill a cgroup that holds the agent itself",
            ));
        }
        if let Some(dir) = &self.unified
            && fs::write(dir.join("cgroup.kill"), "1").is_ok()
        {
            return Ok(());
        }
        for pid in pids {
            signal(pid, rustix::process::Signal::KILL);
        }
        Ok(())
    }

    /// SIGTERMs every process of the job except `spare` (the supervisor).
    pub fn terminate_all(&self, spare: u32) {
        for pid in self.pids().into_iter().filter(|p| *p != spare) {
            signal(pid, rustix::process::Signal::TERM);
        }
    }

    /// Removes the job's (empty) cgroups.
    pub fn remove(&self) -> std::io::Result<()> {
        for dir in self.all() {
            match fs::remove_dir(dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn all(&self) -> impl Iterator<Item = &PathBuf> {
        self.unified.iter().chain(self.v1.iter())
    }
}

/// The pids in cgroup `dir` (none when it cannot be read).
fn procs(dir: &std::path::Path) -> Vec<u32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .map(|text| text.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// Whether process `pid` is in cgroup `dir`.
fn holds(dir: &std::path::Path, pid: u32) -> bool {
    procs(dir).contains(&pid)
}

fn signal(pid: u32, sig: rustix::process::Signal) {
    if let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process(pid, sig);
    }
}
