//! The coordinator's status page in a real browser: headless Chromium (Debian's `chromium`,
//! driven through `chromedriver` with fantoccini) opens the page once, and the page —
//! refreshed live by its event stream, never reloaded — shows why a job waits, a busy node
//! go outgoing when it is moved, then change colour and owner when its job ends and it comes
//! up in the recipient. Screenshots of both moments are saved under target/ for a person to
//! look at.
//!
//! Without chromium and chromedriver the test is skipped, saying so, unless
//! `SHARDSCHED_REQUIRE_CHROMIUM=1` (as `.ci/run` sets), when it fails instead.

#![allow(clippy::unwrap_used)]

use crate::harness;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder};
use harness::{System, WAIT_TIMEOUT, batch_and_debug};
use rustix::process::{Signal, kill_process_group};
use serde_json::{Value, json};

/// Set to 1 to make a missing browser a failure rather than a skip.
const REQUIRE_ENV: &str = "SHARDSCHED_REQUIRE_CHROMIUM";
/// How long chromedriver may take to say which port it listens on.
const DRIVER_START_TIMEOUT: Duration = Duration::from_secs(60);
/// Starts of chromedriver tried before the test fails (see [`Driver::start`]).
const DRIVER_STARTS: usize = 3;

/// What the page shows of one node: `[owner, state, fill colour]`.
const NODE_SCRIPT: &str = r#"
const cell = document.querySelector(`[data-node="${arguments[0]}"]`);
if (!cell) return null;
return [cell.dataset.owner, cell.dataset.state, getComputedStyle(cell).backgroundColor];
"#;

#[test]
fn the_page_shows_a_node_change_owner_and_colour_when_it_moves() {
    let Some((chromium, chromedriver)) = browser() else {
        return;
    };
    let system = System::start_with("status-page", &batch_and_debug(), &[]);
    let url = format!("http://{}/", system.http_address());
    // A job on node4 (batch's fcfs fills node4 and node5 after node[0-3]).
    for _ in 0..5 {
        system.submit(&["-q", "batch", "-N", "1", "-t", "1h", "--", "app"]);
    }
    let busy = system.wait_jobs("five running jobs", |jobs| {
        jobs.iter().filter(|j| j["state"] == "running").count() == 5
    });
    let job = busy
        .iter()
        .find(|j| j["nodes"] == "node4")
        .unwrap_or_else(|| panic!("no job on node4: {busy:#?}"))["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let driver = Driver::start(&chromedriver);
    let profile = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let browser = driver.connect(&chromium, profile.path()).await;
        browser.goto(&url).await.unwrap();
        let (owner, _, batch_colour) = wait_node(&browser, "node4", |owner, state| {
            owner == "batch" && state == "up"
        })
        .await;
        assert_eq!(owner, "batch");

        // A job that cannot start now: the queue's row says why it waits.
        system.submit(&["-q", "batch", "-N", "2", "-t", "1h", "--", "app"]);
        let why = "[data-queue=\"batch\"] [data-pending-reasons]";
        wait_text(&browser, why, "1 waiting for resources").await;

        // The move: node4 is busy, so it stays outgoing in batch until its job ends.
        system.ok(&["queue", "move", "node4", "--from", "batch", "--to", "debug"]);
        wait_node(&browser, "node4", |owner, state| {
            owner == "batch" && state == "outgoing"
        })
        .await;
        wait_text(&browser, "[data-move-node=\"node4\"]", "outgoing").await;
        screenshot(&browser, "status-page-moving.png").await;

        // The job ends: node4 comes up in debug, in debug's colour.
        system.ok(&["cancel", &job]);
        let (_, _, debug_colour) = wait_node(&browser, "node4", |owner, state| {
            owner == "debug" && state == "up"
        })
        .await;
        assert_ne!(debug_colour, batch_colour, "node4 kept batch's colour");
        let node6 = node(&browser, "node6").await.unwrap();
        assert_eq!(
            (node6[0].as_str(), node6[2].as_str()),
            (Some("debug"), Some(debug_colour.as_str()))
        );
        screenshot(&browser, "status-page-moved.png").await;
        browser.close().await.unwrap();
    });
}

