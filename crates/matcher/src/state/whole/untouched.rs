//! The `k`-th earliest instant from which a node is untouched, for many nodes at once.
//!
//! Why: a reservation search for `k` whole nodes starts where `k` nodes are untouched for
//! the window (`qmanager::whole`); when fewer are at the first instant, it asked every node
//! its earliest such instant ([`SchedState::untouched_from`]): 4.2 million questions of ~615
//! instructions in the 5,000-job conservative replay, 5.7 % of its time. A node whose whole
//! holds nothing but whole covers is untouched over a window exactly when none of its covers
//! meets it, and that is one bit test per segment of the window, for every whole side by
//! side in the covers' planes: so the instants where such a node may become untouched (the
//! first instant, then every bound) are tried in order for all of them at once, until `k`
//! have been found untouched.

use shardsched_resource::VertexId;

use super::super::SchedState;
use super::{NO_WHOLE, window_end};

/// Working memory of [`SchedState::kth_untouched_from`], kept between calls.
#[derive(Clone, Debug, Default)]
pub struct UntouchedScratch {
    /// The earliest untouched instant of each node found so far.
    starts: Vec<i64>,
    /// Wholes of the nodes asked at once not found untouched yet, a bit per whole.
    waiting: Vec<u64>,
    /// Per whole: whether a cover meets the window tried.
    busy: Vec<u64>,
    /// The wholes of the nodes of the list last asked about.
    node_wholes: NodeWholes,
}

/// The whole of each node of a list that is its whole's node (`NO_WHOLE` for the others),
/// and the state build and list it was found for (`SchedState::built`, the list's address
/// and length): a queue asks about the same list again and again.
#[derive(Clone, Debug, Default)]
struct NodeWholes {
    of: Vec<u32>,
    /// Whether node `i`'s whole is whole `i`, for every node (the wholes are numbered in the
    /// graph's order, and a queue's nodes listed so).
    in_order: bool,
    made_for: Option<(u64, usize, usize)>,
}

impl SchedState {
    /// The `k`-th smallest (from 1) of [`SchedState::untouched_from`]`(v, at, dur)` over the
    /// inner vertices `nodes`, not counting those with none; `None` when fewer than `k`
    /// have one. The same answer as asking each of them.
    pub fn kth_untouched_from(
        &self,
        nodes: &[VertexId],
        k: usize,
        at: i64,
        dur: u64,
        scratch: &mut UntouchedScratch,
    ) -> Option<i64> {
        let UntouchedScratch {
            starts,
            waiting,
            busy,
            node_wholes,
        } = scratch;
        starts.clear();
        waiting.clear();
        waiting.resize(self.wholes_len().div_ceil(64), 0);
        // A node whose whole holds nothing but covers is answered with the others, from
        // the covers; any other on its own.
        let mut first_covered = None;
        for (&v, &c) in nodes.iter().zip(&self.node_wholes(nodes, node_wholes).of) {
            debug_assert_eq!(
                self.only_covers_node(v).map(|(c, _)| c),
                self.only_covers(c).then_some(c)
            );
            if self.only_covers(c) {
                waiting[c as usize / 64] |= 1 << (c % 64);
                first_covered.get_or_insert(v);
            } else {
                starts.extend(self.untouched_from(v, at, dur));
            }
        }
        // Their job-count calendars: empty ones, which answer the same for each of them.
        let empty = first_covered.and_then(|v| self.only_covers_node(v).map(|(_, x)| x));
        if let Some(x) = empty {
            let own = |t| x.untouched_from(t, dur);
            let dur = i64::try_from(dur).unwrap_or(i64::MAX);
            let covers = &self.wholes.covers;
            // A node becomes untouched at the first instant or where a run of its covers
            // ends: a bound. Tried in order; each node's first untouched one is its answer.
            let first = own(at);
            let later = first.map_or(&[][..], |t| covers.bounds_after(t));
            let mut found = 0;
            for t in first.into_iter().chain(later.iter().copied()) {
                // An empty calendar takes any instant within the horizon as it is.
                if own(t) != Some(t) || found >= k {
                    break;
                }
                covers.meeting_all(t, t.saturating_add(dur), busy);
                // The wholes still waiting that no cover meets now, 64 at a time (a pass
                // without a branch per whole).
                for (word, chunk) in waiting.iter_mut().zip(busy.chunks(64)) {
                    if *word == 0 {
                        continue;
                    }
                    let free = chunk
                        .iter()
                        .enumerate()
                        .fold(0u64, |m, (b, &x)| m | u64::from(x == 0) << b);
                    let now = *word & free;
                    if now != 0 {
                        *word &= !now;
                        let n = now.count_ones() as usize;
                        found += n;
                        starts.extend(std::iter::repeat_n(t, n));
                    }
                }
            }
        }
        if starts.len() < k || k == 0 {
            return None;
        }
        let (_, kth, _) = starts.select_nth_unstable(k - 1);
        Some(*kth)
    }

