//! proptest strategies for every wire message (no proptest-derive: written out by hand).

#![allow(dead_code)]

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use shardsched_wire::array::{ArrayElement, ArraySpec, IndexRange};
use shardsched_wire::fluid::Fluid;
use shardsched_wire::msg::client_shard::{
    CancelOutcome, CancelResult, IdempotencyKey, Submit, UrgencyChange, UrgencyOutcome,
    UrgencyResult,
};
use shardsched_wire::msg::coord_shard::{
    Acquire, CancelJobs, FreeAt, Incoming, IncomingNode, Reclaim, Reconfigure, Release,
    ReleaseState, StaleNode, Withdraw,
};
use shardsched_wire::msg::hello::{Hello, HelloReply};
use shardsched_wire::msg::shard_coord::{Assignment, HeldNode, Register, Released, ShardStatus};
use shardsched_wire::msg::*;
use shardsched_wire::rpc::Reply;
use shardsched_wire::{Peer, Role};

pub fn text() -> impl Strategy<Value = String> {
    "\\PC{0,12}"
}

pub fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_-]{0,10}"
}

pub fn role() -> impl Strategy<Value = Role> {
    prop::sample::select(Role::ALL.to_vec())
}

pub fn peer() -> impl Strategy<Value = Peer> {
    (role(), name()).prop_map(|(role, name)| Peer { role, name })
}

pub fn fluid() -> impl Strategy<Value = Fluid> {
    any::<u64>().prop_map(Fluid)
}

pub fn node_gen() -> impl Strategy<Value = NodeGen> {
    (name(), any::<u64>()).prop_map(|(node, g)| NodeGen {
        node,
        generation: Generation(g),
    })
}

pub fn job_state() -> impl Strategy<Value = JobState> {
    prop::sample::select(vec![
        JobState::Pending,
        JobState::Running,
        JobState::Completed,
        JobState::Failed,
        JobState::Cancelled,
    ])
}

pub fn node_state() -> impl Strategy<Value = NodeState> {
    prop::sample::select(vec![
        NodeState::Up,
        NodeState::Down,
        NodeState::Drained,
        NodeState::Outgoing,
        NodeState::Incoming,
        NodeState::NotOwned,
    ])
}

pub fn summary() -> impl Strategy<Value = JobSummary> {
    (
        (fluid(), name(), name(), text(), job_state(), any::<u8>()),
        (
            (vec(name(), 0..4), option::of(any::<u64>())),
            any::<u64>(),
            option::of(any::<u64>()),
            option::of(any::<u64>()),
            any::<u64>(),
            text(),
        ),
    )
        .prop_map(
            |(
                (id, queue, owner, name, state, urgency),
                ((nodes, nodes_requested), submit_ms, start_ms, end_ms, duration_ms, reason),
            )| {
                JobSummary {
                    id,
                    queue,
                    owner,
                    name,
                    state,
                    urgency,
                    nodes,
                    nodes_requested,
                    submit_ms,
                    start_ms,
                    end_ms,
                    duration_ms,
                    reason,
                    reserved_ms: start_ms.xor(end_ms),
                    array: submit_ms
                        .checked_rem(3)
                        .filter(|&r| r > 0)
                        .map(|r| ArrayElement {
                            array: id,
                            index: u32::try_from(r).unwrap_or(0),
                        }),
                    begin_ms: end_ms.and(start_ms),
                    priority: (duration_ms % 2 == 1).then_some(fairshare::JobPriority {
                        total: 41_000,
                        base: 16_000,
                        fairshare: 25_000,
                        weight: 100_000,
                        factor_ppm: u32::from(urgency) * 1000,
                    }),
                }
            },
        )
}

pub fn job_list() -> impl Strategy<Value = JobList> {
    (vec(summary(), 0..3), any::<bool>()).prop_map(|(jobs, truncated)| JobList { jobs, truncated })
}

pub fn query() -> impl Strategy<Value = JobsQuery> {
    let user = prop_oneof![
        Just(UserFilter::Mine),
        Just(UserFilter::All),
        name().prop_map(UserFilter::Named)
    ];
    (option::of(name()), user, any::<bool>(), any::<u32>()).prop_map(
        |(queue, user, include_inactive, limit)| JobsQuery {
            queue,
            user,
            include_inactive,
            limit,
            states: Vec::new(),
            name: None,
        },
    )
}

