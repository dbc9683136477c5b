//! Shared helpers for the criterion benches.

pub mod matching {
    //! Inputs of the matching bench (`benches/matching.rs`).
    //!
    //! The jobspecs are built in, with the same text as `../shared/bench/*.yaml`, so that
    //! benches on generated clusters run without the shared folder; a test checks they have
    //! not drifted from the files when those are present.

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

    /// The bench inputs folder: `$SHARDSCHED_BENCH_DIR`, else `../shared/bench` beside the
    /// workspace root. `Err` carries the reason to print when skipping file-based benches.
    pub fn bench_dir() -> Result<PathBuf, String> {
        let (dir, how) = match std::env::var_os("SHARDSCHED_BENCH_DIR") {
            Some(d) => (PathBuf::from(d), "SHARDSCHED_BENCH_DIR"),
            None => (
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/bench"),
                "default",
            ),
        };
        if dir.is_dir() {
            Ok(dir)
        } else {
            Err(format!(
                "bench inputs not found at {} ({how}); set SHARDSCHED_BENCH_DIR",
                dir.display()
            ))
        }
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
                let on_disk = std::fs::read_to_string(dir.join(name))
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(on_disk, text, "{name} drifted from the built-in copy");
            }
        }
    }
}
