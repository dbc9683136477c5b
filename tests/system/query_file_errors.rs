//! Malformed graph files and jobspecs given to `shardsched query`: the process never panics
//! (no exit status 101, no "panicked" on stderr) and every error names its file and its
//! place in it (field path, line when there is one).
//!
//! Graphs and jobspecs are written to a scratch folder under `CARGO_TARGET_TMPDIR`
//! ([`query_run`]).

use crate::query_run;

use query_run::{GOOD_JOBSPEC, GRUG, SPEC, Scratch, jgf, placed, query};

#[test]
fn malformed_graph_files_name_the_file_and_the_place() {
    let s = Scratch::new("graphs");
    let good_grug = s.file("mini.graphml", GRUG);
    let good_jgf = s.file("mini.json", jgf());
    // The fixtures themselves are fine.
    for (g, f) in [(&good_grug, "grug"), (&good_jgf, "jgf")] {
        let r = query(&s.0, g, &["-f", f], "match allocate job.yaml\n");
        assert!(r.stderr.contains("job.yaml"), "{f}: {}", r.stderr);
    }
    let grug_lines = GRUG.lines().count();
    // (file name, contents, format, fragments the error must hold)
    let mut cases: Vec<(String, Vec<u8>, &str, Vec<String>)> = vec![
        (
            "scale.graphml".into(),
            GRUG.replace(">4</data>", ">four</data>").into_bytes(),
            "grug",
            vec!["scale.graphml:".into(), "multi_scale".into(), "four".into()],
        ),
        (
            "target.graphml".into(),
            GRUG.replace("target=\"core\"", "target=\"nothing\"").into_bytes(),
            "grug",
            vec!["target.graphml:".into(), "nothing".into()],
        ),
        (
            "noroot.graphml".into(),
            GRUG.replace("\"root\">1<", "\"root\">0<").into_bytes(),
            "grug",
            vec!["noroot.graphml".into(), "root".into()],
        ),
        (
            "method.graphml".into(),
            GRUG.replace(">MULTIPLY<", ">DIVIDE<").into_bytes(),
            "grug",
            vec!["method.graphml:".into(), "gen_method".into()],
        ),
        ("empty.graphml".into(), Vec::new(), "grug", vec!["empty.graphml".into()]),
        (
            "binary.graphml".into(),
            vec![0xff, 0xfe, 0x00, 0x3c, 0x80],
            "grug",
            vec!["binary.graphml".into()],
        ),
        (
            "size.json".into(),
            jgf().replacen("\"size\": 1", "\"size\": \"big\"", 1).into_bytes(),
            "jgf",
            vec!["size.json".into(), "graph.nodes[0].metadata.size".into()],
        ),
        (
            "notype.json".into(),
            jgf().replace("\"type\": \"core\"", "\"typo\": \"core\"").into_bytes(),
            "jgf",
            vec!["notype.json".into(), "graph.nodes[2].metadata".into(), "type".into()],
        ),
        (
            "syntax.json".into(),
            jgf().replacen("\"id\": \"2\"", "\"id\" \"2\"", 1).into_bytes(),
            "jgf",
            vec!["syntax.json:5:".into()],
        ),
        ("array.json".into(), b"[1, 2, 3]".to_vec(), "jgf", vec!["array.json".into()]),
        (
            "nothing.json".into(),
            br#"{"graph": {"nodes": [], "edges": []}}"#.to_vec(),
            "jgf",
            vec!["nothing.json".into(), "no vertices".into()],
        ),
        (
            "binary.json".into(),
            vec![b'{', 0xc3, 0x28, b'}'],
            "jgf",
            vec!["binary.json".into()],
        ),
        (
            "r.json".into(),
            br#"{"version": 1, "execution": {"R_lite": [{"rank": "0-x", "children": {"core": "0-3"}}]}}"#.to_vec(),
            "rv1exec",
            vec!["r.json".into()],
        ),
        ("notr.json".into(), b"{\"execution\": 5}".to_vec(), "rv1exec", vec!["notr.json".into()]),
        (
            "field.toml".into(),
            SPEC.replace("cores_per_socket", "cores").into_bytes(),
            "spec",
            vec!["field.toml:5:".into(), "cores".into()],
        ),
        (
            "zero.toml".into(),
            SPEC.replace("sockets = 2", "sockets = 0").into_bytes(),
            "spec",
            vec!["zero.toml:4:".into(), "sockets".into()],
        ),
        (
            "syntax.toml".into(),
            SPEC.replace("[[nodes]]", "[[nodes]").into_bytes(),
            "spec",
            vec!["syntax.toml:2:".into()],
        ),
        (
            "hosts.toml".into(),
            SPEC.replace("node[0-1]", "node[1-").into_bytes(),
            "spec",
            vec!["hosts.toml:3:".into()],
        ),
        ("empty.toml".into(), Vec::new(), "spec", vec!["empty.toml".into()]),
    ];
    // Truncated GraphML, cut at many places; the error names the file and a line.
    let step = GRUG.len() / 23;
    for (i, cut) in (1..23).map(|k| k * step).enumerate() {
        let name = format!("cut{i}.graphml");
        cases.push((
            name.clone(),
            GRUG.as_bytes()[..cut].to_vec(),
            "grug",
            vec![format!("{name}:")],
        ));
    }
    // Truncated JGF, likewise with line and column.
    let text = jgf();
    for (i, cut) in (1..12).map(|k| k * text.len() / 12).enumerate() {
        let name = format!("cut{i}.json");
        cases.push((
            name.clone(),
            text.as_bytes()[..cut].to_vec(),
            "jgf",
            vec![format!("{name}:")],
        ));
    }
    for (name, contents, format, fragments) in &cases {
        let path = s.file(name, contents);
        let r = query(&s.0, &path, &["-f", format], "match allocate job.yaml\n");
        let fragments: Vec<&str> = fragments.iter().map(String::as_str).collect();
        r.assert_error(&format!("{format} {name}"), &fragments);
        assert!(r.stderr.starts_with("shardsched: "), "{name}: {}", r.stderr);
        if name.starts_with("cut") && name.ends_with(".graphml") {
            // file:LINE: with a line inside the file
            let rest = r.stderr.split_once(&format!("{name}:")).map_or("", |x| x.1);
            let line: usize = rest
                .split(':')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{name}: no line number in {:?}", r.stderr));
            assert!((1..=grug_lines).contains(&line), "{name}: line {line}");
        }
    }
}

