//! The leaves of an idle cover group met one after another (`dfu::leaf`, `dfu::explore`:
//! once one core of a free socket is a candidate, the cores after it are answered from
//! themselves) and recorded in a row (`alloc`): each such leaf must still be asked what
//! differs between siblings — its status and its size — and the run must stop where the
//! group stops.
#![allow(clippy::unwrap_used)]

mod fixtures;

use fixtures::{matcher, socket_job};
use shardsched_matcher::{MatchOp, Matcher, Placement};
use shardsched_resource::{Status, VertexId};

/// The vertices job `id` holds, of type `kind`.
fn held(m: &Matcher, id: u64, kind: &str) -> Vec<VertexId> {
    m.job(id)
        .unwrap()
        .alloc
        .iter()
        .filter(|av| m.graph.kind_str(av.v) == kind)
        .map(|av| av.v)
        .collect()
}

/// The cores of the first node's first socket, in graph order.
fn first_socket_cores(m: &Matcher) -> (VertexId, Vec<VertexId>) {
    let g = &m.graph;
    let socket = g.vertices().find(|&v| g.kind_str(v) == "socket").unwrap();
    let cores = g
        .children(socket)
        .iter()
        .map(|&c| VertexId(c))
        .filter(|&c| g.kind_str(c) == "core")
        .collect();
    (socket, cores)
}

#[test]
fn a_core_down_in_the_middle_of_a_free_socket_stops_its_run() {
    for policy in ["first", "low", "high"] {
        let mut m = matcher(1, policy);
        let (socket, cores) = first_socket_cores(&m);
        assert_eq!(cores.len(), 22);
        let down = cores[7];
        let path = m.graph.path(down);
        m.set_status(&path, Status::Down).unwrap();
        // All 22 cores of a socket: the first socket has 21 up, so the job takes the other.
        let placed = m.place(MatchOp::Allocate, &socket_job(22), 1, 0).unwrap();
        assert_eq!(placed, Placement::Allocated { at: 0 }, "{policy}");
        let took = held(&m, 1, "socket");
        assert_eq!(took.len(), 1, "{policy}");
        assert_ne!(
            took[0], socket,
            "{policy}: took the socket with a core down"
        );
        assert!(!held(&m, 1, "core").contains(&down), "{policy}");
        // 21 cores fit the first socket without the one that is down.
        let placed = m.place(MatchOp::Allocate, &socket_job(21), 2, 0).unwrap();
        assert_eq!(placed, Placement::Allocated { at: 0 }, "{policy}");
        let cores2 = held(&m, 2, "core");
        assert_eq!(cores2.len(), 21, "{policy}");
        assert!(
            !cores2.contains(&down),
            "{policy}: took a core that is down"
        );
        assert!(cores2.iter().all(|c| cores.contains(c)), "{policy}");
    }
}

#[test]
fn a_run_of_cores_takes_only_what_the_request_counts() {
    // Four cores of a free socket, then the rest of it: the first job's run stops at four
    // (the type met), the second takes the other 18 and no core twice.
    let mut m = matcher(1, "first");
    m.place(MatchOp::Allocate, &socket_job(4), 1, 0).unwrap();
    assert_eq!(held(&m, 1, "socket").len(), 1);
    let first = held(&m, 1, "core");
    assert_eq!(first.len(), 4);
    assert_eq!(
        m.place(MatchOp::Allocate, &socket_job(18), 2, 0).unwrap(),
        Placement::Allocated { at: 0 }
    );
    let second = held(&m, 2, "core");
    assert_eq!(second.len(), 18);
    assert!(
        second.iter().all(|c| !first.contains(c)),
        "a core taken twice"
    );
    // The job that ends frees its run: a four-core job fits again, on no core the second
    // job holds.
    m.cancel(1).unwrap();
    m.place(MatchOp::Allocate, &socket_job(4), 3, 0).unwrap();
    let third = held(&m, 3, "core");
    assert_eq!(third.len(), 4);
    assert!(
        third.iter().all(|c| !second.contains(c)),
        "a core taken twice"
    );
}
