//! What node agents (`shardsched node`) and their peers say about jobs on a node: who owns
//! the node, what a shard asks an agent to launch, how a job's processes ended, and the
//! agent's report of its table.
//!
//! The requests that carry these are in [`node_coord`](super::node_coord) (agent →
//! coordinator), [`coord_node`](super::coord_node) (coordinator → agent),
//! [`shard_node`](super::shard_node) (shard → agent) and [`node_node`](super::node_node)
//! (agent → agent).

use std::fmt;
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::bounds;
use super::common::{Generation, JobId, Refusal, RefusalCode};
use crate::limits::{
    CERT_PEM_BYTES_MAX, JOB_NODES_MAX, JOBSPEC_BYTES_MAX, KILL_REASON_BYTES_MAX,
    LAUNCH_ENV_VAR_BYTES_MAX, LAUNCH_ENV_VARS_MAX, NODE_NAME_BYTES_MAX, R_BYTES_MAX,
    SIGNATURE_BYTES_MAX, TASKS_PER_NODE_MAX,
};

/// Which shard owns a node, at which generation: what the coordinator tells the node's
/// agent, which launches only for that shard at that generation.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeOwner {
    /// The owning queue (its shard's certificate name).
    pub queue: String,
    /// The node's generation when that queue got it.
    pub generation: Generation,
}

/// Why the coordinator tells an agent its owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OwnerChange {
    /// The answer to the agent's registration: the owner as of the node's last hand-over.
    Registered,
    /// A move's `Acquire`: the recipient owns the node from now on.
    Acquired,
    /// A cancelled move gave the node back to its donor, at one more generation.
    Reclaimed,
    /// A queue table change gave the node, which no queue owned, to a queue whose
    /// definition grew (`queue update --nodes`, `queue add`, `reload`).
    Granted,
}

/// A jobspec with its owner's signature: what lets an agent run code as that user.
///
/// The client signs the exact jobspec text with the private key of its certificate at
/// submit; the agent checks that `cert_pem` chains to the cluster CA, that the signature
/// verifies under its key, and runs the tasks as the user the certificate names. A shard
/// relays it and cannot forge one (Flux's IMP model).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedJobspec {
    /// The jobspec as submitted (canonical JSON): the command, working directory and
    /// environment come from here, never from the shard.
    pub jobspec_json: String,
    /// The submitting user's certificate (PEM).
    pub cert_pem: String,
    /// ECDSA P-256 SHA-256 signature (ASN.1 DER) of [`signed_bytes`]`(jobspec_json)`.
    pub signature: Vec<u8>,
}

/// A submit's signature of its jobspec: what the shard keeps with the job (journaled) and
/// relays, with the jobspec, in every launch ([`SignedJobspec`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSignature {
    /// The submitting user's certificate (PEM), at most
    /// [`CERT_PEM_BYTES_MAX`](crate::limits::CERT_PEM_BYTES_MAX) bytes.
    pub cert_pem: String,
    /// ECDSA P-256 SHA-256 signature (ASN.1 DER) of [`signed_bytes`] of the jobspec, at
    /// most [`SIGNATURE_BYTES_MAX`](crate::limits::SIGNATURE_BYTES_MAX) bytes.
    pub signature: Vec<u8>,
}

impl JobSignature {
    /// Its bounds.
    pub fn check(&self) -> Result<(), Refusal> {
        bounds::text("the certificate", &self.cert_pem, CERT_PEM_BYTES_MAX)?;
        if self.signature.len() > SIGNATURE_BYTES_MAX {
            return Err(invalid(format!(
                "the signature is {} bytes, more than the {SIGNATURE_BYTES_MAX}-byte limit",
                self.signature.len()
            )));
        }
        Ok(())
    }
}

impl SignedJobspec {
    /// `jobspec_json` with its signature.
    pub fn new(jobspec_json: &str, signature: &JobSignature) -> SignedJobspec {
        SignedJobspec {
            jobspec_json: jobspec_json.to_owned(),
            cert_pem: signature.cert_pem.clone(),
            signature: signature.signature.clone(),
        }
    }

    /// Its signature alone.
    pub fn signature(&self) -> JobSignature {
        JobSignature {
            cert_pem: self.cert_pem.clone(),
            signature: self.signature.clone(),
        }
    }
}

/// The bytes a jobspec signature covers: a fixed label, then the jobspec text. The label
/// keeps a signature over a jobspec from being valid for anything else signed by the same
/// key.
pub fn signed_bytes(jobspec_json: &str) -> Vec<u8> {
    let mut bytes = b"shardsched jobspec v1\0".to_vec();
    bytes.extend_from_slice(jobspec_json.as_bytes());
    bytes
}

