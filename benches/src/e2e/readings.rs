//! What `bench e2e` reads beside its own clock: the shards' journal commit statistics
//! (their `journal-stats.json`) and the CPU time of `up`'s children (`/proc`).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use shardsched_client::StateDir;
use shardsched_histogram::quantile_of_buckets;
use shardsched_proto::state_dir::JOURNAL_STATS_FILE;

/// A shard's journal statistics (its `journal-stats.json`), or the sum of several.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JournalReading {
    /// Commits (each one fsync).
    pub commits: u64,
    /// Writes in them.
    pub writes: u64,
    /// Commit latency histogram: largest µs of a bucket → commits.
    pub fsync_buckets: BTreeMap<u64, u64>,
}

impl JournalReading {
    /// Reads `dir`/journal-stats.json ([`JOURNAL_STATS_FILE`]); a missing or unreadable
    /// file reads as nothing.
    fn read(dir: &Path) -> JournalReading {
        let Ok(text) = std::fs::read_to_string(dir.join(JOURNAL_STATS_FILE)) else {
            return JournalReading::default();
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
            return JournalReading::default();
        };
        let fsync_buckets = v["fsync_us"]["buckets"]
            .as_array()
            .map(|b| {
                b.iter()
                    .filter_map(|pair| Some((pair[0].as_u64()?, pair[1].as_u64()?)))
                    .collect()
            })
            .unwrap_or_default();
        JournalReading {
            commits: v["commits"].as_u64().unwrap_or(0),
            writes: v["writes"].as_u64().unwrap_or(0),
            fsync_buckets,
        }
    }

    /// The sum over the shards of `queues` under `up_dir`, once it stops changing (the
    /// shards write it about once a second).
    pub async fn settled(up_dir: &Path, queues: &[&str]) -> JournalReading {
        let read_all = || {
            let mut sum = JournalReading::default();
            for queue in queues {
                sum.add(&JournalReading::read(
                    &StateDir::at(up_dir.to_owned()).shard_dir(queue),
                ));
            }
            sum
        };
        let mut last = read_all();
        for _ in 0..JOURNAL_SETTLE_READS_MAX {
            tokio::time::sleep(JOURNAL_SETTLE_WAIT).await;
            let now = read_all();
            if now == last {
                break;
            }
            last = now;
        }
        last
    }

    fn add(&mut self, other: &JournalReading) {
        self.commits += other.commits;
        self.writes += other.writes;
        for (&bound, &n) in &other.fsync_buckets {
            *self.fsync_buckets.entry(bound).or_default() += n;
        }
    }

    /// What happened between `before` and this reading.
    pub fn minus(&self, before: &JournalReading) -> JournalReading {
        JournalReading {
            commits: self.commits.saturating_sub(before.commits),
            writes: self.writes.saturating_sub(before.writes),
            fsync_buckets: self
                .fsync_buckets
                .iter()
                .map(|(&b, &n)| {
                    (
                        b,
                        n.saturating_sub(before.fsync_buckets.get(&b).copied().unwrap_or(0)),
                    )
                })
                .filter(|&(_, n)| n > 0)
                .collect(),
        }
    }

    /// The `q` quantile of the commit latencies, µs (a bucket's bound).
    pub fn fsync_quantile(&self, q: f64) -> u64 {
        let buckets: Vec<(u64, u64)> = self.fsync_buckets.iter().map(|(&b, &n)| (b, n)).collect();
        quantile_of_buckets(&buckets, q)
    }
}

/// How long to wait between two readings of the journal statistics (the shards write
/// them every second).
const JOURNAL_SETTLE_WAIT: Duration = Duration::from_millis(1200);
/// Readings taken at most while waiting for them to stop changing.
const JOURNAL_SETTLE_READS_MAX: usize = 10;

/// Linux reports process times in `/proc` in units of USER_HZ, which is 100 on every
/// architecture Linux exports it for (it is not the kernel's tick rate).
const USER_HZ: u64 = 100;

/// CPU time used so far by this process, and by `up`'s shard and coordinator children, in ms.
#[derive(Default)]
pub struct CpuSample {
    /// This process.
    pub client_ms: u64,
    /// `up`'s shard children.
    pub shards_ms: u64,
    /// `up`'s coordinator child.
    pub coordinator_ms: u64,
    /// `up`'s node agent children (`up --agents`).
    pub agents_ms: u64,
    /// The children the agents reaped: the jobs' supervisors, with their tasks.
    pub agents_children_ms: u64,
}

