//! What `shardsched coordinator` and `shardsched shard` set up for their operators
//! (crates/telemetry, docs/OPERATIONS.md):
//!
//! - the HTTP listener ([`HttpListener`], the server is [`shardsched_telemetry::HttpServer`]):
//!   bound before the process serves, its URL written to `<state-dir>/http-address` for
//!   `up`, people and tests to find, served on the process's runtime, and stopped — the
//!   file removed — when the process stops;
//! - the wire's counts ([`observe_wire`]): requests, refusals and connections, as the
//!   transport sees them, into the process's metrics;
//! - the process's root span ([`runtime`]): entered on every thread of its runtime, so that
//!   every line it logs says which process it is (`shard{queue=batch}`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use shardsched_proto::Role;
use shardsched_proto::msg::RefusalCode;
use shardsched_proto::observe::WireObserver;
use shardsched_proto::state_dir::{HTTP_ADDRESS_FILE, write_atomic};
use shardsched_telemetry::{HttpServer, Metrics, ProcessMetrics, StatusService};
use tokio::task::JoinHandle;

/// A running HTTP listener; dropping it stops it and removes its address file.
pub struct HttpListener {
    task: JoinHandle<()>,
    file: PathBuf,
}

impl HttpListener {
    /// Binds `listen`, writes the URL to `<state_dir>/http-address` and serves `/metrics`
    /// from `metrics` (and the status page from `status`, on the coordinator). Needs a tokio
    /// runtime.
    pub async fn start(
        listen: SocketAddr,
        state_dir: &Path,
        metrics: Arc<Metrics>,
        status: Option<StatusService>,
    ) -> Result<HttpListener> {
        let server = HttpServer::bind(listen).await?;
        let file = state_dir.join(HTTP_ADDRESS_FILE);
        write_atomic(&file, &format!("{}\n", server.url()))
            .with_context(|| format!("writing {}", file.display()))?;
        let task = tokio::spawn(async move {
            if let Err(e) = server.serve(metrics, status, std::future::pending()).await {
                tracing::error!(error = %e, "the HTTP listener stopped");
            }
        });
        Ok(HttpListener { task, file })
    }
}

impl Drop for HttpListener {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.file);
    }
}

/// Counts what the wire sees into `metrics` (once per process).
pub fn observe_wire(metrics: &ProcessMetrics) {
    shardsched_proto::observe::set_observer(Arc::new(WireMetrics(metrics.clone())));
}

struct WireMetrics(ProcessMetrics);

impl WireObserver for WireMetrics {
    fn answered(&self, kind: &'static str, refused: Option<RefusalCode>) {
        self.0.request(kind, refused);
    }

    fn connected(&self, peer: Role) {
        self.0.connected(peer);
    }

    fn disconnected(&self, peer: Role) {
        self.0.disconnected(peer);
    }
}

/// A daemon's one event loop: a single-threaded tokio runtime (the calling thread runs
/// every task; only `spawn_blocking` work and the journal's commit thread run beside it).
/// Every thread runs inside `root`, the process's span: spans and events made on them
/// without a parent of their own have it as theirs.
///
/// Why one thread: a message crosses several tasks in a coordinator or a shard (its
/// connection, the core's task, the publisher, a link's), and on a multi-threaded runtime
/// each hand-off to a task parked on another worker is a thread wake-up. A one-node move
/// crossed about a hundred of them; with one thread per daemon the move takes less time and
/// less CPU, and so does a shard's job throughput (docs/BENCHMARKS.md, "One thread per
/// daemon"). The price: while the core's task runs a scheduling pass, the process's other
/// tasks (its connections, its status page) wait for it.
pub fn runtime(root: tracing::Span) -> Result<tokio::runtime::Runtime> {
    enter_for_good(&root);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .on_thread_start(move || enter_for_good(&root))
        .build()
        .context("starting the async runtime")
}

/// Enters `span` on this thread for the rest of the thread's life.
fn enter_for_good(span: &tracing::Span) {
    std::mem::forget(span.clone().entered());
}
