//! The HTTP side of a process: `/metrics` on every process, and on the coordinator the
//! status page, its JSON and its live feed.
//!
//! ```text
//! GET /metrics        OpenMetrics text (Prometheus scrapes it)
//! GET /               the status page (coordinator)      index.html, status.js, status.css:
//! GET /status.js                                          embedded in the binary, no build
//! GET /status.css                                         step, nothing from elsewhere
//! GET /api/status     the page's JSON now (StatusPage)
//! GET /api/events     server-sent events: `status` with the page's JSON whenever it changes
//! ```
//!
//! Everything is read-only: no route changes anything. The live feed asks the coordinator
//! for its views every [`FEED_INTERVAL`] only while at least one browser listens, once for
//! all of them, and sends an event only when the page changed; at most
//! [`EVENT_STREAMS_MAX`] browsers listen at once.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::stream;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use crate::metrics::{CoordinatorMetrics, Metrics};
use crate::status::{Exposure, StatusPage, StatusSource};

/// How often the live feed looks at the coordinator's views while a browser listens.
pub const FEED_INTERVAL: Duration = Duration::from_millis(500);
/// Browsers listening to `/api/events` at once; more are answered 503.
pub const EVENT_STREAMS_MAX: usize = 64;
/// How often an idle event stream sends a comment, so proxies keep it open.
pub const EVENT_KEEP_ALIVE: Duration = Duration::from_secs(15);
/// The content type of the OpenMetrics text exposition.
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

const INDEX_HTML: &str = include_str!("page/index.html");
const STATUS_JS: &str = include_str!("page/status.js");
const STATUS_CSS: &str = include_str!("page/status.css");

/// Why the HTTP server could not start.
#[derive(Debug, thiserror::Error)]
#[error("HTTP listener on {addr}: {error}")]
pub struct HttpError {
    /// The address asked for.
    pub addr: SocketAddr,
    /// What the socket said.
    #[source]
    pub error: std::io::Error,
}

/// The coordinator's part: its views and the metrics read from them.
pub struct StatusService {
    /// Where the views come from.
    pub source: Arc<dyn StatusSource>,
    /// The gauges set from the views before each scrape.
    pub metrics: CoordinatorMetrics,
}

/// A bound HTTP listener, not serving yet.
pub struct HttpServer {
    listener: TcpListener,
    local: SocketAddr,
}

/// What the handlers share.
struct App {
    metrics: Arc<Metrics>,
    status: Option<StatusService>,
    exposure: Exposure,
    feed: watch::Sender<Option<String>>,
    streams: Arc<Semaphore>,
}

impl HttpServer {
    /// Binds `addr` (port 0: a free port).
    pub async fn bind(addr: SocketAddr) -> Result<HttpServer, HttpError> {
        let error = |error| HttpError { addr, error };
        let listener = TcpListener::bind(addr).await.map_err(error)?;
        let local = listener.local_addr().map_err(error)?;
        Ok(HttpServer { listener, local })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The URL of the page: `http://ADDR/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.local)
    }

    /// Serves `/metrics` from `metrics` and, with `status`, the status page, until
    /// `shutdown` resolves.
    pub async fn serve(
        self,
        metrics: Arc<Metrics>,
        status: Option<StatusService>,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let exposure = Exposure::for_address(self.local);
        let with_page = status.is_some();
        let app = Arc::new(App {
            metrics,
            status,
            exposure,
            feed: watch::Sender::new(None),
            streams: Arc::new(Semaphore::new(EVENT_STREAMS_MAX)),
        });
        let mut router = Router::new().route("/metrics", get(metrics_handler));
        if with_page {
            router = router
                .route(
                    "/",
                    get(|| async { page(INDEX_HTML, "text/html; charset=utf-8") }),
                )
                .route(
                    "/status.js",
                    get(|| async { page(STATUS_JS, "text/javascript; charset=utf-8") }),
                )
                .route(
                    "/status.css",
                    get(|| async { page(STATUS_CSS, "text/css; charset=utf-8") }),
                )
                .route("/api/status", get(status_handler))
                .route("/api/events", get(events_handler));
            tokio::spawn(feed(Arc::clone(&app)));
        }
        tracing::info!(url = %self.url(), ?exposure, page = with_page, "serving HTTP");
        axum::serve(self.listener, router.with_state(app))
            .with_graceful_shutdown(shutdown)
            .await
    }
}

fn page(body: &'static str, content_type: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

async fn metrics_handler(State(app): State<Arc<App>>) -> Response {
    if let Some(service) = &app.status {
        // The view-derived gauges follow the core's views as of this scrape; when the core
        // cannot answer, the last values stay and the driver's own series still go out.
        match service.source.status().await {
            Ok(status) => service.metrics.observe(&status),
            Err(e) => tracing::debug!(error = %e, "metrics scrape without fresh views"),
        }
    }
    (
        [(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)],
        app.metrics.encode(),
    )
        .into_response()
}

/// The page's JSON now, or why not.
async fn page_json(app: &App) -> Result<String, Response> {
    let Some(service) = &app.status else {
        return Err(StatusCode::NOT_FOUND.into_response());
    };
    let status = service
        .source
        .status()
        .await
        .map_err(|e| (StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response())?;
    serde_json::to_string(&StatusPage::new(&status, app.exposure))
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response())
}

async fn status_handler(State(app): State<Arc<App>>) -> Response {
    match page_json(&app).await {
        Ok(json) => (
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            json,
        )
            .into_response(),
        Err(response) => response,
    }
}

/// The live feed: while anyone listens, the page's JSON every [`FEED_INTERVAL`], published
/// only when it changed. Stops when the server's state is dropped.
async fn feed(app: Arc<App>) {
    let mut tick = tokio::time::interval(FEED_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if Arc::strong_count(&app) == 1 {
            return;
        }
        if app.feed.receiver_count() == 0 {
            // Nobody listens: forget the last page, so the next browser never starts from
            // an old one.
            app.feed.send_replace(None);
            continue;
        }
        if let Ok(json) = page_json(&app).await {
            app.feed.send_if_modified(|last| {
                let changed = last.as_deref() != Some(json.as_str());
                if changed {
                    *last = Some(json);
                }
                changed
            });
        }
    }
}

async fn events_handler(State(app): State<Arc<App>>) -> Response {
    let Ok(permit) = Arc::clone(&app.streams).try_acquire_owned() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "too many status pages open; this one polls /api/status instead",
        )
            .into_response();
    };
    let mut receiver = app.feed.subscribe();
    // The newest page at once, then each change.
    receiver.mark_changed();
    let events = stream::unfold((receiver, permit), |(mut receiver, permit)| async move {
        loop {
            receiver.changed().await.ok()?;
            let json = receiver.borrow_and_update().clone();
            if let Some(json) = json {
                let event = Event::default().event("status").data(json);
                return Some((Ok::<_, std::convert::Infallible>(event), (receiver, permit)));
            }
        }
    });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(EVENT_KEEP_ALIVE))
        .into_response()
}
