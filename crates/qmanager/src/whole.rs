//! Where a reservation search for whole nodes may start: at the first instant at which
//! enough nodes are untouched for the whole window.
//!
//! # Why
//!
//! A reservation search ([`QueueManager::match_or_reserve`]) hands the matcher a first
//! instant `from` (the root's aggregates admit the job there, module `shapes`); the matcher
//! tries a full select at `from`, then at every later instant at which some allocation
//! starts or ends and the root's aggregates admit the job, until one succeeds. The
//! aggregates count free nodes at each instant of the window, not nodes free for the whole
//! of it: with many reservations the free nodes change from instant to instant, the
//! aggregates admit the job where no node set stays free long enough, and each such
//! instant costs a select over every node. For a request that takes `k` nodes exclusively,
//! one pass over the nodes' job-count calendars says more.
//!
//! # The rule, and why the matcher's answer is the same
//!
//! Let the job's request be one top-level `node` resource of at least `k` nodes written
//! `exclusive: true`, with no alternatives (what `shardsched submit -N k` and replay's
//! `--unit node` ask). A select at `t` for `d` seconds that succeeds takes at least `k`
//! distinct node vertices matched by that request, and the matcher refuses such a vertex
//! unless no job touches it during `[t, t + d)` (`SchedState::untouched`, Fluxion's
//! exclusivity check). So at least `k` nodes are untouched over `[t, t + d)`.
//!
//! For each node `n`, let `f(n)` be the earliest instant at or after `from` from which `n`
//! is untouched for `d` seconds (`SchedState::untouched_from`). If a select succeeds at some
//! `t >= from`, each of its `k` nodes has `f(n) <= t`; so `t` is at least `L`, the `k`-th
//! smallest `f(n)`. Every instant in `[from, L)` fails, whatever else the calendars say.
//!
//! `L` is `from` or the end of a hold on some node: `f(n)` is `from` or the instant at
//! which `n`'s job count drops to zero, an allocation's end. The matcher's candidate
//! instants are `now` and every allocation start or end at which the root's aggregates admit
//! the job; so after `L` the search moves to the first instant at or after `L` that the
//! aggregates admit (itself `L` or an allocation start or end), and the two steps repeat until
//! neither moves. The instant reached, `s`, is one the matcher would have tried (an end, or
//! `from`; the aggregates admit it), every candidate in `[from, s)` fails, and the matcher
//! called with `s` as its `now` tries `s` and then exactly the candidates after `s` it would
//! have tried: the same answer, with the same vertices (a select reads the window it is
//! given, not `now`). When the rule cannot say (no such `k` nodes within the planning
//! horizon), `from` stays, and the matcher decides as before.
//!
//! Nodes down, nodes outside the constraint and the node's contents only make a select
//! harder: counting nodes untouched over-estimates what it can take, so `L` is never too
//! late.

use shardsched_jobspec::Jobspec;
use shardsched_matcher::Matcher;
use shardsched_matcher::state::UntouchedScratch;
use shardsched_resource::VertexId;

use crate::shapes::RootAgg;

/// Rounds of "the nodes, then the aggregates" one search start may take before the last
/// instant reached is handed to the matcher as it is (still exact: every instant skipped
/// was proven to fail).
pub const WHOLE_NODE_ROUNDS_MAX: usize = 16;

/// The node vertices of a queue's graph, and scratch space for the rule of the module
/// documentation.
#[derive(Clone, Debug, Default)]
pub(crate) struct WholeNodes {
    /// Every vertex of type `node` that keeps calendars of its own.
    nodes: Vec<VertexId>,
    /// Working memory of the `k`-th smallest `f(n)` (`SchedState::kth_untouched_from`).
    scratch: UntouchedScratch,
}

impl WholeNodes {
    pub(crate) fn new(m: &Matcher) -> WholeNodes {
        let nodes = m
            .graph
            .vertices()
            .filter(|&v| m.graph.kind_str(v) == "node" && m.state.inner_index(v).is_some())
            .collect();
        WholeNodes {
            nodes,
            scratch: UntouchedScratch::default(),
        }
    }

    /// `k` when `js` asks for `k` whole nodes as the rule requires: one top-level `node`
    /// resource of at least `k`, `exclusive: true`, no alternatives, a finite duration.
    pub(crate) fn need(js: &Jobspec) -> Option<usize> {
        let [top] = js.resources.as_slice() else {
            return None;
        };
        let whole = top.kind == "node" && top.exclusive == Some(true);
        if !whole || js.has_alternatives() || js.attributes.duration == 0 {
            return None;
        }
        usize::try_from(top.count.min).ok().filter(|&k| k > 0)
    }

    /// `L` of the module documentation: the `k`-th smallest instant at or after `from` from
    /// which a node is untouched for `duration` seconds. `None` when fewer than `k` nodes
    /// ever are (within the planning horizon).
    pub(crate) fn first_untouched(
        &mut self,
        m: &Matcher,
        k: usize,
        from: i64,
        duration: u64,
    ) -> Option<i64> {
        // Most searches start where they were asked to: `k` nodes untouched at `from` say
        // so, with one look at each node until the `k`th (a node in use needs no instant
        // computed for that).
        if m.state
            .untouched_at_least(&self.nodes, k, from, duration, &mut self.scratch)
        {
            debug_assert_eq!(self.kth_node_by_node(m, k, from, duration), Some(from));
            return Some(from);
        }
        let kth = m
            .state
            .kth_untouched_from(&self.nodes, k, from, duration, &mut self.scratch);
        debug_assert_eq!(kth, self.kth_node_by_node(m, k, from, duration));
        debug_assert!(kth.is_none_or(|t| t >= from));
        kth
    }

    /// [`WholeNodes::first_untouched`]'s answer from each node's `f(n)` asked one by one,
    /// for debug builds to check the answer found for many nodes at once.
    fn kth_node_by_node(&self, m: &Matcher, k: usize, from: i64, duration: u64) -> Option<i64> {
        let mut starts: Vec<i64> = self
            .nodes
            .iter()
            .filter_map(|&v| m.state.untouched_from(v, from, duration))
            .collect();
        if starts.len() < k {
            return None;
        }
        let (_, kth, _) = starts.select_nth_unstable(k - 1);
        Some(*kth)
    }

    /// Where a reservation search for `k` whole nodes, which the root's aggregates would
    /// start at `from`, may start instead: alternately the first instant at which `k` nodes
    /// are untouched for the window and the first the aggregates admit, until neither moves
    /// (or [`WHOLE_NODE_ROUNDS_MAX`] rounds).
    pub(crate) fn search_start(
        &mut self,
        m: &Matcher,
        root: &RootAgg,
        k: usize,
        needs: &[i64],
        from: i64,
        duration: u64,
    ) -> i64 {
        let mut at = from;
        for _ in 0..WHOLE_NODE_ROUNDS_MAX {
            let Some(nodes) = self.first_untouched(m, k, at, duration) else {
                break;
            };
            if nodes == at {
                break;
            }
            at = root
                .earliest_fit(m, needs, nodes, duration)
                .map_or(nodes, |t| t.max(nodes));
        }
        at
    }
}