/// One node of a job, as a launch describes it to every agent of the job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobNode {
    /// The node.
    pub node: String,
    /// Where its agent listens (for PMI fences between agents).
    pub agent: SocketAddr,
    /// Its first task rank.
    pub first_rank: u32,
    /// How many tasks run there.
    pub ntasks: u32,
    /// The core ids allocated there.
    pub cores: Vec<u32>,
    /// The GPU ids allocated there.
    pub gpus: Vec<u32>,
}

/// The variable of [`NodeLaunch::env`] that names the array a job is an element of (`ID`
/// of `ID[N]`); the agent fills output templates' `{{array_id}}` with it.
pub const ARRAY_ID_VAR: &str = "SHARDSCHED_ARRAY_ID";
/// The variable of [`NodeLaunch::env`] with the job's index in its array (`N` of `ID[N]`).
pub const ARRAY_INDEX_VAR: &str = "SHARDSCHED_ARRAY_INDEX";

/// A shard's request that an agent start its share of a job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeLaunch {
    /// The job.
    pub job: JobId,
    /// The node's generation the shard holds: must be the agent's owner's.
    pub generation: Generation,
    /// The jobspec, signed by its owner.
    pub signed: SignedJobspec,
    /// Every node of the job, in node-rank order; this agent's is `nodes[node_rank]`.
    pub nodes: Vec<JobNode>,
    /// This node's index in `nodes`.
    pub node_rank: u32,
    /// The time limit, ms (0: none).
    pub time_limit_ms: u64,
    /// SIGTERM-to-SIGKILL grace, ms.
    pub kill_grace_ms: u64,
    /// `SHARDSCHED_*` variables the shard adds (job id, queue, nodelist…); any other name
    /// is refused: the job's own environment comes from the signed jobspec.
    pub env: Vec<(String, String)>,
    /// The job's RFC 20 R (JSON).
    pub r_json: String,
}

impl NodeLaunch {
    /// How many tasks the whole job runs.
    pub fn ntasks(&self) -> u64 {
        self.nodes.iter().map(|n| u64::from(n.ntasks)).sum()
    }

    /// The value of the variable `name` the shard added, if it did.
    pub fn env_value(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// This agent's entry in [`NodeLaunch::nodes`].
    pub fn this_node(&self) -> Option<&JobNode> {
        usize::try_from(self.node_rank)
            .ok()
            .and_then(|i| self.nodes.get(i))
    }

    /// The bounds of a launch, checked by the agent before anything else.
    pub fn check(&self) -> Result<(), Refusal> {
        bounds::text("the jobspec", &self.signed.jobspec_json, JOBSPEC_BYTES_MAX)?;
        self.signed.signature().check()?;
        bounds::text("the R", &self.r_json, R_BYTES_MAX)?;
        if self.nodes.is_empty() || self.nodes.len() > JOB_NODES_MAX {
            return Err(invalid(format!(
                "a launch names {} nodes (1 to {JOB_NODES_MAX})",
                self.nodes.len()
            )));
        }
        for node in &self.nodes {
            bounds::text("a node name", &node.node, NODE_NAME_BYTES_MAX)?;
            if node.ntasks > TASKS_PER_NODE_MAX {
                return Err(invalid(format!(
                    "{} tasks on {}, more than the limit of {TASKS_PER_NODE_MAX}",
                    node.ntasks, node.node
                )));
            }
        }
        if self.this_node().is_none() {
            return Err(invalid(format!(
                "node rank {} of a job on {} nodes",
                self.node_rank,
                self.nodes.len()
            )));
        }
        if self.env.len() > LAUNCH_ENV_VARS_MAX {
            return Err(invalid(format!(
                "{} variables, more than the limit of {LAUNCH_ENV_VARS_MAX}",
                self.env.len()
            )));
        }
        for (name, value) in &self.env {
            if !name.starts_with("SHARDSCHED_") {
                return Err(invalid(format!(
                    "a shard may only add SHARDSCHED_* variables, not {name:?}"
                )));
            }
            if name.len() + value.len() > LAUNCH_ENV_VAR_BYTES_MAX {
                return Err(invalid(format!(
                    "variable {name} is longer than {LAUNCH_ENV_VAR_BYTES_MAX} bytes"
                )));
            }
        }
        Ok(())
    }
}

/// A kill reason's bound, [`KILL_REASON_BYTES_MAX`].
pub fn check_kill_reason(why: &str) -> Result<(), Refusal> {
    bounds::text("the reason", why, KILL_REASON_BYTES_MAX)
}

fn invalid(message: String) -> Refusal {
    Refusal::new(RefusalCode::Invalid, message)
}

/// Why a job's processes ended (on one node, or under the local exec executor).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EndCause {
    /// The command ended by itself (with any exit status).
    Completed,
    /// It reached its time limit and was killed.
    Timeout,
    /// It was killed on request (cancel, node down, a lease that ran out, a SIGTERM to its
    /// supervisor).
    Cancelled,
    /// The command could not be started (not found, not executable, bad directory, a
    /// jobspec whose signature does not verify, a failing prolog).
    Error,
    /// Its supervisor is gone without having written a status.
    Lost,
    /// The site's prolog failed on the node: the job's tasks never started there, and the
    /// job goes back to pending (Slurm's Prolog).
    Prolog,
}

