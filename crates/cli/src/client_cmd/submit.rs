//! `shardsched submit`: one job, straight to its queue's shard.
//!
//! The jobspec is built here (from `--jobspec FILE`, YAML or JSON, or from the `-N -n -c -g
//! -t` shorthand) and sent as canonical JSON; the shard parses and judges it again, because
//! the wire trusts no client. The queue is `-q`, else the jobspec's own, else the routing
//! table's default.
//!
//! A submit carries a random idempotency key chosen once per invocation, and rides out a
//! restarting coordinator or shard ([`shardsched_client::submit`]). A job without job
//! dependencies goes to its shard on the routing table a recent command cached
//! ([`shardsched_client::route_cache`]) when there is one: one connection, not two.

use std::path::PathBuf;

use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use shardsched_client::output;
use shardsched_client::submit::{Known, plain, queue_names, submit};
use shardsched_jobspec::{Jobspec, Shorthand};
use shardsched_proto::array::ArraySpec;
use shardsched_proto::msg::JobId;
use shardsched_proto::msg::RouteTable;
use shardsched_proto::msg::client_shard::{self, Submit};

use super::job_options::JobOptions;

/// Flags of `shardsched submit`.
#[derive(Args, Debug, Clone)]
pub struct SubmitArgs {
    /// What the job asks for and how it runs.
    #[command(flatten)]
    pub flags: SubmitFlags,
    /// The command and its arguments, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// The flags `submit` and `batch` share (and a batch script's directives set).
#[derive(Args, Debug, Clone, Default)]
pub struct SubmitFlags {
    /// Queue [default: the jobspec's queue, else the cluster's default queue].
    #[arg(short = 'q', long)]
    pub queue: Option<String>,
    /// Number of nodes (whole nodes unless --tasks is given too).
    #[arg(short = 'N', long, value_parser = clap::value_parser!(u64).range(1..))]
    pub nodes: Option<u64>,
    /// Number of tasks [default: 1, or one per node].
    #[arg(short = 'n', long, value_parser = clap::value_parser!(u64).range(1..))]
    pub tasks: Option<u64>,
    /// Cores per task [default: 1].
    #[arg(short = 'c', long = "cores-per-task", value_parser = clap::value_parser!(u64).range(1..))]
    pub cores_per_task: Option<u64>,
    /// GPUs per task [default: 0].
    #[arg(short = 'g', long = "gpus-per-task")]
    pub gpus_per_task: Option<u64>,
    /// Time limit: minutes, as in Flux and Slurm, or with a unit (90s, 30m, 2h, 1d;
    /// fractions allowed) [default: the queue's].
    #[arg(short = 't', long = "time-limit", value_name = "MIN|DURATION",
          value_parser = crate::duration_arg::time_limit_secs)]
    pub time_limit: Option<u64>,
    /// Whole nodes, even when --tasks would fit in part of them.
    #[arg(short = 'x', long)]
    pub exclusive: bool,
    /// Urgency, 0-31 (Flux's): pending jobs run by urgency, then submit time; 0 (`hold`)
    /// submits the job held; above 16 admins only; 31 (`expedite`) runs it first
    /// [default: 16].
    #[arg(long, value_name = "N|default|hold|expedite", alias = "priority",
          value_parser = super::hold::urgency_arg)]
    pub urgency: Option<u8>,
    /// A job array: one job per index, `ID[N]` (`SHARDSCHED_ARRAY_INDEX` in its
    /// environment), e.g. `1-1000`, `0-15:4`, `1,5,9`; `%N` runs at most N at once
    /// (`1-1000%50`). Prints the array's id `ID`.
    #[arg(long, value_name = "INDICES[%N]")]
    pub array: Option<ArraySpec>,
    /// Requeue the job (back to pending, keeping its place) instead of failing it when a
    /// node it runs on is marked down: sets `attributes.system.requeue`.
    #[arg(long)]
    pub requeue: bool,
    /// Name, output files, node properties and lists, begin time, working directory and
    /// environment.
    #[command(flatten)]
    pub options: JobOptions,
    /// A jobspec file (RFC 14/25, YAML or JSON) instead of the shorthand flags.
    #[arg(long, value_name = "FILE",
          conflicts_with_all = ["nodes", "tasks", "cores_per_task", "gpus_per_task", "exclusive", "command"])]
    pub jobspec: Option<PathBuf>,
}

/// `shardsched submit`.
pub fn main(args: &SubmitArgs) -> Result<()> {
    let jobspec = match &args.flags.jobspec {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading jobspec {}", path.display()))?;
            shardsched_jobspec::parse(&text)
                .with_context(|| format!("jobspec {}", path.display()))?
        }
        None => {
            if args.command.is_empty() {
                bail!(
                    "no command: give the job's command after `--`, e.g. \
                     `shardsched submit -N 1 -t 1m -- sleep 60`"
                );
            }
            args.flags.shorthand(args.command.clone())?
        }
    };
    submit_main(&args.flags, jobspec)
}

