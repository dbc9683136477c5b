use super::*;
use crate::{MatchOp, MatchPolicy, Matcher, PruneFilters};
use shardsched_jobspec::Shorthand;

struct NoRanks;
impl PruneRank for NoRanks {
    fn prune_rank(&self, _: VertexId) -> Option<u32> {
        None
    }
}

/// A matcher (policy first) over `g`.
fn first_matcher(g: shardsched_resource::ResourceGraph) -> Matcher {
    Matcher::new(
        g,
        MatchPolicy::parse("first").unwrap(),
        &PruneFilters::default_filters(),
    )
}

/// A matcher (policy first) over `g` holding job 1: `nodes` whole nodes over `[0, 100)`.
fn whole_nodes_placed(g: shardsched_resource::ResourceGraph, nodes: u64) -> Matcher {
    let mut m = first_matcher(g);
    m.place(MatchOp::Allocate, &whole_nodes(nodes), 1, 0)
        .unwrap();
    m
}

/// Two generated nodes.
fn two_nodes() -> shardsched_resource::ResourceGraph {
    shardsched_resource::generated_cluster(2).build().unwrap()
}

/// A matcher that took both of [`two_nodes`] whole, let them go and took them again as
/// job 2: each node one entry of job 2's allocation (returned), its listing kept.
fn nodes_taken_whole_again() -> (Matcher, Allocation) {
    let mut m = whole_nodes_placed(two_nodes(), 2);
    m.cancel(1).unwrap();
    m.place(MatchOp::Allocate, &whole_nodes(2), 2, 0).unwrap();
    let a = m.job(2).unwrap().alloc.clone();
    assert_eq!(a.wholes().len(), 2, "both nodes kept whole");
    (m, a)
}

/// A jobspec of `nodes` whole nodes for 100 s.
fn whole_nodes(nodes: u64) -> shardsched_jobspec::Jobspec {
    Shorthand {
        nodes: Some(nodes),
        duration: 100,
        command: vec!["app".into()],
        ..Shorthand::default()
    }
    .to_jobspec()
    .unwrap()
}

/// A jobspec of one core for 100 s.
pub(crate) fn one_core() -> shardsched_jobspec::Jobspec {
    Shorthand {
        tasks: Some(1),
        cores_per_task: 1,
        duration: 100,
        command: vec!["app".into()],
        ..Shorthand::default()
    }
    .to_jobspec()
    .unwrap()
}

/// A commit of whole nodes reads each cover group's covers once: every other leaf of
/// the group is answered from the memo, and the answers are the calendars' (the memo
/// asserts it in debug builds).
#[test]
fn a_commit_reads_each_cover_group_once() {
    let m = whole_nodes_placed(two_nodes(), 2);
    // The same nodes again, after the job: the leaves read covers that do not meet the
    // window; then over it, where they are refused (a lenient commit goes on).
    for (at, fits) in [(100, true), (50, false)] {
        let mut alloc = m.job(1).unwrap().alloc.clone();
        alloc.at = at;
        let leaves = alloc
            .iter()
            .filter(|av| m.state.cover_group(av.v).is_some())
            .count() as u64;
        let groups: std::collections::BTreeSet<u32> = alloc
            .iter()
            .filter_map(|av| m.state.cover_group(av.v))
            .collect();
        assert!(
            leaves > 2 * groups.len() as u64,
            "whole nodes have covered leaves"
        );
        // Job 1's records one by one (not a whole cover): the nodes' leaves are then
        // checked one by one too.
        let mut st = m.state.clone();
        let mut job_spans = m.job(1).unwrap().spans.clone();
        st.uncover(&m.graph, &m.graph, &mut job_spans).unwrap();
        let (mut spans, mut refused) = (Vec::new(), Vec::new());
        let mut scratch = CommitScratch::default();
        let r = commit_inner(
            &m.graph,
            &m.graph,
            &mut st,
            &NoRanks,
            &mut alloc,
            true,
            None::<fn(&SchedState, VertexId)>,
            &mut spans,
            &mut refused,
            &mut scratch,
        );
        assert!(r.is_ok(), "at {at}");
        assert_eq!(refused.is_empty(), fits, "at {at}");
        assert_eq!(scratch.memo.hits, leaves - groups.len() as u64, "at {at}");
    }
}

