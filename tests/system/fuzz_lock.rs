//! The fuzz project (fuzz/, a cargo-fuzz workspace of its own) carries its own lock file, and
//! `.ci/run` checks its targets with `--locked`. A dependency added to one of our crates
//! changes the workspace's lock at once but the fuzz lock only when someone builds there,
//! and three times CI failed on it. This compares, for every crate of ours in the fuzz lock,
//! the dependencies it locks with those its manifest names (dev-dependencies aside: a path
//! dependency's are not locked): no network, no build.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Our packages in a Cargo.lock, each with the names of its dependencies (a version after
/// the name, written when two versions are locked, is dropped: it may differ between locks).
fn our_packages(lock: &str) -> BTreeMap<String, Vec<String>> {
    let mut packages = BTreeMap::new();
    for block in lock.split("[[package]]").skip(1) {
        let Some(name) = block
            .lines()
            .find_map(|line| line.strip_prefix("name = "))
            .map(|name| name.trim_matches('"').to_owned())
        else {
            continue;
        };
        if !name.starts_with("shardsched") || block.contains("\nsource = ") {
            continue;
        }
        let mut dependencies: Vec<String> = block
            .split_once("dependencies = [")
            .map(|(_, list)| list.split(']').next().unwrap_or(""))
            .unwrap_or("")
            .lines()
            .filter_map(|line| line.trim().trim_end_matches(',').strip_prefix('"'))
            .map(|entry| {
                let entry = entry.trim_end_matches('"');
                entry.split(' ').next().unwrap_or(entry).to_owned()
            })
            .collect();
        dependencies.sort();
        packages.insert(name, dependencies);
    }
    packages
}

/// The workspace's packages, each with the names of the packages its manifest depends on
/// outside `[dev-dependencies]` (from `cargo metadata --no-deps`, which reads manifests only).
fn manifest_dependencies(root: &Path) -> BTreeMap<String, Vec<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args(["metadata", "--no-deps", "--offline"])
        .args(["--format-version", "1"])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut packages = BTreeMap::new();
    for package in metadata["packages"].as_array().unwrap() {
        let mut names: Vec<String> = package["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"] != "dev")
            .map(|d| d["name"].as_str().unwrap().to_owned())
            .collect();
        names.sort();
        names.dedup();
        let name = package["name"].as_str().unwrap().to_owned();
        packages.insert(name, names);
    }
    packages
}

#[test]
fn the_fuzz_lock_file_locks_what_our_manifests_name() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let fuzz = our_packages(&std::fs::read_to_string(root.join("fuzz/Cargo.lock")).unwrap());
    let manifests = manifest_dependencies(root);
    let shared: Vec<&String> = fuzz.keys().filter(|n| manifests.contains_key(*n)).collect();
    assert!(
        shared.len() >= 5,
        "the fuzz lock names few of our crates ({shared:?}): has its format changed?"
    );
    for name in shared {
        assert_eq!(
            fuzz[name], manifests[name],
            "{name}'s dependencies differ between its manifest and fuzz/Cargo.lock: \
             run `cargo metadata --format-version 1 >/dev/null` in fuzz/ and commit its lock"
        );
    }
}
