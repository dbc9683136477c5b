//! The standard measures of a replayed schedule.
//!
//! - **utilisation**: processor-seconds used / (capacity × makespan);
//! - **wait**: start − submit, mean and 95th percentile (nearest rank) over started jobs;
//! - **bounded slowdown** (Feitelson): max(1, (wait + run) / max(run, τ)) with τ = 10 s, so
//!   that very short jobs do not dominate the mean;
//! - **makespan**: last end − first submit;
//! - **jobs per second of scheduler time**: jobs started / wall time spent inside the queue
//!   manager and matcher.

use crate::replay::JobResult;

/// τ of the bounded slowdown, in seconds.
pub const BSLD_TAU_SECS: i64 = 10;

/// The measures of one replay.
#[derive(Clone, Debug, PartialEq)]
pub struct Metrics {
    pub jobs: usize,
    pub started: usize,
    /// Denied, or never started.
    pub not_run: usize,
    /// 0..=1.
    pub utilisation: f64,
    pub wait_mean: f64,
    pub wait_p95: i64,
    pub bsld_mean: f64,
    pub makespan: i64,
    pub scheduler_secs: f64,
    pub jobs_per_sec: f64,
}

/// Computes the measures of `results` on a cluster of `capacity` processors.
pub fn compute(results: &[JobResult], capacity: u64, scheduler_secs: f64) -> Metrics {
    let started: Vec<(&JobResult, i64)> = results
        .iter()
        .filter_map(|r| r.start.map(|s| (r, s)))
        .collect();
    let mut waits: Vec<i64> = started.iter().map(|(r, s)| s - r.submit).collect();
    waits.sort_unstable();
    let n = started.len();
    let first_submit = results.iter().map(|r| r.submit).min().unwrap_or(0);
    let last_end = started
        .iter()
        .map(|(r, s)| s.saturating_add(r.run))
        .max()
        .unwrap_or(first_submit);
    let makespan = last_end.saturating_sub(first_submit).max(0);
    let used: f64 = started
        .iter()
        .map(|(r, _)| r.procs as f64 * r.run as f64)
        .sum();
    let denominator = capacity as f64 * makespan as f64;
    let bsld: f64 = started
        .iter()
        .map(|(r, s)| {
            let wait = (s - r.submit) as f64;
            let run = r.run as f64;
            ((wait + run) / run.max(BSLD_TAU_SECS as f64)).max(1.0)
        })
        .sum();
    let mean = |sum: f64| if n == 0 { 0.0 } else { sum / n as f64 };
    Metrics {
        jobs: results.len(),
        started: n,
        not_run: results.len() - n,
        utilisation: if denominator > 0.0 {
            used / denominator
        } else {
            0.0
        },
        wait_mean: mean(waits.iter().map(|&w| w as f64).sum()),
        wait_p95: percentile(&waits, 95),
        bsld_mean: mean(bsld),
        makespan,
        scheduler_secs,
        jobs_per_sec: if scheduler_secs > 0.0 {
            n as f64 / scheduler_secs
        } else {
            0.0
        },
    }
}

/// Nearest-rank percentile of sorted values (0 for none).
fn percentile(sorted: &[i64], p: usize) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank.min(sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(submit: i64, start: Option<i64>, run: i64, procs: u64) -> JobResult {
        JobResult {
            submit,
            run,
            procs,
            start,
            first_reservation: None,
            not_run: None,
        }
    }

    #[test]
    fn measures_of_a_small_schedule() {
        // 2 processors; job A 2 procs for 10 s from 0; job B 1 proc 5 s, waits 10 s.
        let rs = [r(0, Some(0), 10, 2), r(0, Some(10), 5, 1), r(3, None, 5, 8)];
        let m = compute(&rs, 2, 0.5);
        assert_eq!((m.jobs, m.started, m.not_run), (3, 2, 1));
        assert_eq!(m.makespan, 15);
        assert!((m.utilisation - 25.0 / 30.0).abs() < 1e-9);
        assert!((m.wait_mean - 5.0).abs() < 1e-9);
        assert_eq!(m.wait_p95, 10);
        // A: max(1, 10/10) = 1; B: (10+5)/max(5,10) = 1.5.
        assert!((m.bsld_mean - 1.25).abs() < 1e-9);
        assert!((m.jobs_per_sec - 4.0).abs() < 1e-9);
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!(percentile(&v, 95), 95);
        assert_eq!(percentile(&[7], 95), 7);
        assert_eq!(percentile(&[], 95), 0);
        assert_eq!(percentile(&[1, 2, 3], 95), 3);
    }
}
