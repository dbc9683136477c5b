//! Free nodes' visits, kept: what the select's visit of a node did when nothing was
//! recorded in the node, replayed when it meets the node free again with the same request.
//!
//! Why: a conservative replay of whole-node jobs re-places reservations again and again,
//! and each search visits a couple of hundred free nodes it then does not take (242 a
//! select on the 1,000-job replay), each a walk of its ~60 vertices — explore, slot
//! formation, sort and choice, ~4,000 instructions a node: the select was 45–60 % of the
//! replays' time. The same node, free, is visited the same way every time.
//!
//! What a visit of whole `c`'s node does when nothing is recorded in the whole over the
//! window ([`SchedState::whole_node`]: every unit below it free, whatever the window)
//! depends on the graph below the node (its shape, statuses and properties: the graph's
//! revision), the walk's child order below it (`first`'s learned weights: a change below
//! the node forgets its visit, [`NodeVisits::forget`]), the request's structure from the
//! node's level down ([`fingerprint`]) and the walk's settings ([`Setting`]); not the window.
//! Its effects: the node's candidacy (or none), the exclusivity it hands up, the marks it
//! sets on edges below (the node choosing its slots), the `errno` it leaves, the visits it
//! counts — and no candidate left on the stack (checked before a visit is kept). A visit is
//! kept at the node's second free visit (a node taken at its first is never visited free
//! again, so keeping that one would be wasted), and replayed from the third on. Debug
//! builds walk the node at every replay too and compare everything.
//!
//! Not kept: walks that label vertices, flexible or DAG walks, walks counting Fluxion's
//! exact visits, requests with a node constraint, states where an untouched vertex may hold units
//! ([`SchedState::untouched_means_free`]), walks that ignore calendars.

use rustc_hash::FxHashMap;
use shardsched_resource::{Sym, VertexId};
use smallvec::SmallVec;

use super::run::Run;
use super::{Budget, Errno, Mark, Marks, Visit, Walk, WalkKind};
use crate::request::{ReqId, Request};
use crate::state::SchedState;
use crate::state::distinct::Distinct;

/// Distinct request structures numbered at once (see [`NodeVisits::key`]).
const KEYS_MAX: usize = 64;

/// How a visit was asked, besides the request: it decides the visit as much as the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Setting {
    pub(super) pristine: bool,
    pub(super) excl: bool,
    pub(super) budget: bool,
    pub(super) budgets: bool,
    pub(super) kind: WalkKind,
    /// The node-centric score its ancestors add (0 but under node-centric policies).
    pub(super) multilevel: i64,
}

/// What a visit of a free node hands its parent and leaves in the walk, its marks and
/// messages aside (what a run copies: `run`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Outcome {
    pub(super) visit: Option<Visit>,
    /// The exclusivity handed up.
    pub(super) excl: bool,
    /// The `errno` the visit set last, if it set one.
    pub(super) errno: Option<Errno>,
    /// Vertices entered and left with a candidacy.
    pub(super) visits: (u32, u32),
}

/// One kept visit of a free node.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Kept {
    pub(super) key: u32,
    pub(super) setting: Setting,
    pub(super) effects: Effects,
}

/// What a visit of a free node did.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Effects {
    pub(super) outcome: Outcome,
    /// Inline for the usual one or two (a node choosing its slot): read with the rest of
    /// the kept visit, not from a list of their own.
    pub(super) marks: SmallVec<[(u32, Mark); 2]>,
    /// The traverser messages it left (when they are kept).
    pub(super) said: String,
}

/// What is known of one whole's node.
#[derive(Clone, Debug, Default)]
pub(super) enum Known {
    #[default]
    Unvisited,
    /// Visited free once.
    Once,
    Kept(Box<Kept>),
}

