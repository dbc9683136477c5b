//! String interning for the resource graph.
//!
//! Types, names, basenames, units and property keys repeat across hundreds of thousands of
//! vertices; the graph stores a 4-byte [`Sym`] per field instead of a `String`, and the matcher
//! compares symbols (integers) instead of strings on its hot path.

use std::collections::HashMap;

/// An interned string: an index into an [`Interner`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sym(pub u32);

/// Owns the interned strings of one graph.
#[derive(Clone, Debug, Default)]
pub struct Interner {
    index: HashMap<Box<str>, Sym>,
    strings: Vec<Box<str>>,
}

impl Interner {
    /// The symbol for `s`, interning it if it is new.
    pub fn intern(&mut self, s: &str) -> Sym {
        if let Some(&sym) = self.index.get(s) {
            return sym;
        }
        let sym = Sym(self.strings.len() as u32);
        self.strings.push(s.into());
        self.index.insert(s.into(), sym);
        sym
    }

    /// The symbol for `s` if it was ever interned (a type no vertex has is `None`).
    pub fn get(&self, s: &str) -> Option<Sym> {
        self.index.get(s).copied()
    }

    /// The string behind `sym`.
    pub fn resolve(&self, sym: Sym) -> &str {
        &self.strings[sym.0 as usize]
    }

    /// Number of distinct strings.
    pub fn len(&self) -> usize {
        self.strings.len()
    }

    /// Whether nothing was interned yet.
    pub fn is_empty(&self) -> bool {
        self.strings.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_is_idempotent_and_resolves() {
        let mut i = Interner::default();
        let a = i.intern("core");
        let b = i.intern("node");
        assert_ne!(a, b);
        assert_eq!(i.intern("core"), a);
        assert_eq!(i.resolve(b), "node");
        assert_eq!(i.get("gpu"), None);
        assert_eq!(i.len(), 2);
    }
}
