use std::path::{Path, PathBuf};

use super::duration_ms;
use super::*;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, "cfg.toml", Path::new("/nonexistent"))
}

fn error(text: &str) -> String {
    match parse(text) {
        Ok(c) => panic!("expected an error, got {c:?}"),
        Err(e) => e.to_string(),
    }
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(label: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "shardsched-coordinator-config-{label}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const INLINE_CLUSTER: &str = r#"
[cluster.inline]
name = "small"
[[cluster.inline.nodes]]
hosts = "cn[0-7]"
cores_per_socket = 4
[[cluster.inline.nodes]]
hosts = "fat[0-1]"
cores_per_socket = 8
properties = ["bigmem", "ssd"]
"#;

#[test]
fn the_embedded_default() {
    let c = Config::embedded_default().expect("default config");
    assert_eq!(c.origin, DEFAULT_CONFIG_ORIGIN);
    assert_eq!(c.cluster.nodes.len(), 128);
    assert_eq!(c.cluster.spec_toml, DEFAULT_CLUSTER_TOML);
    assert_eq!(c.cluster.nodes[0].name, "node0");
    assert_eq!(c.cluster.nodes[127].name, "node127");
    assert_eq!(c.default_queue, "batch");
    let names: Vec<&str> = c.queues.iter().map(|q| q.name.as_str()).collect();
    assert_eq!(names, ["batch", "debug", "standby"]);

    let batch = c.queue("batch").expect("batch");
    assert_eq!(batch.definition, (0..112).collect::<Vec<_>>());
    assert_eq!(batch.policy, QueuePolicy::Easy);
    assert_eq!(batch.match_policy, MatchPolicy::First);
    assert!(batch.started && batch.enabled);
    assert_eq!(batch.default_duration_ms, 3_600_000);
    assert_eq!(batch.max_duration_ms, 24 * 3_600_000);

    let debug = c.queue("debug").expect("debug");
    assert_eq!(
        debug.definition,
        (96..128).collect::<Vec<_>>(),
        "overlaps batch on node[96-111]: a move between two running queues"
    );
    assert_eq!(debug.policy, QueuePolicy::Fcfs);
    assert_eq!(debug.max_duration_ms, 30 * 60_000);
    assert!(debug.started);

    let standby = c.queue("standby").expect("standby");
    assert_eq!(standby.definition, batch.definition);
    assert!(!standby.started && standby.enabled);
    check(&c).expect("invariants");
}

#[test]
fn a_minimal_file_takes_the_defaults() {
    let c = parse("[queues.all]\nnodes = \"node[0-127]\"\n").expect("valid");
    assert_eq!(c.default_queue, "all", "the only queue is the default");
    let q = &c.queues[0];
    assert_eq!(q.policy, QueuePolicy::Fcfs);
    assert_eq!(q.match_policy, MatchPolicy::First);
    assert_eq!((q.queue_depth, q.reservation_depth), (32, 64));
    assert_eq!((q.default_duration_ms, q.max_duration_ms), (3_600_000, 0));
    assert!(q.started && q.enabled);
    assert_eq!(c.http_listen, None, "no [http]: the command line's default");
}

#[test]
fn the_status_page_address_is_a_setting() {
    let queues = "[queues.all]\nnodes = \"node[0-127]\"\n";
    let c = parse(&format!("[http]\nlisten = \"127.0.0.1:9464\"\n{queues}")).expect("valid");
    assert_eq!(
        c.http_listen,
        Some("127.0.0.1:9464".parse().expect("address"))
    );
    let e = error(&format!("[http]\nlisten = \"localhost\"\n{queues}"));
    assert!(
        e.contains("cfg.toml:2:10") && e.contains("not an address"),
        "{e}"
    );
    let e = error(&format!("[http]\nport = 9464\n{queues}"));
    assert!(e.contains("unknown field `port`"), "{e}");
}

/// A queue's match policy may be any `shardsched query -P` takes: variation, and knobs
/// spelled out (kept by name when a name has the same knobs).
#[test]
fn match_policy_is_any_policy_query_takes() {
    let c = parse(
        "default_queue = \"a\"\n[queues.a]\nnodes = \"node0\"\nmatch_policy = \"variation\"\n\
         [queues.b]\nnodes = \"node1\"\nmatch_policy = \"policy=low stop_on_1_matches=true\"\n\
         [queues.c]\nnodes = \"node2\"\n\
         match_policy = \"policy=high node_centric=true stop_on_1_matches=true\"\n",
    )
    .expect("valid");
    let policy = |q: &str| c.queue(q).expect("queue").match_policy;
    assert_eq!(policy("a"), MatchPolicy::Variation);
    assert_eq!(policy("b"), MatchPolicy::Knobs(8));
    assert_eq!(policy("c"), MatchPolicy::First);
}

#[test]
fn inline_cluster_and_definitions_by_property() {
    let text = format!(
        "default_queue = \"cpu\"\n{INLINE_CLUSTER}\n\
         [queues.cpu]\nnodes = \"cn[0-7]\"\npolicy = \"conservative\"\nmatch_policy = \"lonodex\"\n\
         [queues.big]\nrequires = [\"bigmem\"]\npolicy = \"hybrid\"\nreservation_depth = 4\n\
         default_duration = 90\nmax_duration = \"1.5h\"\n\
         [queues.ssd1]\nnodes = \"fat1,cn0\"\nrequires = [\"ssd\"]\nstarted = false\nenabled = false\n"
    );
    let c = parse(&text).expect("valid");
    let names: Vec<&str> = c.cluster.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names.len(), 10);
    assert_eq!(names[8..], ["fat0", "fat1"]);
    assert!(c.cluster.nodes[9].properties.contains("ssd"));
    assert!(
        c.cluster.spec_toml.contains("cn[0-7]"),
        "{}",
        c.cluster.spec_toml
    );

    let big = c.queue("big").expect("big");
    assert_eq!(c.node_names(&big.definition), ["fat0", "fat1"]);
    assert_eq!(big.policy, QueuePolicy::Hybrid);
    assert_eq!(big.reservation_depth, 4);
    assert_eq!(big.default_duration_ms, 90_000);
    assert_eq!(big.max_duration_ms, 5_400_000);
    let cpu = c.queue("cpu").expect("cpu");
    assert_eq!(cpu.match_policy, MatchPolicy::LoNodeX);
    let ssd1 = c.queue("ssd1").expect("ssd1");
    assert_eq!(
        c.node_names(&ssd1.definition),
        ["fat1"],
        "hostlist and properties intersect"
    );
    assert!(!ssd1.started && !ssd1.enabled);
}

#[test]
fn a_cluster_spec_file_relative_to_the_config() {
    let dir = TempDir::new("spec-file");
    std::fs::write(
        dir.0.join("cluster.toml"),
        "name = \"t\"\n[[nodes]]\nhosts = \"n[1-4]\"\ncores_per_socket = 2\n",
    )
    .expect("write spec");
    let path = dir.0.join("coordinator.toml");
    std::fs::write(
        &path,
        "[cluster]\nspec = \"cluster.toml\"\n[queues.q]\nnodes = \"n[1-4]\"\n",
    )
    .expect("write config");
    let c = Config::from_file(&path).expect("valid");
    assert_eq!(c.cluster.nodes.len(), 4);
    assert_eq!(c.origin, path.display().to_string());

    // An error inside the spec names the spec file and its line.
    std::fs::write(
        dir.0.join("cluster.toml"),
        "[[nodes]]\nhosts = \"n[1-4]\"\ncores_per_socket = 0\n",
    )
    .expect("write spec");
    let e = Config::from_file(&path)
        .expect_err("invalid spec")
        .to_string();
    assert!(
        e.contains("cluster spec:") && e.contains("cluster.toml:3:"),
        "{e}"
    );

    std::fs::write(
        &path,
        "[cluster]\nspec = \"missing.toml\"\n[queues.q]\nnodes = \"n1\"\n",
    )
    .expect("write config");
    let e = Config::from_file(&path)
        .expect_err("missing spec")
        .to_string();
    assert!(e.contains(":2:8: [cluster] spec: cannot read"), "{e}");

    let e = Config::from_file(&dir.0.join("nope.toml"))
        .expect_err("no file")
        .to_string();
    assert!(e.contains("nope.toml"), "{e}");
}

#[test]
fn each_invalid_case_names_its_place() {
    let cases: &[(&str, &str)] = &[
        // Syntax and unknown keys: file:line:column.
        (
            "[queues.a]\nnodes = \"node0\"\npolcy = \"easy\"\n",
            "cfg.toml:3:1: unknown field `polcy`",
        ),
        ("[queues.a\n", "cfg.toml:1:"),
        (
            "colour = 1\n[queues.a]\nnodes = \"node0\"\n",
            "cfg.toml:1:1: unknown field `colour`",
        ),
        (
            "[queues.a]\nnodes = \"node0\"\nqueue_depth = -1\n",
            "cfg.toml:3:15:",
        ),
        (
            "[queues.a]\nnodes = \"node0\"\nstarted = \"yes\"\n",
            "cfg.toml:3:11:",
        ),
        // Queues.
        ("", "no [queues.NAME] table"),
        ("[queues]\n", "[queues] is empty"),
        (
            "[queues.\"bad.name\"]\nnodes = \"node0\"\n",
            "cfg.toml:1:1: queue name: name \"bad.name\" is invalid",
        ),
        (
            "[queues.a]\npolicy = \"easy\"\n",
            "cfg.toml:1:1: queue a: nodes: missing",
        ),
        (
            "[queues.a]\nnodes = \"node[120-130]\"\n",
            "cfg.toml:2:9: queue a: nodes: node[128-130] not in the cluster (3 nodes)",
        ),
        (
            "[queues.a]\nnodes = \"node[0-\"\n",
            "cfg.toml:2:9: queue a: nodes: hostlist",
        ),
        (
            "[queues.a]\nrequires = [\"gpu-h100\"]\n",
            "cfg.toml:2:12: queue a: requires: the definition is empty",
        ),
        (
            "[queues.a]\nnodes = \"node0\"\npolicy = \"lifo\"\n",
            "cfg.toml:3:10: queue a: policy: unknown queue policy \"lifo\"",
        ),
        (
            "[queues.a]\nnodes = \"node0\"\nmatch_policy = \"best\"\n",
            "cfg.toml:3:16: queue a: match_policy: unknown match policy \"best\"",
        ),
        (
            "[queues.a]\nnodes = \"node0\"\nqueue_depth = 2000000\n",
            "cfg.toml:3:15: queue a: queue_depth: 2000000 is more than the limit",
        ),
        (
            "[queues.a]\nnodes = \"node0\"\nmax_duration = \"1y\"\n",
            "cfg.toml:3:16: queue a: max_duration: \"1y\": unknown unit \"y\"",
        ),
        (
            "[queues.a]\nnodes = \"node0\"\ndefault_duration = \"soon\"\n",
            "queue a: default_duration: \"soon\" is not a duration",
        ),
        (
            "[queues.a]\nnodes = \"node0\"\ndefault_duration = -5\n",
            "queue a: default_duration: \"-5\" is negative",
        ),
        // Below 1 ms a duration would round to 0, which means "unlimited".
        (
            "[queues.a]\nnodes = \"node0\"\nmax_duration = \"0.4ms\"\n",
            "cfg.toml:3:16: queue a: max_duration: \"0.4ms\" is shorter than 1ms",
        ),
        (
            "[queues.a]\nnodes = \"node0\"\nmax_duration = 1e-300\n",
            "queue a: max_duration: \"1e-300\" is shorter than 1ms",
        ),
        (
            "[queues.a]\nnodes = \"node0\"\nmax_duration = true\n",
            "queue a: max_duration: expected seconds",
        ),
        (
            "[queues.a]\nnodes = \"node0\"\ndefault_duration = \"2h\"\nmax_duration = \"1h\"\n",
            "cfg.toml:3:20: queue a: default_duration: 2h is longer than max_duration (1h)",
        ),
        (
            "[queues.a]\nnodes = \"node0\"\ndefault_duration = \"unlimited\"\nmax_duration = \"1h\"\n",
            "queue a: default_duration: unlimited is longer than max_duration",
        ),
        // The default queue.
        (
            "[queues.a]\nnodes = \"node0\"\n[queues.b]\nnodes = \"node1\"\n",
            "default_queue is required when there is more than one queue",
        ),
        (
            "default_queue = \"c\"\n[queues.a]\nnodes = \"node0\"\n",
            "cfg.toml:1:17: default_queue: no queue named \"c\" (queues: a)",
        ),
        // owns: inside the definition, and one owner per node.
        (
            "default_queue = \"a\"\n[queues.a]\nnodes = \"node[0-9]\"\nowns = \"node[8-12]\"\n",
            "cfg.toml:4:8: queue a: owns: node[10-12] not in the queue's definition",
        ),
        (
            "default_queue = \"a\"\n[queues.a]\nnodes = \"node[0-9]\"\nowns = \"node[0-99999]\"\n",
            "cfg.toml:4:8: queue a: owns: node[128-99999] not in the cluster",
        ),
        (
            "default_queue = \"a\"\n[queues.a]\nnodes = \"node[0-9]\"\nowns = \"node[6-7]\"\n\
             [queues.b]\nnodes = \"node[6-20]\"\nowns = \"node[7-8]\"\n",
            "cfg.toml:7:8: queue b: owns: node7 already owned by queue a; a node has one owner",
        ),
        // The cluster.
        (
            "[cluster]\n[queues.a]\nnodes = \"node0\"\n",
            "cfg.toml:1:1: [cluster]: give spec = \"FILE\" or [cluster.inline]",
        ),
        (
            "[cluster]\nspec = \"x.toml\"\n[cluster.inline]\nname = \"x\"\n[queues.a]\nnodes = \"node0\"\n",
            "not both",
        ),
        (
            "[cluster.inline]\n[[cluster.inline.nodes]]\nhosts = \"n0\"\n[queues.a]\nnodes = \"n0\"\n",
            "cfg.toml:1:1: [cluster.inline]: ",
        ),
        (
            "[cluster]\nsize = 4\n[queues.a]\nnodes = \"node0\"\n",
            "cfg.toml:2:1: unknown field `size`",
        ),
    ];
    for (text, expected) in cases {
        let e = error(text);
        assert!(
            e.contains(expected),
            "config:\n{text}\nexpected {expected:?} in:\n{e}"
        );
    }
}

#[test]
fn definitions_overlap_started_or_not() {
    let c = parse(
        "default_queue = \"a\"\n[queues.a]\nnodes = \"node[0-9]\"\n\
         [queues.b]\nnodes = \"node[0-20]\"\nstarted = false\n",
    )
    .expect("valid");
    assert_eq!(c.queues.len(), 2);
    // Two started queues over node[6-9]: a owns them (first by name), unless b's `owns`
    // names some.
    let c = parse(
        "default_queue = \"a\"\n[queues.a]\nnodes = \"node[0-9]\"\n\
         [queues.b]\nnodes = \"node[6-20]\"\nowns = \"node[8-9]\"\n",
    )
    .expect("valid");
    let b = c.queue("b").expect("b");
    assert!(b.started);
    assert_eq!(b.owns, [8, 9]);
    let owners = crate::ownership::assign_owners(&c);
    assert_eq!(owners[6], Some(0));
    assert_eq!(owners[8], Some(1));
    assert_eq!(owners[20], Some(1));
}

#[test]
fn durations() {
    let ms = |v: toml::Value| duration_ms(&v);
    let s = |t: &str| ms(toml::Value::String(t.into()));
    assert_eq!(ms(toml::Value::Integer(90)), Ok(90_000));
    assert_eq!(ms(toml::Value::Float(1.5)), Ok(1_500));
    assert_eq!(s("90s"), Ok(90_000));
    assert_eq!(s("30m"), Ok(1_800_000));
    assert_eq!(s("1.5h"), Ok(5_400_000));
    assert_eq!(s("2d"), Ok(172_800_000));
    assert_eq!(s("250ms"), Ok(250));
    assert_eq!(s("3600"), Ok(3_600_000));
    assert_eq!(s("0"), Ok(0));
    assert_eq!(s("unlimited"), Ok(0));
    assert_eq!(s("inf"), Ok(0));
    assert!(s("0.4ms").is_err());
    assert!(ms(toml::Value::Float(1e-300)).is_err());
    assert!(s("").is_err());
    assert!(s("h").is_err());
    assert!(s("-1h").is_err());
    assert!(s("1e400").is_err());
    assert!(s("2w").is_err());
    assert!(ms(toml::Value::Float(f64::NAN)).is_err());
    assert!(ms(toml::Value::Integer(i64::MAX)).is_err());
}

#[test]
fn the_load_allowlist_is_a_cluster_setting() {
    let q = "[queues.a]\nnodes = \"node0\"\n";
    let default = parse(q).expect("valid");
    assert_eq!(
        default.cluster.load_allowlist,
        ["cluster", "rack", "node", "core", "gpu", "memory"]
    );
    let sockets = parse(&format!(
        "[cluster]\nload_allowlist = [\"node\", \"socket\", \"core\", \"node\"]\n{q}"
    ))
    .expect("valid: the default cluster with sockets loaded");
    assert_eq!(sockets.cluster.load_allowlist, ["node", "socket", "core"]);
    assert_eq!(sockets.cluster.nodes, default.cluster.nodes);

    for (list, expected) in [
        (
            "[\"core\"]",
            "cfg.toml:2:18: [cluster] load_allowlist: must include \"node\"",
        ),
        ("[\"node\", \"\"]", "\"\" is not a resource type name"),
        ("[\"node\", \"a b\"]", "\"a b\" is not a resource type name"),
    ] {
        let e = error(&format!("[cluster]\nload_allowlist = {list}\n{q}"));
        assert!(e.contains(expected), "{list}: {e}");
    }
    let many: Vec<String> = (0..=LOAD_ALLOWLIST_TYPES_MAX)
        .map(|i| format!("\"t{i}\""))
        .collect();
    let e = error(&format!(
        "[cluster]\nload_allowlist = [\"node\", {}]\n{q}",
        many.join(", ")
    ));
    assert!(e.contains("more than the limit of 32"), "{e}");
}

#[test]
fn history_days_has_a_default_and_a_range() {
    let queue = "[queues.q]\nnodes = \"cn[0-7]\"\n";
    let c = parse(&format!("{INLINE_CLUSTER}{queue}")).expect("config");
    assert_eq!(c.history_days, 90);
    let c = parse(&format!("history_days = 7\n{INLINE_CLUSTER}{queue}")).expect("config");
    assert_eq!(c.history_days, 7);
    let e = error(&format!("history_days = 0\n{INLINE_CLUSTER}{queue}"));
    assert!(e.contains("history_days = 0: must be 1..=36500"), "{e}");
}

#[test]
fn array_elements_max_has_a_default_and_a_range() {
    let queue = "[queues.q]\nnodes = \"cn[0-7]\"\n";
    let c = parse(&format!("{INLINE_CLUSTER}{queue}")).expect("config");
    assert_eq!(c.array_elements_max, 100_000);
    let c = parse(&format!("array_elements_max = 50\n{INLINE_CLUSTER}{queue}")).expect("config");
    assert_eq!(c.array_elements_max, 50);
    let e = error(&format!("array_elements_max = 0\n{INLINE_CLUSTER}{queue}"));
    assert!(
        e.contains("array_elements_max = 0: must be 1..=1000000"),
        "{e}"
    );
}

#[test]
fn fairshare_is_off_without_its_section_and_reads_its_durations_and_weights() {
    let base = format!("{INLINE_CLUSTER}\n[queues.batch]\nnodes = \"cn[0-7]\"\n");
    assert_eq!(parse(&base).expect("config").fairshare, None);
    let on = parse(&format!(
        "{base}\n[fairshare]\nhalf_life = \"2d\"\nweight = 500\n"
    ))
    .expect("config")
    .fairshare
    .expect("on");
    assert_eq!(on.half_life_ms, 2 * 24 * 3_600_000);
    assert_eq!(on.weights.weight, 500);
    assert_eq!(on.weights.urgency_weight, FAIRSHARE_URGENCY_WEIGHT_DEFAULT);
    let defaults = parse(&format!("{base}\n[fairshare]\n"))
        .expect("config")
        .fairshare
        .expect("on");
    assert_eq!(defaults.half_life_ms, FAIRSHARE_HALF_LIFE_DEFAULT_MS);
    let e = error(&format!("{base}\n[fairshare]\nhalf_life = \"0\"\n"));
    assert!(e.contains("[fairshare]: half_life"), "{e}");
    let e = error(&format!("{base}\n[fairshare]\nweight = 2000000000000000\n"));
    assert!(e.contains("[fairshare]") && e.contains("weight"), "{e}");
    let e = error(&format!("{base}\n[fairshare]\nhalflife = \"1d\"\n"));
    assert!(e.contains("halflife"), "unknown keys are errors: {e}");
}
