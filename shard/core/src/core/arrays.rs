//! Job arrays: elements accepted together, cancelled or held together by the array's id,
//! and at most `%N` of them considered at once.
//!
//! An array's elements are ordinary jobs of the job table and the queue manager, each with
//! its `ID[N]` ([`JobRecord::array`](crate::job::JobRecord)). What belongs to the array
//! itself is here ([`ArrayState`](super::parts::ArrayState)): its elements, for the
//! requests that name the array's id, and under a limit `%N` which elements are
//! **admitted** — running, or pending and not held by their owner. An element that is
//! not admitted is held out of the queue manager's order with reason `array limit`
//! ([`Hold::ArrayLimit`], decided by [`ShardCore::hold_of`]), so no more than `N` ever run,
//! and when an admitted one ends (or is held) the next, in index order, is admitted.
//!
//! The journal keeps an array as one `jobs` and one `arrays` record; its elements' ends
//! stay until the last element is forgotten, then go with the array in one
//! [`JournalRecord::ArrayForgotten`].

use std::collections::BTreeSet;

use shardsched_wire::Peer;
use shardsched_wire::limits::URGENCY_HOLD;
use shardsched_wire::msg::client_shard::{CancelResult, UrgencyChange, UrgencyResult};
use shardsched_wire::msg::{JobId, JobState};

use super::ShardCore;
use super::parts::ArrayState;
use crate::job::JobRecord;
use crate::journal::JournalRecord;

impl ShardCore {
    /// Array `id` was accepted with `elements` (all pending, in index order), at most
    /// `max_running` of them at once (0: no limit).
    pub(super) fn array_accepted(&mut self, id: JobId, max_running: u32, elements: Vec<JobId>) {
        let waiting = if max_running > 0 {
            elements.iter().copied().collect()
        } else {
            BTreeSet::new()
        };
        self.jobs.arrays.insert(
            id,
            ArrayState {
                elements: elements.clone(),
                max_running,
                admitted: BTreeSet::new(),
                waiting,
            },
        );
        self.fill_slots(id);
        for element in elements {
            self.sync_hold(element);
        }
    }

    /// The elements of array `id`, if the shard has that array.
    pub(super) fn array_elements(&self, id: JobId) -> Option<Vec<JobId>> {
        self.jobs.arrays.get(&id).map(|a| a.elements.clone())
    }

    /// Whether element `job` waits for a slot under its array's limit.
    pub(super) fn array_limited(&self, job: &JobRecord) -> bool {
        job.array
            .and_then(|e| self.jobs.arrays.get(&e.array))
            .is_some_and(|a| a.max_running > 0 && !a.admitted.contains(&job.id))
    }

    /// Cancels the array's `elements` for `peer`: `Cancelled` if any was, `Forbidden` if
    /// they are not the peer's, `AlreadyInactive` if all had ended.
    pub(super) fn cancel_array(&mut self, peer: &Peer, elements: &[JobId]) -> CancelResult {
        let mut outcome = CancelResult::AlreadyInactive;
        for &element in elements {
            match self.cancel_one(peer, element) {
                CancelResult::Forbidden => return CancelResult::Forbidden,
                CancelResult::Cancelled => outcome = CancelResult::Cancelled,
                CancelResult::AlreadyInactive | CancelResult::NotFound => {}
            }
        }
        outcome
    }

    /// Changes the urgency of the array's pending `elements` for `peer`: the last urgency
    /// set if any was pending, `Forbidden` if they are not the peer's, `NotPending` if none
    /// was.
    pub(super) fn urgency_array(
        &mut self,
        peer: &Peer,
        elements: &[JobId],
        change: UrgencyChange,
    ) -> UrgencyResult {
        let mut outcome = UrgencyResult::NotPending;
        for &element in elements {
            match self.urgency_one(peer, element, change) {
                UrgencyResult::Forbidden => return UrgencyResult::Forbidden,
                set @ UrgencyResult::Set(_) => outcome = set,
                UrgencyResult::NotPending | UrgencyResult::NotFound => {}
            }
        }
        outcome
    }

