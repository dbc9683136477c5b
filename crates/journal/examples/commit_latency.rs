//! Commit latency of the journal by batch size, on the disk of the directory given (default:
//! `target/journal-commit-latency`): `cargo run --release -p shardsched-journal --example
//! commit_latency [DIR]`. Each commit puts N records of 300 bytes (a shard's accepted-job
//! record is about that) and deletes N older ones, as a steady load does.

use std::time::Instant;

use shardsched_journal::{Batch, Journal, LatencyHistogram};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/journal-commit-latency".into());
    std::fs::create_dir_all(&dir)?;
    let path = std::path::Path::new(&dir).join("latency.redb");
    let _ = std::fs::remove_file(&path);
    let journal = Journal::open(&path)?;
    println!("batch writes | commits | median | p99 | µs per write (median)");
    let mut key = 0u64;
    for n in [1u64, 10, 100, 300, 1000] {
        let mut h = LatencyHistogram::default();
        let commits = (3000 / n).clamp(20, 300);
        let started = Instant::now();
        for _ in 0..commits {
            let mut batch = Batch::new();
            for _ in 0..n {
                batch.put("jobs", key, vec![7u8; 300]);
                if key >= 5000 {
                    batch.delete("jobs", key - 5000);
                }
                key += 1;
            }
            h.record(journal.commit(&batch)?.fsync);
        }
        let _ = started;
        let median = h.quantile(0.5);
        println!(
            "{n:>12} | {commits:>7} | {:>6.2} ms | {:>5.2} ms | {:.1}",
            median.as_secs_f64() * 1e3,
            h.quantile(0.99).as_secs_f64() * 1e3,
            median.as_secs_f64() * 1e6 / n as f64
        );
    }
    Ok(())
}