    /// Whether at least `k` of the inner vertices `nodes` are untouched over `[at, at +
    /// dur)`: [`SchedState::untouched`] asked of each in order until `k` say so.
    ///
    /// Why: a whole-node reservation search first asks this (`qmanager::whole`), ~260 nodes
    /// a search in the 20,000-job conservative replay, 4 % of its instructions when each
    /// node found its whole and the window among the covers' bounds on its own. Here the
    /// nodes' wholes are found once per state build and the window's plane once per call:
    /// a node whose whole holds nothing but covers is then one masked word of its row.
    pub fn untouched_at_least(
        &self,
        nodes: &[VertexId],
        k: usize,
        at: i64,
        dur: u64,
        scratch: &mut UntouchedScratch,
    ) -> bool {
        let covers = &self.wholes.covers;
        let plane = window_end(at, dur).and_then(|end| covers.window_plane(at, end));
        let wholes = self.node_wholes(nodes, &mut scratch.node_wholes);
        if let Some((j, mask)) = plane
            && wholes.in_order
        {
            let words = &covers.busy_plane(j)[..nodes.len()];
            let answer = self.at_least_in_order(nodes, k, (at, dur), words, mask);
            debug_assert_eq!(answer, {
                let asked = nodes
                    .iter()
                    .filter(|&&v| self.untouched(v, at, dur))
                    .count();
                asked >= k && k > 0
            });
            return answer;
        }
        let mut found = 0;
        for (&v, &c) in nodes.iter().zip(&wholes.of) {
            let untouched = match plane {
                Some(plane) if self.only_covers(c) => !covers.meets_in_plane(c, plane),
                _ => self.untouched(v, at, dur),
            };
            debug_assert_eq!(untouched, self.untouched(v, at, dur));
            if untouched {
                found += 1;
                if found == k {
                    return true;
                }
            }
        }
        false
    }

    /// [`SchedState::untouched_at_least`] when node `i`'s whole is whole `i` and the window
    /// lies in one plane (`words`, `mask`): 64 nodes at a time, each a test of its whole's
    /// records and its word, which compiles to vector instructions (a node with records of
    /// its own is asked on its own). Why: most searches scan most of the nodes before `k`
    /// are found (~1,000 a search in the 5,000-job replay).
    fn at_least_in_order(
        &self,
        nodes: &[VertexId],
        k: usize,
        (at, dur): (i64, u64),
        words: &[u64],
        mask: u64,
    ) -> bool {
        let records = &self.wholes.records[..nodes.len()];
        let mut found = 0;
        for (i, (rs, ws)) in records.chunks(64).zip(words.chunks(64)).enumerate() {
            found += rs
                .iter()
                .zip(ws)
                .filter(|&(&r, &w)| r == 0 && w & mask == 0)
                .count();
            for (b, _) in rs.iter().enumerate().filter(|&(_, &r)| r != 0) {
                found += usize::from(self.untouched(nodes[i * 64 + b], at, dur));
            }
            if k > 0 && found >= k {
                return true;
            }
        }
        false
    }

