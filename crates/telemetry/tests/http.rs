//! The HTTP server against a status source a test controls: what `/metrics`, the page, its
//! JSON and its events say, and that they follow the source.

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use shardsched_telemetry::metrics::{refusal_label, sample as series};
use shardsched_telemetry::status::StatusFuture;
use shardsched_telemetry::{
    ClusterStatus, HttpServer, Metrics, ProcessMetrics, StatusService, StatusSource,
    StatusUnavailable,
};
use shardsched_wire::identity::Role;
use shardsched_wire::msg::{
    Generation, MatchPolicy, NodeState, NodeStatus, QueuePolicy, QueueStatus, RefusalCode,
};

/// How long a test waits for the server to show a change.
const WAIT_TIMEOUT: Duration = Duration::from_secs(60);

/// Views the test sets.
#[derive(Clone, Default)]
struct Views(Arc<Mutex<ClusterStatus>>);

impl StatusSource for Views {
    fn status(&self) -> StatusFuture<'_> {
        let status = self.0.lock().unwrap().clone();
        Box::pin(async move { Ok::<_, StatusUnavailable>(status) })
    }
}

fn queue(name: &str, pending: u32, running: u32) -> QueueStatus {
    QueueStatus {
        name: name.into(),
        enabled: true,
        started: true,
        queue_policy: QueuePolicy::Fcfs,
        match_policy: MatchPolicy::First,
        nodes_defined: 4,
        nodes_owned: 4,
        nodes_up: 4,
        jobs_pending: pending,
        jobs_running: running,
        online: true,
        definition: String::new(),
        owned: String::new(),
        reason: String::new(),
        pending_reasons: Default::default(),
    }
}

fn node(name: &str, queue: &str, state: NodeState) -> NodeStatus {
    NodeStatus {
        name: name.into(),
        queue: Some(queue.into()),
        state,
        generation: Generation(1),
        jobs_running: 0,
        reason: None,
        usage: Default::default(),
    }
}

/// A coordinator-like server (with the page) on a runtime of its own.
fn start(views: &Views) -> (SocketAddr, ProcessMetrics) {
    let (metrics, coordinator) = Metrics::coordinator();
    let metrics = Arc::new(metrics);
    let process = coordinator.process.clone();
    let service = StatusService {
        source: Arc::new(views.clone()),
        metrics: coordinator,
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let server = HttpServer::bind("127.0.0.1:0".parse().unwrap())
                .await
                .unwrap();
            tx.send(server.local_addr()).unwrap();
            server
                .serve(metrics, Some(service), std::future::pending())
                .await
                .unwrap();
        });
    });
    (rx.recv().unwrap(), process)
}

fn get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    let response = ureq::get(&format!("http://{addr}{path}"))
        .config()
        .http_status_as_error(false)
        .build()
        .call()
        .unwrap();
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (
        status,
        content_type,
        response.into_body().read_to_string().unwrap(),
    )
}

#[test]
fn metrics_follow_the_views_and_the_drivers_counters() {
    let views = Views::default();
    *views.0.lock().unwrap() = ClusterStatus {
        queues: vec![queue("batch", 2, 3), queue("debug", 0, 0)],
        nodes: vec![
            node("node0", "batch", NodeState::Up),
            node("node1", "batch", NodeState::Down),
        ],
        ..ClusterStatus::default()
    };
    let (addr, process) = start(&views);
    process.connected(Role::Shard);
    process.request("client_coord.move", Some(RefusalCode::Policy));
    process.journal_committed(Duration::from_millis(3));
    process.journal_fsynced(Duration::from_millis(2));

    let (status, content_type, scrape) = get(addr, "/metrics");
    assert_eq!(status, 200);
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    assert!(scrape.ends_with("# EOF\n"), "{scrape}");
    for line in scrape.lines().filter(|l| !l.starts_with('#')) {
        assert!(line.starts_with("shardsched_"), "unprefixed series: {line}");
    }
    let running = [("queue", "batch"), ("state", "running")];
    assert_eq!(series(&scrape, "shardsched_jobs", &running), Some(3.0));
    let down = [("queue", "batch"), ("state", "down")];
    assert_eq!(series(&scrape, "shardsched_nodes", &down), Some(1.0));
    let shard = [("peer", "shard")];
    assert_eq!(
        series(&scrape, "shardsched_quic_connections", &shard),
        Some(1.0)
    );
    let policy = [
        ("kind", "client_coord.move"),
        ("reason", refusal_label(RefusalCode::Policy)),
    ];
    assert_eq!(
        series(&scrape, "shardsched_refusals_total", &policy),
        Some(1.0)
    );
    assert_eq!(
        series(&scrape, "shardsched_journal_fsync_seconds_count", &[]),
        Some(1.0)
    );

    // The views change: the next scrape says so, and a removed queue's series are gone.
    views.0.lock().unwrap().queues = vec![queue("batch", 0, 6)];
    let (_, _, scrape) = get(addr, "/metrics");
    assert_eq!(series(&scrape, "shardsched_jobs", &running), Some(6.0));
    assert_eq!(
        series(&scrape, "shardsched_jobs", &[("queue", "debug")]),
        None,
        "{scrape}"
    );
}

