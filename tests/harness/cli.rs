//! The commands a test types at a [`System`], and their answers (`--json` parsed).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use shardsched_proto::StateDir;

use super::{EXE, System, wait_for};

impl System {
    /// Runs `shardsched ARGS` against this system, from the system's directory: a job
    /// runs where it was submitted from, so its files land there and not in the source tree.
    pub fn cli(&self, args: &[&str]) -> Output {
        self.cli_in(&self.state(), args)
    }

    /// `shardsched`, run in this system's network namespace if it has one.
    fn command(&self) -> Command {
        match &self.netns {
            Some(netns) => {
                let mut command = Command::new("nsenter");
                command.arg(format!("--net=/run/netns/{netns}")).arg(EXE);
                command
            }
            None => Command::new(EXE),
        }
    }

    /// A user (not admin) certificate `name` in a client directory of its own (with the
    /// coordinator's address), for `SHARDSCHED_DIR`.
    pub fn user_dir(&self, name: &str) -> PathBuf {
        let dir = self.dir.join(format!("user-{name}"));
        super::issue_cert(
            &self.layout().coordinator_dir(),
            "user",
            name,
            &dir.join("client"),
        );
        let user = StateDir::at(dir.clone());
        std::fs::create_dir_all(user.coordinator_dir()).unwrap();
        std::fs::copy(self.layout().address_file(), user.address_file()).unwrap();
        dir
    }

    /// Runs `shardsched ARGS` with `SHARDSCHED_DIR=dir`, from the system's directory.
    pub fn cli_in(&self, dir: &Path, args: &[&str]) -> Output {
        self.command()
            .args(args)
            .current_dir(&self.dir)
            .env("SHARDSCHED_DIR", dir)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// Runs a command that must succeed; returns its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(
            out.status.success(),
            "shardsched {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs a command that must fail; returns its stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(
            !out.status.success(),
            "shardsched {} succeeded: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8(out.stderr).unwrap()
    }

    pub fn json(&self, args: &[&str]) -> Value {
        let text = self.ok(args);
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("shardsched {} printed {text:?}: {e}", args.join(" ")))
    }

    /// A command printing a JSON list; its rows.
    pub fn rows(&self, args: &[&str]) -> Vec<Value> {
        match self.json(args) {
            Value::Array(rows) => rows,
            other => panic!("shardsched {} printed {other:?}", args.join(" ")),
        }
    }

    /// Submits; returns the job id printed.
    pub fn submit(&self, args: &[&str]) -> String {
        let mut all = vec!["submit"];
        all.extend_from_slice(args);
        self.ok(&all).trim().to_owned()
    }

    pub fn jobs(&self) -> Vec<Value> {
        self.rows(&["jobs", "-A", "-a", "--json"])
    }

    pub fn job(&self, id: &str) -> Value {
        self.jobs()
            .into_iter()
            .find(|j| j["id"] == id)
            .unwrap_or_else(|| panic!("job {id} is not listed"))
    }

    pub fn resources(&self) -> Vec<Value> {
        self.rows(&["resource", "list", "--json"])
    }

    /// One queue's row in `queue list --json`.
    pub fn queue_row(&self, name: &str) -> Value {
        self.rows(&["queue", "list", "--json"])
            .into_iter()
            .find(|q| q["name"] == name)
            .unwrap_or_else(|| panic!("no queue {name}"))
    }

    /// One node's row in `resource list --json`.
    pub fn node_row(&self, name: &str) -> Value {
        self.resources()
            .into_iter()
            .find(|n| n["name"] == name)
            .unwrap_or_else(|| panic!("no node {name}"))
    }

    /// A wire session to the coordinator with the admin certificate, and the endpoint it
    /// runs on (keep both).
    pub async fn admin_session(&self) -> (quinn::Endpoint, shardsched_proto::Session) {
        let endpoint =
            shardsched_proto::tls::client_endpoint(&self.admin(), "127.0.0.1:0".parse().unwrap())
                .unwrap();
        let session = shardsched_proto::connect(
            &endpoint,
            self.address(),
            shardsched_proto::Role::Coordinator,
            shardsched_proto::identity::COORDINATOR_NAME,
        )
        .await
        .unwrap();
        (endpoint, session)
    }

    /// Waits until `done` holds for the job list (`jobs -A -a`); returns it.
    pub fn wait_jobs(&self, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let mut jobs = Vec::new();
        let found = wait_for(|| {
            jobs = self.jobs();
            done(&jobs)
        });
        assert!(found, "timed out waiting for {what}; jobs: {jobs:#?}");
        jobs
    }

    /// Waits until job `id` is in `state`; returns its row.
    pub fn wait_state(&self, id: &str, state: &str) -> Value {
        let mut last = Value::Null;
        let found = wait_for(|| {
            last = self.job(id);
            last["state"] == state
        });
        assert!(found, "job {id} never became {state}: {last:#}");
        last
    }
}
