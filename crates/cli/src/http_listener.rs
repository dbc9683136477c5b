//! The HTTP listener of `shardsched coordinator` and `shardsched shard` (the server is
//! [`shardsched_telemetry::HttpServer`]): bound before the process serves, its URL written
//! to `<state-dir>/http-address` for `up`, people and tests to find, served on the process's
//! runtime, and stopped — the file removed — when the process stops.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use shardsched_proto::state_dir::{HTTP_ADDRESS_FILE, write_atomic};
use shardsched_telemetry::{HttpServer, Metrics, StatusService};
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
