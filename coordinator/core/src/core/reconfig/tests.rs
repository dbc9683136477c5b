use std::net::SocketAddr;
use std::path::Path;

use shardsched_wire::msg::shard_coord::{Register, ShardStatus};
use shardsched_wire::msg::{MatchPolicy, QueuePolicy, QueueStatus};

use super::*;
use crate::config::Config;
use shardsched_wire::msg::Generation;

/// Cluster of the embedded default (node0..node127): a (node[0-9], started, default),
/// b (node[10-19], started), node[20-127] unassigned.
const TWO_QUEUES: &str = "default_queue = \"a\"\n\
    [queues.a]\nnodes = \"node[0-9]\"\npolicy = \"easy\"\n\
    [queues.b]\nnodes = \"node[10-19]\"\n";

fn core(text: &str) -> Core {
    let config = Config::parse(text, "test.toml", Path::new(".")).expect("config");
    Core::new(config, &Durable::default(), 1).expect("core").0
}

fn spec(name: &str) -> QueueSpec {
    QueueSpec {
        name: name.into(),
        ..QueueSpec::default()
    }
}

fn def(core: &Core, name: &str, nodes: &str, stopped: bool) -> QueueDef {
    let spec = QueueSpec {
        nodes: Some(nodes.into()),
        stopped,
        ..spec(name)
    };
    queue_table::queue_def(core.config(), None, &spec).expect("definition")
}

/// Registers `queue`'s shard on connection `conn` and reports `pending` + `running` jobs.
fn connect(core: &mut Core, queue: &str, conn: u64, pending: u32, running: u32) {
    let register = Register {
        queue: queue.into(),
        listen: SocketAddr::from(([127, 0, 0, 1], 4000 + conn as u16)),
        held: Vec::new(),
        last_job_id: None,
    };
    let remote = SocketAddr::from(([127, 0, 0, 1], 5000));
    core.register(ConnId(conn), queue, remote, &register)
        .expect("registered");
    let status = ShardStatus {
        seq: 1,
        allowances: Vec::new(),
        usage: None,
        factors_version: 0,
        time_ms: 1,
        queue: QueueStatus {
            name: queue.into(),
            enabled: true,
            started: true,
            queue_policy: shardsched_wire::msg::QueuePolicy::Fcfs,
            match_policy: shardsched_wire::msg::MatchPolicy::First,
            nodes_defined: 0,
            nodes_owned: 0,
            nodes_up: 0,
            jobs_pending: pending,
            jobs_running: running,
            online: true,
            definition: String::new(),
            owned: String::new(),
            reason: String::new(),
            pending_reasons: Default::default(),
        },
        nodes: Vec::new(),
        nodes_complete: true,
        nodes_gone: Vec::new(),
        waiting_on: Vec::new(),
    };
    core.status(ConnId(conn), queue, status).expect("status");
}

#[test]
fn adding_a_queue_gives_it_the_unassigned_nodes_of_its_definition_and_a_fresh_generator_id() {
    let mut core = core(TWO_QUEUES);
    let epoch = core.epoch();
    let before = core.generation_of("node20").expect("node");
    let c = def(&core, "c", "node[15-24]", true);
    let done = core.add_queue(c).expect("added");
    assert!(done.journal);
    assert!(
        done.changes.iter().any(|c| c.contains("added queue c")),
        "{:?}",
        done.changes
    );
    // node[15-19] stay b's; node[20-24] were free.
    assert_eq!(
        core.owned_by("c"),
        (20..25).map(|i| format!("node{i}")).collect::<Vec<_>>()
    );
    assert_eq!(core.owner_of("node15"), Some("b"));
    assert_eq!(core.generation_of("node20"), Some(Generation(before.0 + 1)));
    assert_eq!(core.generator_id("c"), Some(3));
    assert_eq!(core.queue_flags("c"), Some((true, false)));
    assert!(core.epoch() > epoch);
    assert!(core.queue_list().iter().any(|q| q.name == "c"));
    let durable = core.durable_state();
    assert_eq!(durable.nodes["node20"].owner.as_deref(), Some("c"));
    let table = durable.queue_table.expect("run-time table kept");
    assert!(
        table
            .queues
            .iter()
            .any(|q| q.name == "c" && q.nodes == "node[15-24]")
    );
}

