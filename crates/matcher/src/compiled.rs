//! The requests compiled last, kept for the next matches of the same jobspecs.
//!
//! Why: `query`, the benches and the shards match the same jobspec many times in a row,
//! and compiling it (types, pruning-type needs, slot unions) cost about 6 % of a small
//! match. A conservative re-plan places the same few dozen pending jobs again at every
//! re-plan, each its own jobspec, one after another: with only the last request kept, each
//! of those ~9,500-instruction compilations was done again (1.4 % of the 20,000-job
//! replay). A compiled request depends only on the jobspec, on how it is compiled
//! (Fluxion's strictness, the flexible traverser) and on the graph's types and pruning
//! types; the key holds all of them but the graph's symbols and type table, which change
//! only with the dominant subsystem ([`Matcher::set_dominant_subsystem`] forgets the
//! requests).

use std::sync::Arc;

use shardsched_jobspec::{Jobspec, Resource};
use shardsched_resource::Sym;

use crate::request::Request;
use crate::{MatchError, Matcher};

/// How many compiled requests are kept: the jobs a conservative re-plan places again in
/// turn (a queue depth of 64 by default, and those that arrive while they wait) all find
/// theirs. Looking through them costs a comparison of fingerprints each.
pub(crate) const COMPILED_KEPT: usize = 256;

/// A compiled request with what it was compiled from.
#[derive(Clone, Debug)]
pub(crate) struct Compiled {
    /// [`fingerprint`] of `js`: most jobspecs compared differ in it.
    fingerprint: u64,
    js: Jobspec,
    strict: bool,
    flexible: bool,
    prune_types: Vec<Sym>,
    req: Arc<Request>,
}

/// The compiled requests kept, replaced in turn (the oldest first) when full.
#[derive(Clone, Debug, Default)]
pub(crate) struct CompiledRequests {
    kept: Vec<Compiled>,
    /// The entry the next compilation replaces once `kept` is full.
    next: usize,
}

impl CompiledRequests {
    /// Forgets every request (the graph's symbols or types changed).
    pub(crate) fn clear(&mut self) {
        self.kept.clear();
        self.next = 0;
    }
}

impl Matcher {
    /// `js` compiled as Fluxion does ([`Request::compile_fluxion`]), reusing a kept
    /// compilation when nothing it depends on changed.
    pub(crate) fn compile_cached(
        &mut self,
        js: &Jobspec,
        strict: bool,
        flexible: bool,
    ) -> Result<Arc<Request>, MatchError> {
        let prune_types = &self.state.prune_types;
        let fingerprint = fingerprint(js);
        if let Some(c) = self.compiled.kept.iter().find(|c| {
            c.fingerprint == fingerprint
                && c.strict == strict
                && c.flexible == flexible
                && c.js == *js
                && c.prune_types == *prune_types
        }) {
            return Ok(Arc::clone(&c.req));
        }
        let req = Arc::new(Request::compile_fluxion(
            js,
            &self.graph,
            prune_types,
            &self.types,
            &self.prune,
            strict,
            flexible,
        )?);
        let entry = Compiled {
            fingerprint,
            js: js.clone(),
            strict,
            flexible,
            prune_types: prune_types.clone(),
            req: Arc::clone(&req),
        };
        let kept = &mut self.compiled;
        if kept.kept.len() < COMPILED_KEPT {
            kept.kept.push(entry);
        } else {
            kept.kept[kept.next] = entry;
            kept.next = (kept.next + 1) % COMPILED_KEPT;
        }
        Ok(req)
    }
}

/// A hash of what most often tells two jobspecs apart: the duration, and each resource's
/// type and least count. Equal jobspecs have equal fingerprints; the rest is compared whole.
fn fingerprint(js: &Jobspec) -> u64 {
    fn mix(h: u64, x: u64) -> u64 {
        (h.rotate_left(7) ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }
    fn walk(rs: &[Resource], mut h: u64) -> u64 {
        for r in rs {
            h = mix(mix(h, r.kind.len() as u64), r.count.min);
            h = walk(&r.with, h);
        }
        h
    }
    walk(&js.resources, mix(0, js.attributes.duration))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::test_support::nodes;
    use crate::{MatchOp, MatchOutcome};

    #[test]
    fn the_same_jobspec_reuses_its_request_and_another_gets_its_own() {
        let mut m = crate::test_support::two_node_matcher();
        let one = m.compile_cached(&nodes(1), true, false).expect("compile");
        let again = m.compile_cached(&nodes(1), true, false).expect("compile");
        assert!(Arc::ptr_eq(&one, &again));
        let flexible = m.compile_cached(&nodes(1), true, true).expect("compile");
        assert!(!Arc::ptr_eq(&one, &flexible), "compiled another way");
        let two = m.compile_cached(&nodes(2), true, false).expect("compile");
        assert!(!Arc::ptr_eq(&one, &two), "another jobspec");
        // Both are kept: jobs placed in turn find theirs.
        let one_again = m.compile_cached(&nodes(1), true, false).expect("compile");
        assert!(
            Arc::ptr_eq(&one, &one_again),
            "the first is kept beside the second"
        );
        let two_again = m.compile_cached(&nodes(2), true, false).expect("compile");
        assert!(Arc::ptr_eq(&two, &two_again));
        // Through a match: one node taken, two nodes no longer fit now.
        let out = m.run(MatchOp::Allocate, &nodes(1), 1, 0).expect("match");
        assert!(matches!(out, MatchOutcome::Allocated(_)), "{out:?}");
        let out = m.run(MatchOp::Allocate, &nodes(2), 2, 0).expect("match");
        assert!(matches!(out, MatchOutcome::NoMatch { .. }), "{out:?}");
    }

    #[test]
    fn the_oldest_request_gives_way_when_the_kept_ones_are_full() {
        let mut m = crate::test_support::two_node_matcher();
        let mut js = nodes(1);
        let first = m.compile_cached(&js, true, false).expect("compile");
        // Jobspecs that differ only in their duration, each compiled once.
        for d in 1..super::COMPILED_KEPT as u64 {
            js.attributes.duration = 1000 + d;
            m.compile_cached(&js, true, false).expect("compile");
        }
        js.attributes.duration = nodes(1).attributes.duration;
        let kept = m.compile_cached(&js, true, false).expect("compile");
        assert!(
            Arc::ptr_eq(&first, &kept),
            "still kept with the kept ones full"
        );
        js.attributes.duration = 5000;
        m.compile_cached(&js, true, false).expect("compile");
        js.attributes.duration = nodes(1).attributes.duration;
        let again = m.compile_cached(&js, true, false).expect("compile");
        assert!(!Arc::ptr_eq(&first, &again), "the oldest gave way");
    }
}
