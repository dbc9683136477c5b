//! A client of a running shardsched system: how a `shardsched` command (and `up`, the demo,
//! the end-to-end benchmarks) finds the system and talks to it.
//!
//! # Where things are
//!
//! Everything a client needs is in one directory, named by `SHARDSCHED_DIR`, and by default
//! the one `shardsched up` uses ([`StateDir::default_root`]; the layout is
//! [`shardsched_proto::state_dir`]'s): the coordinator's address in `coordinator/address`,
//! this user's certificate in `client/`. So after `shardsched up`, every command works with
//! no flags, and a second cluster (or a test) is just another directory.
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
//!
//! A `submit` skips the coordinator when it can: the routing table the last command got is
//! kept in the client's directory for a few seconds ([`route_cache`]), so a burst of submits
//! makes one connection each, to the shard, and asks the coordinator again only when the
//! table is old or a shard does not take the job at the address it names.
//!
//! A coordinator or shard that restarts is waited out ([`retry`]): the first connection and
//! every later one are retried on a new connection for a bounded time, and a client that
//! already has a routing table keeps sending jobs to the shards it names while the
//! coordinator is away.

//!
//! # What people read
//!
//! [`output`] writes to people: tables and messages whose every cell is escaped, times and
//! durations, and writes that end quietly on a closed pipe.

pub mod output;
pub mod retry;
pub mod route_cache;
pub mod submit;

pub use shardsched_proto::state_dir::{DIR_ENV, StateDir};

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use shardsched_proto::identity::COORDINATOR_NAME;
use shardsched_proto::limits::IDEMPOTENCY_KEY_BYTES;
use shardsched_proto::msg::agent::JobSignature;
use shardsched_proto::msg::client_shard::IdempotencyKey;
use shardsched_proto::msg::{
    JobId, JobList, JobsQuery, NodeStatus, Refusal, RefusalCode, Route, RouteTable, client_coord,
    client_shard,
};
use shardsched_proto::{Credentials, Error as WireError, Peer, Role, Rpc, Session, connect};

use self::retry::{Retry, retryable, safe_to_repeat};
use self::route_cache::RouteCache;

/// How long a client waits for the coordinator's (or a shard's) handshake and hello before
/// saying it is unreachable. Shorter than the wire's own handshake bound because a person is
/// waiting, and on loopback a live server answers in milliseconds.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long closing gives the endpoint to send its close frames. Every answer is in by
/// then (each request awaited its own), so nothing is lost by not waiting for the server's
/// acknowledgement (the whole draining period, hundreds of ms, which was most of a short
/// command's wall time); should the frame not go out in time (a loaded host), the server
/// sees an idle timeout instead of a close, and loses nothing either.
pub const CLOSE_WAIT: Duration = Duration::from_millis(3);

/// A client of one running system: a connection to the coordinator and, lazily, one to each
/// shard it needs. Cheap to share (`Arc`) between tasks; requests on one connection run
/// concurrently, each on its own QUIC stream. A connection that broke is opened again on the
/// next request, and requests ride out a restart ([`retry`]).
pub struct Client {
    endpoint: quinn::Endpoint,
    coordinator_addr: SocketAddr,
    /// Where the address came from, for errors (`" (address from FILE)"`, or empty).
    origin: String,
    /// Say on standard error when a request is retried (commands), or not (`up`).
    announce_retries: bool,
    /// The coordinator connection; `None` (or closed) until the next request dials again.
    coordinator: tokio::sync::Mutex<Option<Session>>,
    /// Who the coordinator said we are, from the first connection.
    me: Option<Peer>,
    /// The last routing table the coordinator gave: while it is away, jobs still go to the
    /// shards it named ([`Client::known_routes`]).
    routes: std::sync::Mutex<Option<RouteTable>>,
    /// Open shard connections by queue, with the address they were opened to (a restarted
    /// shard comes back at a new address, which invalidates the entry).
    shards: tokio::sync::Mutex<HashMap<String, Session>>,
    /// Signs the jobspecs this client submits (node agents run a job as its signer);
    /// `None` when the certificate's key cannot sign (the submit is then unsigned).
    signer: Option<shardsched_proto::sign::JobSigner>,
    /// Where the routing tables this client gets are kept for the next command (a client
    /// of a state directory), if anywhere.
    route_cache: Option<RouteCache>,
}

