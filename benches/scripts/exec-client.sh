#!/bin/bash
# Usage: benches/scripts/exec-client.sh BIN_DIR STATE_DIR (docs/BENCHMARKS.md, "Exec: a
# job's end and a submit's wall time"). Run by hand, not in CI.
# Starts `up --executor exec` with a private state dir, then times 30 `--version` and 30
# `submit -n 1 -- true` (sequential), and reports medians; then reads each job's
# start→end (end_ms - start_ms) from `jobs --json`.
set -u
B=$1; D=$2
rm -rf "$D"; mkdir -p "$D"
"$B/shardsched" up --dir "$D" --executor exec > "$D.up.log" 2>&1 &
UP=$!
export SHARDSCHED_DIR=$D
for i in $(seq 120); do "$B/shardsched" queue list >/dev/null 2>&1 && break; sleep 0.5; done
t() { local s=$(date +%s%N); "$@" >/dev/null 2>&1; local e=$(date +%s%N); echo $(( (e-s)/1000 )); }
for i in $(seq 30); do t "$B/shardsched" --version; done | sort -n > "$D.version.us"
for i in $(seq 30); do t "$B/shardsched" submit -n 1 -- true; done | sort -n > "$D.submit.us"
# Ends: each job stamps its last moment; the shard's end_ms minus that is how late the end
# was seen (one job at a time).
for i in $(seq 30); do "$B/shardsched" submit -n 1 -- bash -c 'echo $EPOCHREALTIME > $SHARDSCHED_JOB_DIR/stamp' >/dev/null; sleep 0.3; done
sleep 2
"$B/shardsched" jobs -a -A --json > "$D.jobs.json"
kill -TERM $UP; wait $UP
python3 - "$D" <<'PY'
import json,sys,statistics as st
d=sys.argv[1]
v=[int(x) for x in open(d+'.version.us')]; s=[int(x) for x in open(d+'.submit.us')]
print(f"--version median {st.median(v)/1000:.1f} ms, submit median {st.median(s)/1000:.1f} ms, ratio {st.median(s)/st.median(v):.1f}x")
jobs=json.load(open(d+'.jobs.json'))
rows=jobs if isinstance(jobs,list) else jobs.get('jobs',[])
import os,glob
seen=[]
for j in rows:
    f=glob.glob(f"{d}/shards/*/jobs/{j['id']}/stamp")
    if f and j.get('end_ms'):
        seen.append(j['end_ms']-float(open(f[0]).read())*1000)
seen.sort()
if seen: print(f"task's last moment -> end recorded: n={len(seen)} p50 {st.median(seen):.1f} ms, p90 {seen[int(len(seen)*0.9)]:.1f} ms, max {max(seen):.1f} ms")
dur=sorted(j['end_ms']-j['start_ms'] for j in rows if j.get('end_ms') and j.get('start_ms'))
states={}
for j in rows: states[j['state']]=states.get(j['state'],0)+1
if dur: print(f"start->end recorded for `true`: n={len(dur)} p50 {st.median(dur)} ms, max {max(dur)} ms, states {states}")
PY
