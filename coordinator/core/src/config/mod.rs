//! The coordinator's configuration: the cluster and its queues (docs/CONFIG.md).
//!
//! ```toml
//! default_queue = "batch"
//! [cluster]
//! spec = "cluster.toml"          # relative to this file; or [cluster.inline]; or no [cluster]
//! [queues.batch]
//! nodes = "node[0-111]"          # the definition as a hostlist, and/or
//! # requires = ["ssd"]           # nodes having all these properties
//! policy = "easy"
//! max_duration = "24h"
//! ```
//!
//! Top-level keys beside `default_queue`: `array_elements_max` (most elements of a job
//! array, 100,000 by default) and `history_days` (how long the job history keeps a
//! finished job, [`HISTORY_DAYS_DEFAULT`] by default).
//!
//! [`Config::parse`] reads the text (unknown keys are errors, pointing at `file:line:column`),
//! loads the cluster spec, resolves every definition to node indices and checks the whole:
//! queue names are valid shard names, definitions are non-empty and inside the cluster, the
//! default queue exists, and each queue's optional `owns` lies inside its definition, with
//! no node named by two queues' `owns`. Definitions may overlap, started queues' too: a
//! definition is what a queue *may* own, and an overlap is what lets a node move between
//! two running queues.
//!
//! The result is plain data. Nothing here decides ownership: that is
//! [`crate::ownership`], from this data.

mod raw;
#[cfg(test)]
mod tests;
pub(crate) mod values;

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;

use shardsched_resource::{DEFAULT_CLUSTER_TOML, ReadError, SCHEDULER_TYPES};

use crate::QUEUES_MAX;

pub use raw::LOAD_ALLOWLIST_TYPES_MAX;
/// The policies are the wire's: a shard gets them typed in its `QueueConfig`.
pub use shardsched_wire::msg::{MatchPolicy, QueuePolicy};
pub use values::{DEPTH_MAX, duration_ms};

/// The embedded default configuration: the 128-node default cluster, `batch` (node[0-111],
/// easy, started), `debug` (node[96-127], fcfs, 30 minutes at most, started; it owns
/// node[112-127] and may take node[96-111] from batch by a move) and `standby` (batch's
/// nodes, stopped).
pub const DEFAULT_CONFIG_TOML: &str = r#"# shardsched's default coordinator configuration (docs/CONFIG.md).
# No [cluster] table: the embedded 128-node default cluster (node0..node127).
default_queue = "batch"

[queues.batch]
nodes = "node[0-111]"
policy = "easy"
match_policy = "first"
queue_depth = 32
default_duration = "1h"
max_duration = "24h"

# Overlaps batch on node[96-111]: batch owns those (first in name order) and debug owns
# node[112-127]; `queue move node[96-99] --from batch --to debug` moves some while both run.
[queues.debug]
nodes = "node[96-127]"
policy = "fcfs"
match_policy = "first"
default_duration = "10m"
max_duration = "30m"

# Defined over batch's nodes and stopped: it owns nothing until it is started with --take.
[queues.standby]
nodes = "node[0-111]"
policy = "easy"
match_policy = "first"
default_duration = "1h"
max_duration = "24h"
started = false
"#;

/// Name shown in errors for the embedded default configuration.
pub const DEFAULT_CONFIG_ORIGIN: &str = "<embedded default config>";

/// A validated configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Where it came from (a path, or [`DEFAULT_CONFIG_ORIGIN`]), for messages.
    pub origin: String,
    /// The cluster.
    pub cluster: Cluster,
    /// The queue a submit without `-q` goes to. Always set when there is more than one
    /// queue; with one queue, that queue.
    pub default_queue: String,
    /// The queues, sorted by name.
    pub queues: Vec<QueueDef>,
    /// Most elements a job array may have, and the bound on its indices (every shard gets
    /// it in its `QueueConfig`).
    pub array_elements_max: u32,
    /// Days the job history keeps a finished job (`history_days`, 1 to
    /// [`HISTORY_DAYS_MAX`]).
    pub history_days: u32,
    /// `[http] listen`: where the status page and `/metrics` are served, unless
    /// `--http-listen` says otherwise (read at start; docs/OPERATIONS.md).
    pub http_listen: Option<std::net::SocketAddr>,
    /// How the coordinator watches node agents (`[agents]`).
    pub agents: AgentsConfig,
    /// `[limits]` (docs/POLICIES.md, "Limits"); `limits set` changes them at run time.
    pub limits: shardsched_wire::msg::quota::LimitTable,
    /// `[fairshare]` (docs/POLICIES.md, "Fair-share"); `None`: fair-share is off.
    pub fairshare: Option<FairShareConfig>,
}

/// `[fairshare]`: how fast usage is forgotten, and what a factor weighs.
///
/// ```toml
/// [fairshare]
/// half_life = "7d"        # usage counts half after this long (one duration parser)
/// weight = 100000         # the priority a factor of 1 adds
/// urgency_weight = 1000   # the priority one step of urgency (0..=31) adds
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FairShareConfig {
    /// Half-life of recorded usage, ms (at least [`FAIRSHARE_HALF_LIFE_MIN_MS`]).
    pub half_life_ms: u64,
    /// The weights every shard computes priorities with.
    pub weights: shardsched_wire::msg::fairshare::FairShareWeights,
}

