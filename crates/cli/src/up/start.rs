//! Steps 2 to 5 of [`super`]'s list: the coordinator, the certificates, the shards, and
//! the wait until every queue is routable. A child that exits meanwhile is an error, with
//! the end of its log.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use shardsched_client::Client;
use shardsched_proto::msg::client_coord::{Request, Response};
use shardsched_proto::msg::{QueueStatus, RefusalCode};

use super::child::{Supervised, describe_status};
use super::{
    POLL_INTERVAL, SHARD_LABEL_PREFIX, STARTUP_TIMEOUT, Supervisor, banner, queues,
    remove_if_present,
};

impl Supervisor {
    /// Steps 2 to 5 of the module doc.
    pub(super) async fn start(&mut self) -> Result<()> {
        // A stale address from an earlier run would be mistaken for the new coordinator's.
        remove_if_present(&self.dir.address_file())?;
        remove_if_present(&self.dir.http_address_file())?;
        let args = self.coordinator_args("127.0.0.1:0".parse()?);
        self.spawn_new("coordinator", "coordinator", args)?;
        let address = self.wait_for_address().await?;
        // Restarts bind the same addresses, so that running shards, clients and open status
        // pages find it again.
        let http = self.dir.http_address()?;
        self.http_listen = Some(http);
        let args = self.coordinator_args(address);
        if let Some(coordinator) = self.children.first_mut() {
            coordinator.args = args;
        }

        let user = local_user_name();
        self.issue_cert("admin", &user, &self.dir.client_dir())?;
        let creds = self.dir.credentials()?;
        let client = Client::connect_with(address, &creds).await?;
        let queues = self.queues(&client).await?;

        self.coordinator = Some(address);
        if self.agents {
            self.spawn_agents(&client, address).await?;
            self.wait_for_agents().await?;
        }
        for queue in &queues {
            self.spawn_shard(&queue.name, address)?;
        }
        let routes = self.wait_for_routes(&client, &queues).await?;
        self.queue_sync = Some(queues::QueueSync::start(self.dir.clone(), address));
        client.close().await;
        // A closed stdout must not stop the system: the banner is for whoever watches.
        let _ = shardsched_client::output::emit(&banner::banner(
            &self.exe,
            &self.dir,
            (address, http),
            &user,
            &queues,
            &routes,
        ));
        Ok(())
    }

    /// The coordinator's command line, listening on `listen` (and HTTP on `http_listen`).
    fn coordinator_args(&self, listen: SocketAddr) -> Vec<String> {
        let mut args = vec![
            "coordinator".to_owned(),
            "--listen".to_owned(),
            listen.to_string(),
            "--state-dir".to_owned(),
            path_arg(&self.dir.coordinator_dir()),
            "--up-lock".to_owned(),
            path_arg(&self.processes_lock),
            "--log-format".to_owned(),
            self.log_format.to_string(),
        ];
        if let Some(config) = &self.config {
            args.extend(["--config".to_owned(), path_arg(config)]);
        }
        if self.agents {
            args.push("--agents".to_owned());
        }
        if let Some(http) = self.http_listen {
            args.extend(["--http-listen".to_owned(), http.to_string()]);
        }
        args
    }

    /// Issues queue `queue`'s shard its certificate and starts it.
    pub(super) fn spawn_shard(&mut self, queue: &str, address: SocketAddr) -> Result<()> {
        let shard_dir = self.dir.shard_dir(queue);
        self.issue_cert("shard", queue, &shard_dir)?;
        let mut shard_args = vec![
            "shard".to_owned(),
            "--queue".to_owned(),
            queue.to_owned(),
            "--coordinator".to_owned(),
            address.to_string(),
            "--state-dir".to_owned(),
            path_arg(&shard_dir),
            "--listen".to_owned(),
            "127.0.0.1:0".to_owned(),
            "--up-lock".to_owned(),
            path_arg(&self.processes_lock),
            "--log-format".to_owned(),
            self.log_format.to_string(),
        ];
        if let Some(scale) = self.time_scale {
            shard_args.extend(["--time-scale".to_owned(), scale.to_string()]);
        }
        if let Some(executor) = self.executor {
            let name = match executor {
                crate::shard_cmd::Executor::Sim => "sim",
                crate::shard_cmd::Executor::Exec => "exec",
                crate::shard_cmd::Executor::Agents => "agents",
            };
            shard_args.extend(["--executor".to_owned(), name.to_owned()]);
        }
        if let Some(retention) = self.retention {
            shard_args.extend([
                "--retention".to_owned(),
                crate::duration_arg::to_arg(retention),
            ]);
        }
        self.spawn_new(
            &format!("{SHARD_LABEL_PREFIX}{queue}"),
            &format!("shard-{queue}"),
            shard_args,
        )
    }

