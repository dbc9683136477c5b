//! String interning for the resource graph.
//!
//! Types, names, basenames, units and property keys repeat across hundreds of thousands of
//! vertices; the graph stores a 4-byte [`Sym`] per field instead of a `String`, and the matcher
//! compares symbols (integers) instead of strings on its hot path.
//!
//! The table hashes with `rustc-hash`'s multiply-rotate hash (the one rustc uses for its
//! own interners): graph loading interns a name per vertex, and SipHash's flood resistance
//! buys nothing for strings an administrator's graph file supplies.

use rustc_hash::FxHashMap;

/// An interned string: an index into an [`Interner`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sym(pub u32);

impl Sym {
    /// The symbol as `usize`, for tables indexed by symbol.
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Owns the interned strings of one graph.
#[derive(Clone, Debug, Default)]
pub struct Interner {
    index: FxHashMap<Box<str>, Sym>,
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

    /// Approximate heap bytes of the table (strings, index and symbol list).
    pub fn heap_bytes(&self) -> usize {
        let text: usize = self.strings.iter().map(|s| s.len()).sum();
        // Each string is held twice (list and index); an index slot is a key, a symbol
        // and a control byte.
        2 * text
            + self.strings.capacity() * size_of::<Box<str>>()
            + self.index.capacity() * (size_of::<(Box<str>, Sym)>() + 1)
    }

    /// Renumbers the table: `order[k]` is the old symbol that becomes `Sym(k)`; old symbols
    /// not in `order` are dropped. `order` must not repeat a symbol.
    pub(crate) fn renumber(&mut self, order: &[u32], map: &[u32]) {
        let mut old = std::mem::take(&mut self.strings);
        self.strings = order
            .iter()
            .map(|&o| std::mem::take(&mut old[o as usize]))
            .collect();
        self.index.retain(|_, sym| match map.get(sym.0 as usize) {
            Some(&new) if new != u32::MAX => {
                *sym = Sym(new);
                true
            }
            _ => false,
        });
        self.index.shrink_to_fit();
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
