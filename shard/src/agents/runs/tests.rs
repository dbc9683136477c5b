//! [`Runs`] on its own: the sends it asks for as answers arrive and time passes.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use shardsched_proto::Fluid;
use shardsched_proto::msg::agent::{
    AgentReport, EndCause, JobEnd, JobOnNode, JobReport, JobSignature,
};
use shardsched_proto::msg::client_shard::IdempotencyKey;
use shardsched_proto::msg::shard_coord::AgentAddress;
use shardsched_proto::msg::{Generation, JobId, JobState, Refusal, RefusalCode};

use shardsched_shard_core::agents::{
    Failure, LAUNCH_RETRY_FOR_MS, LEASE_DEFAULT_MS, LOST_MARGIN_MS, REQUEST_TIMEOUT_MS, Runs, Send,
};

use crate::agents::launch::node_launches;
use crate::job::{JobRecord, Reason};

const GRACE_MS: u64 = 5_000;
const NODES: [&str; 2] = ["n0", "n1"];

fn job(id: u64) -> Box<JobRecord> {
    let jobspec = shardsched_jobspec::Shorthand {
        nodes: Some(2),
        duration: 60,
        command: vec!["true".into()],
        ..Default::default()
    }
    .to_jobspec()
    .expect("jobspec");
    let r = r#"{"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0-3"}}],
        "nodelist":["n[0-1]"],"starttime":0,"expiration":60}}"#;
    Box::new(JobRecord {
        id: Fluid(id),
        owner: "alice".into(),
        key: IdempotencyKey([1; 16]),
        name: "true".into(),
        urgency: 16,
        state: JobState::Running,
        reason: Reason::None,
        submit_ms: 0,
        start_ms: Some(0),
        end_ms: None,
        duration_ms: 60_000,
        nodes: NODES.iter().map(|n| (*n).to_owned()).collect(),
        nodes_requested: Some(2),
        cores_requested: 2,
        jobspec_json: Arc::from(jobspec.to_json().to_string()),
        r_json: Some(Arc::from(r)),
        events: Vec::new(),
        array: None,
        begin_ms: None,
        priority: None,
        signature: Some(Arc::new(JobSignature {
            cert_pem: "PEM".into(),
            signature: vec![1, 2, 3],
        })),
    })
}

fn generations() -> BTreeMap<String, Generation> {
    NODES
        .iter()
        .map(|n| ((*n).to_owned(), Generation(3)))
        .collect()
}

fn addr(i: u8) -> SocketAddr {
    SocketAddr::from(([127, 0, 1, i], 4000))
}

fn addresses() -> Vec<AgentAddress> {
    NODES
        .iter()
        .enumerate()
        .map(|(i, n)| AgentAddress {
            node: (*n).to_owned(),
            address: Some(addr(i as u8 + 1)),
        })
        .collect()
}

fn report(node: &str, jobs: Vec<(u64, JobOnNode)>) -> AgentReport {
    AgentReport {
        node: node.to_owned(),
        owner: None,
        unhealthy: None,
        lease_ms: 2_000,
        jobs: jobs
            .into_iter()
            .map(|(job, state)| JobReport {
                job: Fluid(job),
                queue: "q".into(),
                generation: Generation(3),
                state,
            })
            .collect(),
    }
}

fn exited(code: i32) -> JobOnNode {
    JobOnNode::Ended(JobEnd {
        cause: EndCause::Completed,
        exit_code: Some(code),
        signal: None,
        note: String::new(),
    })
}

fn launches(sends: &[Send]) -> Vec<String> {
    sends
        .iter()
        .filter_map(|s| match s {
            Send::Launch { node, .. } => Some(node.clone()),
            _ => None,
        })
        .collect()
}

/// The renewals asked for: (node, asked).
fn renewals(sends: &[Send]) -> Vec<(String, u64)> {
    sends
        .iter()
        .filter_map(|s| match s {
            Send::Renew { node, asked, .. } => Some((node.clone(), *asked)),
            _ => None,
        })
        .collect()
}