pub fn refusal() -> impl Strategy<Value = Refusal> {
    let code = prop::sample::select(vec![
        RefusalCode::Forbidden,
        RefusalCode::NotFound,
        RefusalCode::Invalid,
        RefusalCode::Denied,
        RefusalCode::Unavailable,
        RefusalCode::Stale,
        RefusalCode::Internal,
        RefusalCode::Policy,
    ]);
    (code, text()).prop_map(|(code, message)| Refusal { code, message })
}

pub fn node_status() -> impl Strategy<Value = NodeStatus> {
    (
        name(),
        option::of(name()),
        node_state(),
        any::<u64>(),
        any::<u32>(),
        option::of(name()),
    )
        .prop_map(|(name, queue, state, g, jobs_running, reason)| NodeStatus {
            name,
            queue,
            state,
            generation: Generation(g),
            jobs_running,
            reason,
            usage: NodeUsage {
                cores: jobs_running.wrapping_mul(4),
                cores_free: jobs_running,
                gpus: g as u32,
                gpus_free: 0,
            },
        })
}

pub fn queue_policy() -> impl Strategy<Value = QueuePolicy> {
    proptest::sample::select(QueuePolicy::ALL.to_vec())
}

pub fn match_policy() -> impl Strategy<Value = MatchPolicy> {
    proptest::sample::select(MatchPolicy::ALL.to_vec())
}

pub fn queue_status() -> impl Strategy<Value = QueueStatus> {
    (
        (
            name(),
            any::<bool>(),
            any::<bool>(),
            queue_policy(),
            match_policy(),
        ),
        vec(any::<u32>(), 5),
        any::<bool>(),
    )
        .prop_map(
            |((name, enabled, started, queue_policy, match_policy), n, online)| QueueStatus {
                enabled,
                started,
                queue_policy,
                match_policy,
                nodes_defined: n[0],
                nodes_owned: n[1],
                nodes_up: n[2],
                jobs_pending: n[3],
                jobs_running: n[4],
                online,
                definition: format!("node[0-{}]", n[0] % 64),
                owned: String::new(),
                reason: name.chars().rev().collect(),
                pending_reasons: PendingReasons {
                    queued: n[3],
                    reserved: n[3] / 2,
                    ..PendingReasons::default()
                },
                name,
            },
        )
}

/// A socket address as the wire carries it: serde drops an IPv6 address's flow info and scope
/// id, so generated addresses have none.
pub fn address() -> impl Strategy<Value = std::net::SocketAddr> {
    any::<std::net::SocketAddr>().prop_map(|a| std::net::SocketAddr::new(a.ip(), a.port()))
}

pub fn route_table() -> impl Strategy<Value = RouteTable> {
    let route = (
        name(),
        address(),
        any::<u16>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(queue, address, generator_id, enabled, started)| Route {
            reason: if enabled {
                String::new()
            } else {
                queue.clone()
            },
            queue,
            address,
            generator_id,
            enabled,
            started,
        });
    (
        any::<u64>(),
        option::of(name()),
        vec(route, 0..3),
        vec(name(), 0..3),
    )
        .prop_map(|(epoch, default_queue, routes, offline)| RouteTable {
            epoch,
            default_queue,
            routes,
            offline,
        })
}

pub fn queue_config() -> impl Strategy<Value = QueueConfig> {
    (
        (
            name(),
            queue_policy(),
            match_policy(),
            any::<u32>(),
            any::<u32>(),
        ),
        (
            any::<u64>(),
            any::<u64>(),
            vec(name(), 0..3),
            any::<bool>(),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                (name, queue_policy, match_policy, queue_depth, reservation_depth),
                (default_duration_ms, max_duration_ms, definition, enabled, started),
            )| {
                QueueConfig {
                    name,
                    queue_policy,
                    match_policy,
                    queue_depth,
                    reservation_depth,
                    default_duration_ms,
                    max_duration_ms,
                    definition,
                    enabled,
                    started,
                    array_elements_max: queue_depth.wrapping_mul(3),
                }
            },
        )
}

