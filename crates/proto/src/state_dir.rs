//! Where a running system keeps its files: the one place that names them.
//!
//! `shardsched up` lays out one state directory; the coordinator and each shard are given
//! their part of it (`--state-dir`), and every client command finds the system through it
//! (`SHARDSCHED_DIR`). So the names below are an interface between processes, like the
//! wire: `up` writes what the client reads, the coordinator writes the address `up` and
//! the clients read, and tests and benchmarks read the shards' logs.
//!
//! ```text
//! $SHARDSCHED_DIR/     (default: $XDG_STATE_HOME/shardsched, else ~/.local/state/shardsched)
//!   up.pid             up's own lock, holding its pid                  UP_LOCK_FILE
//!   processes.lock     held shared by up's coordinator and shards      PROCESSES_LOCK_FILE
//!   coordinator/       the coordinator's state directory               COORDINATOR_DIR
//!     ca.pem, ca.key   the cluster CA                                  CA_CERT_FILE, CA_KEY_FILE
//!     journal.redb     its journal                                     JOURNAL_FILE
//!     address          its bound socket address, one line              ADDRESS_FILE
//!     http-address     the status page's URL, one line                 HTTP_ADDRESS_FILE
//!   client/            this user's cert.pem, key.pem, ca.pem           CLIENT_DIR
//!     routes.json      the last routing table a command got (a cache)  (shardsched-client)
//!   shards/<queue>/    a shard's state directory                       SHARDS_DIR
//!     cert.pem         its certificate (and key.pem, ca.pem)           CERT_FILE, KEY_FILE
//!     journal.redb     its journal                                     JOURNAL_FILE
//!     transitions.log  its nodes' up/down, for checkers                TRANSITIONS_FILE
//!     journal-stats.json  its journal's commit statistics, for benches JOURNAL_STATS_FILE
//!     http-address     the URL of its /metrics, one line              HTTP_ADDRESS_FILE
//!   nodes/<node>/      a node agent's state directory (`up --agents`)   NODES_DIR
//!     address          where it listens, one line                      ADDRESS_FILE
//!   logs/<process>.log each child's output                             LOGS_DIR
//! ```
//!
//! [`StateDir`] joins these names onto a root, and reads what a client needs from it (the
//! coordinator's address, the client's credentials).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

pub use crate::ca::{CA_CERT_FILE, CA_KEY_FILE};
use crate::error::TlsError;
use crate::tls::Credentials;

/// Environment variable naming the state directory.
pub const DIR_ENV: &str = "SHARDSCHED_DIR";
/// `up`'s exclusive lock, holding its pid.
pub const UP_LOCK_FILE: &str = "up.pid";
/// The lock `up`'s coordinator and shards hold shared.
pub const PROCESSES_LOCK_FILE: &str = "processes.lock";
/// The coordinator's state directory.
pub const COORDINATOR_DIR: &str = "coordinator";
/// The file in which the coordinator writes its bound address, in its state directory.
pub const ADDRESS_FILE: &str = "address";
/// The file in which the coordinator writes its status page's URL (and a shard the URL it
/// serves `/metrics` at), in its state directory.
pub const HTTP_ADDRESS_FILE: &str = "http-address";
/// The local user's certificate, key and CA.
pub const CLIENT_DIR: &str = "client";
/// The directory holding one state directory per queue's shard.
pub const SHARDS_DIR: &str = "shards";
/// Where `up` sends its children's output.
pub const LOGS_DIR: &str = "logs";
/// The node agents' state directories, under `up --agents`.
pub const NODES_DIR: &str = "nodes";
/// A process's journal, in its state directory.
pub const JOURNAL_FILE: &str = "journal.redb";
/// A certificate (a shard's, a client's), in its directory.
pub const CERT_FILE: &str = "cert.pem";
/// The private key of [`CERT_FILE`].
pub const KEY_FILE: &str = "key.pem";
/// A shard's log of its nodes' transitions (up, down, released), in its state directory.
pub const TRANSITIONS_FILE: &str = "transitions.log";
/// A shard's journal commit statistics, in its state directory.
pub const JOURNAL_STATS_FILE: &str = "journal-stats.json";

