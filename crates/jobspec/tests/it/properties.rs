//! Property tests: no input panics the parser, canonical JSON round-trips, counts step up.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use shardsched_jobspec::{
    Attributes, Constraint, Count, CountOp, Jobspec, Resource, Shorthand, Task, TaskCount,
    VERSION_GENERAL, parse, parse_json, parse_yaml,
};

const SAMPLE: &str = "\
version: 9999
resources:
  - type: node
    count: {min: 1, max: 4, operator: '*', operand: 2}
    exclusive: true
    with:
      - type: slot
        label: default
        count: 2
        with: [{type: core, count: 4}, {type: memory, count: 8, unit: GB}]
tasks:
  - command: [app, '-v']
    slot: default
    count: {per_slot: 1}
attributes:
  system:
    duration: 3600
    queue: batch
    constraints: {and: [{properties: [ssd, '^slow']}, {ranks: ['0-3']}]}
  user: {note: hi}
";

fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_-]{0,7}"
}

fn count() -> impl Strategy<Value = Count> {
    prop_oneof![
        (1u64..10_000).prop_map(Count::exact),
        (1u64..100, prop::option::of(0u64..1000), 1u64..10).prop_map(|(min, extra, k)| Count {
            min,
            max: extra.map_or(u64::MAX, |e| min + e),
            operator: CountOp::Add,
            operand: k,
        }),
        (1u64..100, prop::option::of(0u64..1000), 2u64..10).prop_map(|(min, extra, k)| Count {
            min,
            max: extra.map_or(u64::MAX, |e| min + e),
            operator: CountOp::Mul,
            operand: k,
        }),
        (1u64..100, prop::option::of(0u64..1000), 2u64..6).prop_map(|(min, extra, k)| Count {
            min,
            max: extra.map_or(u64::MAX, |e| min + e),
            operator: CountOp::Pow,
            operand: k,
        }),
    ]
}

fn any_count() -> impl Strategy<Value = Count> {
    (
        any::<u64>(),
        any::<u64>(),
        prop_oneof![Just(CountOp::Add), Just(CountOp::Mul), Just(CountOp::Pow)],
        any::<u64>(),
    )
        .prop_map(|(a, b, operator, operand)| Count {
            min: a.min(b),
            max: a.max(b),
            operator,
            operand,
        })
}

fn resource_kind() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("node".to_string()),
        Just("socket".to_string()),
        Just("core".to_string()),
        Just("gpu".to_string()),
        Just("rack".to_string()),
        name(),
    ]
    .prop_filter("slot is generated separately", |k| k != "slot")
}

fn vertex(kind: impl Strategy<Value = String>) -> impl Strategy<Value = Resource> {
    (
        kind,
        count(),
        prop::option::of(any::<bool>()),
        prop::option::of(name()),
        prop::option::of(name()),
        prop::option::of(name()),
    )
        .prop_map(|(kind, count, exclusive, label, unit, id)| Resource {
            kind,
            count,
            with: Vec::new(),
            exclusive,
            label,
            unit,
            id,
        })
}

fn resource_tree() -> impl Strategy<Value = Resource> {
    vertex(resource_kind()).prop_recursive(5, 24, 3, |inner| {
        prop_oneof![
            (
                vertex(resource_kind()),
                prop::collection::vec(inner.clone(), 1..3)
            )
                .prop_map(|(mut r, with)| {
                    r.with = with;
                    r
                }),
            (
                vertex(Just("slot".to_string())),
                name(),
                prop::collection::vec(inner, 1..3)
            )
                .prop_map(|(mut r, label, with)| {
                    r.label = Some(label);
                    r.with = with;
                    r
                }),
        ]
    })
}

fn constraint() -> impl Strategy<Value = Constraint> {
    let strings = || prop::collection::vec(name(), 0..3);
    let leaf = prop_oneof![
        prop::collection::vec((any::<bool>(), name()), 0..3).prop_map(|v| Constraint::Properties(
            v.into_iter()
                .map(|(neg, p)| if neg { format!("^{p}") } else { p })
                .collect()
        )),
        strings().prop_map(Constraint::Hostlist),
        strings().prop_map(Constraint::Ranks),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Constraint::And),
            prop::collection::vec(inner.clone(), 0..3).prop_map(Constraint::Or),
            prop::collection::vec(inner, 0..3).prop_map(Constraint::Not),
        ]
    })
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        "[ -~]{0,12}".prop_map(Value::String),
        prop::collection::vec(any::<u32>(), 0..3).prop_map(|v| json!(v)),
    ]
}

