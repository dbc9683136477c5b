//! Cases the random differential against Fluxion's binary (`shardsched differential`)
//! found, each reduced to its graph and jobspecs under tests/data and checked against what
//! Fluxion's binary printed for it; and `-P locality`, which no flux-sched test covers.

use std::path::Path;

use crate::query_run::{Scratch, query};

/// The folder of the reduced case `NAME`.
fn case_dir(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// Runs `query` on the graph of the reduced case `tests/data/NAME` (`graph.graphml`, or
/// `graph.json` read with `-f jgf`), in that folder (where the commands find its jobspecs by
/// name), with `flags` and `-t` into a scratch file: the run and its `-t` output.
fn query_case(name: &str, flags: &[&str], commands: &str) -> (crate::query_run::Run, String) {
    let data = case_dir(name);
    let scratch = Scratch::new(name);
    let out = scratch.path("out");
    let out_text = out.to_string_lossy();
    let jgf = data.join("graph.json");
    let (graph, mut args) = if jgf.exists() {
        (jgf, vec!["-f", "jgf"])
    } else {
        (data.join("graph.graphml"), vec![])
    };
    args.extend(flags);
    args.extend(["-t", &out_text]);
    let run = query(&data, &graph, &args, commands);
    run.assert_no_panic("query");
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    (run, text)
}

/// Under `-T flexible`, a slot whose subtree check fails because it asks more than the
/// subtree has leaves ERANGE behind it, and a later walk that succeeds keeps it: the
/// satisfiability walk of `match allocate_with_satisfiability` succeeds, so resource-query
/// reports "Numerical result out of range" and does not consume the job id (random
/// differential seed 7718, against Fluxion's binary: the same ids and errors as below).
#[test]
fn a_flexible_slot_asking_more_than_exists_leaves_erange_and_keeps_the_job_id() {
    let (run, text) = query_case(
        "flexible-errno",
        &["-P", "hinode", "-F", "simple", "-T", "flexible"],
        "match allocate_with_satisfiability j1.yaml\nset-status /cl0/rack1/node0 up\n\
         match allocate_orelse_reserve j1.yaml\nmatch allocate j0.yaml\n\
         match allocate_with_satisfiability j0.yaml\nmatch allocate_with_satisfiability j0.yaml\n\
         quit\n",
    );
    let ids: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("INFO: JOBID="))
        .collect();
    assert_eq!(ids, ["1", "2", "3", "4", "4"], "{text}");
    assert_eq!(
        run.stderr
            .matches("match_allocate: ERROR: traverser: Numerical result out of range")
            .count(),
        2,
        "{}",
        run.stderr
    );
}