pub fn incoming_node() -> impl Strategy<Value = IncomingNode> {
    (node_gen(), option::of(any::<u64>())).prop_map(|(node, expected_free_ms)| IncomingNode {
        node,
        expected_free_ms,
    })
}

pub fn stale() -> impl Strategy<Value = StaleNode> {
    (node_gen(), any::<u64>()).prop_map(|(node, g)| StaleNode {
        node,
        seen: Generation(g),
    })
}

pub fn client_shard_request() -> impl Strategy<Value = client_shard::Request> {
    prop_oneof![
        (
            any::<[u8; 16]>(),
            text(),
            option::of(any::<u8>()),
            option::of(array_spec())
        )
            .prop_map(|(key, jobspec_json, urgency, array)| {
                client_shard::Request::Submit(Submit {
                    idempotency_key: IdempotencyKey(key),
                    jobspec_json,
                    urgency,
                    array,
                    signature: None,
                })
            }),
        query().prop_map(client_shard::Request::Jobs),
        fluid().prop_map(|id| client_shard::Request::JobInfo { id }),
        vec(fluid(), 0..5).prop_map(|ids| client_shard::Request::Cancel { ids }),
        (vec(fluid(), 0..5), urgency_change())
            .prop_map(|(ids, change)| client_shard::Request::Urgency { ids, change }),
    ]
}

pub fn array_spec() -> impl Strategy<Value = ArraySpec> {
    (
        vec((any::<u32>(), any::<u32>(), any::<u32>()), 0..3),
        any::<u32>(),
    )
        .prop_map(|(ranges, max_running)| ArraySpec {
            ranges: ranges
                .into_iter()
                .map(|(first, last, step)| IndexRange { first, last, step })
                .collect(),
            max_running,
        })
}

pub fn urgency_result() -> impl Strategy<Value = UrgencyResult> {
    prop_oneof![
        any::<u8>().prop_map(UrgencyResult::Set),
        Just(UrgencyResult::NotPending),
        Just(UrgencyResult::NotFound),
        Just(UrgencyResult::Forbidden),
    ]
}

pub fn urgency_change() -> impl Strategy<Value = UrgencyChange> {
    prop_oneof![
        any::<u8>().prop_map(UrgencyChange::Set),
        Just(UrgencyChange::Hold),
        Just(UrgencyChange::Release),
    ]
}

pub fn client_shard_reply() -> impl Strategy<Value = Reply<client_shard::Response>> {
    let result = prop::sample::select(vec![
        CancelResult::Cancelled,
        CancelResult::AlreadyInactive,
        CancelResult::NotFound,
        CancelResult::Forbidden,
    ]);
    let event = (any::<u64>(), name(), text()).prop_map(|(time_ms, name, context_json)| JobEvent {
        time_ms,
        name,
        context_json,
    });
    let response = prop_oneof![
        (fluid(), any::<bool>())
            .prop_map(|(id, duplicate)| client_shard::Response::Submitted { id, duplicate }),
        job_list().prop_map(client_shard::Response::Jobs),
        (
            summary(),
            option::of(text()),
            option::of(text()),
            vec(event, 0..3)
        )
            .prop_map(|(summary, jobspec_json, r_json, events)| {
                client_shard::Response::JobInfo(Box::new(JobInfo {
                    summary,
                    jobspec_json,
                    r_json,
                    events,
                }))
            }),
        vec(
            (fluid(), result).prop_map(|(id, result)| CancelOutcome { id, result }),
            0..3
        )
        .prop_map(client_shard::Response::Cancelled),
        vec((fluid(), urgency_result()), 0..3).prop_map(|outcomes| {
            client_shard::Response::Urgency(
                outcomes
                    .into_iter()
                    .map(|(id, result)| UrgencyOutcome { id, result })
                    .collect(),
            )
        }),
    ];
    prop_oneof![response.prop_map(Ok), refusal().prop_map(Err)]
}

