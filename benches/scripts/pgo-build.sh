#!/bin/bash
# Usage: benches/scripts/pgo-build.sh [BENCH_DIR] (docs/BENCHMARKS.md, "A profile-guided
# build"). Run by hand, not in CI; needs `rustup component add llvm-tools`.
#
# Builds `shardsched` guided by a profile of its own runs, with fat link-time optimisation
# (one codegen unit): an instrumented build (target/pgo/gen) runs a training mix, its
# counts are merged, and the binary is built again with them
# (target/pgo/use/release/shardsched). Both builds take the release profile with
# `lto = "fat"` and `codegen-units = 1` (set here, not in Cargo.toml: the everyday release
# build stays the quick one). About 16 minutes on 2 cores. The mix is not the reference
# workloads that `bench match --workload` measures: `query` on the 128-node bench graph
# (BENCH_DIR, default $SHARDSCHED_BENCH_DIR, else ../shared/bench) with jobspecs of its
# own under five policies, cancels and reservations; replays of a generated workload under
# every queue policy; the simulator's seeds; and the daemons end to end (`bench e2e`).
# The profile is made from the sources being built, each time: nothing to keep in step.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BENCH=${1:-${SHARDSCHED_BENCH_DIR:-$ROOT/../shared/bench}}
OUT=$ROOT/target/pgo
# The toolchain's own llvm-profdata: the profile's format is its LLVM's.
PROFDATA=$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin/llvm-profdata
if [ ! -x "$PROFDATA" ]; then
  echo "error: llvm-profdata not found: rustup component add llvm-tools" >&2
  exit 1
fi
if [ ! -f "$BENCH/bench128.graphml" ]; then
  echo "error: $BENCH/bench128.graphml is missing (give the bench folder as the argument)" >&2
  exit 1
fi
# The two builds must be made alike for the profile to fit the second.
export CARGO_PROFILE_RELEASE_LTO=fat CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1
rm -rf "$OUT/raw" "$OUT/train" "$OUT/merged.profdata"
mkdir -p "$OUT/raw" "$OUT/train"

echo "== instrumented build (target/pgo/gen)"
RUSTFLAGS="-Cprofile-generate=$OUT/raw" cargo build --release -p shardsched --target-dir "$OUT/gen"
BIN=$OUT/gen/release/shardsched
T=$OUT/train

echo "== training"
# jobspec NAME DURATION: a jobspec of one task per slot, its resources read from stdin.
jobspec() {
  {
    printf 'version: 9999\nresources:\n'
    cat
    printf 'attributes:\n  system:\n    duration: %s\n' "$2"
    printf 'tasks:\n  - command: [ "app" ]\n    slot: default\n    count:\n      per_slot: 1\n'
  } > "$T/$1.yaml"
}
jobspec node 1800 <<'YAML'
  - type: node
    count: 1
    exclusive: true
    with:
      - type: slot
        count: 1
        label: default
        with:
          - type: socket
            count: 2
            with:
              - type: core
                count: 22
YAML
jobspec socket 900 <<'YAML'
  - type: slot
    count: 1
    label: default
    with:
      - type: socket
        count: 1
        with:
          - type: core
            count: 16
          - type: gpu
            count: 2
YAML
jobspec cores 600 <<'YAML'
  - type: slot
    count: 1
    label: default
    with:
      - type: core
        count: 6
YAML
jobspec nodes 2400 <<'YAML'
  - type: node
    count: 16
    exclusive: true
    with:
      - type: slot
        count: 1
        label: default
        with:
          - type: core
            count: 1
YAML
for js in node socket cores nodes; do
  s=$T/$js.stream
  {
    for i in $(seq 200); do echo "match allocate $T/$js.yaml"; done
    for i in $(seq 1 3 60); do echo "cancel $i"; done
    for i in $(seq 80); do echo "match allocate_orelse_reserve $T/$js.yaml"; done
    echo "info 5"; echo "stat"; echo "quit"
  } > "$s"
  for policy in first high low lonodex hinode; do
    "$BIN" query -L "$BENCH/bench128.graphml" -S CA -P "$policy" -t "$T/out.t" < "$s" \
      > /dev/null 2>&1 || { echo "error: training: query -P $policy < $s failed" >&2; exit 1; }
  done
done
"$BIN" workload generate --jobs 2000 --nodes 256 --seed 5 --output "$T/w2k.swf" > /dev/null
for mp in first low high; do
  "$BIN" replay --nodes 256 --policy conservative,easy,hybrid,fcfs --queue-depth 64 \
    --match-policy "$mp" --workload "$T/w2k.swf" > /dev/null
done
"$BIN" replay --nodes 256 --unit core --policy conservative,easy --queue-depth 64 \
  --workload "$T/w2k.swf" > /dev/null
"$BIN" bench match --nodes 512 --matches 256 --reserve 64 > /dev/null
"$BIN" sim --seeds 40 > /dev/null
"$BIN" bench e2e --jobs 2000 --latency-jobs 100 --dir "$T/e2e" > /dev/null

echo "== merging the profile"
"$PROFDATA" merge -o "$OUT/merged.profdata" "$OUT"/raw/*.profraw

echo "== profile-guided build (target/pgo/use)"
RUSTFLAGS="-Cprofile-use=$OUT/merged.profdata" cargo build --release -p shardsched --target-dir "$OUT/use"
echo "built $OUT/use/release/shardsched"
