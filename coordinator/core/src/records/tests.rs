use shardsched_wire::msg::{Generation, MoveId, NodeGen};

use super::*;

fn sample() -> Durable {
    let mut d = Durable {
        limits: None,
        allowances: Vec::new(),
        fairshare: None,
        next_move_id: 3,
        ..Durable::default()
    };
    d.generators.insert("batch".into(), 1);
    d.generators.insert("debug".into(), 2);
    d.queues.insert(
        "debug".into(),
        AdminQueueState {
            enabled: false,
            started: true,
            reason: "maintenance".into(),
        },
    );
    d.nodes.insert(
        "node0".into(),
        NodeIntent {
            owner: Some("batch".into()),
            generation: Generation(4),
            kept: true,
            down: None,
            drained: Some("bad dimm".into()),
        },
    );
    d.moves.push(MoveRecord::Started {
        move_id: MoveId(2),
        from: "debug".into(),
        to: "batch".into(),
        nodes: vec![NodeGen {
            node: "node0".into(),
            generation: Generation(4),
        }],
        started_ms: 10,
        deadline_ms: None,
    });
    d
}

/// `base` with `delta` applied, as the journal would hold it.
fn rebuild(delta: &DurableDelta, base: &Durable) -> Durable {
    let mut out = base.clone();
    out.apply(delta.clone()).expect("the delta fits");
    out
}

#[test]
fn a_diff_from_nothing_rebuilds_the_state_and_a_diff_with_itself_is_empty() {
    let d = sample();
    let empty = Durable::default();
    let delta = d.diff(&empty);
    assert_eq!(rebuild(&delta, &empty), d);
    assert!(d.diff(&d).is_empty());
}

#[test]
fn a_diff_writes_only_what_changed_and_deletes_finished_moves() {
    let old = sample();
    let mut new = old.clone();
    new.moves.clear();
    if let Some(n) = new.nodes.get_mut("node0") {
        n.drained = None;
    }
    new.next_move_id = 4;
    let delta = new.diff(&old);
    assert!(delta.queues.is_empty());
    assert_eq!(delta.nodes.len(), 1);
    assert_eq!(delta.moves, vec![(2, None)]);
    assert_eq!(delta.next_move_id, Some(4));
    assert_eq!(rebuild(&delta, &old), new);
}

#[test]
fn records_that_do_not_fit_are_refused_by_name() {
    let mut d = sample();
    let mut delta = DurableDelta::default();
    delta.queues.push((1, QueueRecord::new("other", None)));
    let err = d.apply(delta).expect_err("id 1 is batch's").to_string();
    assert!(
        err.contains("table queues, key 1: names queue other, but batch has that generator id"),
        "{err}"
    );
    let mut delta = DurableDelta::default();
    delta
        .moves
        .push((5, Some(vec![MoveStepRecord::Released(6, Vec::new())])));
    let err = d
        .apply(delta)
        .expect_err("filed under another move")
        .to_string();
    assert!(
        err.contains("table moves, key 5: holds a record of move 6"),
        "{err}"
    );
}

#[test]
fn move_records_convert_both_ways() {
    let records = vec![
        sample().moves[0].clone(),
        MoveRecord::Released {
            move_id: MoveId(2),
            nodes: vec![NodeGen {
                node: "node0".into(),
                generation: Generation(4),
            }],
        },
        MoveRecord::Cancelled {
            move_id: MoveId(2),
            nodes: Vec::new(),
        },
    ];
    let back: Vec<MoveRecord> = move_steps(&records)
        .into_iter()
        .map(MoveRecord::from)
        .collect();
    assert_eq!(back, records);
}

fn arbitrary_durable() -> impl proptest::strategy::Strategy<Value = Durable> {
    use proptest::collection::{btree_map, btree_set, vec};
    use proptest::option;
    use proptest::prelude::*;
    let name = || "[a-c][0-3]";
    let node = (
        option::of(name()),
        0u64..5,
        any::<bool>(),
        option::of("[a-z]{0,3}"),
        option::of("[a-z]{0,3}"),
    )
        .prop_map(|(owner, generation, kept, down, drained)| NodeIntent {
            owner,
            generation: Generation(generation),
            kept,
            down,
            drained,
        });
    let queue =
        (any::<bool>(), any::<bool>(), "[a-z]{0,3}").prop_map(|(enabled, started, reason)| {
            AdminQueueState {
                enabled,
                started,
                reason,
            }
        });
    let record = (1u64..4, name(), 0u64..5).prop_map(|(id, node, g)| MoveRecord::Released {
        move_id: MoveId(id),
        nodes: vec![NodeGen {
            node,
            generation: Generation(g),
        }],
    });
    (
        btree_set(name(), 0..4),
        btree_map(name(), node, 0..6),
        btree_map(name(), queue, 0..3),
        vec(record, 0..5),
        0u64..6,
    )
        .prop_map(|(queue_names, nodes, queues, moves, next_move_id)| {
            // A generator id per queue name, the same in every state (never reused).
            let generators: BTreeMap<String, u16> = queue_names
                .into_iter()
                .map(|q| {
                    let b = q.as_bytes();
                    let id = u16::from(b[0] - b'a') * 4 + u16::from(b[1] - b'0') + 1;
                    (q, id)
                })
                .collect();
            let queues = queues
                .into_iter()
                .filter(|(q, _)| generators.contains_key(q))
                .collect();
            // The journal keeps a move's records together and moves in id order.
            let moves = group_moves(&moves).into_values().flatten().collect();
            Durable {
                limits: None,
                allowances: Vec::new(),
                fairshare: None,
                generators,
                nodes,
                moves,
                next_move_id,
                queues,
                queue_table: None,
            }
        })
}

proptest::proptest! {
    /// Whatever the journal held and whatever the core has now, writing the diff gives
    /// back exactly the core's state.
    #[test]
    fn a_diff_always_rebuilds_the_new_state(
        old in arbitrary_durable(),
        new in arbitrary_durable(),
    ) {
        // Generator ids are never taken back: the new state extends the old one's.
        let mut new = new;
        for (q, id) in &old.generators {
            new.generators.insert(q.clone(), *id);
        }
        let mut old = old;
        for name in old.nodes.keys().cloned().collect::<Vec<_>>() {
            if !new.nodes.contains_key(&name) {
                old.nodes.remove(&name);
            }
        }
        proptest::prop_assert_eq!(rebuild(&new.diff(&old), &old), new);
    }
}
