//! The metrics each process exports, every series prefixed `shardsched_` (docs/OPERATIONS.md
//! lists them all). Two kinds:
//!
//! - **counters, gauges and histograms the driver updates** at the few points where the
//!   event happens (a request answered, a connection opened, a journal commit, a scheduling
//!   pass): cheap atomic updates, no lock held across anything;
//! - **gauges read from views**: the coordinator's jobs, nodes and moves are not counted a
//!   second time beside the core that owns them; they are set from the core's own views
//!   (the replies of `queue list`, `resource list` and `queue moves`) just before each
//!   exposition ([`CoordinatorMetrics::observe`]), so they can never drift from it.
//!
//! The registry and the text format are `prometheus-client`'s (the Prometheus project's
//! client): a scrape gets OpenMetrics text, which Prometheus reads.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use shardsched_wire::identity::Role;
use shardsched_wire::msg::RefusalCode;

use crate::status::ClusterStatus;

mod labels;
mod sample;

use labels::BuildLabels;
pub use labels::{
    KindLabels, PeerLabels, QueueLabels, QueueStateLabels, RefusalLabels, StateLabels, StepLabels,
};
pub use sample::sample;

/// How stale the coordinator's job gauges may be: they are read from the shards' latest
/// status reports at each scrape, and a shard reports a change within its
/// `STATUS_INTERVAL_MIN` and sends a heartbeat every `STATUS_INTERVAL_MAX`, both at most
/// this (tests/system/metrics.rs checks them against it).
pub const VIEW_STALENESS_MAX: Duration = Duration::from_secs(5);
/// Every series' name starts with this (and `_`).
pub const METRIC_PREFIX: &str = "shardsched";
/// The smallest latency bucket's upper bound, in seconds (50 µs).
pub const LATENCY_BUCKET_FIRST_SECONDS: f64 = 0.000_05;
/// Each latency bucket's bound is this many times the one before.
pub const LATENCY_BUCKET_FACTOR: f64 = 2.5;
/// Latency buckets: from 50 µs up to about 47 s.
pub const LATENCY_BUCKETS: u16 = 16;
/// The smallest move-step bucket's bound, in seconds: a step of an idle node takes
/// milliseconds, a busy node's waits for its jobs (minutes to days).
pub const MOVE_STEP_BUCKET_FIRST_SECONDS: f64 = 0.01;
/// Each move-step bucket's bound is this many times the one before.
pub const MOVE_STEP_BUCKET_FACTOR: f64 = 4.0;
/// Move-step buckets: from 10 ms up to about 12 days.
pub const MOVE_STEP_BUCKETS: u16 = 14;

/// What every process exports: its connections, requests, refusals and journal.
#[derive(Clone, Debug)]
pub struct ProcessMetrics {
    /// QUIC connections open now, by the peer's role.
    pub connections: Family<PeerLabels, Gauge>,
    /// Requests answered, by kind.
    pub requests: Family<KindLabels, Counter>,
    /// Requests refused, by kind and refusal code.
    pub refusals: Family<RefusalLabels, Counter>,
    /// From handing a batch of records to the journal until it is durable.
    pub journal_commit: Histogram,
    /// redb's commit of one transaction (its fsyncs).
    pub journal_fsync: Histogram,
}

/// The coordinator's series: its own, and what every process exports.
#[derive(Clone, Debug)]
pub struct CoordinatorMetrics {
    /// What every process exports.
    pub process: ProcessMetrics,
    /// Jobs by queue and state, as the shards last reported them.
    pub jobs: Family<QueueStateLabels, Gauge>,
    /// Nodes by owning queue and state.
    pub nodes: Family<QueueStateLabels, Gauge>,
    /// 1 when the queue's shard is registered, else 0.
    pub queue_online: Family<QueueLabels, Gauge>,
    /// Moves not finished.
    pub moves_in_flight: Gauge,
    /// Nodes of unfinished moves, by their step.
    pub move_nodes: Family<StepLabels, Gauge>,
    /// How long each step of a node's move took: `release` from the request to the donor's
    /// release, `acquire` from the release to the recipient's acknowledgement.
    pub move_step: Family<StepLabels, Histogram>,
}

/// A shard's series: its own, and what every process exports; all carry the label `queue`.
/// (Its submits and their refusals by reason are [`ProcessMetrics`]' requests and refusals
/// of kind `client_shard.submit`.)
#[derive(Clone, Debug)]
pub struct ShardMetrics {
    /// What every process exports.
    pub process: ProcessMetrics,
    /// Jobs by state: `pending` (the queue's depth), `running`.
    pub jobs: Family<StateLabels, Gauge>,
    /// Pending jobs that cannot run on what the queue has up now: they wait for nodes.
    pub jobs_blocked: Gauge,
    /// One match (allocate, or reserve) of one job.
    pub match_time: Histogram,
    /// One scheduling pass of the queue manager over the pending jobs.
    pub schedule_cycle: Histogram,
}

