//! The part of libhwloc 2's loading that decides which objects a topology has, their order
//! and their logical indexes (see the parent module for the rules).

use std::collections::HashMap;

use super::xml::{Document, Object};
use crate::error::{Location, ReadError};

/// What an hwloc object is, as far as the reader cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Class {
    Machine,
    Group,
    Numa,
    MemCache,
    Package,
    Die,
    Cache { level: u8, instruction: bool },
    Core,
    Pu,
    Bridge,
    PciDev,
    OsDev,
    Misc,
}

/// Which of an hwloc object's four child lists an object goes in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum List {
    Normal,
    Memory,
    Io,
    Misc,
}

impl Class {
    fn of(obj: &Object, root: bool) -> Result<Class, ReadError> {
        let cache_level = |digit: &str| digit.parse::<u8>().ok().filter(|l| (1..=5).contains(l));
        let class = match obj.kind.as_str() {
            "System" | "Machine" if root => Class::Machine,
            // hwloc 2 makes a machine inside another a group.
            "System" | "Machine" | "Group" => Class::Group,
            "NUMANode" => Class::Numa,
            "MemCache" => Class::MemCache,
            "Package" | "Socket" => Class::Package,
            "Die" => Class::Die,
            "Core" => Class::Core,
            "PU" => Class::Pu,
            "Bridge" => Class::Bridge,
            "PCIDev" => Class::PciDev,
            "OSDev" => Class::OsDev,
            "Misc" => Class::Misc,
            "Cache" => Class::Cache {
                level: obj.attr("depth").and_then(cache_level).unwrap_or(0),
                // hwloc's cache_type: 0 unified, 1 data, 2 instruction.
                instruction: obj.attr("cache_type") == Some("2"),
            },
            other => {
                let named = other
                    .strip_prefix('L')
                    .and_then(|rest| rest.split_once("Cache"))
                    .filter(|(_, tail)| tail.is_empty());
                let Some((level, instruction)) = named.and_then(|(l, _)| {
                    let (digits, instruction) = match l.strip_suffix('i') {
                        Some(d) => (d, true),
                        None => (l, false),
                    };
                    Some((cache_level(digits)?, instruction))
                }) else {
                    let msg = format!("unknown hwloc object type {other:?}");
                    return Err(ReadError::invalid(Location::Line(obj.line), msg));
                };
                Class::Cache { level, instruction }
            }
        };
        Ok(class)
    }

    fn list(self) -> List {
        match self {
            Class::Numa | Class::MemCache => List::Memory,
            Class::Bridge | Class::PciDev | Class::OsDev => List::Io,
            Class::Misc => List::Misc,
            _ => List::Normal,
        }
    }
}

/// One object of the loaded topology.
pub(super) struct Node {
    pub(super) class: Class,
    /// The XML object; `None` for the group hwloc makes around a 1.x NUMA node's children.
    pub(super) object: Option<usize>,
    pub(super) logical_index: i64,
    normal: Vec<usize>,
    memory: Vec<usize>,
    io: Vec<usize>,
    misc: Vec<usize>,
    /// All children in hwloc 2's order (`hwloc_get_next_child`), set once loaded.
    order: Vec<usize>,
}

/// The topology after hwloc's import and filters.
pub(super) struct Topology {
    pub(super) nodes: Vec<Node>,
    pub(super) root: usize,
}

impl Topology {
    pub(super) fn load(doc: &Document) -> Result<Topology, ReadError> {
        let mut topo = Topology {
            nodes: Vec::new(),
            root: 0,
        };
        let root_obj = &doc.objects[0];
        let root = topo.push(Class::of(root_obj, true)?, Some(0));
        for &c in &root_obj.children {
            topo.attach(doc, c, root)?;
        }
        topo.dissolve(root, &|n, only_child| {
            n.class == Class::Group && (only_child || n.normal.len() <= 1)
        });
        let flat = topo.flat_cache_levels(root);
        if !flat.is_empty() {
            topo.dissolve(root, &|n, _| flat.contains(&n.class));
        }
        topo.index(root);
        Ok(topo)
    }

    /// The children of `t` in the order hwloc walks them.
    pub(super) fn children_in_order(&self, t: usize) -> &[usize] {
        &self.nodes[t].order
    }

    fn push(&mut self, class: Class, object: Option<usize>) -> usize {
        self.nodes.push(Node {
            class,
            object,
            logical_index: -1,
            normal: Vec::new(),
            memory: Vec::new(),
            io: Vec::new(),
            misc: Vec::new(),
            order: Vec::new(),
        });
        self.nodes.len() - 1
    }

