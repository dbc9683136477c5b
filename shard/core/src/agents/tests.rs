//! [`Runs`] under virtual time: when it may take an agent's tasks as killed by their lease,
//! and how it renews.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use shardsched_wire::Fluid;
use shardsched_wire::msg::agent::{AgentReport, JobNode, JobOnNode, JobReport, JobSignature};
use shardsched_wire::msg::client_shard::IdempotencyKey;
use shardsched_wire::msg::shard_coord::AgentAddress;
use shardsched_wire::msg::{Generation, JobState};

use super::*;
use crate::job::{JobRecord, Reason};

const GRACE_MS: u64 = 3_000;
/// The lease the agent reports.
const LEASE_MS: u64 = 2_000;
const NODE: &str = "n0";
/// How often the test's driver ticks, as the shard's agents task does (50 ms).
const TICK_MS: u64 = 50;

fn job(id: u64) -> Box<JobRecord> {
    Box::new(JobRecord {
        id: Fluid(id),
        owner: "alice".into(),
        key: IdempotencyKey([1; 16]),
        name: "sleep".into(),
        urgency: 16,
        state: JobState::Running,
        reason: Reason::None,
        submit_ms: 0,
        start_ms: Some(0),
        end_ms: None,
        duration_ms: 600_000,
        nodes: vec![NODE.to_owned()],
        nodes_requested: Some(1),
        cores_requested: 1,
        jobspec_json: Arc::from("{}"),
        r_json: None,
        events: Vec::new(),
        array: None,
        begin_ms: None,
        priority: None,
        signature: Some(Arc::new(JobSignature {
            cert_pem: "PEM".into(),
            signature: vec![1],
        })),
    })
}

/// One task on each node.
fn one_task_per_node(job: &JobRecord, facts: &LaunchFacts<'_>) -> Result<Vec<NodeLaunch>, String> {
    let nodes: Vec<JobNode> = job
        .nodes
        .iter()
        .map(|node| JobNode {
            node: node.clone(),
            agent: facts.agents[node],
            first_rank: 0,
            ntasks: 1,
            cores: Vec::new(),
            gpus: Vec::new(),
        })
        .collect();
    let signature = job.signature.as_deref().ok_or("unsigned")?;
    let signed = SignedJobspec::new(&job.jobspec_json, signature);
    launches_on(job, facts, &nodes, &signed, &[], "")
}

fn running_report() -> AgentReport {
    AgentReport {
        node: NODE.to_owned(),
        owner: None,
        unhealthy: None,
        lease_ms: LEASE_MS,
        jobs: vec![JobReport {
            job: Fluid(7),
            queue: "q".into(),
            generation: Generation(3),
            state: JobOnNode::Running { supervisor_pid: 9 },
        }],
    }
}

/// A request in flight to the agent (or the coordinator): its answer comes back at `at`,
/// or, if `lost`, its failure does.
struct InFlight {
    at: u64,
    lost: bool,
    send: Send,
}

/// What the simulated network does with the answer to a request sent at the time given:
/// how long it takes (`None`: it is lost, and the request's failure comes back after
/// [`REQUEST_TIMEOUT_MS`]). Every request itself reaches the agent at once.
type Network<'a> = &'a mut dyn FnMut(u64) -> Option<u64>;

/// What [`drive`] saw.
struct Seen {
    /// The job's end, and when.
    ended: Option<(u64, JobEnd)>,
    /// When the last request reached the agent before that (what renewed its lease last).
    renewed_at: u64,
    /// The longest time between two requests reaching the agent while the job ran, ms.
    longest_gap: u64,
}

