//! Property tests: the SWF reader and the schedule checker on arbitrary input, and small
//! arbitrary workloads replayed through every policy.
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use shardsched_qmanager::{Params, QueuePolicy};
use shardsched_replay::swf::{self, Fate};

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn swf_reader_never_panics_on_text(s in "(?s).{0,400}") {
        let _ = swf::parse(&s);
        let _ = shardsched_replay::check::check_schedule(&s, 4, true);
    }

    #[test]
    fn swf_reader_never_panics_on_bytes(b in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = swf::parse_bytes(&b);
    }

    #[test]
    fn swf_reader_never_panics_on_near_miss_lines(
        lines in prop::collection::vec(
            prop::collection::vec(
                prop_oneof![
                    "-?[0-9]{1,25}",
                    "-?[0-9]{1,5}\\.[0-9]{0,3}",
                    "[a-z;#]{1,3}",
                    Just("-1".to_string()),
                    Just("1e400".to_string()),
                ],
                0..22,
            ),
            0..8,
        ),
        sep in prop_oneof![Just(" "), Just("\t"), Just("  ")],
    ) {
        let text: String = lines.iter().map(|l| l.join(sep) + "\n").collect();
        // The checker reads the same untrusted text with its own reader.
        let _ = shardsched_replay::check::check_schedule(&text, 4, true);
        if let Ok(w) = swf::parse(&text) {
            let fates: Vec<Fate> = w.jobs.iter().map(|_| Fate::Waited(3)).collect();
            let again = swf::parse(&swf::write_with_waits(&w, &fates)).unwrap();
            prop_assert_eq!(again.jobs.len(), w.jobs.len());
            for (a, b) in again.jobs.iter().zip(&w.jobs) {
                prop_assert_eq!(a.wait, 3);
                prop_assert_eq!((a.submit, a.run, a.procs()), (b.submit, b.run, b.procs()));
            }
        }
    }
}

/// One SWF job line with the fields a replay reads drawn from small ranges, unknowns included.
fn swf_line() -> impl Strategy<Value = String> {
    (-50i64..200, -1i64..80, -1i64..7, -1i64..7, -1i64..100).prop_map(
        |(submit, run, alloc, req_procs, req_time)| {
            format!(
                "1 {submit} -1 {run} {alloc} -1 -1 {req_procs} {req_time} -1 1 1 1 -1 1 1 -1 -1"
            )
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn any_small_workload_replays_and_passes_the_checker(
        lines in prop::collection::vec(swf_line(), 0..25),
        policy in prop::sample::select(QueuePolicy::ALL.to_vec()),
    ) {
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let w = swf::parse(&text).unwrap();
        let params = Params { queue_depth: 0, reservation_depth: 2, ..Params::with_policy(policy) };
        let mut r = shardsched_replay::replay::Replay::new(
            shardsched_resource::generated_cluster(4).build().unwrap(), &w, shardsched_replay::replay::Unit::Node, params,
        ).unwrap();
        r.run().unwrap();
        let out = swf::write_with_waits(&w, &r.fates());
        let v = shardsched_replay::check::check_schedule(&out, 4, policy == QueuePolicy::Fcfs).unwrap();
        prop_assert!(v.is_empty(), "{:?}\n{}", v, out);
        for (job, res) in w.jobs.iter().zip(r.results()) {
            let fits = job.procs().is_some_and(|p| p <= 4) && job.planned_duration().is_some();
            prop_assert_eq!(res.start.is_some(), fits, "{:?} {:?}", job, res);
        }
    }
}
