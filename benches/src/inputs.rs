//! The matching benchmarks' inputs: the reference jobspecs, built in, and where the shared
//! bench folder (`../shared/bench`: the reference graphs and the same jobspecs) is.
//!
//! The jobspecs are built in, with the same text as `../shared/bench/*.yaml`, so that
//! benches on generated clusters run without the shared folder; a test checks they have
//! not drifted from the files when those are present. `shardsched bench match` and the
//! criterion benches (`benches/matching.rs`) both take them from here.

use std::path::{Path, PathBuf};

/// `a_node_excl.yaml`: one node, exclusive.
pub const NODE_EXCL: &str = r#"version: 9999
resources:
  - type: node
    count: 1
    exclusive: true
    with:
      - type: slot
        count: 1
        label: default
        with:
          - type: core
            count: 1
attributes:
  system:
    duration: 3600
tasks:
  - command: [ "app" ]
    slot: default
    count:
      per_slot: 1
"#;
/// `c_socket_22c_1g.yaml`: one socket with 22 cores and 1 gpu.
pub const SOCKET_22C_1G: &str = r#"version: 9999
resources:
  - type: slot
    count: 1
    label: default
    with:
      - type: socket
        count: 1
        with:
          - type: core
            count: 22
          - type: gpu
            count: 1
attributes:
  system:
    duration: 3600
tasks:
  - command: [ "app" ]
    slot: default
    count:
      per_slot: 1
"#;
/// `d_64node_excl.yaml`: 64 nodes, exclusive.
pub const NODES64_EXCL: &str = r#"version: 9999
resources:
  - type: node
    count: 64
    exclusive: true
    with:
      - type: slot
        count: 1
        label: default
        with:
          - type: core
            count: 1
attributes:
  system:
    duration: 3600
tasks:
  - command: [ "app" ]
    slot: default
    count:
      per_slot: 1
"#;

/// Environment variable naming the bench inputs folder.
pub const BENCH_DIR_ENV: &str = "SHARDSCHED_BENCH_DIR";

/// The bench inputs folder, canonical: `given` (a `--bench-dir` flag), else
/// `$SHARDSCHED_BENCH_DIR`, else `default`. `Err` carries the reason to print (and skip,
/// for the criterion benches).
pub fn find_bench_dir(given: Option<&Path>, default: &Path) -> Result<PathBuf, String> {
    let (dir, how) = match (given, std::env::var_os(BENCH_DIR_ENV)) {
        (Some(d), _) => (d.to_owned(), "--bench-dir"),
        (None, Some(d)) => (PathBuf::from(d), BENCH_DIR_ENV),
        (None, None) => (default.to_owned(), "the default"),
    };
    std::fs::canonicalize(&dir).map_err(|e| {
        format!(
            "bench inputs not found at {} ({how}: {e}); give --bench-dir or set {BENCH_DIR_ENV}",
            dir.display()
        )
    })
}

/// [`find_bench_dir`] for the criterion benches: `../shared/bench` beside the workspace.
pub fn bench_dir() -> Result<PathBuf, String> {
    find_bench_dir(
        None,
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/bench"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_jobspecs_match_the_shared_files() {
        let dir = match bench_dir() {
            Ok(d) => d,
            Err(why) => {
                println!("skipping: {why}");
                return;
            }
        };
        for (name, text) in [
            ("a_node_excl.yaml", NODE_EXCL),
            ("c_socket_22c_1g.yaml", SOCKET_22C_1G),
            ("d_64node_excl.yaml", NODES64_EXCL),
        ] {
            let on_disk =
                std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(on_disk, text, "{name} drifted from the built-in copy");
        }
    }
}
