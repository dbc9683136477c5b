//! The resident memory of `up` and its children (`/proc/PID/status`, `VmRSS`), and the
//! load average.

use serde::Serialize;

use crate::e2e::readings::children_of;

/// One process's resident memory.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessMemory {
    /// `up`, `coordinator`, or `shard QUEUE`.
    pub name: String,
    /// Resident set, MB (10⁶ bytes).
    pub rss_mb: f64,
}

/// `up_pid` and its direct children (coordinator, shards), best effort: a process that
/// cannot be read is left out.
pub fn memory_of(up_pid: u32) -> Vec<ProcessMemory> {
    let mut out: Vec<ProcessMemory> = rss_mb(&up_pid.to_string())
        .map(|rss_mb| ProcessMemory {
            name: "up".into(),
            rss_mb,
        })
        .into_iter()
        .collect();
    for child in children_of(up_pid) {
        let Some(rss_mb) = rss_mb(&child.pid) else {
            continue;
        };
        out.push(ProcessMemory {
            name: role_of(&child.args),
            rss_mb,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The sum of `processes`' resident memory, MB.
pub fn total_mb(processes: &[ProcessMemory]) -> f64 {
    processes.iter().map(|p| p.rss_mb).sum()
}

/// The 1-minute load average (0 when it cannot be read).
pub fn load_average_1m() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// `coordinator`, `shard QUEUE`, or the subcommand, from the command line.
fn role_of(args: &[String]) -> String {
    let role = args.get(1).cloned().unwrap_or_default();
    match args.iter().position(|a| a == "--queue") {
        Some(i) if role == "shard" => format!("shard {}", args.get(i + 1).map_or("", |q| q)),
        _ => role,
    }
}

/// `VmRSS` of `pid`, MB.
fn rss_mb(pid: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024.0 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_memory_and_a_load_average_reads() {
        let me = rss_mb("self").expect("VmRSS of this process");
        assert!(me > 0.0);
        assert!(load_average_1m() >= 0.0);
        let total = total_mb(&[
            ProcessMemory {
                name: "a".into(),
                rss_mb: 1.5,
            },
            ProcessMemory {
                name: "b".into(),
                rss_mb: 2.0,
            },
        ]);
        assert!((total - 3.5).abs() < 1e-9);
    }
}