pub fn client_coord_request() -> impl Strategy<Value = client_coord::Request> {
    use client_coord::QueueAction;
    let action = prop_oneof![
        Just(QueueAction::Enable),
        Just(QueueAction::Disable),
        any::<bool>().prop_map(|take| QueueAction::Start { take }),
        Just(QueueAction::Stop),
    ];
    prop_oneof![
        Just(client_coord::Request::Routes),
        query().prop_map(client_coord::Request::Jobs),
        Just(client_coord::Request::Queues),
        (option::of(name()), any::<u32>())
            .prop_map(|(queue, start)| client_coord::Request::Resources { queue, start }),
        (name(), action)
            .prop_map(|(queue, action)| client_coord::Request::QueueControl { queue, action }),
        (vec(name(), 0..4), name())
            .prop_map(|(nodes, to)| client_coord::Request::MoveNodes { nodes, to }),
        (vec(name(), 0..4), any::<bool>(), name()).prop_map(|(nodes, down, reason)| {
            client_coord::Request::SetNodeState {
                nodes,
                down,
                reason,
            }
        }),
        (vec(name(), 0..4), any::<bool>(), name()).prop_map(|(nodes, drained, reason)| {
            client_coord::Request::SetNodeDrain {
                nodes,
                drained,
                reason,
            }
        }),
        (
            name(),
            Just(client_coord::QueueAction::Stop),
            name(),
            option::of(name())
        )
            .prop_map(|(queue, action, reason, release_to)| {
                client_coord::Request::QueueAdmin(client_coord::QueueAdmin {
                    queue,
                    action,
                    reason,
                    release_to,
                })
            }),
        (
            vec(name(), 0..4),
            name(),
            name(),
            option::of(any::<u64>()),
            any::<bool>()
        )
            .prop_map(|(nodes, from, to, deadline_ms, dry_run)| {
                client_coord::Request::Move(client_coord::MoveRequest {
                    nodes,
                    from,
                    to,
                    deadline_ms,
                    dry_run,
                })
            }),
        any::<u64>().prop_map(|id| client_coord::Request::CancelMove {
            move_id: MoveId(id)
        }),
        Just(client_coord::Request::Moves),
        any::<u64>().prop_map(|m| client_coord::Request::MoveOf { move_id: MoveId(m) }),
        queue_spec().prop_map(client_coord::Request::AddQueue),
        queue_spec().prop_map(client_coord::Request::UpdateQueue),
        (name(), option::of(name()))
            .prop_map(|(queue, give_to)| client_coord::Request::RemoveQueue { queue, give_to }),
        Just(client_coord::Request::Reload),
    ]
}

pub fn queue_spec() -> impl Strategy<Value = client_coord::QueueSpec> {
    (
        (
            name(),
            option::of(name()),
            option::of(queue_policy()),
            option::of(match_policy()),
        ),
        (
            option::of(any::<u32>()),
            option::of(any::<u32>()),
            option::of(name()),
            option::of(name()),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                (name, nodes, policy, match_policy),
                (queue_depth, reservation_depth, default_duration, max_duration, stopped),
            )| client_coord::QueueSpec {
                nodes,
                policy,
                match_policy,
                queue_depth,
                reservation_depth,
                give_to: stopped.then(|| name.clone()),
                name,
                default_duration,
                max_duration,
                stopped,
            },
        )
}

fn move_info() -> impl Strategy<Value = client_coord::MoveInfo> {
    let node = (
        name(),
        any::<u64>(),
        name(),
        option::of(any::<u64>()),
        vec(fluid(), 0..2),
        any::<u64>(),
        option::of(any::<u64>()),
    )
        .prop_map(
            |(node, g, state, expected_free_ms, jobs, requested_ms, released_ms)| {
                client_coord::MoveNodeInfo {
                    node,
                    generation: shardsched_wire::msg::Generation(g),
                    state,
                    expected_free_ms,
                    jobs,
                    requested_ms,
                    released_ms,
                    acquired_ms: released_ms,
                }
            },
        );
    (
        any::<u64>(),
        name(),
        name(),
        option::of(any::<u64>()),
        vec(node, 0..3),
    )
        .prop_map(
            |(id, from, to, deadline_ms, nodes)| client_coord::MoveInfo {
                move_id: MoveId(id),
                status: "active".into(),
                started_ms: id,
                from,
                to,
                deadline_ms,
                nodes,
            },
        )
}

