//! Every bound of the wire, with its unit in its name or its type.
//!
//! Nothing that comes from the network may grow without one of these limits. They are
//! constants rather than configuration on purpose: both ends of a connection must agree on
//! them, and a change is a protocol change (bump [`PROTOCOL_VERSION`](crate::PROTOCOL_VERSION)
//! when one shrinks).

use std::time::Duration;

/// Size of a frame header: the payload length as a big-endian `u32`.
pub const FRAME_HEADER_BYTES: usize = 4;

/// Largest frame payload a peer may announce: 16 MiB. A header announcing more is refused
/// before any payload byte is read or any buffer is allocated. It is also the decoder's
/// byte limit, so no message can make the decoder reserve more than this.
pub const FRAME_BYTES_MAX: usize = 16 * 1024 * 1024;

/// The most a frame reader reserves before payload bytes arrive, in bytes; the buffer grows
/// with what is received. (The announced length is the peer's word, not its bytes.)
pub const FRAME_READ_CHUNK_BYTES: usize = 64 * 1024;

/// Request bytes one connection may have in flight at a server (read, decoded, being
/// handled): a request whose frame would go past it waits (within
/// [`FRAME_READ_TIMEOUT`]) for earlier ones to finish, and meanwhile QUIC flow control stops
/// the peer's sending. Without it, [`STREAMS_CONCURRENT_MAX`] streams of
/// [`FRAME_BYTES_MAX`] each could hold 16 GiB.
pub const CONNECTION_REQUEST_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Request bytes one peer (one certificate, over all its connections) may have in flight at
/// a server, as [`CONNECTION_REQUEST_BYTES_MAX`] does for one connection.
pub const PEER_REQUEST_BYTES_MAX: usize = 256 * 1024 * 1024;

/// Bytes a peer may send on one connection beyond what the receiver has read (QUIC's
/// connection-level flow-control window): what a connection can make QUIC buffer.
pub const CONNECTION_RECEIVE_WINDOW_BYTES: u32 = 8 * 1024 * 1024;

/// Longest hello, in bytes (a version and a software string).
pub const HELLO_BYTES_MAX: usize = 4096;

/// How long a peer may take to deliver one whole frame (header and payload) once the stream
/// is open. A stream that dribbles bytes slower than this is reset.
pub const FRAME_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a client waits for the answer to one request, from opening the stream to the
/// last byte of the response. Covers the server's work (a journal fsync, a match).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a QUIC + TLS handshake and the hello exchange may take together.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the refusing side waits for its refusal to reach the peer before closing the
/// connection (version mismatch, missing hello).
pub const CLOSE_LINGER: Duration = Duration::from_millis(500);

/// A connection with no traffic for this long is closed. Keep-alives keep healthy
/// long-lived connections (shard to coordinator) open.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Interval between QUIC keep-alive pings on an otherwise idle connection.
pub const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(10);

/// Requests a peer may have in flight on one connection at once (bidirectional streams).
/// QUIC flow control enforces it: the peer cannot open stream number `N + 1` until one of
/// the first `N` is done.
pub const STREAMS_CONCURRENT_MAX: u32 = 1024;

/// Longest certificate name (a queue, shard, user or admin name), in bytes. A name is also a
/// DNS label in server certificates, hence 63.
pub const NAME_BYTES_MAX: usize = 63;

/// Largest jobspec (canonical JSON text) a submit may carry, in bytes: 1 MiB.
pub const JOBSPEC_BYTES_MAX: usize = 1024 * 1024;

/// Longest free-text message in a [`Refusal`](crate::msg::Refusal), in bytes; longer ones are
/// cut when built with [`Refusal::new`](crate::msg::Refusal::new).
pub const REFUSAL_MESSAGE_BYTES_MAX: usize = 4096;

/// Validity of the cluster CA certificate, in days (about ten years).
pub const CA_VALIDITY_DAYS: i64 = 3653;