#[test]
fn additions_that_break_the_configuration_rules_are_refused_and_change_nothing() {
    let mut core = core(TWO_QUEUES);
    let same = def(&core, "a", "node[30-31]", false);
    let refusal = core.add_queue(same).expect_err("name taken");
    assert!(refusal.message.contains("already exists"), "{refusal}");
    // A name that is no shard name: refused, naming the change, not the file the
    // coordinator started from.
    let unnamed = def(&core, "-c", "node[30-31]", false);
    let refusal = core.add_queue(unnamed).expect_err("bad name");
    assert_eq!(refusal.code, RefusalCode::Invalid);
    assert!(!refusal.message.contains("test.toml"), "{refusal}");
    assert!(core.queue_flags("-c").is_none());
    let bad = QueueSpec {
        nodes: Some("node[500-501]".into()),
        ..spec("c")
    };
    let e = queue_table::queue_def(core.config(), None, &bad).expect_err("outside");
    assert!(e.contains("not in the cluster"), "{e}");
    let bad = QueueSpec {
        nodes: Some("node1".into()),
        default_duration: Some("2h".into()),
        max_duration: Some("1h".into()),
        ..spec("c")
    };
    let e = queue_table::queue_def(core.config(), None, &bad).expect_err("durations");
    assert!(e.contains("longer than max_duration"), "{e}");
    assert!(core.queue_flags("c").is_none());
    assert_eq!(core.durable_state().queue_table, None);
}

#[test]
fn updates_restart_only_the_changed_queues_shard_and_never_drop_owned_nodes() {
    let mut core = core(TWO_QUEUES);
    connect(&mut core, "a", 1, 2, 1);
    connect(&mut core, "b", 2, 0, 0);
    let change = QueueSpec {
        policy: Some(QueuePolicy::Conservative),
        queue_depth: Some(8),
        ..spec("a")
    };
    let done = core.update_queue(0, &change).expect("updated");
    assert_eq!(done.restart.len(), 1, "only a's shard restarts");
    assert_eq!(done.restart[0].queue, "a");
    assert_eq!(done.restart[0].conn, ConnId(1));
    assert_eq!(
        done.restart[0].change.config.queue_policy,
        QueuePolicy::Conservative
    );
    assert_eq!(done.restart[0].change.config.queue_depth, 8);
    assert_eq!(
        done.restart[0].change.config.match_policy,
        MatchPolicy::First,
        "unchanged field kept"
    );
    assert!(done.restart[0].change.granted.is_empty());
    assert!(
        done.changes
            .iter()
            .any(|c| c.contains("its shard applies it without a restart")),
        "a queue policy and depths are taken in place: {:?}",
        done.changes
    );
    // A match policy is not: the shard restarts.
    let matching = QueueSpec {
        match_policy: Some(MatchPolicy::LoNode),
        ..spec("a")
    };
    let done = core.update_queue(0, &matching).expect("updated");
    assert!(
        done.changes
            .iter()
            .any(|c| c.contains("its shard restarts")),
        "{:?}",
        done.changes
    );
    let listed = core.queue_list();
    let a = listed.iter().find(|q| q.name == "a").expect("a");
    assert_eq!(a.queue_policy, QueuePolicy::Conservative);

    // The same values again change nothing, restart nothing and write nothing.
    let again = core.update_queue(0, &change).expect("updated");
    assert!(again.restart.is_empty());
    assert!(!again.journal);
    assert_eq!(again.changes, ["nothing changed"]);

    // Growing b's definition over free nodes gives them to b; shrinking it below what it
    // owns is refused.
    let grow = QueueSpec {
        nodes: Some("node[10-21]".into()),
        ..spec("b")
    };
    let done = core.update_queue(0, &grow).expect("grown");
    assert_eq!(core.owner_of("node21"), Some("b"));
    assert_eq!(done.restart.len(), 1);
    assert_eq!(done.restart[0].change.config.definition.len(), 12);
    // The shard hears which nodes it was given, at their new generations, and takes the
    // new definition in place.
    let granted = &done.restart[0].change.granted;
    assert!(granted.iter().any(|n| n.node == "node21"), "{granted:?}");
    for n in granted {
        assert_eq!(core.owner_of(&n.node), Some("b"));
        assert_eq!(Some(n.generation), core.moves.generation_of(&n.node));
    }
    assert!(
        done.changes
            .iter()
            .any(|c| c.contains("applies it without a restart")),
        "{:?}",
        done.changes
    );
    let shrink = QueueSpec {
        nodes: Some("node[10-15]".into()),
        ..spec("b")
    };
    let refusal = core.update_queue(0, &shrink).expect_err("owned nodes");
    assert!(refusal.message.contains("node[16-21]"), "{refusal}");
    assert!(refusal.message.contains("move them first"), "{refusal}");
    assert_eq!(core.owned_by("b").len(), 12);
    let refusal = core.update_queue(0, &spec("zzz")).expect_err("unknown");
    assert_eq!(refusal.code, RefusalCode::NotFound);
}