impl Client {
    /// Connects to the coordinator named in `dir` with the certificate in `dir`, retrying
    /// for up to [`RETRY_WINDOW`](retry::RETRY_WINDOW) while it does not answer (and saying
    /// so on standard error).
    pub async fn connect(dir: &StateDir) -> Result<Client> {
        Client::open(dir)?.dial_coordinator().await
    }

    /// A client of the system in `dir` that has not dialled yet: the coordinator is
    /// reached on the first request that needs it ([`Client::coordinator`]), so a command
    /// that finds a fresh routing table in the cache ([`Client::cached_routes`]) talks to
    /// its shard alone. [`Client::me`] stays unknown.
    pub fn open(dir: &StateDir) -> Result<Client> {
        let addr = dir.coordinator_address()?;
        let creds = dir.credentials()?;
        let origin = format!(" (address from {})", dir.address_file().display());
        let mut client = Client::new(addr, &creds, origin, true)?;
        client.route_cache = Some(RouteCache::new(&dir.client_dir(), addr));
        Ok(client)
    }

    /// Connects to the coordinator at `addr` with `creds`, retrying quietly.
    pub async fn connect_with(addr: SocketAddr, creds: &Credentials) -> Result<Client> {
        Client::new(addr, creds, String::new(), false)?
            .dial_coordinator()
            .await
    }

    fn new(
        addr: SocketAddr,
        creds: &Credentials,
        origin: String,
        announce_retries: bool,
    ) -> Result<Client> {
        let bind = match addr {
            SocketAddr::V4(_) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
            SocketAddr::V6(_) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
        };
        let endpoint = shardsched_proto::tls::client_endpoint(creds, bind)
            .context("setting up the client's QUIC endpoint")?;
        Ok(Client {
            endpoint,
            coordinator_addr: addr,
            origin,
            announce_retries,
            coordinator: tokio::sync::Mutex::new(None),
            me: None,
            routes: std::sync::Mutex::new(None),
            shards: tokio::sync::Mutex::new(HashMap::new()),
            signer: shardsched_proto::sign::JobSigner::new(creds).ok(),
            route_cache: None,
        })
    }

    /// Dials the coordinator, retrying for up to [`RETRY_WINDOW`](retry::RETRY_WINDOW)
    /// while it does not answer, and learns who it says we are.
    async fn dial_coordinator(mut self) -> Result<Client> {
        let client = &mut self;
        let mut retry = Retry::new();
        let session = loop {
            match client.coordinator_session().await {
                Ok(session) => break session,
                Err(e) if retryable(&e) && client.wait_to_retry(&mut retry, &e).await => {}
                Err(e) => return Err(client.unreachable(e, &retry)),
            }
        };
        client.me = session.seen_as().cloned();
        Ok(self)
    }

    /// This client's signature of `jobspec_json`, if its certificate can sign.
    pub fn sign(&self, jobspec_json: &str) -> Result<Option<JobSignature>> {
        match &self.signer {
            None => Ok(None),
            Some(signer) => Ok(Some(
                signer.sign(jobspec_json).context("signing the jobspec")?,
            )),
        }
    }

    /// Who the coordinator says we are (from our certificate).
    pub fn me(&self) -> Option<&Peer> {
        self.me.as_ref()
    }

