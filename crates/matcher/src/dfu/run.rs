//! Runs: the children of one explored vertex — a rack's nodes — in the order the
//! exploration visits them, each with a copy of its node's kept visit (`memo`), side by
//! side. Exploring the vertex again replays its free nodes from that one array.
//!
//! Why: a conservative re-plan's selects visit the same racks again and again, and most
//! nodes they meet there are free with a kept visit (1.26 million such visits in the
//! 1,000-job replay). Reaching each node's kept visit — its whole found from its vertex,
//! the visit in an allocation of its own, its key and setting compared — missed the cache
//! at every node and cost more than the replay itself.
//!
//! A run is made for one request key and setting, one order of the children and one
//! generation of what is kept ([`NodeVisits::generation`]); each entry is good while its
//! whole's count of changes ([`NodeVisits::version`]) stands. An entry no longer good is
//! answered the long way and the run is made again at the next exploration. Whether its node
//! is free over the window is asked anew at every visit, of the whole directly.

use shardsched_resource::{ResourceGraph, Sym, VertexId};

use super::explore::Tally;
use super::memo::{Known, NodeVisits, Outcome, Setting, replay_quiet};
use super::{Mark, Visit, Walk};
use crate::request::ReqId;
use crate::state::WholeNode;

/// An entry's whole when its child is no whole's node.
const NOT_WHOLE: u32 = u32::MAX;

/// One explored vertex's children with copies of their kept visits.
#[derive(Debug)]
pub(super) struct Run {
    generation: u32,
    key: u32,
    setting: Setting,
    /// The children as the order gave them, and whether it is read backwards.
    children: Vec<u32>,
    reversed: bool,
    /// By visiting position.
    entries: Vec<Entry>,
    /// The entries' marks, in order.
    marks: Vec<(u32, Mark)>,
    /// An entry no longer good was met: the run is made again.
    stale: bool,
}

/// One child of a run.
#[derive(Clone, Copy, Debug)]
struct Entry {
    /// Its whole ([`NOT_WHOLE`] when it is none's node).
    whole: u32,
    /// Its whole's [`NodeVisits::version`] when copied.
    version: u32,
    /// Its child's type (read here, beside the rest, instead of from the graph).
    kind: Sym,
    /// Whether a visit was kept for the run's key and setting (the rest is that visit's).
    kept: bool,
    outcome: Outcome,
    /// Its range of [`Run::marks`].
    marks: (u32, u32),
}

/// What one exploration knows of its children at once: the request's key for them (their
/// type, the numbering it was found under, the key) and their run, if any.
#[derive(Debug, Default)]
pub(super) struct Children {
    key: Option<(Sym, u32, u32)>,
    run: Option<Box<Run>>,
    /// The children are of a type the update walk takes whole, reading no mark below them
    /// (`update::Emit::visit`): what their visits marked there is not set again.
    unread_marks: bool,
}

impl Children {
    /// Whether the exploration has a run of its children.
    #[inline]
    pub(super) fn has_run(&self) -> bool {
        self.run.is_some()
    }

    /// The type of the child visited `i`-th, when the run has it.
    #[inline]
    pub(super) fn kind(&self, i: usize) -> Option<Sym> {
        Some(self.run.as_deref()?.entries.get(i)?.kind)
    }
}

impl<'a> Walk<'a> {
    /// Readies what the exploration of `u` knows of its children (`children`, read
    /// backwards when `reversed`), asked with `reqs`: a run when its visits may be kept
    /// and its children are nodes. Give it back with [`Walk::end_children`].
    pub(super) fn start_children(
        &mut self,
        u: VertexId,
        (children, reversed): (&[u32], bool),
        reqs: &'a [ReqId],
        pristine: bool,
        excl: bool,
    ) -> Children {
        let mut known = Children::default();
        if !self.keeps_visits || self.marks.log.is_some() || self.node_visits.kept_none() {
            return known;
        }
        let Some(&first) = children.first() else {
            return known;
        };
        if Some(self.g.kind(VertexId(first))) != self.node {
            return known;
        }
        let key = self.children_key(reqs, VertexId(first), &mut known);
        let setting = self.setting_of_children(pristine, excl);
        known.unread_marks = self.taken_whole(VertexId(first));
        let nv = &mut self.node_visits;
        let run = match nv.runs.remove(&u.0) {
            Some(run)
                if run.generation == nv.generation
                    && run.key == key
                    && run.setting == setting
                    && !run.stale
                    && run.reversed == reversed
                    && run.children == children =>
            {
                run
            }
            old => {
                // Made anew, in the memory of the old one if there was one.
                let mut run = old.unwrap_or_else(|| Box::new(Run::empty(setting)));
                run.make((self.g, self.st), nv, (children, reversed), key, setting);
                run
            }
        };
        known.run = Some(run);
        known
    }

    /// Keeps the run of `u`'s exploration for the next one.
    pub(super) fn end_children(&mut self, u: VertexId, known: Children) {
        if let Some(run) = known.run {
            self.node_visits.runs.insert(u.0, run);
        }
    }

