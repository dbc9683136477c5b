//! The node table: the one place the coordinator keeps a node's owner, generation, admin
//! flags and the move it is in.
//!
//! Everything else about nodes is computed from it when asked: the routing and resource
//! views, a shard's registration answer, the journal's node records (each change marks the
//! node for the next journal write, [`NodeTable::take_changed`]). The table belongs to the
//! [`MoveMachine`](super::MoveMachine), the only code that changes owners and
//! generations; the core changes flags through it, and reads the rest.
//!
//! ```text
//!   node ─ owner (queue name or none) ─ generation (fencing number, only grows)
//!        ─ kept (the owner is an admin's decision: kept across restarts)
//!        ─ down / drained (the admin's flags, with reasons)
//!        ─ moving (the unfinished move it takes part in; its step is in that move)
//! ```

use std::collections::{BTreeSet, HashMap};

use shardsched_wire::msg::{Generation, MoveId, NodeFlags};

/// One node's intent: who should own it, at which generation, and the admin's flags. The
/// form the table is built from (at start, from the journal and the configuration) and the
/// form the journal's node records take.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeIntent {
    /// Owning queue; `None`: unassigned.
    pub owner: Option<String>,
    /// Its fencing number: bumped on every change of owner, never lowered.
    pub generation: Generation,
    /// The owner was set by an admin's decision (a move, a run-time queue change), not by
    /// the configuration's start rules: a restart keeps it as long as the owner defines
    /// the node ([`crate::ownership`]).
    pub kept: bool,
    /// Marked down by an admin, with the reason.
    pub down: Option<String>,
    /// Drained by an admin, with the reason.
    pub drained: Option<String>,
}

impl NodeIntent {
    /// The node's admin flags, if it has any.
    pub fn flags(&self) -> Option<NodeFlags> {
        (self.down.is_some() || self.drained.is_some()).then(|| NodeFlags {
            down: self.down.clone(),
            drained: self.drained.clone(),
        })
    }
}

/// Which admin flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeFlag {
    /// Down (failed).
    Down,
    /// Drained.
    Drained,
}

/// One row of the table.
#[derive(Clone, Debug, PartialEq, Eq)]
struct NodeEntry {
    name: String,
    intent: NodeIntent,
    /// The unfinished move this node takes part in (its step is that move's).
    moving: Option<MoveId>,
}

/// See the module documentation. Rows keep the order they were given (the cluster's node
/// order, for the core), so a row's position is the node's index.
#[derive(Clone, Debug, Default)]
pub struct NodeTable {
    rows: Vec<NodeEntry>,
    index: HashMap<String, usize>,
    /// Nodes whose intent changed since the last [`NodeTable::take_changed`].
    changed: BTreeSet<String>,
}

impl NodeTable {
    /// A table of `nodes`, in the order given; a name given twice keeps its first row.
    pub fn new(nodes: impl IntoIterator<Item = (String, NodeIntent)>) -> NodeTable {
        let mut table = NodeTable::default();
        for (name, intent) in nodes {
            if table.index.contains_key(&name) {
                continue;
            }
            table.index.insert(name.clone(), table.rows.len());
            table.rows.push(NodeEntry {
                name,
                intent,
                moving: None,
            });
        }
        table
    }

    /// How many nodes.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether the table has no node.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// A node's position (its index in the cluster, for the core's table).
    pub fn index_of(&self, node: &str) -> Option<usize> {
        self.index.get(node).copied()
    }

    /// Whether `node` is in the table.
    pub fn contains(&self, node: &str) -> bool {
        self.index.contains_key(node)
    }

    /// A node's intent.
    pub fn get(&self, node: &str) -> Option<&NodeIntent> {
        self.row(node).map(|r| &r.intent)
    }

    /// The intent of the node at `index`.
    pub fn at(&self, index: usize) -> Option<(&str, &NodeIntent)> {
        self.rows.get(index).map(|r| (r.name.as_str(), &r.intent))
    }

    /// A node's owner.
    pub fn owner(&self, node: &str) -> Option<&str> {
        self.get(node)?.owner.as_deref()
    }

    /// A node's generation.
    pub fn generation(&self, node: &str) -> Option<Generation> {
        self.get(node).map(|i| i.generation)
    }

    /// The unfinished move a node takes part in.
    pub fn moving(&self, node: &str) -> Option<MoveId> {
        self.row(node)?.moving
    }