/// The kept visits of the wholes' nodes, for one build of the state and one revision of
/// the graph. Scratch: a clone starts empty.
#[derive(Debug, Default)]
pub struct NodeVisits {
    /// `(SchedState::built, ResourceGraph::revision)` of what `of` was learned from.
    made_for: (u64, u64),
    pub(super) of: Vec<Known>,
    /// How many of `of` are [`Known::Kept`].
    kept: usize,
    /// Request structures, numbered ([`fingerprint`]).
    keys: Distinct<Box<[u64]>>,
    /// The request lists this walk met (by address, length and the node's type) and their
    /// structures' numbers.
    this_walk: Vec<((usize, usize, Sym), u32)>,
    /// How many times the numbering of `keys` started over.
    pub(super) numbering: u32,
    /// Counts the changes of what is known of each whole's node: a copy of its kept visit
    /// is good while its count stands (`run`).
    pub(super) version: Vec<u32>,
    /// Counts the times everything known was forgotten at once.
    pub(super) generation: u32,
    /// Explored vertices' children with copies of their kept visits (`run`), by vertex id.
    /// Taken out and put back at every explored vertex: hashed by `rustc-hash`, not SipHash
    /// (the ids are the graph's own).
    pub(super) runs: FxHashMap<u32, Box<Run>>,
}

impl Clone for NodeVisits {
    fn clone(&self) -> Self {
        NodeVisits::default()
    }
}

impl NodeVisits {
    /// Forgets what was kept of whole `c`'s node (its children's order changed).
    pub fn forget(&mut self, c: u32) {
        if self.kept > 0
            && let Some(k) = self.of.get_mut(c as usize)
            && let Known::Kept(_) = k
        {
            *k = Known::Unvisited;
            self.kept -= 1;
            self.version[c as usize] = self.version[c as usize].wrapping_add(1);
        }
    }

    /// Whether no visit is kept.
    pub(super) fn kept_none(&self) -> bool {
        self.kept == 0
    }

    /// Whether any visit is kept (else there is nothing to forget).
    pub fn keeps_any(&self) -> bool {
        self.kept > 0
    }

    /// Takes what is known of whole `c`'s node out (to be [`NodeVisits::set`] again).
    fn take(&mut self, c: u32) -> Known {
        let known = std::mem::take(&mut self.of[c as usize]);
        self.kept -= usize::from(matches!(known, Known::Kept(_)));
        known
    }

    /// Notes what is known of whole `c`'s node, new.
    fn set(&mut self, c: u32, known: Known) {
        self.version[c as usize] = self.version[c as usize].wrapping_add(1);
        self.put_back(c, known);
    }

    /// Puts back what [`NodeVisits::take`] took out of whole `c`, unchanged.
    fn put_back(&mut self, c: u32, known: Known) {
        self.kept += usize::from(matches!(known, Known::Kept(_)));
        self.of[c as usize] = known;
    }

    /// Forgets everything known at once.
    fn forget_all(&mut self) {
        self.of.fill(Known::Unvisited);
        self.kept = 0;
        self.generation = self.generation.wrapping_add(1);
        self.runs.clear();
    }

    /// Starts a walk on `st` and `revision`: everything kept for another state or graph
    /// goes.
    fn start(&mut self, st: &SchedState, revision: u64, wholes: usize) {
        self.this_walk.clear();
        let now = (st.built(), revision);
        if self.made_for != now {
            self.made_for = now;
            self.of.clear();
            self.of.resize(wholes, Known::Unvisited);
            self.version.clear();
            self.version.resize(wholes, 0);
            self.forget_all();
        }
    }

    /// The number of a request structure. When [`KEYS_MAX`] are numbered, everything
    /// kept is forgotten and the numbering starts over: a shard that lives for weeks meets
    /// new job shapes, and the recent ones are those worth keeping.
    fn key(&mut self, fingerprint: &[u64]) -> u32 {
        let mut number = || {
            self.keys
                .number(|k| **k == *fingerprint, || fingerprint.into(), KEYS_MAX)
        };
        if let Some(key) = number() {
            return key;
        }
        self.keys.clear();
        self.numbering = self.numbering.wrapping_add(1);
        self.this_walk.clear();
        self.forget_all();
        self.key(fingerprint)
    }
}