    /// The setting an exploration's children are visited in (without a budget).
    fn setting_of_children(&self, pristine: bool, excl: bool) -> Setting {
        Setting {
            pristine,
            excl,
            budget: false,
            budgets: self.budgets,
            kind: self.win.kind,
            multilevel: self.multilevel,
        }
    }

    /// [`Walk::dom_dfv`] of `c`, the child an exploration visits `i`-th with `reqs`,
    /// answered at once when `c` is a whole's node and known: covered over the window
    /// (busy, as `dom_dfv` finds it), or free with its visit kept for this request and
    /// setting (replayed, as [`Walk::visit_free_node`] would: from the run when its entry is
    /// good). Else `c` is to be visited, with what `SchedState::whole_node` said of it
    /// when it was asked ([`Walk::dom_dfv_as`]).
    #[inline]
    pub(super) fn known_child(
        &mut self,
        i: usize,
        c: VertexId,
        reqs: &'a [ReqId],
        pristine: bool,
        excl: &mut bool,
        known: &mut Children,
    ) -> Result<Option<Visit>, Option<WholeNode>> {
        if let Some(run) = known.run.as_deref_mut()
            && let Some(e) = run.entries.get(i)
            && e.whole != NOT_WHOLE
        {
            if self.changed_since(e) {
                run.stale = true;
            } else if e.kept {
                return self.run_child((run, e, known.unread_marks), c, reqs, pristine, excl);
            }
        }
        // Only nodes are wholes' nodes: the rest (a node's sockets, cores…) are asked nothing.
        if !self.keeps_visits || self.marks.log.is_some() || Some(self.g.kind(c)) != self.node {
            return Err(None);
        }
        let whole = self.st.whole_node(c, self.win.at, self.win.dur);
        let w = match whole {
            WholeNode::Covered => return Ok(self.covered()),
            WholeNode::Free(w) => w,
            WholeNode::Other => return Err(Some(whole)),
        };
        // A node not kept (most nodes a short session meets) costs no key.
        if !matches!(self.node_visits.of[w as usize], Known::Kept(_)) {
            return Err(Some(whole));
        }
        let key = self.children_key(reqs, c, known);
        let setting = self.setting_of_children(pristine, *excl);
        let Known::Kept(k) = &self.node_visits.of[w as usize] else {
            return Err(Some(whole));
        };
        if k.key != key || k.setting != setting || !k.effects.said.is_empty() {
            return Err(Some(whole));
        }
        if cfg!(debug_assertions) {
            let visit = self.walk_kept(w, c, reqs, pristine, excl, (key, setting));
            return Ok(visit);
        }
        Ok(replay_quiet(
            &k.effects.outcome,
            &k.effects.marks,
            self.marks,
            &mut self.errno,
            &mut self.visits,
            excl,
        ))
    }

    /// [`Walk::known_child`] of a child whose run entry `e` is good (its marks left out
    /// when `unread_marks`).
    #[inline]
    fn run_child(
        &mut self,
        (run, e, unread_marks): (&Run, &Entry, bool),
        c: VertexId,
        reqs: &'a [ReqId],
        pristine: bool,
        excl: &mut bool,
    ) -> Result<Option<Visit>, Option<WholeNode>> {
        let whole = self.st.whole_state(e.whole, self.win.at, self.win.dur);
        match whole {
            WholeNode::Covered => return Ok(self.covered()),
            WholeNode::Free(_) => {}
            WholeNode::Other => return Err(Some(whole)),
        }
        let copied = &run.marks[e.marks.0 as usize..e.marks.1 as usize];
        if cfg!(debug_assertions) {
            let visit = self.walk_kept(e.whole, c, reqs, pristine, excl, (run.key, run.setting));
            let Known::Kept(k) = &self.node_visits.of[e.whole as usize] else {
                unreachable!("walk_kept keeps the visit");
            };
            let same = (&e.outcome, copied) == (&k.effects.outcome, &k.effects.marks[..]);
            assert!(same, "a run's copy of a kept visit differs");
            return Ok(visit);
        }
        let set = if unread_marks { &[][..] } else { copied };
        Ok(replay_quiet(
            &e.outcome,
            set,
            self.marks,
            &mut self.errno,
            &mut self.visits,
            excl,
        ))
    }