    /// Whether `c` is a whole (not `NO_WHOLE`) in which nothing but whole covers is
    /// recorded: whether a cover meets a window says whether a job touches its node.
    #[inline]
    fn only_covers(&self, c: u32) -> bool {
        c != NO_WHOLE && self.wholes.records[c as usize] == 0
    }

    /// The whole of each of `nodes` that is its whole's node (`NO_WHOLE` for the others),
    /// found into `cache` unless it holds them for this state build and list.
    fn node_wholes<'s>(&self, nodes: &[VertexId], cache: &'s mut NodeWholes) -> &'s NodeWholes {
        let key = (self.built(), nodes.as_ptr() as usize, nodes.len());
        if cache.made_for != Some(key) {
            cache.of.clear();
            cache.of.extend(nodes.iter().map(|&v| {
                self.inner_index(v)
                    .map(|i| self.wholes.of_inner[i as usize])
                    .filter(|&c| c != NO_WHOLE && self.whole_vertex(c) == v)
                    .unwrap_or(NO_WHOLE)
            }));
            cache.in_order = cache.of.iter().enumerate().all(|(i, &c)| c as usize == i);
            cache.made_for = Some(key);
        }
        cache
    }

    /// Node `v`'s whole and its job-count calendar, when `v` is the node of a whole in
    /// which nothing but whole covers is recorded.
    fn only_covers_node(&self, v: VertexId) -> Option<(u32, &crate::state::Aggregate)> {
        let i = self.inner_index(v)?;
        let c = self.only_covers_inner(i)?;
        let x = &self.inner[i as usize].agg;
        (self.whole_vertex(c) == v && x.cal.span_count() == 0).then_some((c, x))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use proptest::prelude::*;
    use shardsched_jobspec::{Jobspec, Shorthand};
    use shardsched_resource::VertexId;

    use super::UntouchedScratch;
    use crate::{MatchOp, MatchPolicy, Matcher, PruneFilters};

    /// `nodes` whole nodes (or, with `nodes` 0, one core) for `duration` seconds.
    fn job(nodes: u64, duration: u64) -> Jobspec {
        let shorthand = if nodes == 0 {
            Shorthand {
                tasks: Some(1),
                cores_per_task: 1,
                ..Shorthand::default()
            }
        } else {
            Shorthand {
                nodes: Some(nodes),
                ..Shorthand::default()
            }
        };
        Shorthand {
            duration,
            command: vec!["app".into()],
            ..shorthand
        }
        .to_jobspec()
        .unwrap()
    }

    proptest! {
        /// Whatever whole-node reservations (covers) and single cores (records of their
        /// own, so their node is asked alone) a cluster holds, the `k`-th earliest
        /// untouched instant found for all nodes at once is the one found node by node.
        #[test]
        fn the_kth_untouched_instant_is_the_one_each_node_gives(
            jobs in proptest::collection::vec((0u64..4, 0i64..300, 1u64..200), 0..12),
            asks in proptest::collection::vec((1usize..7, 0i64..600, 1u64..300), 1..12),
        ) {
            let g = shardsched_resource::generated_cluster(6).build().unwrap();
            let mut m = Matcher::new(
                g,
                MatchPolicy::parse("first").unwrap(),
                &PruneFilters::default_filters(),
            );
            for (id, &(nodes, now, duration)) in jobs.iter().enumerate() {
                let _ = m.place(MatchOp::AllocateOrElseReserve, &job(nodes, duration), id as u64 + 1, now);
            }
            let node = m.graph.sym("node").unwrap();
            let nodes: Vec<VertexId> = m
                .graph
                .vertices()
                .filter(|&v| m.graph.kind(v) == node)
                .collect();
            let mut scratch = UntouchedScratch::default();
            for (k, at, dur) in asks {
                let mut each: Vec<i64> = nodes
                    .iter()
                    .filter_map(|&v| m.state.untouched_from(v, at, dur))
                    .collect();
                each.sort_unstable();
                let want = each.get(k - 1).copied();
                let got = m.state.kth_untouched_from(&nodes, k, at, dur, &mut scratch);
                prop_assert_eq!(got, want, "k {} at {} for {}", k, at, dur);
            }
        }
    }
}