/// Validity of an issued (leaf) certificate, in days. `shardsched up` re-issues its own
/// certificates on every start; user and admin certificates are re-issued by an admin.
pub const CERT_VALIDITY_DAYS: i64 = 365;

/// Back-dating of `not_before` on every issued certificate, in days, so that a peer whose
/// clock is slightly behind the issuer's still accepts a fresh certificate.
pub const CERT_BACKDATE_DAYS: i64 = 1;

/// Most jobs one list response carries; a server stops there and sets `truncated`.
pub const JOBS_PER_RESPONSE_MAX: usize = 50_000;

/// Most states one job list query may name (there are five).
pub const JOB_STATES_PER_QUERY_MAX: usize = 5;

/// Most job ids one request may name (cancel).
pub const IDS_PER_REQUEST_MAX: usize = 10_000;

/// Longest reason an admin may give (`resource drain|down`, `queue disable`), in bytes. A
/// reason travels with every node it flags (registrations, moves, status reports, both
/// journals, `resource list`), so it is a sentence, not a document.
pub const REASON_BYTES_MAX: usize = 256;

/// Most bytes the coordinator's node flags may take together (each flagged node's name and
/// reasons): a request that would go past it is refused. Every message that carries the
/// flags of many nodes (a registration's assignment, a move's `Acquire`, a shard's status
/// report and journal record) stays far below a frame whatever the cluster's size.
pub const NODE_FLAGS_BYTES_MAX: usize = 4 * 1024 * 1024;

/// Longest node name a request may carry, in bytes (a DNS name).
pub const NODE_NAME_BYTES_MAX: usize = 253;

/// Most node names one request may carry (a hostlist expands to at most as many).
pub const NODES_PER_REQUEST_MAX: usize = 1_000_000;

/// Longest text field of a queue specification (`queue add|update`: a hostlist, a
/// duration, a policy name), in bytes.
pub const SPEC_TEXT_BYTES_MAX: usize = 64 * 1024;

/// Longest job name in a job list, in bytes; a longer one (it comes from the command) is
/// cut, ending in `…`.
pub const JOB_NAME_BYTES_MAX: usize = 128;

/// Most bytes of rows one list reply carries: the frame less room for the rest of the
/// message. A longer list is paged (`resource list`) or cut with its `truncated` marker
/// (job lists, moves): never dropped for being too large.
pub const LIST_REPLY_BYTES_MAX: usize = FRAME_BYTES_MAX - 64 * 1024;

/// Highest urgency a job may have (Flux's scale, 0..=31). Urgency orders a queue's pending
/// jobs (higher first, then by submit time); 0 holds a job; 31 expedites it. See
/// [`URGENCY_DEFAULT`], [`URGENCY_USER_MAX`].
pub const URGENCY_MAX: u8 = 31;

/// The urgency of a job submitted without one, and of a job released from a hold.
pub const URGENCY_DEFAULT: u8 = 16;

/// Highest urgency a user (not an admin) may give a job: above it is an admin's
/// ([`Op::RaiseUrgency`](crate::Op::RaiseUrgency)), as in Flux.
pub const URGENCY_USER_MAX: u8 = 16;

/// The urgency that holds a job: it stays pending and is not considered until its
/// urgency is raised (`job release`, `job urgency`).
pub const URGENCY_HOLD: u8 = 0;

/// Most elements a job array may have, and the bound on its indices, whatever the
/// configuration says (its `array_elements_max`, 100,000 by default, is at most this).
pub const ARRAY_ELEMENTS_MAX: u32 = 1_000_000;

/// The configuration's `array_elements_max` when it names none (Slurm's `MaxArraySize`
/// default is 1,001; a parameter sweep of 100,000 is ordinary here).
pub const ARRAY_ELEMENTS_DEFAULT: u32 = 100_000;

/// Most comma-separated ranges an array's indices may be written as (`1-3,7,9-20:2`).
pub const ARRAY_RANGES_MAX: usize = 1024;

