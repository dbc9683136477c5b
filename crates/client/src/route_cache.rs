//! The routing table a command last got, kept in the client's state directory so that the
//! next `submit` can go straight to its queue's shard: one connection and one mutual-TLS
//! handshake instead of two (the coordinator's for the table, then the shard's).
//!
//! A cached table is only a guess at where the shards are, never trusted for anything else:
//! - it is used only while younger than [`ROUTES_FRESH`] and only for the coordinator it
//!   came from (the address in the state directory, which a restarted coordinator
//!   rewrites);
//! - a shard that does not answer at the cached address, or that refuses the submit for a
//!   reason a fresh table could change, sends the client to the coordinator for a fresh
//!   table before anything is reported ([`crate::submit::submit`]); the queue's own
//!   refusal (denied, invalid, ...) is the answer, as the coordinator's table would lead
//!   to the same shard;
//! - the shard's certificate is checked as always (role shard, named after the queue,
//!   issued by the cluster CA), so a wrong address reaches no one else.
//!
//! Taken back once (8e5c4c6) after some cached submits stalled 20–25 s in a burst, which
//! looked like lost handshake packets; not seen again since the listening endpoints ask
//! for a larger UDP receive buffer
//! ([`SERVER_RECEIVE_BUFFER_BYTES`](shardsched_proto::tls::SERVER_RECEIVE_BUFFER_BYTES);
//! docs/BENCHMARKS.md, "The cache again").
//!
//! What the freshness bound is for: a configuration reload that changes the default queue
//! reaches submits without `-q` within [`ROUTES_FRESH`]. Writes are atomic (a temporary
//! file renamed over the old one) and not fsync'd: a cache lost in a crash is asked again.

use std::io::Read as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use shardsched_proto::msg::RouteTable;

/// The cache's file name, in the client's directory ([`StateDir::client_dir`]).
///
/// [`StateDir::client_dir`]: shardsched_proto::state_dir::StateDir::client_dir
pub const ROUTES_FILE: &str = "routes.json";

/// How long a cached table is used before the coordinator is asked again.
pub const ROUTES_FRESH: Duration = Duration::from_secs(5);

/// Largest cache file read, bytes (a table of hundreds of queues is a few tens of KB).
pub const ROUTES_FILE_BYTES_MAX: u64 = 1 << 20;

/// What the file holds.
#[derive(Debug, Serialize, Deserialize)]
struct Cached {
    /// The coordinator that gave the table.
    coordinator: SocketAddr,
    /// When it gave it, ms since the Unix epoch.
    fetched_ms: u64,
    table: RouteTable,
}

/// A routing-table cache at one path, for one coordinator.
#[derive(Clone, Debug)]
pub struct RouteCache {
    path: PathBuf,
    coordinator: SocketAddr,
}

impl RouteCache {
    /// The cache in `client_dir` for the coordinator at `coordinator`.
    pub fn new(client_dir: &Path, coordinator: SocketAddr) -> RouteCache {
        RouteCache {
            path: client_dir.join(ROUTES_FILE),
            coordinator,
        }
    }

    /// The cached table, if there is one from this coordinator younger than
    /// [`ROUTES_FRESH`] at `now_ms`; anything unreadable is no table.
    pub fn load(&self, now_ms: u64) -> Option<RouteTable> {
        let cached = self.read()?;
        let fresh_ms = u64::try_from(ROUTES_FRESH.as_millis()).unwrap_or(u64::MAX);
        let age_ms = now_ms.checked_sub(cached.fetched_ms)?;
        (cached.coordinator == self.coordinator && age_ms < fresh_ms).then_some(cached.table)
    }

    /// The file's table and its coordinator, whatever their age.
    fn read(&self) -> Option<Cached> {
        let mut text = Vec::new();
        std::fs::File::open(&self.path)
            .ok()?
            .take(ROUTES_FILE_BYTES_MAX + 1)
            .read_to_end(&mut text)
            .ok()?;
        if text.len() as u64 > ROUTES_FILE_BYTES_MAX {
            return None;
        }
        serde_json::from_slice(&text).ok()
    }

    /// The table the file holds for this coordinator, whatever its age (for tests).
    #[cfg(test)]
    pub(crate) fn table_of_any_age(&self) -> Option<RouteTable> {
        self.read()
            .filter(|cached| cached.coordinator == self.coordinator)
            .map(|cached| cached.table)
    }

    /// Keeps `table`, fetched at `now_ms`; a failure only costs the next command a question.
    pub fn store(&self, table: &RouteTable, now_ms: u64) {
        let cached = Cached {
            coordinator: self.coordinator,
            fetched_ms: now_ms,
            table: table.clone(),
        };
        let Ok(bytes) = serde_json::to_vec(&cached) else {
            return;
        };
        // A name of this process's own: parallel commands each rename a whole file.
        let mut tmp = self.path.as_os_str().to_owned();
        tmp.push(format!(".{}.tmp", std::process::id()));
        let tmp = PathBuf::from(tmp);
        if std::fs::write(&tmp, bytes).is_err() || std::fs::rename(&tmp, &self.path).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }

    /// Removes the cached table (the shards it names did not all answer).
    pub fn clear(&self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(label: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("shardsched-routes-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        dir
    }

    fn table() -> RouteTable {
        RouteTable {
            epoch: 7,
            default_queue: Some("batch".into()),
            ..RouteTable::default()
        }
    }

    #[test]
    fn a_table_is_used_while_fresh_and_only_for_its_coordinator() {
        let dir = scratch("fresh");
        let a = RouteCache::new(&dir, "127.0.0.1:7000".parse().expect("addr"));
        let b = RouteCache::new(&dir, "127.0.0.1:7001".parse().expect("addr"));
        assert_eq!(a.load(1_000), None, "nothing cached yet");
        a.store(&table(), 1_000);
        assert_eq!(a.load(1_000), Some(table()));
        assert_eq!(a.load(5_999), Some(table()));
        assert_eq!(a.load(6_000), None, "older than ROUTES_FRESH");
        assert_eq!(a.load(999), None, "fetched in the future: the clock moved");
        assert_eq!(b.load(1_000), None, "another coordinator's table");
        a.clear();
        assert_eq!(a.load(1_000), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_unreadable_or_oversized_file_is_no_table() {
        let dir = scratch("bad");
        let cache = RouteCache::new(&dir, "127.0.0.1:7000".parse().expect("addr"));
        std::fs::write(dir.join(ROUTES_FILE), b"{not json").expect("write");
        assert_eq!(cache.load(1_000), None);
        let big = vec![b' '; usize::try_from(ROUTES_FILE_BYTES_MAX).expect("fits") + 1];
        std::fs::write(dir.join(ROUTES_FILE), big).expect("write");
        assert_eq!(cache.load(1_000), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
