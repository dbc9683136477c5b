//! The job table: every job the shard knows, split into copy-on-write buckets so that a
//! snapshot of the whole table costs a few hundred pointer copies, not a copy of every job.
//!
//! ```text
//!  buckets[0..BUCKETS]: Arc<BTreeMap<JobId, Arc<JobRecord>>>
//!        ▲ the core changes a job: Arc::make_mut(bucket) then Arc::make_mut(job)
//!        │ (each clones only while a published snapshot still shares it)
//!  Snapshot.buckets ── shares the same Arcs until the next change
//! ```
//!
//! A batch that touches k jobs clones at most k buckets of about N / [`BUCKETS`] entries
//! (pointers), plus the k jobs themselves; publishing costs
//! [`BUCKETS`] pointer copies. Ids are spread over buckets by a multiplicative hash: FLUIDs
//! differ mostly in their timestamp and sequence bits.
//!
//! The table also holds the idempotency index ((owner, key) → id; an array's elements
//! share their array's key, which names the array) with the count of each array's
//! elements in the table, and the finished-job retention queue: finished jobs are
//! forgotten, oldest first, beyond a count.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use shardsched_wire::msg::JobId;
use shardsched_wire::msg::client_shard::IdempotencyKey;

use crate::job::JobRecord;

/// Number of buckets the table is split into (a power of two).
pub const BUCKETS: usize = 1024;
const BUCKET_SHIFT: u32 = 64 - BUCKETS.trailing_zeros();

/// One bucket of jobs.
pub type Bucket = BTreeMap<JobId, Arc<JobRecord>>;

/// The buckets as a snapshot holds them.
pub type Buckets = Arc<[Arc<Bucket>]>;

/// See the module documentation.
#[derive(Debug)]
pub struct JobTable {
    buckets: Vec<Arc<Bucket>>,
    len: usize,
    idempotency: HashMap<(String, IdempotencyKey), JobId>,
    /// Each array's elements in the table.
    arrays: HashMap<JobId, usize>,
    /// Finished jobs, oldest first.
    finished: VecDeque<JobId>,
    retained: usize,
}

impl JobTable {
    /// An empty table keeping at most `retained` finished jobs.
    pub fn new(retained: usize) -> JobTable {
        JobTable {
            buckets: (0..BUCKETS).map(|_| Arc::new(Bucket::new())).collect(),
            len: 0,
            idempotency: HashMap::new(),
            arrays: HashMap::new(),
            finished: VecDeque::new(),
            retained,
        }
    }

    /// Jobs in the table, live and finished.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table has no job.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Finished jobs in the table.
    pub fn finished_len(&self) -> usize {
        self.finished.len()
    }

    /// The job `id`.
    pub fn get(&self, id: JobId) -> Option<&JobRecord> {
        self.buckets[bucket_of(id)].get(&id).map(|j| &**j)
    }

    /// The job `id`, to change it (copying it and its bucket if a snapshot shares them).
    pub fn get_mut(&mut self, id: JobId) -> Option<&mut JobRecord> {
        let bucket = &mut self.buckets[bucket_of(id)];
        if !bucket.contains_key(&id) {
            return None;
        }
        Arc::make_mut(bucket).get_mut(&id).map(Arc::make_mut)
    }

    /// The job an owner already submitted with this key, if it is still in the table.
    pub fn by_key(&self, owner: &str, key: &IdempotencyKey) -> Option<JobId> {
        // A borrowed lookup would need a custom key type; owner names are short.
        self.idempotency.get(&(owner.to_owned(), *key)).copied()
    }

    /// Adds a new job (and its idempotency key: an element's names its array).
    pub fn insert(&mut self, job: JobRecord) {
        let id = job.id;
        let named = match job.array {
            Some(element) => {
                *self.arrays.entry(element.array).or_default() += 1;
                element.array
            }
            None => id,
        };
        self.idempotency.insert((job.owner.clone(), job.key), named);
        let bucket = Arc::make_mut(&mut self.buckets[bucket_of(id)]);
        if bucket.insert(id, Arc::new(job)).is_none() {
            self.len += 1;
        }
    }

    /// Records that `id` finished: it joins the retention queue, and the oldest finished
    /// jobs beyond the retention count are forgotten (returned, for the journal).
    pub fn finished(&mut self, id: JobId) -> Vec<Arc<JobRecord>> {
        self.finished.push_back(id);
        let mut forgotten = Vec::new();
        while self.finished.len() > self.retained {
            let Some(old) = self.finished.pop_front() else {
                break;
            };
            forgotten.extend(self.remove(old));
        }
        forgotten
    }

    /// Forgets the finished jobs that ended before `cutoff_ms` (retention by time); returns
    /// them. Jobs join the retention queue in the order they end, so only its head is
    /// looked at.
    pub fn expire(&mut self, cutoff_ms: u64) -> Vec<Arc<JobRecord>> {
        let mut forgotten = Vec::new();
        while let Some(&old) = self.finished.front() {
            let ended = self.get(old).and_then(|j| j.end_ms).unwrap_or(0);
            if ended >= cutoff_ms {
                break;
            }
            self.finished.pop_front();
            forgotten.extend(self.remove(old));
        }
        forgotten
    }

    fn remove(&mut self, id: JobId) -> Option<Arc<JobRecord>> {
        let bucket = Arc::make_mut(&mut self.buckets[bucket_of(id)]);
        let job = bucket.remove(&id)?;
        self.len -= 1;
        let named = match job.array {
            Some(element) => {
                let left = self.arrays.get_mut(&element.array).map(|n| {
                    *n -= 1;
                    *n
                });
                if left != Some(0) {
                    return Some(job);
                }
                self.arrays.remove(&element.array);
                element.array
            }
            None => id,
        };
        let index = (job.owner.clone(), job.key);
        if self.idempotency.get(&index) == Some(&named) {
            self.idempotency.remove(&index);
        }
        Some(job)
    }

    /// How many of array `id`'s elements the table holds.
    pub fn array_len(&self, id: JobId) -> usize {
        self.arrays.get(&id).copied().unwrap_or(0)
    }

    /// The buckets, shared with the table until it next changes them.
    pub fn share(&self) -> Buckets {
        self.buckets.iter().cloned().collect()
    }

    /// Every job, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &JobRecord> {
        self.buckets.iter().flat_map(|b| b.values().map(|j| &**j))
    }
}

/// The bucket of a job id: the top bits of a multiplicative (Fibonacci) hash.
pub fn bucket_of(id: JobId) -> usize {
    (id.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> BUCKET_SHIFT) as usize
}
