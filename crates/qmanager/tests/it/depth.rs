//! Queue depth bounds the jobs considered per cycle, not the jobs that ever start: once a
//! cycle has started jobs at the depth, the next cycle considers the jobs behind them.

use shardsched_jobspec::Shorthand;
use shardsched_qmanager::{Event, JobRequest, Params, QueueManager, QueuePolicy};
use shardsched_resource::{SCHEDULER_TYPES, generated_cluster, keep_types};

fn started(qm: &mut QueueManager) -> usize {
    std::iter::from_fn(|| qm.poll_event())
        .filter(|e| matches!(e, Event::Started { .. }))
        .count()
}

#[test]
fn a_full_depth_of_started_jobs_does_not_stall_the_queue() {
    let full = generated_cluster(8).build().expect("cluster builds");
    let graph = keep_types(&full, SCHEDULER_TYPES).expect("allowlist");
    for policy in [
        QueuePolicy::Fcfs,
        QueuePolicy::Easy,
        QueuePolicy::Conservative,
    ] {
        let mut params = Params::with_policy(policy);
        params.queue_depth = 2;
        let mut qm = QueueManager::new(graph.clone(), params).expect("queue manager");
        let js = Shorthand {
            nodes: Some(1),
            duration: 600,
            command: vec!["app".into()],
            ..Shorthand::default()
        }
        .to_jobspec()
        .expect("jobspec");
        for id in 1..=6 {
            let req = JobRequest {
                id,
                jobspec: js.clone(),
                priority: 0,
                submit_time: 0,
                user: 0,
            };
            qm.submit(req).expect("submit");
        }
        let mut total = 0;
        for _ in 0..3 {
            qm.schedule(0).expect("schedule");
            let n = started(&mut qm);
            assert_eq!(
                n, 2,
                "{policy:?}: each cycle considers (and here starts) two jobs"
            );
            total += n;
        }
        assert_eq!(total, 6, "{policy:?}");
    }
}
