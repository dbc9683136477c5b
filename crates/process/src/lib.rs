//! The files and processes of jobs that really run, shared by the shard's `exec` executor
//! and the node agent: writes a reader sees whole or not at all ([`files::write_atomic`]),
//! reads bounded by [`FILE_BYTES_MAX`], and whether a supervisor, a process group or a pid
//! is alive, read from `/proc` (a zombie is not alive).
//!
//! The executors talk to their supervisors through files in a job directory, so that a
//! supervisor outlives the process that started it: these are the helpers of that
//! conversation ([`files`], [`plan`]), and the one supervisor both executors start
//! ([`supervisor`], the `shardsched-supervisor` binary), with the job's cgroups as it uses
//! them ([`cgroups`]); a node agent keeps a few of them started ahead of its launches
//! ([`spare`]).

pub mod cgroups;
pub mod files;
pub mod plan;
pub mod spare;
pub mod supervisor;
pub mod watch;

use std::path::{Path, PathBuf};

/// The largest launch, status or pid file read from a job directory, in bytes (they are a
/// few hundred bytes; anything larger is not ours).
pub const FILE_BYTES_MAX: u64 = 1 << 20;

/// A file could not be read or written, or is not what it should be.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// A file or directory could not be read or written.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// The file is not what it should be.
    #[error("{}: {message}", .path.display())]
    BadFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
}

impl FileError {
    /// An I/O error on `path`.
    pub fn io(path: &Path, source: std::io::Error) -> FileError {
        FileError::Io {
            path: path.to_owned(),
            source,
        }
    }
}
