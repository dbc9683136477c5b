use std::net::SocketAddr;
use std::path::Path;

use shardsched_resource::DEFAULT_CLUSTER_TOML;
use shardsched_wire::msg::client_coord::QueueAction;
use shardsched_wire::msg::shard_coord::{HeldNode, Register, ShardStatus};
use shardsched_wire::msg::{
    ClusterFormat, Generation, JobList, JobState, JobSummary, JobsQuery, NodeGen, NodeState,
    NodeStatus, QueueStatus, RefusalCode, UserFilter,
};
use shardsched_wire::{Fluid, Peer, Role};

use super::*;
use crate::records::Durable;
use shardsched_wire::msg::{MatchPolicy, QueuePolicy};

const EPOCH0: u64 = 1000;

/// A core over `config` (the embedded default's queues) with batch and debug connected
/// (connections 1 and 2), its journal written: what the policy tests start from.
pub(super) fn batch_and_debug_connected(config: Config) -> (Core, Durable) {
    let (mut core, mut durable) = Core::new(config, &Durable::default(), 1000).expect("core");
    for (conn, queue) in [(1, "batch"), (2, "debug")] {
        let register = Register {
            queue: queue.into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 7000 + conn as u16)),
            held: Vec::new(),
            last_job_id: None,
        };
        core.register(ConnId(conn), queue, register.listen, &register)
            .expect("registered");
    }
    write(&mut core, &mut durable);
    (core, durable)
}

/// Takes the core's journal write, if any, applies it to `durable`, and says it is done.
pub(super) fn write(core: &mut Core, durable: &mut Durable) {
    if let Some(w) = core.journal_take() {
        durable.apply(w.delta.clone()).expect("applies");
        core.journal_done(&w);
    }
}

fn default_core() -> Core {
    let config = Config::embedded_default().expect("default config");
    Core::new(config, &Durable::default(), EPOCH0)
        .expect("core")
        .0
}

fn core_from(text: &str) -> Core {
    let config = Config::parse(text, "test.toml", Path::new(".")).expect("config");
    Core::new(config, &Durable::default(), EPOCH0)
        .expect("core")
        .0
}

fn register(queue: &str, port: u16) -> Register {
    Register {
        queue: queue.to_owned(),
        listen: SocketAddr::from(([127, 0, 0, 1], port)),
        held: Vec::new(),
        last_job_id: None,
    }
}

fn remote() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 50_000))
}