#[test]
fn removal_is_refused_with_jobs_owned_nodes_offline_shard_or_default_queue() {
    let mut core = core(TWO_QUEUES);
    let refusal = core.remove_queue(1, "b", None).expect_err("offline");
    assert!(refusal.message.contains("not connected"), "{refusal}");
    connect(&mut core, "b", 2, 1, 0);
    let refusal = core.remove_queue(1, "b", None).expect_err("jobs");
    assert!(
        refusal.message.contains("has jobs (1 pending, 0 running)"),
        "{refusal}"
    );
    connect(&mut core, "b", 2, 0, 0);
    let refusal = core.remove_queue(1, "b", None).expect_err("owns nodes");
    assert!(refusal.message.contains("owns node[10-19]"), "{refusal}");
    assert!(refusal.message.contains("--give-to"), "{refusal}");
    connect(&mut core, "a", 1, 0, 0);
    let refusal = core.remove_queue(1, "a", Some("b")).expect_err("default");
    assert!(refusal.message.contains("default queue"), "{refusal}");
    assert!(core.queue_flags("b").is_some());
}

#[test]
fn removal_with_give_to_moves_the_nodes_and_a_removed_name_keeps_its_generator_id() {
    let mut core = core(
        "default_queue = \"a\"\n\
         [queues.a]\nnodes = \"node[0-19]\"\n\
         [queues.b]\nnodes = \"node[10-19]\"\nstarted = false\n",
    );
    // b is stopped over a's nodes: it owns nothing.
    // c is added stopped, over free nodes: it owns them, and a (started) may define them.
    let c = def(&core, "c", "node[30-31]", true);
    core.add_queue(c).expect("added");
    assert_eq!(core.owned_by("c").len(), 2);
    connect(&mut core, "c", 3, 0, 0);
    let c_id = core.generator_id("c").expect("id");
    // c owns node[30-31]; a does not define them, so giving them to a is refused by the move.
    let refusal = core
        .remove_queue(5, "c", Some("a"))
        .expect_err("not in a's definition");
    assert!(
        refusal.message.contains("node30") || refusal.message.contains("definition"),
        "{refusal}"
    );
    let grow = QueueSpec {
        nodes: Some("node[0-19,30-31]".into()),
        ..spec("a")
    };
    core.update_queue(0, &grow).expect("a grows");
    let done = core.remove_queue(5, "c", Some("a")).expect("move started");
    let move_id = done.move_id.expect("a move");
    assert!(
        done.changes[0].contains("node[30-31] move to a"),
        "{:?}",
        done.changes
    );
    assert!(
        !core.move_finished(move_id),
        "the driver waits for it, then removes c"
    );
    assert_eq!(core.owner_of("node30"), Some("a"), "intent moves at once");
    assert!(core.queue_flags("c").is_some(), "not removed yet");
    let refusal = core.remove_queue(6, "c", None).expect_err("in a move");
    assert!(refusal.message.contains("move"), "{refusal}");

    // b owns nothing and its shard reports no jobs: removed; its shard is told to stop.
    connect(&mut core, "b", 2, 0, 0);
    let done = core.remove_queue(7, "b", None).expect("removed");
    assert_eq!(done.stop.len(), 1);
    assert_eq!((done.stop[0].enabled, done.stop[0].started), (false, false));
    assert!(core.queue_flags("b").is_none());
    assert!(core.routes().queue("b").is_none());
    assert_eq!(core.owner_of("node30"), Some("a"));
    // Adding b again gives back b's id; a new name never reuses it.
    let b = def(&core, "b", "node[40-41]", true);
    core.add_queue(b).expect("b again");
    assert_eq!(core.generator_id("b"), Some(2));
    let d = def(&core, "d", "node[42-43]", true);
    core.add_queue(d).expect("d");
    let d_id = core.generator_id("d").expect("id");
    assert!(d_id > c_id && d_id != 2, "fresh id {d_id}");
}