/// Submits `jobspec` with `flags` applied and prints its id: `submit` and `batch`.
pub fn submit_main(flags: &SubmitFlags, mut jobspec: Jobspec) -> Result<()> {
    flags.apply(&mut jobspec)?;
    // Dependencies are checked against the coordinator's own table.
    let may_cache = !jobspec
        .attributes
        .job_dependencies()
        .iter()
        .any(|dep| dep.scheme.names_a_job());
    shardsched_client::run_lazily(|client| async move {
        let known = match client.cached_routes().filter(|_| may_cache) {
            Some(table) => Known::Cached(table),
            None => Known::Fresh(client.routes().await?),
        };
        let (Known::Cached(routes) | Known::Fresh(routes)) = &known;
        let queue = choose_queue(flags, &jobspec, routes)?;
        check_dependencies(&client, routes, &jobspec).await?;
        jobspec.attributes.queue = Some(queue.clone());
        let request = Submit {
            urgency: flags.urgency,
            array: flags.array.clone(),
            ..plain(jobspec.to_json().to_string())
        };
        let (id, _duplicate) = submit(&client, Some(known), &queue, request).await?;
        output::emit(&format!("{id}\n"))
    })
}

impl SubmitFlags {
    /// The jobspec of the shorthand flags (`-N -n -c -g -x`) running `command`.
    pub fn shorthand(&self, command: Vec<String>) -> Result<Jobspec> {
        Shorthand {
            nodes: self.nodes,
            tasks: self.tasks,
            cores_per_task: self.cores_per_task.unwrap_or(1),
            gpus_per_task: self.gpus_per_task.unwrap_or(0),
            duration: 0,
            exclusive: self.exclusive,
            command,
            queue: None,
        }
        .to_jobspec()
        .context("building the jobspec from the command line")
    }

    /// Sets the time limit, requeue and job options on `jobspec` (its queue is set later,
    /// once the routing table is known).
    pub fn apply(&self, jobspec: &mut Jobspec) -> Result<()> {
        if let Some(seconds) = self.time_limit {
            jobspec.attributes.duration = seconds;
        }
        if self.requeue {
            jobspec
                .attributes
                .system_other
                .insert("requeue".into(), serde_json::Value::Bool(true));
        }
        self.options.apply(jobspec, output::now_ms())
    }

    /// These flags, each given one taking the place of `under`'s (a batch script's
    /// directives: the command line wins, as with `sbatch`); lists add up.
    pub fn over(self, under: SubmitFlags) -> SubmitFlags {
        let options = self.options;
        let base = under.options;
        SubmitFlags {
            queue: self.queue.or(under.queue),
            nodes: self.nodes.or(under.nodes),
            tasks: self.tasks.or(under.tasks),
            cores_per_task: self.cores_per_task.or(under.cores_per_task),
            gpus_per_task: self.gpus_per_task.or(under.gpus_per_task),
            time_limit: self.time_limit.or(under.time_limit),
            exclusive: self.exclusive || under.exclusive,
            urgency: self.urgency.or(under.urgency),
            array: self.array.or(under.array),
            requeue: self.requeue || under.requeue,
            options: JobOptions {
                job_name: options.job_name.or(base.job_name),
                output: options.output.or(base.output),
                error: options.error.or(base.error),
                requires: [base.requires, options.requires].concat(),
                nodelist: options.nodelist.or(base.nodelist),
                exclude: options.exclude.or(base.exclude),
                begin_time: options.begin_time.or(base.begin_time),
                dependency: options.dependency.or(base.dependency),
                dependency_policy: options.dependency_policy.or(base.dependency_policy),
                cwd: options.cwd.or(base.cwd),
                env: [base.env, options.env].concat(),
                env_remove: [base.env_remove, options.env_remove].concat(),
            },
            jobspec: self.jobspec.or(under.jobspec),
        }
    }
}

/// Refuses a dependency on a job no running queue issued, or that its queue does not
/// know, before submitting (one question per dependency: only jobs with dependencies pay
/// it). The shard checks again: this is for a clear message.
async fn check_dependencies(
    client: &shardsched_client::Client,
    routes: &RouteTable,
    jobspec: &Jobspec,
) -> Result<()> {
    for dep in jobspec.attributes.job_dependencies() {
        if !dep.scheme.names_a_job() {
            continue;
        }
        let what = format!("--dependency {}:{}", dep.scheme, dep.value.escape_debug());
        let id: JobId = dep
            .value
            .parse()
            .map_err(|_| anyhow!("{what}: not a job id"))?;
        let route = shardsched_client::Client::route_of(routes, id)
            .with_context(|| format!("{what}: the id names no queue"))?;
        client
            .ask_shard(route, &client_shard::Request::JobInfo { id })
            .await
            .with_context(|| what.clone())?;
    }
    Ok(())
}

/// The queue a job goes to: `-q`, else the jobspec's, else the table's default.
fn choose_queue(flags: &SubmitFlags, jobspec: &Jobspec, routes: &RouteTable) -> Result<String> {
    let queue = flags
        .queue
        .clone()
        .or_else(|| jobspec.attributes.queue.clone())
        .or_else(|| routes.default_queue.clone())
        .ok_or_else(|| {
            anyhow!(
                "no queue given and the cluster has no default queue: use -q ({})",
                queue_names(routes)
            )
        })?;
    Ok(queue)
}
