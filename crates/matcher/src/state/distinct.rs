//! Distinct values numbered in the order first met: what nodes alike share (a whole
//! listing's layout, a whole's shape), kept once; the request structures free nodes'
//! kept visits are for (`dfu::memo`).
//!
//! A value is compared first with the one met last — nodes listed one after another are
//! nearly always alike — so most lookups cost neither a hash nor the value's making.

use std::collections::HashMap;
use std::hash::Hash;

/// The distinct values met so far, numbered.
#[derive(Clone, Debug)]
pub(crate) struct Distinct<T> {
    values: Vec<T>,
    index: HashMap<T, u32>,
    /// The number of the value met last.
    last: Option<u32>,
}

impl<T> Default for Distinct<T> {
    fn default() -> Self {
        Distinct {
            values: Vec::new(),
            index: HashMap::new(),
            last: None,
        }
    }
}

impl<T: Clone + Eq + Hash> Distinct<T> {
    /// Value number `i`.
    pub(crate) fn get(&self, i: u32) -> Option<&T> {
        self.values.get(i as usize)
    }

    /// Forgets every value: numbering starts over.
    pub(crate) fn clear(&mut self) {
        *self = Distinct::default();
    }

    /// The number of the value met now: the last one if `alike` says so, else the value
    /// `make` gives, numbered if new; `None` when it is new and `max` values are kept.
    pub(crate) fn number(
        &mut self,
        alike: impl Fn(&T) -> bool,
        make: impl FnOnce() -> T,
        max: usize,
    ) -> Option<u32> {
        if let Some(i) = self.last.filter(|&i| alike(&self.values[i as usize])) {
            return Some(i);
        }
        let value = make();
        let i = match self.index.get(&value) {
            Some(&i) => i,
            None => {
                let i = u32::try_from(self.values.len()).ok()?;
                if self.values.len() >= max {
                    return None;
                }
                self.values.push(value.clone());
                self.index.insert(value, i);
                i
            }
        };
        self.last = Some(i);
        Some(i)
    }
}
