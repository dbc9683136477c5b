//! `shardsched-supervisor DIR [PLAN]`: the supervisor of one job on this host, started by a
//! node agent or by a shard's `exec` executor (docs/EXEC.md), never by people. It reads the
//! job's plan from `PLAN` (a root agent's, kept where only root writes) or else
//! `DIR/plan.json`, runs the job's tasks, and writes how they ended to `DIR/status`
//! (`shardsched_process::supervisor`).
//!
//! `shardsched-supervisor --spare`: a node agent's spare, started before its job is known;
//! it waits on its standard input for the job's directory and plan, then does the same
//! (`shardsched_process::spare`). Its input ending first (the agent gone) ends it, having
//! run nothing.
//!
//! Its own executable, linking only crates/process, so that starting one per job costs a
//! small program's start rather than the whole scheduler's.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use shardsched_process::plan::default_plan;
use shardsched_process::spare::{self, SPARE_FLAG};

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(dir), plan, None) = (args.next(), args.next(), args.next()) else {
        eprintln!(
            "usage: shardsched-supervisor DIR [PLAN] | --spare (started by a shard or a node agent)"
        );
        return ExitCode::from(2);
    };
    if dir == SPARE_FLAG && plan.is_none() {
        return spare_main();
    }
    let dir = PathBuf::from(dir);
    let plan = plan.map_or_else(|| default_plan(&dir), PathBuf::from);
    supervise(&dir, &plan)
}

/// A spare: waits for its job, then supervises it; exits at once when its agent is gone.
fn spare_main() -> ExitCode {
    if let Err(e) = spare::announce_ready(std::io::stdout().lock()) {
        eprintln!("shardsched-supervisor --spare: cannot say it is ready ({e}); no job run");
        return ExitCode::from(2);
    }
    let handoff = match spare::wait_for_handoff(std::io::stdin().lock()) {
        Ok(Some(handoff)) => handoff,
        Ok(None) => return ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shardsched-supervisor --spare: {e}; no job run");
            return ExitCode::from(2);
        }
    };
    if let Err(why) = spare::take_on(&handoff) {
        eprintln!("shardsched-supervisor --spare: {why}");
        return match spare::refuse(&handoff, why) {
            Ok(_) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("shardsched-supervisor --spare: {e}");
                ExitCode::FAILURE
            }
        };
    }
    supervise(&handoff.dir, &handoff.plan)
}

fn supervise(dir: &Path, plan: &Path) -> ExitCode {
    match shardsched_process::supervisor::supervise(dir, plan) {
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
