//! Resource types as Fluxion orders them, and its pruning types.
//!
//! Fluxion interns type names: every set or map keyed by type is ordered by interning order,
//! not by spelling. Its built-in types come first (cluster, core, socket, gpu, node, rack,
//! slot, xor_slot, ssd, storage_node), then the types a graph names in order of first
//! appearance, then those the prune filters name. The order decides, among others, which type
//! is *last* in a vertex's aggregate ("subplan") — what `first` reorders siblings by — and the
//! order in which a vertex's chosen candidates are marked.
//!
//! Types the graph does not have (a built-in or a filter type no vertex carries) still take
//! part: a filter `ALL:gpu` on a graph without gpus gives every aggregate a gpu entry of 0.
//! They get symbols of their own above the graph's ([`TypeTable::sym`]).

use std::collections::{BTreeMap, BTreeSet};

use shardsched_resource::{ResourceGraph, Sym};

use crate::MatchError;

/// Fluxion's built-in types, in the order it interns them at start-up.
pub const BUILTIN_TYPES: [&str; 10] = [
    "cluster",
    "core",
    "socket",
    "gpu",
    "node",
    "rack",
    "slot",
    "xor_slot",
    "ssd",
    "storage_node",
];

/// The symbol standing for `slot` in candidate lists (never a vertex type).
pub const SLOT: Sym = Sym(u32::MAX);
/// `slot`'s place among the built-ins.
const SLOT_RANK: u32 = 6;

/// Every type Fluxion knows in a session, with its interning rank.
#[derive(Clone, Debug)]
pub struct TypeTable {
    /// Types in interning order (graph symbols, or extra symbols for the others).
    order: Vec<Sym>,
    /// Rank of each graph symbol (`u32::MAX`: not a type).
    rank_of: Vec<u32>,
    /// Extra types (no vertex has them): name and rank, by extra index.
    extra: Vec<(String, u32)>,
    /// Number of graph symbols: extra symbols count down from [`SLOT`] − 1.
    graph_syms: u32,
}

impl TypeTable {
    /// The types of `g` after the built-ins, then `more` (e.g. the prune filters' types).
    pub fn new<'a>(g: &ResourceGraph, more: impl IntoIterator<Item = &'a str>) -> TypeTable {
        Self::with_first(g, BUILTIN_TYPES, more)
    }

    /// This table for `g`, the graph it was made for after `attach` added vertices (whose
    /// new types Fluxion interns when it reads them: after every type known so far).
    pub fn grown(&self, g: &ResourceGraph) -> TypeTable {
        let known: Vec<String> = self
            .order
            .iter()
            .map(|&s| self.name(g, s).to_string())
            .collect();
        Self::with_first(g, known.iter().map(String::as_str), [])
    }

    /// The types `first`, then those of `g` in order of first appearance, then `more`.
    fn with_first<'a>(
        g: &ResourceGraph,
        first: impl IntoIterator<Item = &'a str>,
        more: impl IntoIterator<Item = &'a str>,
    ) -> TypeTable {
        let graph_syms = u32::try_from(g.sym_count()).unwrap_or(u32::MAX / 2);
        let mut t = TypeTable {
            order: Vec::new(),
            rank_of: vec![u32::MAX; graph_syms as usize],
            extra: Vec::new(),
            graph_syms,
        };
        for name in first {
            t.intern(g, name);
        }
        let mut seen = vec![false; graph_syms as usize];
        // Vertices of a type come in runs (a generated graph's 45,056 cores in one): a run
        // is looked at once.
        let mut last = None;
        for v in g.vertices() {
            let k = g.kind(v);
            if last == Some(k) {
                continue;
            }
            last = Some(k);
            if !std::mem::replace(&mut seen[k.0 as usize], true) {
                t.intern(g, g.str(k));
            }
        }
        for name in more {
            t.intern(g, name);
        }
        t
    }

    fn intern(&mut self, g: &ResourceGraph, name: &str) -> Sym {
        if name == "slot" {
            // Candidate lists use SLOT for slots whatever the graph interns.
            if !self.order.contains(&SLOT) {
                self.order.push(SLOT);
            }
            return SLOT;
        }
        if let Some(s) = self.lookup(g, name) {
            return s;
        }
        let rank = self.order.len() as u32;
        let sym = match g.sym(name) {
            Some(s) if s.0 < self.graph_syms => {
                self.rank_of[s.0 as usize] = rank;
                s
            }
            _ => {
                self.extra.push((name.to_string(), rank));
                Sym(SLOT.0 - self.extra.len() as u32)
            }
        };
        self.order.push(sym);
        sym
    }

    /// The symbol of a known type, if Fluxion knows it.
    pub fn lookup(&self, g: &ResourceGraph, name: &str) -> Option<Sym> {
        if name == "slot" {
            return Some(SLOT);
        }
        if let Some(s) = g.sym(name)
            && s.0 < self.graph_syms
            && self.rank_of[s.0 as usize] != u32::MAX
        {
            return Some(s);
        }
        self.extra
            .iter()
            .position(|(n, _)| n == name)
            .map(|i| Sym(SLOT.0 - 1 - i as u32))
    }

    /// Fluxion's interning rank of `s`.
    pub fn rank(&self, s: Sym) -> u32 {
        if s == SLOT {
            return SLOT_RANK;
        }
        if s.0 < self.graph_syms {
            return self.rank_of[s.0 as usize];
        }
        let i = (SLOT.0 - 1 - s.0) as usize;
        self.extra.get(i).map_or(u32::MAX, |e| e.1)
    }

    /// The type of rank `r`.
    pub fn at_rank(&self, r: u32) -> Sym {
        self.order[r as usize]
    }

    /// Number of known types.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether no type is known (never: the built-ins always are).
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The name of a known type.
    pub fn name<'a>(&'a self, g: &'a ResourceGraph, s: Sym) -> &'a str {
        if s == SLOT {
            return "slot";
        }
        if s.0 < self.graph_syms {
            return g.str(s);
        }
        let i = (SLOT.0 - 1 - s.0) as usize;
        self.extra.get(i).map_or("", |e| e.0.as_str())
    }
}

