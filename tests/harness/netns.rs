//! Tests that need root: a skip with a printed reason when they cannot run (a failure under
//! `SHARDSCHED_REQUIRE_PRIVILEGED=1`, as `.ci/run` sets), and a system spread over network
//! namespaces ([`NetCluster`]): the coordinator and the shards in one, each node's agent in
//! one of its own, every namespace joined by a veth pair to a bridge in a hub namespace, on
//! 198.18.0.0/15 (for benchmarks, never routed). Nothing is made outside those namespaces
//! but the state directory and the agents' cgroups; both go at the end, and namespaces a
//! killed test left are swept at the start.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Signal, kill_process};
use shardsched_proto::StateDir;

use super::{EXE, System, UP_TIMEOUT, alive, pid};

/// The environment variable that turns a privileged test's skip into a failure.
pub const REQUIRE_PRIVILEGED: &str = "SHARDSCHED_REQUIRE_PRIVILEGED";
/// Every namespace a test makes starts so, then the test's pid.
const NETNS_PREFIX: &str = "sstest";
/// The head namespace's address (coordinator and shards).
pub const HEAD_ADDRESS: &str = "198.18.0.1";

/// Whether this test can run as root with namespaces; if not, says why and returns false,
/// or fails under [`REQUIRE_PRIVILEGED`].
pub fn privileged(test: &str) -> bool {
    let why = if rustix::process::geteuid().is_root() {
        ["ip", "nsenter", "unshare"]
            .into_iter()
            .find(|p| which(p).is_none())
            .map(|missing| format!("needs `{missing}`"))
    } else {
        Some("needs root".to_owned())
    };
    let Some(why) = why else { return true };
    let message = format!("skipped {test}: {why}/namespaces");
    assert!(
        std::env::var(REQUIRE_PRIVILEGED).as_deref() != Ok("1"),
        "{message}, and {REQUIRE_PRIVILEGED}=1"
    );
    eprintln!("{message}");
    false
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| Path::new(dir).join(program))
        .find(|p| p.exists())
}

/// Runs `ip ARGS`, panicking with its stderr on failure.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Removes the namespaces of earlier tests whose process is gone.
fn sweep() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        let Some(rest) = name.strip_prefix(NETNS_PREFIX) else {
            continue;
        };
        let owner: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if owner.parse::<u32>().is_ok_and(|p| !alive(p)) {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}

/// How [`NetCluster::start_with`] starts the agents.
#[derive(Clone, Debug, Default)]
pub struct AgentSetup {
    /// A command each agent runs under (one that ends by running its arguments).
    pub prefix: Vec<String>,
    /// Without `--allow-root`: root's jobs (uid 0) are refused.
    pub refuse_root: bool,
}

impl AgentSetup {
    /// Agents in a private mount namespace where `passwd` and `group` are the user and
    /// group databases (bind-mounted over `/etc`'s: the host's files are left alone).
    pub fn with_users(passwd: &Path, group: &Path) -> AgentSetup {
        let script = format!(
            "mount --bind {} /etc/passwd && mount --bind {} /etc/group && exec \"$@\"",
            passwd.display(),
            group.display()
        );
        AgentSetup {
            prefix: ["unshare", "--mount", "--propagation", "private", "sh", "-c"]
                .iter()
                .map(|s| (*s).to_owned())
                .chain([script, "sh".to_owned()])
                .collect(),
            refuse_root: true,
        }
    }
}

/// The system of [`NetCluster::start`]: a coordinator and one shard (queue `alpha`) in the
/// head namespace, an agent per node in its own.
pub struct NetCluster {
    /// Commands run in the head namespace: `sys.cli` reaches the coordinator from there.
    pub sys: System,
    /// The hub namespace (the bridge; the nodes' link ends are named after them).
    pub hub: String,
    /// Each node's namespace and its agent, by node.
    pub nodes: Vec<(String, String, Option<Child>)>,
    namespaces: Vec<String>,
    others: Vec<Child>,
    cgroups: Option<PathBuf>,
}

impl NetCluster {
    /// Makes the namespaces and starts the system on `nodes` with `config` (which must give
    /// queue `alpha` those nodes and `[agents]`); the agents run root's jobs.
    pub fn start(name: &str, config: &str, nodes: &[&str]) -> NetCluster {
        NetCluster::start_with(name, config, nodes, &AgentSetup::default())
    }