    fn place(&mut self, parent: usize, child: usize) {
        let list = self.nodes[child].class.list();
        let p = &mut self.nodes[parent];
        match list {
            List::Normal => p.normal.push(child),
            List::Memory => p.memory.push(child),
            List::Io => p.io.push(child),
            List::Misc => p.misc.push(child),
        }
    }

    /// Imports object `o` (and what it holds) under `parent`, as hwloc 2's XML import does.
    fn attach(&mut self, doc: &Document, o: usize, parent: usize) -> Result<(), ReadError> {
        let obj = &doc.objects[o];
        let class = Class::of(obj, false)?;
        // KEEP_IMPORTANT drops DMA OS devices; what they hold goes to their parent.
        if class == Class::OsDev && obj.attr("osdev_type") == Some("4") {
            for &c in &obj.children {
                self.attach(doc, c, parent)?;
            }
            return Ok(());
        }
        let me = self.push(class, Some(o));
        let holder = if doc.v1 && class == Class::Numa && !obj.children.is_empty() {
            let group = self.push(Class::Group, None);
            self.place(parent, group);
            self.nodes[group].memory.push(me);
            group
        } else {
            self.place(parent, me);
            me
        };
        for &c in &obj.children {
            self.attach(doc, c, holder)?;
        }
        Ok(())
    }

    /// Removes, bottom-up, every normal object `remove` picks (given whether it is its
    /// parent's only normal child): its normal children take its place, its memory, I/O and
    /// Misc children go to the end of its parent's lists.
    fn dissolve(&mut self, t: usize, remove: &dyn Fn(&Node, bool) -> bool) {
        let kids = std::mem::take(&mut self.nodes[t].normal);
        for &k in &kids {
            self.dissolve(k, remove);
        }
        let only_child = kids.len() == 1;
        let mut normal = Vec::with_capacity(kids.len());
        for k in kids {
            if !remove(&self.nodes[k], only_child) {
                normal.push(k);
                continue;
            }
            let n = &mut self.nodes[k];
            let moved = (
                std::mem::take(&mut n.normal),
                std::mem::take(&mut n.memory),
                std::mem::take(&mut n.io),
                std::mem::take(&mut n.misc),
            );
            normal.extend(moved.0);
            let p = &mut self.nodes[t];
            p.memory.extend(moved.1);
            p.io.extend(moved.2);
            p.misc.extend(moved.3);
        }
        self.nodes[t].normal = normal;
    }

    /// The cache levels that bring no structure: every cache of the level has at most one
    /// normal child, or every one is its parent's only normal child.
    fn flat_cache_levels(&self, root: usize) -> Vec<Class> {
        // level → (all have at most one child, all are only children)
        let mut levels: Vec<(Class, bool, bool)> = Vec::new();
        let mut stack = vec![root];
        while let Some(t) = stack.pop() {
            let n = &self.nodes[t];
            for &k in &n.normal {
                let kid = &self.nodes[k];
                if matches!(kid.class, Class::Cache { .. }) {
                    let single = kid.normal.len() <= 1;
                    let only = n.normal.len() == 1;
                    match levels.iter_mut().find(|(c, _, _)| *c == kid.class) {
                        Some(level) => {
                            level.1 &= single;
                            level.2 &= only;
                        }
                        None => levels.push((kid.class, single, only)),
                    }
                }
                stack.push(k);
            }
        }
        levels
            .into_iter()
            .filter(|&(_, single, only)| single || only)
            .map(|(c, _, _)| c)
            .collect()
    }

    /// Sets each object's child order and logical index: its position among the objects of
    /// its level (normal objects: same class and depth), counted in hwloc's walk order.
    fn index(&mut self, root: usize) {
        let mut next: HashMap<(Class, usize), i64> = HashMap::new();
        let mut stack = vec![(root, 0usize)];
        while let Some((t, depth)) = stack.pop() {
            let n = &mut self.nodes[t];
            let key = match n.class.list() {
                List::Normal => (n.class, depth),
                _ => (n.class, 0),
            };
            let counter = next.entry(key).or_insert(0);
            n.logical_index = *counter;
            *counter += 1;
            let mut order = Vec::with_capacity(n.normal.len() + n.memory.len() + n.io.len());
            order.extend_from_slice(&n.normal);
            order.extend_from_slice(&n.memory);
            order.extend_from_slice(&n.io);
            order.extend_from_slice(&n.misc);
            let normal = n.normal.len();
            for (i, &c) in order.iter().enumerate().rev() {
                stack.push((c, if i < normal { depth + 1 } else { depth }));
            }
            n.order = order;
        }
    }
}
