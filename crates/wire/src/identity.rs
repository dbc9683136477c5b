//! Who a peer is, read from its certificate, and what each role may ask for.
//!
//! Every certificate the cluster CA issues carries exactly one identity, as a subject
//! alternative name URI:
//!
//! ```text
//! shardsched://<role>/<name>        e.g. shardsched://user/alice, shardsched://shard/batch
//! ```
//!
//! After the TLS handshake (which already proved the certificate chains to the cluster CA),
//! the transport crate (`shardsched-proto`'s `peer_of`) reads that URI back. Nothing in a message body ever names its sender: a job's
//! owner, a shard's queue, an admin's authority all come from here.
//!
//! Server certificates (roles [`Role::Coordinator`] and [`Role::Shard`]) also carry a DNS name,
//! `<name>.<role>.shardsched.internal` ([`server_name`]), which the client checks during the
//! handshake: a client that asks for shard `batch` cannot be answered by any other shard, and
//! a user certificate (client-auth only) cannot serve at all.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::IdentityError;
use crate::limits::NAME_BYTES_MAX;

/// The URI scheme of the identity SAN.
pub const IDENTITY_URI_SCHEME: &str = "shardsched";
/// The DNS suffix of server names (`.internal` is reserved for private use).
pub const SERVER_NAME_SUFFIX: &str = "shardsched.internal";
/// The conventional name of the coordinator's certificate.
pub const COORDINATOR_NAME: &str = "coordinator";

/// What a certificate holder is. (Its variant order is part of the frozen
/// [`HelloReply`](crate::msg::hello::HelloReply): append, never reorder.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Role {
    /// The coordinator: owns node ownership and the routing table; commands shards.
    Coordinator,
    /// A shard: one queue's scheduler. Its name is its queue's name.
    Shard,
    /// An administrator: everything a user may do, plus queue and node changes and
    /// cancelling anyone's job.
    Admin,
    /// A user: submits, reads status, cancels their own jobs.
    User,
    /// A node agent (`shardsched node`): runs the tasks of the jobs allocated on its node.
    /// Its name is its node's name. It reports to the coordinator and talks to the agents
    /// of the other nodes of a job it runs (PMI), and nothing else: it cannot act as a
    /// shard, a client or another node.
    Node,
}

/// The authority a request needs; see [`Role::may`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Read status: routes, jobs, queues, resources, one job's info.
    ReadStatus,
    /// Submit a job.
    Submit,
    /// Cancel a job the peer owns (the shard also checks the owner).
    CancelOwn,
    /// Cancel any job.
    CancelAny,
    /// Give a job an urgency above [`URGENCY_USER_MAX`](crate::limits::URGENCY_USER_MAX)
    /// (expedite it), at submit or later.
    RaiseUrgency,
    /// Read any job in full: its jobspec (command, environment), R and events. Others see
    /// a job's summary only ([`Peer::may_read_job`]).
    ReadAnyJob,
    /// Change queues: enable, disable, start, stop, reconfigure.
    AdminQueues,
    /// Change nodes: move between queues, drain, undrain.
    AdminNodes,
    /// A shard reporting to the coordinator: register, status, releases.
    ShardReport,
    /// The coordinator commanding a shard: assignments, moves, status fan-out.
    ShardCommand,
    /// A node agent reporting to the coordinator: register, heartbeats.
    AgentReport,
    /// The coordinator telling a node agent which shard owns its node.
    AgentOwner,
    /// A shard asking a node agent to launch, kill, report or show output.
    AgentLaunch,
    /// A node agent talking to another of the same job (PMI fences). The receiving agent
    /// checks that the sender's node is one of the job's.
    AgentPeer,
}

/// An authenticated peer: role and name from its certificate.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Peer {
    /// The certificate's role.
    pub role: Role,
    /// The certificate's name: a user or admin name, a queue name for a shard.
    pub name: String,
}

impl Role {
    /// Every role, in declaration order.
    pub const ALL: [Role; 5] = [
        Role::Coordinator,
        Role::Shard,
        Role::Admin,
        Role::User,
        Role::Node,
    ];