/// chromium and chromedriver, or `None` (with the reason printed) when the test is skipped.
fn browser() -> Option<(PathBuf, PathBuf)> {
    let found = (find_program("chromium"), find_program("chromedriver"));
    if let (Some(chromium), Some(chromedriver)) = found {
        return Some((chromium, chromedriver));
    }
    let reason = "chromium or chromedriver is not installed (apt-get install chromium \
                  chromium-driver)";
    if std::env::var(REQUIRE_ENV).is_ok_and(|v| v == "1") {
        panic!("{reason}, and {REQUIRE_ENV}=1");
    }
    eprintln!("skipped: {reason}");
    None
}

fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// A chromedriver on a free loopback port, in a process group of its own with the browser
/// it starts; the whole group is killed on drop, so that no browser outlives a failed test.
struct Driver {
    child: Child,
    port: u16,
}

impl Driver {
    /// Starts chromedriver; one that exits before it says its port (seen once in CI, under
    /// the whole suite's load, with no reason given) is started again, up to
    /// [`DRIVER_STARTS`] times, and the failure says how each one ended.
    fn start(chromedriver: &Path) -> Driver {
        let mut endings = Vec::new();
        for _ in 0..DRIVER_STARTS {
            match Driver::start_once(chromedriver) {
                Ok(driver) => return driver,
                Err(ending) => endings.push(ending),
            }
        }
        panic!("chromedriver did not say its port: {endings:#?}");
    }

    fn start_once(chromedriver: &Path) -> Result<Driver, String> {
        let mut command = Command::new(chromedriver);
        command
            .arg("--port=0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        // Drained beside, so that chromedriver never blocks on it; read if it ends early.
        let errors = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
            text
        });
        let (tx, rx) = std::sync::mpsc::channel();
        // Reads until the port line, then keeps draining so that chromedriver never blocks.
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(port) = line
                    .split("started successfully on port ")
                    .nth(1)
                    .and_then(|rest| rest.trim_end_matches('.').parse::<u16>().ok())
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(port);
                }
            }
        });
        match rx.recv_timeout(DRIVER_START_TIMEOUT) {
            Ok(port) => Ok(Driver { child, port }),
            Err(e) => {
                let _ = kill_process_group(harness::pid(child.id()), Signal::KILL);
                let status = child.wait();
                let errors = errors.join().unwrap_or_default();
                Err(format!("{e}; exit {status:?}; stderr: {errors:?}"))
            }
        }
    }

    async fn connect(&self, chromium: &Path, profile: &Path) -> Client {
        let args = [
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-quic".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--window-size=1280,900".to_owned(),
            format!("--user-data-dir={}", profile.display()),
        ];
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".to_owned(),
            json!({ "binary": chromium, "args": args }),
        );
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{}", self.port))
            .await
            .unwrap()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = kill_process_group(harness::pid(self.child.id()), Signal::KILL);
        let _ = self.child.wait();
    }
}

/// What the page shows of `name` now (`[owner, state, colour]`), if it shows it.
async fn node(browser: &Client, name: &str) -> Option<Vec<Value>> {
    match browser
        .execute(NODE_SCRIPT, vec![json!(name)])
        .await
        .unwrap()
    {
        Value::Array(fields) => Some(fields),
        _ => None,
    }
}

/// Waits until the page shows `name` with an owner and state `done` accepts; returns them
/// and its colour.
async fn wait_node(
    browser: &Client,
    name: &str,
    done: impl Fn(&str, &str) -> bool,
) -> (String, String, String) {
    let deadline = Instant::now() + WAIT_TIMEOUT;
    let mut last = None;
    loop {
        if let Some(fields) = node(browser, name).await {
            let text = |i: usize| fields[i].as_str().unwrap_or_default().to_owned();
            let (owner, state, colour) = (text(0), text(1), text(2));
            if done(&owner, &state) {
                return (owner, state, colour);
            }
            last = Some((owner, state));
        }
        assert!(
            Instant::now() < deadline,
            "the page never showed {name} as expected; last: {last:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until the element at `selector` holds `text`.
async fn wait_text(browser: &Client, selector: &str, text: &str) {
    let script = "const e = document.querySelector(arguments[0]); return e ? e.textContent : '';";
    let deadline = Instant::now() + WAIT_TIMEOUT;
    loop {
        let found = browser
            .execute(script, vec![json!(selector)])
            .await
            .unwrap();
        if found.as_str().is_some_and(|t| t.contains(text)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{selector} never held {text:?}: {found}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Saves a screenshot of the page as target/tmp/NAME.
async fn screenshot(browser: &Client, name: &str) {
    let png = browser.screenshot().await.unwrap();
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&path, png).unwrap();
    eprintln!("screenshot of the status page: {}", path.display());
}