/// A process's metrics registry and its exposition.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
}

impl Metrics {
    /// The registry of the coordinator.
    pub fn coordinator() -> (Metrics, CoordinatorMetrics) {
        let mut registry = Registry::with_prefix(METRIC_PREFIX);
        let process = ProcessMetrics::register(&mut registry);
        let mut metrics = Metrics { registry };
        let coordinator = CoordinatorMetrics {
            process,
            jobs: Family::default(),
            nodes: Family::default(),
            queue_online: Family::default(),
            moves_in_flight: Gauge::default(),
            move_nodes: Family::default(),
            move_step: Family::new_with_constructor(move_step_histogram),
        };
        let r = &mut metrics.registry;
        r.register(
            "jobs",
            "Jobs by queue and state, as the shards last reported them",
            coordinator.jobs.clone(),
        );
        r.register(
            "nodes",
            "Nodes by owning queue (empty: none) and state",
            coordinator.nodes.clone(),
        );
        r.register(
            "queue_online",
            "1 when the queue's shard is registered with the coordinator",
            coordinator.queue_online.clone(),
        );
        r.register(
            "moves_in_flight",
            "Moves not finished",
            coordinator.moves_in_flight.clone(),
        );
        r.register(
            "move_nodes",
            "Nodes of unfinished moves, by step",
            coordinator.move_nodes.clone(),
        );
        r.register_with_unit(
            "move_step",
            "Duration of one node's move step: release (request to the donor's release), \
             acquire (release to the recipient's acknowledgement)",
            Unit::Seconds,
            coordinator.move_step.clone(),
        );
        (metrics, coordinator)
    }

    /// The registry of queue `queue`'s shard: every series carries `queue="<queue>"`.
    pub fn shard(queue: &str) -> (Metrics, ShardMetrics) {
        let labels = [("queue".into(), queue.to_owned().into())];
        let mut registry = Registry::with_prefix_and_labels(METRIC_PREFIX, labels.into_iter());
        let process = ProcessMetrics::register(&mut registry);
        let mut metrics = Metrics { registry };
        let shard = ShardMetrics {
            process,
            jobs: Family::default(),
            jobs_blocked: Gauge::default(),
            match_time: latency_histogram(),
            schedule_cycle: latency_histogram(),
        };
        let r = &mut metrics.registry;
        r.register(
            "jobs",
            "Jobs by state (pending: the queue's depth)",
            shard.jobs.clone(),
        );
        r.register(
            "jobs_blocked",
            "Pending jobs that cannot start now",
            shard.jobs_blocked.clone(),
        );
        r.register_with_unit(
            "match",
            "One match (allocate or reserve) of one job",
            Unit::Seconds,
            shard.match_time.clone(),
        );
        r.register_with_unit(
            "schedule_cycle",
            "One scheduling pass over the pending jobs",
            Unit::Seconds,
            shard.schedule_cycle.clone(),
        );
        (metrics, shard)
    }

    /// The registry as OpenMetrics text (what a scrape of `/metrics` returns).
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail; a label value that does is left out.
        if let Err(e) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            tracing::warn!(error = %e, "encoding metrics");
        }
        text
    }
}

impl ProcessMetrics {
    /// Registers what every process exports in `registry`.
    fn register(registry: &mut Registry) -> ProcessMetrics {
        let process = ProcessMetrics {
            connections: Family::default(),
            requests: Family::default(),
            refusals: Family::default(),
            journal_commit: latency_histogram(),
            journal_fsync: latency_histogram(),
        };
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION").to_owned(),
            })
            .set(1);
        registry.register("build_info", "The binary's version", build);
        registry.register(
            "quic_connections",
            "QUIC connections open, by the peer's role",
            process.connections.clone(),
        );
        registry.register(
            "requests",
            "Requests answered, by kind",
            process.requests.clone(),
        );
        registry.register(
            "refusals",
            "Requests refused, by kind and reason",
            process.refusals.clone(),
        );
        registry.register_with_unit(
            "journal_commit",
            "From handing records to the journal until they are durable",
            Unit::Seconds,
            process.journal_commit.clone(),
        );
        registry.register_with_unit(
            "journal_fsync",
            "The journal's commit of one transaction (its fsyncs)",
            Unit::Seconds,
            process.journal_fsync.clone(),
        );
        process
    }

    /// A connection with a peer of role `role` opened.
    pub fn connected(&self, role: Role) {
        self.connection_gauge(role).inc();
    }

    /// A connection with a peer of role `role` closed.
    pub fn disconnected(&self, role: Role) {
        self.connection_gauge(role).dec();
    }

    fn connection_gauge(&self, role: Role) -> Gauge {
        self.connections.get_or_create_owned(&PeerLabels {
            peer: role.as_str().to_owned(),
        })
    }

    /// One request of `kind` answered; `refused` with its code when it was refused.
    pub fn request(&self, kind: &str, refused: Option<RefusalCode>) {
        self.requests
            .get_or_create(&KindLabels {
                kind: kind.to_owned(),
            })
            .inc();
        if let Some(code) = refused {
            self.refusals
                .get_or_create(&RefusalLabels {
                    kind: kind.to_owned(),
                    reason: refusal_label(code).to_owned(),
                })
                .inc();
        }
    }

    /// A batch of records handed to the journal was durable `until_durable` later.
    pub fn journal_committed(&self, until_durable: Duration) {
        self.journal_commit.observe(until_durable.as_secs_f64());
    }

    /// One journal transaction (a group commit: one or more batches) took `fsync` to
    /// commit; told once per transaction.
    pub fn journal_fsynced(&self, fsync: Duration) {
        self.journal_fsync.observe(fsync.as_secs_f64());
    }
}