    /// The lowercase word used in certificates and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Coordinator => "coordinator",
            Role::Shard => "shard",
            Role::Admin => "admin",
            Role::User => "user",
            Role::Node => "node",
        }
    }

    /// Whether this role may perform `op`. The table is the whole policy of the wire; servers
    /// apply it to every request before their handler runs (see [`crate::rpc::serve`]), and a
    /// shard additionally checks a job's owner for [`Op::CancelOwn`].
    ///
    /// | op | user | admin | shard | coordinator |
    /// |---|---|---|---|---|
    /// | ReadStatus, Submit, CancelOwn | yes | yes | | |
    /// | CancelAny, RaiseUrgency, ReadAnyJob, AdminQueues, AdminNodes | | yes | | |
    /// | ShardReport | | | yes | |
    /// | ShardCommand | | | | yes |
    /// | AgentLaunch | | | yes | |
    /// | AgentOwner | | | | yes |
    ///
    /// and a node agent (role `node`) may only `AgentReport` and `AgentPeer`.
    pub fn may(self, op: Op) -> bool {
        match op {
            Op::ReadStatus | Op::Submit | Op::CancelOwn => matches!(self, Role::User | Role::Admin),
            Op::CancelAny
            | Op::RaiseUrgency
            | Op::ReadAnyJob
            | Op::AdminQueues
            | Op::AdminNodes => self == Role::Admin,
            Op::ShardReport => self == Role::Shard,
            Op::ShardCommand | Op::AgentOwner => self == Role::Coordinator,
            Op::AgentLaunch => self == Role::Shard,
            Op::AgentReport | Op::AgentPeer => self == Role::Node,
        }
    }

    /// Whether certificates of this role also serve (carry a DNS name and server-auth usage).
    pub fn serves(self) -> bool {
        matches!(self, Role::Coordinator | Role::Shard | Role::Node)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = IdentityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| IdentityError::BadRole(s.to_owned()))
    }
}

impl Op {
    /// A short description for refusals ("change queues").
    pub fn describe(self) -> &'static str {
        match self {
            Op::ReadStatus => "read status",
            Op::Submit => "submit jobs",
            Op::CancelOwn => "cancel their own jobs",
            Op::CancelAny => "cancel other users' jobs",
            Op::RaiseUrgency => "give a job an urgency above 16",
            Op::ReadAnyJob => "read other users' jobspecs",
            Op::AdminQueues => "change queues",
            Op::AdminNodes => "change nodes",
            Op::ShardReport => "report as a shard",
            Op::ShardCommand => "command shards",
            Op::AgentReport => "report as a node agent",
            Op::AgentOwner => "tell node agents their owner",
            Op::AgentLaunch => "launch tasks on a node",
            Op::AgentPeer => "talk to node agents as one",
        }
    }
}

impl Peer {
    /// A peer, checking the name.
    pub fn new(role: Role, name: &str) -> Result<Self, IdentityError> {
        check_name_for(role, name)?;
        Ok(Peer {
            role,
            name: name.to_owned(),
        })
    }

    /// The identity URI carried in this peer's certificate.
    pub fn uri(&self) -> String {
        format!("{IDENTITY_URI_SCHEME}://{}/{}", self.role, self.name)
    }

    /// Parses an identity URI (`shardsched://<role>/<name>`).
    pub fn from_uri(uri: &str) -> Result<Self, IdentityError> {
        let bad = || IdentityError::BadUri(uri.to_owned());
        let rest = uri
            .strip_prefix(IDENTITY_URI_SCHEME)
            .and_then(|r| r.strip_prefix("://"))
            .ok_or_else(bad)?;
        let (role, name) = rest.split_once('/').ok_or_else(bad)?;
        Peer::new(role.parse()?, name)
    }

    /// Whether this peer may perform `op`.
    pub fn may(&self, op: Op) -> bool {
        self.role.may(op)
    }

    /// Whether this peer may cancel a job owned by `owner` (a user or admin name).
    pub fn may_cancel(&self, owner: &str) -> bool {
        self.may(Op::CancelAny) || (self.may(Op::CancelOwn) && self.name == owner)
    }

    /// Whether this peer may read all of a job owned by `owner` — its jobspec (command,
    /// environment), R and events (which say where its output goes) — rather than its
    /// summary only: its owner and admins may (Slurm's `PrivateData=jobs`, Flux's guests).
    pub fn may_read_job(&self, owner: &str) -> bool {
        self.may(Op::ReadAnyJob) || (self.may(Op::ReadStatus) && self.name == owner)
    }
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.role, self.name)
    }
}

