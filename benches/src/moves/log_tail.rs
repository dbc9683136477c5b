//! A shard's transition log (docs/MOVES.md), read as it grows.

use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use shardsched_shard::driver::transitions::{LogLine, parse_log};

use super::{LOG_POLL, MOVE_TIMEOUT};

/// A transition log read as it grows.
pub struct LogTail {
    path: PathBuf,
    /// Bytes already read.
    offset: u64,
    /// Lines read since the last [`LogTail::skip_to_end`].
    seen: Vec<LogLine>,
}

impl LogTail {
    /// The log at `path` (which may not exist yet), read from its start.
    pub fn new(path: PathBuf) -> LogTail {
        LogTail {
            path,
            offset: 0,
            seen: Vec::new(),
        }
    }

    /// The bytes from `from` to the end (none if the file does not exist yet). Only the new
    /// part is read: at 8,192 nodes a log holds megabytes, and reading it whole every
    /// [`LOG_POLL`] took a core from the processes measured.
    fn read_from(&self, from: u64) -> Result<Vec<u8>> {
        let mut file = match std::fs::File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("opening {}", self.path.display())),
        };
        let mut bytes = Vec::new();
        file.seek(SeekFrom::Start(from))
            .and_then(|_| file.read_to_end(&mut bytes))
            .with_context(|| format!("reading {}", self.path.display()))?;
        Ok(bytes)
    }

    /// Forgets what is there now: later reads see only new lines.
    pub fn skip_to_end(&mut self) -> Result<()> {
        self.offset += self.read_from(self.offset)?.len() as u64;
        self.seen.clear();
        Ok(())
    }

    /// Reads the complete lines added since the last read.
    fn poll(&mut self) -> Result<()> {
        let new = self.read_from(self.offset)?;
        let Some(end) = new.iter().rposition(|&b| b == b'\n') else {
            return Ok(());
        };
        let text = std::str::from_utf8(&new[..=end])
            .with_context(|| format!("{} is not UTF-8", self.path.display()))?;
        self.seen
            .extend(parse_log(text).map_err(|e| anyhow::anyhow!("{}: {e}", self.path.display()))?);
        self.offset += end as u64 + 1;
        Ok(())
    }

    /// The lines since the last skip.
    pub fn lines_since_skip(&mut self) -> Result<Vec<LogLine>> {
        self.poll()?;
        Ok(self.seen.clone())
    }

    /// Waits until every node of `nodes` has an `up` line; their times.
    pub async fn wait_up(&mut self, nodes: &[String]) -> Result<BTreeMap<String, u128>> {
        let wanted: HashSet<&str> = nodes.iter().map(String::as_str).collect();
        let deadline = Instant::now() + MOVE_TIMEOUT;
        loop {
            self.poll()?;
            let ups: BTreeMap<String, u128> = self
                .seen
                .iter()
                .filter(|l| l.kind == "up" && wanted.contains(l.node.as_str()))
                .map(|l| (l.node.clone(), l.at_ns))
                .collect();
            if ups.len() == wanted.len() {
                return Ok(ups);
            }
            if Instant::now() > deadline {
                bail!(
                    "{} of {} nodes up in {} after {} s",
                    ups.len(),
                    wanted.len(),
                    self.path.display(),
                    MOVE_TIMEOUT.as_secs()
                );
            }
            tokio::time::sleep(LOG_POLL).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_tail_reads_only_new_complete_lines() {
        let dir = std::env::temp_dir().join(format!("bench-moves-tail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join(shardsched_proto::state_dir::TRANSITIONS_FILE);
        std::fs::write(&path, "1 right node0 up 1 assignment\n").expect("write");
        let mut tail = LogTail::new(path.clone());
        tail.skip_to_end().expect("skip");
        std::fs::write(
            &path,
            "1 right node0 up 1 assignment\n2 right node1 up 2 acquire\n3 right no",
        )
        .expect("write");
        let lines = tail.lines_since_skip().expect("read");
        assert_eq!(lines.len(), 1);
        assert_eq!((lines[0].node.as_str(), lines[0].at_ns), ("node1", 2));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