/// A node whose sockets were dropped (as a shard and replay load the graph) lists each
/// socket's cores, gpus and memory in turn: a whole node where another job holds a core
/// at another time is still one cover per type, not a hold per leaf; a node with
/// nothing else recorded is one whole cover.
#[test]
fn interleaved_leaf_types_are_still_covered() {
    let g = shardsched_resource::keep_types(&two_nodes(), shardsched_resource::SCHEDULER_TYPES);
    let mut m = first_matcher(g.unwrap());
    m.place(MatchOp::Allocate, &one_core(), 1, 0).unwrap();
    // Both nodes from 100: the one with the core job's hold, and the other.
    m.place(MatchOp::AllocateOrElseReserve, &whole_nodes(2), 2, 0)
        .unwrap();
    let spans = &m.job(2).unwrap().spans;
    let count = |f: fn(&SpanRef) -> bool| spans.iter().filter(|s| f(s)).count();
    assert_eq!(count(|s| matches!(s, SpanRef::Cover(..))), 3, "{spans:?}");
    assert_eq!(count(|s| matches!(s, SpanRef::Whole(..))), 1, "{spans:?}");
    assert_eq!(count(|s| matches!(s, SpanRef::Leaf(..))), 0, "{spans:?}");
    assert_eq!(m.state.leaves.live_holds(), 1, "the core job's");
}

/// A node taken whole is one entry of its allocation, standing for the listing kept from
/// its first (`alloc::allocation`; the first itself is kept and referred to at once), and
/// reads as the list a walk gives. Its
/// commit is one whole cover when nothing else is recorded in the node over the window;
/// else the entry is listed out and recorded vertex by vertex: a strict commit then fails
/// (recording nothing), a lenient one leaves the taken vertex out at its place in the whole
/// list (the node kept whole before it counted).
#[test]
fn a_kept_whole_is_one_entry_and_listed_out_where_it_must() {
    let (mut m, a) = nodes_taken_whole_again();
    assert_eq!(
        a.entries().len(),
        4,
        "two nodes, their rack and the cluster"
    );
    // A node's first listing is kept and referred to at once (`update::Emit::visit`).
    let fresh = whole_nodes_placed(two_nodes(), 2);
    assert_eq!(
        fresh.job(1).unwrap().alloc.wholes().len(),
        2,
        "first listings"
    );
    assert_eq!(a, fresh.job(1).unwrap().alloc);
    let wholes = |m: &Matcher, id| {
        let spans = &m.job(id).unwrap().spans;
        spans
            .iter()
            .filter(|s| matches!(s, SpanRef::Whole(..)))
            .count()
    };
    assert_eq!(wholes(&m, 2), 2);
    m.cancel(2).unwrap();

    // A core of the node listed second, taken over the window.
    let first = a.entries()[a.wholes()[0].at as usize].v;
    let second = a.entries()[a.wholes()[1].at as usize].v;
    m.hold_node(5, first, 0, 100).unwrap();
    m.place(MatchOp::Allocate, &one_core(), 3, 0).unwrap();
    m.cancel(5).unwrap();
    let core = m
        .job(3)
        .unwrap()
        .alloc
        .iter()
        .find(|x| m.graph.kind_str(x.v) == "core");
    let core = core.unwrap().v;
    let node = |v| m.graph.ancestor_of_kind(v, m.graph.sym("node").unwrap());
    assert_eq!(node(core), Some(second));

    // Strict: refused, nothing recorded.
    let before = m.state.clone();
    assert!(m.restore(4, a.clone()).is_err());
    assert!(m.job(4).is_none());
    assert!(m.state == before);

    // Lenient: the core is left out where the full list has it; the first node is still
    // one whole cover.
    let mut st = m.state.clone();
    let (mut spans, mut refused) = (Vec::new(), Vec::new());
    let mut lenient = a.clone();
    let r = commit_inner(
        &m.graph,
        m.tree(),
        &mut st,
        &NoRanks,
        &mut lenient,
        true,
        None::<fn(&SchedState, VertexId)>,
        &mut spans,
        &mut refused,
        &mut CommitScratch::default(),
    );
    assert!(r.is_ok());
    let place = a.iter().position(|x| x.v == core);
    let left_out = LeftOut {
        kept: place.unwrap(),
        vertex: a.iter().find(|x| x.v == core).unwrap(),
        tagged: false,
    };
    assert_eq!(refused, vec![left_out]);
    assert_eq!(lenient.len(), a.len() - 1);
    let whole_covers = spans.iter().filter(|s| matches!(s, SpanRef::Whole(..)));
    assert_eq!(whole_covers.count(), 1);
}

