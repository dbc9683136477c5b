//! `shardsched-supervisor DIR [PLAN]`: the supervisor of one job on this host, started by a
//! node agent or by a shard's `exec` executor (docs/EXEC.md), never by people. It reads the
//! job's plan from `PLAN` (a root agent's, kept where only root writes) or else
//! `DIR/plan.json`, runs the job's tasks, and writes how they ended to `DIR/status`
//! (`shardsched_process::supervisor`).
//!
//! Its own executable, linking only crates/process, so that starting one per job costs a
//! small program's start rather than the whole scheduler's.

use std::path::PathBuf;
use std::process::ExitCode;

use shardsched_process::plan::default_plan;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(dir), plan, None) = (args.next(), args.next(), args.next()) else {
        eprintln!("usage: shardsched-supervisor DIR [PLAN] (started by a shard or a node agent)");
        return ExitCode::from(2);
    };
    let dir = PathBuf::from(dir);
    let plan = plan.map_or_else(|| default_plan(&dir), PathBuf::from);
    match shardsched_process::supervisor::supervise(&dir, &plan) {
        Ok(end) => {
            eprintln!(
                "shardsched-supervisor: job ended: {} ({}){}",
                end.cause,
                end.status_text(),
                if end.note.is_empty() {
                    String::new()
                } else {
                    format!(": {}", end.note)
                }
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!(
                "shardsched-supervisor: supervising the job in {}: {e}",
                dir.display()
            );
            ExitCode::FAILURE
        }
    }
}