    /// Starts a child for the first time.
    pub(super) fn spawn_new(
        &mut self,
        label: &str,
        log_stem: &str,
        args: Vec<String>,
    ) -> Result<()> {
        let mut child = Supervised {
            label: label.to_owned(),
            log: self.dir.logs_dir().join(format!("{log_stem}.log")),
            args,
            process: None,
            started_at: Instant::now(),
            failures: 0,
            restart_at: None,
            abandoned: false,
        };
        child.spawn(&self.exe)?;
        self.children.push(child);
        Ok(())
    }

    /// Waits for the coordinator's address files (QUIC, then HTTP: it writes them in that
    /// order), failing early if the coordinator exits.
    async fn wait_for_address(&mut self) -> Result<SocketAddr> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        let file = self.dir.http_address_file();
        loop {
            self.check_started_children()?;
            if file.exists()
                && let Ok(addr) = self.dir.coordinator_address()
            {
                return Ok(addr);
            }
            if Instant::now() > deadline {
                bail!(
                    "the coordinator did not write {} within {} s{}",
                    file.display(),
                    STARTUP_TIMEOUT.as_secs(),
                    self.children[0].log_tail()
                );
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// The configured queues, asked of the coordinator (which parsed the configuration), so
    /// that `up` and the coordinator can never disagree about them.
    async fn queues(&mut self, client: &Client) -> Result<Vec<QueueStatus>> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            self.check_started_children()?;
            match client.coordinator(&Request::Queues).await {
                Ok(Response::Queues(queues)) if !queues.is_empty() => return Ok(queues),
                Ok(Response::Queues(_)) => bail!("the coordinator has no queues configured"),
                Ok(other) => bail!("the coordinator answered a queue list with {other:?}"),
                Err(shardsched_proto::Error::Refused(r))
                    if r.code == RefusalCode::Unavailable && Instant::now() < deadline => {}
                Err(e) => return Err(e).context("asking the coordinator for its queues"),
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// Waits until every queue has a route (its shard registered).
    async fn wait_for_routes(
        &mut self,
        client: &Client,
        queues: &[QueueStatus],
    ) -> Result<shardsched_proto::msg::RouteTable> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            self.check_started_children()?;
            let routes = client.routes().await?;
            let missing: Vec<&str> = queues
                .iter()
                .filter(|q| routes.queue(&q.name).is_none())
                .map(|q| q.name.as_str())
                .collect();
            if missing.is_empty() {
                return Ok(routes);
            }
            if Instant::now() > deadline {
                let mut tails = String::new();
                for child in &self.children {
                    if missing.iter().any(|q| child.label == format!("shard {q}")) {
                        tails.push_str(&child.log_tail());
                    }
                }
                bail!(
                    "no route for queue(s) {} after {} s: their shards did not register{tails}",
                    missing.join(", "),
                    STARTUP_TIMEOUT.as_secs()
                );
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// While starting, a child that exits is an error (with its log), not a restart.
    pub(super) fn check_started_children(&mut self) -> Result<()> {
        for child in &mut self.children {
            if let Some(status) = child.try_exited()? {
                if queues::is_restart(status) {
                    // Reconfigured while starting: start it again at once.
                    child.spawn(&self.exe)?;
                    continue;
                }
                bail!(
                    "{} exited while starting ({}){}",
                    child.label,
                    describe_status(status),
                    child.log_tail()
                );
            }
        }
        Ok(())
    }

    /// Runs `shardsched cert issue` for one identity.
    fn issue_cert(&self, role: &str, name: &str, out: &Path) -> Result<()> {
        let output = Command::new(&self.exe)
            .args([
                "cert",
                "issue",
                "--role",
                role,
                "--name",
                name,
                "--state-dir",
            ])
            .arg(self.dir.coordinator_dir())
            .arg("--out")
            .arg(out)
            .stdin(Stdio::null())
            .output()
            .context("running `shardsched cert issue`")?;
        if !output.status.success() {
            bail!(
                "`shardsched cert issue --role {role} --name {name}` failed ({}): {}",
                describe_status(output.status),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(())
    }
}

fn path_arg(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// The local user's name as a certificate name: the effective user's passwd name (what a
/// node agent runs the user's jobs as; `$USER` may be unset or lie), else `$USER`, else
/// `admin`. A name that is not a valid certificate name falls back the same way.
fn local_user_name() -> String {
    let valid =
        |name: &str| shardsched_proto::Peer::new(shardsched_proto::Role::Admin, name).is_ok();
    let passwd = nix::unistd::User::from_uid(nix::unistd::Uid::effective())
        .ok()
        .flatten()
        .map(|u| u.name);
    let env = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok();
    passwd
        .into_iter()
        .chain(env)
        .find(|name| valid(name))
        .unwrap_or_else(|| "admin".to_owned())
}