/// The structure of `reqs` from a node's level down, as numbers: everything a visit of the
/// node reads of the request. The count of a resource of the node's own type is left out
/// (its parent decides how many such nodes to take; the node's visit never reads it), so
/// jobs asking for different numbers of alike nodes share the visits.
fn fingerprint(req: &Request, reqs: &[ReqId], node_kind: Sym) -> Vec<u64> {
    let mut out = Vec::with_capacity(64);
    out.extend([reqs.len() as u64, node_kind.0 as u64]);
    for &r in reqs {
        let q = req.req(r);
        push_req(req, r, q.is_slot || q.ty != node_kind, &mut out);
    }
    out
}

fn push_req(req: &Request, r: ReqId, with_count: bool, out: &mut Vec<u64>) {
    let q = req.req(r);
    out.extend([
        q.ty.0 as u64,
        q.kind.map_or(u64::MAX, |k| k.0 as u64),
        u64::from(q.is_slot) | u64::from(q.is_xor) << 1 | u64::from(q.label.is_some()) << 2,
        q.exclusive.map_or(2, u64::from),
    ]);
    if with_count {
        out.extend([
            q.count.min,
            q.count.max,
            q.count.operand,
            q.count.operator as u64,
        ]);
    }
    for list in [&q.needs, &q.unit_needs] {
        out.push(list.len() as u64);
        out.extend(list.iter().flat_map(|&(s, n)| [s.0 as u64, n as u64]));
    }
    out.push(q.user_data.len() as u64);
    out.extend(q.user_data.iter().flat_map(|&(t, n)| [t as u64, n as u64]));
    out.push(q.with.len() as u64);
    for &c in &q.with {
        push_req(req, c, true, out);
    }
}

/// Does again what a kept visit did, but for the messages it left: `outcome`, and the
/// marks `set` (outside a logged visit: [`Walk::visit_free_node`] walks nodes inside one).
#[inline(always)]
pub(super) fn replay_quiet(
    outcome: &Outcome,
    set: &[(u32, Mark)],
    marks: &mut Marks,
    errno: &mut Errno,
    visits: &mut (u32, u32),
    excl: &mut bool,
) -> Option<Visit> {
    for &(child, m) in set {
        marks.set_unlogged(child, m);
    }
    if let Some(e) = outcome.errno {
        *errno = e;
    }
    visits.0 += outcome.visits.0;
    visits.1 += outcome.visits.1;
    *excl = outcome.excl;
    outcome.visit
}

impl<'a> Walk<'a> {
    /// Whether this walk may keep and replay free nodes' visits (see the module's doc).
    pub(super) fn keeps_node_visits(&self) -> bool {
        !self.req.labelled
            && !self.req.flexible
            && self.req.constraint.is_none()
            && !self.tree.is_dag()
            && !self.exact_visits
            && !self.win.kind.ignores_calendars()
            && self.st.untouched_means_free()
    }

    /// Readies the kept visits for this walk.
    pub(super) fn start_node_visits(&mut self) {
        let wholes = self.st.wholes_len();
        self.node_visits.start(self.st, self.g.revision(), wholes);
    }