/// A shard's agents task in virtual time, with job 7 running on [`NODE`] from time 0,
/// until `until` or until the job ends.
fn drive(until: u64, net: Network<'_>) -> Seen {
    let mut runs = Runs::new("q", GRACE_MS, one_task_per_node);
    let generations = BTreeMap::from([(NODE.to_owned(), Generation(3))]);
    runs.launch(0, job(7), generations);
    let addr = SocketAddr::from(([127, 0, 1, 1], 4000));
    let mut in_flight: Vec<InFlight> = Vec::new();
    let mut renewed_at = 0;
    let mut longest_gap = 0;
    let mut now = 0;
    while now <= until {
        in_flight.sort_by_key(|f| f.at);
        while in_flight.first().is_some_and(|f| f.at <= now) {
            let InFlight { lost, send, .. } = in_flight.remove(0);
            let failure = || Failure::Unreachable("no answer in time".into());
            match send {
                Send::Addresses(_) => runs.addresses(Ok(vec![AgentAddress {
                    node: NODE.to_owned(),
                    address: Some(addr),
                }])),
                Send::Launch { launch, .. } => {
                    let answer = if lost { Err(failure()) } else { Ok(()) };
                    runs.launched(now, launch.job, NODE, answer);
                }
                Send::Renew { asked, seen, .. } => {
                    let answer = if lost {
                        Err(failure())
                    } else {
                        Ok(running_report())
                    };
                    runs.renewed(now, NODE, asked, &seen, answer);
                }
                Send::Kill { .. } | Send::Forget { .. } => {}
            }
        }
        let sends = runs.tick(now);
        // What this tick sends leaves after it gave the job up.
        if let Some((_, end)) = runs.take_ended().pop() {
            return Seen {
                ended: Some((now, end)),
                renewed_at,
                longest_gap,
            };
        }
        for send in sends {
            if send.node().is_none() {
                in_flight.push(InFlight {
                    at: now,
                    lost: false,
                    send,
                });
                continue;
            }
            if renewed_at > 0 {
                longest_gap = longest_gap.max(now - renewed_at);
            }
            renewed_at = now;
            let (at, lost) = match net(now) {
                Some(delay) => (now + delay, false),
                None => (now + REQUEST_TIMEOUT_MS, true),
            };
            in_flight.push(InFlight { at, lost, send });
        }
        now += TICK_MS;
    }
    Seen {
        ended: None,
        renewed_at,
        longest_gap,
    }
}

#[test]
fn tasks_are_taken_as_killed_only_a_lease_after_the_last_request_left() {
    // The agent answers until 10 s, then every answer is lost: the requests still reach
    // it and renew its lease.
    let mut net = |sent: u64| (sent < 10_000).then_some(10);
    let Seen {
        ended, renewed_at, ..
    } = drive(120_000, &mut net);
    let (at, end) = ended.expect("the shard gives the job up in the end");
    assert_eq!(end.cause, EndCause::Lost, "{end:?}");
    assert!(
        at >= renewed_at + LEASE_MS + GRACE_MS,
        "taken as killed at {at} ms, though a request renewed the agent's lease at \
         {renewed_at} ms (lease {LEASE_MS} ms, grace {GRACE_MS} ms)"
    );
}

#[test]
fn one_lost_answer_does_not_lose_a_running_job() {
    let mut renewals = 0;
    let mut net = |_sent: u64| {
        renewals += 1;
        // The third request's answer (a renewal's) is lost; the others come back.
        (renewals != 3).then_some(10)
    };
    let seen = drive(120_000, &mut net);
    assert!(seen.ended.is_none(), "{:?}", seen.ended);
}

#[test]
fn a_renewal_is_sent_when_due_though_the_one_before_is_unanswered() {
    let mut requests = 0;
    let mut net = |_sent: u64| {
        requests += 1;
        // The fourth request's answer (a renewal's) is lost: it fails only after the
        // request timeout, longer than the lease.
        (requests != 4).then_some(10)
    };
    let seen = drive(30_000, &mut net);
    assert!(seen.ended.is_none(), "{:?}", seen.ended);
    assert!(
        seen.longest_gap <= LEASE_MS / 4 + TICK_MS,
        "{} ms without a request to the agent (lease {LEASE_MS} ms)",
        seen.longest_gap
    );
}

/// A restarted shard watches job 7, whose agent it has not heard yet, and the job is
/// cancelled; the agent's report then says it does not have the job (its launch never
/// arrived). The job ends cancelled: it is not launched now.
#[test]
fn a_cancelled_job_the_agent_never_had_is_not_launched() {
    let mut runs = Runs::new("q", GRACE_MS, one_task_per_node);
    let generations = BTreeMap::from([(NODE.to_owned(), Generation(3))]);
    runs.watch(0, job(7), generations);
    runs.kill(0, Fluid(7), "cancelled by alice");
    let addr = SocketAddr::from(([127, 0, 1, 1], 4000));
    let mut ended = None;
    let mut now = 0;
    while now <= 10_000 && ended.is_none() {
        for send in runs.tick(now) {
            match send {
                Send::Addresses(_) => runs.addresses(Ok(vec![AgentAddress {
                    node: NODE.to_owned(),
                    address: Some(addr),
                }])),
                Send::Launch { .. } => panic!("a cancelled job was launched at {now} ms"),
                Send::Renew { asked, seen, .. } => {
                    let mut report = running_report();
                    report.jobs.clear();
                    runs.renewed(now, NODE, asked, &seen, Ok(report));
                }
                Send::Kill { .. } | Send::Forget { .. } => {}
            }
        }
        ended = runs.take_ended().pop();
        now += TICK_MS;
    }
    let (id, end) = ended.expect("the job ends");
    assert_eq!(id, Fluid(7));
    assert_eq!(end.cause, EndCause::Cancelled, "{end:?}");
}