fn refusal<T: std::fmt::Debug>(result: Result<T, RegisterError>) -> Refusal {
    match result {
        Err(RegisterError::Refused(r)) => r,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn user(name: &str) -> Peer {
    Peer::new(Role::User, name).expect("peer")
}

#[test]
fn default_ownership_and_generator_ids() {
    let core = default_core();
    assert_eq!(core.owned_by("batch").len(), 112);
    assert_eq!(core.owned_by("debug").len(), 16);
    assert!(
        core.owned_by("standby").is_empty(),
        "stopped, over batch's nodes"
    );
    assert_eq!(core.owner_of("node0"), Some("batch"));
    assert_eq!(core.owner_of("node112"), Some("debug"));
    assert_eq!(core.generation_of("node5"), Some(Generation(1)));
    let ids: Vec<u16> = ["batch", "debug", "standby"]
        .iter()
        .map(|q| core.generator_id(q).expect("id"))
        .collect();
    assert_eq!(ids, [1, 2, 3]);
    assert_eq!(core.epoch(), EPOCH0);
}

#[test]
fn stopped_queues_keep_free_nodes_and_unassigned_nodes_stay_unassigned() {
    let core = core_from(
        "default_queue = \"a\"\n\
         [queues.a]\nnodes = \"node[0-9]\"\n\
         [queues.b]\nnodes = \"node[5-14]\"\nstarted = false\n\
         [queues.c]\nnodes = \"node[12-19]\"\nstarted = false\n",
    );
    assert_eq!(core.owned_by("a").len(), 10);
    // b gets what a does not define; c what neither a nor b (earlier by name) took.
    assert_eq!(
        core.owned_by("b"),
        (10..15).map(|i| format!("node{i}")).collect::<Vec<_>>()
    );
    assert_eq!(
        core.owned_by("c"),
        (15..20).map(|i| format!("node{i}")).collect::<Vec<_>>()
    );
    assert_eq!(core.owner_of("node20"), None);
    assert_eq!(core.generation_of("node20"), Some(Generation(0)));
}

#[test]
fn started_queues_may_overlap_and_the_first_by_name_owns_the_shared_nodes() {
    let mut config = Config::embedded_default().expect("default");
    for q in &mut config.queues {
        q.started = true;
    }
    let (core, _) = Core::new(config, &Durable::default(), 0).expect("overlap is allowed");
    assert_eq!(core.owned_by("batch").len(), 112);
    assert_eq!(core.owner_of("node96"), Some("batch"), "batch < debug");
    assert_eq!(core.owned_by("debug").len(), 16);
    assert!(core.owned_by("standby").is_empty());
}

#[test]
fn a_queue_starts_with_what_it_owns_and_says_what_take_would_move() {
    let mut core = default_core();
    core.queue_control(0, "debug", QueueAction::Stop)
        .expect("stop");
    // debug owns node[112-127]; node[96-111] of its definition are batch's (started).
    let c = core
        .queue_control(0, "debug", QueueAction::Start { take: false })
        .expect("it owns nodes: it starts");
    assert_eq!(c.move_id, None);
    assert_eq!(
        c.notes,
        ["debug started without node[96-111] (batch owns them; \
          `shardsched queue start debug --take` would move them)"]
    );
    assert_eq!(core.queue_flags("debug"), Some((true, true)));
    assert_eq!(core.owner_of("node96"), Some("batch"));
    // --take moves them: batch and debug both run.
    core.queue_control(0, "debug", QueueAction::Stop)
        .expect("stop");
    let c = core
        .queue_control(7, "debug", QueueAction::Start { take: true })
        .expect("take");
    assert!(c.move_id.is_some() && c.notes.is_empty(), "{c:?}");
    assert_eq!(core.owner_of("node96"), Some("debug"));
}

#[test]
fn generations_and_generator_ids_survive_restarts_and_config_edits() {
    let config = Config::embedded_default().expect("default");
    let (_, first) = Core::new(config.clone(), &Durable::default(), 0).expect("core");
    let read = first.reread();
    assert_eq!(read, first);

    // Same configuration: nothing changes.
    let (_, second) = Core::new(config, &read, 0).expect("core");
    assert_eq!(second, first);

    // batch shrinks, a new queue takes node[100-111], standby is gone.
    let edited = "default_queue = \"batch\"\n\
        [queues.batch]\nnodes = \"node[0-99]\"\n\
        [queues.debug]\nnodes = \"node[112-127]\"\n\
        [queues.extra]\nnodes = \"node[100-111]\"\n";
    let config = Config::parse(edited, "edited.toml", Path::new(".")).expect("config");
    let (core, third) = Core::new(config, &second, 0).expect("core");
    assert_eq!(core.generation_of("node0"), Some(Generation(1)));
    assert_eq!(
        core.generation_of("node100"),
        Some(Generation(2)),
        "owner changed"
    );
    assert_eq!(core.owner_of("node100"), Some("extra"));
    assert_eq!(core.generator_id("batch"), Some(1));
    assert_eq!(
        core.generator_id("extra"),
        Some(4),
        "a fresh id, never standby's"
    );
    assert_eq!(
        third.generators.get("standby"),
        Some(&3),
        "retired ids stay taken"
    );
}

#[test]
fn registration_and_routing_epochs() {
    let mut core = default_core();
    let routes = core.routes();
    assert_eq!(routes.epoch, EPOCH0);
    assert_eq!(routes.default_queue.as_deref(), Some("batch"));
    assert!(routes.routes.is_empty());
    assert_eq!(
        routes.offline,
        ["batch", "debug", "standby"],
        "no shard yet"
    );

    let a = core
        .register(ConnId(1), "batch", remote(), &register("batch", 7001))
        .expect("registered");
    assert_eq!(a.generator_id, 1);
    assert_eq!(a.cluster.format, ClusterFormat::Spec);
    assert_eq!(a.cluster.text, DEFAULT_CLUSTER_TOML);
    assert_eq!(a.owned.len(), 112);
    assert_eq!(
        a.owned[0],
        NodeGen {
            node: "node0".into(),
            generation: Generation(1)
        }
    );
    assert_eq!(a.queue.name, "batch");
    assert_eq!(a.queue.queue_policy, QueuePolicy::Easy);
    assert_eq!(a.queue.match_policy, MatchPolicy::First);
    assert_eq!(a.queue.definition.len(), 112);
    assert_eq!(a.queue.max_duration_ms, 24 * 3_600_000);
    assert!(a.queue.started && a.queue.enabled);
    assert!(a.incoming.is_empty());
    let epoch = core.epoch();
    assert_eq!(epoch, EPOCH0 + 1);
    let routes = core.routes();
    assert_eq!(routes.routes.len(), 1);
    assert_eq!(routes.offline, ["debug", "standby"]);
    assert_eq!(
        routes.routes[0].address,
        SocketAddr::from(([127, 0, 0, 1], 7001))
    );
    assert_eq!(routes.routes[0].generator_id, 1);

    // Registering again on the same connection and address changes nothing visible.
    core.register(ConnId(1), "batch", remote(), &register("batch", 7001))
        .expect("again");
    assert_eq!(core.epoch(), epoch);

    // A shard listening on every interface is reached where it came from.
    let mut any = register("debug", 7002);
    any.listen = SocketAddr::from(([0, 0, 0, 0], 7002));
    let from = SocketAddr::from(([10, 1, 2, 3], 40_000));
    core.register(ConnId(2), "debug", from, &any)
        .expect("debug");
    assert_eq!(
        core.shard("debug").map(|l| l.address),
        Some(SocketAddr::from(([10, 1, 2, 3], 7002)))
    );
    assert_eq!(core.epoch(), epoch + 1);

    // Disconnecting takes the route away; an unknown connection changes nothing.
    assert_eq!(core.disconnected(ConnId(99)), None);
    assert_eq!(core.disconnected(ConnId(1)).as_deref(), Some("batch"));
    assert_eq!(core.epoch(), epoch + 2);
    let queues: Vec<String> = core.routes().routes.into_iter().map(|r| r.queue).collect();
    assert_eq!(queues, ["debug"]);
}

#[test]
fn registration_refusals() {
    let mut core = default_core();
    let r = refusal(core.register(ConnId(1), "debug", remote(), &register("batch", 7001)));
    assert_eq!(r.code, RefusalCode::Forbidden);
    assert!(
        r.message
            .contains("shard debug may not register for queue batch"),
        "{r}"
    );

    let r = refusal(core.register(ConnId(1), "gpu", remote(), &register("gpu", 7001)));
    assert_eq!(r.code, RefusalCode::NotFound);
    assert!(
        r.message
            .contains("no queue named \"gpu\" (queues: batch, debug, standby)"),
        "{r}"
    );

    let r = refusal(core.register(ConnId(1), "batch", remote(), &register("batch", 0)));
    assert_eq!(r.code, RefusalCode::Invalid);

    core.register(ConnId(1), "batch", remote(), &register("batch", 7001))
        .expect("first");
    let epoch = core.epoch();
    assert_eq!(
        core.register(ConnId(2), "batch", remote(), &register("batch", 7009)),
        Err(RegisterError::Held {
            queue: "batch".into(),
            conn: ConnId(1)
        })
    );
    let r = core.refuse_second_shard("batch");
    assert_eq!(r.code, RefusalCode::Unavailable);
    assert!(
        r.message
            .contains("queue batch already has a live shard (at 127.0.0.1:7001)"),
        "{r}"
    );
    assert_eq!(
        core.epoch(),
        epoch,
        "a refused registration changes nothing"
    );

    // Held nodes and a last job id are facts reported, not claims: still registered.
    let mut restarted = register("debug", 7002);
    restarted.held = vec![HeldNode {
        node: NodeGen {
            node: "node0".into(),
            generation: Generation(1),
        },
        allocated: true,
    }];
    restarted.last_job_id = Some(Fluid::from_parts(5, 9, 0).expect("fluid"));
    core.register(ConnId(3), "debug", remote(), &restarted)
        .expect("registered");
}

/// A report of `queue`'s shard, numbered after every report made before (a link drops
/// a report numbered at or below the last one it applied).
fn report(queue: &str, nodes: &[(&str, NodeState, u32)]) -> ShardStatus {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    ShardStatus {
        seq: SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        allowances: Vec::new(),
        usage: None,
        factors_version: 0,
        time_ms: 5,
        queue: QueueStatus {
            name: queue.into(),
            enabled: true,
            started: true,
            queue_policy: shardsched_wire::msg::QueuePolicy::Easy,
            match_policy: shardsched_wire::msg::MatchPolicy::First,
            nodes_defined: 0,
            nodes_owned: 0,
            nodes_up: 0,
            jobs_pending: 3,
            jobs_running: 2,
            online: true,
            definition: String::new(),
            owned: String::new(),
            reason: String::new(),
            pending_reasons: Default::default(),
        },
        nodes: nodes
            .iter()
            .map(|(name, state, jobs)| NodeStatus {
                name: (*name).into(),
                queue: Some(queue.into()),
                state: *state,
                generation: Generation(1),
                jobs_running: *jobs,
                reason: None,
                usage: Default::default(),
            })
            .collect(),
        nodes_complete: true,
        nodes_gone: Vec::new(),
        waiting_on: Vec::new(),
    }
}

#[test]
fn queue_and_resource_lists_keep_intent_and_observation_apart() {
    let mut core = default_core();
    let offline = core.queue_list();
    assert_eq!(offline.len(), 3);
    assert!(
        offline.iter().all(|q| !q.started),
        "no shard connected: not running"
    );
    assert_eq!(offline[0].nodes_owned, 112);
    assert_eq!(offline[2].nodes_defined, 112);
    assert_eq!(offline[2].nodes_owned, 0);
    assert!(offline.iter().all(|q| !q.online));

    // A status report before registering is refused.
    let early = core.status(ConnId(1), "batch", report("batch", &[]));
    assert_eq!(early.map_err(|r| r.code), Err(RefusalCode::Unavailable));

    core.register(ConnId(1), "batch", remote(), &register("batch", 7001))
        .expect("registered");
    let nodes = [
        ("node0", NodeState::Up, 2),
        ("node1", NodeState::Drained, 0),
        ("node2", NodeState::Up, 0),
        ("nosuchnode", NodeState::Up, 0),
    ];
    core.status(ConnId(1), "batch", report("batch", &nodes))
        .expect("stored");
    let batch = &core.queue_list()[0];
    assert!(batch.started && batch.enabled && batch.online);
    assert_eq!(
        (batch.nodes_up, batch.jobs_pending, batch.jobs_running),
        (2, 3, 2)
    );

    let all = core.resources(None).expect("all");
    assert_eq!(all.len(), 128);
    assert_eq!(all[0].state, NodeState::Up);
    assert_eq!(all[0].jobs_running, 2);
    assert_eq!(all[1].state, NodeState::Drained);
    assert_eq!(
        all[3].state,
        NodeState::Down,
        "not reported: unknown, shown down"
    );
    assert_eq!(all[112].queue.as_deref(), Some("debug"));
    assert_eq!(all[112].state, NodeState::Down, "debug's shard is offline");
    let debug = core.resources(Some("debug")).expect("debug");
    assert_eq!(debug.len(), 16);
    assert!(core.resources(Some("standby")).expect("standby").is_empty());
    assert_eq!(
        core.resources(Some("x")).map_err(|r| r.code),
        Err(RefusalCode::NotFound)
    );

    // A change to the last report: node1 is up again, node2 no longer reported; node0 is
    // not in it and stays as it was.
    let mut change = report("batch", &[("node1", NodeState::Up, 1)]);
    change.nodes_complete = false;
    change.nodes_gone = vec!["node2".into(), "nosuchnode".into()];
    core.status(ConnId(1), "batch", change).expect("stored");
    let all = core.resources(None).expect("all");
    assert_eq!((all[0].state, all[0].jobs_running), (NodeState::Up, 2));
    assert_eq!((all[1].state, all[1].jobs_running), (NodeState::Up, 1));
    assert_eq!(
        all[2].state,
        NodeState::Down,
        "gone: not reported, shown down"
    );
    // A report that arrives after a later one (its answer timed out, the shard moved
    // on) is dropped: node1 stays as the later report had it.
    let mut late = report("batch", &[("node1", NodeState::Drained, 0)]);
    late.seq = 1;
    core.status(ConnId(1), "batch", late)
        .expect("dropped, not refused");
    let all = core.resources(None).expect("all");
    assert_eq!((all[1].state, all[1].jobs_running), (NodeState::Up, 1));
    // A whole report replaces every row.
    core.status(
        ConnId(1),
        "batch",
        report("batch", &[("node2", NodeState::Up, 0)]),
    )
    .expect("stored");
    let all = core.resources(None).expect("all");
    assert_eq!(
        [all[0].state, all[1].state, all[2].state],
        [NodeState::Down, NodeState::Down, NodeState::Up]
    );

    // The shard goes away: its observations go with it; intent stays.
    core.disconnected(ConnId(1));
    let all = core.resources(None).expect("all");
    assert_eq!(all[0].state, NodeState::Down);
    assert_eq!(all[0].queue.as_deref(), Some("batch"));
    assert!(!core.queue_list()[0].started);

    let mut free = core_from("[queues.a]\nnodes = \"node[0-9]\"\n");
    assert_eq!(
        free.resources(None).expect("all")[10].state,
        NodeState::NotOwned
    );
    assert_eq!(free.resources(None).expect("all")[10].queue, None);
    assert!(free.queue_control(0, "a", QueueAction::Stop).is_ok());
}

#[test]
fn queue_control() {
    let mut core = default_core();
    let epoch = core.epoch();
    // No shard connected: the intent changes, nobody to tell.
    let c = core
        .queue_control(0, "batch", QueueAction::Disable)
        .expect("disable");
    assert_eq!(
        c,
        Control {
            changed: true,
            notify: None,
            move_id: None,
            notes: Vec::new(),
        }
    );
    assert_eq!(core.queue_flags("batch"), Some((false, true)));
    assert_eq!(core.epoch(), epoch + 1);
    // A repeat changes nothing.
    let c = core
        .queue_control(0, "batch", QueueAction::Disable)
        .expect("again");
    assert!(!c.changed);
    assert_eq!(core.epoch(), epoch + 1);

    core.register(ConnId(7), "batch", remote(), &register("batch", 7001))
        .expect("registered");
    assert!(!core.routes().routes[0].enabled);
    let c = core
        .queue_control(0, "batch", QueueAction::Stop)
        .expect("stop");
    assert_eq!(
        c.notify,
        Some(QueueCommand {
            queue: "batch".into(),
            conn: ConnId(7),
            enabled: false,
            started: false
        })
    );
    // The assignment of a re-registering shard carries the flags.
    let a = core
        .register(ConnId(7), "batch", remote(), &register("batch", 7001))
        .expect("again");
    assert!(!a.queue.started && !a.queue.enabled);

    // standby overlaps batch's nodes and owns none: it would start owning nothing, so it is
    // refused, saying who owns them and what moves them in.
    core.queue_control(0, "batch", QueueAction::Start { take: false })
        .expect("start batch");
    let r = core
        .queue_control(0, "standby", QueueAction::Start { take: false })
        .expect_err("owns nothing");
    assert_eq!(r.code, RefusalCode::Policy);
    assert!(
        r.message
            .contains("queue standby would start owning no node (batch owns node[0-111])"),
        "{r}"
    );
    assert!(
        r.message
            .contains("`shardsched queue start standby --take`"),
        "{r}"
    );
    assert_eq!(core.queue_flags("standby"), Some((true, false)));

    let r = core
        .queue_control(0, "nope", QueueAction::Enable)
        .expect_err("unknown");
    assert_eq!(r.code, RefusalCode::NotFound);
    let r = core
        .move_nodes(0, &["node999".into()], "debug")
        .expect_err("unknown");
    assert_eq!(r.code, RefusalCode::NotFound);
}

fn job(id: u64, submit_ms: u64) -> JobSummary {
    JobSummary {
        id: Fluid(id),
        queue: "batch".into(),
        owner: "alice".into(),
        name: "sleep".into(),
        state: JobState::Pending,
        urgency: 16,
        nodes: Vec::new(),
        nodes_requested: Some(1),
        submit_ms,
        start_ms: None,
        end_ms: None,
        duration_ms: 60_000,
        reason: String::new(),
        reserved_ms: None,
        array: None,
        begin_ms: None,
        priority: None,
    }
}

#[test]
fn jobs_fan_out_plan_and_merge() {
    let mut core = default_core();
    core.register(ConnId(1), "batch", remote(), &register("batch", 7001))
        .expect("registered");
    core.register(ConnId(2), "debug", remote(), &register("debug", 7002))
        .expect("registered");
    let query = JobsQuery {
        queue: None,
        user: UserFilter::Mine,
        include_inactive: false,
        limit: 0,
        states: Vec::new(),
        name: None,
    };
    let plan = core.jobs_plan(&user("alice"), &query).expect("plan");
    assert_eq!(
        plan.query.user,
        UserFilter::Named("alice".into()),
        "the shard sees the coordinator"
    );
    assert_eq!(plan.limit, shardsched_wire::limits::JOBS_PER_RESPONSE_MAX);
    assert_eq!(
        plan.ask,
        [("batch".into(), ConnId(1)), ("debug".into(), ConnId(2))]
    );
    assert_eq!(plan.offline, ["standby"]);

    let one = JobsQuery {
        queue: Some("standby".into()),
        limit: 2,
        ..query.clone()
    };
    let r = core.jobs_plan(&user("alice"), &one).expect_err("offline");
    assert!(
        r.message.contains("standby's shard is not connected"),
        "{r}"
    );
    let r = core
        .jobs_plan(
            &user("alice"),
            &JobsQuery {
                queue: Some("x".into()),
                ..query.clone()
            },
        )
        .expect_err("unknown");
    assert_eq!(r.code, RefusalCode::NotFound);

    let only_batch = JobsQuery {
        queue: Some("batch".into()),
        limit: 2,
        ..query
    };
    let plan = core.jobs_plan(&user("alice"), &only_batch).expect("plan");
    assert_eq!(plan.ask.len(), 1);
    assert!(plan.offline.is_empty());
    let merged = merge_jobs(
        &plan,
        vec![
            JobList {
                jobs: vec![job(1, 10), job(5, 30)],
                truncated: false,
            },
            JobList {
                jobs: vec![job(3, 20), job(4, 30)],
                truncated: false,
            },
        ],
        0,
    );
    let ids: Vec<u64> = merged.jobs.iter().map(|j| j.id.0).collect();
    assert_eq!(ids, [5, 4], "newest first, cut at the limit");
    assert!(merged.truncated);
    let whole = merge_jobs(
        &plan,
        vec![JobList {
            jobs: vec![job(1, 1)],
            truncated: false,
        }],
        0,
    );
    assert!(!whole.truncated);
    assert!(
        merge_jobs(&plan, Vec::new(), 1).truncated,
        "a shard that failed"
    );
}

#[test]
fn node_flags_have_bounds_so_every_message_carrying_them_fits_a_frame() {
    use shardsched_wire::limits::{FRAME_BYTES_MAX, NODE_FLAGS_BYTES_MAX, REASON_BYTES_MAX};
    let mut core = core_from(
        "default_queue = \"a\"\n\
         [cluster.inline]\nname = \"big\"\n\
         [[cluster.inline.nodes]]\nhosts = \"node[0-9999]\"\nsockets = 1\ncores_per_socket = 1\n\
         [queues.a]\nnodes = \"node[0-9999]\"\n",
    );
    let all: Vec<String> = (0..10_000).map(|i| format!("node{i}")).collect();
    let too_long = "r".repeat(REASON_BYTES_MAX + 1);
    let refused = core
        .set_node_flag(&all[..1], NodeFlag::Drained, true, &too_long)
        .expect_err("a reason past its bound");
    assert_eq!(refused.code, RefusalCode::Invalid);
    let longest = "r".repeat(REASON_BYTES_MAX);
    core.set_node_flag(&all, NodeFlag::Drained, true, &longest)
        .expect("10,000 nodes drained with the longest reason fit");
    let refused = core
        .set_node_flag(&all, NodeFlag::Down, true, &longest)
        .expect_err("past the bound of all flags together");
    assert!(
        refused
            .message
            .contains(&format!("more than the {NODE_FLAGS_BYTES_MAX}-byte limit")),
        "{}",
        refused.message
    );
    assert_eq!(
        core.node_flags("node0").and_then(|f| f.down),
        None,
        "nothing set"
    );
    core.set_node_flag(&all, NodeFlag::Down, true, "psu")
        .expect("a short reason fits");
    let assignment = core
        .register(ConnId(1), "a", remote(), &register("a", 7001))
        .expect("registered");
    assert_eq!(assignment.flags.len(), 10_000);
    assert!(shardsched_wire::codec::encoded_len(&assignment) < FRAME_BYTES_MAX / 2);
}

/// `resource drain node[0-1]` after `resource drain node0 --reason "bad dimm"` keeps why
/// node0 was drained (it used to erase it); a new reason replaces the old one.
#[test]
fn a_flag_set_again_without_a_reason_keeps_the_earlier_reason() {
    let mut core = default_core();
    core.register(ConnId(1), "batch", remote(), &register("batch", 7001))
        .expect("registered");
    let nodes: Vec<String> = core.owned_by("batch")[..2].to_vec();
    let reason = |core: &Core, n: &str| core.node_flags(n).and_then(|f| f.drained);
    core.set_node_flag(&nodes[..1], NodeFlag::Drained, true, "bad dimm")
        .expect("drain");
    let plan = core
        .set_node_flag(&nodes, NodeFlag::Drained, true, "")
        .expect("drain again");
    assert_eq!(reason(&core, &nodes[0]).as_deref(), Some("bad dimm"));
    assert_eq!(reason(&core, &nodes[1]).as_deref(), Some(""));
    // The shard is told each node's own reason.
    let told: Vec<(&str, &[String])> = plan
        .iter()
        .map(|((_, r), (_, n))| (r.as_str(), n.as_slice()))
        .collect();
    assert_eq!(told, [("", &nodes[1..]), ("bad dimm", &nodes[..1])]);

    core.set_node_flag(
        &nodes[..1],
        NodeFlag::Drained,
        true,
        "dimm replaced, testing",
    )
    .expect("new reason");
    assert_eq!(
        reason(&core, &nodes[0]).as_deref(),
        Some("dimm replaced, testing")
    );
    core.set_node_flag(&nodes[..1], NodeFlag::Drained, false, "")
        .expect("undrain");
    assert_eq!(reason(&core, &nodes[0]), None);
}

#[test]
fn a_resource_list_longer_than_a_reply_comes_in_pages_that_cover_it_once() {
    let mut core = default_core();
    let nodes: Vec<String> = (0..128).map(|i| format!("node{i}")).collect();
    core.set_node_flag(&nodes, NodeFlag::Down, true, &"r".repeat(200))
        .expect("down");
    let rows = core.resources(None).expect("rows");
    let budget = 10 * shardsched_wire::codec::encoded_len(&rows[0]);
    let (mut seen, mut start, mut pages) = (Vec::new(), 0, 0);
    loop {
        let (page, next) = core.resources_page(None, start, budget).expect("a page");
        pages += 1;
        assert!(shardsched_wire::codec::encoded_len(&page) <= budget + 8);
        seen.extend(page);
        match next {
            Some(next) => start = next,
            None => break,
        }
    }
    assert_eq!(seen, rows);
    assert!(pages >= 12, "{pages} pages");
}