fn json_map(reserved: &'static [&'static str]) -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map(name(), json_leaf(), 0..3).prop_map(move |m| {
        m.into_iter()
            .filter(|(k, _)| !reserved.contains(&k.as_str()))
            .collect()
    })
}

fn task() -> impl Strategy<Value = Task> {
    (
        prop::collection::vec("[ -~]{0,10}", 1..4),
        name(),
        prop_oneof![
            (1u64..100).prop_map(TaskCount::PerSlot),
            (1u64..100).prop_map(TaskCount::Total)
        ],
    )
        .prop_map(|(command, slot, count)| Task {
            command,
            slot,
            count,
        })
}

fn general_jobspec() -> impl Strategy<Value = Jobspec> {
    (
        prop::collection::vec(resource_tree(), 1..3),
        prop::collection::vec(task(), 1..3),
        0u64..1_000_000,
        prop::option::of(name()),
        prop::option::of(constraint()),
        json_map(&["duration", "queue", "constraints"]),
        json_map(&[]),
    )
        .prop_map(
            |(resources, tasks, duration, queue, constraints, system_other, user)| Jobspec {
                version: VERSION_GENERAL,
                resources,
                tasks,
                attributes: Attributes {
                    duration,
                    queue,
                    constraints,
                    system_other,
                    user,
                },
            },
        )
}

fn shorthand() -> impl Strategy<Value = Shorthand> {
    (
        prop::option::of(1u64..8),
        prop::option::of(1u64..8),
        1u64..8,
        0u64..4,
        0u64..100_000,
        any::<bool>(),
        prop::collection::vec(name(), 1..3),
        prop::option::of(name()),
    )
        .prop_map(
            |(nodes, per_node, c, g, duration, exclusive, command, queue)| Shorthand {
                nodes,
                tasks: per_node.map(|k| k * nodes.unwrap_or(1)),
                cores_per_task: c,
                gpus_per_task: g,
                duration,
                exclusive: exclusive && nodes.is_some(),
                command,
                queue,
            },
        )
}

/// `base` with the bytes in `start..start+len` replaced by `insert`.
fn mutated(base: String) -> impl Strategy<Value = String> {
    (0..base.len(), 0usize..20, "\\PC{0,8}").prop_map(move |(start, len, insert)| {
        let mut s = base.as_bytes().to_vec();
        let end = (start + len).min(s.len());
        s.splice(start..end, insert.bytes());
        String::from_utf8_lossy(&s).into_owned()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = parse(&text);
        let _ = parse_json(&text);
        let _ = parse_yaml(&text);
    }

    #[test]
    fn arbitrary_strings_never_panic(text in "\\PC{0,256}") {
        let _ = parse(&text);
        let _ = parse_json(&format!("{{{text}"));
    }

    #[test]
    fn mutated_yaml_never_panics(text in mutated(SAMPLE.to_string())) {
        let _ = parse(&text);
    }

    #[test]
    fn mutated_json_never_panics(
        text in mutated(parse_yaml(SAMPLE).unwrap().to_json().to_string())
    ) {
        let _ = parse(&text);
        let _ = parse_yaml(&text);
    }

    #[test]
    fn canonical_json_round_trips(js in general_jobspec()) {
        js.validate().unwrap();
        let text = js.to_json().to_string();
        prop_assert_eq!(parse_json(&text).unwrap(), js.clone());
        // JSON text is also YAML (flow style): the YAML reader agrees.
        prop_assert_eq!(parse_yaml(&text).unwrap(), js);
    }

    #[test]
    fn shorthand_builds_valid_version1(s in shorthand()) {
        let js = s.to_jobspec().unwrap();
        js.check_version1().unwrap();
        prop_assert_eq!(parse(&js.to_json().to_string()).unwrap(), js);
    }

    #[test]
    fn count_sequences_increase_within_bounds(c in any_count(), available in any::<u64>()) {
        let mut prev: Option<u64> = None;
        for v in c.values().take(200) {
            prop_assert!(v >= c.min && v <= c.max);
            if let Some(p) = prev {
                prop_assert!(v > p);
                prop_assert_eq!(c.next(p), Some(v));
            }
            prev = Some(v);
        }
        match c.largest_fitting(available) {
            None => prop_assert!(available < c.min),
            Some(v) => {
                let cap = available.min(c.max);
                prop_assert!(v >= c.min && v <= cap);
                prop_assert!(c.next(v).is_none_or(|n| n > cap));
            }
        }
    }

    #[test]
    fn valid_count_sequences_are_reachable(c in count(), available in 0u64..5000) {
        // For generated counts the answer is a member of the sequence.
        if let Some(v) = c.largest_fitting(available) {
            prop_assert!(c.values().take_while(|&x| x <= v).any(|x| x == v));
        }
    }
}
