//! The user's commands: how a `shardsched` invocation finds and talks to a running system.
//!
//! # Where things are
//!
//! Everything a client needs is in one directory, named by `SHARDSCHED_DIR`, and by default
//! the one `shardsched up` uses ([`StateDir::default_root`]):
//!
//! ```text
//! $SHARDSCHED_DIR/            default: $XDG_STATE_HOME/shardsched, else $HOME/.local/state/shardsched
//!   coordinator/address       the coordinator's bound address, one line (beside its CA, journal)
//!   client/{cert,key,ca}.pem  this user's certificate (`up` issues the local user an admin one)
//!   shards/<queue>/           each shard's state directory (`up` only)
//!   logs/<process>.log        each child's output (`up` only)
//! ```
//!
//! So after `shardsched up`, every command works with no flags, and a second cluster (or a
//! test) is just another directory.
//!
//! # How a command talks
//!
//! [`Client::connect`] opens one QUIC connection to the coordinator (mutual TLS with the
//! certificate above) and asks it for the routing table. Jobs go **straight to the shard
//! that owns their queue** ([`Client::shard`]): the coordinator serialises nothing on the
//! job path, which is the point of sharding. A job id's FLUID generator field names the
//! shard that issued it, so `job info` and `cancel` need no lookup beyond the table.
//! Cluster-wide views (`queue list`, `resource list`) come from the coordinator; job lists
//! are gathered from every shard in parallel.

pub mod admin;
pub mod jobs;
pub mod output;
pub mod queue_config;
pub mod status;
pub mod submit;

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use shardsched_proto::msg::{
    JobId, JobList, JobsQuery, Refusal, RefusalCode, Route, RouteTable, client_coord, client_shard,
};
use shardsched_proto::{Credentials, Error as WireError, Role, Session, connect};

/// Environment variable naming the client directory.
pub const DIR_ENV: &str = "SHARDSCHED_DIR";
/// The coordinator's certificate name: clients ask TLS for exactly this server.
pub const COORDINATOR_NAME: &str = "coordinator";
/// How long a client waits for the coordinator's (or a shard's) handshake and hello before
/// saying it is unreachable. Shorter than the wire's own handshake bound because a person is
/// waiting, and on loopback a live server answers in milliseconds.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long closing the endpoint may wait for the server to acknowledge the close. Past
/// that the process exits anyway; the server then sees an idle timeout instead of a close.
pub const CLOSE_WAIT: Duration = Duration::from_millis(200);

/// The directory layout shared by `up` and every client command.
#[derive(Clone, Debug)]
pub struct StateDir {
    root: PathBuf,
}

impl StateDir {
    /// The directory named by `SHARDSCHED_DIR`, else [`StateDir::default_root`].
    pub fn from_env() -> Result<StateDir> {
        match std::env::var_os(DIR_ENV) {
            Some(dir) if !dir.is_empty() => Ok(StateDir::at(PathBuf::from(dir))),
            _ => Ok(StateDir::at(StateDir::default_root()?)),
        }
    }

    /// `dir` if given, else [`StateDir::from_env`].
    pub fn given_or_env(dir: Option<&Path>) -> Result<StateDir> {
        match dir {
            Some(dir) => Ok(StateDir::at(dir.to_owned())),
            None => StateDir::from_env(),
        }
    }

    /// A layout rooted at `root`.
    pub fn at(root: PathBuf) -> StateDir {
        StateDir { root }
    }

    /// `$XDG_STATE_HOME/shardsched` when `XDG_STATE_HOME` is an absolute path (the XDG base
    /// directory rules ignore relative ones), else `$HOME/.local/state/shardsched`: state that
    /// outlives a run (the CA, journals) but is not configuration.
    pub fn default_root() -> Result<PathBuf> {
        if let Some(state) = std::env::var_os("XDG_STATE_HOME") {
            let state = PathBuf::from(state);
            if state.is_absolute() {
                return Ok(state.join("shardsched"));
            }
        }
        match std::env::var_os("HOME") {
            Some(home) if !home.is_empty() => {
                Ok(PathBuf::from(home).join(".local/state/shardsched"))
            }
            _ => bail!(
                "neither {DIR_ENV}, XDG_STATE_HOME nor HOME is set: set {DIR_ENV} to the \
                 directory `shardsched up` uses"
            ),
        }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The coordinator's state directory (CA, journal, `address`).
    pub fn coordinator_dir(&self) -> PathBuf {
        self.root.join("coordinator")
    }

    /// The file in which the coordinator writes its bound address.
    pub fn address_file(&self) -> PathBuf {
        self.coordinator_dir().join("address")
    }

    /// This user's certificate, key and CA.
    pub fn client_dir(&self) -> PathBuf {
        self.root.join("client")
    }

    /// A shard's state directory.
    pub fn shard_dir(&self, queue: &str) -> PathBuf {
        self.root.join("shards").join(queue)
    }

    /// Where `up` sends its children's output.
    pub fn logs_dir(&self) -> PathBuf {
        self.root.join("logs")
    }

    /// The coordinator's address, from [`StateDir::address_file`].
    pub fn coordinator_address(&self) -> Result<SocketAddr> {
        let path = self.address_file();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
                "no coordinator address in {}: is `shardsched up` running? (set {DIR_ENV} to \
                 the directory it printed)",
                self.root.display()
            ),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let line = text.lines().next().unwrap_or("").trim();
        line.parse().map_err(|_| {
            anyhow!(
                "{} holds {line:?}, not a socket address (ip:port)",
                path.display()
            )
        })
    }