#[test]
fn runtime_table_survives_a_restart_until_reload_makes_the_file_authoritative() {
    let file = Config::parse(TWO_QUEUES, "test.toml", Path::new(".")).expect("config");
    let (mut core, _) = Core::new(file.clone(), &Durable::default(), 1).expect("core");
    let c = def(&core, "c", "node[40-49]", false);
    core.add_queue(c).expect("added");
    connect(&mut core, "a", 1, 0, 0);
    core.update_queue(
        0,
        &QueueSpec {
            policy: Some(QueuePolicy::Hybrid),
            ..spec("a")
        },
    )
    .expect("updated");
    let durable = core.durable_state();
    let read = durable.reread();

    // A restart with the same file keeps the run-time table.
    let (restarted, _) = Core::new(file.clone(), &read, 2).expect("restart");
    assert_eq!(restarted.owner_of("node40"), Some("c"));
    assert_eq!(
        restarted.generation_of("node40"),
        core.generation_of("node40")
    );
    assert_eq!(restarted.generator_id("c"), core.generator_id("c"));
    assert_eq!(
        restarted.config().queue("a").map(|q| q.policy.as_str()),
        Some("hybrid")
    );

    // Reload with the file: c goes (its shard is connected and idle, but it owns nodes:
    // refused), then after an edit of the file that keeps c, the file wins.
    let (mut restarted, _) = Core::new(file.clone(), &read, 2).expect("restart");
    connect(&mut restarted, "c", 3, 0, 0);
    let refusal = restarted.reload(file.clone()).expect_err("c owns nodes");
    assert!(refusal.message.contains("queue c owns"), "{refusal}");
    let edited = Config::parse(
        &format!("{TWO_QUEUES}[queues.c]\nnodes = \"node[40-49]\"\npolicy = \"conservative\"\n"),
        "test.toml",
        Path::new("."),
    )
    .expect("edited");
    connect(&mut restarted, "a", 1, 0, 0);
    let done = restarted.reload(edited).expect("reloaded");
    assert_eq!(
        restarted.config().queue("a").map(|q| q.policy.as_str()),
        Some("easy")
    );
    assert_eq!(
        restarted.config().queue("c").map(|q| q.policy.as_str()),
        Some("conservative")
    );
    let restarted_queues: Vec<&str> = done.restart.iter().map(|r| r.queue.as_str()).collect();
    assert_eq!(restarted_queues, ["a", "c"]);
    assert_eq!(
        restarted.durable_state().queue_table,
        None,
        "the file is authoritative"
    );

    // A reload that changes the cluster is refused.
    let other = Config::parse(
        "[cluster.inline]\nname = \"x\"\n[[cluster.inline.nodes]]\nhosts = \"n[0-3]\"\n\
         [queues.a]\nnodes = \"n[0-3]\"\n",
        "other.toml",
        Path::new("."),
    );
    if let Ok(other) = other {
        let refusal = restarted.reload(other).expect_err("cluster");
        assert!(refusal.message.contains("cluster changed"), "{refusal}");
    }
}

/// Definitions of started queues may overlap at run time too: `queue update` widens b over
/// a's nodes (a keeps them), and a node a move gave b can then be left out of b's
/// definition only by moving it out (`--give-to`), in the same update.
#[test]
fn started_queues_overlap_at_run_time_and_update_give_to_moves_owned_nodes_out() {
    let mut core = core(TWO_QUEUES);
    connect(&mut core, "a", 1, 0, 0);
    connect(&mut core, "b", 2, 0, 0);
    let widen = QueueSpec {
        nodes: Some("node[8-19]".into()),
        ..spec("b")
    };
    let done = core
        .update_queue(0, &widen)
        .expect("overlap over a started queue");
    assert_eq!(
        core.owner_of("node8"),
        Some("a"),
        "owners change only by moves"
    );
    assert_eq!(done.restart.len(), 1);
    core.move_between(5, &["node8".to_owned()], "a", "b", None)
        .expect("a move between two running queues");
    assert_eq!(core.owner_of("node8"), Some("b"));

    // b's definition back to node[10-19]: b owns node8, so that is refused, saying what
    // to type; --give-to a would move it back, but not while it is still moving in.
    let shrink = QueueSpec {
        nodes: Some("node[10-19]".into()),
        ..spec("b")
    };
    let refusal = core.update_queue(7, &shrink).expect_err("b owns node8");
    assert!(
        refusal
            .message
            .contains("`shardsched queue move node8 --from b --to QUEUE`"),
        "{refusal}"
    );
    assert!(refusal.message.contains("--give-to"), "{refusal}");
    let refusal = core
        .update_queue(
            7,
            &QueueSpec {
                give_to: Some("a".into()),
                ..shrink.clone()
            },
        )
        .expect_err("node8 is still moving in");
    assert!(
        refusal.message.contains("already moving: node8"),
        "{refusal}"
    );
}

