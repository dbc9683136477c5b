//! What tests read of processes: pids, whether one lives, its children, its memory (all
//! from `/proc`), and the files a process or job writes.

use std::path::Path;

use rustix::process::Pid;
use shardsched_proto::Credentials;
use shardsched_proto::state_dir::{CA_CERT_FILE, CERT_FILE, KEY_FILE};

use super::wait_for;

pub fn pid(p: u32) -> Pid {
    Pid::from_raw(p as i32).unwrap()
}

/// Whether process `p` runs (a zombie has exited: only its parent's wait is missing).
pub fn alive(p: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{p}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

/// Reads a pid a job wrote to a file (waiting for it to appear).
pub fn read_pid_file(path: &Path) -> u32 {
    let mut text = String::new();
    assert!(
        wait_for(|| {
            text = std::fs::read_to_string(path).unwrap_or_default();
            text.ends_with('\n')
        }),
        "{} never written",
        path.display()
    );
    text.trim().parse().unwrap()
}

/// The live children of `parent`, with their command lines.
pub fn children_of(parent: u32) -> Vec<(u32, Vec<String>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() < 2 || fields[0] == "Z" || fields[1].parse::<u32>() != Ok(parent) {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
        let args = cmdline
            .split(|&b| b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        out.push((p, args));
    }
    out
}

/// The credentials in a client or state directory (`ca.pem`, `cert.pem`, `key.pem`).
pub fn creds_in(dir: &Path) -> Credentials {
    Credentials::load(
        &dir.join(CA_CERT_FILE),
        &dir.join(CERT_FILE),
        &dir.join(KEY_FILE),
    )
    .unwrap()
}

/// A field of `/proc/PID/status` (`VmRSS`, `VmPeak`, …), in KiB.
pub fn mem_kib(p: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{p}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// The wall clock, ms since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}
