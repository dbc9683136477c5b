//! `update allocate|reserve jgf|jgf_shorthand|rv1exec FILE JOBID AT DURATION`: records a
//! job on exactly the resources an R names, as resource-query's `update` does (the R of a
//! match made elsewhere, read back), and prints it with the session's writer as a match
//! would. The job id given is used, and the session's next id follows it.

use std::collections::BTreeSet;
use std::io::Write;
use std::time::Instant;

use anyhow::Result;
use shardsched_matcher::{GivenError, GivenVertex};
use shardsched_resource::{CONTAINMENT, VertexId};

use super::commands::strtoll;
use super::matching::Scheduled;
use super::{JobInfo, Lifecycle, Session};

/// The largest R an `update` reads (bytes): a JGF of a whole large cluster is far below.
pub const UPDATE_R_BYTES_MAX: u64 = 256 << 20;

/// Whether `file` (a document of kind `what` a command reads: an R, a JGF) can be opened
/// and is within [`UPDATE_R_BYTES_MAX`]; else what to say.
pub(super) fn within_bound(file: &str, what: &str) -> Result<(), String> {
    let meta = std::fs::metadata(file).map_err(|_| format!("can't open {file}"))?;
    if meta.len() > UPDATE_R_BYTES_MAX {
        return Err(format!(
            "{file}: the {what} is {} bytes, more than {UPDATE_R_BYTES_MAX}",
            meta.len()
        ));
    }
    Ok(())
}

/// The most ranks an rv1exec R may name.
const UPDATE_R_RANKS_MAX: usize = 1 << 20;

/// Each `cmd_*` is called by [`Session::execute`] only with a line of as many words as the
/// command takes (the table in `command`), so it indexes `words` within that count.
impl Session {
    pub(super) fn cmd_update(
        &mut self,
        words: &[&str],
        out: &mut dyn Write,
        stdout: &mut dyn Write,
    ) -> Result<()> {
        let (subcmd, reader, file) = (words[1], words[2], words[3]);
        if subcmd != "allocate" && subcmd != "reserve" {
            eprintln!("ERROR: unknown subcmd {subcmd}");
            return Ok(());
        }
        if !matches!(reader, "jgf" | "jgf_shorthand" | "rv1exec") {
            eprintln!("ERROR: unsupported reader {reader}");
            return Ok(());
        }
        if let Err(why) = within_bound(file, "R") {
            eprintln!("ERROR: {why}");
            return Ok(());
        }
        let jobid = strtoll(words[4]);
        if self.allocations.contains(&(jobid as u64)) || self.reservations.contains(&(jobid as u64))
        {
            eprintln!("ERROR: existing Jobid ");
            return Ok(());
        }
        let at = strtoll(words[5]);
        let duration = strtoll(words[6]);
        if at < 0 || duration == 0 {
            eprintln!("ERROR: invalid time ({at}, {duration})");
            return Ok(());
        }
        let Ok(bytes) = std::fs::read(file) else {
            eprintln!("ERROR: can't open {file}");
            return Ok(());
        };
        let text = String::from_utf8_lossy(&bytes);
        // A negative duration is C's cast to unsigned: as good as forever, cut at the
        // graph's end by the calendars.
        let duration = duration as u64;
        let started = Instant::now();
        let jobid = jobid as u64;
        let recorded = self.update_run(reader, &text, jobid, at, duration);
        let mut text = String::new();
        if self.writer.emit(&mut text).is_err() {
            text.clear();
        }
        out.write_all(text.as_bytes())?;
        let elapsed = started.elapsed().as_secs_f64();
        self.perf.0 = self.perf.0.min(elapsed);
        self.perf.1 = self.perf.1.max(elapsed);
        self.perf.2 += elapsed;
        if recorded {
            if at == 0 {
                self.allocations.insert(jobid);
            } else {
                self.reservations.insert(jobid);
            }
            let jobspec = self.jobspec_path(file);
            self.jobs.insert(
                jobid,
                JobInfo {
                    state: if at == 0 {
                        Lifecycle::Allocated
                    } else {
                        Lifecycle::Reserved
                    },
                    at,
                    jobspec,
                    overhead: elapsed,
                },
            );
        }
        self.print_schedule_info(
            out,
            stdout,
            &Scheduled {
                jobid,
                ok: recorded,
                allocated: true,
                at,
                sat: true,
                elapsed,
            },
        )?;
        self.counter = jobid.wrapping_add(1);
        Ok(())
    }