    /// This user's credentials from [`StateDir::client_dir`].
    pub fn credentials(&self) -> Result<Credentials> {
        let dir = self.client_dir();
        for file in ["cert.pem", "key.pem", "ca.pem"] {
            let path = dir.join(file);
            if !path.exists() {
                bail!(
                    "no client certificate in {} ({file} is missing): `shardsched up` issues \
                     one, or an admin can with `shardsched cert issue --out {}`",
                    dir.display(),
                    dir.display()
                );
            }
        }
        Credentials::load(
            &dir.join("ca.pem"),
            &dir.join("cert.pem"),
            &dir.join("key.pem"),
        )
        .with_context(|| format!("loading the client certificate in {}", dir.display()))
    }
}

/// A client of one running system: a connection to the coordinator and, lazily, one to each
/// shard it needs. Cheap to share (`Arc`) between tasks; requests on one connection run
/// concurrently, each on its own QUIC stream.
pub struct Client {
    endpoint: quinn::Endpoint,
    coordinator: Session,
    coordinator_addr: SocketAddr,
    /// Open shard connections by queue, with the address they were opened to (a restarted
    /// shard comes back at a new address, which invalidates the entry).
    shards: tokio::sync::Mutex<HashMap<String, Session>>,
}

impl Client {
    /// Connects to the coordinator named in `dir` with the certificate in `dir`.
    pub async fn connect(dir: &StateDir) -> Result<Client> {
        let addr = dir.coordinator_address()?;
        let creds = dir.credentials()?;
        let origin = format!(" (address from {})", dir.address_file().display());
        Client::connect_from(addr, &creds, &origin).await
    }

    /// Connects to the coordinator at `addr` with `creds`.
    pub async fn connect_with(addr: SocketAddr, creds: &Credentials) -> Result<Client> {
        Client::connect_from(addr, creds, "").await
    }

    /// [`Client::connect_with`], saying in errors where `addr` came from.
    async fn connect_from(addr: SocketAddr, creds: &Credentials, origin: &str) -> Result<Client> {
        let bind = match addr {
            SocketAddr::V4(_) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
            SocketAddr::V6(_) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
        };
        let endpoint = shardsched_proto::tls::client_endpoint(creds, bind)
            .context("setting up the client's QUIC endpoint")?;
        let coordinator = dial(&endpoint, addr, Role::Coordinator, COORDINATOR_NAME)
            .await
            .map_err(|e| {
                e.context(format!(
                    "cannot reach the coordinator at {addr}{origin}: is `shardsched up` running?"
                ))
            })?;
        Ok(Client {
            endpoint,
            coordinator,
            coordinator_addr: addr,
            shards: tokio::sync::Mutex::new(HashMap::new()),
        })
    }

    /// Who the coordinator says we are (from our certificate).
    pub fn me(&self) -> Option<&shardsched_proto::Peer> {
        self.coordinator.seen_as()
    }

    /// Asks the coordinator.
    pub async fn coordinator(
        &self,
        req: &client_coord::Request,
    ) -> Result<client_coord::Response, WireError> {
        self.coordinator.request(req).await
    }

    /// The coordinator's routing table.
    pub async fn routes(&self) -> Result<RouteTable> {
        match self
            .coordinator(&client_coord::Request::Routes)
            .await
            .map_err(|e| wire_error(e, &format!("coordinator at {}", self.coordinator_addr)))?
        {
            client_coord::Response::Routes(table) => Ok(table),
            other => bail!("the coordinator answered a routes request with {other:?}"),
        }
    }

    /// A connection to `route`'s shard, opened on first use and kept.
    pub async fn shard(&self, route: &Route) -> Result<Session> {
        let mut shards = self.shards.lock().await;
        if let Some(session) = shards.get(&route.queue)
            && session.remote_address() == route.address
            && session.connection().close_reason().is_none()
        {
            return Ok(session.clone());
        }
        let session = dial(&self.endpoint, route.address, Role::Shard, &route.queue)
            .await
            .map_err(|e| {
                e.context(format!(
                    "cannot reach queue {}'s shard at {}",
                    route.queue, route.address
                ))
            })?;
        shards.insert(route.queue.clone(), session.clone());
        Ok(session)
    }