    /// Every node, in table order: name, intent, and the move it is in.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &NodeIntent, Option<MoveId>)> {
        self.rows
            .iter()
            .map(|r| (r.name.as_str(), &r.intent, r.moving))
    }

    /// The positions of the nodes `queue` owns, in table order.
    pub fn owned_by<'a>(&'a self, queue: &'a str) -> impl Iterator<Item = usize> + 'a {
        self.rows
            .iter()
            .enumerate()
            .filter(move |(_, r)| r.intent.owner.as_deref() == Some(queue))
            .map(|(i, _)| i)
    }

    /// Every node's intent, in table order (the form [`NodeTable::new`] takes).
    pub fn intents(&self) -> Vec<(String, NodeIntent)> {
        self.rows
            .iter()
            .map(|r| (r.name.clone(), r.intent.clone()))
            .collect()
    }

    /// Sets or clears one admin flag of `node`; `None` when there is no such node, else
    /// whether anything changed.
    pub fn set_flag(&mut self, node: &str, flag: NodeFlag, value: Option<String>) -> Option<bool> {
        let row = self.row_mut(node)?;
        let slot = match flag {
            NodeFlag::Down => &mut row.intent.down,
            NodeFlag::Drained => &mut row.intent.drained,
        };
        if *slot == value {
            return Some(false);
        }
        *slot = value;
        self.changed.insert(node.to_owned());
        Some(true)
    }

    /// Marks every owned node's owner as an admin's decision (after a run-time queue
    /// change: a restart keeps it rather than recomputing owners from the start rules).
    pub fn keep_owners(&mut self) {
        for row in &mut self.rows {
            if row.intent.owner.is_some() && !row.intent.kept {
                row.intent.kept = true;
                self.changed.insert(row.name.clone());
            }
        }
    }

    /// The nodes whose intent changed since the last call (to journal them).
    pub fn take_changed(&mut self) -> BTreeSet<String> {
        std::mem::take(&mut self.changed)
    }

    /// Gives `node` to `owner` at `generation`, possibly in move `moving`; the one place
    /// owners and generations change (for the move machine).
    pub(super) fn set_owner(
        &mut self,
        node: &str,
        owner: Option<String>,
        generation: Generation,
        moving: Option<MoveId>,
    ) {
        let Some(row) = self.row_mut(node) else {
            return;
        };
        debug_assert!(
            generation >= row.intent.generation,
            "node {node}: generation {} would go back from {}",
            generation.0,
            row.intent.generation.0
        );
        row.intent.owner = owner;
        row.intent.generation = generation;
        row.intent.kept = true;
        row.moving = moving;
        self.changed.insert(node.to_owned());
    }

    /// Takes `node` out of move `id` (its part is done), if it is in it.
    pub(super) fn leave_move(&mut self, node: &str, id: MoveId) {
        if let Some(row) = self.row_mut(node)
            && row.moving == Some(id)
        {
            row.moving = None;
        }
    }

    fn row(&self, node: &str) -> Option<&NodeEntry> {
        self.rows.get(*self.index.get(node)?)
    }

    fn row_mut(&mut self, node: &str) -> Option<&mut NodeEntry> {
        let i = *self.index.get(node)?;
        self.rows.get_mut(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> NodeTable {
        NodeTable::new(["n1", "n0", "n1"].map(|n| {
            (
                n.to_owned(),
                NodeIntent {
                    owner: Some("a".into()),
                    generation: Generation(1),
                    ..NodeIntent::default()
                },
            )
        }))
    }

    #[test]
    fn rows_keep_the_order_given_and_a_repeated_name_its_first_row() {
        let t = table();
        assert_eq!(t.len(), 2);
        assert_eq!(t.index_of("n1"), Some(0));
        assert_eq!(t.index_of("n0"), Some(1));
        assert_eq!(t.owned_by("a").collect::<Vec<_>>(), [0, 1]);
    }

    #[test]
    fn every_change_is_marked_for_the_journal_once() {
        let mut t = table();
        assert_eq!(
            t.set_flag("n0", NodeFlag::Drained, Some("dimm".into())),
            Some(true)
        );
        assert_eq!(
            t.set_flag("n0", NodeFlag::Drained, Some("dimm".into())),
            Some(false)
        );
        assert_eq!(t.set_flag("n9", NodeFlag::Down, None), None);
        t.set_owner("n1", Some("b".into()), Generation(2), Some(MoveId(4)));
        assert_eq!(t.owner("n1"), Some("b"));
        assert_eq!(t.moving("n1"), Some(MoveId(4)));
        assert!(t.get("n1").is_some_and(|i| i.kept));
        assert_eq!(
            t.take_changed().into_iter().collect::<Vec<_>>(),
            ["n0", "n1"]
        );
        assert!(t.take_changed().is_empty());
        t.leave_move("n1", MoveId(3));
        assert_eq!(t.moving("n1"), Some(MoveId(4)), "not that move");
        t.leave_move("n1", MoveId(4));
        assert_eq!(t.moving("n1"), None);
    }
}