/// What reading a state directory can fail on, said so that a person knows what to do.
#[derive(Debug, thiserror::Error)]
pub enum StateDirError {
    /// No variable says where the state directory is.
    #[error(
        "neither {DIR_ENV}, XDG_STATE_HOME nor HOME is set: set {DIR_ENV} to the directory \
         `shardsched up` uses"
    )]
    NoRoot,
    /// The coordinator has not written its address (the system is not up).
    #[error(
        "no coordinator address in {}: is `shardsched up` running? (set {DIR_ENV} to the \
         directory it printed)",
        root.display()
    )]
    NoAddress { root: PathBuf },
    /// A file could not be read.
    #[error("reading {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        error: std::io::Error,
    },
    /// The address file holds something else.
    #[error("{} holds {line:?}, not a socket address (ip:port)", path.display())]
    BadAddress { path: PathBuf, line: String },
    /// A credential file is missing.
    #[error(
        "no client certificate in {} ({file} is missing): `shardsched up` issues one, or an \
         admin can with `shardsched cert issue --out {}`",
        dir.display(),
        dir.display()
    )]
    NoCredentials { dir: PathBuf, file: &'static str },
    /// The credentials are there but do not load.
    #[error("loading the client certificate in {}", dir.display())]
    Credentials {
        dir: PathBuf,
        #[source]
        error: TlsError,
    },
}

/// A state directory: the paths of its parts, and what a client reads from it.
#[derive(Clone, Debug)]
pub struct StateDir {
    root: PathBuf,
}

impl StateDir {
    /// The directory named by `SHARDSCHED_DIR`, else [`StateDir::default_root`].
    pub fn from_env() -> Result<StateDir, StateDirError> {
        match std::env::var_os(DIR_ENV) {
            Some(dir) if !dir.is_empty() => Ok(StateDir::at(PathBuf::from(dir))),
            _ => Ok(StateDir::at(StateDir::default_root()?)),
        }
    }

    /// `dir` if given, else [`StateDir::from_env`].
    pub fn given_or_env(dir: Option<&Path>) -> Result<StateDir, StateDirError> {
        match dir {
            Some(dir) => Ok(StateDir::at(dir.to_owned())),
            None => StateDir::from_env(),
        }
    }

    /// A layout rooted at `root`.
    pub fn at(root: PathBuf) -> StateDir {
        StateDir { root }
    }

    /// `$XDG_STATE_HOME/shardsched` when `XDG_STATE_HOME` is an absolute path (the XDG base
    /// directory rules ignore relative ones), else `$HOME/.local/state/shardsched`: state that
    /// outlives a run (the CA, journals) but is not configuration.
    pub fn default_root() -> Result<PathBuf, StateDirError> {
        if let Some(state) = std::env::var_os("XDG_STATE_HOME") {
            let state = PathBuf::from(state);
            if state.is_absolute() {
                return Ok(state.join("shardsched"));
            }
        }
        match std::env::var_os("HOME") {
            Some(home) if !home.is_empty() => {
                Ok(PathBuf::from(home).join(".local/state/shardsched"))
            }
            _ => Err(StateDirError::NoRoot),
        }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `up`'s lock ([`UP_LOCK_FILE`]).
    pub fn up_lock_file(&self) -> PathBuf {
        self.root.join(UP_LOCK_FILE)
    }

    /// The lock of `up`'s children ([`PROCESSES_LOCK_FILE`]).
    pub fn processes_lock_file(&self) -> PathBuf {
        self.root.join(PROCESSES_LOCK_FILE)
    }

    /// The coordinator's state directory (CA, journal, `address`).
    pub fn coordinator_dir(&self) -> PathBuf {
        self.root.join(COORDINATOR_DIR)
    }

    /// The file in which the coordinator writes its bound address.
    pub fn address_file(&self) -> PathBuf {
        self.coordinator_dir().join(ADDRESS_FILE)
    }

    /// The file in which the coordinator writes its status page's URL.
    pub fn http_address_file(&self) -> PathBuf {
        self.coordinator_dir().join(HTTP_ADDRESS_FILE)
    }

    /// This user's certificate, key and CA.
    pub fn client_dir(&self) -> PathBuf {
        self.root.join(CLIENT_DIR)
    }

    /// The directory of the node agents' state directories (`up --agents`).
    pub fn nodes_dir(&self) -> PathBuf {
        self.root.join(NODES_DIR)
    }

    /// A node agent's state directory (`up --agents`).
    pub fn node_dir(&self, node: &str) -> PathBuf {
        self.nodes_dir().join(node)
    }

    /// The directory of the shards' state directories.
    pub fn shards_dir(&self) -> PathBuf {
        self.root.join(SHARDS_DIR)
    }

    /// A shard's state directory.
    pub fn shard_dir(&self, queue: &str) -> PathBuf {
        self.shards_dir().join(queue)
    }

    /// Where `up` sends its children's output.
    pub fn logs_dir(&self) -> PathBuf {
        self.root.join(LOGS_DIR)
    }

    /// The coordinator's address, from [`StateDir::address_file`].
    pub fn coordinator_address(&self) -> Result<SocketAddr, StateDirError> {
        let path = self.address_file();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StateDirError::NoAddress {
                    root: self.root.clone(),
                });
            }
            Err(error) => return Err(StateDirError::Read { path, error }),
        };
        let line = text.lines().next().unwrap_or("").trim();
        line.parse().map_err(|_| StateDirError::BadAddress {
            line: line.to_owned(),
            path,
        })
    }

    /// The coordinator's HTTP address (status page, `/metrics`), from
    /// [`StateDir::http_address_file`].
    pub fn http_address(&self) -> Result<SocketAddr, StateDirError> {
        read_http_address(&self.http_address_file())
    }

    /// This user's credentials from [`StateDir::client_dir`].
    pub fn credentials(&self) -> Result<Credentials, StateDirError> {
        let dir = self.client_dir();
        for file in [CERT_FILE, KEY_FILE, CA_CERT_FILE] {
            if !dir.join(file).exists() {
                return Err(StateDirError::NoCredentials { dir, file });
            }
        }
        Credentials::load(
            &dir.join(CA_CERT_FILE),
            &dir.join(CERT_FILE),
            &dir.join(KEY_FILE),
        )
        .map_err(|error| StateDirError::Credentials { dir, error })
    }
}

