//! What a test reads over HTTP: the coordinator's and the shards' `/metrics`, and the status
//! page's JSON.

use std::net::SocketAddr;

use serde_json::Value;
use shardsched_proto::state_dir::{HTTP_ADDRESS_FILE, read_http_address};

use super::{System, wait_for};

/// `GET http://addr/path`: the status code and the body.
pub fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let response = ureq::get(&format!("http://{addr}{path}"))
        .config()
        .http_status_as_error(false)
        .build()
        .call()
        .unwrap_or_else(|e| panic!("GET http://{addr}{path}: {e}"));
    let status = response.status().as_u16();
    let body = response.into_body().read_to_string().unwrap();
    (status, body)
}

/// A scrape of `/metrics` at `addr`.
pub fn scrape(addr: SocketAddr) -> String {
    let (status, body) = http_get(addr, "/metrics");
    assert_eq!(status, 200, "GET http://{addr}/metrics: {body}");
    body
}

/// The value of the series `name{labels…}` in a scrape; 0 when absent (a counter or a
/// label set not created yet).
pub fn sample(scrape: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    shardsched_telemetry::metrics::sample(scrape, name, labels).unwrap_or(0.0)
}

impl System {
    /// The coordinator's HTTP address (status page, `/metrics`), as it wrote it.
    pub fn http_address(&self) -> SocketAddr {
        self.layout().http_address().unwrap()
    }

    /// Queue `queue`'s shard's HTTP address (`/metrics`), once it wrote it.
    pub fn shard_http_address(&self, queue: &str) -> SocketAddr {
        let file = self.shard_dir(queue).join(HTTP_ADDRESS_FILE);
        let mut found = None;
        let written = wait_for(|| {
            found = read_http_address(&file).ok();
            found.is_some()
        });
        assert!(written, "{} was never written", file.display());
        found.unwrap()
    }

    /// The status page's JSON now.
    pub fn status_page(&self) -> Value {
        let (status, body) = http_get(self.http_address(), "/api/status");
        assert_eq!(status, 200, "/api/status: {body}");
        serde_json::from_str(&body).unwrap()
    }

    /// Waits until `done` holds for a scrape of `addr`; returns that scrape.
    pub fn wait_scrape(&self, addr: SocketAddr, what: &str, done: impl Fn(&str) -> bool) -> String {
        let mut last = String::new();
        let found = wait_for(|| {
            last = scrape(addr);
            done(&last)
        });
        assert!(
            found,
            "timed out waiting for {what}; the last scrape of {addr}:\n{last}"
        );
        last
    }
}
