//! What journaling a big move costs the coordinator, on the disk of the directory given
//! (default `target/coordinator-journal-move`): `cargo run --release -p
//! shardsched-coordinator --example journal_move [DIR]`. A 1,024-node cluster with two
//! queues; each round moves every node from one queue to the other, all idle (the donor
//! answers "free now", the recipient acknowledges), through the real core and journal, and
//! reports the commits it took and how long each step's journal write took.

use std::path::Path;
use std::time::Instant;

use shardsched_coordinator::config::Config;
use shardsched_coordinator::core::{ConnId, Core};
use shardsched_coordinator::journal::CoordJournal;
use shardsched_coordinator::moves::MoveStatus;
use shardsched_journal::LatencyHistogram;
use shardsched_proto::msg::coord_shard::{FreeAt, ReleaseState, Request, Response};
use shardsched_proto::msg::shard_coord::Register;

const CONFIG: &str = r#"
default_queue = "a"
[cluster.inline]
name = "big"
[[cluster.inline.nodes]]
hosts = "n[0-1023]"
sockets = 2
cores_per_socket = 16
[queues.a]
nodes = "n[0-1023]"
[queues.b]
nodes = "n[0-1023]"
started = false
"#;
const ROUNDS: usize = 20;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/coordinator-journal-move".into());
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let config = Config::parse(CONFIG, "journal_move", Path::new("."))?;
    let (mut journal, previous, _) = CoordJournal::open(Path::new(&dir))?;
    let (mut core, durable) = Core::new(config, &previous, 1)?;
    journal.write_blocking(&durable.diff(&previous))?;
    for (conn, queue) in [(1u64, "a"), (2, "b")] {
        let reg = Register {
            queue: queue.into(),
            listen: std::net::SocketAddr::from(([127, 0, 0, 1], 7000 + conn as u16)),
            held: Vec::new(),
            last_job_id: None,
        };
        core.register(
            ConnId(conn),
            queue,
            std::net::SocketAddr::from(([127, 0, 0, 1], 1)),
            &reg,
        )
        .map_err(|e| format!("{e:?}"))?;
        core.moves_registered(0, queue, &[]);
    }
    flush(&mut journal, &mut core, &mut LatencyHistogram::default())?;
    core.moves_to_send();

    let commits_before = journal.stats().commits;
    let mut write = LatencyHistogram::default();
    let mut whole = LatencyHistogram::default();
    for round in 0..ROUNDS {
        let (from, to) = if round % 2 == 0 {
            ("a", "b")
        } else {
            ("b", "a")
        };
        let started = Instant::now();
        let nodes = core.owned_by(from);
        core.move_between(0, &nodes, from, to, None)
            .map_err(|r| r.to_string())?;
        flush(&mut journal, &mut core, &mut write)?;
        while core.moves().iter().any(|m| m.status == MoveStatus::Active) {
            for c in core.moves_to_send() {
                let answer = match &c.request {
                    Request::Release(r) => Response::Releasing {
                        nodes: r
                            .nodes
                            .iter()
                            .map(|ng| ReleaseState {
                                node: ng.clone(),
                                free: FreeAt::Now,
                                jobs: Vec::new(),
                            })
                            .collect(),
                        stale: Vec::new(),
                    },
                    _ => Response::Ack { stale: Vec::new() },
                };
                core.moves_answer(0, &c.queue, &c.request, &answer);
            }
            flush(&mut journal, &mut core, &mut write)?;
        }
        whole.record(started.elapsed());
    }
    let commits = journal.stats().commits - commits_before;
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    println!(
        "{ROUNDS} moves of 1,024 idle nodes: {commits} commits ({:.1} per move); journal write median {:.2} ms, p99 {:.2} ms; whole move (core + journal, no network) median {:.1} ms, max {:.1} ms; journal file {} KiB",
        commits as f64 / ROUNDS as f64,
        ms(write.quantile(0.5)),
        ms(write.quantile(0.99)),
        ms(whole.quantile(0.5)),
        ms(whole.max()),
        std::fs::metadata(journal.path())?.len() / 1024,
    );
    drop(journal);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

fn flush(
    journal: &mut CoordJournal,
    core: &mut Core,
    h: &mut LatencyHistogram,
) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(write) = core.journal_take() {
        let started = Instant::now();
        journal.write_blocking(&write.delta)?;
        h.record(started.elapsed());
        core.journal_done(&write);
    }
    Ok(())
}