/// An allocation naming one node kept whole twice is refused and leaves nothing recorded:
/// a commit adds its covers together, and a whole noted but not covered yet declines a
/// second cover as a cover would.
#[test]
fn a_node_kept_whole_twice_is_refused() {
    let (mut m, a) = nodes_taken_whole_again();
    m.cancel(2).unwrap();
    let w = a.wholes()[0];
    let node = a.entries()[w.at as usize];
    let mut twice = Allocation::window(a.at, a.duration);
    for _ in 0..2 {
        twice.push_whole(node, m.state.kept_listings(), w.whole(), node.depth);
    }
    let before = m.state.clone();
    assert!(m.restore(4, twice).is_err());
    assert!(m.job(4).is_none());
    assert!(m.state == before);
}

/// A clone of a matcher shares its kept listings (`state::listing::KeptListings`): either
/// may learn a whole's listing first, and both then list the node as the walk does.
#[test]
fn clones_share_kept_listings() {
    let mut a = first_matcher(two_nodes());
    let mut b = a.clone();
    for m in [&mut a, &mut b] {
        m.place(MatchOp::Allocate, &whole_nodes(2), 1, 0).unwrap();
        m.cancel(1).unwrap();
        m.place(MatchOp::Allocate, &whole_nodes(2), 2, 0).unwrap();
    }
    let (x, y) = (&a.job(2).unwrap().alloc, &b.job(2).unwrap().alloc);
    assert_eq!(x.wholes().len(), 2);
    assert_eq!(y.wholes().len(), 2);
    assert_eq!(x, y);
    let fresh = whole_nodes_placed(two_nodes(), 2);
    assert_eq!(*x, fresh.job(1).unwrap().alloc);
}

/// Two unlike nodes: `big0` (2 sockets of 4 cores) and `small0` (1 socket of 2 cores).
fn unlike_nodes() -> shardsched_resource::ResourceGraph {
    shardsched_resource::spec::ClusterSpec::parse(
        r#"name = "c"
[[nodes]]
hosts = "big0"
sockets = 2
cores_per_socket = 4
[[nodes]]
hosts = "small0"
sockets = 1
cores_per_socket = 2
"#,
    )
    .unwrap()
    .build()
    .unwrap()
}

