#!/bin/bash
# Usage: benches/scripts/redefine.sh BIN (docs/BENCHMARKS.md, "Definition changes in
# place"). Run by hand, not in CI.
# Starts `up` on a 4,608-node cluster (bench node shape, no racks) with queue alpha on
# node[0-4095], runs 64 jobs of 32 nodes, then times `queue update alpha --nodes
# node[0-4607]` (taken in place: the shard's pid and CPU before and after), a queue depth
# change (in place too), then a match policy change (a restart) until alpha is online
# again with every node up. PERF=1 records the
# shard during the in-place change (perf.data in the state directory's parent).
set -u
BIN=$1
W=$(mktemp -d)
cat > "$W/cfg.toml" <<'TOML'
default_queue = "alpha"

[cluster.inline]
name = "bench"

[[cluster.inline.nodes]]
hosts = "node[0-4607]"
sockets = 2
cores_per_socket = 22

[queues.alpha]
nodes = "node[0-4095]"
policy = "easy"
default_duration = "1h"
max_duration = "2h"
TOML
export SHARDSCHED_DIR=$W/state
"$BIN" up --config "$W/cfg.toml" --dir "$SHARDSCHED_DIR" > "$W/up.log" 2>&1 &
UP=$!
trap 'kill $UP; wait $UP 2>/dev/null' EXIT
for i in $(seq 600); do "$BIN" queue list 2>/dev/null | grep -q alpha && break; sleep 0.1; done
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }   # clock ticks (10 ms)
shard() { pgrep -f -- "shard .*--queue alpha" | head -1; }
for j in $(seq 64); do "$BIN" submit -N 32 -t 1h -- app >/dev/null; done
sleep 2
P=$(shard); C0=$(cpu "$P"); T0=$(date +%s%N)
[ -n "${PERF:-}" ] && { perf record -F 999 --call-graph dwarf,16384 -o "$W/perf.data" -p "$P" & PP=$!; sleep 1; }
"$BIN" queue update alpha --nodes 'node[0-4607]'
T1=$(date +%s%N); C1=$(cpu "$P")
[ -n "${PERF:-}" ] && { sleep 0.5; kill -INT $PP; wait $PP; }
echo "in place: wall $(( (T1-T0)/1000000 )) ms, shard cpu $(( (C1-C0)*10 )) ms, pid $P -> $(shard)"
grep -h 'definition changed in place' "$SHARDSCHED_DIR/logs/shard-alpha.log" | grep -o 'elapsed_us=[0-9]*'
P=$(shard); C0=$(cpu "$P"); T0=$(date +%s%N)
"$BIN" queue update alpha --queue-depth 16 >/dev/null
T1=$(date +%s%N); C1=$(cpu "$P")
echo "queue depth, in place: wall $(( (T1-T0)/1000000 )) ms, shard cpu $(( (C1-C0)*10 )) ms, pid $P -> $(shard)"
P=$(shard); T0=$(date +%s%N)
"$BIN" queue update alpha --match-policy lonode >/dev/null
online() {
    "$BIN" queue list --json 2>/dev/null | python3 -c 'import json,sys; q=[x for x in json.load(sys.stdin) if x["name"]=="alpha"][0]; sys.exit(0 if q["online"] and q["nodes_up"]==4608 else 1)'
}
for i in $(seq 600); do N=$(shard); [ -n "$N" ] && [ "$N" != "$P" ] && online && break; sleep 0.02; done
T1=$(date +%s%N); N=$(shard)
echo "restart: wall to online $(( (T1-T0)/1000000 )) ms, new shard cpu $(( $(cpu "$N")*10 )) ms, pid $P -> $N"
echo "state and logs: $W"