/// How a job's processes ended: what a supervisor writes to its `status` file, what an
/// agent reports, and what a shard's core is told. On a node running several tasks, the
/// highest task's status ([`JobEnd::worst`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobEnd {
    /// Why.
    pub cause: EndCause,
    /// The command's exit code, if it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended the command, if one did.
    pub signal: Option<i32>,
    /// Words for a person: the kill request's reason, the start error.
    #[serde(default)]
    pub note: String,
}

impl JobEnd {
    /// An end with no exit status (the command never ran, or nobody saw it end).
    pub fn without_status(cause: EndCause, note: impl Into<String>) -> JobEnd {
        JobEnd {
            cause,
            exit_code: None,
            signal: None,
            note: note.into(),
        }
    }

    /// Whether the command itself succeeded: it ended by itself with exit code 0.
    pub fn succeeded(&self) -> bool {
        self.cause == EndCause::Completed && self.exit_code == Some(0)
    }

    /// The exit status in a few words: `exit code 3`, `signal 15`, `no exit status`.
    pub fn status_text(&self) -> String {
        match (self.exit_code, self.signal) {
            (Some(code), _) => format!("exit code {code}"),
            (None, Some(sig)) => format!("killed by signal {sig}"),
            (None, None) => "no exit status".to_owned(),
        }
    }

    /// The wait(2)-style status Flux puts in its `finish` event: code << 8, or the signal.
    pub fn wait_status(&self) -> Option<i32> {
        match (self.exit_code, self.signal) {
            (Some(code), _) => Some((code & 0xff) << 8),
            (None, Some(sig)) => Some(sig & 0x7f),
            (None, None) => None,
        }
    }

    /// Of two ends of one job (two tasks, two nodes), the one that speaks for the job, as
    /// Flux's job exit status is its highest task's: a cause other than completed wins
    /// (the first such), else the higher wait status.
    pub fn worst(self, other: JobEnd) -> JobEnd {
        let rank = |end: &JobEnd| end.cause != EndCause::Completed;
        match (rank(&self), rank(&other)) {
            (true, _) => self,
            (false, true) => other,
            (false, false) => {
                if other.wait_status().unwrap_or(0) > self.wait_status().unwrap_or(0) {
                    other
                } else {
                    self
                }
            }
        }
    }
}

impl fmt::Display for EndCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EndCause::Completed => "completed",
            EndCause::Timeout => "timeout",
            EndCause::Cancelled => "cancelled",
            EndCause::Error => "error",
            EndCause::Lost => "lost",
            EndCause::Prolog => "prolog",
        })
    }
}

/// Where a job stands on one node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobOnNode {
    /// Accepted; its supervisor is being started.
    Launching,
    /// Its supervisor runs (this pid).
    Running {
        /// The supervisor's pid.
        supervisor_pid: u32,
    },
    /// Asked to stop, for this reason; its processes are not all gone yet.
    Stopping {
        /// Why.
        why: String,
    },
    /// Every process of it on this node is gone, as this says.
    Ended(JobEnd),
}

impl JobOnNode {
    /// Whether processes of the job may still run on the node.
    pub fn is_live(&self) -> bool {
        !matches!(self, JobOnNode::Ended(_))
    }
}

/// One job in an agent's report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobReport {
    /// The job.
    pub job: JobId,
    /// The queue whose shard launched it.
    pub queue: String,
    /// The generation it was launched at.
    pub generation: Generation,
    /// Where it stands.
    pub state: JobOnNode,
}