    /// Candidates for the nodes that come next among the children (`children`, read
    /// backwards when `reversed`, from `next`) while their run entries are good, of
    /// `tally`'s type, and their nodes free or covered over the window: each answered from
    /// its copy as [`Walk::known_child`] would answer it, until `tally` is met. Returns how
    /// many it took; the exploration's loop answers the next one (an entry gone stale, a
    /// node neither free nor covered). Out of line, as `follow_idle_run` is for leaves: a
    /// reservation's select meets a few hundred nodes this way, and the loop's per-child
    /// steps (its type's tally found, asked whether seen, whether a leaf, whether known)
    /// are asked once here.
    #[inline(never)]
    pub(super) fn follow_node_run(
        &mut self,
        (children, reversed, next): (&[u32], bool, usize),
        tally: &mut Tally,
        (reqs, pristine, excl, multiplier): (&'a [ReqId], bool, bool, u64),
        known: &Children,
    ) -> usize {
        // (Runs are made only where visits are kept: in a tree, where no child is seen
        // twice and the loop's `seen` is no question.)
        let Some(run) = known.run.as_deref() else {
            return 0;
        };
        debug_assert!(
            self.dag.is_none(),
            "a run in a graph whose vertices share parents"
        );
        let n = children.len();
        let mut i = next;
        while i < n && !tally.met {
            let Some(e) = run.entries.get(i) else {
                break;
            };
            if e.whole == NOT_WHOLE || e.kind != tally.kind || !e.kept || self.changed_since(e) {
                break;
            }
            let c = VertexId(children[if reversed { n - 1 - i } else { i }]);
            let mut x = excl;
            let Ok(vis) = self.run_child((run, e, known.unread_marks), c, reqs, pristine, &mut x)
            else {
                break;
            };
            i += 1;
            let Some(vis) = vis else {
                continue;
            };
            self.cands
                .push_vertex(tally.kind, vis.score, vis.avail(), c.0, x);
            tally.take(vis.avail(), multiplier);
        }
        i - next
    }

    /// Whether the visit of entry `e`'s node changed since the run copied it (kept again, or
    /// forgotten): then the entry answers nothing. `e` is a whole's node.
    #[inline]
    fn changed_since(&self, e: &Entry) -> bool {
        self.node_visits.version[e.whole as usize] != e.version
    }

    /// Whether the update walk takes `v` whole when it takes it (a type the request asks
    /// exclusively, a node under a node-exclusive policy), listing everything below it
    /// without reading a mark there: the emission's rule (`schedule.rs`).
    fn taken_whole(&self, v: VertexId) -> bool {
        let kind = self.g.kind(v);
        self.req.exclusive_types.contains(&kind)
            || (self.policy.node_exclusive && Some(kind) == self.node)
    }

    /// Debug builds: walks free node `c` (of whole `w`) whose kept visit is about to be
    /// replayed for `key` and `setting`, as [`Walk::visit_free_node`] does (which compares
    /// the walk with the kept visit), and checks that it found that visit.
    fn walk_kept(
        &mut self,
        w: u32,
        c: VertexId,
        reqs: &'a [ReqId],
        pristine: bool,
        excl: &mut bool,
        (key, setting): (u32, Setting),
    ) -> Option<Visit> {
        let visit = self.visit_free_node(w, c, reqs, pristine, excl, None);
        let same = matches!(&self.node_visits.of[w as usize],
            Known::Kept(k) if k.key == key && k.setting == setting);
        assert!(same, "a kept visit replayed for another request or setting");
        visit
    }

    /// The number of `reqs`' structure at `c`, found once for the children of one
    /// exploration (while the numbering stands and their type is the same).
    #[inline]
    fn children_key(&mut self, reqs: &[ReqId], c: VertexId, known: &mut Children) -> u32 {
        let kind = self.g.kind(c);
        if let Some((k, numbering, key)) = known.key
            && k == kind
            && numbering == self.node_visits.numbering
        {
            return key;
        }
        let key = self.request_key(reqs, c);
        known.key = Some((kind, self.node_visits.numbering, key));
        key
    }
}

impl Run {
    /// A run with no children yet, for [`Run::make`].
    fn empty(setting: Setting) -> Run {
        Run {
            generation: 0,
            key: 0,
            setting,
            children: Vec::new(),
            reversed: false,
            entries: Vec::new(),
            marks: Vec::new(),
            stale: true,
        }
    }

    /// Makes the run anew for `children` (read backwards when `reversed`), `key` and
    /// `setting`, from what `nv` keeps now.
    fn make(
        &mut self,
        (g, st): (&ResourceGraph, &crate::state::SchedState),
        nv: &NodeVisits,
        (children, reversed): (&[u32], bool),
        key: u32,
        setting: Setting,
    ) {
        self.generation = nv.generation;
        self.key = key;
        self.setting = setting;
        self.children.clear();
        self.children.extend_from_slice(children);
        self.reversed = reversed;
        self.stale = false;
        self.entries.clear();
        self.marks.clear();
        let n = children.len();
        for i in 0..n {
            let c = VertexId(children[if reversed { n - 1 - i } else { i }]);
            let whole = st.whole_at(c).unwrap_or(NOT_WHOLE);
            let mut e = Entry {
                whole,
                kind: g.kind(c),
                version: nv.version.get(whole as usize).copied().unwrap_or(0),
                kept: false,
                outcome: Outcome::default(),
                marks: (0, 0),
            };
            if let Some(Known::Kept(k)) = nv.of.get(whole as usize)
                && k.key == key
                && k.setting == setting
                && k.effects.said.is_empty()
            {
                let from = self.marks.len() as u32;
                self.marks.extend_from_slice(&k.effects.marks);
                e = Entry {
                    kept: true,
                    outcome: k.effects.outcome,
                    marks: (from, self.marks.len() as u32),
                    ..e
                };
            }
            self.entries.push(e);
        }
    }
}