    /// Pending job `id` changed what its holds read (its urgency): under an array limit, a
    /// held element gives its slot back and a released one may take one; then its holds
    /// (and those of the elements admitted) are put in force.
    pub(super) fn holds_changed(&mut self, id: JobId) {
        let Some(array) = self.jobs.table.get(id).and_then(|j| j.array) else {
            self.sync_hold(id);
            return;
        };
        let held = self
            .jobs
            .table
            .get(id)
            .is_some_and(|j| j.urgency == URGENCY_HOLD);
        if let Some(state) = self.jobs.arrays.get_mut(&array.array)
            && held
            && state.admitted.remove(&id)
        {
            state.waiting.insert(id);
        }
        self.sync_hold(id);
        self.fill_slots(array.array);
    }

    /// Element `id` ended: its slot goes to the next element waiting.
    pub(super) fn element_ended(&mut self, id: JobId, array: JobId) {
        if let Some(state) = self.jobs.arrays.get_mut(&array) {
            state.admitted.remove(&id);
            state.waiting.remove(&id);
        }
        self.fill_slots(array);
    }

    /// Admits waiting elements of `array` (in index order, passing over those their owner
    /// holds) while it has fewer than its limit, and lets them into the queue manager.
    fn fill_slots(&mut self, array: JobId) {
        let Some(state) = self.jobs.arrays.get_mut(&array) else {
            return;
        };
        if state.max_running == 0 {
            return;
        }
        let limit = usize::try_from(state.max_running).unwrap_or(usize::MAX);
        let table = &self.jobs.table;
        let mut admitted = Vec::new();
        for &element in &state.waiting {
            if state.admitted.len() + admitted.len() >= limit {
                break;
            }
            if table
                .get(element)
                .is_some_and(|j| j.state == JobState::Pending && j.urgency != URGENCY_HOLD)
            {
                admitted.push(element);
            }
        }
        for &element in &admitted {
            state.waiting.remove(&element);
            state.admitted.insert(element);
        }
        for element in admitted {
            self.sync_hold(element);
        }
    }

    /// Finished elements left the table: an array with none left is forgotten whole
    /// (journal and array state).
    pub(super) fn forget_arrays(&mut self) {
        let gone: Vec<JobId> = self
            .jobs
            .arrays
            .keys()
            .copied()
            .filter(|&a| self.jobs.table.array_len(a) == 0)
            .collect();
        for array in gone {
            if let Some(state) = self.jobs.arrays.remove(&array) {
                self.journal(JournalRecord::ArrayForgotten {
                    id: array,
                    elements: state.elements,
                });
            }
        }
    }

    /// After a restore: the arrays of the restored elements, each running element
    /// admitted and every pending one waiting, then the slots filled (the caller puts
    /// every pending job's holds in force).
    pub(super) fn restore_arrays(&mut self) {
        let elements: Vec<(JobId, JobId, u32, JobState)> = self
            .jobs
            .table
            .iter()
            .filter_map(|j| {
                let e = j.array?;
                Some((e.array, j.id, e.index, j.state))
            })
            .collect();
        let mut sorted = elements;
        sorted.sort_unstable_by_key(|&(array, _, index, _)| (array, index));
        for (array, id, _, state) in sorted {
            let entry = self.jobs.arrays.entry(array).or_insert_with(|| ArrayState {
                elements: Vec::new(),
                max_running: 0,
                admitted: BTreeSet::new(),
                waiting: BTreeSet::new(),
            });
            entry.elements.push(id);
            match state {
                JobState::Running => {
                    entry.admitted.insert(id);
                }
                JobState::Pending => {
                    entry.waiting.insert(id);
                }
                _ => {}
            }
        }
    }

    /// After [`Self::restore_arrays`]: array `id`'s limit, then its slots filled.
    pub(super) fn restore_array_limit(&mut self, id: JobId, max_running: u32) {
        if let Some(state) = self.jobs.arrays.get_mut(&id) {
            state.max_running = max_running;
            if max_running == 0 {
                state.admitted.clear();
                state.waiting.clear();
            }
        }
        self.fill_slots(id);
    }
}
