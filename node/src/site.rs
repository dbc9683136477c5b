//! The site's scripts (Slurm's Prolog, Epilog, HealthCheckProgram): a job's prolog before
//! its tasks, its epilog once its processes are gone, and the node's health check, each run
//! as the agent's user with the job's and node's facts in its environment, bounded in time.

use std::path::Path;
use std::time::Duration;

use shardsched_proto::msg::JobId;

use crate::executor::ExecSettings;

/// Longest a prolog or epilog may run before it is killed and counts as failed.
pub const SITE_SCRIPT_TIMEOUT: Duration = Duration::from_secs(60);

/// Most bytes of a prolog's or health check's output kept as a reason.
pub const SCRIPT_OUTPUT_BYTES_MAX: usize = 200;

/// Runs the epilog after a job's processes are gone; a failure is logged.
pub async fn epilog(settings: &ExecSettings, job: JobId, node: &str) {
    if let Some(epilog) = &settings.epilog
        && let Err(why) = run_site_script(epilog, &job_env(&job.to_string(), "", node)).await
    {
        tracing::warn!(job = %job, %why, "the epilog failed");
    }
}

/// A job's prolog's and epilog's variables.
pub(crate) fn job_env<'a>(
    job: &'a str,
    user: &'a str,
    node: &'a str,
) -> [(&'static str, &'a str); 3] {
    [
        ("SHARDSCHED_JOB_ID", job),
        ("SHARDSCHED_JOB_USER", user),
        ("SHARDSCHED_NODE", node),
    ]
}

/// Runs the site's health check on `node`: `Err` with why the node is unfit.
pub async fn health_check(script: &Path, node: &str) -> Result<(), String> {
    run_site_script(script, &[("SHARDSCHED_NODE", node)])
        .await
        .map_err(|why| format!("health check failed: {why}"))
}

/// Runs a site script (prolog, epilog, health check) with `env` (the node, and the job's
/// facts for a job's scripts); `Err` with its status and the start of its output when it
/// fails.
pub async fn run_site_script(script: &Path, env: &[(&str, &str)]) -> Result<(), String> {
    let mut command = tokio::process::Command::new(script);
    command
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let output = tokio::time::timeout(SITE_SCRIPT_TIMEOUT, command.output())
        .await
        .map_err(|_| format!("{} ran past {SITE_SCRIPT_TIMEOUT:?}", script.display()))?
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if output.status.success() {
        return Ok(());
    }
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    let text: String = text.trim().chars().take(SCRIPT_OUTPUT_BYTES_MAX).collect();
    Err(format!("{} ({}): {text}", script.display(), output.status))
}
