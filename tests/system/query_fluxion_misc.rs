//! resource-query behaviours checked one at a time: three flux-sched's own scripts check
//! (t3026, t3029, t3023: an hwloc topology loaded with `-f hwloc`, the traversal visit counts
//! `-e` prints, an R made under another dominant subsystem given to `update`), and the
//! shorthand JGF files. The GRUG graphs come from the conformance folder (skipped when it is
//! absent); the hwloc topology from tests/data/hwloc. The cases the random differential
//! found are in `query_reduced`.

use std::path::{Path, PathBuf};

use crate::query_run::{Scratch, jgf, query};

fn grug(name: &str) -> Option<PathBuf> {
    let path = crate::graph_files::conformance_dir()?
        .join("t/data/resource/grugs")
        .join(name);
    if path.exists() {
        Some(path)
    } else {
        eprintln!("skipped: {} not found", path.display());
        None
    }
}

/// A jobspec of `resources` (YAML, indented as under `resources:`), an hour long.
fn jobspec(resources: &str) -> String {
    format!(
        "version: 9999\nresources:\n{resources}tasks:\n  - command: [app]\n    slot: default\n    \
         count: {{per_slot: 1}}\nattributes:\n  system:\n    duration: 3600\n"
    )
}

/// flux-sched's pruning jobspec: node[1] → socket[1] → slot[1] → core[18].
const SOCKET_OF_CORES: &str = "  - type: node\n    count: 1\n    with:\n      - type: socket\n        \
     count: 1\n        with:\n          - type: slot\n            count: 1\n            \
     label: default\n            with:\n              - type: core\n                count: 18\n";

fn visit_counts(stdout: &str) -> Vec<(u64, u64)> {
    let count = |l: &str, key: &str| l.strip_prefix(key).and_then(|n| n.parse::<u64>().ok());
    let pre: Vec<u64> = stdout
        .lines()
        .filter_map(|l| count(l, "INFO: PREORDER VISIT COUNT="))
        .collect();
    let post = stdout
        .lines()
        .filter_map(|l| count(l, "INFO: POSTORDER VISIT COUNT="));
    pre.into_iter().zip(post).collect()
}

#[test]
fn visit_counts_are_fluxions_and_a_failed_allocate_repeats_the_last_totals() {
    let Some(tiny) = grug("tiny.graphml") else {
        return;
    };
    let s = Scratch::new("visits");
    s.file("socket.yaml", jobspec(SOCKET_OF_CORES));
    let cmds = "match allocate socket.yaml\n".repeat(5) + "quit\n";
    // t3029's first test: 100 vertices, every job prunes a socket's subtree; the fifth
    // allocate finds nothing and leaves the totals of the fourth.
    let r = query(&s.0, &tiny, &["-S", "CA", "-P", "high", "-e"], &cmds);
    r.assert_no_panic("high");
    let want = [(100, 80), (77, 61), (52, 41), (29, 22), (29, 22)];
    assert_eq!(visit_counts(&r.stdout), want, "{}", r.stdout);
    // Under first the walk stops at the first fit: the same few vertices each time.
    let r = query(&s.0, &tiny, &["-S", "CA", "-P", "first", "-e"], &cmds);
    assert_eq!(visit_counts(&r.stdout)[..4], [(27, 22); 4], "{}", r.stdout);
    // Satisfiability walks everything, every time.
    let sat = "match satisfiability socket.yaml\n".repeat(2) + "quit\n";
    let r = query(&s.0, &tiny, &["-S", "CA", "-P", "high", "-e"], &sat);
    assert_eq!(visit_counts(&r.stdout), [(100, 80); 2], "{}", r.stdout);
}

#[test]
fn an_r_from_another_dominant_subsystem_holds_its_vertices_and_writes_nothing() {
    let Some(power) = grug("power.graphml") else {
        return;
    };
    let s = Scratch::new("foreign-r");
    // flux-sched's update/test006.yaml (36 nodes' cores) and test005.yaml (power).
    s.file(
        "cores.yaml",
        jobspec(
            "  - type: slot\n    count: 36\n    label: default\n    with:\n      - type: node\n        \
             count: 1\n        with:\n          - type: socket\n            count: 1\n            \
             with:\n              - type: core\n                count: 1\n",
        ),
    );
    s.file(
        "power.yaml",
        jobspec(
            "  - type: slot\n    count: 36\n    label: default\n    with:\n      - type: power\n        \
             count: 2\n        exclusive: true\n      - type: node\n        count: 1\n        \
             exclusive: true\n        with:\n          - type: power\n            count: 2\n            \
             exclusive: true\n",
        ),
    );
    let r = query(
        &s.0,
        &power,
        &["-S", "CA", "-P", "high", "-F", "jgf"],
        "match allocate cores.yaml\nquit\n",
    );
    let r_of_job = r
        .stdout
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JGF:\n{}", r.stdout));
    s.file("r1.json", r_of_job);
    let cmds = "update allocate jgf r1.json 1 0 3600\nmatch allocate power.yaml\n\
                match allocate power.yaml\ncancel 1\nmatch allocate power.yaml\nquit\n";
    let r = query(&s.0, &power, &["-S", "PA", "-P", "high"], cmds);
    r.assert_no_panic("PA session");
    let blocks: Vec<&str> = r.stdout.split("INFO: JOBID=").skip(1).collect();
    assert_eq!(blocks.len(), 4, "{}", r.stdout);
    // The update: allocated, and nothing written before its block.
    let before_update = r.stdout.split("INFO: JOBID=1").next().unwrap_or("");
    assert!(!before_update.contains("---"), "{}", r.stdout);
    assert!(
        blocks[0].starts_with("1\nINFO: RESOURCES=ALLOCATED"),
        "{}",
        r.stdout
    );
    // Job 2 gets what job 1's nodes leave; job 3 finds nothing; after cancel 1, job 4 fits.
    assert!(
        blocks[1].starts_with("2\nINFO: RESOURCES=ALLOCATED"),
        "{}",
        r.stdout
    );
    assert!(blocks[2].starts_with("3\n"), "{}", r.stdout);
    assert!(
        r.stdout
            .contains("No matching resources found\nINFO: JOBID=3")
    );
    assert!(
        blocks[3].starts_with("4\nINFO: RESOURCES=ALLOCATED"),
        "{}",
        r.stdout
    );
}