    /// Reads the R, records the job and feeds the writer; false (with Fluxion's messages on
    /// stderr) when nothing was recorded.
    fn update_run(&mut self, reader: &str, text: &str, jobid: u64, at: i64, dur: u64) -> bool {
        let given = if reader == "rv1exec" {
            self.rv1exec_given(text)
        } else {
            self.jgf_given(text)
        };
        let result = given.and_then(|given| {
            let alloc = self
                .matcher
                .given_allocation(&given, at, dur)
                .map_err(|e| self.given_error(e))?;
            let recorded = if alloc.is_empty() {
                // An R from another dominant subsystem: only the reader's holds.
                self.matcher
                    .record_given_holds(jobid, &given, alloc.clone())
            } else {
                self.matcher.record_given(jobid, alloc.clone())
            };
            recorded.map_err(|e| format!("update: {e}.\n"))?;
            Ok(alloc)
        });
        match result {
            Ok(alloc) => {
                self.matcher.feed_writer(&mut self.writer, &alloc, true);
                true
            }
            Err(msg) => {
                eprintln!("ERROR: traverser run () returned error ");
                if !msg.is_empty() {
                    eprint!("ERROR: {msg}");
                }
                false
            }
        }
    }

    /// Fluxion's words for why a vertex set was refused ("" where it has none).
    fn given_error(&self, e: GivenError) -> String {
        let g = &self.matcher.graph;
        match e {
            GivenError::CannotTake(v) => {
                format!("update_vtx_plan: can't add span into {}.\n", g.name(v))
            }
            GivenError::Unavailable(v) => {
                format!("update_vtx_plan: {} is unavailable.\n", g.name(v))
            }
            GivenError::Duplicate(v) => {
                format!("update_vmap: can't insert into vmap for {}.\n", g.name(v))
            }
            GivenError::NothingExclusive => String::new(),
            GivenError::Match(e) => format!("update: {e}.\n"),
        }
    }

    /// The vertices a JGF R names, with the size and exclusivity it gives each.
    fn jgf_given(&self, text: &str) -> std::result::Result<Vec<GivenVertex>, String> {
        let doc = shardsched_resource::parse_jgf(text)
            .map_err(|e| format!("fetch_jgf: json_loads returned an error: {e}.\n"))?;
        let found = self.jgf_vertices_of(&doc);
        let mut given = Vec::with_capacity(doc.vertices.len());
        for (jv, v) in doc.vertices.iter().zip(found) {
            let Some(v) = v else {
                let path = jv.paths.get(CONTAINMENT).cloned().unwrap_or_default();
                return Err(format!(
                    "exist: inconsistent input vertex: nonexistent path ({path}) {}.\n",
                    jv.key
                ));
            };
            given.push(GivenVertex {
                v,
                needs: jv.spec.size,
                exclusive: jv.spec.exclusive,
            });
        }
        Ok(given)
    }