/// Longest idempotency key, in bytes.
pub const IDEMPOTENCY_KEY_BYTES: usize = 16;

/// Most jobs a node agent keeps in its table (running, stopping, or ended and not yet
/// acknowledged by their shard), hence in one report. A launch past it is refused.
pub const AGENT_JOBS_MAX: usize = 4096;

/// Longest a node agent holds a shard's renewal waiting for its report to change, ms
/// (`shard_node::Request::Renew.hold_ms`): well within a lease, and within the time a shard
/// waits for an answer.
pub const RENEW_HOLD_MS_MAX: u32 = 2_000;

/// Most tasks (ranks) of one job on one node.
pub const TASKS_PER_NODE_MAX: u32 = 1024;

/// Most nodes one launch names (the job's nodes, for its hostfile and PMI).
pub const JOB_NODES_MAX: usize = 65_536;

/// Most `SHARDSCHED_*` variables a shard may add to a launch.
pub const LAUNCH_ENV_VARS_MAX: usize = 64;

/// Longest variable (name and value together) a shard may add to a launch, in bytes.
pub const LAUNCH_ENV_VAR_BYTES_MAX: usize = 8 * 1024;

/// Longest R a launch carries, in bytes.
pub const R_BYTES_MAX: usize = 4 * 1024 * 1024;

/// Longest certificate (PEM) a signed jobspec carries, in bytes.
pub const CERT_PEM_BYTES_MAX: usize = 16 * 1024;

/// Longest signature of a jobspec, in bytes (an ECDSA P-256 signature, ASN.1, is at most 72).
pub const SIGNATURE_BYTES_MAX: usize = 512;

/// Longest reason a shard gives a kill, in bytes (it ends in the job's status).
pub const KILL_REASON_BYTES_MAX: usize = 1024;

/// Most bytes of a task's output one answer carries.
pub const OUTPUT_CHUNK_BYTES_MAX: u32 = 1024 * 1024;

/// Longest PMI key, in bytes (MPICH's PMI-1 `PMI_KVS_Get_key_length_max`).
pub const PMI_KEY_BYTES_MAX: usize = 64;

/// Longest PMI value, in bytes (MPICH's PMI-1 `PMI_KVS_Get_value_length_max`).
pub const PMI_VALUE_BYTES_MAX: usize = 1024;

/// Most bytes of keys and values one PMI fence carries between agents (and one job's
/// key-value space holds on a node).
pub const PMI_KVS_BYTES_MAX: usize = 4 * 1024 * 1024;

/// Most jobs one dependency question names (a shard asks about more in several).
pub const DEPENDENCY_TARGETS_PER_ASK_MAX: usize = 4096;

/// Most limits set at once (`[limits]` and `limits set` together), entries.
pub const LIMITS_MAX: usize = 1024;

/// Largest value a limit may have (jobs, nodes or cores).
pub const LIMIT_VALUE_MAX: u64 = 1 << 40;

/// Most users one allowance report or grant message names (a shard with more users under
/// a spanning limit reports the rest in its next report).
pub const ALLOWANCE_USERS_PER_REPORT_MAX: usize = 4096;

/// Most users the coordinator's fair-share usage table keeps, one usage batch names and one
/// factor table carries (docs/POLICIES.md, "Fair-share"): past it the coordinator forgets
/// the users with the least decayed usage (their factor is about 1 anyway), and a shard
/// seals a batch early.
pub const FAIRSHARE_USERS_MAX: usize = 4096;

/// A fair-share factor of 1, in the wire's fixed point (parts per million).
pub const FAIRSHARE_FACTOR_ONE: u32 = 1_000_000;

/// Largest fair-share or urgency weight (`[fairshare] weight`, `urgency_weight`): a
/// priority (weight × factor + urgency weight × 31) then stays far inside an `i64`.
pub const FAIRSHARE_WEIGHT_MAX: u64 = 1 << 40;
