//! One job as the shard remembers it: who submitted it, where it is in its life, what it got
//! and what happened to it, in the wire's units (milliseconds since the Unix epoch).

use std::sync::Arc;

use shardsched_qmanager::WaitReason;
use shardsched_wire::array::ArrayElement;
use shardsched_wire::limits::JOB_NAME_BYTES_MAX;
use shardsched_wire::msg::agent::JobSignature;
use shardsched_wire::msg::client_shard::IdempotencyKey;
use shardsched_wire::msg::deps::Fact;
use shardsched_wire::msg::fairshare::JobPriority;
use shardsched_wire::msg::quota::{LimitKind, Usage};
use shardsched_wire::msg::{JobEvent, JobId, JobInfo, JobState, JobSummary};

use crate::assign::MS_PER_S;
use crate::limits::EVENTS_PER_JOB_MAX;

/// A job in the shard's table. Cloned only when a published snapshot still shares it
/// (copy on write), so fields that can be large are behind an `Arc`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobRecord {
    /// The job id (a FLUID).
    pub id: JobId,
    /// The submitting certificate's name.
    pub owner: String,
    /// The client's idempotency key (with `owner`, the key of a retried submit).
    pub key: IdempotencyKey,
    /// A short name: the command's first word.
    pub name: String,
    /// Urgency, 0..=31 (Flux's): the queue manager's priority; 0 is held.
    pub urgency: u8,
    /// Where it is in its life.
    pub state: JobState,
    /// Why it is pending, or how it ended.
    pub reason: Reason,
    /// Submission time, ms since the Unix epoch.
    pub submit_ms: u64,
    /// Start time, once started.
    pub start_ms: Option<u64>,
    /// End time, once ended.
    pub end_ms: Option<u64>,
    /// Requested duration in ms (the queue's default when the jobspec names none; 0 =
    /// unlimited).
    pub duration_ms: u64,
    /// Node names it holds or held, in graph order.
    pub nodes: Vec<String>,
    /// The fewest nodes its jobspec asks for (`None`: slots only).
    pub nodes_requested: Option<u64>,
    /// The fewest cores its jobspec asks for (what a `max_cores` limit counts).
    pub cores_requested: u64,
    /// The jobspec as submitted.
    pub jobspec_json: Arc<str>,
    /// Its RFC 20 R, once allocated.
    pub r_json: Option<Arc<str>>,
    /// Its events, oldest first (at most [`EVENTS_PER_JOB_MAX`]).
    pub events: Vec<JobEvent>,
    /// The array it is an element of, and its index there.
    pub array: Option<ArrayElement>,
    /// Not before this time (its `begin-time` dependency), ms since the Unix epoch.
    pub begin_ms: Option<u64>,
    /// The submitter's signature of the jobspec, relayed to node agents (which run the job
    /// as the signer only with it).
    pub signature: Option<Arc<JobSignature>>,
    /// A pending job's priority and its parts while fair-share is on (`core/fairshare.rs`).
    pub priority: Option<JobPriority>,
}

/// Why a job is where it is, kept as data and worded only when read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Nothing to say (running, completed).
    None,
    /// Pending, as the queue manager last said.
    Waiting(WaitReason),
    /// Pending, held out of the queue by the shard (`core/holds.rs`).
    Held(Hold),
    /// Free text (a cancellation, a failure).
    Text(String),
}

/// Why the shard holds a pending job out of the queue manager's pending order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hold {
    /// A dependency not met yet: on this job (`None`: `singleton`, another job of its
    /// owner and name is active) (`core/deps.rs`).
    Dependency(Option<JobId>),
    /// A dependency that can never be met: on this job, and why.
    DependencyNever(Option<JobId>, Never),
    /// Urgency 0: held by its owner or an admin until released.
    User,
    /// An element of an array with as many elements running (or about to) as its `%N`
    /// allows: it waits for one of them to end.
    ArrayLimit,
    /// Its begin time has not come (the time is the job's `begin_ms`).
    BeginTime,
    /// A limit lets no more of its owner's (or its queue's) jobs run now
    /// (`core/allowances.rs`).
    Limit(LimitHold),
}

/// The limit that holds a job: what it counts, its value, and whether it is its owner's
/// (else its queue's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimitHold {
    /// What the limit counts.
    pub kind: LimitKind,
    /// Its value.
    pub value: u64,
    /// The owner's limit (else the queue's).
    pub per_user: bool,
}