#[test]
fn an_hwloc_topology_loads_with_its_allowlist() {
    let xml = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/hwloc/corona.xml");
    let s = Scratch::new("hwloc");
    s.file(
        "drive.yaml",
        jobspec(
            "  - type: node\n    count: 1\n    with:\n      - type: socket\n        count: 1\n        \
             with:\n          - type: slot\n            count: 1\n            label: default\n            \
             with:\n              - type: core\n                count: 1\n              \
             - type: storage\n                count: 1\n",
        ),
    );
    let flags = [
        "-f",
        "hwloc",
        "-W",
        "node,socket,core,storage",
        "-S",
        "CA",
        "-P",
        "low",
    ];
    let r = query(&s.0, &xml, &flags, "match allocate drive.yaml\nquit\n");
    r.assert_no_panic("hwloc");
    let lines: Vec<&str> = r.stdout.lines().take(5).collect();
    assert_eq!(
        lines,
        [
            "      ------------core0[1:x]",
            "      ------------storage0[1562:x]",
            "      ---------socket0[1:s]",
            "      ------corona116[1:s]",
            "      ---cluster0[1:s]",
        ],
        "{}",
        r.stdout
    );
    // Without -W every level is there: sockets hold NUMA groups, which hold L3 caches.
    let r = query(
        &s.0,
        &xml,
        &["-f", "hwloc", "-F", "jgf"],
        "find status=up\nquit\n",
    );
    assert!(
        r.stdout
            .contains("/cluster0/corona116/socket0/group0/L3cache0/core0/pu0"),
        "{}",
        r.stdout
    );
}

/// t3012's duplicate names and t3027's and t3034's load and jobspec refusals, from an R
/// (`-f rv1exec`): two nodes an R names alike are both at one path and the property commands
/// act on each; a host number beyond a 64-bit integer fails the load; a property name with
/// an operator character is a jobspec error.
#[test]
fn an_r_with_hosts_named_alike_big_numbers_and_bad_property_names() {
    let r_of = |hosts: &str| {
        format!(
            r#"{{"version": 1, "execution": {{"R_lite": [{{"rank": "0-1", "children": {{"core": "0-1"}}}}],
            "nodelist": [{hosts}], "properties": {{"arm": "0"}}, "starttime": 0, "expiration": 0}}}}"#
        )
    };
    let s = Scratch::new("rv1-misc");
    let twins = s.file("twins.json", r_of(r#""fluke", "fluke""#));
    let cmds = "set-property /cluster0/fluke class=1\nget-property /cluster0/fluke\n\
                get-status /cluster0/fluke\nquit\n";
    let r = query(&s.0, &twins, &["-f", "rv1exec"], cmds);
    r.assert_no_panic("twins");
    let lines: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| !l.starts_with("INFO"))
        .collect();
    assert_eq!(
        lines,
        [
            "arm=", // the first node's, from the R's properties
            "class=1",
            "class=1",
            "/cluster0/fluke is up",
            "/cluster0/fluke is up"
        ],
        "{}",
        r.stdout
    );

    let big = s.file("big.json", r_of(r#""fluke9223372036854775808", "fluke1""#));
    let r = query(&s.0, &big, &["-f", "rv1exec"], "quit\n");
    assert_ne!(r.code, Some(0), "{}", r.stdout);
    assert!(
        r.stderr
            .contains("error splitting hostname=fluke9223372036854775808"),
        "{}",
        r.stderr
    );

    let ok = s.file("ok.json", r_of(r#""fluke0", "fluke1""#));
    s.file(
        "invalid.json",
        r#"{"version": 1, "resources": [{"type": "slot", "count": 1, "label": "task",
            "with": [{"type": "core", "count": 1}]}],
            "tasks": [{"command": ["x"], "slot": "task", "count": {"per_slot": 1}}],
            "attributes": {"system": {"duration": 0,
                "constraints": {"properties": ["ar^m-v9@core"]}}}}"#,
    );
    let r = query(
        &s.0,
        &ok,
        &["-f", "rv1exec"],
        "match allocate invalid.json\nquit\n",
    );
    r.assert_no_panic("invalid property");
    assert!(r.stderr.contains("Jobspec error"), "{}", r.stderr);
    assert!(r.stderr.contains("ar^m-v9@core"), "{}", r.stderr);
}

/// t3041: `-f jgf_shorthand` loads a JGF graph as `-f jgf` does (the shorthand is read by
/// `update`).
#[test]
fn jgf_shorthand_loads_as_jgf() {
    let s = Scratch::new("jgf-shorthand-load");
    let graph = s.file("g.json", jgf());
    let cmds = "get-status /mini0/node0/core1\nquit\n";
    let plain = query(&s.0, &graph, &["-f", "jgf"], cmds);
    let shorthand = query(&s.0, &graph, &["-f", "jgf_shorthand"], cmds);
    shorthand.assert_no_panic("jgf_shorthand");
    assert_eq!(shorthand.code, Some(0), "{}", shorthand.stderr);
    assert!(
        shorthand.stdout.contains("/mini0/node0/core1 is up"),
        "{}",
        shorthand.stdout
    );
    assert_eq!(shorthand.stdout, plain.stdout);
}
