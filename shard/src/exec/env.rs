//! The environment an `exec` job runs with: the shard's own environment, then the
//! jobspec's `attributes.system.environment` (Flux's convention), then these variables,
//! which always win. docs/EXEC.md lists them for users.

use std::path::Path;

use shardsched_proto::array::ArrayElement;
use shardsched_proto::msg::JobId;
use shardsched_resource::encode_hostlist;

use super::rset::RSummary;

/// The job id, in the F58 form `jobs` prints.
pub const JOB_ID: &str = "SHARDSCHED_JOB_ID";
/// The allocated nodes as a hostlist (`node[0-3]`).
pub const JOB_NODELIST: &str = "SHARDSCHED_JOB_NODELIST";
/// The number of allocated nodes.
pub const JOB_NNODES: &str = "SHARDSCHED_JOB_NNODES";
/// The number of allocated cores, over all nodes.
pub const JOB_NCORES: &str = "SHARDSCHED_JOB_NCORES";
/// Cores per node, comma-separated, in nodelist order (`4,4,2`).
pub const JOB_CORES_PER_NODE: &str = "SHARDSCHED_JOB_CORES_PER_NODE";
/// The number of allocated GPUs, over all nodes.
pub const JOB_GPUS: &str = "SHARDSCHED_JOB_GPUS";
/// The queue the job runs in.
pub const QUEUE: &str = "SHARDSCHED_QUEUE";
/// The path of a file holding the job's RFC 20 R (JSON).
pub const JOB_R: &str = "SHARDSCHED_JOB_R";
/// The job's directory (stdout, stderr, status); also its working directory unless the
/// jobspec names one (`attributes.system.cwd`).
pub const JOB_DIR: &str = "SHARDSCHED_JOB_DIR";
/// The job's time limit in seconds (0: none).
pub const JOB_TIME_LIMIT: &str = "SHARDSCHED_JOB_TIME_LIMIT";
/// How many times the job was requeued before this run (Slurm's `SLURM_RESTART_COUNT`).
/// It also tells one run's launch from another's on a node agent.
pub const JOB_RESTART_COUNT: &str = "SHARDSCHED_JOB_RESTART_COUNT";
/// An array's element: the array's id (`ID` of `ID[N]`).
pub const ARRAY_ID: &str = shardsched_proto::msg::agent::ARRAY_ID_VAR;
/// An array's element: its index (`N` of `ID[N]`).
pub const ARRAY_INDEX: &str = shardsched_proto::msg::agent::ARRAY_INDEX_VAR;

/// Everything the `SHARDSCHED_*` variables are made from.
#[derive(Clone, Debug)]
pub struct JobFacts<'a> {
    /// The job.
    pub id: JobId,
    /// Its queue.
    pub queue: &'a str,
    /// What it got.
    pub r: &'a RSummary,
    /// Where its R file is.
    pub r_path: &'a Path,
    /// Its directory.
    pub dir: &'a Path,
    /// Its time limit, ms (0: none).
    pub time_limit_ms: u64,
    /// The array it is an element of.
    pub array: Option<ArrayElement>,
    /// How many times it was requeued before this run.
    pub restarts: usize,
}

/// The `SHARDSCHED_*` variables for a job, name and value.
pub fn job_variables(facts: &JobFacts<'_>) -> Vec<(String, String)> {
    let path = |p: &Path| p.to_string_lossy().into_owned();
    let mut vars = allocation_variables(
        facts.id,
        facts.queue,
        facts.r,
        facts.time_limit_ms,
        facts.array,
        facts.restarts,
    );
    vars.push((JOB_R.to_owned(), path(facts.r_path)));
    vars.push((JOB_DIR.to_owned(), path(facts.dir)));
    vars
}

/// The variables that say what the job got, the same on every node: all of
/// [`job_variables`] but the shard-local paths ([`JOB_R`], [`JOB_DIR`]). What a shard adds to
/// a node agent's launch (the agent sets the job directory of its node).
pub fn allocation_variables(
    id: JobId,
    queue: &str,
    r: &RSummary,
    time_limit_ms: u64,
    array: Option<ArrayElement>,
    restarts: usize,
) -> Vec<(String, String)> {
    let hosts: Vec<&str> = r.nodes.iter().map(|n| n.host.as_str()).collect();
    let per_node: Vec<String> = r.nodes.iter().map(|n| n.cores().to_string()).collect();
    [
        (JOB_ID, id.to_string()),
        (JOB_NODELIST, encode_hostlist(&hosts)),
        (JOB_NNODES, hosts.len().to_string()),
        (JOB_NCORES, r.cores().to_string()),
        (JOB_CORES_PER_NODE, per_node.join(",")),
        (JOB_GPUS, r.gpus().to_string()),
        (QUEUE, queue.to_owned()),
        (JOB_TIME_LIMIT, time_limit_ms.div_ceil(1000).to_string()),
        (JOB_RESTART_COUNT, restarts.to_string()),
    ]
    .into_iter()
    .chain(array.into_iter().flat_map(|e| {
        [
            (ARRAY_ID, e.array.to_string()),
            (ARRAY_INDEX, e.index.to_string()),
        ]
    }))
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::rset::NodeShare;

    #[test]
    fn variables_describe_the_allocation() {
        let r = RSummary {
            nodes: vec![
                NodeShare {
                    host: "node0".into(),
                    core_ids: vec![0, 1, 2, 3],
                    gpu_ids: vec![0],
                },
                NodeShare {
                    host: "node1".into(),
                    core_ids: vec![0, 1],
                    gpu_ids: Vec::new(),
                },
            ],
        };
        let vars = job_variables(&JobFacts {
            id: shardsched_proto::Fluid(123_456_789),
            queue: "batch",
            r: &r,
            r_path: Path::new("/s/jobs/x/R.json"),
            dir: Path::new("/s/jobs/x"),
            time_limit_ms: 1_500,
            array: Some(ArrayElement {
                array: shardsched_proto::Fluid(123_456_000),
                index: 7,
            }),
            restarts: 2,
        });
        let get = |k: &str| {
            vars.iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.as_str())
                .unwrap_or_default()
        };
        assert_eq!(get(JOB_NODELIST), "node[0-1]");
        assert_eq!(get(JOB_NNODES), "2");
        assert_eq!(get(JOB_NCORES), "6");
        assert_eq!(get(JOB_CORES_PER_NODE), "4,2");
        assert_eq!(get(JOB_GPUS), "1");
        assert_eq!(get(QUEUE), "batch");
        assert_eq!(get(JOB_R), "/s/jobs/x/R.json");
        assert_eq!(get(JOB_TIME_LIMIT), "2");
        assert!(get(JOB_ID).starts_with('ƒ'));
        assert_eq!(get(ARRAY_INDEX), "7");
        assert!(get(ARRAY_ID).starts_with('ƒ'));
    }
}
