//! Synthetic workloads, so that tests and benches need no downloaded trace.
//!
//! The model is small and documented (docs/QMANAGER.md), in the spirit of Lublin and
//! Feitelson's: the features that matter to a queue policy are there, each with one knob.
//!
//! - **Sizes** (nodes): 20 % of jobs are serial (1 node); the others are log-uniform in
//!   `[1, nodes]`, rounded to a power of two for 75 % of them (real traces are dominated by
//!   powers of two), else rounded up.
//! - **Run times**: log-uniform in `[60 s, 12 h]` — many short jobs, a long tail.
//! - **Requested times** (user estimates): 15 % of users ask exactly the run time; the rest
//!   over-estimate by a factor log-uniform in `[1, 10]`, rounded up to 5 minutes as people
//!   do, and capped at 48 h unless the run is longer. Early completions are what make
//!   backfill re-plan.
//! - **Arrivals**: a Poisson process whose rate makes the offered load
//!   `rate × mean(size × run) / nodes` equal the target `load` (mean taken over the
//!   generated jobs, so the target holds for the file itself).
//! - **Users**: 64 users, skewed towards low ids (`1 + ⌊64 u²⌋`).
//!
//! The same parameters and seed give the same file, byte for byte (ChaCha8).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Most jobs one call generates.
pub const GENERATE_JOBS_MAX: usize = 10_000_000;
/// Shortest and longest run time, in seconds.
pub const RUN_SECS_MIN: f64 = 60.0;
pub const RUN_SECS_MAX: f64 = 43_200.0;
/// Largest over-estimate factor.
pub const OVERESTIMATE_MAX: f64 = 10.0;
/// Requested times are rounded up to this many seconds.
pub const REQUEST_ROUND_SECS: i64 = 300;
/// Requested times are capped here (unless the job runs longer).
pub const REQUEST_SECS_MAX: i64 = 172_800;
/// Share of serial jobs, of power-of-two sizes among the others, of exact estimates.
pub const SERIAL_SHARE: f64 = 0.2;
pub const POWER_OF_TWO_SHARE: f64 = 0.75;
pub const EXACT_ESTIMATE_SHARE: f64 = 0.15;
/// Number of distinct users.
pub const USERS: u32 = 64;
/// The default offered load.
pub const LOAD_DEFAULT: f64 = 0.9;

/// Parameters of [`generate`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GenParams {
    pub jobs: usize,
    pub nodes: u64,
    pub seed: u64,
    /// Offered load: requested node-seconds per second of time, over the cluster size.
    pub load: f64,
}

/// Why parameters were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("workload parameters: {0}")]
pub struct GenError(pub String);

struct Job {
    size: u64,
    run: i64,
    requested: i64,
    user: u32,
}

