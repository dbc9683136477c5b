//! One cgroup per job, under the agent's root, so that a job's processes are known and can
//! all be killed, whatever they do (a `setsid` grandchild included).
//!
//! Two layouts are met in the field: the unified hierarchy alone (cgroup v2,
//! `/sys/fs/cgroup`), and the hybrid one (v1 controllers under `/sys/fs/cgroup/<name>`, an
//! unified hierarchy at `/sys/fs/cgroup/unified` without controllers). Either way the job's
//! cgroup in the unified hierarchy is where its processes are counted (`cgroup.events`:
//! `populated`) and killed (`cgroup.kill`); its allocated cores go to `cpuset` (the v2
//! controller, or v1's), its GPUs to v1's `devices` where there is one.
//!
//! A job's cgroup is the one its supervisor already sits in: each spare supervisor is put
//! in a cgroup of its own (`spare-…`) when it starts, and the job handed to it gets that
//! cgroup, restricted then to the job's cores and GPUs. Moving a process between cgroups
//! costs the mover an RCU grace period (the kernel's `cgroup_threadgroup_rwsem`): 5–8 ms
//! on an idle host, paid at a spare's start instead of in every launch. A job no spare
//! took gets a new cgroup named after it (`job-<id>`) that its supervisor joins.
//!
//! The agent only ever acts on cgroups it created under its own roots: a job's are named
//! in its plan, which the agent wrote where only root writes, and checked to be the agent's
//! ([`Hierarchy::owns`]) before use; never paths read from a job's directory, which its
//! user owns. It never acts on one that holds its own pid.

use std::fs;
use std::path::{Path, PathBuf};

pub use shardsched_process::cgroups::JobCgroups;
use shardsched_proto::msg::JobId;

/// The NVIDIA character devices' major number (`/dev/nvidia<N>` is minor N).
const NVIDIA_MAJOR: u32 = 195;

/// The name of job `job`'s cgroups under the agent's roots, when no spare supervisor took
/// it (one that did gave it its own, [`SPARE_PREFIX`]).
pub fn job_cgroup_name(job: JobId) -> String {
    format!("{JOB_PREFIX}{}", job.0)
}

/// How the cgroups of jobs no spare took are named: `job-<id>`.
const JOB_PREFIX: &str = "job-";

/// How the cgroups made for spare supervisors are named: `spare-<the spare's pid>`.
const SPARE_PREFIX: &str = "spare-";

/// The cgroup hierarchies of this host, as found at start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hierarchy {
    /// The agent's root in the unified hierarchy (made if missing).
    pub root: PathBuf,
    /// The v1 controllers' roots mirroring it (hybrid layout), by controller name.
    pub v1: Vec<(String, PathBuf)>,
}

/// Where the cgroup file systems are mounted.
const CGROUP_MOUNT: &str = "/sys/fs/cgroup";

/// The unified hierarchy's mount point on this host (the whole of `/sys/fs/cgroup` with
/// cgroup v2 alone, `/sys/fs/cgroup/unified` on a hybrid host), if there is one.
pub fn unified_mount() -> Option<PathBuf> {
    let base = Path::new(CGROUP_MOUNT);
    if base.join("cgroup.controllers").exists() {
        Some(base.to_owned())
    } else if base.join("unified/cgroup.controllers").exists() {
        Some(base.join("unified"))
    } else {
        None
    }
}

/// The v1 controllers a job may get a cgroup in, where mounted: only when it has something
/// to restrict there (see [`Hierarchy::create`]).
const V1_CONTROLLERS: [&str; 2] = ["cpuset", "devices"];

impl Hierarchy {
    /// Finds the hierarchies; `root` is the agent's directory in the unified one (default
    /// `shardsched/<node>` under its mount point). `None` when there is no unified
    /// hierarchy to use (the agent then tracks jobs by process group only, and says so).
    pub fn find(root: Option<&Path>, node: &str) -> Option<Hierarchy> {
        let base = Path::new(CGROUP_MOUNT);
        let unified = unified_mount()?;
        let root = root
            .map(Path::to_owned)
            .unwrap_or_else(|| unified.join("shardsched").join(node));
        let relative = root.strip_prefix(&unified).ok()?.to_owned();
        let v1 = if unified == base {
            Vec::new()
        } else {
            V1_CONTROLLERS
                .iter()
                .map(|c| (c.to_string(), base.join(c)))
                .filter(|(_, mount)| mount.join("cgroup.procs").exists())
                .map(|(c, mount)| (c, mount.join(&relative)))
                .collect()
        };
        fs::create_dir_all(&root).ok()?;
        for (name, dir) in &v1 {
            if fs::create_dir_all(dir).is_ok() && name == "cpuset" {
                // Every level made here needs its cpus and mems, or nothing below it can
                // hold a process (ENOSPC): the top one first.
                let mount = base.join(name);
                let mut levels: Vec<&Path> = dir
                    .ancestors()
                    .take_while(|d| d.starts_with(&mount) && *d != mount)
                    .collect();
                levels.reverse();
                for level in levels {
                    inherit_cpuset(level);
                }
            }
        }
        Some(Hierarchy { root, v1 })
    }