    /// The vertices an rv1exec R names: per rank of `execution.R_lite`, the node of that
    /// rank below the root, and its children of each listed type with the listed ids, all
    /// exclusive; the node exclusive when all it holds is named, the root shared.
    fn rv1exec_given(&self, text: &str) -> std::result::Result<Vec<GivenVertex>, String> {
        let bad = |why: &str| format!("unpack_internal: {why}.\n");
        let v: serde_json::Value = serde_json::from_str(text).map_err(|_| String::new())?;
        let lite = v
            .get("execution")
            .and_then(|e| e.get("R_lite"))
            .and_then(serde_json::Value::as_array)
            .ok_or_else(|| bad("no execution.R_lite"))?;
        let g = &self.matcher.graph;
        let tree = self.matcher.tree();
        let root = tree.root();
        let mut given = vec![GivenVertex {
            v: root,
            needs: g.size(root),
            exclusive: false,
        }];
        // The root's node children by rank, the first of a rank kept (looked up per rank
        // the R names, so built once).
        let mut node_of_rank: std::collections::HashMap<i64, VertexId> =
            std::collections::HashMap::new();
        for c in tree.children(root).iter().map(|&c| VertexId(c)) {
            if g.kind_str(c) == "node" {
                node_of_rank.entry(g.rank(c)).or_insert(c);
            }
        }
        for entry in lite {
            let ranks = entry
                .get("rank")
                .and_then(serde_json::Value::as_str)
                .ok_or_else(|| bad("an R_lite entry without a rank"))?;
            let ranks = shardsched_resource::parse_idset(ranks, UPDATE_R_RANKS_MAX)
                .map_err(|e| bad(&e.to_string()))?;
            let children = entry
                .get("children")
                .and_then(serde_json::Value::as_object)
                .ok_or_else(|| bad("an R_lite entry without children"))?;
            for &rank in ranks.iter() {
                let node = node_of_rank.get(&(rank as i64)).copied().ok_or_else(|| {
                    format!("add_or_update: couldn't find vertex in graph for rank {rank}.\n")
                })?;
                let node_at = given.len();
                given.push(GivenVertex {
                    v: node,
                    needs: g.size(node),
                    exclusive: true,
                });
                for (kind, ids) in children {
                    let ids = ids
                        .as_str()
                        .ok_or_else(|| bad("children ids are not an idset"))?;
                    let ids: BTreeSet<i64> =
                        shardsched_resource::parse_idset(ids, UPDATE_R_RANKS_MAX)
                            .map_err(|e| bad(&e.to_string()))?
                            .iter()
                            .map(|&i| i as i64)
                            .collect();
                    for &id in &ids {
                        let c = tree
                            .children(node)
                            .iter()
                            .map(|&c| VertexId(c))
                            .find(|&c| g.kind_str(c) == kind && g.id(c) == id)
                            .ok_or_else(|| {
                                format!(
                                    "add_or_update: couldn't find vertex in graph for {kind}{id}.\n"
                                )
                            })?;
                        given.push(GivenVertex {
                            v: c,
                            needs: g.size(c),
                            exclusive: true,
                        });
                    }
                }
                // The node is held whole only when everything in it is named (Fluxion's
                // reader adds the node's span only then, `update_exclusivity`); else it
                // is shared.
                given[node_at].exclusive = given.len() - node_at - 1 == subtree_len(tree, node) - 1;
            }
        }
        Ok(given)
    }
}

/// How many vertices `v`'s subtree holds, `v` included.
fn subtree_len(tree: &dyn shardsched_matcher::dfu::Tree, v: VertexId) -> usize {
    let mut stack = vec![v.0];
    let mut n = 0;
    while let Some(u) = stack.pop() {
        n += 1;
        stack.extend_from_slice(tree.children(VertexId(u)));
    }
    n
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::super::{QueryArgs, Session, words};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        query: QueryArgs,
    }

    const JOBSPEC: &str = "version: 9999
resources:
  - type: slot
    count: 1
    label: default
    with:
      - type: core
        count: 2
tasks:
  - command: [app]
    slot: default
    count: {per_slot: 1}
attributes:
  system:
    duration: 3600
