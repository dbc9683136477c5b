//! Malformed input to `shardsched query`: bad command lines, unknown commands, missing files,
//! malformed jobspecs and graph files. The process never panics (no exit status 101, no
//! "panicked" on stderr), every error names its place (file, field path, line when there is
//! one), and a bad command inside a session is reported while the session goes on.
//!
//! Graphs and jobspecs are written to a scratch folder under `CARGO_TARGET_TMPDIR`.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one `shardsched query` run may take before it counts as hung.
const TIMEOUT: Duration = Duration::from_secs(60);

/// The small cluster most sessions run on: 2 nodes × 2 sockets × (2 cores, 1 gpu, 4 GB).
const SPEC: &str = r#"name = "tiny"
[[nodes]]
hosts = "node[0-1]"
sockets = 2
cores_per_socket = 2
gpus_per_socket = 1
memory_per_socket_gb = 4
"#;

/// One core in a slot, for an hour.
const GOOD_JOBSPEC: &str = "version: 9999
resources:
  - type: slot
    count: 1
    label: default
    with:
      - type: core
        count: 1
tasks:
  - command: [app]
    slot: default
    count: {per_slot: 1}
attributes:
  system:
    duration: 3600
";

/// A GRUG recipe: cluster `mini0` → node[2] → core[4].
const GRUG: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
  <key id="root" for="node" attr.name="root" attr.type="int"><default>0</default></key>
  <key id="type" for="node" attr.name="type" attr.type="string"/>
  <key id="basename" for="node" attr.name="basename" attr.type="string"/>
  <key id="size" for="node" attr.name="size" attr.type="long"><default>1</default></key>
  <key id="subsystem" for="node" attr.name="subsystem" attr.type="string"><default>containment</default></key>
  <key id="e_subsystem" for="edge" attr.name="e_subsystem" attr.type="string"><default>containment</default></key>
  <key id="id_scope" for="edge" attr.name="id_scope" attr.type="int"><default>0</default></key>
  <key id="multi_scale" for="edge" attr.name="multi_scale" attr.type="int"><default>1</default></key>
  <key id="gen_method" for="edge" attr.name="gen_method" attr.type="string"><default>MULTIPLY</default></key>
  <graph id="mini" edgedefault="directed">
    <node id="cluster">
      <data key="root">1</data>
      <data key="type">cluster</data>
      <data key="basename">mini</data>
    </node>
    <node id="node">
      <data key="type">node</data>
      <data key="basename">node</data>
    </node>
    <node id="core">
      <data key="type">core</data>
      <data key="basename">core</data>
    </node>
    <edge id="cluster2node" source="cluster" target="node">
      <data key="multi_scale">2</data>
    </edge>
    <edge id="node2core" source="node" target="core">
      <data key="id_scope">1</data>
      <data key="multi_scale">4</data>
    </edge>
  </graph>
</graphml>
"#;

/// A JGF graph: cluster `mini0` → node0 → core0, core1.
fn jgf() -> String {
    let vertex = |i: u32, kind: &str, name: &str, id: u32, path: &str| {
        let basename = if kind == "cluster" { "mini" } else { kind };
        format!(
            r#"{{"id": "{i}", "metadata": {{"type": "{kind}", "basename": "{basename}", "name": "{name}", "id": {id}, "uniq_id": {i}, "rank": 0, "exclusive": false, "unit": "", "size": 1, "paths": {{"containment": "{path}"}}}}}}"#
        )
    };
    let edge = |s: u32, t: u32| {
        format!(
            r#"{{"source": "{s}", "target": "{t}", "metadata": {{"name": {{"containment": "contains"}}}}}}"#
        )
    };
    format!(
        "{{\"graph\": {{\n\"nodes\": [\n{},\n{},\n{},\n{}\n],\n\"edges\": [\n{},\n{},\n{}\n]\n}}}}\n",
        vertex(0, "cluster", "mini0", 0, "/mini0"),
        vertex(1, "node", "node0", 0, "/mini0/node0"),
        vertex(2, "core", "core0", 0, "/mini0/node0/core0"),
        vertex(3, "core", "core1", 1, "/mini0/node0/core1"),
        edge(0, 1),
        edge(1, 2),
        edge(1, 3),
    )
}