/// A job launched on both nodes, both launches acknowledged.
fn launched() -> Runs {
    let mut runs = Runs::new("q", GRACE_MS, node_launches);
    runs.launch(0, job(7), generations());
    let sends = runs.tick(0);
    assert!(
        matches!(sends.as_slice(), [Send::Addresses(n)] if n.len() == 2),
        "{sends:?}"
    );
    runs.addresses(Ok(addresses()));
    assert_eq!(launches(&runs.tick(1)), vec!["n0", "n1"]);
    for node in NODES {
        runs.launched(2, Fluid(7), node, Ok(()));
    }
    runs
}

#[test]
fn a_job_ends_when_every_node_says_so_with_its_worst_end() {
    let mut runs = launched();
    let asked = renewals(&runs.tick(3));
    assert_eq!(asked.len(), 2, "both agents renewed");
    runs.renewed(
        4,
        "n0",
        asked[0].1,
        &[],
        Ok(report("n0", vec![(7, exited(0))])),
    );
    runs.tick(5);
    assert!(runs.take_ended().is_empty(), "n1 has not said");
    runs.renewed(
        4,
        "n1",
        asked[1].1,
        &[],
        Ok(report("n1", vec![(7, exited(3))])),
    );
    runs.tick(6);
    let ended = runs.take_ended();
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0].1.exit_code, Some(3), "the highest task's status");
    // Both agents are told the end is recorded.
    let sends = runs.tick(10_000);
    let seen: Vec<&Vec<JobId>> = sends
        .iter()
        .filter_map(|s| match s {
            Send::Renew { seen, .. } => Some(seen),
            _ => None,
        })
        .collect();
    assert_eq!(seen, vec![&vec![Fluid(7)], &vec![Fluid(7)]]);
}

#[test]
fn a_requeued_jobs_launch_waits_until_the_agent_was_told_its_earlier_end() {
    let mut runs = launched();
    let asked = renewals(&runs.tick(3));
    for (node, asked) in asked {
        let report = report(&node, vec![(7, exited(1))]);
        runs.renewed(4, &node, asked, &[], Ok(report));
    }
    runs.tick(5);
    assert_eq!(runs.take_ended().len(), 1);
    // Requeued, it starts again on the same nodes before the agents heard their `seen`.
    runs.launch(6, job(7), generations());
    assert!(
        launches(&runs.tick(7)).is_empty(),
        "not before the agents were told"
    );
    let sends = runs.tick(1_000);
    assert!(launches(&sends).is_empty(), "{sends:?}");
    let told: Vec<(String, u64)> = renewals(&sends);
    assert_eq!(told.len(), 2, "the agents are told first: {sends:?}");
    for (node, asked) in told {
        runs.renewed(
            1_001,
            &node,
            asked,
            &[Fluid(7)],
            Ok(report(&node, Vec::new())),
        );
    }
    assert_eq!(launches(&runs.tick(1_002)), vec!["n0", "n1"]);
}

#[test]
fn a_lost_launch_answer_is_settled_by_the_next_report_not_by_a_blind_resend() {
    let mut runs = Runs::new("q", GRACE_MS, node_launches);
    runs.launch(0, job(7), generations());
    runs.tick(0);
    runs.addresses(Ok(addresses()));
    runs.tick(1);
    let lost = || Err(Failure::Unreachable("stream reset".into()));
    runs.launched(2, Fluid(7), "n0", lost());
    runs.launched(2, Fluid(7), "n1", lost());
    let asked = renewals(&runs.tick(3));
    assert_eq!(asked.len(), 2);
    // n0 has it: nothing is sent again there. n1 never got it: launched again.
    let running = JobOnNode::Running { supervisor_pid: 9 };
    runs.renewed(
        4,
        "n0",
        asked[0].1,
        &[],
        Ok(report("n0", vec![(7, running)])),
    );
    runs.renewed(4, "n1", asked[1].1, &[], Ok(report("n1", Vec::new())));
    assert_eq!(launches(&runs.tick(5)), vec!["n1"]);
}

