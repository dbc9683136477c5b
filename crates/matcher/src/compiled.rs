//! The last compiled request, kept for the next match of the same jobspec.
//!
//! Why: `query`, the benches and the shards match the same jobspec many times in a row,
//! and compiling it (types, pruning-type needs, slot unions) cost about 6 % of a small
//! match. A compiled request depends only on the jobspec, on how it is compiled (Fluxion's
//! strictness, the flexible traverser) and on the graph's types and pruning types; the key
//! holds all of them but the graph's symbols and type table, which change only with the
//! dominant subsystem ([`Matcher::set_dominant_subsystem`] forgets the request).

use std::sync::Arc;

use shardsched_jobspec::Jobspec;
use shardsched_resource::Sym;

use crate::request::Request;
use crate::{MatchError, Matcher};

/// A compiled request with what it was compiled from.
#[derive(Clone, Debug)]
pub(crate) struct Compiled {
    js: Jobspec,
    strict: bool,
    flexible: bool,
    prune_types: Vec<Sym>,
    req: Arc<Request>,
}

impl Matcher {
    /// `js` compiled as Fluxion does ([`Request::compile_fluxion`]), reusing the last
    /// compilation when nothing it depends on changed.
    pub(crate) fn compile_cached(
        &mut self,
        js: &Jobspec,
        strict: bool,
        flexible: bool,
    ) -> Result<Arc<Request>, MatchError> {
        if let Some(c) = &self.compiled
            && c.strict == strict
            && c.flexible == flexible
            && c.prune_types == self.state.prune_types
            && c.js == *js
        {
            return Ok(Arc::clone(&c.req));
        }
        let req = Arc::new(Request::compile_fluxion(
            js,
            &self.graph,
            &self.state.prune_types,
            &self.types,
            &self.prune,
            strict,
            flexible,
        )?);
        self.compiled = Some(Box::new(Compiled {
            js: js.clone(),
            strict,
            flexible,
            prune_types: self.state.prune_types.clone(),
            req: Arc::clone(&req),
        }));
        Ok(req)
    }
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
        // Through a match: one node taken, two nodes no longer fit now.
        let out = m.run(MatchOp::Allocate, &nodes(1), 1, 0).expect("match");
        assert!(matches!(out, MatchOutcome::Allocated(_)), "{out:?}");
        let out = m.run(MatchOp::Allocate, &nodes(2), 2, 0).expect("match");
        assert!(matches!(out, MatchOutcome::NoMatch { .. }), "{out:?}");
    }
}
