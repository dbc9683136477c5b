//! What the tests of `up --agents` share: their configuration, where a job's files are on
//! a node, and process ancestry.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::System;
use super::config::with_alpha;

/// Eight nodes: alpha defines node[0-3], beta node[2-7] (so node[2-3] can move from alpha
/// to beta) and owns node[4-7]; `[agents]` as given (e.g. `heartbeat_timeout = "4s"`).
pub fn agents_config(agents: &str) -> String {
    with_alpha(
        "node[0-7]",
        &format!(
            r#"
[queues.beta]
nodes = "node[2-7]"
policy = "easy"
default_duration = "60s"
max_duration = "2h"

[agents]
{agents}
"#
        ),
    )
}

/// One queue, alpha, on nodes `hosts` (e.g. `node[0-4]`); an agent silent for 10 s has its
/// node marked down. (4 s, a 2 s lease, was seen to run out under two test suites at once:
/// the shard's renewals came late and a requeued job's tasks were killed by their lease.)
pub fn alpha_agents_config(hosts: &str) -> String {
    format!(
        r#"
default_queue = "alpha"

[cluster.inline]
name = "agents"

[[cluster.inline.nodes]]
hosts = "{hosts}"
sockets = 1
cores_per_socket = 4

[queues.alpha]
nodes = "{hosts}"
policy = "fcfs"
default_duration = "60s"
max_duration = "2h"

[agents]
heartbeat_timeout = "10s"
"#
    )
}

/// Issues a certificate of `role` named `name` from the CA in `coordinator_dir` into `out`.
pub fn issue_cert(coordinator_dir: &Path, role: &str, name: &str, out: &Path) {
    let done = Command::new(super::EXE)
        .args([
            "cert",
            "issue",
            "--role",
            role,
            "--name",
            name,
            "--state-dir",
        ])
        .arg(coordinator_dir)
        .arg("--out")
        .arg(out)
        .output()
        .expect("cert issue");
    assert!(
        done.status.success(),
        "cert issue --role {role} --name {name}: {}",
        String::from_utf8_lossy(&done.stderr)
    );
}

impl System {
    /// A job's directory on a node (`up --agents`).
    pub fn node_job_dir(&self, node: &str, id: &str) -> PathBuf {
        self.layout().node_dir(node).join("jobs").join(id)
    }

    /// What task `rank` of job `id` wrote to its standard output on `node`, by word.
    pub fn task_words(&self, node: &str, id: &str, rank: u32) -> Vec<String> {
        let path = self.node_job_dir(node, id).join(format!("task-{rank}.out"));
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    }

    /// The pid of node `node`'s agent (a child of `up`).
    pub fn agent_pid(&self, node: &str) -> Option<u32> {
        self.try_child_pid(node)
    }

    /// Node `node`'s agent's cgroup root, as it logged it (none on a host without cgroups).
    pub fn agent_cgroup_root(&self, node: &str) -> Option<PathBuf> {
        let log = self.layout().logs_dir().join(format!("node-{node}.log"));
        cgroup_root_logged(&log)
    }

    /// Removes what is left of this system's agents' cgroups once it has stopped: an agent
    /// killed outright leaves its spares' cgroups (and its jobs', while they run), which
    /// only a clean stop or its next start removes. Only the `up-…` directory `up` made
    /// for this system is swept, in each hierarchy, deepest first; a cgroup still holding
    /// a process stays (the kernel refuses).
    pub(super) fn remove_agent_cgroups(&self) {
        let Ok(logs) = std::fs::read_dir(self.layout().logs_dir()) else {
            return;
        };
        let Some(unified) = shardsched_node::cgroup::unified_mount() else {
            return;
        };
        let mut swept = Vec::new();
        for log in logs.flatten() {
            let Some(up_dir) = cgroup_root_logged(&log.path())
                .and_then(|root| root.parent().map(Path::to_owned))
                .filter(|d| {
                    d.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("up-"))
                })
            else {
                continue;
            };
            if swept.contains(&up_dir) {
                continue;
            }
            // A hybrid host's v1 controllers mirror the agents' roots.
            if unified != Path::new("/sys/fs/cgroup")
                && let Ok(relative) = up_dir.strip_prefix(&unified)
            {
                for controller in ["cpuset", "devices"] {
                    super::remove_cgroups(
                        &Path::new("/sys/fs/cgroup").join(controller).join(relative),
                    );
                }
            }
            super::remove_cgroups(&up_dir);
            swept.push(up_dir);
        }
    }
}

/// The cgroup root an agent's log says it uses (`job cgroups root=…`).
fn cgroup_root_logged(log: &Path) -> Option<PathBuf> {
    std::fs::read_to_string(log)
        .ok()?
        .lines()
        .find_map(|l| {
            l.split_once("job cgroups root=")?
                .1
                .split_whitespace()
                .next()
        })
        .map(PathBuf::from)
}

/// The unified-hierarchy cgroup of process `pid` (its `0::` line in `/proc/PID/cgroup`), as
/// a path under the hierarchy's mount point.
pub fn unified_cgroup_of(pid: u32) -> Option<PathBuf> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let relative = text.lines().find_map(|l| l.strip_prefix("0::"))?;
    let mount = shardsched_node::cgroup::unified_mount()?;
    Some(mount.join(relative.trim_start_matches('/')))
}

/// The parent of process `pid`, from `/proc`.
pub fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The spare supervisors of agent `agent` (`shardsched-supervisor --spare` children of it
/// not yet handed a job: one handed a job has its own session), by pid.
pub fn spares_of(agent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut spares: Vec<u32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            parent_of(pid) == Some(agent) && super::alive(pid) && session_of(pid) != Some(pid)
        })
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("--spare"))
        })
        .collect();
    spares.sort_unstable();
    spares
}

/// The session of process `pid`.
fn session_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()
}