pub fn client_coord_reply() -> impl Strategy<Value = Reply<client_coord::Response>> {
    let response = prop_oneof![
        route_table().prop_map(client_coord::Response::Routes),
        job_list().prop_map(client_coord::Response::Jobs),
        vec(queue_status(), 0..3).prop_map(client_coord::Response::Queues),
        (vec(node_status(), 0..3), option::of(any::<u32>()))
            .prop_map(|(nodes, next)| client_coord::Response::Resources { nodes, next }),
        option::of(any::<u64>()).prop_map(|m| client_coord::Response::Done {
            move_id: m.map(MoveId)
        }),
        (vec(name(), 0..3), option::of(any::<u64>())).prop_map(|(changes, m)| {
            client_coord::Response::Reconfigured {
                changes,
                move_id: m.map(MoveId),
            }
        }),
        vec(name(), 0..3).prop_map(|returned| client_coord::Response::Cancelled { returned }),
        (vec(move_info(), 0..2), any::<bool>())
            .prop_map(|(moves, truncated)| client_coord::Response::Moves { moves, truncated }),
    ];
    prop_oneof![response.prop_map(Ok), refusal().prop_map(Err)]
}

pub fn shard_coord_request() -> impl Strategy<Value = shard_coord::Request> {
    let held =
        (node_gen(), any::<bool>()).prop_map(|(node, allocated)| HeldNode { node, allocated });
    prop_oneof![
        (name(), address(), vec(held, 0..3), option::of(fluid())).prop_map(
            |(queue, listen, held, last_job_id)| shard_coord::Request::Register(Register {
                queue,
                listen,
                held,
                last_job_id
            })
        ),
        (
            any::<u64>(),
            queue_status(),
            vec(node_status(), 0..3),
            vec(name(), 0..3)
        )
            .prop_map(|(time_ms, queue, nodes, nodes_gone)| {
                shard_coord::Request::Status(Box::new(ShardStatus {
                    seq: time_ms / 3,
                    allowances: Vec::new(),
                    usage: (time_ms % 2 == 1).then(|| fairshare::UsageBatch {
                        seq: time_ms / 2,
                        users: vec![fairshare::UserUsage {
                            user: "alice".into(),
                            core_ms: time_ms,
                        }],
                    }),
                    factors_version: time_ms / 3,
                    time_ms,
                    queue,
                    nodes_complete: nodes_gone.is_empty(),
                    nodes,
                    nodes_gone,
                    waiting_on: Vec::new(),
                }))
            }),
        (any::<u64>(), vec(node_gen(), 0..3)).prop_map(
            |(m, nodes)| shard_coord::Request::Released(Released {
                move_id: MoveId(m),
                nodes
            })
        ),
    ]
}

pub fn shard_coord_reply() -> impl Strategy<Value = Reply<shard_coord::Response>> {
    let format = prop::sample::select(vec![
        ClusterFormat::Grug,
        ClusterFormat::Jgf,
        ClusterFormat::Rv1exec,
        ClusterFormat::Spec,
    ]);
    let assignment = (
        any::<u16>(),
        format,
        text(),
        queue_config(),
        vec(node_gen(), 0..3),
        vec((any::<u64>().prop_map(MoveId), incoming_node()), 0..2),
        node_flags(),
    )
        .prop_map(
            |(generator_id, format, text, queue, owned, incoming, flags)| Assignment {
                limits: Default::default(),
                allowances: Vec::new(),
                fairshare: None,
                generator_id,
                cluster: ClusterDescription {
                    format,
                    text,
                    load_allowlist: Vec::new(),
                },
                queue,
                owned,
                incoming,
                flags,
            },
        );
    let response = prop_oneof![
        assignment.prop_map(|a| shard_coord::Response::Registered(Box::new(a))),
        Just(shard_coord::Response::Ack),
    ];
    prop_oneof![response.prop_map(Ok), refusal().prop_map(Err)]
}

/// Admin flags of a few nodes.
pub fn node_flags() -> impl Strategy<Value = std::collections::BTreeMap<String, NodeFlags>> {
    proptest::collection::btree_map(
        name(),
        (option::of(text()), option::of(text()))
            .prop_map(|(down, drained)| NodeFlags { down, drained }),
        0..3,
    )
}