/// Shortest `[fairshare] half_life`: a second (shorter would decay usage between two
/// reports of the same shard).
pub const FAIRSHARE_HALF_LIFE_MIN_MS: u64 = 1000;
/// `[fairshare] half_life` when absent: 7 days (Slurm's `PriorityDecayHalfLife` default).
pub const FAIRSHARE_HALF_LIFE_DEFAULT_MS: u64 = 7 * 24 * 3600 * 1000;
/// `[fairshare] weight` when absent (flux-accounting's `fshare_weight` default).
pub const FAIRSHARE_WEIGHT_DEFAULT: u64 = 100_000;
/// `[fairshare] urgency_weight` when absent (flux-accounting's `urgency_weight` default).
pub const FAIRSHARE_URGENCY_WEIGHT_DEFAULT: u64 = 1000;

/// `[agents]`: node agents' liveness (docs/CONFIG.md, docs/EXEC.md).
///
/// ```toml
/// [agents]
/// required = true              # every node has an agent: one never heard from is down
/// heartbeat_timeout = "30s"    # an agent silent this long marks its node down
/// return_to_service = false    # a node marked down so comes back up when its agent does
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentsConfig {
    /// Every node has an agent (`up --agents`, a cluster that runs jobs through agents): a
    /// node whose agent has not registered within the timeout of the coordinator's start is
    /// marked down too. Without it, only nodes whose agents registered are watched.
    pub required: bool,
    /// Silence after which a node's agent is taken as unreachable and the node marked
    /// down, ms; agents send heartbeats at a third of it, and kill their tasks after half
    /// of it without word from their shard.
    pub heartbeat_timeout_ms: u64,
    /// A node marked down because its agent was unreachable comes back up on its own when
    /// the agent registers again (Slurm's ReturnToService); otherwise `resource up` does it.
    pub return_to_service: bool,
}

/// `heartbeat_timeout` when `[agents]` names none: 30 s.
pub const HEARTBEAT_TIMEOUT_DEFAULT_MS: u64 = 30_000;
/// The shortest `heartbeat_timeout` accepted: 1 s.
pub const HEARTBEAT_TIMEOUT_MIN_MS: u64 = 1_000;
/// The longest `heartbeat_timeout` accepted: 1 h.
pub const HEARTBEAT_TIMEOUT_MAX_MS: u64 = 3_600_000;

impl Default for AgentsConfig {
    fn default() -> Self {
        AgentsConfig {
            required: false,
            heartbeat_timeout_ms: HEARTBEAT_TIMEOUT_DEFAULT_MS,
            return_to_service: false,
        }
    }
}

impl AgentsConfig {
    /// How often agents send heartbeats, ms: a third of the timeout.
    pub fn heartbeat_interval_ms(&self) -> u64 {
        self.heartbeat_timeout_ms / 3
    }
}

/// Days the job history keeps a finished job unless `history_days` says otherwise.
pub const HISTORY_DAYS_DEFAULT: u32 = 90;
/// Most days `history_days` may say (a hundred years).
pub const HISTORY_DAYS_MAX: u32 = 36_500;

/// The cluster, as the shards will load it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cluster {
    /// The cluster spec text (docs/CLUSTER_SPEC.md) handed to every shard.
    pub spec_toml: String,
    /// The resource types the shards load from it, as Fluxion's `load-allowlist`
    /// (`[cluster] load_allowlist`; default [`SCHEDULER_TYPES`]): RFC 25 jobspecs
    /// (`node -> slot -> core`, what `submit -N -n -c` builds) name no sockets, and only
    /// match whole nodes' cores on a graph without them.
    pub load_allowlist: Vec<String>,
    /// Its nodes in graph (rank) order; a node's index here is its id everywhere in this
    /// crate.
    pub nodes: Vec<ClusterNode>,
}

/// One node of the cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterNode {
    /// Host name, e.g. `node17`.
    pub name: String,
    /// Its properties (`ssd`, `bigmem`, …).
    pub properties: BTreeSet<String>,
}

/// One queue's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueDef {
    /// Queue name, also its shard's certificate name.
    pub name: String,
    /// Queue policy.
    pub policy: QueuePolicy,
    /// Match policy.
    pub match_policy: MatchPolicy,
    /// Pending jobs considered per cycle (0: all).
    pub queue_depth: u32,
    /// Reservations made by `hybrid` (0: all considered).
    pub reservation_depth: u32,
    /// Duration of a job that names none, in milliseconds (0: unlimited).
    pub default_duration_ms: u64,
    /// Longest duration accepted, in milliseconds (0: no maximum).
    pub max_duration_ms: u64,
    /// The nodes the queue may own: indices into [`Cluster::nodes`], ascending, not empty.
    pub definition: Vec<usize>,
    /// The nodes it owns at first start, whatever other queues define them (`owns`):
    /// ascending, inside `definition`, named by no other queue's `owns`. Empty: none named,
    /// the rules of [`crate::ownership`] decide.
    pub owns: Vec<usize>,
    /// Scheduling when the coordinator starts.
    pub started: bool,
    /// Accepting submissions when the coordinator starts.
    pub enabled: bool,
}

