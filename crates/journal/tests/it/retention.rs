//! Retention: under a steady churn of inserts and deletes (the caller's retention cut), redb
//! reuses the freed pages, so the file stops growing.

use shardsched_journal::{Batch, Committer, Journal};

#[test]
fn steady_churn_keeps_the_file_bounded() {
    let dir = tempfile::tempdir().expect("temp dir");
    let journal = Journal::open(dir.path().join("churn.redb")).expect("open");
    let committer = Committer::start(journal.clone()).expect("start");
    const ROUNDS: u64 = 600;
    const PER_ROUND: u64 = 20;
    const KEPT: u64 = 400;
    let mut sizes = Vec::new();
    for round in 0..ROUNDS {
        let mut batch = Batch::new();
        for i in 0..PER_ROUND {
            let key = round * PER_ROUND + i;
            batch.put("jobs", key, vec![(key % 251) as u8; 300]);
        }
        let first_kept = (round * PER_ROUND).saturating_sub(KEPT);
        batch.delete_below("jobs", first_kept);
        batch.put_meta("last", round.to_le_bytes());
        committer
            .submit_blocking(batch)
            .expect("submit")
            .wait_blocking()
            .expect("commit");
        if round % 50 == 49 {
            sizes.push(journal.file_bytes().expect("size"));
        }
    }
    let rows = journal.scan("jobs").expect("scan");
    assert_eq!(rows.len() as u64, KEPT + PER_ROUND);
    assert_eq!(
        journal.state().expect("state").records,
        KEPT + PER_ROUND + 1
    );
    // After 200 rounds the file has what it needs; 3x more churn must not
    // grow it further than a little slack for the allocator.
    let early = sizes[3];
    let last = *sizes.last().expect("sizes");
    eprintln!("file sizes every 50 rounds: {sizes:?}");
    assert!(
        last <= early + early / 2,
        "the file grew from {early} to {last} bytes under steady churn: {sizes:?}"
    );
    let stats = committer.stats();
    assert_eq!(stats.commits, ROUNDS);
    assert!(stats.fsync.quantile(0.5) > std::time::Duration::ZERO);
}