    /// Forgets `queue`'s shard connection, so that the next [`Client::shard`] dials again.
    pub async fn forget_shard(&self, queue: &str) {
        if let Some(session) = self.shards.lock().await.remove(queue) {
            session.close();
        }
    }

    /// Asks `route`'s shard.
    pub async fn ask_shard(
        &self,
        route: &Route,
        req: &client_shard::Request,
    ) -> Result<client_shard::Response> {
        let session = self.shard(route).await?;
        session
            .request(req)
            .await
            .map_err(|e| wire_error(e, &format!("queue {}'s shard", route.queue)))
    }

    /// Jobs matching `query` from every routed shard (or `query.queue`'s alone), asked in
    /// parallel and merged newest first. Shards that cannot be reached are reported in the
    /// returned warnings rather than failing the whole list.
    pub async fn jobs(
        self: &Arc<Self>,
        routes: &RouteTable,
        query: &JobsQuery,
    ) -> Result<(JobList, Vec<String>)> {
        let mut tasks = tokio::task::JoinSet::new();
        for route in &routes.routes {
            if query.queue.as_ref().is_some_and(|q| *q != route.queue) {
                continue;
            }
            let client = Arc::clone(self);
            let route = route.clone();
            let req = client_shard::Request::Jobs(query.clone());
            tasks.spawn(async move {
                let answer = client.ask_shard(&route, &req).await;
                (route.queue, answer)
            });
        }
        let mut list = JobList::default();
        let mut warnings = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            let (queue, answer) = joined.context("a job-list task failed")?;
            match answer {
                Ok(client_shard::Response::Jobs(part)) => {
                    list.truncated |= part.truncated;
                    list.jobs.extend(part.jobs);
                }
                Ok(other) => warnings.push(format!("queue {queue}: unexpected answer {other:?}")),
                Err(e) => warnings.push(format!("queue {queue}: {e:#}")),
            }
        }
        list.jobs.sort_by_key(|job| std::cmp::Reverse(job.id));
        Ok((list, warnings))
    }

    /// The route of the shard that issued `id`. Its refusal names the job in both forms
    /// (`12345` is shown as F58): which shard issues which ids is the system's business.
    pub fn route_of(routes: &RouteTable, id: JobId) -> Result<&Route> {
        routes.job(id).ok_or_else(|| {
            anyhow!(
                "no job {} ({id}): no running queue issued it (the id is wrong, or its \
                 queue's shard is not running)",
                id.0
            )
        })
    }

    /// Closes every connection and waits briefly for the servers to see it, so that they
    /// log an orderly close rather than an idle timeout.
    pub async fn close(&self) {
        for session in self.shards.lock().await.values() {
            session.close();
        }
        self.coordinator.close();
        let _ = tokio::time::timeout(CLOSE_WAIT, self.endpoint.wait_idle()).await;
    }
}

/// Connects with [`CONNECT_TIMEOUT`].
async fn dial(
    endpoint: &quinn::Endpoint,
    addr: SocketAddr,
    role: Role,
    name: &str,
) -> Result<Session> {
    match tokio::time::timeout(CONNECT_TIMEOUT, connect(endpoint, addr, role, name)).await {
        Ok(Ok(session)) => Ok(session),
        Ok(Err(e)) => Err(anyhow::Error::new(e)),
        Err(_) => bail!("no answer within {} s", CONNECT_TIMEOUT.as_secs()),
    }
}

/// A wire error as a sentence naming who answered; refusals read as the server wrote them.
pub fn wire_error(e: WireError, who: &str) -> anyhow::Error {
    match e {
        WireError::Refused(refusal) => anyhow!("{who} refused: {}", describe_refusal(&refusal)),
        other => anyhow::Error::new(other).context(format!("asking the {who}")),
    }
}

/// A refusal's message, prefixed by what kind it is when the message does not say.
pub fn describe_refusal(refusal: &Refusal) -> String {
    let kind = match refusal.code {
        RefusalCode::Forbidden => "forbidden",
        RefusalCode::NotFound => "not found",
        RefusalCode::Invalid => "invalid request",
        RefusalCode::Denied => "denied",
        RefusalCode::Unavailable => "unavailable",
        RefusalCode::Stale => "stale",
        RefusalCode::Internal => "internal error",
        RefusalCode::Policy => "refused by policy",
    };
    format!("{kind}: {}", refusal.message)
}

/// Builds the small tokio runtime one client command runs on. One thread is plenty for a
/// command that waits on the network; `bench e2e` builds its own multi-threaded one.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Runs one client command: connects to the system in `SHARDSCHED_DIR`, runs `work`, closes.
pub fn run<T, F, Fut>(work: F) -> Result<T>
where
    F: FnOnce(Arc<Client>) -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let dir = StateDir::from_env()?;
    runtime()?.block_on(async {
        let client = Arc::new(Client::connect(&dir).await?);
        let result = work(Arc::clone(&client)).await;
        client.close().await;
        result
    })
}
