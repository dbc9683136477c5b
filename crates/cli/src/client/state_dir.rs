//! Where a running system is: the state directory `up` lays out and every command reads
//! (its layout is in the [client module documentation](super)).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use shardsched_proto::Credentials;

/// Environment variable naming the client directory.
pub const DIR_ENV: &str = "SHARDSCHED_DIR";

/// The directory layout shared by `up` and every client command.
#[derive(Clone, Debug)]
pub struct StateDir {
    root: PathBuf,
}

impl StateDir {
    /// The directory named by `SHARDSCHED_DIR`, else [`StateDir::default_root`].
    pub fn from_env() -> Result<StateDir> {
        match std::env::var_os(DIR_ENV) {
            Some(dir) if !dir.is_empty() => Ok(StateDir::at(PathBuf::from(dir))),
            _ => Ok(StateDir::at(StateDir::default_root()?)),
        }
    }

    /// `dir` if given, else [`StateDir::from_env`].
    pub fn given_or_env(dir: Option<&Path>) -> Result<StateDir> {
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
    pub fn default_root() -> Result<PathBuf> {
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
            _ => bail!(
                "neither {DIR_ENV}, XDG_STATE_HOME nor HOME is set: set {DIR_ENV} to the \
                 directory `shardsched up` uses"
            ),
        }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The coordinator's state directory (CA, journal, `address`).
    pub fn coordinator_dir(&self) -> PathBuf {
        self.root.join("coordinator")
    }

    /// The file in which the coordinator writes its bound address.
    pub fn address_file(&self) -> PathBuf {
        self.coordinator_dir().join("address")
    }

    /// This user's certificate, key and CA.
    pub fn client_dir(&self) -> PathBuf {
        self.root.join("client")
    }

    /// A shard's state directory.
    pub fn shard_dir(&self, queue: &str) -> PathBuf {
        self.root.join("shards").join(queue)
    }

    /// Where `up` sends its children's output.
    pub fn logs_dir(&self) -> PathBuf {
        self.root.join("logs")
    }

    /// The coordinator's address, from [`StateDir::address_file`].
    pub fn coordinator_address(&self) -> Result<SocketAddr> {
        let path = self.address_file();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
                "no coordinator address in {}: is `shardsched up` running? (set {DIR_ENV} to \
                 the directory it printed)",
                self.root.display()
            ),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let line = text.lines().next().unwrap_or("").trim();
        line.parse().map_err(|_| {
            anyhow!(
                "{} holds {line:?}, not a socket address (ip:port)",
                path.display()
            )
        })
    }

    /// This user's credentials from [`StateDir::client_dir`].
    pub fn credentials(&self) -> Result<Credentials> {
        let dir = self.client_dir();
        for file in ["cert.pem", "key.pem", "ca.pem"] {
            let path = dir.join(file);
            if !path.exists() {
                bail!(
                    "no client certificate in {} ({file} is missing): `shardsched up` issues \
                     one, or an admin can with `shardsched cert issue --out {}`",
                    dir.display(),
                    dir.display()
                );
            }
        }
        Credentials::load(
            &dir.join("ca.pem"),
            &dir.join("cert.pem"),
            &dir.join("key.pem"),
        )
        .with_context(|| format!("loading the client certificate in {}", dir.display()))
    }
}