    /// Makes the job's cgroups, with `cores` as its cpuset (those this host has) and only
    /// `gpus` among the NVIDIA devices. A v1 controller's cgroup is made only when it
    /// restricts something (a cpuset of this host's cores, GPUs to confine): one that would
    /// only copy its parent's settings costs a mkdir, an attach and an rmdir per job, each
    /// under the kernel's global cgroup lock (an attach also stalls every fork on the host
    /// for an RCU grace period), for nothing. The unified one is always made: it counts and
    /// kills the job's processes.
    pub fn create(&self, name: &str, cores: &[u32], gpus: &[u32]) -> std::io::Result<JobCgroups> {
        let unified = self.root.join(name);
        fs::create_dir_all(&unified)?;
        self.restrict(unified, cores, gpus)
    }

    /// Restricts `unified`, a cgroup of the agent's with no job in it yet (a spare's, made
    /// by [`Hierarchy::create_spare`] and holding only the spare, or one just made by
    /// [`Hierarchy::create`]), to the job: its cpuset, and the v1 cgroups (named like it)
    /// where they restrict something.
    pub fn restrict(
        &self,
        unified: PathBuf,
        cores: &[u32],
        gpus: &[u32],
    ) -> std::io::Result<JobCgroups> {
        let name = unified
            .file_name()
            .map(|n| n.to_owned())
            .ok_or_else(|| std::io::Error::other("a job's cgroup has no name"))?;
        let mut made = JobCgroups {
            unified: Some(unified.clone()),
            v1: Vec::new(),
        };
        let cpus = host_cpus(cores);
        if let Some(cpus) = &cpus
            && unified.join("cpuset.cpus").exists()
        {
            let _ = fs::write(unified.join("cpuset.cpus"), cpus);
        }
        for (controller, root) in &self.v1 {
            let restricts = match controller.as_str() {
                "cpuset" => cpus.is_some(),
                "devices" => !gpus.is_empty(),
                _ => false,
            };
            if !restricts {
                continue;
            }
            let dir = root.join(&name);
            fs::create_dir_all(&dir)?;
            made.v1.push(dir.clone());
            match controller.as_str() {
                "cpuset" => {
                    inherit_cpuset(&dir);
                    if let Some(cpus) = &cpus {
                        let _ = fs::write(dir.join("cpuset.cpus"), cpus);
                    }
                }
                "devices" if !gpus.is_empty() => {
                    fs::write(dir.join("devices.deny"), format!("c {NVIDIA_MAJOR}:* rwm"))?;
                    for gpu in gpus {
                        fs::write(
                            dir.join("devices.allow"),
                            format!("c {NVIDIA_MAJOR}:{gpu} rwm"),
                        )?;
                    }
                }
                _ => {}
            }
        }
        Ok(made)
    }
}

impl Hierarchy {
    /// Makes an empty cgroup in the unified hierarchy for spare supervisor `pid`, named
    /// after it (one left by an earlier spare of the same pid, still holding a job, is an
    /// error: that spare's job then gets a cgroup of its own at launch).
    pub fn create_spare(&self, pid: u32) -> std::io::Result<PathBuf> {
        let dir = self.root.join(format!("{SPARE_PREFIX}{pid}"));
        fs::create_dir(&dir)?;
        Ok(dir)
    }

    /// Removes the empty cgroups of spares (those of an earlier agent, whose spares exited
    /// with it, or of this one's stopped spares); one that holds a job's processes stays
    /// (the kernel refuses to remove a populated cgroup).
    pub fn sweep_spares(&self) {
        for root in std::iter::once(&self.root).chain(self.v1.iter().map(|(_, d)| d)) {
            let Ok(entries) = fs::read_dir(root) else {
                continue;
            };
            for entry in entries.flatten() {
                if entry
                    .file_name()
                    .to_string_lossy()
                    .starts_with(SPARE_PREFIX)
                {
                    let _ = fs::remove_dir(entry.path());
                }
            }
        }
    }