/// A scratch folder, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("query_errors")
            .join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch folder");
        Scratch(dir)
    }

    fn file(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, contents).expect("scratch file");
        p
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    fn spec(&self) -> PathBuf {
        self.file("tiny.toml", SPEC)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What a run printed, and how it ended.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    /// The process ended by itself, without a panic.
    fn assert_no_panic(&self, what: &str) {
        assert!(
            self.code.is_some(),
            "{what}: killed by a signal\nstderr:\n{}",
            self.stderr
        );
        assert_ne!(
            self.code,
            Some(101),
            "{what}: exit status 101 (panic)\nstderr:\n{}",
            self.stderr
        );
        assert!(
            !self.stderr.contains("panicked"),
            "{what}: panicked\nstderr:\n{}",
            self.stderr
        );
    }

    /// No panic, a failure exit status, and every fragment on stderr.
    fn assert_error(&self, what: &str, fragments: &[&str]) {
        self.assert_no_panic(what);
        assert_ne!(
            self.code,
            Some(0),
            "{what}: succeeded\nstdout:\n{}",
            self.stdout
        );
        for f in fragments {
            assert!(
                self.stderr.contains(f),
                "{what}: stderr does not name {f:?}:\n{}",
                self.stderr
            );
        }
    }

    /// The `ERROR:` lines of a session.
    fn errors(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| l.starts_with("ERROR: "))
            .collect()
    }
}