/// Why a dependency can never be met, as its target job's fact says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Never {
    /// It completed (`afternotok`).
    Completed,
    /// It failed (`afterok`).
    Failed,
    /// It was cancelled (`afterok`).
    Cancelled,
    /// It ended without starting (`after`).
    NotStarted,
    /// Its queue does not know it.
    NotFound,
    /// Its id names no queue.
    NoQueue,
}

impl Never {
    fn as_str(self) -> &'static str {
        match self {
            Never::Completed => "completed",
            Never::Failed => "failed",
            Never::Cancelled => "was cancelled",
            Never::NotStarted => "ended without starting",
            Never::NotFound => "is not known to its queue",
            Never::NoQueue => "names no queue",
        }
    }
}

impl Hold {
    /// The reason's words, as `jobs` shows them.
    pub fn text(self) -> String {
        match self {
            Hold::User => "held".to_owned(),
            Hold::ArrayLimit => "array limit".to_owned(),
            Hold::BeginTime => "begin time".to_owned(),
            Hold::Limit(l) => format!("limit: {} {}", l.kind, l.value),
            Hold::Dependency(Some(id)) => format!("dependency: waiting on {id}"),
            Hold::Dependency(None) => "dependency: singleton".to_owned(),
            Hold::DependencyNever(Some(id), why) => {
                format!("dependency never satisfied: {id} {}", why.as_str())
            }
            Hold::DependencyNever(None, why) => {
                format!("dependency never satisfied: {}", why.as_str())
            }
        }
    }
}

/// A job as accepted: at its submission, and when restored from the journal.
pub struct NewJob<'a> {
    /// The job id.
    pub id: JobId,
    /// The submitting certificate's name.
    pub owner: &'a str,
    /// The client's idempotency key.
    pub key: IdempotencyKey,
    /// Urgency, 0..=31.
    pub urgency: u8,
    /// Submission time, ms since the Unix epoch.
    pub submit_ms: u64,
    /// Requested duration in ms, the queue's default applied.
    pub duration_ms: u64,
    /// The jobspec, parsed.
    pub jobspec: &'a shardsched_jobspec::Jobspec,
    /// The jobspec as submitted (shared by an array's elements).
    pub jobspec_json: &'a Arc<str>,
    /// The array it is an element of.
    pub array: Option<ArrayElement>,
    /// Its signature, if the submit was signed (shared by an array's elements).
    pub signature: Option<Arc<JobSignature>>,
}

impl JobRecord {
    /// A pending job with its `submit` event.
    pub fn accepted(a: &NewJob<'_>) -> JobRecord {
        let mut job = JobRecord {
            id: a.id,
            owner: a.owner.to_owned(),
            key: a.key,
            name: job_name(a.jobspec),
            urgency: a.urgency,
            state: JobState::Pending,
            reason: Reason::None,
            submit_ms: a.submit_ms,
            start_ms: None,
            end_ms: None,
            duration_ms: a.duration_ms,
            nodes: Vec::new(),
            nodes_requested: a.jobspec.nodes_requested(),
            cores_requested: cores_requested(&a.jobspec.resources),
            jobspec_json: Arc::clone(a.jobspec_json),
            r_json: None,
            events: Vec::new(),
            array: a.array,
            begin_ms: a.jobspec.attributes.begin_time_ms(),
            signature: a.signature.clone(),
            priority: None,
        };
        job.push_event(
            a.submit_ms,
            "submit",
            serde_json::json!({"owner": a.owner, "urgency": a.urgency}),
        );
        job
    }

    /// What this job counts against a limit (docs/POLICIES.md, "Limits"): one job, its
    /// fewest nodes (1 when it names none), and its fewest cores.
    pub fn limit_ask(&self) -> Usage {
        Usage {
            jobs: 1,
            nodes: self.nodes_requested.unwrap_or(1),
            cores: self.cores_requested,
        }
    }

    /// What a dependency on this job reads of it.
    pub fn fact(&self) -> Fact {
        Fact::of(self.state, self.start_ms.is_some())
    }

    /// How many times the job was requeued (its `requeue` events; past
    /// [`EVENTS_PER_JOB_MAX`] events no more are counted).
    pub fn restarts(&self) -> usize {
        self.events.iter().filter(|e| e.name == "requeue").count()
    }

    /// Appends an event, unless the job already has [`EVENTS_PER_JOB_MAX`].
    pub fn push_event(&mut self, time_ms: u64, name: &str, context: serde_json::Value) {
        if self.events.len() < EVENTS_PER_JOB_MAX {
            self.events.push(JobEvent {
                time_ms,
                name: name.to_owned(),
                context_json: context.to_string(),
            });
        }
    }

