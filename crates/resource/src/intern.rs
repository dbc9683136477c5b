//! String interning for the resource graph.
//!
//! Types, names, basenames, units and property keys repeat across hundreds of thousands of
//! vertices; the graph stores a 4-byte [`Sym`] per field instead of a `String`, and the matcher
//! compares symbols (integers) instead of strings on its hot path.
//!
//! Each string is boxed once, in the list by symbol; the index holds only symbols
//! (hashbrown's `HashTable`, asked with the string's hash and compared through the list).
//! Why: a map keyed by its own box of the string made two allocations per distinct name —
//! 2,148 of `query`'s start on the 1,024-node bench graph, a third of all it made then, and
//! two per vertex on a graph whose names are all distinct. (The strings one after another
//! in one buffer would save the other box too, but reading one back then costs a lookup
//! of its bounds and a check of both: the writers resolve a name per line they print,
//! 1.9 % more instructions on first-1024, 4.6 % on low-4096.)
//!
//! Strings hash with `rustc-hash`'s multiply-rotate hash (the one rustc uses for its own
//! interners): graph loading interns a name per vertex, and SipHash's flood resistance buys
//! nothing for strings an administrator's graph file supplies.

use std::hash::BuildHasher;

use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;

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
    /// The strings, by symbol.
    strings: Vec<Box<str>>,
    /// The symbols, found by their string's hash.
    index: HashTable<Sym>,
}

fn hash(s: &str) -> u64 {
    FxBuildHasher.hash_one(s)
}

/// Adds `sym`, whose string (`strings[sym]`) hashes to `h`, to `index`.
fn index_insert(index: &mut HashTable<Sym>, strings: &[Box<str>], h: u64, sym: Sym) {
    index.insert_unique(h, sym, |k| hash(&strings[k.index()]));
}

impl Interner {
    /// The symbol for `s`, interning it if it is new.
    pub fn intern(&mut self, s: &str) -> Sym {
        let h = hash(s);
        if let Some(sym) = self.find(h, s) {
            return sym;
        }
        let sym = Sym(self.strings.len() as u32);
        self.strings.push(s.into());
        index_insert(&mut self.index, &self.strings, h, sym);
        sym
    }

    /// The symbol for `s` if it was ever interned (a type no vertex has is `None`).
    pub fn get(&self, s: &str) -> Option<Sym> {
        self.find(hash(s), s)
    }

    /// The symbol of `s`, whose hash is `h`, if interned.
    fn find(&self, h: u64, s: &str) -> Option<Sym> {
        self.index
            .find(h, |k| &*self.strings[k.index()] == s)
            .copied()
    }

    /// The string behind `sym`.
    pub fn resolve(&self, sym: Sym) -> &str {
        &self.strings[sym.index()]
    }

    /// Number of distinct strings.
    pub fn len(&self) -> usize {
        self.strings.len()
    }

    /// Whether nothing was interned yet.
    pub fn is_empty(&self) -> bool {
        self.strings.is_empty()
    }

    /// Approximate heap bytes of the table (strings, symbol list and index).
    pub fn heap_bytes(&self) -> usize {
        let text: usize = self.strings.iter().map(|s| s.len()).sum();
        text + self.strings.capacity() * size_of::<Box<str>>()
            + self.index.capacity() * (size_of::<Sym>() + 1)
    }

    /// Renumbers the table: `order[k]` is the old symbol that becomes `Sym(k)`; old symbols
    /// not in `order` are dropped. `order` must not repeat a symbol.
    pub(crate) fn renumber(&mut self, order: &[u32]) {
        let mut old = std::mem::take(&mut self.strings);
        self.strings = order
            .iter()
            .map(|&o| std::mem::take(&mut old[o as usize]))
            .collect();
        let mut index = HashTable::with_capacity(self.strings.len());
        for (k, s) in self.strings.iter().enumerate() {
            index_insert(&mut index, &self.strings, hash(s), Sym(k as u32));
        }
        self.index = index;
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

    #[test]
    fn renumbering_keeps_the_index_in_step() {
        let mut i = Interner::default();
        for s in ["core", "node", "gpu"] {
            i.intern(s);
        }
        // gpu becomes 0, core 1; node goes.
        i.renumber(&[2, 0]);
        assert_eq!((i.resolve(Sym(0)), i.resolve(Sym(1))), ("gpu", "core"));
        assert_eq!(
            (i.get("gpu"), i.get("core"), i.get("node")),
            (Some(Sym(0)), Some(Sym(1)), None)
        );
        assert_eq!(i.intern("core"), Sym(1));
        assert_eq!(i.intern("node"), Sym(2));
        assert_eq!(i.len(), 3);
    }
}