/// Generates an SWF workload (header and one line per job).
pub fn generate(p: &GenParams) -> Result<String, GenError> {
    if p.nodes == 0 {
        return Err(GenError("nodes must be at least 1".into()));
    }
    if p.jobs > GENERATE_JOBS_MAX {
        return Err(GenError(format!("at most {GENERATE_JOBS_MAX} jobs")));
    }
    if !(p.load.is_finite() && p.load > 0.0 && p.load <= 100.0) {
        return Err(GenError(format!(
            "load must be in (0, 100], found {}",
            p.load
        )));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(p.seed);
    let jobs: Vec<Job> = (0..p.jobs).map(|_| job(&mut rng, p.nodes)).collect();
    let area: f64 = jobs
        .iter()
        .map(|j| j.size as f64 * j.run as f64)
        .sum::<f64>()
        / (p.jobs.max(1) as f64);
    let rate = p.load * p.nodes as f64 / area.max(1.0);
    let mut out = String::with_capacity(64 * (p.jobs + 8));
    out.push_str(&format!(
        "; Version: 2.2\n; Computer: shardsched synthetic workload\n\
         ; Note: shardsched workload generate --jobs {} --nodes {} --seed {} --load {}\n\
         ; MaxJobs: {}\n; MaxNodes: {}\n; MaxProcs: {}\n; UnixStartTime: 0\n",
        p.jobs, p.nodes, p.seed, p.load, p.jobs, p.nodes, p.nodes
    ));
    let mut clock = 0.0f64;
    for (i, j) in jobs.iter().enumerate() {
        let u: f64 = rng.random();
        clock += -(1.0 - u).ln() / rate;
        let submit = clock.floor() as i64;
        out.push_str(&format!(
            "{} {submit} -1 {} {} -1 -1 {} {} -1 1 {} 1 -1 1 1 -1 -1\n",
            i + 1,
            j.run,
            j.size,
            j.size,
            j.requested,
            j.user
        ));
    }
    Ok(out)
}

fn log_uniform(rng: &mut ChaCha8Rng, lo: f64, hi: f64) -> f64 {
    let u: f64 = rng.random();
    (lo.ln() + u * (hi.ln() - lo.ln())).exp()
}

fn job(rng: &mut ChaCha8Rng, nodes: u64) -> Job {
    let size = if rng.random::<f64>() < SERIAL_SHARE {
        1
    } else {
        let x = rng.random::<f64>() * (nodes as f64).log2();
        let s = if rng.random::<f64>() < POWER_OF_TWO_SHARE {
            2f64.powi(x.round() as i32)
        } else {
            2f64.powf(x).ceil()
        };
        (s as u64).clamp(1, nodes)
    };
    let run = log_uniform(rng, RUN_SECS_MIN, RUN_SECS_MAX).round() as i64;
    let requested = if rng.random::<f64>() < EXACT_ESTIMATE_SHARE {
        run
    } else {
        let f = log_uniform(rng, 1.0, OVERESTIMATE_MAX);
        let asked = (run as f64 * f).ceil() as i64;
        let r = (asked + REQUEST_ROUND_SECS - 1) / REQUEST_ROUND_SECS * REQUEST_ROUND_SECS;
        r.min(REQUEST_SECS_MAX).max(run)
    };
    let u: f64 = rng.random();
    let user = 1 + ((u * u * f64::from(USERS)) as u32).min(USERS - 1);
    Job {
        size,
        run,
        requested,
        user,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::swf;

    fn gen_params(seed: u64) -> GenParams {
        GenParams {
            jobs: 2000,
            nodes: 128,
            seed,
            load: 0.9,
        }
    }

    #[test]
    fn deterministic_per_seed() {
        assert_eq!(generate(&gen_params(1)), generate(&gen_params(1)));
        assert_ne!(generate(&gen_params(1)), generate(&gen_params(2)));
    }

    #[test]
    fn follows_the_model() {
        let p = gen_params(7);
        let w = swf::parse(&generate(&p).unwrap()).unwrap();
        assert_eq!(w.jobs.len(), p.jobs);
        let mut pow2 = 0;
        let mut last = 0;
        let mut area = 0.0;
        for j in &w.jobs {
            let size = j.procs().unwrap();
            assert!((1..=p.nodes).contains(&size));
            pow2 += usize::from(size.is_power_of_two());
            assert!(j.requested_time >= j.run);
            assert!((60..=43_200).contains(&j.run));
            assert!(j.submit >= last);
            last = j.submit;
            area += size as f64 * j.run as f64;
        }
        assert!(pow2 * 10 > p.jobs * 8, "{pow2} powers of two");
        let span = (w.jobs[w.jobs.len() - 1].submit - w.jobs[0].submit) as f64;
        let load = area / span / p.nodes as f64;
        assert!((load - p.load).abs() < 0.15, "offered load {load}");
    }

    #[test]
    fn refuses_bad_parameters() {
        let bad = |f: fn(&mut GenParams)| {
            let mut p = gen_params(1);
            f(&mut p);
            generate(&p).is_err()
        };
        assert!(bad(|p| p.nodes = 0));
        assert!(bad(|p| p.load = 0.0));
        assert!(bad(|p| p.load = f64::NAN));
    }
}
