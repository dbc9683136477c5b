//! resource-query's `find`: the vertices that satisfy an expression, written by the session's
//! writer, as Fluxion's `dom_find_dfv` walks and evaluates them.
//!
//! The expression language (Fluxion's `expr_eval_api`): leaves `key=value` (a leaf runs to
//! the next space or tab), parentheses, and `and` / `or` between terms, or nothing between
//! them (`and`); no precedence: terms combine left to right. The expression is checked
//! whole first (an unknown key or a bad value refuses it), then evaluated at each vertex.
//!
//! | key | true at a vertex when |
//! |---|---|
//! | `status=up`/`down` | it is down, or an ancestor is (`up`: neither) |
//! | `sched-now=allocated`/`free` | an allocation holds it or an ancestor exclusively (`free`: none) |
//! | `sched-future=reserved`/`free` | the same for reservations |
//! | `jobid-alloc=ID` / `jobid-reserved=ID` | job ID's allocation (reservation) holds it exclusively |
//! | `jobid-span=ID` | job ID has a span in its pruning filter |
//! | `jobid-tag=ID` | job ID's allocation or reservation lists it |
//! | `names=HOSTLIST` | its name is in the hostlist (flux-core's `hostlist_find`) |
//! | `property=KEY` | it has property KEY (lower-cased) |
//! | `agfilter=true`/`false` | always its value; `true` also limits the output to vertices with a pruning filter and adds their usage |
//!
//! Values are compared lower-cased (job ids as written). A vertex is written (whole size,
//! exclusive, children first, each edge after its child's subtree) when it satisfies the
//! expression or any of its descendants is written.

use std::collections::HashMap;

use shardsched_resource::{HostRanges, ResourceGraph, Status, VertexId};

use crate::writer::{Emitted, MatchWriter, WriterError};
use crate::{Depth, JobState, Matcher};

/// Why `find` printed nothing (resource-query's message on stderr).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FindError {
    #[error("invalid criteria: {0}.")]
    Invalid(String),
    #[error("span missing in job2span  for vertex: {0}")]
    SpanMissing(String),
    #[error("find writer emit: {0}")]
    Writer(#[from] WriterError),
}

/// `and` / `or`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    And,
    Or,
}

const WS: &[u8] = b" \t";

fn first_not_ws(e: &[u8], at: usize) -> Option<usize> {
    (at..e.len()).find(|&i| !WS.contains(&e[i]))
}

fn first_ws(e: &[u8], at: usize) -> Option<usize> {
    (at..e.len()).find(|&i| WS.contains(&e[i]))
}

/// One past the parenthesis closing the one at the first non-blank from `at`.
fn closing_paren(e: &[u8], at: usize) -> Option<usize> {
    let mut pa = first_not_ws(e, at)? + 1;
    let mut bal = 1;
    while bal > 0 {
        let p = (pa..e.len()).find(|&i| e[i] == b'(' || e[i] == b')')?;
        bal += if e[p] == b')' { -1 } else { 1 };
        pa = p + 1;
    }
    Some(pa)
}

/// The operator after a term ending at `at` (which must be a blank), and where the next
/// term starts looking.
fn pred_op(e: &[u8], at: usize) -> Option<(Op, usize)> {
    if !WS.contains(e.get(at)?) {
        return None;
    }
    let nws = first_not_ws(e, at)?;
    let xws = first_ws(e, nws).unwrap_or(e.len());
    Some(match &e[nws..xws] {
        b"and" => (Op::And, xws),
        b"or" => (Op::Or, xws),
        _ => (Op::And, at),
    })
}

/// What is done with each leaf `key=value`.
trait Leaf {
    fn leaf(&mut self, key: &str, value: &str) -> Option<bool>;
}

/// One term at `at` (a leaf or a parenthesized expression): its value and where it ends.
fn term(e: &str, at: usize, f: &mut dyn Leaf) -> Option<(bool, usize)> {
    let b = e.as_bytes();
    let tok = first_not_ws(b, at)?;
    if b[tok] != b'(' {
        let end = first_ws(b, tok).unwrap_or(b.len());
        let leaf = &e[tok..end];
        let (key, value) = leaf.split_once('=')?;
        return Some((f.leaf(key, value)?, end));
    }
    let end = closing_paren(b, tok)?;
    Some((expr(&e[tok + 1..end - 1], f)?, end))
}

