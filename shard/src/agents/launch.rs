//! From a started job to one [`NodeLaunch`] per allocated node: which tasks run where
//! (Flux's way: the jobspec's slots spread over the nodes, each slot's tasks on its node),
//! what every agent is told of the others, and the variables the shard adds. Pure: no I/O.

use shardsched_jobspec::{Jobspec, Resource, TaskCount};
use shardsched_proto::msg::agent::{JobNode, NodeLaunch, SignedJobspec};

pub use shardsched_shard_core::agents::LaunchFacts;
use shardsched_shard_core::agents::launches_on;

use crate::exec::env::allocation_variables;
use crate::exec::rset::RSummary;
use crate::job::JobRecord;

/// How many tasks run on each of `r`'s nodes, in its node order.
///
/// The jobspec's slots (their count times the counts that enclose them) are dealt to the
/// nodes one at a time, round robin, each node taking as many as its cores hold (a slot's
/// cores, at least one); each slot's tasks run on its node: `per_slot: N` tasks per slot,
/// or a `total` dealt over the slots in the same order. So `-N 4` runs one task per node,
/// `-N 2 -n 4` two per node, and `-n 4` on one node's cores four there. A batch job
/// runs its script once, on its first node.
pub fn tasks_per_node(jobspec: &Jobspec, r: &RSummary) -> Vec<u32> {
    let nodes = r.nodes.len();
    if nodes == 0 {
        return Vec::new();
    }
    if jobspec.attributes.is_batch() {
        let mut tasks = vec![0; nodes];
        tasks[0] = 1;
        return tasks;
    }
    let (slots, cores_per_slot) = slots_of(&jobspec.resources);
    let capacity: Vec<u64> = r
        .nodes
        .iter()
        .map(|n| (n.cores() / cores_per_slot.max(1)).max(1))
        .collect();
    // Slot k goes to node `owner[k]`.
    let mut owner: Vec<usize> = Vec::new();
    let mut held = vec![0u64; nodes];
    let mut node = 0;
    for _ in 0..slots.max(1) {
        let start = node;
        while held[node] >= capacity[node] {
            node = (node + 1) % nodes;
            if node == start {
                break; // every node is full: deal on past the cores
            }
        }
        owner.push(node);
        held[node] += 1;
        node = (node + 1) % nodes;
    }
    let mut tasks = vec![0u64; nodes];
    match jobspec.tasks.first().map(|t| t.count) {
        Some(TaskCount::Total(total)) => {
            let slots = owner.len() as u64;
            for (k, &node) in owner.iter().enumerate() {
                let k = k as u64;
                tasks[node] += total / slots + u64::from(k < total % slots);
            }
        }
        Some(TaskCount::PerSlot(n)) => {
            for &node in &owner {
                tasks[node] += n;
            }
        }
        None => {
            for &node in &owner {
                tasks[node] += 1;
            }
        }
    }
    tasks
        .into_iter()
        .map(|t| u32::try_from(t).unwrap_or(u32::MAX))
        .collect()
}

/// The slots a resource list asks for in all, and the cores one slot holds.
fn slots_of(resources: &[Resource]) -> (u64, u64) {
    fn walk(resources: &[Resource], times: u64, slots: &mut u64, cores: &mut u64) {
        for r in resources {
            let n = times.saturating_mul(r.count.min);
            if r.kind == "slot" {
                *slots = slots.saturating_add(n);
                if *cores == 0 {
                    *cores = cores_in(&r.with, 1);
                }
            } else {
                walk(&r.with, n, slots, cores);
            }
        }
    }
    fn cores_in(resources: &[Resource], times: u64) -> u64 {
        resources
            .iter()
            .map(|r| {
                let n = times.saturating_mul(r.count.min);
                if r.kind == "core" {
                    n
                } else {
                    cores_in(&r.with, n)
                }
            })
            .sum()
    }
    let (mut slots, mut cores) = (0, 0);
    walk(resources, 1, &mut slots, &mut cores);
    (slots, cores)
}