/// Checks a certificate name: 1 to [`NAME_BYTES_MAX`] bytes of ASCII letters, digits, `-`
/// and `_`, starting with a letter or digit. Names are DNS labels in server certificates.
pub fn check_name(name: &str) -> Result<(), IdentityError> {
    let ok = !name.is_empty()
        && name.len() <= NAME_BYTES_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(IdentityError::BadName(name.to_owned()))
    }
}

/// Checks a certificate name for `role`. Users' and admins' names are POSIX user names
/// (a node agent runs their jobs as the user the certificate names, exactly): they may also
/// hold `.` (`john.doe`), never as the first byte. The roles that serve (coordinator,
/// shard, node) keep [`check_name`]'s rule, their names being DNS labels.
pub fn check_name_for(role: Role, name: &str) -> Result<(), IdentityError> {
    match role {
        Role::User | Role::Admin => {
            let dotless = name.replace('.', "_");
            check_name(&dotless).map_err(|_| IdentityError::BadUserName(name.to_owned()))
        }
        Role::Coordinator | Role::Shard | Role::Node => check_name(name),
    }
}

/// The TLS server name of a serving peer: `<name>.<role>.shardsched.internal`, lowercase.
pub fn server_name(role: Role, name: &str) -> String {
    format!("{}.{role}.{SERVER_NAME_SUFFIX}", name.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_round_trip_and_bad_uris() {
        let alice = Peer::new(Role::User, "alice").expect("peer");
        assert_eq!(alice.uri(), "shardsched://user/alice");
        assert_eq!(Peer::from_uri(&alice.uri()).ok(), Some(alice));
        for bad in [
            "shardsched://user/",
            "shardsched://root/alice",
            "shardsched:/user/alice",
            "https://user/alice",
            "shardsched://user/a/b",
            "shardsched://user/-x",
        ] {
            assert!(Peer::from_uri(bad).is_err(), "{bad}");
        }
        assert!(check_name(&"a".repeat(NAME_BYTES_MAX)).is_ok());
        assert!(Peer::new(Role::User, "john.doe").is_ok());
        assert!(Peer::from_uri("shardsched://user/john.doe").is_ok());
        assert!(Peer::new(Role::User, ".hidden").is_err());
        assert!(
            Peer::new(Role::Shard, "a.b").is_err(),
            "a shard's name is a DNS label"
        );
        assert!(check_name(&"a".repeat(NAME_BYTES_MAX + 1)).is_err());
    }

    #[test]
    fn policy_table() {
        assert!(Role::User.may(Op::Submit) && !Role::User.may(Op::AdminQueues));
        assert!(Role::Admin.may(Op::AdminNodes) && Role::Admin.may(Op::CancelAny));
        assert!(!Role::Shard.may(Op::Submit) && Role::Shard.may(Op::ShardReport));
        assert!(Role::Coordinator.may(Op::ShardCommand) && !Role::Coordinator.may(Op::Submit));
        // A node agent reports and talks to other agents, and may do nothing else.
        for op in [
            Op::ReadStatus,
            Op::Submit,
            Op::CancelOwn,
            Op::CancelAny,
            Op::ReadAnyJob,
            Op::AdminQueues,
            Op::AdminNodes,
            Op::ShardReport,
            Op::ShardCommand,
            Op::AgentOwner,
            Op::AgentLaunch,
        ] {
            assert!(!Role::Node.may(op), "{op:?}");
        }
        assert!(Role::Node.may(Op::AgentReport) && Role::Node.may(Op::AgentPeer));
        assert!(Role::Shard.may(Op::AgentLaunch) && !Role::User.may(Op::AgentLaunch));
        assert!(Role::Node.serves());
        let bob = Peer::new(Role::User, "bob").expect("peer");
        assert!(bob.may_cancel("bob") && !bob.may_cancel("alice"));
        let root = Peer::new(Role::Admin, "root").expect("peer");
        assert!(root.may_cancel("alice"));
        assert!(bob.may_read_job("bob") && !bob.may_read_job("alice"));
        assert!(root.may_read_job("alice"));
        let shard = Peer::new(Role::Shard, "bob").expect("peer");
        assert!(!shard.may_read_job("bob"), "a shard is no user");
        assert_eq!(
            server_name(Role::Shard, "Batch"),
            "batch.shard.shardsched.internal"
        );
    }
}