/// A restarted shard watches job 7 on a node whose agent has not registered since the
/// coordinator restarted (the coordinator knows no address for it), and the job is
/// cancelled. Nothing can reach the agent, so its lease runs out and it kills the task:
/// the job ends, lost, once the request timeout, the lease, the grace and the margin have
/// passed since the watch, and not before; it does not wait for the agent to come back.
#[test]
fn a_job_watched_on_an_agent_that_cannot_be_asked_ends_once_its_lease_ran_out() {
    let mut runs = Runs::new("q", GRACE_MS, one_task_per_node);
    let generations = BTreeMap::from([(NODE.to_owned(), Generation(3))]);
    let watched_at = 1_000;
    runs.watch(watched_at, job(7), generations);
    runs.kill(watched_at, Fluid(7), "cancelled: a move's deadline passed");
    let mut ended = None;
    let mut now = watched_at;
    while now <= 120_000 && ended.is_none() {
        for send in runs.tick(now) {
            match send {
                // The coordinator has not heard from the agent since it restarted.
                Send::Addresses(nodes) => runs.addresses(Ok(nodes
                    .into_iter()
                    .map(|node| AgentAddress {
                        node,
                        address: None,
                    })
                    .collect())),
                other => panic!("{other:?} sent to an agent whose address is unknown"),
            }
        }
        ended = runs.take_ended().pop().map(|(id, end)| (now, id, end));
        now += TICK_MS;
    }
    let (at, id, end) = ended.expect("the job ends without its agent's word");
    assert_eq!(id, Fluid(7));
    assert_eq!(end.cause, EndCause::Lost, "{end:?}");
    let lease_out = watched_at + REQUEST_TIMEOUT_MS + LEASE_DEFAULT_MS + GRACE_MS;
    assert!(
        (lease_out..=lease_out + LOST_MARGIN_MS + TICK_MS).contains(&at),
        "ended at {at} ms; the agent's lease and grace ran out at {lease_out} ms"
    );
}

#[test]
fn a_jobs_first_launch_on_a_node_never_asked_about_asks_its_address_at_once() {
    let mut runs = Runs::new("q", GRACE_MS, one_task_per_node);
    let addresses = |sends: &[Send]| -> Vec<Vec<String>> {
        sends
            .iter()
            .filter_map(|s| match s {
                Send::Addresses(nodes) => Some(nodes.clone()),
                _ => None,
            })
            .collect()
    };
    let on = |node: &str, id: u64| {
        let mut record = job(id);
        record.nodes = vec![node.to_owned()];
        (record, BTreeMap::from([(node.to_owned(), Generation(3))]))
    };
    let (first, generations) = on(NODE, 7);
    runs.launch(0, first, generations);
    assert_eq!(addresses(&runs.tick(0)), vec![vec![NODE.to_owned()]]);
    runs.addresses(Ok(vec![AgentAddress {
        node: NODE.to_owned(),
        address: Some(SocketAddr::from(([127, 0, 1, 1], 4000))),
    }]));
    runs.tick(1);
    // A job on another node, well within ADDRESSES_RETRY_MS of the first ask: its node is
    // asked about at once, not a retry period later.
    let (second, generations) = on("n1", 8);
    runs.launch(100, second, generations);
    assert_eq!(addresses(&runs.tick(100)), vec![vec!["n1".to_owned()]]);
    // The coordinator does not know it yet: asked again only once the retry is due.
    runs.addresses(Ok(vec![AgentAddress {
        node: "n1".to_owned(),
        address: None,
    }]));
    assert!(addresses(&runs.tick(200)).is_empty());
    assert_eq!(
        addresses(&runs.tick(ADDRESSES_RETRY_MS)),
        vec![vec!["n1".to_owned()]]
    );
}
