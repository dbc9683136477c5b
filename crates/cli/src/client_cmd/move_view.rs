//! Moves as `queue moves` and `queue move --dry-run` show them, as tables and as JSON (an
//! interface, built field by field like [`super::job_view`]'s).

use serde_json::{Value, json};
use shardsched_client::output::{self, Table};
use shardsched_proto::msg::client_coord::MoveInfo;
use shardsched_proto::msg::coord_shard::{DryRunReport, FreeAt};
use shardsched_resource::{encode_hostlist, sort_hosts};

/// A move as `queue moves --json` prints it.
pub fn move_json(m: &MoveInfo) -> Value {
    let nodes: Vec<Value> = m
        .nodes
        .iter()
        .map(|n| {
            json!({
                "node": n.node,
                "generation": n.generation.0,
                "state": n.state,
                "expected_free_ms": n.expected_free_ms,
                "jobs": n.jobs.iter().map(|j| j.to_string()).collect::<Vec<String>>(),
                "requested_ms": n.requested_ms,
                "released_ms": n.released_ms,
                "acquired_ms": n.acquired_ms,
            })
        })
        .collect();
    json!({
        "id": m.move_id.0,
        "from": m.from,
        "to": m.to,
        "status": m.status,
        "started_ms": m.started_ms,
        "deadline_ms": m.deadline_ms,
        "nodes": nodes,
    })
}

/// `queue moves` for people: one line per move and step, nodes grouped.
pub fn moves_table(moves: &[MoveInfo], now_ms: u64) -> String {
    if moves.is_empty() {
        return "no moves\n".to_owned();
    }
    let mut table = Table::new(&[
        "MOVE", "FROM", "TO", "STATUS", "STEP", "NNODES", "DETAIL", "NODELIST",
    ]);
    for m in moves {
        let mut groups: Vec<(String, String, Vec<&str>)> = Vec::new();
        for n in &m.nodes {
            let detail = match (n.state.as_str(), n.expected_free_ms) {
                ("outgoing", Some(t)) => {
                    let jobs: Vec<String> = n.jobs.iter().map(|j| j.to_string()).collect();
                    let why = if m.deadline_ms == Some(t) {
                        "at the deadline: jobs"
                    } else {
                        "jobs"
                    };
                    format!(
                        "free in {} ({why} {})",
                        output::human_duration(t.saturating_sub(now_ms)),
                        jobs.join(",")
                    )
                }
                ("outgoing", None) => "waiting for the donor".to_owned(),
                _ => String::new(),
            };
            match groups
                .iter_mut()
                .find(|(s, d, _)| *s == n.state && *d == detail)
            {
                Some((_, _, names)) => names.push(&n.node),
                None => groups.push((n.state.clone(), detail, vec![&n.node])),
            }
        }
        for (step, detail, mut names) in groups {
            sort_hosts(&mut names);
            table.row(vec![
                m.move_id.0.to_string(),
                m.from.clone(),
                m.to.clone(),
                m.status.clone(),
                step,
                names.len().to_string(),
                if detail.is_empty() {
                    "-".into()
                } else {
                    detail
                },
                encode_hostlist(&names),
            ]);
        }
    }
    table.render()
}

/// `queue move --dry-run`: per node and overall, when the nodes would be free, and the
/// pending jobs that could never run.
pub fn dry_run_text(report: &DryRunReport, now_ms: u64) -> String {
    let when = |free: &FreeAt| match free {
        FreeAt::Now => "now".to_owned(),
        FreeAt::Expected(t) => format!(
            "in {} ({})",
            output::human_duration(t.saturating_sub(now_ms)),
            output::utc_timestamp(*t)
        ),
    };
    let mut table = Table::new(&["NODE", "FREE", "JOBS"]);
    for n in &report.nodes {
        let jobs: Vec<String> = n.jobs.iter().map(|j| j.to_string()).collect();
        table.row(vec![
            n.node.clone(),
            when(&n.free),
            if jobs.is_empty() {
                "-".into()
            } else {
                jobs.join(",")
            },
        ]);
    }
    let mut out = table.render();
    out.push_str(&format!("all free: {}\n", when(&report.all_free)));
    if report.stranded.is_empty() {
        out.push_str("no pending job of the donor would be left unable to run\n");
    } else {
        let ids: Vec<String> = report.stranded.iter().map(|j| j.to_string()).collect();
        out.push_str(&format!(
            "pending jobs of the donor that could never run: {}\n",
            ids.join(" ")
        ));
    }
    out.push_str("(dry run: nothing changed)\n");
    out
}

