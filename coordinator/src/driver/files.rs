//! The state directory: the CA, the coordinator's certificate, the durable state and the
//! address file.
//!
//! ```text
//! <state-dir>/ca.pem, ca.key              the cluster CA (created on first start)
//! <state-dir>/coordinator.pem, .key       the coordinator's certificate, issued at every start
//! <state-dir>/journal.redb                the journal (crate::journal): generator ids,
//!                                         queue states, node owners, generations, flags,
//!                                         unfinished moves
//! <state-dir>/address                     the bound socket address, one line
//! ```
//!
//! The address file is replaced atomically (write a temporary file, fsync, rename), so a
//! reader never sees half of one.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use shardsched_proto::identity::COORDINATOR_NAME;
use shardsched_proto::{Ca, Credentials, Role, state_dir};

use super::DriverError;

/// File holding the bound address, written after binding.
pub use shardsched_proto::state_dir::ADDRESS_FILE;
/// Stem of the coordinator's certificate and key files: the name its certificate carries.
pub const CERT_STEM: &str = COORDINATOR_NAME;

/// Label of the CA-derived secret that keys the coordinator's QUIC stateless resets.
const RESET_SECRET_LABEL: &str = "coordinator stateless reset";

/// Loads (or, on first start, creates) the CA, and issues the coordinator's certificate.
/// Also returns the stateless-reset secret: derived from the CA key, so a restarted
/// coordinator resets the shards' connections to its predecessor and they re-register at once.
pub(super) fn credentials(dir: &Path) -> Result<(Credentials, Vec<u8>), DriverError> {
    let (ca, created) = Ca::load_or_create(dir)?;
    if created {
        tracing::info!(dir = %dir.display(), "created the cluster CA");
    }
    let issued = ca.issue(Role::Coordinator, COORDINATOR_NAME)?;
    issued.write(dir, CERT_STEM)?;
    let creds = Credentials::from_pem(ca.cert_pem(), &issued.cert_pem, &issued.key_pem)?;
    Ok((creds, ca.derived_secret(RESET_SECRET_LABEL)))
}

/// Writes `<dir>/address`; returns its path.
pub(super) fn write_address(dir: &Path, addr: SocketAddr) -> Result<PathBuf, DriverError> {
    let path = dir.join(ADDRESS_FILE);
    state_dir::write_atomic(&path, &format!("{addr}\n")).map_err(|error| DriverError::Io {
        path: path.clone(),
        error,
    })?;
    Ok(path)
}