    /// Whether every one of `cgroups` is a job's cgroup directly under this agent's roots
    /// (read from a plan, they are checked before the agent counts, kills or removes).
    pub fn owns(&self, cgroups: &JobCgroups) -> bool {
        let named = |dir: &Path, root: &Path| {
            dir.parent() == Some(root)
                && dir.file_name().is_some_and(|n| {
                    let n = n.to_string_lossy();
                    n.starts_with(SPARE_PREFIX) || n.starts_with(JOB_PREFIX)
                })
        };
        cgroups
            .unified
            .as_deref()
            .is_none_or(|dir| named(dir, &self.root))
            && cgroups
                .v1
                .iter()
                .all(|dir| self.v1.iter().any(|(_, root)| named(dir, root)))
    }

    /// The cgroups of the job `name` ([`job_cgroup_name`]) under the agent's roots: its
    /// unified one, and each v1 one that exists (a job gets v1 cgroups only where they
    /// restrict something). Derived from the agent's own roots and the job's id, never
    /// read from the job's directory, which belongs to the job's user.
    pub fn of_job(&self, name: &str) -> JobCgroups {
        JobCgroups {
            unified: Some(self.root.join(name)),
            v1: self
                .v1
                .iter()
                .map(|(_, root)| root.join(name))
                .filter(|dir| dir.is_dir())
                .collect(),
        }
    }

    /// Removes the agent's root cgroups, and their parents the agent's start made, as far
    /// as they are empty (an agent stopping cleanly leaves no empty directory behind; one
    /// that still holds a job's cgroup stays).
    pub fn remove_empty(&self) {
        let mounts = [unified_mount(), Some(PathBuf::from(CGROUP_MOUNT))];
        for root in std::iter::once(&self.root).chain(self.v1.iter().map(|(_, d)| d)) {
            for dir in root.ancestors() {
                if mounts.iter().flatten().any(|m| m == dir) || !dir.starts_with(CGROUP_MOUNT) {
                    break;
                }
                if fs::remove_dir(dir).is_err() {
                    break;
                }
            }
        }
    }
}

/// A v1 cpuset starts empty: it takes its parent's cpus and mems before anything joins it.
fn inherit_cpuset(dir: &Path) {
    let Some(parent) = dir.parent() else { return };
    for file in ["cpuset.cpus", "cpuset.mems"] {
        let mine = fs::read_to_string(dir.join(file)).unwrap_or_default();
        if mine.trim().is_empty()
            && let Ok(theirs) = fs::read_to_string(parent.join(file))
        {
            let _ = fs::write(dir.join(file), theirs.trim());
        }
    }
}

/// The allocated cores this host has, as a cpuset list; `None` when that restricts nothing:
/// it has none of them (a cluster described bigger than the host, as on a laptop running
/// `up --agents`), or all of its CPUs are the job's (an exclusive node: a cpuset then only
/// costs its mkdir, attach and rmdir under the kernel's cgroup lock).
///
/// The host's CPU count is asked once per agent: `available_parallelism` reads the cgroup's
/// quota files and the affinity mask at every call (~30 µs of every launch, `perf` of `bench
/// e2e --agents`), and a host's CPUs do not change under a running agent (hotplug aside:
/// a restarted agent sees them).
fn host_cpus(cores: &[u32]) -> Option<String> {
    static ONLINE: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    let online = *ONLINE.get_or_init(|| {
        std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1)
    });
    cpuset_of(cores, online)
}

/// [`host_cpus`] on a host of `online` CPUs.
fn cpuset_of(cores: &[u32], online: u32) -> Option<String> {
    let mut cpus: Vec<u32> = cores.iter().copied().filter(|c| *c < online).collect();
    cpus.sort_unstable();
    cpus.dedup();
    if cpus.is_empty() || cpus.len() as u32 == online {
        return None;
    }
    let list: Vec<String> = cpus.iter().map(u32::to_string).collect();
    Some(list.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpuset_is_made_only_of_some_of_the_hosts_cpus() {
        assert_eq!(cpuset_of(&[1], 2).as_deref(), Some("1"));
        assert_eq!(cpuset_of(&[3, 0, 40], 4).as_deref(), Some("0,3"));
        assert_eq!(cpuset_of(&[40, 41], 2), None, "none of the host's");
        assert_eq!(
            cpuset_of(&(0..44).collect::<Vec<_>>(), 2),
            None,
            "all of them"
        );
    }
}