/// Runs `shardsched ARGS` with `stdin` as standard input, in `dir`.
fn run<I, S>(dir: &Path, args: I, stdin: impl Into<Vec<u8>>) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut child = Command::new(env!("CARGO_BIN_EXE_shardsched"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn shardsched");
    let input = stdin.into();
    let mut pipe_in = child.stdin.take().expect("stdin");
    // The process may stop reading (at `quit`, or when it refuses its flags): a broken pipe
    // then is fine.
    let writer = std::thread::spawn(move || {
        let _ = pipe_in.write_all(&input);
    });
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let started = Instant::now();
    let status = loop {
        match child.try_wait().expect("wait") {
            Some(s) => break s,
            None if started.elapsed() > TIMEOUT => {
                let _ = child.kill();
                panic!("shardsched query hung for {TIMEOUT:?}");
            }
            None => std::thread::sleep(Duration::from_millis(2)),
        }
    };
    let _ = writer.join();
    Run {
        code: status.code(),
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

/// `shardsched query -L graph [flags]` with `commands`.
fn query(dir: &Path, graph: &Path, flags: &[&str], commands: &str) -> Run {
    let mut args: Vec<&OsStr> = vec!["query".as_ref(), "-L".as_ref(), graph.as_os_str()];
    args.extend(flags.iter().map(|f| OsStr::new(*f)));
    run(dir, args, commands)
}

/// How many match results (allocated or reserved) `out` holds.
fn placed(out: &str) -> usize {
    out.lines()
        .filter(|l| l.starts_with("INFO: RESOURCES="))
        .count()
}

#[test]
fn bad_command_lines_are_refused_by_name() {
    let s = Scratch::new("flags");
    let spec = s.spec();
    let spec = spec.to_str().expect("utf-8 path");
    let missing = s.path("missing.graphml");
    let missing = missing.to_str().expect("utf-8 path");
    let dir = s.0.to_str().expect("utf-8 path");
    let no_out = s.path("no/such/dir/out.txt");
    let no_out = no_out.to_str().expect("utf-8 path");
    let cases: &[(&[&str], &[&str])] = &[
        (&[], &["Usage"]),
        (&["frobnicate"], &["frobnicate"]),
        (&["query", "-L"], &["--load-file"]),
        (&["query", "-L", spec, "--bogus"], &["--bogus"]),
        (&["query", "-L", spec, "-e", "yes"], &["yes"]),
        (&["query", "-L", missing], &["missing.graphml"]),
        (&["query", "-L", dir], &[dir]),
        (&["query", "-L", spec, "-f", "bogus"], &["-f bogus"]),
        (&["query", "-L", spec, "-f", ""], &["-f"]),
        (
            &["query", "-L", spec, "-f", "spec", "-P", "bogus"],
            &["policy", "bogus"],
        ),
        (&["query", "-L", spec, "-f", "spec", "-P", ""], &["policy"]),
        (
            &["query", "-L", spec, "-f", "spec", "-P", "policy=sideways"],
            &["sideways"],
        ),
        (
            &[
                "query",
                "-L",
                spec,
                "-f",
                "spec",
                "-P",
                "node_centric=maybe",
            ],
            &["maybe"],
        ),
        (
            &["query", "-L", spec, "-f", "spec", "-F", "bogus"],
            &["-F bogus"],
        ),
        (
            &["query", "-L", spec, "-f", "spec", "--prune-filters", "ALL"],
            &["prune filter", "ALL"],
        ),
        (
            &[
                "query",
                "-L",
                spec,
                "-f",
                "spec",
                "--prune-filters",
                "ALL:core,:node",
            ],
            &["prune filter", ":node"],
        ),
        (
            &["query", "-L", spec, "-f", "spec", "-t", no_out],
            &[no_out],
        ),
    ];
    for (args, fragments) in cases {
        let r = run(&s.0, args.iter(), "match allocate nothing.yaml\nquit\n");
        r.assert_error(&format!("shardsched {args:?}"), fragments);
        assert_eq!(placed(&r.stdout), 0, "shardsched {args:?} matched anyway");
    }
}

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

/// Writes the malformed jobspecs; returns (file name, fragments its error must hold).
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
            vec!["resources[0].count", "\"x\""],
        ),
        (
            "count_neg.yaml",
            with_tasks(
                "  - type: node\n    count: 1\n    with:\n      - type: slot\n        count: 1\n        label: s\n        with:\n          - type: core\n            count: -1\n",
            )
            .into_bytes(),
            vec!["resources[0].with[0].with[0].count"],
        ),
        (
            "min_max.yaml",
            with_tasks("  - type: node\n    count: {min: 2, max: 1, operator: '+', operand: 1}\n")
                .into_bytes(),
            vec!["resources[0].count", "max"],
        ),
        (
            "operator.yaml",
            with_tasks("  - type: node\n    count: {min: 1, max: 4, operator: '%', operand: 1}\n")
                .into_bytes(),
            vec!["resources[0].count", "operator"],
        ),
        (
            "no_label.yaml",
            with_tasks("  - type: slot\n    count: 1\n    with: [{type: core, count: 1}]\n")
                .into_bytes(),
            vec!["resources[0]", "labeled"],
        ),
        (
            "type_number.yaml",
            with_tasks("  - {type: 5, count: 1}\n").into_bytes(),
            vec!["\"5\"", "known to fluxion"],
        ),
        (
            "no_resources.yaml",
            format!("version: 9999\n{tasks}attributes: {{}}\n").into_bytes(),
            vec!["resources"],
        ),
        (
            "no_tasks.yaml",
            b"version: 9999\nresources: [{type: node, count: 1}]\nattributes: {}\n".to_vec(),
            vec!["tasks"],
        ),
        (
            "version.yaml",
            format!("version: 10000\nresources: [{{type: node, count: 1}}]\n{tasks}attributes: {{}}\n")
                .into_bytes(),
            vec!["version", "9999"],
        ),
        (
            "duration.yaml",
            format!(
                "version: 9999\nresources: [{{type: node, count: 1}}]\n{tasks}attributes: {{system: {{duration: -5}}}}\n"
            )
            .into_bytes(),
            vec!["attributes.system.duration"],
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
        ("list.yaml", b"- just\n- a list\n".to_vec(), vec!["jobspec"]),
        ("empty.yaml", Vec::new(), vec!["jobspec"]),
        ("binary.yaml", vec![0xff, 0xfe, 0xfd, b'\n'], vec![]),
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
            vec!["resources[0].count", "many"],
        ),
        (
            "deep.json",
            format!("{}1{}", "{\"a\":".repeat(200), "}".repeat(200)).into_bytes(),
            vec!["deeper"],
        ),
    ];
    files
        .into_iter()
        .map(|(name, contents, mut fragments)| {
            s.file(name, contents);
            fragments.push(name);
            (name.to_string(), fragments)
        })
        .collect()
}

#[test]
fn malformed_jobspecs_name_the_file_and_the_field() {
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
    // multi-match reports the bad file by name too.
    let r = query(
        &s.0,
        &spec,
        &["-f", "spec"],
        "multi-match allocate good.yaml count_word.yaml\nmatch allocate good.yaml\n",
    );
    r.assert_no_panic("multi-match");
    assert!(
        r.stderr.contains("count_word.yaml: resources[0].count"),
        "{}",
        r.stderr
    );
    assert_eq!(placed(&r.stdout), 2, "{}", r.stdout);
}

