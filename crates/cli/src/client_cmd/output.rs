//! `shardsched job output ID [--task N] [--stderr] [--follow]`: what a job's task wrote,
//! read through the job's shard (on the node that ran the task, under node agents).
//! Written to standard output as the task wrote it, byte for byte.

use std::io::Write;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use shardsched_client::{Client, run};
use shardsched_proto::limits::OUTPUT_CHUNK_BYTES_MAX;
use shardsched_proto::msg::JobId;
use shardsched_proto::msg::client_shard::{OutputQuery, Request, Response};

/// How often `--follow` asks for more while the task runs.
pub const FOLLOW_POLL: Duration = Duration::from_millis(250);

/// Flags of `shardsched job output`.
#[derive(Args, Debug, Clone)]
pub struct JobOutputArgs {
    /// The job id: F58 like ƒ2KEkBMqV (or f2KEkBMqV, with an ASCII f), or decimal.
    pub id: JobId,
    /// The task's rank.
    #[arg(long, default_value_t = 0)]
    pub task: u32,
    /// Its standard error instead of its standard output.
    #[arg(long)]
    pub stderr: bool,
    /// Keep printing what the task writes until it ends.
    #[arg(short, long)]
    pub follow: bool,
}

/// `shardsched job output`.
pub fn job_output_main(args: &JobOutputArgs) -> Result<()> {
    run(|client| async move {
        let routes = client.routes().await?;
        let route = Client::route_of(&routes, args.id)?;
        let mut offset = 0u64;
        let stdout = std::io::stdout();
        loop {
            let query = OutputQuery {
                job: args.id,
                task: args.task,
                stderr: args.stderr,
                offset,
                max_bytes: OUTPUT_CHUNK_BYTES_MAX,
            };
            let chunk = match client.ask_shard(route, &Request::Output(query)).await? {
                Response::Output(chunk) => chunk,
                other => bail!("queue {}'s shard answered with {other:?}", route.queue),
            };
            let mut out = stdout.lock();
            out.write_all(&chunk.bytes)
                .and_then(|()| out.flush())
                .context("writing the output")?;
            offset += chunk.bytes.len() as u64;
            let full = chunk.bytes.len() as u64 == u64::from(OUTPUT_CHUNK_BYTES_MAX);
            if chunk.complete || (!args.follow && !full) {
                return Ok(());
            }
            if !full {
                tokio::time::sleep(FOLLOW_POLL).await;
            }
        }
    })
}