/// Two connected queues; a's definition grows over all twenty nodes, then b's shrinks to
/// node[10-15] with `--give-to a`: node[16-19] start moving to a.
fn b_shrinks_giving_to_a() -> (Core, Reconfig) {
    let mut core = core(TWO_QUEUES);
    connect(&mut core, "a", 1, 0, 0);
    connect(&mut core, "b", 2, 0, 0);
    let grow = QueueSpec {
        nodes: Some("node[0-19]".into()),
        ..spec("a")
    };
    core.update_queue(0, &grow)
        .expect("a defines b's nodes too");
    let shrink = QueueSpec {
        nodes: Some("node[10-15]".into()),
        give_to: Some("a".into()),
        ..spec("b")
    };
    let done = core
        .update_queue(3, &shrink)
        .expect("moved out, then shrunk");
    (core, done)
}

#[test]
fn update_give_to_moves_the_nodes_left_out_and_applies_the_definition() {
    let (mut core, done) = b_shrinks_giving_to_a();
    let move_id = done.move_id.expect("a move");
    assert!(
        done.changes[0].contains("queue b: node[16-19] move to a in move"),
        "{:?}",
        done.changes
    );
    assert_eq!(core.owner_of("node16"), Some("a"));
    assert_eq!(
        core.config().queue("b").map(|q| q.definition.len()),
        Some(6)
    );
    assert_eq!(done.restart.len(), 1, "b's shard restarts with node[10-15]");
    assert!(!core.move_finished(move_id));
    // A recipient whose definition lacks them: refused, nothing changed.
    let refused = QueueSpec {
        nodes: Some("node[10-12]".into()),
        give_to: Some("c".into()),
        ..spec("b")
    };
    assert_eq!(
        core.update_queue(4, &refused).expect_err("no c").code,
        RefusalCode::NotFound
    );
    assert_eq!(
        core.config().queue("b").map(|q| q.definition.len()),
        Some(6)
    );
}

/// Cancelling the move an `update --give-to` started cannot hand the nodes back to a donor
/// whose definition left them out: they go on to the recipient, and the cancel returns
/// only what the donor may still own (found by the simulator: the returned nodes were
/// owned outside their queue's definition).
#[test]
fn cancelling_a_give_to_move_returns_no_node_outside_the_donors_definition() {
    let (mut core, done) = b_shrinks_giving_to_a();
    let move_id = done.move_id.expect("a move");
    let returned = core.cancel_move(4, move_id).expect("cancelled");
    assert_eq!(
        returned,
        Vec::<String>::new(),
        "b's definition has none of them"
    );
    assert_eq!(core.owner_of("node16"), Some("a"), "still on its way to a");
    assert_eq!(core.invariants(), Ok(()));
}

/// `owns` in a reloaded file that differs from who owns the nodes now changes no owner:
/// the answer says which move would apply it.
#[test]
fn a_reload_whose_owns_differs_says_the_moves_and_changes_no_owner() {
    let mut core = core(TWO_QUEUES);
    connect(&mut core, "a", 1, 0, 0);
    connect(&mut core, "b", 2, 0, 0);
    let edited = Config::parse(
        "default_queue = \"a\"\n\
         [queues.a]\nnodes = \"node[0-9]\"\npolicy = \"easy\"\n\
         [queues.b]\nnodes = \"node[5-19]\"\nowns = \"node[5-6]\"\n",
        "test.toml",
        Path::new("."),
    )
    .expect("file");
    let done = core.reload(edited).expect("reloaded");
    assert_eq!(core.owner_of("node5"), Some("a"));
    assert!(
        done.changes.iter().any(|l| l.contains(
            "queue b: owns names node[5-6], which a owns now; owners change only by moves: \
             `shardsched queue move node[5-6] --from a --to b`"
        )),
        "{:?}",
        done.changes
    );
}