/// What an agent says of its node: its owner and its jobs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentReport {
    /// The node.
    pub node: String,
    /// The owner it knows, if any.
    pub owner: Option<NodeOwner>,
    /// Its lease, ms (half the coordinator's heartbeat timeout): a shard renews well
    /// within it, and takes the tasks of an agent it has not heard from for this plus the
    /// kill grace as killed.
    pub lease_ms: u64,
    /// Why the node should take no new work, if it should: its health check failed, or a
    /// job's prolog did (the program's output, at most
    /// [`REASON_BYTES_MAX`](crate::limits::REASON_BYTES_MAX) bytes). The
    /// coordinator drains the node with it as the reason (`resource undrain` ends it).
    pub unhealthy: Option<String>,
    /// Its jobs (running, stopping, or ended and not yet acknowledged), by job id; at most
    /// [`AGENT_JOBS_MAX`](crate::limits::AGENT_JOBS_MAX).
    pub jobs: Vec<JobReport>,
}

impl AgentReport {
    /// A digest of the whole report (FNV-1a of its wire encoding): two reports with the same
    /// digest say the same thing, as far as a renewal's hold is concerned
    /// ([`shard_node::Request::Renew`](super::shard_node::Request::Renew)). Both ends compute
    /// it from the same encoding, so it travels as one number.
    pub fn digest(&self) -> u64 {
        const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
        const PRIME: u64 = 0x0000_0100_0000_01b3;
        crate::codec::encode(self)
            .unwrap_or_default()
            .iter()
            .fold(OFFSET, |hash, &byte| {
                (hash ^ u64::from(byte)).wrapping_mul(PRIME)
            })
    }

    /// Whether no process of a job of `queue` may still run on the node.
    pub fn clean_of(&self, queue: &str) -> bool {
        !self
            .jobs
            .iter()
            .any(|j| j.queue == queue && j.state.is_live())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(cause: EndCause, code: Option<i32>, signal: Option<i32>) -> JobEnd {
        JobEnd {
            cause,
            exit_code: code,
            signal,
            note: String::new(),
        }
    }

    #[test]
    fn a_report_s_digest_changes_with_what_it_says() {
        let report = AgentReport {
            node: "node0".into(),
            owner: None,
            lease_ms: 15_000,
            unhealthy: None,
            jobs: Vec::new(),
        };
        assert_eq!(report.digest(), report.clone().digest());
        let mut ended = report.clone();
        ended.unhealthy = Some("prolog failed".into());
        assert_ne!(report.digest(), ended.digest());
    }

    #[test]
    fn the_worst_end_speaks_for_the_job() {
        let ok = end(EndCause::Completed, Some(0), None);
        let three = end(EndCause::Completed, Some(3), None);
        let killed = end(EndCause::Timeout, None, Some(15));
        assert_eq!(ok.clone().worst(three.clone()), three);
        assert_eq!(three.clone().worst(ok.clone()), three);
        assert_eq!(ok.clone().worst(killed.clone()), killed);
        assert_eq!(killed.clone().worst(three), killed);
        assert_eq!(killed.wait_status(), Some(15));
        assert_eq!(killed.status_text(), "killed by signal 15");
        assert!(ok.succeeded());
        let json = serde_json::to_string(&killed).expect("json");
        assert!(json.contains("\"timeout\""), "{json}");
    }

    #[test]
    fn a_shard_adds_only_its_own_variables() {
        let mut launch = NodeLaunch {
            job: crate::Fluid(1),
            generation: Generation(1),
            signed: SignedJobspec {
                jobspec_json: "{}".into(),
                cert_pem: String::new(),
                signature: Vec::new(),
            },
            nodes: vec![JobNode {
                node: "node0".into(),
                agent: "127.0.0.1:1".parse().expect("addr"),
                first_rank: 0,
                ntasks: 1,
                cores: vec![0],
                gpus: vec![],
            }],
            node_rank: 0,
            time_limit_ms: 0,
            kill_grace_ms: 0,
            env: vec![("SHARDSCHED_JOB_ID".into(), "x".into())],
            r_json: "{}".into(),
        };
        assert!(launch.check().is_ok());
        launch.env.push(("LD_PRELOAD".into(), "/tmp/x.so".into()));
        let refusal = launch.check().expect_err("refused");
        assert!(refusal.message.contains("LD_PRELOAD"), "{refusal}");
        launch.env.pop();
        launch.node_rank = 1;
        assert!(launch.check().is_err());
    }
}
