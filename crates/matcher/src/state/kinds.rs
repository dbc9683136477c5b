//! The types of an inner vertex's children (`Inner::child_kinds`).

/// The types of an inner vertex's children, as bits by type rank, so that whether a slot
/// can form there (it has children of every type the slot holds) is a few bit tests
/// instead of a pass over its children for each type: a rack's 64 nodes were scanned for
/// a socket at every select that crossed it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChildKinds(u64);

impl ChildKinds {
    /// Ranks from here up are not kept as bits: a child of such a type makes the set
    /// unknown ([`ChildKinds::has`] answers `None`).
    const UNKNOWN: u64 = 1 << 63;

    /// Adds a child of the type of rank `rank`.
    pub fn add(&mut self, rank: u32) {
        self.0 |= if rank < 63 { 1 << rank } else { Self::UNKNOWN };
    }

    /// Whether some child has the type of rank `rank`; `None` when the set cannot say.
    pub fn has(self, rank: u32) -> Option<bool> {
        if self.0 & Self::UNKNOWN != 0 {
            return None;
        }
        Some(rank < 63 && self.0 & (1 << rank) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::ChildKinds;

    #[test]
    fn says_which_ranks_its_children_have_until_one_is_past_the_bits() {
        let mut k = ChildKinds::default();
        assert_eq!(k.has(0), Some(false), "no child yet");
        k.add(3);
        k.add(62);
        assert_eq!(k.has(3), Some(true));
        assert_eq!(k.has(62), Some(true));
        assert_eq!(k.has(4), Some(false));
        assert_eq!(k.has(63), Some(false), "a rank past the bits is no child's");
        assert_eq!(
            k.has(u32::MAX),
            Some(false),
            "an unknown type is no child's"
        );
        k.add(63);
        assert_eq!(k.has(3), None, "a child past the bits: the set cannot say");
        assert_eq!(k.has(63), None);
    }
}