/// Fluxion's `evaluate` (also its `validate` and `extract`, by what `f` does with leaves).
fn expr(e: &str, f: &mut dyn Leaf) -> Option<bool> {
    let b = e.as_bytes();
    let (mut result, mut at) = term(e, 0, f)?;
    let last = b.iter().rposition(|c| !WS.contains(c))?;
    while at <= last {
        let (op, next) = pred_op(b, at)?;
        let (r, next) = term(e, next, f)?;
        result = match op {
            Op::And => result && r,
            Op::Or => result || r,
        };
        at = next;
    }
    Some(result)
}

/// flux-core's `flux_job_id_parse` (decimal, `0x` hex, dotted hex, F58; not the mnemonic
/// and emoji forms).
pub fn parse_jobid(s: &str) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let s = s.trim_start_matches(|c: char| c.is_ascii_whitespace());
    let s = s.strip_prefix("job.").unwrap_or(s);
    if s.is_empty() {
        return None;
    }
    let s = s.trim_start_matches(|c: char| c.is_ascii_whitespace());
    if s.contains('.') {
        let parts: Vec<&str> = s.split('.').collect();
        if parts.len() != 4
            || parts
                .iter()
                .any(|p| p.is_empty() || p.len() > 4 || !p.bytes().all(|c| c.is_ascii_hexdigit()))
        {
            return None;
        }
        return parts.iter().try_fold(0u64, |acc, p| {
            Some((acc << 16) | u64::from_str_radix(p, 16).ok()?)
        });
    }
    if s.contains('-') {
        return None;
    }
    if let Some(b58) = s.strip_prefix('ƒ').or_else(|| s.strip_prefix('f')) {
        const DIGITS: &[u8] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
        if b58.is_empty() || b58.len() > 12 {
            return None;
        }
        let mut id: i64 = 0;
        let mut scale: i64 = 1;
        for c in b58.bytes().rev() {
            let d = DIGITS.iter().position(|&x| x == c)? as i64;
            id = id.wrapping_add(d.wrapping_mul(scale));
            scale = scale.wrapping_mul(58);
        }
        return Some(id as u64);
    }
    let (digits, radix) = match s.strip_prefix("0x") {
        Some(h) => (h, 16),
        None => (s, 10),
    };
    let body = digits.trim_end_matches(|c: char| c.is_ascii_whitespace());
    let (neg, body) = match body.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, body.strip_prefix('+').unwrap_or(body)),
    };
    if body.is_empty() {
        // strtoull read nothing: fine only when nothing but blanks followed.
        return (digits.trim().is_empty() && radix == 10).then_some(0);
    }
    let v = u64::from_str_radix(body, radix).ok()?;
    Some(if neg { v.wrapping_neg() } else { v })
}

/// Checks leaves (Fluxion's `validate` of the vertex target).
struct Validate;

fn valid(key: &str, value: &str) -> bool {
    let lc = value.to_ascii_lowercase();
    match key {
        "status" => lc == "down" || lc == "up",
        "sched-now" => lc == "allocated" || lc == "free",
        "sched-future" => lc == "reserved" || lc == "free",
        "jobid-alloc" | "jobid-span" | "jobid-tag" | "jobid-reserved" => {
            parse_jobid(value).is_some()
        }
        "agfilter" => matches!(lc.as_str(), "true" | "t" | "false" | "f"),
        "names" => HostRanges::decode(&lc).is_some(),
        "property" => !lc.is_empty(),
        _ => false,
    }
}

impl Leaf for Validate {
    fn leaf(&mut self, key: &str, value: &str) -> Option<bool> {
        valid(key, value).then_some(true)
    }
}

/// Collects the job id and `agfilter` named (Fluxion's `extract`: the last of each wins).
struct Extract {
    jobid: u64,
    agfilter: bool,
}

impl Leaf for Extract {
    fn leaf(&mut self, key: &str, value: &str) -> Option<bool> {
        let lc = value.to_ascii_lowercase();
        match key {
            "jobid-alloc" | "jobid-span" | "jobid-tag" | "jobid-reserved" => {
                if let Some(id) = parse_jobid(&lc) {
                    self.jobid = id;
                }
            }
            "agfilter" => self.agfilter = lc == "true" || lc == "t",
            _ => {}
        }
        Some(true)
    }
}

/// What jobs hold of one vertex.
#[derive(Default)]
struct Held {
    /// Jobs whose allocation holds it exclusively (Fluxion's `schedule.allocations`).
    alloc: Vec<u64>,
    /// The same for reservations.
    reserved: Vec<u64>,
    /// Jobs that list it (Fluxion's `idata.tags`).
    tags: Vec<u64>,
}

/// Predicates inherited from ancestors (Fluxion's `vtx_predicates_override_t`).
#[derive(Clone, Copy, Default)]
struct Inherited {
    down: bool,
    allocated: bool,
    reserved: bool,
}