/// Writes the malformed jobspecs; returns (file name, fragments its error must hold). The
/// messages are resource-query's own words, which name neither the file nor the field:
/// flux-sched's tests compare standard error byte for byte.
fn malformed_jobspecs(s: &Scratch) -> Vec<(String, Vec<&'static str>)> {
    let tasks = "tasks: [{command: [a], slot: s, count: {per_slot: 1}}]\n";
    let with_tasks =
        |res: &str| format!("version: 9999\nresources:\n{res}{tasks}attributes: {{}}\n");
    let deep_yaml: String = std::iter::once("version: 9999\nresources:\n".to_string())
        .chain((1..120).map(|i| {
            let pad = "  ".repeat(i);
            format!("{pad}- type: node\n{pad}  count: 1\n{pad}  with:\n")
        }))
        .collect();
    let files: Vec<(&str, Vec<u8>, Vec<&'static str>)> = vec![
        (
            "count_word.yaml",
            with_tasks("  - type: node\n    count: x\n").into_bytes(),
            vec!["bad conversion of \"x\" to an unsigned"],
        ),
        (
            "count_neg.yaml",
            with_tasks(
                "  - type: node\n    count: 1\n    with:\n      - type: slot\n        count: 1\n        label: s\n        with:\n          - type: core\n            count: -1\n",
            )
            .into_bytes(),
            vec!["bad conversion of \"-1\""],
        ),
        (
            "min_max.yaml",
            with_tasks("  - type: node\n    count: {min: 2, max: 1, operator: '+', operand: 1}\n")
                .into_bytes(),
            vec!["\"max\" must be greater than or equal to \"min\""],
        ),
        (
            "operator.yaml",
            with_tasks("  - type: node\n    count: {min: 1, max: 4, operator: '%', operand: 1}\n")
                .into_bytes(),
            vec!["Invalid count operator"],
        ),
        (
            "no_label.yaml",
            with_tasks("  - type: slot\n    count: 1\n    with: [{type: core, count: 1}]\n")
                .into_bytes(),
            vec!["All slots must be labeled"],
        ),
        (
            "type_number.yaml",
            with_tasks("  - {type: 5, count: 1}\n").into_bytes(),
            vec!["known to fluxion"],
        ),
        (
            "no_resources.yaml",
            format!("version: 9999\n{tasks}attributes: {{}}\n").into_bytes(),
            vec!["Missing key \"resources\""],
        ),
        (
            "no_tasks.yaml",
            b"version: 9999\nresources: [{type: node, count: 1}]\nattributes: {}\n".to_vec(),
            vec!["Missing key \"tasks\""],
        ),
        (
            "version.yaml",
            format!("version: 10000\nresources: [{{type: node, count: 1}}]\n{tasks}attributes: {{}}\n")
                .into_bytes(),
            vec!["Only jobspec \"version\" 1-9999"],
        ),
        (
            "duration.yaml",
            format!(
                "version: 9999\nresources: [{{type: node, count: 1}}]\n{tasks}attributes: {{system: {{duration: -5}}}}\n"
            )
            .into_bytes(),
            vec!["invalid duration -5"],
        ),
        (
            "tab.yaml",
            b"version: 9999\nresources:\n\t- type: node\n".to_vec(),
            vec!["line 3"],
        ),
        (
            "unclosed.yaml",
            b"version: 9999\nresources: [\n  - {type: node\n".to_vec(),
            vec!["line 3"],
        ),
        ("list.yaml", b"- just\n- a list\n".to_vec(), vec!["not a mapping"]),
        ("empty.yaml", Vec::new(), vec!["not a mapping"]),
        ("binary.yaml", vec![0xff, 0xfe, 0xfd, b'\n'], vec!["UTF-8"]),
        ("deep.yaml", deep_yaml.into_bytes(), vec!["deeper"]),
        (
            "huge.yaml",
            format!("# {}\n", "x".repeat(2 << 20)).into_bytes(),
            vec!["limit"],
        ),
        (
            "comma.json",
            br#"{"version": 9999, "resources": [{"type": "node", "count": 1,}]}"#.to_vec(),
            vec!["line 1, column"],
        ),
        (
            "truncated.json",
            br#"{"version": 9999, "resources": [{"type": "node", "count": 1}"#.to_vec(),
            vec!["line 1, column"],
        ),
        (
            "field.json",
            br#"{"version": 9999, "resources": [{"type": "node", "count": "many"}], "tasks": [{"command": ["a"], "slot": "s", "count": {"per_slot": 1}}], "attributes": {}}"#
                .to_vec(),
            vec!["bad conversion of \"many\""],
        ),
        (
            "deep.json",
            format!("{}1{}", "{\"a\":".repeat(200), "}".repeat(200)).into_bytes(),
            vec!["deeper"],
        ),
    ];
    files
        .into_iter()
        .map(|(name, contents, fragments)| {
            s.file(name, contents);
            (name.to_string(), fragments)
        })
        .collect()
}