impl CpuSample {
    /// Best effort: a process that cannot be read counts as zero.
    pub fn take(up_pid: u32) -> CpuSample {
        let mut sample = CpuSample {
            client_ms: cpu_ms("self").unwrap_or(0),
            ..CpuSample::default()
        };
        for child in children_of(up_pid) {
            let used = cpu_ms(&child.pid).unwrap_or(0);
            match child.args.get(1).map(String::as_str) {
                Some("shard") => sample.shards_ms += used,
                Some("coordinator") => sample.coordinator_ms += used,
                Some("node") => {
                    sample.agents_ms += used;
                    sample.agents_children_ms += children_cpu_ms(&child.pid).unwrap_or(0);
                }
                _ => {}
            }
        }
        sample
    }

    /// The CPU time used between `before` and this sample.
    pub fn minus(&self, before: &CpuSample) -> CpuSample {
        CpuSample {
            client_ms: self.client_ms.saturating_sub(before.client_ms),
            shards_ms: self.shards_ms.saturating_sub(before.shards_ms),
            coordinator_ms: self.coordinator_ms.saturating_sub(before.coordinator_ms),
            agents_ms: self.agents_ms.saturating_sub(before.agents_ms),
            agents_children_ms: self
                .agents_children_ms
                .saturating_sub(before.agents_children_ms),
        }
    }

    /// All of it.
    pub fn total_ms(&self) -> u64 {
        self.client_ms
            + self.shards_ms
            + self.coordinator_ms
            + self.agents_ms
            + self.agents_children_ms
    }
}

/// A direct child of a process, as `/proc` shows it.
pub struct Child {
    /// Its pid, as `/proc` names it.
    pub pid: String,
    /// Its command line.
    pub args: Vec<String>,
}

/// The direct children of `parent` (`up`'s coordinator, shards and agents), best effort: a
/// process that cannot be read is left out.
pub fn children_of(parent: u32) -> Vec<Child> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|pid| pid.parse::<u32>().is_ok() && parent_of(pid) == Some(parent))
        .map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args = cmdline
                .split(|&b| b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            Child { pid, args }
        })
        .collect()
}

/// The fields of `/proc/PID/stat` after the command name (which may hold spaces).
fn stat_fields(pid: &str) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

fn parent_of(pid: &str) -> Option<u32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

/// User + system CPU time of a process, in ms (`stat` fields 14 and 15).
fn cpu_ms(pid: &str) -> Option<u64> {
    stat_sum_ms(pid, 11)
}

/// User + system CPU time of the children a process waited for, in ms (`stat` fields 16
/// and 17, `cutime` and `cstime`: theirs and their own waited-for children's).
fn children_cpu_ms(pid: &str) -> Option<u64> {
    stat_sum_ms(pid, 13)
}

/// The sum of two adjacent tick counts of `/proc/PID/stat` from index `at` of
/// [`stat_fields`], in ms.
fn stat_sum_ms(pid: &str, at: usize) -> Option<u64> {
    let fields = stat_fields(pid)?;
    let user: u64 = fields.get(at)?.parse().ok()?;
    let system: u64 = fields.get(at + 1)?.parse().ok()?;
    Some((user + system) * 1000 / USER_HZ)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_readings_subtract_and_give_quantiles() {
        let reading = |commits, buckets: &[(u64, u64)]| JournalReading {
            commits,
            writes: commits * 10,
            fsync_buckets: buckets.iter().copied().collect(),
        };
        let before = reading(10, &[(1000, 10)]);
        let after = reading(110, &[(1000, 10), (2000, 90), (9000, 10)]);
        let phase = after.minus(&before);
        assert_eq!(phase.commits, 100);
        assert_eq!(phase.fsync_buckets.get(&1000), None);
        assert_eq!(phase.fsync_quantile(0.5), 2000);
        assert_eq!(phase.fsync_quantile(0.99), 9000);
        assert_eq!(JournalReading::default().fsync_quantile(0.5), 0);
        let mut sum = phase.clone();
        sum.add(&phase);
        assert_eq!(sum.commits, 200);
    }
}
