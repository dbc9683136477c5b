//! Every graph file of the Fluxion conformance folder — each GRUG, JGF and rv1exec file under
//! `t/data/resource/{grugs,jgfs,rv1exec}`, not only those the cases name — loads with
//! Fluxion's vertex set: what `shardsched query -e` says about the graph (vertex and edge
//! counts, distinct types, names and paths, vertices per rank) and the JGF that
//! `find status=up or status=down` writes (every containment vertex with its ids, rank and
//! paths in every subsystem) must be what resource-query gives, recorded in
//! `fluxion-graphs.tsv`. A file resource-query refuses must be refused.
//!
//! Each graph then gets the same match results: a fixed stream of matches (a core on a node,
//! two 4-core slots, two exclusive nodes; allocate, reserve, cancel, satisfiability, `find`)
//! under the policies first, high and lonodex and the writers simple, jgf, rlite and
//! rv1_nosched; the table keeps the CRC-32 of all their outputs.
//!
//! With `FLUXION_RESOURCE_QUERY` set to Fluxion's binary, each file is also run through it
//! and compared byte for byte (and the table's rows are checked against it).
//!
//! The folder comes from `SHARDSCHED_CONFORMANCE_DIR` (default
//! `../shared/conformance/fluxion`); when it is absent the test says why and passes, unless
//! `SHARDSCHED_REQUIRE_SHARED=1`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What `find` is asked: every vertex.
const FIND_ALL: &str = "find status=up or status=down\nquit\n";

/// The match stream every graph is put through, and its jobspecs.
const MATCHES: &str = "match allocate a.yaml\nmatch allocate b.yaml\n\
    match allocate_orelse_reserve c.yaml\nmatch allocate a.yaml\n\
    match allocate_orelse_reserve b.yaml\ncancel 1\nmatch allocate_with_satisfiability c.yaml\n\
    match satisfiability b.yaml\nmatch allocate_orelse_reserve c.yaml\n\
    find sched-now=allocated\nquit\n";
const JOBSPECS: [(&str, &str); 3] = [
    ("a.yaml", "node: 1, slot: 1, core: 1, 3600"),
    ("b.yaml", "slot: 2, core: 4, 1800"),
    ("c.yaml", "node: 2 exclusive, slot: 1, core: 1, 7200"),
];
const POLICIES: [&str; 3] = ["first", "high", "lonodex"];
const WRITERS: [&str; 4] = ["simple", "jgf", "rlite", "rv1_nosched"];

/// A jobspec from its outline `[node: N [exclusive], ]slot: N, core: N, DURATION`.
fn jobspec(outline: &str) -> String {
    let parts: Vec<&str> = outline.split(", ").collect();
    let (levels, duration) = parts.split_at(parts.len() - 1);
    let mut text = String::from("version: 9999\nresources:\n");
    for (depth, level) in levels.iter().enumerate() {
        let pad = "  ".repeat(2 * depth + 1);
        let (kind, rest) = level.split_once(": ").expect("kind: count");
        let (count, exclusive) = match rest.split_once(' ') {
            Some((n, _)) => (n, true),
            None => (rest, false),
        };
        text.push_str(&format!("{pad}- type: {kind}\n{pad}  count: {count}\n"));
        if exclusive {
            text.push_str(&format!("{pad}  exclusive: true\n"));
        }
        if kind == "slot" {
            text.push_str(&format!("{pad}  label: default\n"));
        }
        if depth + 1 < levels.len() {
            text.push_str(&format!("{pad}  with:\n"));
        }
    }
    text.push_str("tasks:\n  - command: [app]\n    slot: default\n    count: {per_slot: 1}\n");
    text.push_str(&format!(
        "attributes:\n  system:\n    duration: {}\n",
        duration[0]
    ));
    text
}

/// The conformance folder, or `None` (saying why) when it is absent.
pub(crate) fn conformance_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("SHARDSCHED_CONFORMANCE_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance/fluxion"),
    };
    if dir.is_dir() {
        return Some(dir);
    }
    let msg = format!(
        "skipping: {} not found (set SHARDSCHED_CONFORMANCE_DIR)",
        dir.display()
    );
    assert!(
        std::env::var("SHARDSCHED_REQUIRE_SHARED").as_deref() != Ok("1"),
        "{msg}"
    );
    println!("{msg}");
    None
}

/// Graph files below `dir`, relative to it, sorted.
fn graph_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack: Vec<PathBuf> = ["grugs", "jgfs", "rv1exec"]
        .iter()
        .map(|d| dir.join(d))
        .collect();
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(rel) = p.strip_prefix(dir) {
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}

fn format_of(file: &str) -> &'static str {
    if file.ends_with(".graphml") {
        "grug"
    } else if file.starts_with("jgfs") {
        "jgf"
    } else {
        "rv1exec"
    }
}

/// One row of the table: the graph info, the find output's length and CRC-32, the CRC-32
/// of the match outputs.
#[derive(Debug, PartialEq, Eq)]
struct Row {
    info: String,
    bytes: usize,
    crc: String,
    matches: String,
}

