//! The whole-node search start (module `whole`): a reservation search for whole nodes
//! starts where enough nodes stay untouched for the whole window, and lands where the
//! definition does.
#![allow(clippy::unwrap_used)]

use shardsched_qmanager::{Event, Params, QueueManager, QueuePolicy};

use crate::common::{cluster, events, job, started};

/// Three nodes: job 1 holds one until 50, job 2 the other two until 100, job 3 has two
/// reserved from 100 (the first two: job 1's node and one of job 2's). Job 4 (one node,
/// 100 s) finds a free node at every instant of `[50, 150)` — the root's aggregates admit
/// it at 50 — but no node free for all of it before 100: the search starts at 100.
#[test]
fn a_whole_node_search_starts_where_a_node_stays_free() {
    for exhaustive in [false, true] {
        let mut params = Params::with_policy(QueuePolicy::Conservative);
        params.exhaustive = exhaustive;
        let mut qm = QueueManager::new(cluster(3), params).unwrap();
        for (id, nodes, duration) in [(1, 1, 50), (2, 2, 100), (3, 2, 100), (4, 1, 100)] {
            qm.submit(job(id, nodes, duration, 0)).unwrap();
        }
        qm.schedule(0).unwrap();
        let ev = events(&mut qm);
        assert_eq!(started(&ev), [1, 2], "exhaustive: {exhaustive}");
        assert!(ev.contains(&Event::Reserved { id: 3, at: 100 }), "{ev:?}");
        assert!(ev.contains(&Event::Reserved { id: 4, at: 100 }), "{ev:?}");
        let skips = qm.stats().whole_node_skips;
        assert_eq!(skips, u64::from(!exhaustive), "exhaustive: {exhaustive}");
    }
}