#[test]
fn a_report_asked_before_a_launch_was_acknowledged_does_not_speak_for_it() {
    let mut runs = Runs::new("q", GRACE_MS, node_launches);
    runs.launch(0, job(7), generations());
    runs.tick(0);
    runs.addresses(Ok(addresses()));
    runs.tick(1);
    // A renewal goes out while the launches are in flight (the agents' other jobs).
    let early = 0;
    for node in NODES {
        runs.launched(2, Fluid(7), node, Ok(()));
    }
    // An earlier run of the job (requeued) ended there; the report predates this run.
    runs.renewed(3, "n0", early, &[], Ok(report("n0", vec![(7, exited(1))])));
    runs.renewed(3, "n1", early, &[], Ok(report("n1", Vec::new())));
    runs.tick(4);
    assert!(
        runs.take_ended().is_empty(),
        "neither report speaks for this run"
    );
}

#[test]
fn an_agent_unreachable_past_its_lease_and_the_grace_has_killed_its_tasks() {
    let mut runs = launched();
    let asked = renewals(&runs.tick(3));
    runs.renewed(
        4,
        "n0",
        asked[0].1,
        &[],
        Ok(report("n0", vec![(7, exited(0))])),
    );
    runs.renewed(4, "n1", asked[1].1, &[], Ok(report("n1", Vec::new())));
    runs.tick(5);
    assert_eq!(runs.take_ended().len(), 1, "n1 forgot the job: lost");

    let mut runs = launched();
    let asked = renewals(&runs.tick(3));
    let running = JobOnNode::Running { supervisor_pid: 9 };
    runs.renewed(
        4,
        "n0",
        asked[0].1,
        &[],
        Ok(report("n0", vec![(7, exited(0))])),
    );
    runs.renewed(
        4,
        "n1",
        asked[1].1,
        &[],
        Ok(report("n1", vec![(7, running)])),
    );
    let asked = renewals(&runs.tick(1_000));
    // Counted from the last request sent (its answer lost, it may still have renewed the
    // lease), and quiet since: nothing more goes to n1.
    let gone = 1_000 + REQUEST_TIMEOUT_MS + 2_000 + GRACE_MS + LOST_MARGIN_MS;
    let n1 = asked.iter().find(|(n, _)| n == "n1").expect("n1 renewed");
    runs.renewed(
        1_001,
        "n1",
        n1.1,
        &[],
        Err(Failure::Unreachable("timeout".into())),
    );
    let sends = runs.tick(gone - 1);
    assert!(sends.iter().all(|s| s.node() != Some("n1")), "{sends:?}");
    assert!(
        runs.take_ended().is_empty(),
        "not before its lease and the grace are over"
    );
    runs.tick(gone);
    let ended = runs.take_ended();
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0].1.cause, EndCause::Lost);
    assert!(ended[0].1.note.contains("lease"), "{:?}", ended[0].1);
    let _ = LEASE_DEFAULT_MS;
}

#[test]
fn a_kill_before_the_launch_ends_the_job_without_starting_it() {
    let mut runs = Runs::new("q", GRACE_MS, node_launches);
    runs.launch(0, job(7), generations());
    runs.kill(0, Fluid(7), "cancelled by alice");
    let sends = runs.tick(1);
    assert!(launches(&sends).is_empty(), "{sends:?}");
    let ended = runs.take_ended();
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0].1.cause, EndCause::Cancelled);
}