    /// Visits `u`, the node of whole `c`, free over the window: replays its kept visit
    /// when there is one for this request and setting, else walks it (and keeps it at its
    /// second free visit). Out of line: the walk's recursion through `dom_dfv` stays lean.
    #[inline(never)]
    pub(super) fn visit_free_node(
        &mut self,
        c: u32,
        u: VertexId,
        reqs: &'a [ReqId],
        pristine: bool,
        excl: &mut bool,
        budget: Option<&mut Budget>,
    ) -> Option<Visit> {
        if self.marks.log.is_some() {
            // Inside another node's visit being noted (a node below a node): walked.
            return self.visit_vertex(u, reqs, pristine, excl, budget);
        }
        let known = self.node_visits.take(c);
        if let Known::Unvisited = known {
            // Its first free visit: most nodes a walk takes are met free only once.
            self.node_visits.set(c, Known::Once);
            return self.visit_vertex(u, reqs, pristine, excl, budget);
        }
        let setting = Setting {
            pristine,
            excl: *excl,
            budget: budget.is_some(),
            budgets: self.budgets,
            kind: self.win.kind,
            multilevel: self.multilevel,
        };
        let numbering = self.node_visits.numbering;
        let key = self.request_key(reqs, u);
        // The numbering started over: what was kept went with it.
        let known = if self.node_visits.numbering == numbering {
            known
        } else {
            Known::Once
        };
        match known {
            Known::Kept(k) if k.key == key && k.setting == setting => {
                let visit = if cfg!(debug_assertions) {
                    let (visit, walked) = self.visit_logged(u, reqs, pristine, excl, budget);
                    assert_eq!(
                        walked.as_ref(),
                        Some(&k.effects),
                        "a kept visit of a free node differs"
                    );
                    visit
                } else {
                    self.replay(&k.effects, excl)
                };
                self.node_visits.put_back(c, Known::Kept(k));
                visit
            }
            _ => {
                let (visit, walked) = self.visit_logged(u, reqs, pristine, excl, budget);
                let known = match walked {
                    Some(effects) => Known::Kept(Box::new(Kept {
                        key,
                        setting,
                        effects,
                    })),
                    None => Known::Once,
                };
                self.node_visits.set(c, known);
                visit
            }
        }
    }

    /// Walks `u` noting its effects, which are `None` when they are not all a replay would
    /// give: a candidate left on the stack, or the budget it was handed used.
    fn visit_logged(
        &mut self,
        u: VertexId,
        reqs: &'a [ReqId],
        pristine: bool,
        excl: &mut bool,
        mut budget: Option<&mut Budget>,
    ) -> (Option<Visit>, Option<Effects>) {
        let errno = std::mem::take(&mut self.errno);
        let visits = self.visits;
        let groups = self.cands.groups.len();
        let before = budget.as_deref().copied();
        let said_before = self.complaints.as_ref().map_or(0, String::len);
        self.marks.log = Some(Vec::new());
        let visit = self.visit_vertex(u, reqs, pristine, excl, budget.as_deref_mut());
        let mut marks = self.marks.log.take().unwrap_or_default();
        // Kept without the walk's epoch: a replay sets them in its own.
        for (_, m) in &mut marks {
            m.epoch = 0;
        }
        let set = std::mem::replace(&mut self.errno, errno);
        if set != Errno::None {
            self.errno = set;
        }
        let keepable = self.cands.groups.len() == groups && budget.as_deref().copied() == before;
        let effects = keepable.then(|| Effects {
            outcome: Outcome {
                visit,
                excl: *excl,
                errno: (set != Errno::None).then_some(set),
                visits: (self.visits.0 - visits.0, self.visits.1 - visits.1),
            },
            marks: marks.into_iter().collect(),
            said: self
                .complaints
                .as_ref()
                .and_then(|t| t.get(said_before..))
                .unwrap_or_default()
                .to_owned(),
        });
        (visit, effects)
    }

    /// Does again what a kept visit did.
    fn replay(&mut self, e: &Effects, excl: &mut bool) -> Option<Visit> {
        if !e.said.is_empty() {
            self.complain(|t| t.push_str(&e.said));
        }
        replay_quiet(
            &e.outcome,
            &e.marks,
            self.marks,
            &mut self.errno,
            &mut self.visits,
            excl,
        )
    }

    /// The number of `reqs`' structure at node `u` (computed once per list a walk meets).
    pub(super) fn request_key(&mut self, reqs: &[ReqId], u: VertexId) -> u32 {
        let kind = self.g.kind(u);
        let list = (reqs.as_ptr() as usize, reqs.len(), kind);
        let nv = &mut self.node_visits;
        if let Some(&(_, key)) = nv.this_walk.iter().find(|(l, _)| *l == list) {
            return key;
        }
        let key = nv.key(&fingerprint(self.req, reqs, kind));
        nv.this_walk.push((list, key));
        key
    }
}