/// The node that runs task `rank` of `job` (as [`node_launches`] lays the tasks out).
pub fn node_of_task(job: &JobRecord, rank: u32) -> Result<String, String> {
    let r = RSummary::parse(job.r_json.as_deref().ok_or("the job has not started")?)?;
    let jobspec =
        shardsched_jobspec::parse_json(&job.jobspec_json).map_err(|e| format!("jobspec: {e}"))?;
    let mut first = 0u32;
    for (share, ntasks) in r.nodes.iter().zip(tasks_per_node(&jobspec, &r)) {
        if rank < first.saturating_add(ntasks) {
            return Ok(share.host.clone());
        }
        first = first.saturating_add(ntasks);
    }
    Err(format!("the job has {first} tasks: no task {rank}"))
}

/// The launch of `job` on each of its nodes, in node-rank order (the R's node order), or
/// why it cannot be launched (no signature, an R that does not read, a node without a
/// known agent or generation).
pub fn node_launches(job: &JobRecord, facts: &LaunchFacts<'_>) -> Result<Vec<NodeLaunch>, String> {
    let signature = job.signature.as_deref().ok_or_else(|| {
        "the job's submit was not signed (node agents run only signed jobs)".to_owned()
    })?;
    let r_json = job
        .r_json
        .as_deref()
        .ok_or_else(|| "the job has no R (it was not allocated)".to_owned())?;
    let r = RSummary::parse(r_json)?;
    let jobspec =
        shardsched_jobspec::parse_json(&job.jobspec_json).map_err(|e| format!("jobspec: {e}"))?;
    let tasks = tasks_per_node(&jobspec, &r);
    let mut nodes = Vec::with_capacity(r.nodes.len());
    let mut first_rank = 0u32;
    for (share, &ntasks) in r.nodes.iter().zip(&tasks) {
        let agent = *facts
            .agents
            .get(&share.host)
            .ok_or_else(|| format!("no agent is known for node {}", share.host))?;
        nodes.push(JobNode {
            node: share.host.clone(),
            agent,
            first_rank,
            ntasks,
            cores: share.core_ids.clone(),
            gpus: share.gpu_ids.clone(),
        });
        first_rank = first_rank.saturating_add(ntasks);
    }
    let env = allocation_variables(
        job.id,
        facts.queue,
        &r,
        job.duration_ms,
        job.array,
        job.restarts(),
    );
    let signed = SignedJobspec::new(&job.jobspec_json, signature);
    launches_on(job, facts, &nodes, &signed, &env, r_json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::rset::NodeShare;
    use shardsched_jobspec::Shorthand;

    fn r(cores: &[u32]) -> RSummary {
        RSummary {
            nodes: cores
                .iter()
                .enumerate()
                .map(|(i, &c)| NodeShare {
                    host: format!("node{i}"),
                    core_ids: (0..c).collect(),
                    gpu_ids: Vec::new(),
                })
                .collect(),
        }
    }

    fn shorthand(nodes: Option<u64>, tasks: Option<u64>, cores: u64) -> Jobspec {
        Shorthand {
            nodes,
            tasks,
            cores_per_task: cores,
            duration: 60,
            command: vec!["true".into()],
            ..Shorthand::default()
        }
        .to_jobspec()
        .expect("jobspec")
    }

    #[test]
    fn tasks_follow_their_slots() {
        // -N 4: one exclusive node each, one task per node, whatever the node's cores.
        assert_eq!(
            tasks_per_node(&shorthand(Some(4), None, 1), &r(&[16, 16, 16, 16])),
            vec![1, 1, 1, 1]
        );
        // -N 2 -n 4: two slots per node.
        assert_eq!(
            tasks_per_node(&shorthand(Some(2), Some(4), 1), &r(&[2, 2])),
            vec![2, 2]
        );
        // -n 4 -c 2 on nodes with 4 and 4 cores: two slots each.
        assert_eq!(
            tasks_per_node(&shorthand(None, Some(4), 2), &r(&[4, 4])),
            vec![2, 2]
        );
        // -n 3 landing 2 + 1.
        assert_eq!(
            tasks_per_node(&shorthand(None, Some(3), 1), &r(&[2, 1])),
            vec![2, 1]
        );
        // A batch job on 3 nodes: its script once, on the first.
        let mut batch = shorthand(Some(3), None, 1);
        batch.attributes.set_batch();
        assert_eq!(tasks_per_node(&batch, &r(&[4, 4, 4])), vec![1, 0, 0]);
    }
}
