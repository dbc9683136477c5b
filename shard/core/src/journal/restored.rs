//! What a restart reads back: the journal's records put together per job ([`Restored`]),
//! an array's elements made from its one record.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use shardsched_wire::Fluid;
use shardsched_wire::array::{ArrayElement, element_id};
use shardsched_wire::msg::agent::JobSignature;
use shardsched_wire::msg::shard_coord::HeldNode;
use shardsched_wire::msg::{JobId, NodeGen};

use super::*;
use crate::nodes::NodeEntry;

/// A job read back from the journal: a job, or one element of an array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoredJob {
    /// Its id (an element's, for an element).
    pub id: u64,
    /// As accepted (an array's, shared by its elements).
    pub accepted: Arc<AcceptedJob>,
    /// The array it is an element of.
    pub array: Option<ElementOf>,
    /// Its start, if it started.
    pub started: Option<StartedJob>,
    /// Its end, if it ended.
    pub ended: Option<EndedJob>,
    /// Its urgency, if it changed after submit.
    pub urgency: Option<u8>,
    /// Its submit's signature, if it was signed (an array's, shared by its elements).
    pub signature: Option<Arc<JobSignature>>,
    /// The kill of its processes asked for while it ran, if any (format v3).
    pub kill: Option<KillRecord>,
}

/// Which array an element belongs to, and the array's limit on running elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElementOf {
    /// The array and the element's index.
    pub element: ArrayElement,
    /// The array's `%N` (0: no limit).
    pub max_running: u32,
}

/// Everything the journal remembers, in job id order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Restored {
    /// Every job, by id (= submission order).
    pub jobs: Vec<RestoredJob>,
    /// The highest job id issued.
    pub last_id: Option<JobId>,
    /// Every node's entry, by name.
    pub nodes: Vec<(String, NodeRecord)>,
    /// Every user's allowance, by name (set by the reader after [`Restored::assemble`]).
    pub allowances: Vec<(String, AllowanceRecord)>,
}

impl RestoredJob {
    fn new(
        id: u64,
        accepted: Arc<AcceptedJob>,
        array: Option<ElementOf>,
        signature: Option<Arc<JobSignature>>,
    ) -> RestoredJob {
        RestoredJob {
            id,
            accepted,
            array,
            started: None,
            ended: None,
            urgency: None,
            signature,
            kill: None,
        }
    }

    /// Its urgency now: the last change, else the one it was accepted with (at most 31).
    pub fn urgency(&self) -> u8 {
        let accepted = u8::try_from(self.accepted.urgency).unwrap_or(u8::MAX);
        self.urgency
            .unwrap_or(accepted)
            .min(shardsched_wire::limits::URGENCY_MAX)
    }
}

/// A `runs` or `ends` record whose job the `jobs` table does not have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Orphan {
    /// `runs`, `ends`, `urgency`, `arrays`, `signatures` or `kills`.
    pub table: &'static str,
    /// The job id it is keyed by.
    pub key: u64,
}

/// A journal's job-keyed tables, decoded, each in any order: what [`Restored::assemble`]
/// puts together.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobTables {
    /// The `jobs` table.
    pub jobs: Vec<AcceptedJob>,
    /// The `arrays` table.
    pub arrays: Vec<ArrayRecord>,
    /// The `runs` table.
    pub runs: Vec<StartedJob>,
    /// The `ends` table.
    pub ends: Vec<EndedJob>,
    /// The `urgency` table: job id and urgency.
    pub urgencies: Vec<(u64, u8)>,
    /// The `signatures` table.
    pub signatures: Vec<SignatureRecord>,
    /// The `kills` table.
    pub kills: Vec<KillRecord>,
}