/// Why a configuration was refused. The message names the file, and the line and column or
/// the queue and key at fault.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{}: {error}", .path.display())]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// Why (in the message, so not also a `source`).
        error: std::io::Error,
    },
    /// The configuration is malformed or inconsistent.
    #[error("{origin}:{}{message}", Place(*.at))]
    Invalid {
        /// The file (or [`DEFAULT_CONFIG_ORIGIN`]).
        origin: String,
        /// 1-based line and column, when known.
        at: Option<(usize, usize)>,
        /// What is wrong, starting with the queue and key when it is about one.
        message: String,
    },
    /// The cluster spec file could not be read or built.
    #[error("{origin}: cluster spec: {error}")]
    Cluster {
        /// The configuration file naming the spec.
        origin: String,
        /// The spec reader's error (it names the spec file and place).
        error: ReadError,
    },
}

struct Place(Option<(usize, usize)>);

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some((line, column)) => write!(f, "{line}:{column}: "),
            None => f.write_str(" "),
        }
    }
}

impl Config {
    /// Reads and validates the configuration file at `path`; a relative `[cluster] spec` is
    /// read relative to the file's directory.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Io {
            path: path.to_owned(),
            error,
        })?;
        let base = path.parent().unwrap_or_else(|| Path::new("."));
        Config::parse(&text, &path.display().to_string(), base)
    }

    /// Parses and validates configuration `text`. `origin` names it in errors; `base_dir`
    /// is where a relative `[cluster] spec` path is read from.
    pub fn parse(text: &str, origin: &str, base_dir: &Path) -> Result<Config, ConfigError> {
        raw::parse(text, origin, base_dir)
    }

    /// The embedded default ([`DEFAULT_CONFIG_TOML`]).
    pub fn embedded_default() -> Result<Config, ConfigError> {
        Config::parse(DEFAULT_CONFIG_TOML, DEFAULT_CONFIG_ORIGIN, Path::new("."))
    }

    /// The queue named `name`.
    pub fn queue(&self, name: &str) -> Option<&QueueDef> {
        self.queues.iter().find(|q| q.name == name)
    }

    /// The names of the nodes at `indices`.
    pub fn node_names(&self, indices: &[usize]) -> Vec<String> {
        indices
            .iter()
            .filter_map(|&i| self.cluster.nodes.get(i))
            .map(|n| n.name.clone())
            .collect()
    }
}

impl Cluster {
    /// The embedded default cluster (resource's `DEFAULT_CLUSTER_TOML`).
    pub fn embedded_default() -> Result<Cluster, ReadError> {
        Cluster::from_spec(DEFAULT_CLUSTER_TOML.to_owned())
    }

    /// Builds the cluster from spec text (which it keeps, to hand to shards): its nodes
    /// only, no vertex below them (the coordinator's view is node-level).
    pub fn from_spec(spec_toml: String) -> Result<Cluster, ReadError> {
        let spec = shardsched_resource::CheckedSpec::read(&spec_toml)?;
        let nodes = spec
            .hosts()
            .map(|(host, class)| ClusterNode {
                name: host.to_owned(),
                properties: class.properties.iter().cloned().collect(),
            })
            .collect();
        Ok(Cluster {
            spec_toml,
            nodes,
            load_allowlist: SCHEDULER_TYPES.iter().map(|&t| t.to_owned()).collect(),
        })
    }
}

/// Checks the invariants [`Config`] promises, for configurations built in code (tests,
/// property tests, run-time changes): names, definitions inside the cluster, the default
/// queue, and `owns` inside each definition and named by one queue at most.
pub fn check(config: &Config) -> Result<(), String> {
    if config.queues.is_empty() {
        return Err("no queues".into());
    }
    if config.queues.len() > QUEUES_MAX {
        return Err(format!("more than {QUEUES_MAX} queues"));
    }
    let mut owner: Vec<Option<&str>> = vec![None; config.cluster.nodes.len()];
    for q in &config.queues {
        shardsched_wire::identity::check_name(&q.name).map_err(|e| e.to_string())?;
        if q.definition.is_empty() {
            return Err(format!("queue {}: empty definition", q.name));
        }
        if let Some(&n) = q.definition.iter().find(|&&n| n >= owner.len()) {
            return Err(format!(
                "queue {}: node index {n} outside the cluster",
                q.name
            ));
        }
        for &n in &q.owns {
            if q.definition.binary_search(&n).is_err() {
                return Err(format!(
                    "queue {}: owns {}, which is not in its definition",
                    q.name,
                    config.node_names(&[n]).join("")
                ));
            }
            if let Some(other) = owner[n] {
                return Err(format!(
                    "queues {other} and {} both own {}",
                    q.name,
                    config.node_names(&[n]).join("")
                ));
            }
            owner[n] = Some(&q.name);
        }
    }
    if config.queue(&config.default_queue).is_none() {
        return Err(format!(
            "default queue {} is not a queue",
            config.default_queue
        ));
    }
    Ok(())
}