#[test]
fn a_launch_refused_for_fencing_is_tried_again_for_a_while_then_fails() {
    let mut runs = Runs::new("q", GRACE_MS, node_launches);
    runs.launch(0, job(7), generations());
    runs.tick(0);
    runs.addresses(Ok(addresses()));
    runs.tick(1);
    let stale = || {
        Err(Failure::Refused(Refusal::new(
            RefusalCode::Stale,
            "node n1: queue q is not its owner",
        )))
    };
    runs.launched(2, Fluid(7), "n0", Ok(()));
    runs.launched(2, Fluid(7), "n1", stale());
    let sends = runs.tick(1_000);
    assert_eq!(launches(&sends), vec!["n1"], "tried again");
    let running = JobOnNode::Running { supervisor_pid: 9 };
    for (node, asked) in renewals(&sends) {
        runs.renewed(
            1_000,
            &node,
            asked,
            &[],
            Ok(report(&node, vec![(7, running.clone())])),
        );
    }
    runs.launched(1_001, Fluid(7), "n1", stale());
    // Past the retries, n1's share fails: the job cannot run whole, so n0's share is
    // stopped, and the job ends once it is.
    let sends = runs.tick(LAUNCH_RETRY_FOR_MS + 1);
    let in_flight = renewals(&sends);
    assert!(launches(&sends).is_empty(), "{sends:?}");
    assert!(
        sends
            .iter()
            .any(|s| matches!(s, Send::Kill { node, .. } if node == "n0")),
        "{sends:?}"
    );
    assert!(runs.take_ended().is_empty());
    let n0 = in_flight
        .iter()
        .find(|(n, _)| n == "n0")
        .expect("n0 renewed");
    let killed = JobOnNode::Ended(JobEnd::without_status(EndCause::Cancelled, "stopped"));
    runs.renewed(
        LAUNCH_RETRY_FOR_MS + 10_001,
        "n0",
        n0.1,
        &[],
        Ok(report("n0", vec![(7, killed)])),
    );
    runs.tick(LAUNCH_RETRY_FOR_MS + 10_002);
    let ended = runs.take_ended();
    assert_eq!(ended.len(), 1);
    assert_eq!(
        ended[0].1.cause,
        EndCause::Error,
        "the launch's refusal speaks for the job"
    );
}

#[test]
fn a_restarted_shard_asks_where_the_agents_of_the_jobs_it_watches_are() {
    let mut runs = Runs::new("q", GRACE_MS, node_launches);
    runs.watch(0, job(1), generations());
    let sends = runs.tick(0);
    assert!(
        sends
            .iter()
            .any(|s| matches!(s, Send::Addresses(nodes) if nodes.len() == 2)),
        "without the agents' addresses no report can settle the job: {sends:?}"
    );
    runs.addresses(Ok(addresses()));
    let renewals = renewals(&runs.tick(1));
    assert_eq!(renewals.len(), 2, "{renewals:?}");
}

#[test]
fn an_agent_that_takes_a_launch_is_reachable_again() {
    let mut runs = launched();
    let asked = renewals(&runs.tick(3));
    let running = || JobOnNode::Running { supervisor_pid: 9 };
    for (node, at) in &asked {
        runs.renewed(4, node, *at, &[], Ok(report(node, vec![(7, running())])));
    }
    let asked = renewals(&runs.tick(1_000));
    let n1 = asked.iter().find(|(n, _)| n == "n1").expect("n1 renewed");
    runs.renewed(
        1_001,
        "n1",
        n1.1,
        &[],
        Err(Failure::Unreachable("timeout".into())),
    );
    // Long past the lease, a new job's launch gets through to both agents: n1 heard from
    // this shard just now, so the job's tasks there are not taken as killed.
    let later = 4 + 2_000 + GRACE_MS + LOST_MARGIN_MS + 10_000;
    runs.launch(later, job(8), generations());
    let sent = launches(&runs.tick(later));
    assert_eq!(sent, vec!["n0", "n1"]);
    for node in NODES {
        runs.launched(later + 1, Fluid(8), node, Ok(()));
    }
    let kills: Vec<JobId> = runs
        .tick(later + 2)
        .into_iter()
        .filter_map(|s| match s {
            Send::Kill { job, .. } => Some(job),
            _ => None,
        })
        .collect();
    assert!(
        !kills.contains(&Fluid(8)),
        "job 8 stopped as lost: {kills:?}"
    );
}
