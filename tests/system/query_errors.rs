//! Malformed input to `shardsched query`: bad command lines, unknown commands, missing files,
//! bad commands inside a session (malformed graph and jobspec files are in
//! tests/system/query_file_errors.rs). The process never panics (no exit status 101, no "panicked"
//! on stderr), every error names its place, and a bad command inside a session is reported
//! while the session goes on.
//!
//! Graphs and jobspecs are written to a scratch folder under `CARGO_TARGET_TMPDIR`
//! ([`query_run`]).

use crate::query_run;

use std::ffi::OsStr;
use std::path::Path;

use query_run::{GOOD_JOBSPEC, GRUG, Scratch, jgf, placed, query, run};

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
fn bad_session_commands_are_reported_and_the_session_goes_on() {
    let s = Scratch::new("session");
    let spec = s.spec();
    s.file("good.yaml", GOOD_JOBSPEC);
    // (command, the line resource-query writes to stderr for it, if any: checked against
    // Fluxion's binary on the same commands; unknown commands are silent there).
    let bad: &[(&str, Option<&str>)] = &[
        ("frobnicate", None),
        ("MATCH allocate good.yaml", None),
        ("match", Some("ERROR: malformed command")),
        ("match bogus good.yaml", Some("ERROR: unknown subcmd bogus")),
        ("match allocate", Some("ERROR: malformed command")),
        (
            "match allocate missing.yaml",
            Some("ERROR: can't open missing.yaml"),
        ),
        ("cancel", Some("ERROR: malformed command")),
        // resource-query reads a job id as strtoll does.
        ("cancel x", Some("cancel: ERROR: nonexistent job 0")),
        (
            "cancel -1",
            Some("cancel: ERROR: nonexistent job 18446744073709551615"),
        ),
        (
            "cancel 99999999999999999999999",
            Some("cancel: ERROR: nonexistent job 9223372036854775807"),
        ),
        ("cancel 99", Some("cancel: ERROR: nonexistent job 99")),
        ("info", Some("ERROR: malformed command")),
        ("info 77", Some("info: ERROR: nonexistent job 77")),
        ("set-status", Some("ERROR: malformed command")),
        ("set-status /tiny0/node0", Some("ERROR: malformed command")),
        (
            "set-status /tiny0/node0 sideways",
            Some("ERROR: unrecognized status"),
        ),
        ("get-status", Some("ERROR: malformed command")),
        (
            "set-property /tiny0/node0",
            Some("ERROR: malformed command"),
        ),
        ("get-property", Some("ERROR: malformed command")),
        (
            "multi-match allocate missing.yaml",
            Some("ERROR: malformed command"),
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
    for c in bad.iter().map(|b| b.0).chain(answered.iter().map(|a| a.0)) {
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
        let want: Vec<&str> = bad.iter().filter_map(|(_, line)| *line).collect();
        let got: Vec<&str> = r.stderr.lines().collect();
        assert_eq!(got, want, "resource-query's lines, in order:\n{}", r.stderr);
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

/// `-t` naming the file standard error writes to: each command's output is there before
/// the next command's error, as in resource-query's line-flushed output (the `-t` file is
/// buffered across commands only when nobody can see the order).
#[test]
fn output_to_standard_error_keeps_the_order_of_commands() {
    let s = Scratch::new("order");
    s.file("good.yaml", GOOD_JOBSPEC);
    let spec = s.spec();
    let cmds = "match allocate good.yaml\nmatch allocate missing.yaml\n\
                match allocate good.yaml\nmatch allocate missing.yaml\nquit\n";
    let r = query(&s.0, &spec, &["-f", "spec", "-t", "/dev/stderr"], cmds);
    r.assert_no_panic("session");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let order: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.starts_with("INFO: JOBID=") || l.contains("ERROR: "))
        .collect();
    assert_eq!(
        order,
        [
            "INFO: JOBID=1",
            "ERROR: can't open missing.yaml",
            "INFO: JOBID=2",
            "ERROR: can't open missing.yaml"
        ],
        "{}",
        r.stderr
    );
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