";

    /// Two nodes of four cores, as an rv1exec R.
    const RV1EXEC_GRAPH: &str = r#"{"version": 1, "execution": {"R_lite": [{"rank": "0-1", "children": {"core": "0-3"}}], "nodelist": ["node[0-1]"], "starttime": 0, "expiration": 0}}"#;

    fn session(flags: &[&str]) -> Session {
        let mut argv = vec!["query"];
        argv.extend_from_slice(flags);
        Session::open(&Cli::parse_from(argv).query).expect("session")
    }

    /// Runs `lines` and gives back what the output file would hold.
    fn run(s: &mut Session, lines: &[String]) -> String {
        let mut out = Vec::new();
        let mut info = Vec::new();
        for line in lines {
            let words: Vec<&str> = words(line).collect();
            s.execute(&words, &mut out, &mut info).expect("execute");
        }
        String::from_utf8(out).expect("utf-8")
    }

    /// Matches `n` jobs (allocate or else reserve), writes each R to a file, then records
    /// them again with `update` in a fresh session: the outputs must be the same bytes.
    fn round_trip(flags: &[&str], reader: &str, n: usize) {
        let dir = tempfile::tempdir().expect("tempdir");
        let js = dir.path().join("job.yaml");
        std::fs::write(&js, JOBSPEC).expect("write");
        let js = js.display().to_string();
        let matched = run(
            &mut session(flags),
            &vec![format!("match allocate_orelse_reserve {js}"); n],
        );
        let rs: Vec<&str> = matched.lines().filter(|l| !l.starts_with("INFO")).collect();
        assert_eq!(rs.len(), n, "{matched}");
        let ats: Vec<&str> = matched
            .lines()
            .filter_map(|l| l.strip_prefix("INFO: SCHEDULED AT="))
            .collect();
        let mut cmds = Vec::new();
        for (i, (r, at)) in rs.iter().zip(&ats).enumerate() {
            let file = dir.path().join(format!("r{i}.json"));
            std::fs::write(&file, r).expect("write");
            let (sub, at) = if *at == "Now" {
                ("allocate", "0")
            } else {
                ("reserve", *at)
            };
            cmds.push(format!(
                "update {sub} {reader} {} {} {at} 3600",
                file.display(),
                i + 1
            ));
        }
        let mut s = session(flags);
        let updated = run(&mut s, &cmds);
        for (u, m) in updated.lines().zip(matched.lines()) {
            assert_eq!(u, m);
        }
        assert_eq!(updated, matched);
        // The first R again, under a new id: its resources are taken, nothing is recorded,
        // and the id is used all the same.
        let again = run(&mut s, &[cmds[0].replace(" 1 0 3600", " 400 0 3600")]);
        assert_eq!(
            again,
            "INFO: =============================\nINFO: No matching resources found\nINFO: JOBID=400\nINFO: =============================\n"
        );
        // An id still held is refused before anything is printed.
        assert_eq!(run(&mut s, &[cmds[0].clone()]), "");
        let next = run(&mut s, &[format!("match allocate_orelse_reserve {js}")]);
        assert!(next.contains("INFO: JOBID=401\n"), "{next}");
    }

    #[test]
    fn update_with_a_jgf_r_records_what_the_match_did_allocations_and_reservations() {
        round_trip(&["-P", "high", "-F", "jgf"], "jgf", 70);
    }

    #[test]
    fn update_with_an_rv1exec_r_records_what_the_match_did() {
        let dir = tempfile::tempdir().expect("tempdir");
        let graph = dir.path().join("graph.json");
        std::fs::write(&graph, RV1EXEC_GRAPH).expect("write");
        let graph = graph.display().to_string();
        let flags = [
            "-L",
            &graph,
            "-f",
            "rv1exec",
            "-P",
            "high",
            "-F",
            "rv1_nosched",
        ];
        round_trip(&flags, "rv1exec", 4);
    }

    #[test]
    fn update_refuses_bad_commands_before_matching() {
        let mut s = session(&["-F", "jgf"]);
        for cmd in [
            "update allocate jgf",
            "update grow jgf /nonexistent 1 0 10",
            "update allocate grug /nonexistent 1 0 10",
            "update allocate jgf /nonexistent 1 0 10",
        ] {
            assert_eq!(run(&mut s, &[cmd.to_string()]), "", "{cmd}");
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let r = dir.path().join("r.json");
        std::fs::write(&r, "{}").expect("write");
        let r = r.display().to_string();
        assert_eq!(run(&mut s, &[format!("update allocate jgf {r} 1 0 0")]), "");
        assert_eq!(
            run(&mut s, &[format!("update allocate jgf {r} 1 -1 10")]),
            ""
        );
        // Not a JGF: the id is used, nothing is recorded.
        let out = run(&mut s, &[format!("update allocate jgf {r} 1 0 10")]);
        assert!(out.contains("No matching resources found"), "{out}");
    }
}
