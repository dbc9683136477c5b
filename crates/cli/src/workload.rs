//! `shardsched workload` (being written).

use anyhow::Result;
use clap::Args;

/// Flags of `shardsched workload`.
#[derive(Args, Debug, Clone)]
pub struct WorkloadArgs {}

/// Runs `shardsched workload`.
pub fn main(_args: &WorkloadArgs) -> Result<()> {
    anyhow::bail!("shardsched workload is not available in this build yet")
}