pub fn coord_shard_request() -> impl Strategy<Value = coord_shard::Request> {
    prop_oneof![
        (any::<u64>(), vec(node_gen(), 0..3)).prop_map(|(m, nodes)| coord_shard::Request::Release(
            Release {
                move_id: MoveId(m),
                nodes
            }
        )),
        (any::<u64>(), vec(incoming_node(), 0..3)).prop_map(|(m, nodes)| {
            coord_shard::Request::Incoming(Incoming {
                move_id: MoveId(m),
                nodes,
            })
        }),
        (any::<u64>(), vec(node_gen(), 0..3), node_flags()).prop_map(|(m, nodes, flags)| {
            coord_shard::Request::Acquire(Acquire {
                move_id: MoveId(m),
                nodes,
                flags,
            })
        }),
        (any::<u64>(), vec(node_gen(), 0..3)).prop_map(|(m, nodes)| coord_shard::Request::Reclaim(
            Reclaim {
                move_id: MoveId(m),
                nodes
            }
        )),
        (any::<u64>(), vec(node_gen(), 0..3)).prop_map(|(m, nodes)| {
            coord_shard::Request::Withdraw(Withdraw {
                move_id: MoveId(m),
                nodes,
            })
        }),
        (any::<u64>(), vec(node_gen(), 0..3)).prop_map(|(m, nodes)| {
            coord_shard::Request::CancelJobs(CancelJobs {
                move_id: MoveId(m),
                nodes,
            })
        }),
        (any::<bool>(), any::<bool>()).prop_map(|(enabled, started)| {
            coord_shard::Request::SetQueueState { enabled, started }
        }),
        query().prop_map(coord_shard::Request::Jobs),
        Just(coord_shard::Request::DisableIfIdle),
        (
            any::<u64>(),
            option::of((any::<u64>(), vec((name(), 0..=1_000_000u32), 0..3)))
        )
            .prop_map(|(usage_seq, table)| coord_shard::Request::FairShare(
                fairshare::FairShareUpdate {
                    usage_seq,
                    factors: table.map(|(version, factors)| fairshare::FactorTable {
                        version,
                        factors: factors
                            .into_iter()
                            .map(|(user, factor_ppm)| fairshare::UserFactor { user, factor_ppm })
                            .collect(),
                    }),
                }
            )),
        (vec(name(), 0..4), any::<bool>(), name()).prop_map(|(nodes, down, reason)| {
            coord_shard::Request::SetNodeState {
                nodes,
                down,
                reason,
            }
        }),
        (vec(name(), 0..4), any::<bool>(), name()).prop_map(|(nodes, drained, reason)| {
            coord_shard::Request::SetNodeDrain {
                nodes,
                drained,
                reason,
            }
        }),
        (queue_config(), vec(node_gen(), 0..3), node_flags()).prop_map(
            |(config, granted, flags)| coord_shard::Request::Reconfigure(Box::new(Reconfigure {
                config,
                granted,
                flags,
            }))
        ),
    ]
}

pub fn coord_shard_reply() -> impl Strategy<Value = Reply<coord_shard::Response>> {
    let free = prop_oneof![Just(FreeAt::Now), any::<u64>().prop_map(FreeAt::Expected)];
    let state = (node_gen(), free, vec(fluid(), 0..3))
        .prop_map(|(node, free, jobs)| ReleaseState { node, free, jobs });
    let response = prop_oneof![
        (vec(state, 0..3), vec(stale(), 0..2))
            .prop_map(|(nodes, stale)| coord_shard::Response::Releasing { nodes, stale }),
        vec(stale(), 0..2).prop_map(|stale| coord_shard::Response::Ack { stale }),
        job_list().prop_map(coord_shard::Response::Jobs),
    ];
    prop_oneof![response.prop_map(Ok), refusal().prop_map(Err)]
}

pub fn hello() -> impl Strategy<Value = (Hello, HelloReply)> {
    let reply = prop_oneof![
        (any::<u32>(), text(), peer()).prop_map(|(protocol_version, software, you)| {
            HelloReply::Welcome {
                protocol_version,
                software,
                you,
            }
        }),
        (any::<u32>(), any::<u32>()).prop_map(|(min, max)| HelloReply::Unsupported { min, max }),
    ];
    (
        (any::<u32>(), text()).prop_map(|(protocol_version, software)| Hello {
            protocol_version,
            software,
        }),
        reply,
    )
}
