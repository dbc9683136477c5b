//! What a move may cost at best on this disk: the durable writes it needs in sequence, each a
//! journal commit of two fsyncs, at the fsync time of the disk the journals are on, plus
//! [`SLACK_US`] for everything else (issue 20 item 4: "within the sequential fsyncs it needs
//! × the fsync median + 1 ms").

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Serialize;

/// fsyncs per journal commit: redb's two-phase commit (docs/JOURNAL.md, "Commits").
pub const FSYNCS_PER_COMMIT: u64 = 2;
/// Journal commits in sequence between an idle node's move request and its `up` line: the
/// coordinator's (the move, before any command leaves), the donor's (the node released,
/// before it answers), the coordinator's again (the release, before `Acquire` leaves). The
/// recipient writes `up` as it applies `Acquire`, before its own commit.
pub const IDLE_MOVE_COMMITS: u64 = 3;
/// Journal commits in sequence between a job's end (the donor's `released` line) and the
/// node's `up`: the donor's and the coordinator's.
pub const JOB_END_COMMITS: u64 = 2;
/// What the budget allows beyond the fsyncs: the CPU work and the QUIC hops.
pub const SLACK_US: u64 = 1000;
/// Probe writes.
pub const PROBE_WRITES: usize = 32;
/// Bytes per probe write.
pub const PROBE_WRITE_BYTES: usize = 4096;
/// Pause between two probe writes (not timed): the probe spans a few hundred ms of the
/// disk's life rather than one burst.
pub const PROBE_SPACING: Duration = Duration::from_millis(5);

/// A phase's budget.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Budget {
    /// fsyncs in sequence.
    pub fsyncs: u64,
    /// The disk's fsync median, µs.
    pub fsync_median_us: u64,
    /// fsyncs × median + [`SLACK_US`], µs.
    pub budget_us: u64,
}

impl Budget {
    /// The budget of `commits` journal commits in sequence at `fsync_median_us`.
    pub fn of_commits(commits: u64, fsync_median_us: u64) -> Budget {
        let fsyncs = commits * FSYNCS_PER_COMMIT;
        Budget {
            fsyncs,
            fsync_median_us,
            budget_us: fsyncs * fsync_median_us + SLACK_US,
        }
    }

    /// `6 × 0.42 + 1 = 3.52 ms`.
    pub fn formula(&self) -> String {
        format!(
            "{} × {:.2} + {:.0} = {:.2} ms",
            self.fsyncs,
            self.fsync_median_us as f64 / 1000.0,
            SLACK_US as f64 / 1000.0,
            self.budget_us as f64 / 1000.0
        )
    }
}

/// The time of [`PROBE_WRITES`] writes of [`PROBE_WRITE_BYTES`] appended to a fresh file in
/// `dir`, [`PROBE_SPACING`] apart, each followed by `fdatasync` (as `dd oflag=dsync` does),
/// ns each; the file is removed.
pub fn probe_fsyncs(dir: &Path) -> Result<Vec<u64>> {
    let path = dir.join("fsync-probe");
    let result = probe_into(&path);
    let _ = std::fs::remove_file(&path);
    result
}

fn probe_into(path: &Path) -> Result<Vec<u64>> {
    let mut file: File = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    let block = vec![0xa5u8; PROBE_WRITE_BYTES];
    let mut samples = Vec::with_capacity(PROBE_WRITES);
    for _ in 0..PROBE_WRITES {
        std::thread::sleep(PROBE_SPACING);
        let started = Instant::now();
        file.write_all(&block)
            .and_then(|()| file.sync_data())
            .with_context(|| format!("writing {}", path.display()))?;
        samples.push(u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX));
    }
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_move_may_take_six_fsyncs_and_a_millisecond() {
        let b = Budget::of_commits(IDLE_MOVE_COMMITS, 420);
        assert_eq!((b.fsyncs, b.budget_us), (6, 3520));
        assert_eq!(b.formula(), "6 × 0.42 + 1 = 3.52 ms");
    }

    #[test]
    fn the_probe_times_each_write_and_leaves_nothing() {
        let dir = std::env::temp_dir().join(format!("bench-moves-probe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let samples = probe_fsyncs(&dir).expect("probe");
        assert_eq!(samples.len(), PROBE_WRITES);
        assert!(!dir.join("fsync-probe").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
