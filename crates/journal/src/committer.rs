//! Group commit: one thread owns the writing side of a [`Journal`] (redb commits block on
//! fsync), fed by a bounded channel. Each round it takes everything queued (up to
//! [`GROUP_COMMIT_MAX`] writes), applies it in ONE durable transaction, and completes every
//! waiter: N submitters pay one fsync, not N.
//!
//! ```text
//!  async tasks ── submit(batch).await ──► bounded mpsc (JOURNAL_QUEUE_CAPACITY) ──► thread
//!      ▲                                                                             │
//!      └────────── CommitTicket (oneshot) ◄──── one transaction, fsync, answer all ◄──┘
//! ```
//!
//! Submitting and waiting are separate steps, so a caller can submit the next batch while
//! the previous one's commit is in flight (pipelining), and still answer nobody before its
//! own ticket completes. A failed commit stops the thread's writing for good: every later
//! submission gets the same error (after an fsync failure the file's state is unknown).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use shardsched_histogram::LatencyHistogram;
use tokio::sync::{mpsc, oneshot};

use crate::batch::Batch;
use crate::error::{ErrorKind, JournalError};
use crate::limits::{GROUP_COMMIT_MAX, JOURNAL_QUEUE_CAPACITY};
use crate::store::{CommitInfo, Journal};

/// What the commit thread has done so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommitStats {
    /// Transactions committed.
    pub commits: u64,
    /// Batches committed (several per transaction under load).
    pub batches: u64,
    /// Writes committed.
    pub writes: u64,
    /// The most writes one transaction carried.
    pub largest_commit_writes: usize,
    /// Time each transaction's commit (its fsyncs) took.
    pub fsync: LatencyHistogram,
}

/// The owner of a journal's commit thread. Cloning shares the thread; it stops (after
/// committing what is queued) when the last clone is dropped.
#[derive(Clone, Debug)]
pub struct Committer {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    sender: Option<mpsc::Sender<Submission>>,
    stats: Arc<Mutex<CommitStats>>,
    thread: Option<JoinHandle<()>>,
    journal: Journal,
}

struct Submission {
    batch: Batch,
    done: oneshot::Sender<Result<CommitInfo, JournalError>>,
}

/// The promise of a submitted batch's commit.
#[derive(Debug)]
pub struct CommitTicket {
    answer: oneshot::Receiver<Result<CommitInfo, JournalError>>,
    path: PathBuf,
}

impl Committer {
    /// Starts the commit thread for `journal`.
    pub fn start(journal: Journal) -> Result<Committer, JournalError> {
        let (sender, receiver) = mpsc::channel(JOURNAL_QUEUE_CAPACITY);
        let stats = Arc::new(Mutex::new(CommitStats::default()));
        let thread = std::thread::Builder::new()
            .name("journal-commit".into())
            .spawn({
                let (journal, stats) = (journal.clone(), Arc::clone(&stats));
                move || run(&journal, receiver, &stats)
            })
            .map_err(|e| JournalError::storage(journal.path(), "start the commit thread", e))?;
        Ok(Committer {
            inner: Arc::new(Inner {
                sender: Some(sender),
                stats,
                thread: Some(thread),
                journal,
            }),
        })
    }

    /// The journal, for reads.
    pub fn journal(&self) -> &Journal {
        &self.inner.journal
    }

    /// Queues `batch`, waiting (asynchronously) while the queue is full. The batch is
    /// validated first, so a malformed batch fails here and never spoils a group.
    pub async fn submit(&self, batch: Batch) -> Result<CommitTicket, JournalError> {
        let (submission, ticket) = self.prepare(batch)?;
        self.sender()?
            .send(submission)
            .await
            .map_err(|_| self.stopped())?;
        Ok(ticket)
    }

    /// Queues `batch` if there is room now ([`ErrorKind::Full`] otherwise).
    pub fn try_submit(&self, batch: Batch) -> Result<CommitTicket, JournalError> {
        let (submission, ticket) = self.prepare(batch)?;
        self.sender()?.try_send(submission).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => {
                JournalError::new(self.inner.journal.path(), ErrorKind::Full)
            }
            mpsc::error::TrySendError::Closed(_) => self.stopped(),
        })?;
        Ok(ticket)
    }

    /// Queues `batch` from synchronous code, blocking while the queue is full. Must not be
    /// called from inside an async runtime (use [`Self::submit`] there).
    pub fn submit_blocking(&self, batch: Batch) -> Result<CommitTicket, JournalError> {
        let (submission, ticket) = self.prepare(batch)?;
        self.sender()?
            .blocking_send(submission)
            .map_err(|_| self.stopped())?;
        Ok(ticket)
    }

    /// Commits `batch` and waits for it to be durable (async).
    pub async fn commit(&self, batch: Batch) -> Result<CommitInfo, JournalError> {
        self.submit(batch).await?.wait().await
    }

    /// What the thread has done so far (a copy).
    pub fn stats(&self) -> CommitStats {
        lock(&self.inner.stats).clone()
    }

    fn prepare(&self, batch: Batch) -> Result<(Submission, CommitTicket), JournalError> {
        batch.validate(self.inner.journal.path())?;
        let (done, answer) = oneshot::channel();
        let ticket = CommitTicket {
            answer,
            path: self.inner.journal.path().to_owned(),
        };
        Ok((Submission { batch, done }, ticket))
    }

    fn sender(&self) -> Result<&mpsc::Sender<Submission>, JournalError> {
        self.inner.sender.as_ref().ok_or_else(|| self.stopped())
    }

    fn stopped(&self) -> JournalError {
        JournalError::new(
            self.inner.journal.path(),
            ErrorKind::Stopped("closed".into()),
        )
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Closing the channel lets the thread commit what is queued, then return.
        self.sender = None;
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!(path = %self.journal.path().display(), "the journal commit thread panicked");
        }
    }
}

