//! Nodes and queues as `resource list` and `queue list` show them, as tables and as JSON
//! (an interface, built field by field like [`super::job_view`]'s).

use serde_json::{Value, json};
use shardsched_client::output::Table;
use shardsched_proto::msg::{NodeState, NodeStatus, QueueStatus};
use shardsched_resource::encode_hostlist;

/// One node as `resource list --json` prints it.
pub fn node_json(node: &NodeStatus) -> Value {
    json!({
        "name": node.name,
        "queue": node.queue,
        "state": node_state(node),
        "usage": usage_word(node),
        "generation": node.generation.0,
        "jobs_running": node.jobs_running,
        "cores": node.usage.cores,
        "cores_free": node.usage.cores_free,
        "gpus": node.usage.gpus,
        "gpus_free": node.usage.gpus_free,
        "reason": node.reason,
    })
}

/// How much of an up node running jobs hold, in sinfo's words: `idle`, `mix` (some of
/// its cores) or `allocated` (all of them); `None` for a node that is not up.
pub fn usage_word(node: &NodeStatus) -> Option<&'static str> {
    if node.state != NodeState::Up {
        return None;
    }
    Some(if node.usage.is_mixed() {
        "mix"
    } else if node.usage.is_used() || node.jobs_running > 0 {
        "allocated"
    } else {
        "idle"
    })
}

/// A node's state for a table: an up node's usage (`idle`, `mix`, `allocated`), else its
/// state, with the admin's reason.
fn table_state(node: &NodeStatus) -> String {
    let state = usage_word(node).unwrap_or_else(|| node_state(node));
    match &node.reason {
        Some(reason) => format!("{state} ({reason})"),
        None => state.to_owned(),
    }
}

/// `free/total` of the nodes' cores and of their GPUs.
fn free_of(nodes: &[&NodeStatus]) -> (String, String) {
    let sum = |f: fn(&NodeStatus) -> u32| nodes.iter().map(|n| u64::from(f(n))).sum::<u64>();
    (
        format!("{}/{}", sum(|n| n.usage.cores_free), sum(|n| n.usage.cores)),
        format!("{}/{}", sum(|n| n.usage.gpus_free), sum(|n| n.usage.gpus)),
    )
}

/// A node's state as flux-core words it: a drained node still running jobs is `draining`
/// until they end.
pub fn node_state(node: &NodeStatus) -> &'static str {
    if node.state == NodeState::Drained && node.jobs_running > 0 {
        "draining"
    } else {
        node.state.as_str()
    }
}

/// `resource list` for people: nodes grouped by owner and state, as `flux resource list`
/// and `sinfo` group them (an up node is `idle`, `mix` or `allocated`), with how many of
/// them run jobs and their free cores and GPUs; `long`: one row per node.
pub fn resources_table(nodes: &[NodeStatus], long: bool) -> String {
    if long {
        let mut table = Table::new(&["NODE", "QUEUE", "STATE", "JOBS", "CORES", "GPUS"]);
        for node in nodes {
            let (cores, gpus) = free_of(&[node]);
            table.row(vec![
                node.name.clone(),
                node.queue.clone().unwrap_or_else(|| "-".to_owned()),
                table_state(node),
                node.jobs_running.to_string(),
                cores,
                gpus,
            ]);
        }
        return table.render();
    }
    // Groups in first-seen order, which is the coordinator's (graph) order. Nodes down for
    // different reasons are different groups.
    let mut groups: Vec<(String, String, Vec<&NodeStatus>)> = Vec::new();
    for node in nodes {
        let state = table_state(node);
        let queue = node.queue.clone().unwrap_or_else(|| "-".to_owned());
        match groups
            .iter_mut()
            .find(|(s, q, _)| *s == state && *q == queue)
        {
            Some((_, _, members)) => members.push(node),
            None => groups.push((state, queue, vec![node])),
        }
    }
    groups.sort_by(|a, b| a.1.cmp(&b.1));
    let mut table = Table::new(&[
        "QUEUE", "STATE", "NNODES", "BUSY", "CORES", "GPUS", "NODELIST",
    ]);
    for (state, queue, members) in groups {
        let names: Vec<&str> = members.iter().map(|n| n.name.as_str()).collect();
        let busy = members.iter().filter(|n| n.jobs_running > 0).count();
        let (cores, gpus) = free_of(&members);
        table.row(vec![
            queue,
            state,
            members.len().to_string(),
            busy.to_string(),
            cores,
            gpus,
            encode_hostlist(&names),
        ]);
    }
    table.render()
}

/// One queue as `queue list --json` prints it.
pub fn queue_json(queue: &QueueStatus, default: bool) -> Value {
    json!({
        "name": queue.name,
        "default": default,
        "enabled": queue.enabled,
        "started": queue.started,
        "queue_policy": queue.queue_policy,
        "match_policy": queue.match_policy,
        "nodes_defined": queue.nodes_defined,
        "nodes_owned": queue.nodes_owned,
        "nodes_up": queue.nodes_up,
        "jobs_pending": queue.jobs_pending,
        "jobs_running": queue.jobs_running,
        "online": queue.online,
        "definition": queue.definition,
        "owned": queue.owned,
        "reason": queue.reason,
        "pending_reasons": {
            "queued": queue.pending_reasons.queued,
            "resources": queue.pending_reasons.resources,
            "reserved": queue.pending_reasons.reserved,
            "no_reservation": queue.pending_reasons.no_reservation,
            "unavailable": queue.pending_reasons.unavailable,
            "held": queue.pending_reasons.held,
            "begin_time": queue.pending_reasons.begin_time,
            "array_limit": queue.pending_reasons.array_limit,
            "dependency": queue.pending_reasons.dependency,
        },
    })
}

/// `queue list` for people. The default queue is marked with `*`, as `flux queue list` does.
/// `long` adds each queue's definition and owned nodes (hostlists); a REASON column shows
/// why queues were disabled, when any was.
pub fn queues_table(queues: &[QueueStatus], default: Option<&str>, long: bool) -> String {
    let yes_no = |b: bool| if b { "y" } else { "n" }.to_owned();
    let reasons = queues.iter().any(|q| !q.reason.is_empty());
    let mut headers = vec![
        "QUEUE", "EN", "ST", "SHARD", "POLICY", "MATCH", "DEFINED", "OWNED", "UP", "PENDING",
        "RUNNING",
    ];
    if long {
        headers.extend(["DEFINITION", "OWNED_NODES"]);
    }
    if reasons {
        headers.push("REASON");
    }
    let mut table = Table::new(&headers);
    let dash = |s: &str| {
        if s.is_empty() {
            "-".to_owned()
        } else {
            s.to_owned()
        }
    };
    for q in queues {
        let mark = if Some(q.name.as_str()) == default {
            "*"
        } else {
            ""
        };
        let mut row = vec![
            format!("{}{mark}", q.name),
            yes_no(q.enabled),
            yes_no(q.started),
            if q.online { "online" } else { "offline" }.to_owned(),
            q.queue_policy.to_string(),
            q.match_policy.to_string(),
            q.nodes_defined.to_string(),
            q.nodes_owned.to_string(),
            q.nodes_up.to_string(),
            q.jobs_pending.to_string(),
            q.jobs_running.to_string(),
        ];
        if long {
            row.extend([dash(&q.definition), dash(&q.owned)]);
        }
        if reasons {
            row.push(dash(&q.reason));
        }
        table.row(row);
    }
    table.render()
}