/// Clones share the kept listings but each numbers the layouts it learns: when each
/// learns a different node's layout first, both still read every kept listing with its
/// own layout (a kept listing holds its layout, not a number).
#[test]
fn clones_that_learn_unlike_nodes_in_another_order_read_their_own_layouts() {
    let mut a = first_matcher(unlike_nodes());
    let mut b = a.clone();
    // The node a job takes (by path).
    let node_of = |m: &Matcher, job: u64| {
        let alloc = &m.job(job).unwrap().alloc;
        let node = m.graph.sym("node").unwrap();
        let v = alloc
            .iter()
            .find(|av| m.graph.kind(av.v) == node)
            .unwrap()
            .v;
        m.graph.path(v).to_string()
    };
    // `a` learns the layout of the node `first` takes first.
    a.place(MatchOp::Allocate, &whole_nodes(1), 11, 0).unwrap();
    let first = node_of(&a, 11);
    a.cancel(11).unwrap();
    // `b` takes a core of that node, so the node it takes whole is the other one.
    b.place(MatchOp::Allocate, &one_core(), 10, 0).unwrap();
    assert_eq!(node_of(&b, 10), first);
    b.place(MatchOp::Allocate, &whole_nodes(1), 11, 0).unwrap();
    let other = node_of(&b, 11);
    assert_ne!(other, first);
    b.cancel(10).unwrap();
    b.cancel(11).unwrap();
    // Each numbered the layout it learned first 0: the two numberings differ.
    let layout = |m: &Matcher, path: &str| {
        let v = m.graph.find_path(path).unwrap();
        m.state.whole_layout(m.state.whole_of(v).unwrap())
    };
    assert_eq!(layout(&a, &first), Some(0));
    assert_eq!(layout(&b, &other), Some(0));
    let fresh = whole_nodes_placed(unlike_nodes(), 2);
    let want = &fresh.job(1).unwrap().alloc;
    for m in [&mut a, &mut b] {
        m.place(MatchOp::Allocate, &whole_nodes(2), 12, 0).unwrap();
        let got = &m.job(12).unwrap().alloc;
        assert_eq!(got.wholes().len(), 2, "both nodes one entry each");
        assert_eq!(got, want);
        assert_eq!(
            got.iter().collect::<Vec<_>>(),
            want.iter().collect::<Vec<_>>()
        );
    }
}

/// An allocation whose nodes kept whole refer to another matcher's listings is listed out
/// and checked vertex by vertex when recorded: here in a matcher of the same cluster, where
/// it holds the same vertices.
#[test]
fn another_matchers_allocation_is_listed_out() {
    let (_, a) = nodes_taken_whole_again();
    let mut other = first_matcher(two_nodes());
    other.restore(2, a.clone()).unwrap();
    let held = &other.job(2).unwrap().alloc;
    assert!(held.wholes().is_empty());
    assert_eq!(*held, a);
    // Taken by the restore: a match over the same window finds nothing.
    let again = other
        .place(MatchOp::Allocate, &whole_nodes(1), 3, 0)
        .unwrap();
    assert!(
        !matches!(again, crate::Placement::Allocated { .. }),
        "{again:?}"
    );
}

/// A cover group is idle over a window when none of its leaves holds a record of its own
/// (at any time), and no cover of the group and no whole cover of its node meets the
/// window: what the leaf shortcut and the commit's leaf check read instead of each leaf's
/// calendar (`SchedState::group_untouched`). A core job makes its group busy until it is
/// cancelled; a whole-node job makes it busy over its window only. Whenever the group reads
/// idle, each of its leaves has all its units free.
#[test]
fn a_cover_group_is_idle_only_while_nothing_holds_its_leaves() {
    let mut m = first_matcher(two_nodes());
    let group_of_core = |m: &Matcher, job: u64| {
        let alloc = &m.job(job).unwrap().alloc;
        let core = alloc.iter().find(|av| m.graph.kind_str(av.v) == "core");
        m.state.cover_group(core.unwrap().v).unwrap()
    };
    let leaves_free = |m: &Matcher, p: u32, at: i64| {
        (0..m.graph.len() as u32)
            .map(VertexId)
            .filter(|&v| m.state.cover_group(v) == Some(p))
            .all(|v| {
                let size = m.graph.size(v);
                m.state.units_free(v, size, at, 100) == size
            })
    };
    m.place(MatchOp::Allocate, &one_core(), 1, 0).unwrap();
    let p = group_of_core(&m, 1);
    assert!(!m.state.group_untouched(p, 0, 100), "the core job's group");
    assert!(
        !m.state.group_untouched(p, 1_000, 100),
        "a leaf's own hold counts at any time"
    );
    m.cancel(1).unwrap();
    assert!(m.state.group_untouched(p, 0, 100), "cancelled");
    assert!(leaves_free(&m, p, 0));
    m.place(MatchOp::Allocate, &whole_nodes(2), 2, 0).unwrap();
    assert!(
        !m.state.group_untouched(p, 0, 100),
        "a whole cover over the window"
    );
    assert!(!leaves_free(&m, p, 50));
    assert!(
        m.state.group_untouched(p, 100, 100),
        "after the whole cover"
    );
    assert!(leaves_free(&m, p, 100));
}
