//! Every jobspec of Fluxion's test suite (`t/data/resource/jobspecs/**/*.yaml`) must parse.
//!
//! The data lives outside the repository: `$SHARDSCHED_CONFORMANCE_DIR`, by default
//! `shared/conformance/fluxion` beside the work tree. When it is absent the tests say so and
//! pass.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use shardsched_jobspec::{Count, CountOp, Jobspec, parse, parse_json, parse_yaml};

/// Files of the suite that are meant to be refused. Fluxion's `resource-query` tests have no
/// jobspec that is expected to fail parsing (no expected output contains a jobspec error),
/// so this is empty; a file listed here must give an error.
const EXPECTED_INVALID: &[&str] = &[];

fn jobspec_dir() -> Option<PathBuf> {
    let root = std::env::var_os("SHARDSCHED_CONFORMANCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/fluxion")
        });
    let dir = root.join("t/data/resource/jobspecs");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "skipped: no Fluxion conformance jobspecs at {} (set SHARDSCHED_CONFORMANCE_DIR)",
            dir.display()
        );
        None
    }
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn relative(dir: &Path, path: &Path) -> String {
    path.strip_prefix(dir)
        .unwrap()
        .to_string_lossy()
        .replace('\\', "/")
}

fn load(dir: &Path, name: &str) -> Jobspec {
    parse_yaml(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap()
}

#[test]
fn every_conformance_jobspec_parses_and_round_trips() {
    let Some(dir) = jobspec_dir() else { return };
    let files = yaml_files(&dir);
    assert!(!files.is_empty(), "no jobspecs under {}", dir.display());
    let mut failures = Vec::new();
    for path in &files {
        let name = relative(&dir, path);
        let text = std::fs::read_to_string(path).unwrap();
        let expect_invalid = EXPECTED_INVALID.contains(&name.as_str());
        match (parse(&text), expect_invalid) {
            (Ok(js), false) => {
                assert_eq!(js.version, 9999, "{name}");
                let again = parse_json(&js.to_json().to_string());
                assert_eq!(again.as_ref(), Ok(&js), "{name}: canonical JSON round trip");
            }
            (Err(e), true) => eprintln!("{name}: refused as expected: {e}"),
            (Ok(_), true) => failures.push(format!("{name}: parsed but should be refused")),
            (Err(e), false) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!("{} conformance jobspecs checked", files.len());
}

#[test]
fn conformance_jobspec_details() {
    let Some(dir) = jobspec_dir() else { return };

    let js = load(&dir, "min_max/test006.yaml");
    let nodes = &js.resources[0];
    assert_eq!(
        nodes.count,
        Count {
            min: 2,
            max: 64,
            operator: CountOp::Pow,
            operand: 4
        }
    );
    assert_eq!(nodes.exclusive, Some(true));
    assert_eq!(nodes.count.largest_fitting(100), Some(16));

    let js = load(&dir, "min_max/test002.yaml");
    let slot = &js.resources[0].with[0];
    assert_eq!(slot.count.values().collect::<Vec<_>>(), vec![1, 2]);

    // Tasks naming a label no slot carries are accepted in the general form.
    let js = load(&dir, "cancel/test001.yaml");
    assert_eq!(js.tasks[0].slot, "socketlevel");
    assert_eq!(js.slot_labels(), vec!["default"]);

    // Several top-level resources, xor_slot types, deep trees.
    let js = load(&dir, "flexible/test009.yaml");
    assert_eq!(js.resources.len(), 3);
    assert!(js.resources.iter().all(|r| r.kind == "xor_slot"));
    let js = load(&dir, "mt-storage/L2/test001.yaml");
    assert_eq!(js.resources[1].kind, "mtl2unit");
    assert_eq!(js.resources[1].with[0].count, Count::exact(1024));
    assert_eq!(js.attributes.duration, 57600);
}

/// Cutting any conformance file short gives a jobspec or an error, never a panic.
#[test]
fn truncated_conformance_jobspecs_do_not_panic() {
    let Some(dir) = jobspec_dir() else { return };
    for path in yaml_files(&dir) {
        let text = std::fs::read_to_string(&path).unwrap();
        for cut in (0..text.len()).step_by(13) {
            if text.is_char_boundary(cut) {
                let _ = parse(&text[..cut]);
                let _ = parse(&text[cut..]);
            }
        }
    }
}