#[test]
fn malformed_jobspecs_get_resource_querys_messages_and_the_session_goes_on() {
    let s = Scratch::new("jobspecs");
    let spec = s.spec();
    s.file("good.yaml", GOOD_JOBSPEC);
    let bad = malformed_jobspecs(&s);
    std::fs::create_dir_all(s.path("folder.yaml")).expect("folder");
    for op in [
        "allocate",
        "allocate_orelse_reserve",
        "allocate_with_satisfiability",
        "satisfiability",
    ] {
        let mut cmds = format!("match {op} good.yaml\n");
        for (name, _) in &bad {
            cmds.push_str(&format!("match {op} {name}\n"));
        }
        cmds.push_str(&format!(
            "match {op} missing.yaml\nmatch {op} folder.yaml\n"
        ));
        cmds.push_str(&format!("match {op} good.yaml\n"));
        let r = query(&s.0, &spec, &["-f", "spec"], &cmds);
        r.assert_no_panic(op);
        assert_eq!(r.code, Some(0), "{op}: {}", r.stderr);
        let errors = r.errors();
        assert_eq!(
            errors.len(),
            bad.len() + 2,
            "{op}: one error per bad jobspec:\n{}",
            r.stderr
        );
        for ((name, fragments), line) in bad.iter().zip(&errors) {
            for f in fragments {
                assert!(
                    line.contains(f),
                    "{op} {name}: {line:?} does not name {f:?}"
                );
            }
        }
        assert!(
            errors[bad.len()].contains("missing.yaml"),
            "{}",
            errors[bad.len()]
        );
        assert!(
            errors[bad.len() + 1].contains("folder.yaml"),
            "{}",
            errors[bad.len() + 1]
        );
        // As resource-query: each jobspec it refuses prints a failure block (satisfiability
        // calls it satisfiable, as resource-query does) without consuming a job id; the
        // unreadable files print nothing; both good matches print their results.
        let blocks = r
            .stdout
            .matches("INFO: =============================\n")
            .count();
        assert_eq!(blocks, 2 * (bad.len() + 2), "{op}:\n{}", r.stdout);
        if op != "satisfiability" {
            assert_eq!(placed(&r.stdout), 2, "{op}:\n{}", r.stdout);
            assert!(r.stdout.contains("INFO: JOBID=2"), "{op}:\n{}", r.stdout);
            assert!(!r.stdout.contains("INFO: JOBID=3"), "{op}:\n{}", r.stdout);
        }
    }
    // multi-match reports the bad jobspec as match does, and the session goes on.
    let r = query(
        &s.0,
        &spec,
        &["-f", "spec"],
        "multi-match allocate good.yaml count_word.yaml\nmatch allocate good.yaml\n",
    );
    r.assert_no_panic("multi-match");
    assert!(
        r.stderr
            .contains("Jobspec error for 2: bad conversion of \"x\" to an unsigned"),
        "{}",
        r.stderr
    );
    assert_eq!(placed(&r.stdout), 2, "{}", r.stdout);
}

/// The reader's error for a missing graph file says why once.
#[test]
fn graph_errors_say_why_once() {
    let s = Scratch::new("once");
    let r = query(&s.0, &s.path("missing.graphml"), &[], "");
    r.assert_error("missing graph", &["missing.graphml"]);
    assert_eq!(r.stderr.matches("os error 2").count(), 1, "{}", r.stderr);
    let empty = s.file("nothing.json", br#"{"graph": {"nodes": [], "edges": []}}"#);
    let r = query(&s.0, &empty, &["-f", "jgf"], "");
    assert_eq!(r.stderr.matches("no vertices").count(), 1, "{}", r.stderr);
}
