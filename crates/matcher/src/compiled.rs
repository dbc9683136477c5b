//! The requests compiled last, kept for the next matches of the same jobspecs.
//!
//! Why: `query`, the benches and the shards match the same jobspec many times in a row,
//! and compiling it (types, pruning-type needs, slot unions) cost about 6 % of a small
//! match. A conservative re-plan places the same few dozen pending jobs again at every
//! re-plan, each its own jobspec, one after another: with only the last request kept, each
//! of those ~9,500-instruction compilations was done again (1.4 % of the 20,000-job
//! replay). A compiled request depends only on what `Request::build` reads of the jobspec
//! (its resources, constraints and duration), on how it is compiled (Fluxion's strictness,
//! the flexible traverser) and on the graph's types and pruning types; the key holds all of
//! them but the graph's symbols and type table, which change only with the dominant
//! subsystem ([`Matcher::set_dominant_subsystem`] forgets the requests).

use std::sync::Arc;

use shardsched_jobspec::{Constraint, Jobspec, Resource};
use shardsched_resource::Sym;

use crate::request::Request;
use crate::{MatchError, Matcher};

/// How many compiled requests are kept: the jobs a conservative re-plan places again in
/// turn (a queue depth of 64 by default, and those that arrive while they wait) all find
/// theirs. Looking through them costs a comparison of fingerprints each.
pub(crate) const COMPILED_KEPT: usize = 256;

/// The most a kept request's key may weigh ([`weight`]: resources and the bytes of their
/// strings and constraints): what the kept requests hold stays under
/// `COMPILED_KEPT` × this (4 MiB) whatever jobs come. A heavier jobspec is compiled each time.
pub(crate) const COMPILED_WEIGHT_MAX: usize = 16 * 1024;

/// A compiled request with what it was compiled from.
#[derive(Clone, Debug)]
pub(crate) struct Compiled {
    /// [`fingerprint`] of the jobspec: most jobspecs compared differ in it.
    fingerprint: u64,
    /// What `Request::build` reads of the jobspec.
    resources: Vec<Resource>,
    constraints: Option<Constraint>,
    duration: u64,
    strict: bool,
    flexible: bool,
    prune_types: Vec<Sym>,
    req: Arc<Request>,
}

impl Compiled {
    /// Whether `js` compiles to this request (its fingerprint being `fingerprint`).
    fn is_for(&self, fingerprint: u64, js: &Jobspec) -> bool {
        self.fingerprint == fingerprint
            && self.duration == js.attributes.duration
            && self.resources == js.resources
            && self.constraints == js.attributes.constraints
    }
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
            c.is_for(fingerprint, js)
                && c.strict == strict
                && c.flexible == flexible
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
        if weight(js) > COMPILED_WEIGHT_MAX {
            return Ok(req);
        }
        let entry = Compiled {
            fingerprint,
            resources: js.resources.clone(),
            constraints: js.attributes.constraints.clone(),
            duration: js.attributes.duration,
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
/// type and least count. Equal keys have equal fingerprints; the rest is compared whole.
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

/// About how many bytes a kept key of `js` holds: 64 a resource, its strings, and the
/// constraints' written form.
fn weight(js: &Jobspec) -> usize {
    fn walk(rs: &[Resource]) -> usize {
        rs.iter()
            .map(|r| {
                let text = [&r.label, &r.unit, &r.id]
                    .into_iter()
                    .flatten()
                    .map(String::len)
                    .sum::<usize>();
                64 + r.kind.len() + text + walk(&r.with)
            })
            .sum()
    }
    let constraints = js
        .attributes
        .constraints
        .as_ref()
        .map_or(0, |c| format!("{c:?}").len());
    walk(&js.resources).saturating_add(constraints)
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
    fn what_compiling_does_not_read_does_not_tell_jobspecs_apart() {
        let mut m = crate::test_support::two_node_matcher();
        let one = nodes(1);
        let mut other_command = nodes(1);
        other_command.tasks[0].command = vec!["other".into()];
        let a = m.compile_cached(&one, true, false).expect("compile");
        let b = m
            .compile_cached(&other_command, true, false)
            .expect("compile");
        assert!(
            Arc::ptr_eq(&a, &b),
            "the same resources, constraints and duration"
        );
    }

    #[test]
    fn a_heavy_jobspec_is_compiled_each_time() {
        let mut m = crate::test_support::two_node_matcher();
        let mut heavy = nodes(1);
        heavy.resources[0].with[0].id = Some("7".repeat(super::COMPILED_WEIGHT_MAX));
        let a = m.compile_cached(&heavy, true, false).expect("compile");
        let b = m.compile_cached(&heavy, true, false).expect("compile");
        assert!(
            !Arc::ptr_eq(&a, &b),
            "not kept: the kept requests stay small"
        );
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
