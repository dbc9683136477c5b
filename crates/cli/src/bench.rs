//! `shardsched bench` (being written).

use anyhow::Result;
use clap::Args;

/// Flags of `shardsched bench`.
#[derive(Args, Debug, Clone)]
pub struct BenchArgs {}

/// Runs `shardsched bench`.
pub fn main(_args: &BenchArgs) -> Result<()> {
    anyhow::bail!("shardsched bench is not available in this build yet")
}
