//! From a shard's launch to what a job's supervisor runs on this node ([`Plan`],
//! `plans/<job>.json` in the state directory: see `layout`): the user from the verified signature, the command, working directory and
//! environment from the signed jobspec, each task's rank and variables.

use std::path::{Path, PathBuf};

use shardsched_jobspec::{Execution, Stream, TemplateValues, job_name};
use shardsched_proto::limits::JOB_NAME_BYTES_MAX;
use shardsched_proto::msg::agent::{ARRAY_ID_VAR, ARRAY_INDEX_VAR, NodeLaunch};

use crate::cgroup::JobCgroups;
use crate::layout::HOSTFILE;
use crate::user::RunAs;

pub use shardsched_process::plan::{Plan, TASK_RANK};

/// This node's name.
pub const NODE: &str = "SHARDSCHED_NODE";
/// How many tasks the job runs.
pub const NTASKS: &str = "SHARDSCHED_NTASKS";
/// This node's index among the job's nodes.
pub const NODE_RANK: &str = "SHARDSCHED_NODE_RANK";
/// The job's hostfile (`node:ntasks` per line).
pub const HOSTFILE_VAR: &str = "SHARDSCHED_HOSTFILE";
/// The job's directory on this node.
pub const JOB_DIR: &str = "SHARDSCHED_JOB_DIR";
/// The PATH a job gets when its jobspec sets none.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The plan of `launch` (already verified) on this node, for `run_as`, in `dir`.
pub fn prepare(
    launch: &NodeLaunch,
    run_as: Option<RunAs>,
    dir: &Path,
    cgroups: JobCgroups,
) -> Result<Plan, String> {
    let jobspec = shardsched_jobspec::parse_json(&launch.signed.jobspec_json)
        .map_err(|e| format!("jobspec: {e}"))?;
    let run = Execution::of(&jobspec)?;
    let me = launch
        .this_node()
        .ok_or_else(|| "the launch does not name this node".to_owned())?;
    let size = u32::try_from(launch.ntasks()).map_err(|_| "too many tasks".to_owned())?;
    let home = run_as.as_ref().map(|u| u.home.clone());
    let mut env: Vec<(String, String)> = Vec::new();
    if let Some(user) = &run_as {
        env.extend([
            ("USER".to_owned(), user.name.clone()),
            ("LOGNAME".to_owned(), user.name.clone()),
            ("HOME".to_owned(), user.home.clone()),
            ("SHELL".to_owned(), user.shell.clone()),
        ]);
    }
    env.push(("PATH".to_owned(), DEFAULT_PATH.to_owned()));
    env.extend(run.environment.iter().cloned());
    env.extend(launch.env.iter().cloned());
    env.extend([
        (NODE.to_owned(), me.node.clone()),
        (NTASKS.to_owned(), size.to_string()),
        (NODE_RANK.to_owned(), launch.node_rank.to_string()),
        (
            HOSTFILE_VAR.to_owned(),
            dir.join(HOSTFILE).to_string_lossy().into_owned(),
        ),
        (JOB_DIR.to_owned(), dir.to_string_lossy().into_owned()),
    ]);
    if !me.gpus.is_empty() {
        let gpus: Vec<String> = me.gpus.iter().map(u32::to_string).collect();
        env.push(("CUDA_VISIBLE_DEVICES".to_owned(), gpus.join(",")));
    }
    let cwd = run
        .cwd
        .clone()
        .or(home.map(PathBuf::from))
        .unwrap_or_else(|| dir.to_owned());
    // Output templates are filled as the shard's exec executor fills them.
    let id = launch.job.to_string();
    let name = job_name(&jobspec, JOB_NAME_BYTES_MAX);
    let values = TemplateValues {
        id: &id,
        name: &name,
        array_id: launch.env_value(ARRAY_ID_VAR).unwrap_or(&id),
        array_index: launch.env_value(ARRAY_INDEX_VAR).unwrap_or("0"),
    };
    Ok(Plan {
        job: id.clone(),
        run_as,
        command: run.command_in(dir),
        stdout: run.output_path(Stream::Stdout, &cwd, &values),
        stderr: run.output_path(Stream::Stderr, &cwd, &values),
        truncate_output: false,
        files: run.files,
        cwd,
        inherit_env: false,
        env,
        ranks: (me.first_rank..me.first_rank.saturating_add(me.ntasks)).collect(),
        size,
        nnodes: launch.nodes.len(),
        time_limit_ms: launch.time_limit_ms,
        kill_grace_ms: launch.kill_grace_ms,
        cgroups,
        lease: None,
    })
}

/// The hostfile of a launch: `node:ntasks` per node, in node-rank order (MPICH's format).
pub fn hostfile(launch: &NodeLaunch) -> String {
    launch
        .nodes
        .iter()
        .map(|n| format!("{}:{}\n", n.node, n.ntasks))
        .collect()
}