/// `queue move --dry-run --json`: each node with when it would be free (`free_ms`, `null`
/// for now) and the jobs holding it, the time all are free, and the stranded pending jobs.
pub fn dry_run_json(report: &DryRunReport) -> Value {
    let free_ms = |free: &FreeAt| match free {
        FreeAt::Now => None,
        FreeAt::Expected(t) => Some(*t),
    };
    let ids = |jobs: &[shardsched_proto::msg::JobId]| -> Vec<String> {
        jobs.iter().map(ToString::to_string).collect()
    };
    let nodes: Vec<Value> = report
        .nodes
        .iter()
        .map(|n| {
            json!({
                "node": n.node,
                "free_now": n.free == FreeAt::Now,
                "free_ms": free_ms(&n.free),
                "jobs": ids(&n.jobs),
            })
        })
        .collect();
    json!({
        "dry_run": true,
        "nodes": nodes,
        "all_free_now": report.all_free == FreeAt::Now,
        "all_free_ms": free_ms(&report.all_free),
        "stranded": ids(&report.stranded),
    })
}

#[cfg(test)]
mod tests {
    use shardsched_proto::msg::Generation;
    use shardsched_proto::msg::client_coord::MoveNodeInfo;
    use shardsched_proto::msg::coord_shard::NodeRelease;

    use shardsched_proto::msg::MoveId;

    use super::*;

    fn node(name: &str, state: &str, free: Option<u64>) -> MoveNodeInfo {
        MoveNodeInfo {
            node: name.into(),
            generation: Generation(2),
            state: state.into(),
            expected_free_ms: free,
            jobs: Vec::new(),
            requested_ms: 1_000,
            released_ms: (state != "outgoing").then_some(1_005),
            acquired_ms: (state == "up").then_some(1_009),
        }
    }

    #[test]
    fn moves_print_grouped_by_step_and_as_json_with_times() {
        let m = MoveInfo {
            move_id: MoveId(4),
            from: "batch".into(),
            to: "debug".into(),
            status: "active".into(),
            started_ms: 1_000,
            deadline_ms: None,
            nodes: vec![
                node("node0", "up", None),
                node("node1", "up", None),
                node("node2", "outgoing", Some(61_000)),
            ],
        };
        let text = moves_table(std::slice::from_ref(&m), 1_000);
        assert!(text.contains("node[0-1]"), "{text}");
        assert!(text.contains("free in 1m"), "{text}");
        let v = move_json(&m);
        assert_eq!(v["id"], 4);
        assert_eq!(v["nodes"][0]["released_ms"], 1_005);
        assert_eq!(v["nodes"][0]["acquired_ms"], 1_009);
        assert_eq!(v["nodes"][2]["released_ms"], Value::Null);
        assert_eq!(moves_table(&[], 0), "no moves\n");
    }

    #[test]
    fn moves_read_in_natural_order_and_say_when_the_deadline_frees_a_node() {
        let mut nodes: Vec<MoveNodeInfo> = ["node0", "node1", "node10", "node100", "node2"]
            .iter()
            .map(|n| node(n, "up", None))
            .collect();
        nodes.push(node("node3", "outgoing", Some(31_000)));
        let m = MoveInfo {
            move_id: MoveId(7),
            from: "batch".into(),
            to: "debug".into(),
            status: "active".into(),
            started_ms: 1_000,
            deadline_ms: Some(31_000),
            nodes,
        };
        let text = moves_table(std::slice::from_ref(&m), 1_000);
        assert!(text.contains("node[0-2,10,100]"), "{text}");
        assert!(
            text.contains("free in 30.0s (at the deadline: jobs"),
            "{text}"
        );
    }

    #[test]
    fn a_dry_run_says_when_and_what_would_strand() {
        let report = DryRunReport {
            nodes: vec![
                NodeRelease {
                    node: "node0".into(),
                    free: FreeAt::Now,
                    jobs: Vec::new(),
                },
                NodeRelease {
                    node: "node1".into(),
                    free: FreeAt::Expected(121_000),
                    jobs: vec![shardsched_proto::Fluid(77)],
                },
            ],
            all_free: FreeAt::Expected(121_000),
            stranded: vec![shardsched_proto::Fluid(78)],
        };
        let text = dry_run_text(&report, 1_000);
        assert!(text.contains("node0") && text.contains("now"), "{text}");
        assert!(text.contains("in 2m"), "{text}");
        assert!(text.contains("could never run"), "{text}");
        assert!(text.contains("nothing changed"), "{text}");
    }
}