#[test]
fn the_page_is_embedded_and_loads_nothing_from_elsewhere() {
    let (addr, _process) = start(&Views::default());
    let (status, content_type, html) = get(addr, "/");
    assert_eq!(status, 200);
    assert!(content_type.starts_with("text/html"), "{content_type}");
    assert!(
        html.contains("/status.js") && html.contains("/status.css"),
        "{html}"
    );
    for path in ["/", "/status.js", "/status.css"] {
        let (status, _, body) = get(addr, path);
        assert_eq!(status, 200, "{path}");
        assert!(
            !body.contains("://"),
            "{path} refers to another site: {body}"
        );
    }
    assert_eq!(get(addr, "/nothing-here").0, 404);
}

#[test]
fn the_json_and_the_event_stream_follow_the_views() {
    let views = Views::default();
    views.0.lock().unwrap().nodes = vec![node("node0", "batch", NodeState::Up)];
    let (addr, _process) = start(&views);

    let (status, _, json) = get(addr, "/api/status");
    assert_eq!(status, 200);
    let page: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(page["nodes"][0]["queue"], "batch");
    assert_eq!(page["exposure"], "full");

    let response = ureq::get(&format!("http://{addr}/api/events"))
        .call()
        .unwrap();
    let mut lines = BufReader::new(response.into_body().into_reader()).lines();
    let mut next_page = || loop {
        let line = lines.next().unwrap().unwrap();
        if let Some(data) = line.strip_prefix("data: ") {
            return serde_json::from_str::<serde_json::Value>(data).unwrap();
        }
    };
    assert_eq!(next_page()["nodes"][0]["queue"], "batch");

    // The node moves: the stream's next event shows its new owner.
    views.0.lock().unwrap().nodes = vec![node("node0", "debug", NodeState::Up)];
    let deadline = Instant::now() + WAIT_TIMEOUT;
    loop {
        assert!(Instant::now() < deadline, "no event showed the node moved");
        if next_page()["nodes"][0]["queue"] == "debug" {
            break;
        }
    }
}

#[test]
fn a_server_without_views_serves_metrics_only() {
    let (metrics, shard) = Metrics::shard("batch");
    shard.set_jobs(1, 2, 1);
    shard.scheduled(Duration::from_millis(4), 2);
    let metrics = Arc::new(metrics);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let server = HttpServer::bind("127.0.0.1:0".parse().unwrap())
                .await
                .unwrap();
            tx.send(server.local_addr()).unwrap();
            server
                .serve(metrics, None, std::future::pending())
                .await
                .unwrap();
        });
    });
    let addr = rx.recv().unwrap();
    let (_, _, scrape) = get(addr, "/metrics");
    let running = [("queue", "batch"), ("state", "running")];
    assert_eq!(series(&scrape, "shardsched_jobs", &running), Some(2.0));
    let batch = [("queue", "batch")];
    assert_eq!(
        series(&scrape, "shardsched_jobs_blocked", &batch),
        Some(1.0)
    );
    assert_eq!(
        series(&scrape, "shardsched_match_seconds_count", &batch),
        Some(2.0)
    );
    assert_eq!(
        series(&scrape, "shardsched_schedule_cycle_seconds_count", &batch),
        Some(1.0)
    );
    assert_eq!(get(addr, "/").0, 404);
    assert_eq!(get(addr, "/api/status").0, 404);
}