    /// Asks the coordinator, on a new connection if the last one broke. A failure that may
    /// go away by itself ([`retryable`]) is retried for up to
    /// [`RETRY_WINDOW`](retry::RETRY_WINDOW) when nothing was sent or the request is
    /// [`safe_to_repeat`].
    pub async fn coordinator(
        &self,
        req: &client_coord::Request,
    ) -> Result<client_coord::Response, WireError> {
        let mut retry = Retry::new();
        loop {
            match self.coordinator_once(req).await {
                Ok(answer) => return Ok(answer),
                Err((e, sent))
                    if retryable(&e)
                        && (!sent || safe_to_repeat(req))
                        && self.wait_to_retry(&mut retry, &e).await => {}
                Err((e, _)) => return Err(e),
            }
        }
    }

    /// One attempt: the error, and whether the request may have reached the coordinator.
    async fn coordinator_once(
        &self,
        req: &client_coord::Request,
    ) -> Result<client_coord::Response, (WireError, bool)> {
        let session = self.coordinator_session().await.map_err(|e| (e, false))?;
        match session.request(req).await {
            Err(e) if retryable(&e) => {
                // That connection is done for: the next attempt dials again.
                session.close();
                Err((e, true))
            }
            other => other.map_err(|e| (e, true)),
        }
    }

    /// The open coordinator connection, or a new one (one attempt).
    async fn coordinator_session(&self) -> Result<Session, WireError> {
        let mut current = self.coordinator.lock().await;
        if let Some(session) = current.as_ref()
            && session.connection().close_reason().is_none()
        {
            return Ok(session.clone());
        }
        let session = dial(
            &self.endpoint,
            self.coordinator_addr,
            Role::Coordinator,
            COORDINATOR_NAME,
        )
        .await?;
        *current = Some(session.clone());
        Ok(session)
    }

    /// Says why a retry comes (for commands), then waits for it; `false` when the retry
    /// window is spent.
    async fn wait_to_retry(&self, retry: &mut Retry, e: &WireError) -> bool {
        if retry.spent() {
            return false;
        }
        if self.announce_retries {
            output::say(format_args!(
                "the coordinator at {} does not answer ({e}); retrying (for up to {} s)",
                self.coordinator_addr,
                retry::RETRY_WINDOW.as_secs()
            ));
        }
        retry.wait().await
    }

    /// The error of a coordinator that could not be reached.
    fn unreachable(&self, e: WireError, retry: &Retry) -> anyhow::Error {
        anyhow::Error::new(e).context(format!(
            "cannot reach the coordinator at {}{} (tried for {} s): is `shardsched up` running?",
            self.coordinator_addr,
            self.origin,
            retry.elapsed().as_secs()
        ))
    }

    /// The coordinator's routing table, retried as [`Client::coordinator`] does; kept as
    /// [`Client::known_routes`].
    pub async fn routes(&self) -> Result<RouteTable> {
        self.routes_from(self.coordinator(&client_coord::Request::Routes).await)
    }

    /// The coordinator's routing table, one attempt (on a new connection if the last one
    /// broke): for callers that retry themselves and fall back on
    /// [`Client::known_routes`].
    pub async fn routes_now(&self) -> Result<RouteTable> {
        let answer = self
            .coordinator_once(&client_coord::Request::Routes)
            .await
            .map_err(|(e, _)| e);
        self.routes_from(answer)
    }

    fn routes_from(&self, answer: Result<client_coord::Response, WireError>) -> Result<RouteTable> {
        match answer
            .map_err(|e| wire_error(e, &format!("coordinator at {}", self.coordinator_addr)))?
        {
            client_coord::Response::Routes(table) => {
                if let Some(cache) = &self.route_cache {
                    cache.store(&table, output::now_ms());
                }
                *self.routes.lock().unwrap_or_else(PoisonError::into_inner) = Some(table.clone());
                Ok(table)
            }
            other => bail!("the coordinator answered a routes request with {other:?}"),
        }
    }

    /// The routing table a command of this state directory got from this coordinator less
    /// than [`ROUTES_FRESH`](route_cache::ROUTES_FRESH) ago, if any (then also
    /// [`Client::known_routes`]). Only a guess at where the shards are: a caller that
    /// cannot reach a shard at it, or is refused, calls [`Client::forget_cached_routes`]
    /// and asks the coordinator.
    pub fn cached_routes(&self) -> Option<RouteTable> {
        let table = self.route_cache.as_ref()?.load(output::now_ms())?;
        *self.routes.lock().unwrap_or_else(PoisonError::into_inner) = Some(table.clone());
        Some(table)
    }

