//! Fluxion resource-query conformance: every case of `../shared/conformance/fluxion/cases.tsv`
//! is replayed through `shardsched query` and its output compared byte for byte.
//!
//! The data lives outside the repository; its folder comes from `SHARDSCHED_CONFORMANCE_DIR`
//! (default `../shared/conformance/fluxion` beside the checkout). When it is absent the test
//! prints why and passes, unless `SHARDSCHED_REQUIRE_SHARED=1` (set by `.ci/run`).
//!
//! `conformance-known-failures.tsv` lists the cases we do not pass yet, each with its reason.
//! The test fails when a case outside that list fails, and when a listed case passes, so the
//! list can only shrink.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one case may run before it counts as hung.
const CASE_TIMEOUT: Duration = Duration::from_secs(60);

fn shared_dir(var: &str, rel: &str) -> Option<PathBuf> {
    let dir = match std::env::var_os(var) {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel),
    };
    if dir.is_dir() {
        return Some(dir);
    }
    let msg = format!("skipping: {} not found (set {var})", dir.display());
    assert!(
        std::env::var("SHARDSCHED_REQUIRE_SHARED").as_deref() != Ok("1"),
        "{msg}"
    );
    println!("{msg}");
    None
}

struct Case {
    id: String,
    commands: String,
    graph: String,
    flags: Vec<String>,
    expected: String,
    tier: String,
}

fn read_cases(dir: &Path) -> Vec<Case> {
    let text = std::fs::read_to_string(dir.join("cases.tsv")).expect("cases.tsv is readable");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert!(f.len() >= 7, "cases.tsv: malformed line {l:?}");
            Case {
                id: f[0].to_string(),
                commands: f[2].to_string(),
                graph: f[3].to_string(),
                flags: f[4]
                    .split_whitespace()
                    .map(|w| w.replace('"', ""))
                    .collect(),
                expected: f[5].to_string(),
                tier: f[6].to_string(),
            }
        })
        .collect()
}

fn known_failures() -> HashMap<String, String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance-known-failures.tsv");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (id, why) = l.split_once('\t').unwrap_or((l, ""));
            (id.trim().to_string(), why.trim().to_string())
        })
        .collect()
}

/// Runs one case; `Ok(())` when the output is byte-identical.
fn run_case(t: &Path, case: &Case, scratch: &Path) -> Result<(), String> {
    let cmds = std::fs::read_to_string(t.join(&case.commands))
        .map_err(|e| format!("{}: {e}", case.commands))?;
    let cmds = cmds.replace("@TEST_SRCDIR@", &t.to_string_lossy());
    let out = scratch.join(format!("{}.out", case.id.replace(':', "_")));
    let mut child = Command::new(env!("CARGO_BIN_EXE_shardsched"))
        .arg("query")
        .arg("-L")
        .arg(t.join(&case.graph))
        .args(&case.flags)
        .arg("-t")
        .arg(&out)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // The session may stop reading at `quit`; a broken pipe then is fine.
        let _ = stdin.write_all(cmds.as_bytes());
    }
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() > CASE_TIMEOUT => {
                let _ = child.kill();
                return Err("timed out".into());
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(format!("wait: {e}")),
        }
    }
    let got = std::fs::read(&out).unwrap_or_default();
    let want =
        std::fs::read(t.join(&case.expected)).map_err(|e| format!("{}: {e}", case.expected))?;
    if got == want {
        return Ok(());
    }
    let got = String::from_utf8_lossy(&got);
    let want = String::from_utf8_lossy(&want);
    let line = got
        .lines()
        .zip(want.lines())
        .position(|(a, b)| a != b)
        .unwrap_or(got.lines().count().min(want.lines().count()));
    Err(format!(
        "differs at line {}: got {:?}, want {:?}",
        line + 1,
        got.lines().nth(line).unwrap_or("<end>"),
        want.lines().nth(line).unwrap_or("<end>")
    ))
}

#[test]
fn fluxion_resource_query_cases() {
    let Some(dir) = shared_dir("SHARDSCHED_CONFORMANCE_DIR", "shared/conformance/fluxion") else {
        return;
    };
    let t = dir.join("t").canonicalize().expect("t/ exists");
    let scratch =
        std::env::temp_dir().join(format!("shardsched-conformance-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("scratch dir");
    let known = known_failures();
    let only = std::env::var("SHARDSCHED_CASES").ok();
    let mut per_tier: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut unexpected = Vec::new();
    for case in read_cases(&dir) {
        if only
            .as_deref()
            .is_some_and(|o| !o.split(',').any(|x| x == case.id))
        {
            continue;
        }
        let tier = case.tier.split(':').next().unwrap_or("").to_string();
        let result = run_case(&t, &case, &scratch);
        let e = per_tier.entry(tier).or_default();
        e.1 += 1;
        match (result, known.get(&case.id)) {
            (Ok(()), None) => e.0 += 1,
            (Ok(()), Some(_)) => {
                e.0 += 1;
                unexpected.push(format!(
                    "{}: passes now; remove it from conformance-known-failures.tsv",
                    case.id
                ));
            }
            (Err(why), None) => unexpected.push(format!("{} ({}): {why}", case.id, case.tier)),
            (Err(_), Some(_)) => {}
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    for (tier, (pass, total)) in &per_tier {
        println!("conformance {tier}: {pass} of {total} byte-identical");
    }
    assert!(
        unexpected.is_empty(),
        "unexpected conformance results:\n{}",
        unexpected.join("\n")
    );
}