/// The shorthand writers leave out a vertex whose parent in the update walk is exclusive,
/// even where Fluxion prints it shallower than its siblings: after a failed
/// `allocate_with_satisfiability`, a `-T flexible` xor-slot match taking node0 whole prints
/// core0 one level up (levels the walk did not give back), yet its parent is node0, taken
/// exclusively, so `jgf_shorthand` lists node0, rack0 and the cluster only (random
/// differential seed 14600, reduced; Fluxion's binary prints the same).
#[test]
fn a_shorthand_writer_leaves_out_children_of_an_exclusive_parent_printed_out_of_level() {
    let commands = "match allocate_with_satisfiability j0.yaml\nmatch allocate j1.yaml\nquit\n";
    let flags = |writer: &'static str| ["-P", "variation", "-T", "flexible", "-F", writer];
    let (_, simple) = query_case("shorthand-drift", &flags("simple"), commands);
    let depth = |name: &str| {
        let line = simple
            .lines()
            .rev()
            .find(|l| l.trim_start_matches([' ', '-']).starts_with(name))
            .unwrap_or_else(|| panic!("{name} in\n{simple}"));
        line.trim_start_matches(' ').len() - line.trim_start_matches([' ', '-']).len()
    };
    assert!(
        depth("core0[") < depth("core2["),
        "core0 printed out of level:\n{simple}"
    );
    let (_, short) = query_case("shorthand-drift", &flags("jgf_shorthand"), commands);
    let last = short
        .lines()
        .rfind(|l| l.starts_with('{'))
        .expect("the second match's graph");
    let graph: serde_json::Value = serde_json::from_str(last).expect("JGF");
    let types: Vec<&str> = graph["graph"]["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| n["metadata"]["type"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(types, ["node", "rack", "cluster"], "{last}");
}

/// What `find` printed for each expression and where each match was placed, in order:
/// `("find EXPR", containment paths of the sockets, nodes and clusters found)` or
/// `("at AT", paths)` (resource-query's `-t` output under a JGF writer).
fn finds_and_places(text: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let mut graph: Option<Vec<String>> = None;
    for line in text.lines() {
        if line.starts_with('{') {
            let g: serde_json::Value = serde_json::from_str(line).expect("JGF");
            let paths = g["graph"]["nodes"].as_array().expect("nodes").iter();
            let paths = paths
                .filter(|n| {
                    ["socket", "node", "cluster"]
                        .contains(&n["metadata"]["type"].as_str().unwrap_or(""))
                })
                .map(|n| {
                    n["metadata"]["paths"]["containment"]
                        .as_str()
                        .unwrap_or("")
                        .to_string()
                });
            graph = Some(paths.collect());
        } else if let Some(e) = line.strip_prefix("INFO: EXPRESSION=") {
            out.push((
                format!("find {}", e.trim_matches('"')),
                graph.take().unwrap_or_default(),
            ));
        } else if let Some(at) = line.strip_prefix("INFO: SCHEDULED AT=") {
            out.push((format!("at {at}"), graph.take().unwrap_or_default()));
        }
    }
    out
}

/// A job id matched again under its other state holds both, as Fluxion's two per-vertex
/// maps by job id do. resource-query hands id 1 out again after the first match's writer
/// fails (`jgf_shorthand` finds nothing to write), the whole cluster staying allocated to
/// it; the second match reserves two sockets under the same id. `find` then sees the job
/// allocated everywhere and reserved on those sockets; `cancel 1` takes the allocation and
/// leaves the reservation taken for good (no longer tagged with the job), and a match
/// finds the other nodes free at once though the cluster's pruning filter still counts the
/// first match's cores (random differential seeds 4453, 5158 and 10896 against Fluxion's
/// binary, reduced; its binary prints the same).
#[test]
fn a_job_id_matched_again_holds_an_allocation_and_a_reservation_and_cancel_takes_one() {
    let (run, text) = query_case(
        "id-reuse",
        &["-P", "first", "-F", "jgf_shorthand"],
        "match allocate_with_satisfiability j1.yaml\nmatch allocate_orelse_reserve j0.yaml\n\
         find sched-now=allocated\nfind sched-future=reserved\ncancel 1\n\
         match allocate j0.yaml\nfind sched-future=reserved\nfind jobid-tag=1\nquit\n",
    );
    assert_eq!(
        run.stderr.matches("match writer emit").count(),
        1,
        "{}",
        run.stderr
    );
    let node = |n: u32| {
        [
            format!("/tiny0/node{n}/socket{}", n + 1),
            format!("/tiny0/node{n}"),
        ]
    };
    let reserved: Vec<String> = [node(5), node(6)]
        .concat()
        .into_iter()
        .chain(["/tiny0".to_string()])
        .collect();
    let everything: Vec<String> = (0..7)
        .flat_map(node)
        .chain(["/tiny0".to_string()])
        .collect();
    let seen = finds_and_places(&text);
    let expected: Vec<(String, Vec<String>)> = vec![
        // The failed match's cluster is still in the writer (as in Fluxion's).
        (
            "at 7200".into(),
            [vec!["/tiny0".into()], reserved.clone()].concat(),
        ),
        ("find sched-now=allocated".into(), everything),
        ("find sched-future=reserved".into(), reserved.clone()),
        ("at Now".into(), [node(3), node(4)].concat()),
        ("find sched-future=reserved".into(), reserved),
        ("find jobid-tag=1".into(), vec![]),
    ];
    assert_eq!(seen, expected);
}

/// A job id matched again under the same state replaces its earlier plan records only
/// where the new match takes a vertex exclusively: id 2's first reservation (`j1`, the
/// cluster exclusively, its writer failing) keeps the cluster reserved after the second
/// (`j0`, the cluster shared) under the same id, so no vertex is free of reservations
/// (random differential seed 262413 against Fluxion's binary, reduced; its binary prints
/// the same).
#[test]
fn a_job_id_matched_again_in_the_same_state_keeps_what_the_new_match_does_not_take() {
    let (run, text) = query_case(
        "id-reuse-same-state",
        &["-P", "high", "-F", "jgf_shorthand", "-T", "flexible"],
        "match allocate j3.yaml\nmatch allocate_orelse_reserve j1.yaml\n\
         match allocate_orelse_reserve j1.yaml\nmatch allocate_orelse_reserve j0.yaml\n\
         find sched-future=free\nfind jobid-reserved=2\nquit\n",
    );
    assert_eq!(
        run.stderr.matches("match writer emit").count(),
        2,
        "{}",
        run.stderr
    );
    let ids: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("INFO: JOBID="))
        .collect();
    assert_eq!(ids, ["1", "2", "2", "2"], "{text}");
    let finds: Vec<(String, usize)> = finds_and_places(&text)
        .into_iter()
        .filter(|(what, _)| what.starts_with("find"))
        .map(|(what, paths)| (what, paths.len()))
        .collect();
    // Nothing free; the reserved job's nodes (4) and the cluster (racks are not counted).
    let expected = [("find sched-future=free", 0), ("find jobid-reserved=2", 5)];
    assert_eq!(finds, expected.map(|(w, n)| (w.to_string(), n)), "{text}");
}