/// Evaluates leaves at one vertex.
struct AtVertex<'a> {
    m: &'a Matcher,
    v: VertexId,
    held: Option<&'a Held>,
    over: Inherited,
}

impl Leaf for AtVertex<'_> {
    fn leaf(&mut self, key: &str, value: &str) -> Option<bool> {
        if !valid(key, value) {
            return None;
        }
        let g = &self.m.graph;
        let lc = value.to_ascii_lowercase();
        let empty = Held::default();
        let held = self.held.unwrap_or(&empty);
        let down = g.status(self.v) == Status::Down;
        Some(match (key, lc.as_str()) {
            ("status", "down") => self.over.down || down,
            ("status", _) => !self.over.down && !down,
            ("sched-now", "allocated") => self.over.allocated || !held.alloc.is_empty(),
            ("sched-now", _) => !self.over.allocated && held.alloc.is_empty(),
            ("sched-future", "reserved") => self.over.reserved || !held.reserved.is_empty(),
            ("sched-future", _) => !self.over.reserved && held.reserved.is_empty(),
            ("jobid-alloc", _) => parse_jobid(value).is_some_and(|j| held.alloc.contains(&j)),
            ("jobid-reserved", _) => parse_jobid(value).is_some_and(|j| held.reserved.contains(&j)),
            ("jobid-tag", _) => parse_jobid(value).is_some_and(|j| held.tags.contains(&j)),
            ("jobid-span", _) => {
                parse_jobid(value).is_some_and(|j| self.m.job_aggregate(j, self.v).is_some())
            }
            ("agfilter", x) => x == "true" || x == "t",
            ("names", x) => HostRanges::decode(x).is_some_and(|h| h.contains(g.name(self.v))),
            ("property", x) => g.properties(self.v).is_some_and(|p| p.contains_key(x)),
            _ => return None,
        })
    }
}

/// The walk's state.
struct Find<'a> {
    m: &'a Matcher,
    criteria: &'a str,
    held: HashMap<u32, Held>,
    visited: Vec<bool>,
    jobid: u64,
    agfilter: bool,
    /// Wall-clock seconds (the filter usage of `agfilter` without a job id is read then).
    now: i64,
}

impl Matcher {
    /// Job `jobid`'s record in `v`'s pruning filter (its twins' and what no cancel reaches
    /// included: Fluxion keeps a filter record until a cancel removes it): the units of
    /// each aggregate type it takes there.
    fn job_aggregate(&self, jobid: u64, v: VertexId) -> Option<&[i64]> {
        self.job(jobid)
            .into_iter()
            .chain(self.beside(jobid))
            .flat_map(|job| &job.spans)
            .find_map(|&s| self.state.aggregate_span(v, s))
    }

