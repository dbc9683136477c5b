//! Unit tests of reading jobspec text (the `parse` and `read` modules).

#![allow(clippy::unwrap_used)]

use serde_json::json;

use crate::{
    Constraint, Count, CountOp, JOBSPEC_BYTES_MAX, JOBSPEC_DEPTH_MAX, JobspecError, TaskCount,
    parse, parse_json, parse_yaml,
};

const V1: &str = "\
version: 1
resources:
  - type: node
    count: 2
    with:
      - type: slot
        label: task
        count: 1
        with: [{type: core, count: 4}, {type: gpu, count: 1}]
tasks:
  - {command: [./sim], slot: task, count: {per_slot: 1}}
attributes:
  system: {duration: 3600, queue: batch, constraints: {properties: [\"ssd\"]}}
";

/// A general-form document with `RES` replaced by one resource entry.
fn general(resource: &str) -> String {
    format!(
        "version: 9999\nresources:\n  - {resource}\ntasks:\n  - {{command: [app], slot: s, count: {{per_slot: 1}}}}\n"
    )
}

fn err(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

/// Replaces the first occurrence of `from` in the version-1 example.
fn v1_with(from: &str, to: &str) -> String {
    assert!(V1.contains(from), "{from}");
    V1.replacen(from, to, 1)
}

#[test]
fn parses_version1_example() {
    let js = parse(V1).unwrap();
    assert_eq!(js.version, 1);
    assert_eq!(js.resources.len(), 1);
    let node = &js.resources[0];
    assert_eq!(node.kind, "node");
    assert_eq!(node.count, Count::exact(2));
    assert_eq!(node.exclusive, None);
    let slot = &node.with[0];
    assert_eq!(slot.label.as_deref(), Some("task"));
    assert_eq!(slot.with[0].kind, "core");
    assert_eq!(slot.with[0].count, Count::exact(4));
    assert_eq!(slot.with[1].kind, "gpu");
    assert_eq!(js.tasks[0].command, vec!["./sim"]);
    assert_eq!(js.tasks[0].count, TaskCount::PerSlot(1));
    assert_eq!(js.attributes.duration, 3600);
    assert_eq!(js.attributes.queue.as_deref(), Some("batch"));
    assert_eq!(
        js.attributes.constraints,
        Some(Constraint::Properties(vec!["ssd".into()]))
    );
}

#[test]
fn yaml_and_json_agree() {
    let yaml = parse_yaml(V1).unwrap();
    let json_text = yaml.to_json().to_string();
    assert_eq!(parse_json(&json_text).unwrap(), yaml);
    assert_eq!(parse(&json_text).unwrap(), yaml);
    // JSON written by hand, with its own key order and whitespace.
    let hand = r#"
      {"attributes": {"system": {"queue": "batch", "duration": 3600,
                                 "constraints": {"properties": ["ssd"]}}},
       "tasks": [{"slot": "task", "count": {"per_slot": 1}, "command": ["./sim"]}],
       "resources": [{"count": 2, "type": "node", "with": [{"type": "slot", "label": "task",
           "count": 1, "with": [{"type": "core", "count": 4}, {"type": "gpu", "count": 1}]}]}],
       "version": 1}"#;
    assert_eq!(parse(hand).unwrap(), yaml);
}

#[test]
fn range_counts_and_defaults() {
    let js = parse(&general(
        "{type: slot, label: s, count: {min: 2}, with: [{type: core, count: {min: 1, max: 8, operator: '*', operand: 2}}]}",
    ))
    .unwrap();
    let slot = &js.resources[0];
    assert_eq!(
        slot.count,
        Count {
            min: 2,
            max: u64::MAX,
            operator: CountOp::Add,
            operand: 1
        }
    );
    assert_eq!(
        slot.with[0].count,
        Count {
            min: 1,
            max: 8,
            operator: CountOp::Mul,
            operand: 2
        }
    );
    let js = parse(&general(
        "{type: slot, label: s, count: {min: 2, max: 64, operator: '^', operand: 4}, with: [{type: core, count: 1}]}",
    ))
    .unwrap();
    assert_eq!(
        js.resources[0].count.values().collect::<Vec<_>>(),
        vec![2, 16]
    );
    // Defaults of the general form: no attributes, exclusive absent.
    assert_eq!(js.attributes, crate::Attributes::default());
    assert_eq!(js.resources[0].exclusive, None);
}

#[test]
fn count_errors_name_paths() {
    let slot = |count: &str| {
        err(&general(&format!(
            "{{type: slot, label: s, count: 1, with: [{{type: core, count: 1}}, {{type: gpu, count: {count}}}]}}"
        )))
    };
    assert_eq!(
        slot("x"),
        "resources[0].with[1].count: expected an integer or a map with min/max/operator/operand, found string \"x\""
    );
    assert_eq!(
        slot("0"),
        "resources[0].with[1].count: must be at least 1, found 0"
    );
    assert_eq!(
        slot("-2"),
        "resources[0].with[1].count: must be at least 1, found -2"
    );
    assert_eq!(
        slot("1.5"),
        "resources[0].with[1].count: expected an integer or a map with min/max/operator/operand, found number 1.5"
    );
    assert_eq!(
        slot("{max: 4}"),
        "resources[0].with[1].count.min: required key is missing"
    );
    assert_eq!(
        slot("{min: 0}"),
        "resources[0].with[1].count: min must be at least 1, found 0"
    );
    assert_eq!(
        slot("{min: 4, max: 2}"),
        "resources[0].with[1].count: max (2) must not be less than min (4)"
    );
    assert_eq!(
        slot("{min: 1, operator: '/'}"),
        "resources[0].with[1].count.operator: expected \"+\", \"*\" or \"^\", found string \"/\""
    );
    assert_eq!(
        slot("{min: 1, operator: '^', operand: 1}"),
        "resources[0].with[1].count: operand must be at least 2 for operator '^', found 1"
    );
    assert_eq!(
        slot("{min: 1, step: 2}"),
        "resources[0].with[1].count.step: unknown key; expected one of min, max, operator, operand"
    );
}

#[test]
fn resource_errors_name_paths() {
    assert_eq!(
        err(&general(
            "{type: slot, count: 1, with: [{type: core, count: 1}]}"
        )),
        "resources[0].label: a slot must have a label"
    );
    assert_eq!(
        err(&general("{type: slot, label: s, count: 1}")),
        "resources[0].with: a slot must contain at least one resource"
    );
    assert_eq!(
        err(&general("{type: '', count: 1}")),
        "resources[0].type: expected a non-empty string, found string \"\""
    );
    assert_eq!(
        err(&general("{count: 1}")),
        "resources[0].type: required key is missing"
    );
    assert_eq!(
        err(&general("{type: node}")),
        "resources[0].count: required key is missing"
    );
    assert_eq!(
        err(&general("{type: node, count: 1, exclusive: yes please}")),
        "resources[0].exclusive: expected true or false, found string \"yes please\""
    );
    assert_eq!(
        err(&general(
            "{type: node, count: 1, with: {type: core, count: 1}}"
        )),
        "resources[0].with: expected a list of resources, found a map"
    );
    assert_eq!(
        err(&general("{type: node, count: 1, colour: red}")),
        "resources[0].colour: unknown key; expected one of type, count, with, exclusive, label, unit, id"
    );
    assert_eq!(
        err(&general("[node, 1]")),
        "resources[0]: expected a resource map with type and count, found a list"
    );
    let js = parse(&general(
        "{type: memory, count: 4, unit: GB, id: 7, exclusive: true}",
    ))
    .unwrap();
    assert_eq!(js.resources[0].unit.as_deref(), Some("GB"));
    assert_eq!(js.resources[0].id.as_deref(), Some("7"));
    assert_eq!(js.resources[0].exclusive, Some(true));
}

#[test]
fn top_level_errors() {
    assert_eq!(
        err("version: 9999\nresources: []\ntasks: []\nextra: 1\n"),
        "extra: unknown top-level key; a jobspec has only version, resources, tasks and attributes"
    );
    assert_eq!(
        err("- 1\n- 2\n"),
        "a jobspec is a map with keys version, resources, tasks and attributes; found a list"
    );
    assert_eq!(
        err(""),
        "a jobspec is a map with keys version, resources, tasks and attributes; found null"
    );
    assert_eq!(
        err("resources: []\ntasks: []\n"),
        "version: required key is missing"
    );
    assert_eq!(
        err("version: 2\nresources: []\ntasks: []\n"),
        "version: unsupported version 2; supported are 1 (RFC 25) and 9999 (the general form)"
    );
    assert_eq!(
        err("version: '1'\nresources: []\ntasks: []\n"),
        "version: expected an integer, found string \"1\""
    );
    assert_eq!(
        err("version: 9999\nresources: []\ntasks: []\n"),
        "resources: must list at least one of the resources"
    );
    assert_eq!(
        err(&general("{type: node, count: 1}").replace(
            "tasks:\n  - {command: [app], slot: s, count: {per_slot: 1}}\n",
            "tasks: []\n"
        )),
        "tasks: must list at least one of the tasks"
    );
}

#[test]
fn task_errors() {
    let task = |t: &str| {
        err(&format!(
            "version: 9999\nresources: [{{type: node, count: 1}}]\ntasks:\n  - {t}\n"
        ))
    };
    assert_eq!(
        task("{command: app, slot: s, count: {per_slot: 1}}"),
        "tasks[0].command: expected a list of arguments, found string \"app\""
    );
    assert_eq!(
        task("{command: [app, 3], slot: s, count: {per_slot: 1}}"),
        "tasks[0].command[1]: expected a string, found number 3"
    );
    assert_eq!(
        task("{command: [app], count: {per_slot: 1}}"),
        "tasks[0].slot: required key is missing"
    );
    assert_eq!(
        task("{command: [app], slot: s, count: {per_slot: 1, total: 2}}"),
        "tasks[0].count: expected {per_slot: N} or {total: N}, found a map"
    );
    assert_eq!(
        task("{command: [app], slot: s, count: 2}"),
        "tasks[0].count: expected {per_slot: N} or {total: N}, found number 2"
    );
    assert_eq!(
        task("{command: [app], slot: s, count: {total: 0}}"),
        "tasks[0].count.total: must be at least 1, found 0"
    );
    assert_eq!(
        task("{command: [app], slot: s, count: {total: 4}, distribution: x}"),
        "tasks[0].distribution: unknown key; expected one of command, slot, count"
    );
    let js = parse(&format!(
        "version: 9999\nresources: [{{type: node, count: 1}}]\ntasks:\n  - {}\n",
        "{command: [app], slot: s, count: {total: 4}}"
    ))
    .unwrap();
    assert_eq!(js.tasks[0].count, TaskCount::Total(4));
}

#[test]
fn attributes() {
    let with_attrs = |a: &str| {
        parse(&format!(
            "{}attributes: {a}\n",
            general("{type: node, count: 1}")
        ))
    };
    let js = with_attrs(
        "{system: {duration: 1.2, queue: debug, bank: b1, constraints: {not: [{hostlist: ['n[1-2]']}]}}, user: {x: [1, {y: z}]}}",
    )
    .unwrap();
    assert_eq!(js.attributes.duration, 2);
    assert_eq!(js.attributes.queue.as_deref(), Some("debug"));
    assert_eq!(js.attributes.system_other.get("bank"), Some(&json!("b1")));
    assert_eq!(js.attributes.user.get("x"), Some(&json!([1, {"y": "z"}])));
    assert_eq!(
        js.attributes.constraints,
        Some(Constraint::Not(vec![Constraint::Hostlist(vec![
            "n[1-2]".into()
        ])]))
    );
    assert_eq!(
        with_attrs("{system: {duration: 0}}")
            .unwrap()
            .attributes
            .duration,
        0
    );
    assert_eq!(
        with_attrs("{system: {duration: 3.0}}")
            .unwrap()
            .attributes
            .duration,
        3
    );
    let aerr = |a: &str| with_attrs(a).unwrap_err().to_string();
    assert_eq!(
        aerr("{system: {duration: -1}}"),
        "attributes.system.duration: must be a number of seconds >= 0, found -1"
    );
    assert_eq!(
        aerr("{system: {duration: 1h}}"),
        "attributes.system.duration: expected a number of seconds, found string \"1h\""
    );
    assert_eq!(
        aerr("{system: {duration: 1e30}}"),
        "attributes.system.duration: \"1e+30\" is longer than 1000 years, the longest duration"
    );
    assert_eq!(
        aerr("{system: {duration: 1e-300}}"),
        "attributes.system.duration: \"1e-300\" is shorter than 1ms, the shortest duration (0 is written 0)"
    );
    assert_eq!(
        aerr("{system: {queue: 3}}"),
        "attributes.system.queue: expected a non-empty string, found number 3"
    );
    assert_eq!(
        aerr("{system: {constraints: {and: [{properties: [1]}]}}}"),
        "attributes.system.constraints.and[0].properties[0]: expected a non-empty string, found number 1"
    );
    assert_eq!(
        aerr("{sys: {}}"),
        "attributes.sys: unknown key; expected one of system, user"
    );
    assert_eq!(
        aerr("{user: [1]}"),
        "attributes.user: expected a map, found a list"
    );
    assert_eq!(aerr("[]"), "attributes: expected a map, found a list");
}

#[test]
fn version1_restrictions_from_text() {
    parse(V1).unwrap();
    assert_eq!(
        err(&v1_with("count: 2", "count: {min: 2, max: 4}")),
        "resources[0].count: version 1 requires a plain integer count"
    );
    assert_eq!(
        err(&v1_with("type: node", "type: rack")),
        "resources[0].type: version 1 allows only node or slot at the top level, found \"rack\""
    );
    assert_eq!(
        err(&v1_with(
            "{type: gpu, count: 1}",
            "{type: memory, count: 1}"
        )),
        "resources[0].with[0].with[1].type: version 1 allows only core and gpu in a slot, found \"memory\""
    );
    assert_eq!(
        err(&v1_with(
            "{type: core, count: 4}",
            "{type: core, count: 4, exclusive: true}"
        )),
        "resources[0].with[0].with[0].exclusive: version 1 allows exclusive only on node and slot, not on core"
    );
    assert_eq!(
        err(&v1_with("per_slot: 1", "per_slot: 2")),
        "tasks[0].count: version 1 requires {per_slot: 1}"
    );
    assert_eq!(
        err(&v1_with("slot: task,", "slot: other,")),
        "tasks[0].slot: no slot is labelled \"other\""
    );
    assert_eq!(
        err(&v1_with("duration: 3600, ", "")),
        "attributes.system.duration: required in version 1"
    );
    let no_attrs = V1.split("attributes:").next().unwrap();
    assert_eq!(
        err(no_attrs),
        "attributes.system.duration: required in version 1"
    );
    // exclusive on node and slot is fine.
    parse(&v1_with("count: 2", "count: 2\n    exclusive: true")).unwrap();
}

#[test]
fn syntax_errors_have_positions() {
    let e = parse("version: 9999\nresources: [\n").unwrap_err();
    match &e {
        JobspecError::Syntax { line, column, .. } => assert!(*line >= 2 && *column >= 1, "{e}"),
        other => panic!("expected a syntax error, got {other:?}"),
    }
    assert!(
        e.to_string().starts_with("YAML syntax error at line "),
        "{e}"
    );
    assert_eq!(
        err("{\"version\": 1,\n \"resources\": [}"),
        "JSON syntax error at line 2, column 16: expected value"
    );
    assert!(err("a: 1\na: 2\n").contains("duplicate mapping key"));
}

#[test]
fn size_and_depth_limits() {
    let big = format!("# {}\n", "x".repeat(JOBSPEC_BYTES_MAX));
    assert_eq!(
        parse(&big).unwrap_err(),
        JobspecError::TooLarge {
            len: big.len(),
            max: JOBSPEC_BYTES_MAX
        }
    );
    for (open, close) in [("[", "]"), ("{\"a\":", "}")] {
        let deep = |n: usize| format!("{}1{}", open.repeat(n), close.repeat(n));
        // Exactly the limit is still read (and then refused as a jobspec).
        assert!(!matches!(
            parse(&deep(JOBSPEC_DEPTH_MAX)),
            Err(JobspecError::TooDeep { .. })
        ));
        assert!(matches!(
            parse_yaml(&deep(JOBSPEC_DEPTH_MAX + 1)),
            Err(JobspecError::TooDeep { .. })
        ));
        assert!(matches!(
            parse_json(&deep(JOBSPEC_DEPTH_MAX + 1)),
            Err(JobspecError::TooDeep { .. })
        ));
        // Far deeper than any stack allows: still a clean error.
        let r = parse(&deep(100_000));
        assert!(matches!(r, Err(JobspecError::TooDeep { .. })), "{r:?}");
    }
    let mut indented = String::new();
    for i in 0..JOBSPEC_DEPTH_MAX + 2 {
        indented += &" ".repeat(i);
        indented += "a:\n";
    }
    assert_eq!(
        parse(&indented).unwrap_err().to_string(),
        "jobspec nests lists and maps deeper than 64 levels at line 65, column 65"
    );
    // An alias of a deep anchor, used deep down, cannot get past the limit either.
    let anchored = format!(
        "a: &x {}1{}\nb: {}*x{}\n",
        "[".repeat(40),
        "]".repeat(40),
        "[".repeat(40),
        "]".repeat(40)
    );
    let r = parse(&anchored);
    assert!(matches!(r, Err(JobspecError::TooDeep { .. })), "{r:?}");
    // Deep values handed over directly are refused too.
    let mut v = json!(1);
    for _ in 0..100 {
        v = json!([v]);
    }
    assert!(matches!(
        crate::from_value(&v),
        Err(JobspecError::TooDeep { .. })
    ));
}

#[test]
fn auto_detects_json_after_whitespace_and_bom() {
    let js = parse_yaml(V1).unwrap();
    let text = format!("\u{feff}  \n{}", js.to_json());
    assert_eq!(parse(&text).unwrap(), js);
}
