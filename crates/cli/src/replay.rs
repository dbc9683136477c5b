//! `shardsched replay` (being written).

use anyhow::Result;
use clap::Args;

/// Flags of `shardsched replay`.
#[derive(Args, Debug, Clone)]
pub struct ReplayArgs {}

/// Runs `shardsched replay`.
pub fn main(_args: &ReplayArgs) -> Result<()> {
    anyhow::bail!("shardsched replay is not available in this build yet")
}
