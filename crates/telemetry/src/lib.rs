//! What shardsched's processes show the people who run them: Prometheus metrics, the
//! coordinator's live status page, and logs with spans (docs/OPERATIONS.md).
//!
//! This crate is I/O on purpose (an HTTP server, a logger); the pure cores never use it.
//! A driver holds a [`Metrics`] registry and its typed handles, updates them at the few
//! points where something happens, and serves them:
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use shardsched_telemetry::{HttpServer, Metrics};
//!
//! let (metrics, shard) = Metrics::shard("batch");
//! let metrics = Arc::new(metrics);
//! let server = HttpServer::bind("127.0.0.1:0".parse()?).await?;
//! println!("metrics at {}metrics", server.url());
//! shard.set_jobs(4, 2, 1); // pending, running, blocked
//! server.serve(metrics, None, std::future::pending()).await?;
//! # Ok(())
//! # }
//! ```
//!
//! The coordinator also passes a [`StatusService`]: its views, through a
//! [`StatusSource`] its driver implements, become the status page (`/`, `/api/status`,
//! `/api/events`) and the gauges of jobs, nodes and moves, computed from the core's views on
//! demand rather than kept beside them.

pub mod http;
pub mod logs;
pub mod metrics;
pub mod status;

pub use http::{HttpError, HttpServer, StatusService};
pub use logs::LogFormat;
pub use metrics::{CoordinatorMetrics, Metrics, ProcessMetrics, ShardMetrics};
pub use status::{ClusterStatus, Exposure, StatusPage, StatusSource, StatusUnavailable};