#[test]
fn bad_session_commands_are_reported_and_the_session_goes_on() {
    let s = Scratch::new("session");
    let spec = s.spec();
    s.file("good.yaml", GOOD_JOBSPEC);
    // (command, fragment its error must hold)
    let bad: &[(&str, &str)] = &[
        ("frobnicate", "unknown command \"frobnicate\""),
        ("MATCH allocate good.yaml", "unknown command \"MATCH\""),
        ("match", "match: malformed command"),
        ("match bogus good.yaml", "unknown subcommand \"bogus\""),
        ("match allocate", "match: malformed command"),
        ("match allocate missing.yaml", "missing.yaml"),
        ("cancel", "cancel: malformed command"),
        // resource-query reads a job id as strtoll does.
        ("cancel x", "nonexistent job 0"),
        ("cancel -1", "nonexistent job 18446744073709551615"),
        (
            "cancel 99999999999999999999999",
            "nonexistent job 9223372036854775807",
        ),
        ("cancel 99", "nonexistent job 99"),
        ("info", "info: malformed command"),
        ("info 77", "77"),
        ("set-status", "set-status: malformed command"),
        ("set-status /tiny0/node0", "set-status: malformed command"),
        ("set-status /tiny0/node0 sideways", "sideways"),
        ("get-status", "get-status: malformed command"),
        (
            "set-property /tiny0/node0",
            "set-property: malformed command",
        ),
        ("get-property", "get-property: malformed command"),
        (
            "multi-match allocate missing.yaml",
            "multi-match: malformed command",
        ),
    ];
    // Answers resource-query writes to its output, not as errors.
    let answered: &[(&str, &str)] = &[
        (
            "set-status /nope down",
            "Could not find path /nope in resource graph.",
        ),
        (
            "get-status /tiny0/node9",
            "Could not find path /tiny0/node9 in resource graph.",
        ),
        (
            "set-property /nope a=b",
            "Couldn't find path /nope in resource graph.",
        ),
        (
            "get-property /tiny0/node1",
            "No properties were found for /tiny0/node1",
        ),
    ];
    let mut cmds = String::from("match allocate good.yaml\n");
    for (c, _) in bad.iter().chain(answered) {
        cmds.push_str(c);
        cmds.push('\n');
    }
    // Lines that are not errors: blank, comments, list/stat/info of a live job.
    cmds.push_str("\n   \n# a comment\nlist\nstat\ninfo 1\n");
    cmds.push_str("match allocate good.yaml\nquit\nmatch allocate good.yaml\n");
    for to_file in [false, true] {
        let out = s.path("out.txt");
        let flags: Vec<&str> = if to_file {
            vec!["-f", "spec", "-t", out.to_str().expect("utf-8 path")]
        } else {
            vec!["-f", "spec"]
        };
        let r = query(&s.0, &spec, &flags, &cmds);
        r.assert_no_panic("session");
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        let errors = r.errors();
        assert_eq!(
            errors.len(),
            bad.len(),
            "one error per bad command:\n{}",
            r.stderr
        );
        for ((c, f), line) in bad.iter().zip(&errors) {
            assert!(line.contains(f), "{c:?}: {line:?} does not name {f:?}");
        }
        let results = if to_file {
            std::fs::read_to_string(&out).expect("output file")
        } else {
            r.stdout.clone()
        };
        for (c, answer) in answered {
            assert!(results.contains(answer), "{c:?}: {results}");
        }
        // The first and the second good match, not the one after `quit`.
        assert_eq!(placed(&results), 2, "{results}");
        assert!(results.contains("INFO: JOBID=1\n"), "{results}");
        assert!(results.contains("INFO: JOBID=2\n"), "{results}");
        assert!(r.stdout.contains("INFO: 1, ALLOCATED, 0"), "{}", r.stdout);
    }
}