/// A reservation search whose update then takes nothing leaves the errno of the full walk
/// at the time it found and of Fluxion's question for the following time: with an
/// allocation held past that time (a socket busy until 7200), the walk says EBUSY and a
/// following time exists, so `allocate_orelse_reserve` fails plainly; without it, the
/// walk's errno is the first select's ENODEV and no time follows (ENOENT): "Unsatisfiable
/// request" (random differential seeds 62677 and 67199, reduced; Fluxion's binary prints the
/// same).
#[test]
fn a_reservation_whose_update_takes_nothing_fails_with_the_full_walks_errno() {
    let flags = ["-P", "high", "-F", "simple"];
    // Whether the failure says "Unsatisfiable request", and what the run wrote to stderr.
    let unsatisfiable = |commands: &str| {
        let (run, text) = query_case("reserve-errno", &flags, commands);
        let failed = text
            .lines()
            .filter(|l| *l == "INFO: No matching resources found");
        assert_eq!(failed.count(), 1, "{text}");
        (text.contains("INFO: Unsatisfiable request"), run.stderr)
    };
    let enoent = "match_allocate: ERROR: traverser: No such file or directory\n";
    assert_eq!(
        unsatisfiable("match allocate j1.yaml\nmatch allocate_orelse_reserve j2.yaml\nquit\n"),
        (true, enoent.to_owned())
    );
    assert_eq!(
        unsatisfiable(
            "match allocate j1.yaml\nmatch allocate j0.yaml\n\
             match allocate_orelse_reserve j2.yaml\nquit\n"
        ),
        (false, String::new())
    );
}

/// Runs the reduced case `tests/data/NAME` and checks that its `-t` output is the one
/// Fluxion's binary wrote for the same commands (`fluxion.out` there): the run, for its
/// standard output and error, and the `-t` text.
fn run_as_fluxion(name: &str, flags: &[&str], commands: &str) -> (crate::query_run::Run, String) {
    let (run, text) = query_case(name, flags, commands);
    assert_eq!(text, fluxion_file(name, "fluxion.out"));
    (run, text)
}