/// Runs `bin` (ours, or resource-query with `query` left out) on `file`: its row, and the
/// find output itself.
fn run(bin: &[&str], dir: &Path, file: &str, scratch: &Path) -> (Row, Vec<u8>) {
    let out = scratch.join(file.replace('/', "_"));
    let _ = std::fs::remove_file(&out);
    let mut child = Command::new(bin[0])
        .args(&bin[1..])
        .args(["-L", file, "-f", format_of(file), "-e", "-F", "jgf", "-t"])
        .arg(&out)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    // A graph refused at load ends the process before it reads: a broken pipe then is fine
    // (as in `conformance`), whichever of the two comes first on a loaded machine.
    let _ = child
        .stdin
        .take()
        .expect("stdin")
        .write_all(FIND_ALL.as_bytes());
    let output = child.wait_with_output().expect("wait");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let info: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("INFO: "))
        .filter(|l| {
            !l.starts_with("Graph Load Time")
                && !l.starts_with("ELAPSE")
                && !l.starts_with("EXPRESSION")
                && !l.starts_with('=')
        })
        .collect();
    if info.is_empty() {
        let row = Row {
            info: "refused".into(),
            bytes: 0,
            crc: "0".into(),
            matches: "0".into(),
        };
        return (row, Vec::new());
    }
    let data = std::fs::read(&out).unwrap_or_default();
    let row = Row {
        info: info.join(" | "),
        bytes: data.len(),
        crc: format!("{:08x}", crc32fast::hash(&data)),
        matches: format!("{:08x}", matches(bin, dir, file, scratch)),
    };
    (row, data)
}

/// The CRC-32 of the outputs of [`MATCHES`] on `file` under every policy and writer (the
/// jobspecs are in `scratch`).
fn matches(bin: &[&str], dir: &Path, file: &str, scratch: &Path) -> u32 {
    let mut all = crc32fast::Hasher::new();
    let graph = dir.join(file);
    let out = scratch.join("matches.out");
    for policy in POLICIES {
        for writer in WRITERS {
            let _ = std::fs::remove_file(&out);
            let mut child = Command::new(bin[0])
                .args(&bin[1..])
                .arg("-L")
                .arg(&graph)
                .args(["-f", format_of(file), "-P", policy, "-F", writer, "-t"])
                .arg(&out)
                .current_dir(scratch)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn");
            let _ = child
                .stdin
                .take()
                .expect("stdin")
                .write_all(MATCHES.as_bytes());
            child.wait().expect("wait");
            all.update(&std::fs::read(&out).unwrap_or_default());
        }
    }
    all.finalize()
}

fn table() -> BTreeMap<String, Row> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fluxion-graphs.tsv");
    let text = std::fs::read_to_string(&path).expect("fluxion-graphs.tsv");
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 6, "fluxion-graphs.tsv: malformed line {l:?}");
            let row = Row {
                info: f[2].to_string(),
                bytes: f[3].parse().expect("byte count"),
                crc: f[4].to_string(),
                matches: f[5].to_string(),
            };
            (f[0].to_string(), row)
        })
        .collect()
}

#[test]
fn every_conformance_graph_loads_with_fluxions_vertex_set() {
    let Some(dir) = conformance_dir() else {
        return;
    };
    let data = dir.join("t/data/resource");
    let scratch = tempfile::tempdir().expect("scratch");
    for (name, outline) in JOBSPECS {
        std::fs::write(scratch.path().join(name), jobspec(outline)).expect("jobspec");
    }
    let want = table();
    let files = graph_files(&data);
    assert!(files.len() >= 19, "graph files found: {files:?}");
    let fluxion = std::env::var("FLUXION_RESOURCE_QUERY").ok();
    let mut bad = Vec::new();
    for file in &files {
        let (ours, our_find) = run(
            &[env!("CARGO_BIN_EXE_shardsched"), "query"],
            &data,
            file,
            scratch.path(),
        );
        match want.get(file) {
            None => bad.push(format!(
                "{file}: not in fluxion-graphs.tsv (ours: {ours:?})"
            )),
            Some(w) if *w != ours => {
                bad.push(format!("{file}:\n  fluxion {w:?}\n  ours    {ours:?}"))
            }
            Some(_) => {}
        }
        if let Some(bin) = &fluxion {
            let (theirs, their_find) = run(&[bin], &data, file, scratch.path());
            if theirs.info != ours.info || their_find != our_find || theirs.matches != ours.matches
            {
                bad.push(format!("{file}: differs from {bin} itself"));
            }
            if want.get(file) != Some(&theirs) {
                bad.push(format!(
                    "{file}: the table is stale; {bin} gives\n{file}\t{}\t{}\t{}\t{}\t{}",
                    format_of(file),
                    theirs.info,
                    theirs.bytes,
                    theirs.crc,
                    theirs.matches
                ));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
