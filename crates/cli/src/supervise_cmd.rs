//! `shardsched supervise DIR` (hidden): runs one `exec` job under supervision. A shard in
//! exec mode starts it for each job, after writing `DIR/launch.json`; people do not (see
//! `shardsched_shard::exec` and docs/EXEC.md).
//!
//! It puts itself in a new session so that it outlives the shard, runs the job's command in
//! its own process group, enforces the time limit, obeys cancel requests, and writes how
//! the job ended to `DIR/status` before exiting. Its own messages go to stderr, which the
//! shard points at `DIR/supervisor.log`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;

/// Flags of `shardsched supervise`.
#[derive(Args, Debug, Clone)]
pub struct SuperviseArgs {
    /// The job's directory (holding launch.json).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// `shardsched supervise`.
pub fn main(args: &SuperviseArgs) -> Result<()> {
    shardsched_telemetry::logs::init(shardsched_telemetry::LogFormat::Text);
    let end = shardsched_shard::exec::supervise(&args.dir)
        .with_context(|| format!("supervising the job in {}", args.dir.display()))?;
    eprintln!(
        "shardsched supervise: job ended: {} ({}){}",
        end.cause,
        end.status_text(),
        if end.note.is_empty() {
            String::new()
        } else {
            format!(": {}", end.note)
        }
    );
    Ok(())
}