/// [`run_as_fluxion`] with Fluxion's standard error too: `fluxion.err` in the case's folder,
/// nothing when there is none; the `-t` text.
fn assert_as_fluxion(name: &str, flags: &[&str], commands: &str) -> String {
    let (run, text) = run_as_fluxion(name, flags, commands);
    let want = if case_dir(name).join("fluxion.err").exists() {
        fluxion_file(name, "fluxion.err")
    } else {
        String::new()
    };
    assert_eq!(run.stderr, want, "{name}: standard error");
    text
}

/// What Fluxion's binary wrote for the reduced case `NAME`, stored in its folder as `file`.
fn fluxion_file(name: &str, file: &str) -> String {
    let path = case_dir(name).join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A request that fits no rack now (a socket's 18 cores; the first two jobs hold every
/// node): our walk stops at the root, whose aggregate shows too few cores free below.
/// Fluxion walks on, every rack fails its prune, yet the root's own visit succeeds, empty,
/// and its select then fails to resolve the graph: ENODEV. The reservation search then finds a time whose
/// update takes nothing, and neither its select nor the planner's asks for times (none
/// turned away, one left after it) set errno again, so that ENODEV is the answer:
/// "Unsatisfiable request" (random differential seed 67199, reduced; `fluxion.out` is
/// Fluxion's binary's).
#[test]
fn a_select_whose_root_finds_nothing_below_fails_to_resolve() {
    assert_as_fluxion(
        "reserve-enodev",
        &["-P", "firstnodex", "-F", "pretty_simple"],
        "match allocate j2.yaml\nmatch allocate_orelse_reserve j3.yaml\n\
         match allocate_orelse_reserve j0.yaml\nquit\n",
    );
}

/// The same ENODEV of a select at now, hidden by the planner: the root's aggregate tracks
/// `ssd` first, which `j2` does not ask, so Fluxion's multi-planner offers every change
/// point and turns away those where the cores do not fit, and that check leaves EBUSY. The
/// reservation's update then takes nothing and the match fails plainly, the job id consumed
/// (random differential seed 55038, reduced; `fluxion.out` is Fluxion's binary's).
#[test]
fn a_time_the_reservation_search_turns_away_leaves_ebusy() {
    assert_as_fluxion(
        "reserve-ebusy",
        &["-P", "first", "-F", "rv1_nosched"],
        "match allocate_with_satisfiability j1.yaml\n\
         match allocate_with_satisfiability j3.yaml\n\
         match allocate_orelse_reserve j0.yaml\nmatch allocate_orelse_reserve j2.yaml\nquit\n",
    );
}

/// A vertex a match leaves out keeps its children taken through a cancel: job 2 takes
/// `socket1`'s free `core2` on two nodes, but `socket1` itself refuses the job (job 1 holds
/// its `core3`), so Fluxion's update leaves it without the job's tag; its cancel walk stops
/// at every vertex without the tag, and `core2` stays taken — still tagged with job 2 —
/// so the same request then finds two cores fewer (random differential seed 89279,
/// reduced; `fluxion.out` is Fluxion's binary's).
#[test]
fn a_cancel_leaves_taken_what_lies_below_a_vertex_the_match_left_out() {
    assert_as_fluxion(
        "cancel-untagged",
        &[
            "-P",
            "high",
            "-F",
            "rv1_nosched",
            "-T",
            "flexible",
            "--prune-filters=ALL:core,ALL:node,ALL:gpu",
        ],
        "match allocate_with_satisfiability j0.yaml\n\
         match allocate_orelse_reserve j3.yaml\ncancel 2\nfind jobid-tag=2\n\
         match allocate j3.yaml\nquit\n",
    );
}

/// A partial cancel that fails says why on standard output in Fluxion's words, in its
/// order: an R whose ranks are not in ascending order does not read (flux-core's
/// `idset_decode`); of ranks the graph lacks (`2-4`: 3 and 4), the one its unordered set
/// gives first (4); a rank the job holds nothing on (2); a rank whose one vertex (the node:
/// the graph gives the vertices below it no rank) the job holds shared, which gives back
/// nothing Fluxion counts (0). The `-t` output and standard output
/// are Fluxion's binary's for the same commands (random differential, partial cancels).
#[test]
fn a_partial_cancel_that_fails_says_why_as_fluxion_does() {
    let (run, _) = run_as_fluxion(
        "partial-cancel-errors",
        &["-S", "CA", "-P", "low", "-F", "pretty_simple"],
        "match allocate j0.yaml\npartial-cancel 1 rv1exec r-unordered.json\n\
         partial-cancel 1 rv1exec r-absent.json\npartial-cancel 1 rv1exec r-unheld.json\n\
         partial-cancel 1 rv1exec r-held.json stats\nfind sched-now=allocated\nquit\n",
    );
    assert_eq!(
        run.stdout,
        fluxion_file("partial-cancel-errors", "fluxion.stdout")
    );
    assert_eq!(
        run.stderr,
        "ERROR: error encountered while removing job 1\n".repeat(4)
    );
}

/// A partial cancel that fails half-way, then a cancel: Fluxion's cancel walk stops where
/// the partial one took the job's tags, so the job's pruning-filter records stay at the
/// vertices it does not reach, and `find jobid-span=` still reports them (random
/// differential seed 23911, reduced; `fluxion.out` is Fluxion's binary's).
#[test]
fn filter_records_no_cancel_reaches_stay_with_the_job() {
    let (run, _) = run_as_fluxion(
        "cancel-after-failed-partial",
        &["-S", "CA", "-P", "lonode", "-F", "simple"],
        "match allocate j0.yaml\nmatch allocate_with_satisfiability j0.yaml\n\
         partial-cancel 2 rv1exec r0.json\ncancel 2\nfind jobid-span=2\nquit\n",
    );
    assert_eq!(run.stdout, "remove: 0 not found in rank_to_counts.\n");
    assert_eq!(
        run.stderr,
        "ERROR: error encountered while removing job 2\n"
    );
}

/// A partial cancel that gives back the root's record of its first type (here one of 0
/// units: the job asked no gpu) takes the job's start and end out of that type's planner,
/// whose points are the only instants Fluxion's reservation search tries: the same job
/// asked again finds no time, where without the partial cancel it would be reserved at the
/// first job's end (random differential seed 7385, reduced; `fluxion.out` is Fluxion's
/// binary's).
#[test]
fn a_partial_cancel_takes_the_jobs_instants_out_of_the_reservation_search() {
    let flags: Vec<&str> = "-S CA -P first -F rv1_nosched -T flexible"
        .split(' ')
        .collect();
    assert_as_fluxion(
        "partial-cancel-times",
        &flags,
        "match allocate_with_satisfiability j0.yaml\n\
         partial-cancel 1 rv1exec r0.json stats\n\
         match allocate_orelse_reserve j0.yaml\nquit\n",
    );
    let (_, plain) = query_case(
        "partial-cancel-times",
        &flags,
        "match allocate_with_satisfiability j0.yaml\n\
         match allocate_orelse_reserve j0.yaml\nquit\n",
    );
    assert!(plain.contains("SCHEDULED AT=3600"), "{plain}");
}

/// A partial cancel that gives back a node's own records keeps the job's cores below it
/// held: the node is then untouched over the window while leaves below it are not, so no
/// leaf may be taken for free because its parent is (a leaf shortcut once did; debug
/// builds compare every leaf it answers with the leaf's calendars: random differential
/// seed 31685, reduced; `fluxion.out` and `fluxion.err` are Fluxion's binary's).
#[test]
fn a_partial_cancel_keeps_leaves_held_below_an_untouched_node() {
    assert_as_fluxion(
        "partial-cancel-leaves-held",
        &["-P", "low", "-F", "pretty_simple", "-T", "flexible"],
        "match allocate_orelse_reserve j1.yaml\nmatch allocate_orelse_reserve j0.yaml\n\
         partial-cancel 2 rv1exec r0.json stats\nmatch allocate j1.yaml\nquit\n",
    );
}

/// After a partial cancel an ancestor the job held exclusively keeps its own units taken
/// (Fluxion's partial cancel shrinks the ancestors' filters and drops their job counts, but
/// leaves their schedule spans), so a vertex no job count touches is not free any more: the
/// same request then finds nothing (random differential seed 134064, reduced; `fluxion.out`
/// is Fluxion's binary's).
#[test]
fn an_ancestor_a_partial_cancel_leaves_held_stays_taken() {
    assert_as_fluxion(
        "partial-cancel-held-ancestor",
        &["-S", "CA", "-P", "low", "-F", "jgf", "-T", "flexible"],
        "match allocate j0.yaml\npartial-cancel 1 rv1exec r0.json\n\
         match allocate_with_satisfiability j0.yaml\nquit\n",
    );
}

/// A vertex whose own calendar takes a job but whose pruning filter refuses it is tagged
/// with the job all the same (Fluxion's update tags it before its filter's update fails):
/// job 1's match, whose writer fails, stays recorded and its id is handed out again; the
/// reservation matched under that id replaces its record in the root's filter, leaving
/// job 1's there for good, so the root's filter is full at 0 and refuses job 2. Job 2's
/// cancel still walks through the root and gives `core27` back: `find` sees nothing held
/// and job 3 takes `core27` again (random differential seed 177324, reduced; `fluxion.out`
/// is Fluxion's binary's).
#[test]
fn a_vertex_only_its_pruning_filter_refused_stays_tagged_and_its_cancel_goes_through() {
    let (run, text) = run_as_fluxion(
        "cancel-filter-refused",
        &["-P", "high", "-F", "rv1_shorthand", "-T", "flexible"],
        "match allocate j1.yaml\nmatch allocate_orelse_reserve j0.yaml\ncancel 1\n\
         match allocate j0.yaml\ncancel 2\nfind jobid-tag=2\nfind sched-now=allocated\n\
         match allocate j0.yaml\nquit\n",
    );
    assert_eq!(
        run.stderr,
        "match_allocate: ERROR: match writer emit: No such file or directory\n"
    );
    let cores: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split("\"core\": \"").nth(1))
        .map(|rest| rest.split('"').next().unwrap_or_default())
        .collect();
    assert_eq!(cores, ["31", "27", "27"], "{text}");
}

/// `-P locality` takes, at the top level, the candidates of the highest run of contiguous
/// ids first, and among one run what GCC's sort leaves first: on bench128 a socket job
/// lands on `node88`, the next (four cores) on `node81`, a whole node on `node98`, where
/// `high` takes `node55`, `node36`, `node127` (`fluxion.out` is Fluxion's binary's).
#[test]
fn locality_takes_the_highest_run_of_ids_first_as_fluxion_sorts_it() {
    let text = assert_as_fluxion(
        "locality",
        &["-S", "CA", "-P", "locality", "-F", "simple"],
        "match allocate c_socket_22c_1g.yaml\nmatch allocate b_slot_4core.yaml\n\
         match allocate a_node_excl.yaml\nmatch allocate c_socket_22c_1g.yaml\n\
         match allocate_orelse_reserve a_node_excl.yaml\nquit\n",
    );
    let nodes: Vec<&str> = text
        .lines()
        .map(str::trim_start)
        .filter_map(|l| l.trim_start_matches('-').strip_prefix("node"))
        .filter_map(|l| l.split('[').next())
        .collect();
    assert_eq!(nodes, ["88", "81", "98", "87", "127"]);
}

/// A match that fails prints Fluxion's traverser messages of its walks (`fluxion.err` is
/// Fluxion's binary's standard error for the same commands): a socket written `exclusive:
/// false` under a slot refused at every socket the satisfiability walk meets (`by_excl`,
/// messages run together on one line), and two top-level requests of one type clashing at
/// every node a walk tests — those a job holds whole included — over a reservation search's
/// every select (`test`; random differential seeds 500193 and 500362, reduced).
#[test]
fn a_failed_match_prints_the_traverser_messages_its_walks_left() {
    for (name, flags, commands) in [
        (
            "message-by-excl",
            &["-S", "CA", "-P", "low", "-F", "simple"][..],
            "match satisfiability j0.yaml\nmatch allocate j0.yaml\nquit\n",
        ),
        (
            "message-siblings",
            &["-P", "firstnodex", "-F", "rv1_nosched", "-T", "flexible"][..],
            "match allocate j0.yaml\nmatch allocate j1.yaml\n\
             match allocate_orelse_reserve j1.yaml\nquit\n",
        ),
    ] {
        assert_as_fluxion(name, flags, commands);
    }
}

/// A partial cancel that reduces an ancestor's pruning filter but leaves it holding
/// something takes the job's count there all the same: the vertex is untouched but its
/// filter is not its totals, so a walk may not read its totals for it (debug builds
/// asserted so; random differential seed 500294, reduced; `fluxion.out` and `fluxion.err`
/// are Fluxion's binary's).
#[test]
fn an_ancestors_filter_a_partial_cancel_reduced_is_not_read_as_its_totals() {
    assert_as_fluxion(
        "partial-cancel-filter",
        &["-S", "CA", "-P", "lonodex", "-F", "rlite", "-T", "flexible"],
        "match allocate j3.yaml\ncancel 1\ncancel 1\nmatch allocate j1.yaml\ncancel 2\n\
         match satisfiability j1.yaml\ncancel 1 stats\nmatch allocate j1.yaml\n\
         match allocate j0.yaml\npartial-cancel 2 rv1exec r0.json\n\
         match allocate_orelse_reserve j2.yaml\nquit\n",
    );
}

/// A `find` whose writer cannot emit says why as a match's emit does: ENOENT when the
/// edges found do not close into one graph (random differential seed 1399, reduced;
/// `fluxion.out` and `fluxion.err` are Fluxion's binary's).
#[test]
fn a_find_whose_writer_fails_says_why_as_a_matchs_emit_does() {
    assert_as_fluxion(
        "find-emit-errno",
        &["-P", "lonode", "-F", "jgf"],
        "match allocate_orelse_reserve j0.yaml\nmatch allocate_with_satisfiability j0.yaml\n\
         match without_allocating j0.yaml\nfind sched-now=free\nquit\n",
    );
}

/// `attach` grows the root's totals without taking its planner's keys again: the instant a
/// reservation search would find free units at (3600, where the attached node's job ends)
/// keeps the key it had when nothing was free then, and Fluxion's min-time tree does not
/// offer it; the search reserves at 7200 (flux-sched's t3028 test 9, reduced to a graph of
/// our own; `fluxion.out` is Fluxion's binary's).
#[test]
fn after_attach_an_instant_whose_key_fell_behind_is_not_offered() {
    let text = assert_as_fluxion(
        "attach-stale-instants",
        &["-S", "CA", "-P", "low", "-F", "simple"],
        "match allocate j0.yaml\nmatch allocate_orelse_reserve j0.yaml\n\
         match allocate j0.yaml\nattach node1.json\nmatch allocate j0.yaml\ncancel 1\n\
         match allocate j0.yaml\nmatch allocate j0.yaml\n\
         match allocate_orelse_reserve j0.yaml\nquit\n",
    );
    assert!(text.ends_with("SCHEDULED AT=7200\nINFO: =============================\n"));
}

/// `update` records an allocation whatever its start (Fluxion's reader puts its spans in
/// each vertex's allocations), though resource-query says RESERVED for a later start: `find
/// sched-now=allocated` lists it, and a select at now for an allocation refuses its
/// vertices to an exclusive request, as Fluxion guards against jobs overrunning their time
/// (`by_excl`) — here node8, held from 7200, is passed over for a job of [0, 1800)
/// (random differential with `update`, seed 8, reduced; `fluxion.out` is Fluxion's
/// binary's).
#[test]
fn an_update_at_a_later_time_is_an_allocation_and_refused_now() {
    let text = assert_as_fluxion(
        "update-later-allocation",
        &["-P", "high", "-F", "simple"],
        "update allocate jgf u0.json 5 7200 3600\nmatch allocate_with_satisfiability j0.yaml\n\
         find sched-now=allocated\nquit\n",
    );
    assert!(
        text.contains("RESOURCES=RESERVED\nINFO: SCHEDULED AT=7200"),
        "{text}"
    );
}

/// Under `first`, the update walk of `update` teaches the child order as a match's does,
/// but its job has no `now` (-1): the planners' query fails and every edge it descends gets
/// weight 0, so the next match goes to untouched siblings first (random differential with
/// `update`, seed 4592, reduced; `fluxion.out` is Fluxion's binary's).
#[test]
fn an_update_under_first_sets_the_weights_it_passes_to_zero() {
    assert_as_fluxion(
        "update-first-weights",
        &[
            "-P",
            "first",
            "-F",
            "jgf_shorthand",
            "-T",
            "flexible",
            "--prune-filters=ALL:core,ALL:gpu",
        ],
        "update allocate jgf u0.json 2 0 3600\nmatch allocate j0.yaml\nquit\n",
    );
}

/// `update`'s output is indented from the walk level where Fluxion's matches left it: a
/// match whose update a calendar refused leaves the level one deeper for every later walk,
/// the update walk's included (random differential seed 151103, reduced; `fluxion.out` is
/// Fluxion's binary's).
#[test]
fn an_update_is_printed_at_the_level_earlier_matches_left() {
    assert_as_fluxion(
        "update-level-drift",
        &["-P", "high", "-F", "simple", "-T", "flexible"],
        "set-status /medium0/node2 down\nmatch allocate_orelse_reserve j0.yaml\n\
         match allocate j0.yaml\nmatch allocate j3.yaml\nmatch allocate_orelse_reserve j3.yaml\n\
         update allocate jgf u0.json 15 3600 3600\nquit\n",
    );
}

/// Fluxion's jobspec reader refuses a resource type it does not know as it reads it, before
/// the rest of that resource and every resource after it: a jobspec whose second resource
/// has a bad count and whose first holds a type no vertex has is refused for the type (random
/// differential seed 56317, reduced; `fluxion.out` and `fluxion.err` are Fluxion's binary's).
#[test]
fn an_unknown_type_is_refused_before_a_later_bad_count() {
    assert_as_fluxion(
        "unknown-type-before-bad-count",
        &["-S", "CA", "-P", "first"],
        "match allocate j0.yaml\nmatch allocate j0.yaml\nquit\n",
    );
}

/// A refused match that sets no errno prints the one resource-query holds: ENOTTY at each
/// command's start, 0 after a match of the same `multi-match` succeeded, ENOENT (and so
/// "Unsatisfiable request") after one of its jobspecs could not be opened (random
/// differential seed 62557, reduced; `fluxion.out` and `fluxion.err` are Fluxion's
/// binary's).
#[test]
fn a_multi_match_carries_its_errno_from_one_jobspec_to_the_next() {
    assert_as_fluxion(
        "multi-match-carried-errno",
        &["-P", "first", "-F", "rv1", "-T", "flexible"],
        "multi-match allocate j0.yaml j2.yaml\nmulti-match allocate nonexist.yaml j2.yaml\n\
         match allocate j2.yaml\nquit\n",
    );
}