impl CoordinatorMetrics {
    /// Sets the gauges read from views to what `status` says: jobs and queues from the
    /// queue list, nodes from the resource list, moves from the move list. Label sets that
    /// are gone (a removed queue) are cleared first, so they disappear rather than stick.
    pub fn observe(&self, status: &ClusterStatus) {
        self.jobs.clear();
        self.queue_online.clear();
        for q in &status.queues {
            for (state, count) in [("pending", q.jobs_pending), ("running", q.jobs_running)] {
                self.jobs
                    .get_or_create(&QueueStateLabels {
                        queue: q.name.clone(),
                        state: state.to_owned(),
                    })
                    .set(i64::from(count));
            }
            self.queue_online
                .get_or_create(&QueueLabels {
                    queue: q.name.clone(),
                })
                .set(i64::from(q.online));
        }
        self.nodes.clear();
        for node in &status.nodes {
            self.nodes
                .get_or_create(&QueueStateLabels {
                    queue: node.queue.clone().unwrap_or_default(),
                    state: crate::status::node_state(node).to_owned(),
                })
                .inc();
        }
        self.move_nodes.clear();
        let active: Vec<_> = status
            .moves
            .iter()
            .filter(|m| m.status == "active")
            .collect();
        self.moves_in_flight
            .set(i64::try_from(active.len()).unwrap_or(i64::MAX));
        for node in active.iter().flat_map(|m| &m.nodes) {
            self.move_nodes
                .get_or_create(&StepLabels {
                    step: node.state.clone(),
                })
                .inc();
        }
    }

    /// One node's move step took `took` (`step`: `release` or `acquire`).
    pub fn move_step_took(&self, step: &str, took: Duration) {
        self.move_step
            .get_or_create(&StepLabels {
                step: step.to_owned(),
            })
            .observe(took.as_secs_f64());
    }
}

impl ShardMetrics {
    /// Sets the job gauges from the core's counts.
    pub fn set_jobs(&self, pending: u64, running: u64, blocked: u64) {
        for (state, count) in [("pending", pending), ("running", running)] {
            self.jobs
                .get_or_create(&StateLabels {
                    state: state.to_owned(),
                })
                .set(i64::try_from(count).unwrap_or(i64::MAX));
        }
        self.jobs_blocked
            .set(i64::try_from(blocked).unwrap_or(i64::MAX));
    }

    /// A scheduling pass that took `took` and made `matches` matches: the pass's time, and
    /// its time shared evenly among its matches as their latency (the core cannot time one
    /// match without a clock, and keeps none).
    pub fn scheduled(&self, took: Duration, matches: u64) {
        self.schedule_cycle.observe(took.as_secs_f64());
        if matches > 0 {
            let each = took.as_secs_f64() / matches as f64;
            for _ in 0..matches {
                self.match_time.observe(each);
            }
        }
    }
}

/// A refusal code as a label value.
pub fn refusal_label(code: RefusalCode) -> &'static str {
    match code {
        RefusalCode::Forbidden => "forbidden",
        RefusalCode::NotFound => "not_found",
        RefusalCode::Invalid => "invalid",
        RefusalCode::Denied => "denied",
        RefusalCode::Unavailable => "unavailable",
        RefusalCode::Stale => "stale",
        RefusalCode::Internal => "internal",
        RefusalCode::Policy => "policy",
    }
}

fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(
        LATENCY_BUCKET_FIRST_SECONDS,
        LATENCY_BUCKET_FACTOR,
        LATENCY_BUCKETS,
    ))
}

fn move_step_histogram() -> Histogram {
    Histogram::new(exponential_buckets(
        MOVE_STEP_BUCKET_FIRST_SECONDS,
        MOVE_STEP_BUCKET_FACTOR,
        MOVE_STEP_BUCKETS,
    ))
}

impl Default for ShardMetrics {
    /// Handles in no registry: what a shard driven by a test updates.
    fn default() -> ShardMetrics {
        Metrics::shard("").1
    }
}

impl Default for CoordinatorMetrics {
    /// Handles in no registry: what a coordinator driven by a test updates.
    fn default() -> CoordinatorMetrics {
        Metrics::coordinator().1
    }
}
