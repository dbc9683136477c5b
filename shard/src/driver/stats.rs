//! The journal's commit statistics, written to `<state-dir>/journal-stats.json` about once
//! a second while they change, for benchmarks (`shardsched bench e2e` reads it before and
//! after a phase and reports the fsync latency of the commits in between).
//!
//! ```json
//! {"commits": 812, "batches": 20133, "writes": 41007, "largest_commit_writes": 512,
//!  "fsync_us": {"count": 812, "mean": 5310, "max": 21000, "p50": 4863, "p99": 13311,
//!               "buckets": [[4863, 200], [5119, 180], …]}}
//! ```
//!
//! `buckets` are (largest µs in the bucket, commits), so that a reader can subtract two
//! readings and take quantiles of the difference
//! ([`shardsched_journal::quantile_of_buckets`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use shardsched_journal::{CommitStats, Committer};

/// The file, in the state directory.
pub use shardsched_proto::state_dir::JOURNAL_STATS_FILE;

/// How often the statistics are looked at (and written when they changed).
pub const JOURNAL_STATS_INTERVAL: Duration = Duration::from_secs(1);

/// Writes the statistics of `committer` to `dir`/[`JOURNAL_STATS_FILE`] until aborted.
pub(crate) async fn write_periodically(committer: Committer, dir: PathBuf) {
    let path = dir.join(JOURNAL_STATS_FILE);
    let mut written = None;
    let mut tick = tokio::time::interval(JOURNAL_STATS_INTERVAL);
    loop {
        tick.tick().await;
        let stats = committer.stats();
        if written == Some(stats.commits) {
            continue;
        }
        match write(&path, &stats).await {
            Ok(()) => written = Some(stats.commits),
            Err(e) => {
                tracing::debug!(path = %path.display(), error = %e, "journal statistics not written");
            }
        }
    }
}

/// The statistics as JSON.
pub fn to_json(stats: &CommitStats) -> serde_json::Value {
    let us = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    serde_json::json!({
        "commits": stats.commits,
        "batches": stats.batches,
        "writes": stats.writes,
        "largest_commit_writes": stats.largest_commit_writes,
        "fsync_us": {
            "count": stats.fsync.count(),
            "mean": us(stats.fsync.mean()),
            "max": us(stats.fsync.max()),
            "p50": us(stats.fsync.quantile(0.5)),
            "p99": us(stats.fsync.quantile(0.99)),
            "buckets": stats.fsync.buckets(),
        },
    })
}

/// Writes atomically: a temporary file renamed over the old one.
async fn write(path: &Path, stats: &CommitStats) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    tokio::fs::write(&tmp, to_json(stats).to_string()).await?;
    tokio::fs::rename(&tmp, path).await
}
