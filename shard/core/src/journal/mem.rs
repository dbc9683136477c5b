//! The journal's tables in memory ([`MemJournal`]).

use std::collections::BTreeMap;

use super::*;

/// A journal's tables in memory, applied as the driver's committer would apply the same
/// records to disk: for tests, and for a simulator that restarts shards.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemJournal {
    jobs: BTreeMap<u64, AcceptedJob>,
    arrays: BTreeMap<u64, ArrayRecord>,
    runs: BTreeMap<u64, StartedJob>,
    ends: BTreeMap<u64, EndedJob>,
    urgency: BTreeMap<u64, u8>,
    signatures: BTreeMap<u64, SignatureRecord>,
    kills: BTreeMap<u64, KillRecord>,
    last_id: Option<u64>,
    nodes: BTreeMap<String, NodeRecord>,
    allowances: BTreeMap<String, AllowanceRecord>,
}

impl MemJournal {
    /// The allowance journaled for each user (what a restart would hold).
    pub fn allowances(&self) -> impl Iterator<Item = (&str, &AllowanceRecord)> {
        self.allowances.iter().map(|(user, r)| (user.as_str(), r))
    }

    /// Applies `records`, in order (one committed batch).
    pub fn commit(&mut self, records: &[JournalRecord]) {
        for record in records {
            match record {
                JournalRecord::Accepted(job) => {
                    self.jobs.insert(job.id, job.clone());
                }
                JournalRecord::Signed(signature) => {
                    self.signatures.insert(signature.id, signature.clone());
                }
                JournalRecord::Started(run) => {
                    self.runs.insert(run.id, run.clone());
                }
                JournalRecord::Ended(end) => {
                    self.ends.insert(end.id, end.clone());
                    self.kills.remove(&end.id);
                }
                JournalRecord::KillRequested(kill) => {
                    self.kills.insert(kill.id, kill.clone());
                }
                JournalRecord::Forgotten(id) => {
                    self.kills.remove(&id.0);
                    self.jobs.remove(&id.0);
                    self.runs.remove(&id.0);
                    self.ends.remove(&id.0);
                    self.urgency.remove(&id.0);
                    self.signatures.remove(&id.0);
                }
                JournalRecord::Urgency(id, urgency) => {
                    self.urgency.insert(id.0, *urgency);
                }
                JournalRecord::Array(array) => {
                    self.arrays.insert(array.id, array.clone());
                }
                JournalRecord::ArrayForgotten { id, elements } => {
                    self.jobs.remove(&id.0);
                    self.arrays.remove(&id.0);
                    self.signatures.remove(&id.0);
                    for e in elements {
                        self.kills.remove(&e.0);
                        self.runs.remove(&e.0);
                        self.ends.remove(&e.0);
                        self.urgency.remove(&e.0);
                    }
                }
                JournalRecord::LastId(id) => self.last_id = Some(id.0),
                JournalRecord::Requeued(id) => {
                    self.runs.remove(&id.0);
                    self.kills.remove(&id.0);
                }
                JournalRecord::Node(name, node) => {
                    self.nodes.insert(name.clone(), node.clone());
                }
                JournalRecord::Allowance(user, record) => {
                    self.allowances.insert(user.clone(), *record);
                }
            }
        }
    }

    /// What a restart reads back.
    pub fn restored(&self) -> Result<Restored, Orphan> {
        let tables = JobTables {
            jobs: self.jobs.values().cloned().collect(),
            arrays: self.arrays.values().cloned().collect(),
            runs: self.runs.values().cloned().collect(),
            ends: self.ends.values().cloned().collect(),
            urgencies: self.urgency.iter().map(|(&id, &u)| (id, u)).collect(),
            signatures: self.signatures.values().cloned().collect(),
            kills: self.kills.values().cloned().collect(),
        };
        let mut restored = Restored::assemble(
            tables,
            self.last_id,
            self.nodes.iter().map(|(n, r)| (n.clone(), r.clone())),
        )?;
        restored.allowances = self.allowances.clone().into_iter().collect();
        Ok(restored)
    }
}