/// The address in an [`HTTP_ADDRESS_FILE`] (which holds a URL, `http://ADDR/`).
pub fn read_http_address(path: &Path) -> Result<SocketAddr, StateDirError> {
    let text = std::fs::read_to_string(path).map_err(|error| StateDirError::Read {
        path: path.to_owned(),
        error,
    })?;
    let line = text.lines().next().unwrap_or("").trim();
    line.strip_prefix("http://")
        .map(|rest| rest.trim_end_matches('/'))
        .and_then(|addr| addr.parse().ok())
        .ok_or_else(|| StateDirError::BadAddress {
            path: path.to_owned(),
            line: line.to_owned(),
        })
}

/// Replaces `path` with `text` atomically (a temporary file beside it, fsync, rename, then
/// the directory synced where it can be), so that a reader never sees half of it.
pub fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, path)?;
    if let Some(parent) = path.parent() {
        // Make the rename itself durable; not every platform can open a directory.
        if let Ok(dir) = std::fs::File::open(parent) {
            let _ = dir.sync_all();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_named_under_the_root() {
        let dir = StateDir::at(PathBuf::from("/s"));
        assert_eq!(dir.address_file(), Path::new("/s/coordinator/address"));
        assert_eq!(
            dir.http_address_file(),
            Path::new("/s/coordinator/http-address")
        );
        assert_eq!(dir.shard_dir("batch"), Path::new("/s/shards/batch"));
        assert_eq!(dir.client_dir(), Path::new("/s/client"));
        assert_eq!(dir.logs_dir(), Path::new("/s/logs"));
        assert_eq!(dir.up_lock_file(), Path::new("/s/up.pid"));
        assert_eq!(dir.processes_lock_file(), Path::new("/s/processes.lock"));
    }

    #[test]
    fn a_missing_or_bad_address_says_what_to_do() {
        let root = std::env::temp_dir().join(format!("shardsched-statedir-{}", std::process::id()));
        let dir = StateDir::at(root.clone());
        let e = dir.coordinator_address().expect_err("no file");
        assert!(e.to_string().contains("is `shardsched up` running?"), "{e}");
        std::fs::create_dir_all(dir.coordinator_dir()).expect("mkdir");
        std::fs::write(dir.address_file(), "nonsense\n").expect("write");
        let e = dir.coordinator_address().expect_err("bad line");
        assert!(e.to_string().contains("not a socket address"), "{e}");
        std::fs::write(dir.http_address_file(), "http://127.0.0.1:8/\n").expect("write");
        assert_eq!(
            dir.http_address().expect("parses"),
            "127.0.0.1:8".parse::<SocketAddr>().expect("address")
        );
        std::fs::write(dir.address_file(), "127.0.0.1:7\n").expect("write");
        assert_eq!(
            dir.coordinator_address().expect("parses"),
            "127.0.0.1:7".parse().expect("addr")
        );
        let e = dir.credentials().expect_err("no client dir");
        assert!(e.to_string().contains("cert.pem is missing"), "{e}");
        std::fs::remove_dir_all(&root).expect("clean up");
    }
}