#[test]
fn sessions_on_every_graph_source_go_on_after_errors() {
    let s = Scratch::new("formats");
    s.file("good.yaml", GOOD_JOBSPEC);
    let grug = s.file("mini.graphml", GRUG);
    let jgf = s.file("mini.json", jgf());
    let spec = s.spec();
    let load = |g: &Path, f: &str| -> Vec<String> {
        vec![
            "-L".into(),
            g.to_string_lossy().into_owned(),
            "-f".into(),
            f.into(),
        ]
    };
    // (flags, root path); no -L means the embedded default cluster.
    let sources: [(Vec<String>, &str); 4] = [
        (load(&grug, "grug"), "/mini0"),
        (load(&jgf, "jgf"), "/mini0"),
        (load(&spec, "spec"), "/tiny0"),
        (vec![], "/cluster0"),
    ];
    for (flags, root) in &sources {
        let cmds = format!(
            "set-status {root}/node999 down\nmatch allocate nope.yaml\nget-status {root}\nmatch allocate good.yaml\n"
        );
        let mut args = vec!["query".to_string()];
        args.extend(flags.iter().cloned());
        let r = run(&s.0, &args, cmds);
        let what = format!("{args:?}");
        r.assert_no_panic(&what);
        assert_eq!(r.code, Some(0), "{what}: {}", r.stderr);
        assert_eq!(r.errors().len(), 1, "{what}: {}", r.stderr);
        assert!(r.errors()[0].contains("nope.yaml"), "{what}: {}", r.stderr);
        let answers =
            format!("Could not find path {root}/node999 in resource graph.\n{root} is up\n");
        assert!(r.stdout.starts_with(&answers), "{what}: {}", r.stdout);
        assert_eq!(placed(&r.stdout), 1, "{what}: {}", r.stdout);
    }
}

