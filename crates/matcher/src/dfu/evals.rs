//! Candidate lists: Fluxion's scoring API, kept on one stack per match.
//!
//! Every vertex a walk visits gathers, per resource type, the candidates ("edge groups") its
//! children found: one child vertex each, or one formed slot (several child edges). A vertex
//! that matched a request chooses among them and marks the chosen edges for the update walk;
//! a vertex that only passes the walk through (an omitted prefix such as a rack) hands all of
//! its candidates to its parent unchanged.
//!
//! Here the candidates of the vertex being visited are the top of one stack, above the mark
//! taken when its visit began: handing them up is leaving them there, forgetting them is
//! truncating. Within a type, the stack keeps the order in which Fluxion appends (children
//! in visiting order, each child's own candidates after what it handed up), which is what
//! its unstable sort starts from.

use shardsched_resource::Sym;

use crate::gccsort;

/// One candidate: a child vertex, or a formed slot.
#[derive(Clone, Copy, Debug)]
pub struct EGroup {
    pub kind: Sym,
    pub score: i64,
    /// Units it offers (a vertex's whole available amount; 1 for a slot).
    pub count: u64,
    pub root: bool,
    /// Its edges, a range of [`Cands::edges`].
    pub edges: (u32, u32),
}

/// One edge of a candidate: the child vertex it leads to and what the update walk takes
/// there.
#[derive(Clone, Copy, Debug)]
pub struct EvalEdge {
    pub child: u32,
    pub needs: u64,
    pub excl: bool,
}

/// The candidate stack of one match. Scratch only: a clone starts empty.
#[derive(Debug, Default)]
pub struct Cands {
    pub groups: Vec<EGroup>,
    pub edges: Vec<EvalEdge>,
}

/// What a vertex chose of one type: the type's candidates in sorted order, and how many
/// of the first ones are taken.
#[derive(Debug)]
pub struct Choice {
    pub kind: Sym,
    pub order: Vec<u32>,
    pub best_k: u64,
    pub best_i: usize,
}

impl Clone for Cands {
    fn clone(&self) -> Self {
        Cands::default()
    }
}

impl Cands {
    pub fn clear(&mut self) {
        self.groups.clear();
        self.edges.clear();
    }

    /// Adds a one-edge candidate for child `child`.
    pub fn push_vertex(&mut self, kind: Sym, score: i64, count: u64, child: u32, excl: bool) {
        let e = self.edges.len() as u32;
        self.edges.push(EvalEdge {
            child,
            needs: count,
            excl,
        });
        self.groups.push(EGroup {
            kind,
            score,
            count,
            root: false,
            edges: (e, 1),
        });
    }

    /// Sum of the counts of `kind`'s qualified candidates above `mark` (score above the
    /// cut line 0).
    pub fn qualified(&self, mark: usize, kind: Sym) -> u64 {
        self.groups[mark..]
            .iter()
            .filter(|g| g.kind == kind && g.score > 0)
            .map(|g| g.count)
            .sum()
    }

    /// Sum of the counts of all of `kind`'s candidates in `range`.
    pub fn total(&self, range: std::ops::Range<usize>, kind: Sym) -> u64 {
        self.groups[range]
            .iter()
            .filter(|g| g.kind == kind)
            .map(|g| g.count)
            .sum()
    }
}

/// The choices made at one vertex, by type (Fluxion's per-type `evals_t` with its best-k).
#[derive(Debug, Default)]
pub struct Choices {
    pub list: Vec<Choice>,
    /// Spare lists for reuse.
    spare: Vec<Vec<u32>>,
}

impl Choices {
    pub fn clear(&mut self) {
        // Asked at every vertex a walk finishes, most of which (leaves) chose nothing.
        if self.list.is_empty() {
            return;
        }
        for c in self.list.drain(..) {
            let mut v = c.order;
            v.clear();
            self.spare.push(v);
        }
    }

    /// Fluxion's `choose_best_k`: sorts `kind`'s candidates above `mark` with `better`
    /// (the list as left by earlier sorts at this vertex, else in stack order), then takes
    /// whole candidates from the front until their counts reach `k`. Returns false (and
    /// leaves everything) when `k` is 0 or more than is `qualified` (their
    /// [`Cands::qualified`], which every caller has just summed to find `k`).
    pub fn choose(
        &mut self,
        cands: &Cands,
        (mark, kind): (usize, Sym),
        (k, qualified): (u64, u64),
        better: &mut impl FnMut(i64, i64) -> bool,
    ) -> bool {
        debug_assert_eq!(qualified, cands.qualified(mark, kind));
        if k == 0 || k > qualified {
            return false;
        }
        let pos = match self.list.iter().position(|c| c.kind == kind) {
            Some(p) => p,
            None => {
                let mut order = self.spare.pop().unwrap_or_default();
                order.extend(
                    (mark..cands.groups.len())
                        .filter(|&i| cands.groups[i].kind == kind)
                        .map(|i| i as u32),
                );
                self.list.push(Choice {
                    kind,
                    order,
                    best_k: 0,
                    best_i: 0,
                });
                self.list.len() - 1
            }
        };
        let choice = &mut self.list[pos];
        let groups = &cands.groups;
        gccsort::sort_by(&mut choice.order, &mut |a, b| {
            better(groups[*a as usize].score, groups[*b as usize].score)
        });
        let mut left = k;
        let mut i = 0;
        while left > 0 && i < choice.order.len() {
            let c = groups[choice.order[i] as usize].count;
            left = left.saturating_sub(c);
            i += 1;
        }
        choice.best_k = k;
        choice.best_i = i;
        true
    }

    /// Sorts every listed type's candidates and takes them all (Fluxion's
    /// `choose_accum_all`), for slot formation: the types present above `mark`.
    pub fn choose_all(
        &mut self,
        cands: &Cands,
        mark: usize,
        kinds: &[Sym],
        better: &mut impl FnMut(i64, i64) -> bool,
    ) {
        for &kind in kinds {
            let q = cands.qualified(mark, kind);
            self.choose(cands, (mark, kind), (q, q), better);
        }
    }

    /// The sorted candidates of `kind` (all of them; empty when `kind` was never chosen).
    pub fn sorted(&self, kind: Sym) -> &[u32] {
        self.list
            .iter()
            .find(|c| c.kind == kind)
            .map_or(&[], |c| c.order.as_slice())
    }
}
