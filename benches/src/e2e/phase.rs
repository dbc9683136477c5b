//! One phase of `bench e2e`: submissions with C requests in flight per shard, then a wait
//! until every job is allocated, and the figures of both.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use shardsched_client::output::now_ms;
use shardsched_client::{Client, StateDir, new_key};
use shardsched_histogram::nearest_rank;
use shardsched_jobspec::Shorthand;
use shardsched_proto::msg::client_shard::{Request, Response, Submit};
use shardsched_proto::msg::{JobId, JobState, Route};

use super::readings::{CpuSample, JournalReading};
use super::{ALLOCATION_POLL, PHASE_TIMEOUT, Phase, PhaseReport};

/// One submission: the job, and the client-side times in nanoseconds since the phase began.
struct Sent {
    id: JobId,
    sent_ns: u64,
    answered_ns: u64,
}

/// Runs `phase` against the `up` in `dir` (whose process is `up_pid`) and reports it.
pub async fn run(phase: &Phase, dir: &Path, up_pid: u32) -> Result<PhaseReport> {
    let client = Arc::new(Client::connect(&StateDir::at(dir.to_owned())).await?);
    let routes = client.routes().await?;
    let mut targets: Vec<Route> = Vec::new();
    for queue in phase.queues {
        match routes.queue(queue) {
            Some(route) => targets.push(route.clone()),
            None => bail!("queue {queue} has no route"),
        }
    }
    let jobspec = Shorthand {
        tasks: Some(1),
        duration: 3600,
        command: vec!["sleep".into(), "3600".into()],
        ..Shorthand::default()
    }
    .to_jobspec()
    .context("building the benchmark jobspec")?;
    let journal_before = JournalReading::settled(dir, phase.queues).await;
    let cpu_before = CpuSample::take(up_pid);
    let epoch = Instant::now();
    let first_send_ms = now_ms();
    let mut workers = tokio::task::JoinSet::new();
    for route in &targets {
        let session = client.shard(route).await?;
        let mut jobspec = jobspec.clone();
        jobspec.attributes.queue = Some(route.queue.clone());
        let jobspec_json = Arc::new(jobspec.to_json().to_string());
        let next = Arc::new(AtomicUsize::new(0));
        for _ in 0..phase.concurrency {
            let session = session.clone();
            let jobspec_json = Arc::clone(&jobspec_json);
            let next = Arc::clone(&next);
            let total = phase.jobs as usize;
            workers.spawn(async move {
                let mut sent = Vec::new();
                while next.fetch_add(1, Ordering::Relaxed) < total {
                    let request = Request::Submit(Submit {
                        idempotency_key: new_key(),
                        jobspec_json: String::clone(&jobspec_json),
                        urgency: None,
                        array: None,
                        signature: None,
                    });
                    let sent_ns = elapsed_ns(epoch);
                    match session.request(&request).await {
                        Ok(Response::Submitted { id, .. }) => sent.push(Sent {
                            id,
                            sent_ns,
                            answered_ns: elapsed_ns(epoch),
                        }),
                        Ok(other) => bail!("unexpected answer to a submit: {other:?}"),
                        Err(e) => return Err(anyhow::Error::new(e).context("submitting")),
                    }
                }
                Ok(sent)
            });
        }
    }
    let mut sent: Vec<Sent> = Vec::with_capacity(phase.jobs as usize * targets.len());
    while let Some(joined) = workers.join_next().await {
        sent.extend(joined.context("a submit worker failed")??);
    }
    let acked_ns = sent.iter().map(|s| s.answered_ns).max().unwrap_or(1).max(1);
    let cpu = CpuSample::take(up_pid).minus(&cpu_before);
    eprintln!(
        "bench e2e: {}: {} submissions acknowledged in {:.2} s; waiting for allocations",
        phase.name,
        sent.len(),
        acked_ns as f64 / 1e9
    );

    // Every job of this phase allocated (none pending), from each shard's own list.
    let ours: HashSet<JobId> = sent.iter().map(|s| s.id).collect();
    let mut alloc_ms: Vec<u64> = Vec::new();
    let mut last_start_ms = 0u64;
    let deadline = Instant::now() + PHASE_TIMEOUT;
    for route in &targets {
        loop {
            let mine = crate::system::shard_jobs(&client, route, &ours).await?;
            let pending = mine.iter().filter(|j| j.state == JobState::Pending).count();
            if pending == 0 && mine.len() as u64 >= phase.jobs {
                for job in mine {
                    if let Some(start) = job.start_ms {
                        alloc_ms.push(start.saturating_sub(job.submit_ms));
                        last_start_ms = last_start_ms.max(start);
                    }
                }
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "queue {}: {pending} of {} jobs still pending after {} s",
                    route.queue,
                    mine.len(),
                    PHASE_TIMEOUT.as_secs()
                );
            }
            tokio::time::sleep(ALLOCATION_POLL).await;
        }
    }
    client.close().await;
    let journal = JournalReading::settled(dir, phase.queues)
        .await
        .minus(&journal_before);

    let jobs = sent.len() as u64;
    let span_ms = last_start_ms.saturating_sub(first_send_ms).max(1);
    let mut rtt_us: Vec<u64> = sent
        .iter()
        .map(|s| (s.answered_ns - s.sent_ns) / 1000)
        .collect();
    rtt_us.sort_unstable();
    alloc_ms.sort_unstable();
    let same_ms = alloc_ms.iter().filter(|&&ms| ms == 0).count();
    Ok(PhaseReport {
        phase: phase.name.to_owned(),
        shards: targets.len(),
        jobs,
        concurrency: phase.concurrency,
        allocated_per_s: jobs as f64 * 1000.0 / span_ms as f64,
        acked_per_s: jobs as f64 * 1e9 / acked_ns as f64,
        alloc_latency_median_ms: nearest_rank(&alloc_ms, 0.5),
        alloc_latency_p99_ms: nearest_rank(&alloc_ms, 0.99),
        alloc_same_ms_share: same_ms as f64 / alloc_ms.len().max(1) as f64,
        submit_rtt_median_us: nearest_rank(&rtt_us, 0.5),
        submit_rtt_p99_us: nearest_rank(&rtt_us, 0.99),
        cpu_shards_us_per_job: cpu.shards_ms * 1000 / jobs.max(1),
        cpu_coordinator_us_per_job: cpu.coordinator_ms * 1000 / jobs.max(1),
        cpu_client_us_per_job: cpu.client_ms * 1000 / jobs.max(1),
        cores_busy: (cpu.shards_ms + cpu.coordinator_ms + cpu.client_ms) as f64 * 1e6
            / acked_ns as f64,
        journal_commits: journal.commits,
        journal_writes_per_commit: journal.writes as f64 / journal.commits.max(1) as f64,
        fsync_median_us: journal.fsync_quantile(0.5),
        fsync_p99_us: journal.fsync_quantile(0.99),
    })
}

fn elapsed_ns(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
}