    /// The list row for this job. `queue_started` words the reason of a pending job whose
    /// queue is stopped.
    pub fn summary(&self, queue: &str, queue_started: bool) -> JobSummary {
        JobSummary {
            id: self.id,
            queue: queue.to_owned(),
            owner: self.owner.clone(),
            name: self.name.clone(),
            state: self.state,
            urgency: self.urgency,
            nodes: self.nodes.clone(),
            nodes_requested: self.nodes_requested,
            submit_ms: self.submit_ms,
            start_ms: self.start_ms,
            end_ms: self.end_ms,
            duration_ms: self.duration_ms,
            reason: self.reason_text(queue, queue_started),
            reserved_ms: self.reserved_ms(queue_started),
            array: self.array,
            begin_ms: self.begin_ms,
            priority: self.priority.filter(|_| self.state == JobState::Pending),
        }
    }

    /// A pending job's reserved start (ms), while its queue schedules.
    fn reserved_ms(&self, queue_started: bool) -> Option<u64> {
        match self.reason {
            Reason::Waiting(WaitReason::Reserved { at })
                if queue_started && self.state == JobState::Pending =>
            {
                Some(u64::try_from(at).unwrap_or(0).saturating_mul(MS_PER_S))
            }
            _ => None,
        }
    }

    /// Everything about this job.
    pub fn info(&self, queue: &str, queue_started: bool) -> JobInfo {
        JobInfo {
            summary: self.summary(queue, queue_started),
            jobspec_json: Some(self.jobspec_json.to_string()),
            r_json: self.r_json.as_deref().map(str::to_owned),
            events: self.events.clone(),
        }
    }

    fn reason_text(&self, queue: &str, queue_started: bool) -> String {
        match &self.reason {
            Reason::Waiting(_) if !queue_started && self.state == JobState::Pending => {
                format!("queue {queue} is stopped")
            }
            Reason::Waiting(why) => wait_text(*why),
            Reason::Held(Hold::Limit(l)) if l.per_user => {
                format!("limit: {} {} for user {}", l.kind, l.value, self.owner)
            }
            Reason::Held(Hold::Limit(l)) => {
                format!("limit: {} {} for queue {queue}", l.kind, l.value)
            }
            Reason::Held(hold) => hold.text(),
            Reason::Text(text) => text.clone(),
            Reason::None => String::new(),
        }
    }
}

/// The fewest cores `resources` ask for: read once, when the job is accepted.
fn cores_requested(resources: &[shardsched_jobspec::Resource]) -> u64 {
    resources
        .iter()
        .map(|r| {
            if r.kind == "core" {
                r.count.min
            } else {
                cores_requested(&r.with).saturating_mul(r.count.min)
            }
        })
        .fold(0, u64::saturating_add)
}

/// A pending job's reason in words. A reservation's time travels apart
/// ([`JobSummary::reserved_ms`]), for clients to show in their reader's time zone.
fn wait_text(why: WaitReason) -> String {
    match why {
        WaitReason::Reserved { .. } => "reserved to start".to_owned(),
        other => other.to_string(),
    }
}

/// The short name of a job: the name its jobspec gives (`submit --job-name`), else the
/// first word of its first task's command, without its directory; `job` when it has none.
/// At most [`JOB_NAME_BYTES_MAX`] bytes: a longer one is cut and ends in `…` (every row of
/// every job list carries it). The node agent names a job's output files by the same rule.
pub fn job_name(jobspec: &shardsched_jobspec::Jobspec) -> String {
    shardsched_jobspec::job_name(jobspec, JOB_NAME_BYTES_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_name_has_a_bound_and_says_when_it_was_cut() {
        let named = |command: &str| {
            shardsched_jobspec::Shorthand {
                nodes: None,
                tasks: None,
                cores_per_task: 1,
                gpus_per_task: 0,
                duration: 60,
                exclusive: false,
                command: vec![command.to_owned()],
                queue: None,
            }
            .to_jobspec()
            .map(|j| job_name(&j))
            .unwrap_or_default()
        };
        assert_eq!(named("/usr/bin/app"), "app");
        let long = named(&format!("/bin/{}", "é".repeat(JOB_NAME_BYTES_MAX)));
        assert!(
            long.len() <= JOB_NAME_BYTES_MAX && long.ends_with('…'),
            "{long}"
        );
    }
}