    /// Drops the cached routing table, here and in the state directory.
    pub fn forget_cached_routes(&self) {
        if let Some(cache) = &self.route_cache {
            cache.clear();
        }
        *self.routes.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// The last routing table the coordinator gave this client, if any: where the shards
    /// were, to reach them while the coordinator is away.
    pub fn known_routes(&self) -> Option<RouteTable> {
        self.routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Every node's row (or `queue`'s owned nodes'), in cluster order, asked a page at a
    /// time: a reply carries what fits one frame and says where the next page starts.
    pub async fn resources(&self, queue: Option<&str>) -> Result<Vec<NodeStatus>> {
        let mut rows = Vec::new();
        let mut start = 0;
        loop {
            let request = client_coord::Request::Resources {
                queue: queue.map(str::to_owned),
                start,
            };
            match self
                .coordinator(&request)
                .await
                .map_err(|e| wire_error(e, "coordinator"))?
            {
                client_coord::Response::Resources { nodes, next } => {
                    rows.extend(nodes);
                    match next {
                        Some(next) if next > start => start = next,
                        Some(_) => bail!("the coordinator's resource pages do not advance"),
                        None => return Ok(rows),
                    }
                }
                other => bail!("the coordinator answered resource list with {other:?}"),
            }
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
                anyhow::Error::new(e).context(format!(
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

    /// Closes every connection and gives the endpoint [`CLOSE_WAIT`] to tell the servers,
    /// so that they log an orderly close rather than an idle timeout.
    pub async fn close(&self) {
        for session in self.shards.lock().await.values() {
            session.close();
        }
        if let Some(session) = self.coordinator.lock().await.as_ref() {
            session.close();
        }
        let _ = tokio::time::timeout(CLOSE_WAIT, self.endpoint.wait_idle()).await;
    }
}

/// A fresh random idempotency key, chosen once per submit so that its retries are safe.
pub fn new_key() -> IdempotencyKey {
    let mut key = [0u8; IDEMPOTENCY_KEY_BYTES];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut key);
    IdempotencyKey(key)
}

/// Connects with [`CONNECT_TIMEOUT`].
async fn dial(
    endpoint: &quinn::Endpoint,
    addr: SocketAddr,
    role: Role,
    name: &str,
) -> Result<Session, WireError> {
    match tokio::time::timeout(CONNECT_TIMEOUT, connect(endpoint, addr, role, name)).await {
        Ok(result) => result,
        Err(_) => Err(WireError::Timeout {
            what: "connecting",
            after: CONNECT_TIMEOUT,
        }),
    }
}

/// Checks `request` against the bounds every server checks ([`Rpc::check`]: reasons,
/// names, node lists, jobspec size), so that a person gets the error before anything is
/// sent, in the server's words.
pub fn check_locally(request: &impl Rpc) -> Result<()> {
    request
        .check()
        .map_err(|refusal| anyhow!("{}", refusal.message))
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
    run_on(true, work)
}

/// [`run`] for a command that may not need the coordinator ([`Client::open`]): it is
/// dialled on the first request that does.
pub fn run_lazily<T, F, Fut>(work: F) -> Result<T>
where
    F: FnOnce(Arc<Client>) -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    run_on(false, work)
}

fn run_on<T, F, Fut>(dial: bool, work: F) -> Result<T>
where
    F: FnOnce(Arc<Client>) -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let dir = StateDir::from_env()?;
    runtime()?.block_on(async {
        let client = Client::open(&dir)?;
        let client = Arc::new(if dial {
            client.dial_coordinator().await?
        } else {
            client
        });
        let result = work(Arc::clone(&client)).await;
        client.close().await;
        result
    })
}

#[cfg(test)]
mod tests;