    /// As [`NetCluster::start`], the agents started as `setup` says.
    pub fn start_with(name: &str, config: &str, nodes: &[&str], setup: &AgentSetup) -> NetCluster {
        sweep();
        // The test process's pid (what the sweep goes by), and which of its clusters.
        static CLUSTERS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let nth = CLUSTERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let me = format!("{}c{nth}", std::process::id());
        let ns = |what: &str| format!("{NETNS_PREFIX}{me}{what}");
        let hub = ns("hub");
        let head = ns("head");
        let sys = System::without_up(name, config, Some(head.clone()));
        let mut cluster = NetCluster {
            sys,
            hub: hub.clone(),
            nodes: Vec::new(),
            namespaces: Vec::new(),
            others: Vec::new(),
            cgroups: shardsched_node::cgroup::unified_mount()
                .map(|m| m.join("shardsched").join(format!("netns-test-{me}"))),
        };
        cluster.add_netns(&hub);
        ip(&["-n", &hub, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &hub, "link", "set", "br0", "up"]);
        cluster.join(&head, "head", HEAD_ADDRESS);
        for (i, node) in nodes.iter().enumerate() {
            let netns = ns(&format!("n{i}"));
            cluster.join(&netns, node, &format!("198.18.0.{}", 10 + i));
            cluster.nodes.push((node.to_string(), netns, None));
        }
        cluster.start_processes(&head, setup);
        cluster
    }

    fn add_netns(&mut self, name: &str) {
        ip(&["netns", "add", name]);
        self.namespaces.push(name.to_owned());
        ip(&["-n", name, "link", "set", "lo", "up"]);
    }

    /// Makes namespace `netns` with address `address`, linked to the bridge by a veth pair
    /// whose hub end is named `link`.
    fn join(&mut self, netns: &str, link: &str, address: &str) {
        self.add_netns(netns);
        let hub = self.hub.clone();
        ip(&[
            "-n", &hub, "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", netns,
        ]);
        ip(&["-n", &hub, "link", "set", link, "master", "br0"]);
        ip(&["-n", &hub, "link", "set", link, "up"]);
        ip(&[
            "-n",
            netns,
            "addr",
            "add",
            &format!("{address}/15"),
            "dev",
            "eth0",
        ]);
        ip(&["-n", netns, "link", "set", "eth0", "up"]);
    }

    /// Cuts (`up` false) or heals node `node`'s link to the bridge.
    pub fn set_link(&self, node: &str, up: bool) {
        let state = if up { "up" } else { "down" };
        ip(&["-n", &self.hub, "link", "set", node, state]);
    }

    /// Node `node`'s agent's pid.
    pub fn agent_pid(&self, node: &str) -> u32 {
        self.nodes
            .iter()
            .find(|(n, _, _)| n == node)
            .and_then(|(_, _, c)| c.as_ref())
            .map(Child::id)
            .expect("the node's agent")
    }

    fn spawn(&self, netns: &str, log: &str, args: &[String]) -> Child {
        self.spawn_under(netns, &[], log, args)
    }

    /// Runs `shardsched ARGS` in `netns`, under `prefix` (a command that ends by running
    /// its arguments).
    fn spawn_under(&self, netns: &str, prefix: &[String], log: &str, args: &[String]) -> Child {
        let logs = self.sys.layout().logs_dir();
        std::fs::create_dir_all(&logs).expect("logs dir");
        let out = std::fs::File::create(logs.join(format!("{log}.log"))).expect("log file");
        // nsenter, not `ip netns exec`, which mounts a sysfs of its own over /sys and so
        // hides the cgroup hierarchies from the agents.
        Command::new("nsenter")
            .arg(format!("--net=/run/netns/{netns}"))
            .args(prefix)
            .arg(EXE)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log file"))
            .stderr(out)
            .spawn()
            .expect("spawn")
    }

