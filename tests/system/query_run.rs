//! Running `shardsched query` in a scratch folder, for the tests of its errors
//! (tests/system/query_errors.rs, tests/system/query_file_errors.rs): the files they load, and what a run
//! printed and how it ended.

// Each test binary uses part of it.
#![allow(dead_code, unused_imports)]

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one `shardsched query` run may take before it counts as hung.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// The small cluster most sessions run on: 2 nodes × 2 sockets × (2 cores, 1 gpu, 4 GB).
pub const SPEC: &str = r#"name = "tiny"
[[nodes]]
hosts = "node[0-1]"
sockets = 2
cores_per_socket = 2
gpus_per_socket = 1
memory_per_socket_gb = 4
"#;

/// One core in a slot, for an hour.
pub const GOOD_JOBSPEC: &str = "version: 9999
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
pub const GRUG: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
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
pub fn jgf() -> String {
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
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("query_errors")
            .join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch folder");
        Scratch(dir)
    }

    pub fn file(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, contents).expect("scratch file");
        p
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    pub fn spec(&self) -> PathBuf {
        self.file("tiny.toml", SPEC)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What a run printed, and how it ended.
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The process ended by itself, without a panic.
    pub fn assert_no_panic(&self, what: &str) {
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
    pub fn assert_error(&self, what: &str, fragments: &[&str]) {
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

    /// The `ERROR:` lines of a session (resource-query prefixes some with the command).
    pub fn errors(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| l.contains("ERROR: "))
            .collect()
    }
}

/// Runs `shardsched ARGS` with `stdin` as standard input, in `dir`.
pub fn run<I, S>(dir: &Path, args: I, stdin: impl Into<Vec<u8>>) -> Run
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
pub fn query(dir: &Path, graph: &Path, flags: &[&str], commands: &str) -> Run {
    let mut args: Vec<&OsStr> = vec!["query".as_ref(), "-L".as_ref(), graph.as_os_str()];
    args.extend(flags.iter().map(|f| OsStr::new(*f)));
    run(dir, args, commands)
}

/// How many match results (allocated or reserved) `out` holds.
pub fn placed(out: &str) -> usize {
    out.lines()
        .filter(|l| l.starts_with("INFO: RESOURCES="))
        .count()
}