    /// resource-query's `find CRITERIA`: feeds the vertices found to `w` (then emit its
    /// text with [`MatchWriter::emit_find`]). Nothing is fed when it fails.
    pub fn find(&self, criteria: &str, w: &mut MatchWriter) -> Result<(), FindError> {
        if expr(criteria, &mut Validate).is_none() {
            return Err(FindError::Invalid(criteria.to_string()));
        }
        let mut ex = Extract {
            jobid: 0,
            agfilter: false,
        };
        let _ = expr(criteria, &mut ex);
        let mut held: HashMap<u32, Held> = HashMap::new();
        let books = self.jobs().map(|(id, job)| (id, job, true));
        let side = self.side.iter().map(|s| (s.jobid, &s.record, s.tagged()));
        for (id, job, tagged) in books.chain(side) {
            for av in &job.alloc {
                let h = held.entry(av.v.0).or_default();
                if tagged {
                    h.tags.push(id);
                }
                if av.exclusive {
                    match job.state {
                        JobState::Allocated => h.alloc.push(id),
                        JobState::Reserved => h.reserved.push(id),
                    }
                }
            }
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let mut f = Find {
            m: self,
            criteria,
            held,
            visited: vec![false; self.graph.len()],
            jobid: ex.jobid,
            agfilter: ex.agfilter,
            now,
        };
        let mut fed = Vec::new();
        f.walk(
            self.tree().root(),
            self.level_drift,
            Inherited::default(),
            &mut fed,
        )?;
        for item in fed {
            match item {
                Fed::Vertex(v, depth, ag) => w.emit_vertex(
                    &self.graph,
                    &Emitted {
                        v,
                        needs: self.graph.size(v),
                        exclusive: true,
                        excl_parent: false,
                        depth,
                        label: None,
                    },
                    ag.as_deref(),
                ),
                Fed::Edge(p, c) => w.emit_edge(&self.graph, p, c, false, self.dominant_subsystem()),
            }
        }
        w.set_times(0, 0);
        Ok(())
    }
}

/// What the walk hands the writer, in order.
enum Fed {
    Vertex(VertexId, Depth, Option<Vec<(String, String)>>),
    Edge(VertexId, VertexId),
}

impl Find<'_> {
    /// Fluxion's `dom_find_dfv`: how many vertices of `u`'s subtree are written.
    fn walk(
        &mut self,
        u: VertexId,
        depth: Depth,
        over: Inherited,
        fed: &mut Vec<Fed>,
    ) -> Result<usize, FindError> {
        let g: &ResourceGraph = &self.m.graph;
        self.visited[u.index()] = true;
        let held = self.held.get(&u.0);
        let over = Inherited {
            down: over.down || g.status(u) == Status::Down,
            allocated: over.allocated || held.is_some_and(|h| !h.alloc.is_empty()),
            reserved: over.reserved || held.is_some_and(|h| !h.reserved.is_empty()),
        };
        let mut nchildren = 0;
        for &c in self.m.tree().children(u) {
            let c = VertexId(c);
            if self.visited[c.index()] {
                continue;
            }
            let rc = self.walk(c, depth + 1, over, fed)?;
            if rc > 0 {
                fed.push(Fed::Edge(u, c));
                nchildren += rc;
            }
        }
        let mut at = AtVertex {
            m: self.m,
            v: u,
            held: self.held.get(&u.0),
            over,
        };
        let result = expr(self.criteria, &mut at).unwrap_or(false);
        if !result && nchildren == 0 {
            return Ok(0);
        }
        let mut ag = None;
        if self.agfilter {
            let Some(agg) = self.m.state.aggregate(u) else {
                return Ok(0);
            };
            let mut data: Vec<(String, String)> = Vec::with_capacity(agg.types.len());
            if self.jobid == 0 {
                for i in 0..agg.types.len() {
                    let total = agg.totals()[i];
                    let free_at = |t| self.m.state.agg_free_at(u, i, t).unwrap_or(total);
                    let mut free = free_at(self.now);
                    if free == total {
                        let at0 = free_at(0);
                        if at0 != total {
                            free = at0;
                        }
                    }
                    data.push((
                        self.m.types.name(g, agg.types[i]).to_string(),
                        format!("used:{}, total:{total}", total - free),
                    ));
                }
            } else {
                let used = self
                    .m
                    .job_aggregate(self.jobid, u)
                    .ok_or_else(|| FindError::SpanMissing(g.name(u).to_string()))?;
                for (i, &t) in agg.types.iter().enumerate() {
                    data.push((
                        self.m.types.name(g, t).to_string(),
                        format!("used:{}, total:{}", used[i], agg.totals()[i]),
                    ));
                }
            }
            data.sort();
            ag = Some(data);
        }
        fed.push(Fed::Vertex(u, depth, ag));
        Ok(nchildren + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Truth;
    impl Leaf for Truth {
        fn leaf(&mut self, key: &str, value: &str) -> Option<bool> {
            match key {
                "t" => Some(value == "1"),
                _ => None,
            }
        }
    }

    fn eval(e: &str) -> Option<bool> {
        expr(e, &mut Truth)
    }

    #[test]
    fn left_to_right_without_precedence() {
        assert_eq!(eval("t=1"), Some(true));
        assert_eq!(eval("t=0 or t=1"), Some(true));
        assert_eq!(eval("t=1 t=0"), Some(false));
        assert_eq!(eval("t=1 or t=0 and t=0"), Some(false));
        assert_eq!(eval("t=1 or (t=0 and t=0)"), Some(true));
        assert_eq!(eval("(t=0 or t=1) and t=1  "), Some(true));
        assert_eq!(eval("t=1 xor t=1"), None);
        assert_eq!(eval("(t=1)t=1"), None);
        assert_eq!(eval("()"), None);
        assert_eq!(eval("(t=1"), None);
        assert_eq!(eval("t=1 and"), None);
        assert_eq!(eval(""), None);
    }

    #[test]
    fn job_ids() {
        assert_eq!(parse_jobid("42"), Some(42));
        assert_eq!(parse_jobid("0x10"), Some(16));
        assert_eq!(parse_jobid("0000.0000.0000.0011"), Some(17));
        assert_eq!(parse_jobid("f2"), Some(1));
        assert_eq!(parse_jobid("abc"), None);
        assert_eq!(parse_jobid(""), None);
    }
}