impl Restored {
    /// Puts a journal's records together: an `arrays` record makes the elements of the
    /// `jobs` record of its key; each `runs`, `ends`, `urgency` and `kills` record joins the job (or
    /// element) of its key, each `signatures` record the job or every element of the array
    /// of its key; one with no such job is an [`Orphan`].
    pub fn assemble(
        tables: JobTables,
        last_id: Option<u64>,
        nodes: impl IntoIterator<Item = (String, NodeRecord)>,
    ) -> Result<Restored, Orphan> {
        let JobTables {
            jobs,
            arrays,
            runs,
            ends,
            urgencies,
            signatures,
            kills,
        } = tables;
        let mut accepted: BTreeMap<u64, Arc<AcceptedJob>> =
            jobs.into_iter().map(|a| (a.id, Arc::new(a))).collect();
        let mut signed = BTreeMap::new();
        for signature in signatures {
            let key = signature.id;
            if !accepted.contains_key(&key) {
                return Err(Orphan {
                    table: SIGNATURES_TABLE,
                    key,
                });
            }
            let signature = JobSignature {
                cert_pem: signature.cert_pem,
                signature: signature.signature,
            };
            signed.insert(key, Arc::new(signature));
        }
        let mut by_id = BTreeMap::new();
        for array in arrays {
            let orphan = Orphan {
                table: ARRAYS_TABLE,
                key: array.id,
            };
            let of = accepted.remove(&array.id).ok_or(orphan)?;
            for index in array.spec().indices() {
                let element = ArrayElement {
                    array: Fluid(array.id),
                    index,
                };
                let id = element_id(Fluid(array.id), index).map_err(|_| orphan)?.0;
                let array = Some(ElementOf {
                    element,
                    max_running: array.max_running,
                });
                let signature = signed.get(&of.id).cloned();
                by_id.insert(id, RestoredJob::new(id, Arc::clone(&of), array, signature));
            }
        }
        for (id, a) in accepted {
            let signature = signed.get(&id).cloned();
            by_id.insert(id, RestoredJob::new(id, a, None, signature));
        }
        for run in runs {
            let job = job_of(&mut by_id, RUNS_TABLE, run.id)?;
            job.started = Some(run);
        }
        for end in ends {
            let job = job_of(&mut by_id, ENDS_TABLE, end.id)?;
            job.ended = Some(end);
        }
        for (id, urgency) in urgencies {
            job_of(&mut by_id, URGENCY_TABLE, id)?.urgency = Some(urgency);
        }
        for kill in kills {
            let job = job_of(&mut by_id, KILLS_TABLE, kill.id)?;
            job.kill = Some(kill);
        }
        Ok(Restored {
            jobs: by_id.into_values().collect(),
            last_id: last_id.map(Fluid),
            nodes: nodes.into_iter().collect(),
            allowances: Vec::new(),
        })
    }

    /// Whether the journal had nothing (a first start).
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty() && self.last_id.is_none() && self.nodes.is_empty()
    }

    /// The node table's entries.
    pub fn node_entries(&self) -> impl Iterator<Item = (String, NodeEntry)> + '_ {
        self.nodes
            .iter()
            .map(|(name, record)| (name.clone(), NodeEntry::from(record)))
    }

    /// What a restarting shard reports in `Register::held`: the nodes it owned or was
    /// giving away, each marked allocated when a job that was running holds it (a node's
    /// last path component is its name).
    pub fn held(&self) -> Vec<HeldNode> {
        let mut busy = BTreeSet::new();
        for job in &self.jobs {
            if let (Some(run), None) = (&job.started, &job.ended) {
                for v in &run.vertices {
                    if let Some(name) = v.path.rsplit('/').next() {
                        busy.insert(name);
                    }
                }
            }
        }
        self.node_entries()
            .filter(|(_, e)| e.is_held())
            .map(|(name, e)| HeldNode {
                allocated: busy.contains(name.as_str()),
                node: NodeGen {
                    node: name,
                    generation: e.generation,
                },
            })
            .collect()
    }

    /// Jobs pending or running when the journal was last written.
    pub fn live(&self) -> usize {
        self.jobs.iter().filter(|j| j.ended.is_none()).count()
    }
}

/// The job a `table` record keyed `key` belongs to.
fn job_of<'a>(
    jobs: &'a mut BTreeMap<u64, RestoredJob>,
    table: &'static str,
    key: u64,
) -> Result<&'a mut RestoredJob, Orphan> {
    jobs.get_mut(&key).ok_or(Orphan { table, key })
}