impl CommitTicket {
    /// Waits (async) until the batch is durable, or its commit failed.
    pub async fn wait(self) -> Result<CommitInfo, JournalError> {
        let path = self.path;
        self.answer.await.unwrap_or_else(|_| {
            Err(JournalError::new(
                &path,
                ErrorKind::Stopped("the commit thread ended without answering".into()),
            ))
        })
    }

    /// Waits from synchronous code (not inside an async runtime).
    pub fn wait_blocking(self) -> Result<CommitInfo, JournalError> {
        let path = self.path;
        self.answer.blocking_recv().unwrap_or_else(|_| {
            Err(JournalError::new(
                &path,
                ErrorKind::Stopped("the commit thread ended without answering".into()),
            ))
        })
    }
}

/// The commit thread: see the module documentation.
fn run(journal: &Journal, mut queue: mpsc::Receiver<Submission>, stats: &Mutex<CommitStats>) {
    let mut carried: Option<Submission> = None;
    let mut failed: Option<JournalError> = None;
    loop {
        let first = match carried.take() {
            Some(s) => s,
            None => match queue.blocking_recv() {
                Some(s) => s,
                None => break,
            },
        };
        let mut writes = first.batch.len();
        let mut group = vec![first];
        while writes < GROUP_COMMIT_MAX {
            let Ok(next) = queue.try_recv() else {
                break;
            };
            if writes + next.batch.len() > GROUP_COMMIT_MAX {
                carried = Some(next);
                break;
            }
            writes += next.batch.len();
            group.push(next);
        }
        if let Some(e) = &failed {
            for s in group {
                let _ = s.done.send(Err(e.clone()));
            }
            continue;
        }
        let batches: Vec<&Batch> = group.iter().map(|s| &s.batch).collect();
        match journal.commit_all(&batches) {
            Ok(info) => {
                {
                    let mut st = lock(stats);
                    st.commits += 1;
                    st.batches += group.len() as u64;
                    st.writes += info.writes as u64;
                    st.largest_commit_writes = st.largest_commit_writes.max(info.writes);
                    st.fsync.record(info.fsync);
                }
                for s in group {
                    let _ = s.done.send(Ok(info));
                }
            }
            Err(e) => {
                tracing::error!(path = %journal.path().display(), error = %e, "journal commit failed; nothing more will be written");
                failed = Some(JournalError::new(
                    journal.path(),
                    ErrorKind::Stopped(format!("an earlier commit failed: {}", e.kind)),
                ));
                for s in group {
                    let _ = s.done.send(Err(e.clone()));
                }
            }
        }
    }
}

fn lock(stats: &Mutex<CommitStats>) -> MutexGuard<'_, CommitStats> {
    stats
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_commit_every_batch_and_answer_every_waiter() {
        let dir = tempfile::tempdir().expect("temp dir");
        let journal = Journal::open(dir.path().join("j.redb")).expect("open");
        let committer = Committer::start(journal.clone()).expect("start");
        let tickets: Vec<_> = (0..500u64)
            .map(|i| {
                let mut b = Batch::new();
                b.put("jobs", i, i.to_le_bytes());
                committer.submit_blocking(b).expect("submit")
            })
            .collect();
        let mut seqs = Vec::new();
        for t in tickets {
            seqs.push(t.wait_blocking().expect("commit").seq);
        }
        assert!(
            seqs.windows(2).all(|w| w[0] <= w[1]),
            "answers out of order"
        );
        let stats = committer.stats();
        assert_eq!((stats.batches, stats.writes), (500, 500));
        assert_eq!(stats.fsync.count(), stats.commits);
        assert_eq!(journal.scan("jobs").expect("scan").len(), 500);
        drop(committer);
        let reopened = Journal::open(dir.path().join("j.redb"));
        // The first handle still holds the file: redb refuses a second open of it.
        assert!(reopened.is_err());
        drop(journal);
        let reopened = Journal::open(dir.path().join("j.redb")).expect("reopen");
        assert_eq!(reopened.state().expect("state").records, 500);
    }

    #[test]
    fn a_malformed_batch_fails_alone_at_submit() {
        let dir = tempfile::tempdir().expect("temp dir");
        let committer = Committer::start(Journal::open(dir.path().join("j.redb")).expect("open"))
            .expect("start");
        let mut bad = Batch::new();
        bad.put("__journal", 1, vec![1]);
        assert!(matches!(
            committer.submit_blocking(bad).map_err(|e| e.kind),
            Err(ErrorKind::BadName { .. })
        ));
        let mut good = Batch::new();
        good.put("jobs", 1, vec![1]);
        committer
            .submit_blocking(good)
            .expect("submit")
            .wait_blocking()
            .expect("commit");
    }

    #[test]
    fn async_submitters_are_answered() {
        let dir = tempfile::tempdir().expect("temp dir");
        let committer = Committer::start(Journal::open(dir.path().join("j.redb")).expect("open"))
            .expect("start");
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let mut tickets = Vec::new();
            for i in 0..100u64 {
                let mut b = Batch::new();
                b.put("t", i, vec![0; 10]);
                tickets.push(committer.submit(b).await.expect("submit"));
            }
            for t in tickets {
                t.wait().await.expect("commit");
            }
        });
        assert_eq!(committer.journal().scan("t").expect("scan").len(), 100);
    }
}