/// A command line that is not valid UTF-8 is one bad command like any other: the session
/// reports it and goes on, and the results of earlier matches are not lost.
#[test]
fn non_utf8_command_line_does_not_end_the_session() {
    let s = Scratch::new("utf8");
    let spec = s.spec();
    s.file("good.yaml", GOOD_JOBSPEC);
    let mut cmds = b"match allocate good.yaml\n".to_vec();
    cmds.extend_from_slice(&[0xff, 0xfe, b'\n']);
    cmds.extend_from_slice(b"match allocate good.yaml\n");
    let mut args: Vec<&OsStr> = vec!["query".as_ref(), "-L".as_ref(), spec.as_os_str()];
    args.extend(["-f", "spec"].map(OsStr::new));
    let r = run(&s.0, args, cmds);
    r.assert_no_panic("non-UTF-8 line");
    assert_eq!(r.errors().len(), 1, "{}", r.stderr);
    assert_eq!(placed(&r.stdout), 2, "{}", r.stdout);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
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

/// A small deterministic generator (SplitMix64), so that failures replay from their seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}

/// Random command lines fed to one session each: well-formed commands with good and bad
/// arguments, the same mutated (a word replaced by garbage, dropped, or repeated), and lines
/// of random words. The session never panics, never fails, and a final good `match` still
/// prints its result. (`quit` is left out: it would end the session early.)
#[test]
fn random_command_lines_never_panic() {
    let s = Scratch::new("random");
    let spec = s.spec();
    s.file("good.yaml", GOOD_JOBSPEC);
    s.file(
        "range.yaml",
        GOOD_JOBSPEC.replace(
            "count: 1\n    with",
            "count: {min: 1, max: 2, operator: '+', operand: 1}\n    with",
        ),
    );
    s.file(
        "bad.yaml",
        "version: 9999\nresources: [{type: node, count: x}]\n",
    );
    s.file("broken.json", "{\"version\": 9999, ");
    s.file("binary.yaml", [0xffu8, 0x00, 0xfe]);
    std::fs::create_dir_all(s.path("folder.yaml")).expect("folder");
    let commands = [
        "match",
        "multi-match",
        "cancel",
        "set-status",
        "get-status",
        "set-property",
        "get-property",
        "info",
        "list",
        "stat",
        "#",
        "find",
        "help",
    ];
    let ops = [
        "allocate",
        "allocate_orelse_reserve",
        "allocate_with_satisfiability",
        "satisfiability",
    ];
    let files = [
        "good.yaml",
        "good.yaml",
        "good.yaml",
        "range.yaml",
        "bad.yaml",
        "broken.json",
        "binary.yaml",
        "missing.yaml",
        "folder.yaml",
    ];
    let paths = [
        "/tiny0",
        "/tiny0/node0",
        "/tiny0/node1",
        "/tiny0/node1/socket1",
        "/tiny0/node0/socket0/core1",
        "/tiny0/node1/socket0/gpu0",
        "/tiny0/node0/socket1/memory1",
        "/nope",
        "//",
        "/",
    ];
    let ids = [
        "0",
        "1",
        "2",
        "3",
        "4",
        "7",
        "-1",
        "18446744073709551616",
        "x",
    ];
    let props = ["k=v", "ssd=", "=", "k=", "=v", "a=b=c"];
    let garbage = [
        "",
        "é",
        "\u{1f980}",
        "\t",
        "\u{0}",
        "\u{7f}",
        "{",
        "}",
        "[",
        "'",
        "\"",
        "\\",
        "--",
        "-L",
        "up",
        "down",
        "Allocate",
        "match",
        "quit-not",
    ];
    let policies = [
        "first", "high", "low", "hinode", "lonode", "hinodex", "lonodex",
    ];
    let formats = ["simple", "pretty_simple", "jgf", "rv1", "rv1_nosched"];
    let (mut total_placed, mut total_errors) = (0, 0);
    for seed in 0..24u64 {
        let mut rng = Rng(seed);
        let mut cmds = String::new();
        for _ in 0..60 {
            let mut line: Vec<String> = match rng.below(12) {
                0 => vec!["x".repeat(rng.below(5000))],
                1 => vec![
                    (0..rng.below(40))
                        .map(|_| char::from_u32(rng.below(0x800) as u32).unwrap_or('?'))
                        .collect(),
                ],
                2 => (0..rng.below(6))
                    .map(|_| match rng.below(3) {
                        0 => rng.pick(&commands),
                        1 => rng.pick(&garbage),
                        _ => rng.pick(&files),
                    })
                    .map(String::from)
                    .collect(),
                3..=6 => vec![
                    "match".into(),
                    rng.pick(&ops).into(),
                    rng.pick(&files).into(),
                ],
                7 => vec![
                    "multi-match".into(),
                    rng.pick(&ops).into(),
                    rng.pick(&files).into(),
                    rng.pick(&files).into(),
                ],
                8 => vec![rng.pick(&["cancel", "info"]).into(), rng.pick(&ids).into()],
                9 => vec![
                    "set-status".into(),
                    rng.pick(&paths).into(),
                    rng.pick(&["up", "up", "down"]).into(),
                ],
                10 => vec![
                    rng.pick(&["get-status", "get-property", "set-property"])
                        .into(),
                    rng.pick(&paths).into(),
                    rng.pick(&props).into(),
                ],
                _ => vec![rng.pick(&["list", "stat", "#", "info"]).into()],
            };
            if !line.is_empty() {
                let i = rng.below(line.len());
                match rng.below(8) {
                    0 => line[i] = rng.pick(&garbage).into(),
                    1 => {
                        line.remove(i);
                    }
                    2 => line.insert(i, line[i].clone()),
                    _ => {}
                }
            }
            let line = line.join(" ").replace(['\n', '\r'], " ");
            assert_ne!(line.split_whitespace().next(), Some("quit"));
            cmds.push_str(&line);
            cmds.push('\n');
        }
        cmds.push_str("match satisfiability good.yaml\n");
        let p = rng.pick(&policies);
        let f = rng.pick(&formats);
        let r = query(&s.0, &spec, &["-f", "spec", "-P", p, "-F", f], &cmds);
        let what = format!("seed {seed} (-P {p} -F {f})");
        r.assert_no_panic(&what);
        assert_eq!(r.code, Some(0), "{what}: {}", r.stderr);
        let tail = "INFO: =============================\n";
        let sat = format!("{tail}INFO: Satisfiable request\n{tail}");
        let unsat = format!("{tail}INFO: Unsatisfiable request\n{tail}");
        assert!(
            r.stdout.ends_with(&sat) || r.stdout.ends_with(&unsat),
            "{what}: the final match printed nothing:\n{}",
            r.stdout
        );
        total_placed += placed(&r.stdout);
        total_errors += r.errors().len();
    }
    // The sessions did match and did err, or this test would prove little.
    assert!(total_placed > 24, "only {total_placed} jobs placed");
    assert!(total_errors > 24 * 10, "only {total_errors} errors");
}
