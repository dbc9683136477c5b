//! Fluxion's traversal visit counts, which `resource-query -e` prints after each match
//! (`PREORDER VISIT COUNT`, `POSTORDER VISIT COUNT`, `utilities/command.cpp:148-152`) and
//! flux-sched's pruning tests compare.
//!
//! A select counts every vertex its walk enters and every vertex it leaves with a
//! candidacy (`traversers/dfu_impl.cpp:805,858`). What is printed is the traverser's total,
//! kept as `dfu_traverser_t::schedule` keeps it (`traversers/dfu.cpp:160-245`): a first
//! select that succeeds sets it; `allocate_with_satisfiability` adds its far-horizon select;
//! a reservation search adds each select it runs, and when it finds no time and the errno
//! is not ENOENT/ERANGE adds the last select again; `satisfiability` sets it to its one
//! select; a cancel sets it to its walk's counts. Anything else leaves it as it was, so a
//! failed `allocate` prints the previous command's totals.
//!
//! Counting costs two increments per visited vertex; only when counting is on
//! ([`Matcher::count_visits`]) do walks give up our shortcuts (best-first early stop,
//! skipping subtrees that cannot hold anything), which visit fewer vertices than Fluxion.

use crate::Matcher;

/// The counts of the last selects and the total resource-query prints.
#[derive(Clone, Debug, Default)]
pub(crate) struct VisitCounts {
    /// Walks visit exactly what Fluxion visits.
    pub(crate) on: bool,
    /// The last select's (preorder, postorder) counts.
    pub(crate) last: (u64, u64),
    /// The sum of the selects since it was last cleared (a reservation search).
    pub(crate) since: (u64, u64),
    /// Fluxion's `m_total_preorder`, `m_total_postorder`.
    pub(crate) total: (u64, u64),
}

impl VisitCounts {
    /// A select ended with `visits`.
    pub(crate) fn select(&mut self, visits: (u32, u32)) {
        self.last = (u64::from(visits.0), u64::from(visits.1));
        self.since.0 += self.last.0;
        self.since.1 += self.last.1;
    }

    /// The total becomes the last select's counts.
    pub(crate) fn set_to_last(&mut self) {
        self.total = self.last;
    }

    /// The total grows by `(pre, post)`.
    pub(crate) fn add(&mut self, (pre, post): (u64, u64)) {
        self.total.0 += pre;
        self.total.1 += post;
    }
}

impl Matcher {
    /// Makes every later walk visit exactly what Fluxion's walk visits, so that
    /// [`Matcher::visit_totals`] are Fluxion's (resource-query `-e`).
    pub fn count_visits(&mut self, on: bool) {
        self.visits.on = on;
    }

    /// Keeps Fluxion's traverser messages from now on (resource-query prints those of a
    /// match that fails): a resource written `exclusive: false` under a slot, siblings
    /// requesting one type, too few members for a slot. Walks of a request that may leave
    /// the first two (`Request::may_complain`) then visit what Fluxion's visit, as under
    /// [`Matcher::count_visits`].
    pub fn keep_complaints(&mut self) {
        self.complaints = Some(String::new());
    }

    /// The traverser messages of the last [`Matcher::schedule`] (empty when none, or when
    /// they are not kept).
    pub fn last_complaints(&self) -> &str {
        self.complaints.as_deref().unwrap_or_default()
    }

    /// Fluxion's traverser totals after the last command: (preorder, postorder).
    pub fn visit_totals(&self) -> (u64, u64) {
        self.visits.total
    }

    /// Sets the totals from a walk counted elsewhere (a cancel's).
    pub fn set_visit_totals(&mut self, totals: (u64, u64)) {
        self.visits.total = totals;
    }
}