    fn start_processes(&mut self, head: &str, setup: &AgentSetup) {
        let layout = self.sys.layout();
        let s = |p: PathBuf| p.to_string_lossy().into_owned();
        let coordinator = self.spawn(
            head,
            "coordinator",
            &[
                "coordinator".into(),
                "--listen".into(),
                format!("{HEAD_ADDRESS}:0"),
                "--state-dir".into(),
                s(layout.coordinator_dir()),
                "--config".into(),
                s(self.sys.config_file()),
                "--agents".into(),
            ],
        );
        self.others.push(coordinator);
        let deadline = Instant::now() + UP_TIMEOUT;
        while layout.coordinator_address().is_err() {
            assert!(
                Instant::now() < deadline,
                "the coordinator wrote no address"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let address = layout.coordinator_address().expect("address").to_string();
        let me = String::from_utf8_lossy(
            &Command::new("id")
                .arg("-un")
                .output()
                .expect("id -un")
                .stdout,
        )
        .trim()
        .to_owned();
        self.issue("admin", &me, &layout.client_dir());
        // As `up` makes it: a job run as its user reaches its directory under its node's.
        std::fs::create_dir_all(layout.nodes_dir()).expect("nodes dir");
        std::fs::set_permissions(
            layout.nodes_dir(),
            std::os::unix::fs::PermissionsExt::from_mode(0o711),
        )
        .expect("nodes dir mode");
        self.issue("shard", "alpha", &layout.shard_dir("alpha"));
        for i in 0..self.nodes.len() {
            let node = self.nodes[i].0.clone();
            let netns = self.nodes[i].1.clone();
            let dir = layout.node_dir(&node);
            self.issue("node", &node, &dir);
            let mut args = vec![
                "node".into(),
                "--name".into(),
                node.clone(),
                "--coordinator".into(),
                address.clone(),
                "--state-dir".into(),
                s(dir),
                "--listen".into(),
                format!("198.18.0.{}:0", 10 + i),
            ];
            if !setup.refuse_root {
                args.push("--allow-root".into());
            }
            if let Some(cgroups) = &self.cgroups {
                args.extend(["--cgroup-root".into(), s(cgroups.join(&node))]);
            }
            let log = format!("node-{node}");
            self.nodes[i].2 = Some(self.spawn_under(&netns, &setup.prefix, &log, &args));
        }
        let shard = self.spawn(
            head,
            "shard-alpha",
            &[
                "shard".into(),
                "--queue".into(),
                "alpha".into(),
                "--coordinator".into(),
                address,
                "--state-dir".into(),
                s(layout.shard_dir("alpha")),
                "--listen".into(),
                format!("{HEAD_ADDRESS}:0"),
                "--executor".into(),
                "agents".into(),
            ],
        );
        self.others.push(shard);
    }

    fn issue(&self, role: &str, name: &str, out: &Path) {
        super::issue_cert(&self.sys.layout().coordinator_dir(), role, name, out);
    }
}

impl Drop for NetCluster {
    fn drop(&mut self) {
        let mut children: Vec<Child> = self.nodes.iter_mut().filter_map(|n| n.2.take()).collect();
        children.append(&mut self.others);
        for child in &children {
            let _ = kill_process(pid(child.id()), Signal::TERM);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        for child in &mut children {
            while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        // What the agents' jobs left (a failed test's), then their cgroups.
        if let Some(root) = &self.cgroups {
            let _ = std::fs::write(root.join("cgroup.kill"), "1");
            remove_cgroups(root);
        }
        for netns in self.namespaces.iter().rev() {
            let _ = Command::new("ip").args(["netns", "del", netns]).status();
        }
    }
}

/// Removes a cgroup directory and those under it, deepest first (best effort).
pub fn remove_cgroups(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroups(&entry.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

impl System {
    /// A system whose processes the test starts itself (no `up`), in a fresh directory with
    /// `config`; its commands run in network namespace `netns` when given.
    pub fn without_up(name: &str, config: &str, netns: Option<String>) -> System {
        let dir = std::env::temp_dir().join(format!(
            "shardsched-{name}-{}-{}",
            std::process::id(),
            super::now_ms()
        ));
        std::fs::create_dir_all(&dir).expect("test dir");
        std::fs::write(dir.join("config.toml"), config).expect("config");
        let _ = StateDir::at(dir.join("state"));
        System {
            up: None,
            dir,
            netns,
        }
    }
}