/// Fluxion's pruning types: which low-level types each high-level type tracks below it.
///
/// Built from the prune filters (`HL:LL`, `ALL:LL`), then completed while the aggregates are
/// primed: a leaf type that no filter names becomes a pruning type anchored at `cluster`.
/// Sets are ordered by interning rank, as Fluxion's are.
#[derive(Clone, Debug, Default)]
pub struct PruneTypes {
    /// `ALL:` low-level types.
    any: Option<BTreeSet<u32>>,
    /// High-level type rank → its own low-level types.
    anchored: BTreeMap<u32, BTreeSet<u32>>,
    /// Every pruning type.
    total: BTreeSet<u32>,
}

impl PruneTypes {
    /// Parses `HL:LL,HL:LL` (blanks ignored, `ALL` for any high-level type) into ranks of
    /// `types`, registering the pairs in order as Fluxion does.
    pub fn parse(spec: &str) -> Result<Vec<(Option<String>, String)>, MatchError> {
        let mut pairs = Vec::new();
        for part in spec.split(',') {
            let clean: String = part.chars().filter(|c| !c.is_whitespace()).collect();
            let (hl, ll) = clean
                .split_once(':')
                .filter(|(h, l)| !h.is_empty() && !l.is_empty())
                .ok_or_else(|| MatchError::BadPruneFilter(part.to_string()))?;
            let hl = (hl != "ALL").then(|| hl.to_string());
            pairs.push((hl, ll.to_string()));
        }
        Ok(pairs)
    }

    /// Registers `low` under `anchor` (`None` = ALL), as Fluxion's `set_pruning_type`.
    pub fn set(&mut self, anchor: Option<u32>, low: u32) {
        match anchor {
            None => {
                for set in self.anchored.values_mut() {
                    set.remove(&low);
                }
                self.any.get_or_insert_with(BTreeSet::new).insert(low);
            }
            Some(a) => {
                let in_any = self.any.as_ref().is_some_and(|s| s.contains(&low));
                if !in_any {
                    self.anchored.entry(a).or_default().insert(low);
                }
            }
        }
        self.total.insert(low);
    }

    /// Whether `t` is a pruning type.
    pub fn is_pruning(&self, t: u32) -> bool {
        self.total.contains(&t)
    }

    /// The pruning types a vertex of type `anchor` tracks: its own, then the `ALL:` ones
    /// other than itself (Fluxion's `get_my_pruning_types`).
    pub fn tracked_by(&self, anchor: u32) -> Vec<u32> {
        let mut out: Vec<u32> = self
            .anchored
            .get(&anchor)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        if let Some(any) = &self.any {
            out.extend(any.iter().copied().filter(|&t| t != anchor));
        }
        out
    }

    /// Every pruning type, by rank.
    pub fn all(&self) -> impl Iterator<Item = u32> + '_ {
        self.total.iter().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_filters_replace_anchored_ones_and_skip_the_anchor_itself() {
        let mut p = PruneTypes::default();
        // rack:node then ALL:core, ALL:node (node moves to ALL).
        p.set(Some(5), 4);
        p.set(None, 1);
        p.set(None, 4);
        assert_eq!(p.tracked_by(5), vec![1, 4]);
        assert_eq!(p.tracked_by(4), vec![1]);
        // Leaf types anchored at cluster come first at a cluster.
        p.set(Some(0), 3);
        p.set(Some(0), 11);
        assert_eq!(p.tracked_by(0), vec![3, 11, 1, 4]);
        assert!(p.is_pruning(11));
        // A type already tracked by ALL is not anchored again.
        p.set(Some(2), 1);
        assert_eq!(p.tracked_by(2), vec![1, 4]);
    }
}
