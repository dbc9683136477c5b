//! The jobspec data model and its canonical JSON form.

use serde_json::{Map, Value, json};

use crate::constraint::Constraint;

/// The version number of RFC 25's restricted form.
pub const VERSION_1: u32 = 1;
/// The version number Fluxion's tests use for the general (RFC 14 canonical) form.
pub const VERSION_GENERAL: u32 = 9999;

/// A parsed jobspec: what resources a job asks for, what it runs on them, and its attributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Jobspec {
    /// [`VERSION_1`] or [`VERSION_GENERAL`].
    pub version: u32,
    /// The top-level resource requests (RFC 14 `resources`).
    pub resources: Vec<Resource>,
    /// The tasks (RFC 14 `tasks`).
    pub tasks: Vec<Task>,
    /// `attributes.system` and `attributes.user`.
    pub attributes: Attributes,
}

/// One resource request vertex: `count` of `kind`, each holding the `with` children.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resource {
    /// The resource type (`type` in the document): node, slot, core, gpu, rack, …
    pub kind: String,
    /// How many.
    pub count: Count,
    /// What each one must contain.
    pub with: Vec<Resource>,
    /// `exclusive` as written; `None` when absent (the matcher decides the default: a slot is
    /// exclusive by default).
    pub exclusive: Option<bool>,
    /// The label; every `slot` has one, and tasks name slots by it.
    pub label: Option<String>,
    /// Unit of the count (e.g. `GB` for memory), carried as written.
    pub unit: Option<String>,
    /// An id, carried as written (integers are kept as their decimal text).
    pub id: Option<String>,
}

/// How a count steps from `min` towards `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CountOp {
    /// `+`: min, min+k, min+2k, …
    Add,
    /// `*`: min, min·k, min·k², …
    Mul,
    /// `^`: min, min^k, (min^k)^k, …
    Pow,
}

impl CountOp {
    /// The operator as written in a jobspec.
    pub fn symbol(self) -> &'static str {
        match self {
            CountOp::Add => "+",
            CountOp::Mul => "*",
            CountOp::Pow => "^",
        }
    }

    /// Parses `+`, `*` or `^`.
    pub fn from_symbol(s: &str) -> Option<CountOp> {
        match s {
            "+" => Some(CountOp::Add),
            "*" => Some(CountOp::Mul),
            "^" => Some(CountOp::Pow),
            _ => None,
        }
    }

    /// The smallest operand that makes the sequence grow.
    pub fn min_operand(self) -> u64 {
        match self {
            CountOp::Add => 1,
            CountOp::Mul | CountOp::Pow => 2,
        }
    }
}

/// A count: an exact number, or a range `min..=max` walked by `operator` and `operand`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Count {
    /// The least acceptable number (>= 1).
    pub min: u64,
    /// The most wanted; `u64::MAX` means "as many as are free".
    pub max: u64,
    /// How successive acceptable values are formed.
    pub operator: CountOp,
    /// The operand of `operator`.
    pub operand: u64,
}

impl Count {
    /// Exactly `n` (what a plain integer count means).
    pub fn exact(n: u64) -> Count {
        Count {
            min: n,
            max: n,
            operator: CountOp::Add,
            operand: 1,
        }
    }

    /// True when only one value is acceptable (`min == max`).
    pub fn is_exact(&self) -> bool {
        self.min == self.max
    }

    /// True when this count is written as a plain integer in canonical form.
    pub fn is_plain(&self) -> bool {
        *self == Count::exact(self.min)
    }

    /// The value after `v` in the sequence min, min op operand, …: `v op operand` when that is
    /// larger than `v` and at most `max`, else `None` (also on overflow, which never panics).
    pub fn next(&self, v: u64) -> Option<u64> {
        let n = match self.operator {
            CountOp::Add => v.checked_add(self.operand),
            CountOp::Mul => v.checked_mul(self.operand),
            CountOp::Pow => u32::try_from(self.operand)
                .ok()
                .and_then(|e| v.checked_pow(e)),
        }?;
        (n > v && n <= self.max).then_some(n)
    }

    /// The acceptable values in increasing order, starting at `min`.
    pub fn values(&self) -> impl Iterator<Item = u64> + '_ {
        let first = (self.min <= self.max).then_some(self.min);
        std::iter::successors(first, move |&v| self.next(v))
    }

    /// The largest value of the sequence that is at most `min(available, max)`, or `None`
    /// when `available < min`.
    pub fn largest_fitting(&self, available: u64) -> Option<u64> {
        if available < self.min || self.max < self.min {
            return None;
        }
        let cap = available.min(self.max);
        match self.operator {
            CountOp::Add if self.operand > 0 => {
                Some(self.min + (cap - self.min) / self.operand * self.operand)
            }
            // Multiplicative sequences reach any u64 in at most 64 steps.
            _ => {
                let mut v = self.min;
                while let Some(n) = self.next(v) {
                    if n > cap {
                        break;
                    }
                    v = n;
                }
                Some(v)
            }
        }
    }

    /// Checks the RFC 14 rules: min >= 1, max >= min, operand >= 1 for `+` and >= 2 for `*`
    /// and `^`. The message names the offending member.
    pub fn check(&self) -> Result<(), String> {
        if self.min < 1 {
            return Err(if self.is_plain() {
                "must be at least 1, found 0".to_string()
            } else {
                "min must be at least 1, found 0".to_string()
            });
        }
        if self.max < self.min {
            return Err(format!(
                "max ({}) must not be less than min ({})",
                self.max, self.min
            ));
        }
        let least = self.operator.min_operand();
        if self.operand < least {
            return Err(format!(
                "operand must be at least {least} for operator '{}', found {}",
                self.operator.symbol(),
                self.operand
            ));
        }
        Ok(())
    }

    /// Canonical JSON: an integer for a plain count, else a map (without `max` when it is
    /// unbounded).
    pub fn to_json(&self) -> Value {
        if self.is_plain() {
            return json!(self.min);
        }
        let mut m = Map::new();
        m.insert("min".into(), json!(self.min));
        if self.max != u64::MAX {
            m.insert("max".into(), json!(self.max));
        }
        m.insert("operator".into(), json!(self.operator.symbol()));
        m.insert("operand".into(), json!(self.operand));
        Value::Object(m)
    }
}

/// One task: a command, the slot label it runs in, and how many copies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Task {
    /// argv.
    pub command: Vec<String>,
    /// Label of the slot the task runs in.
    pub slot: String,
    /// `{per_slot: N}` or `{total: N}`.
    pub count: TaskCount,
}

/// How many copies of a task run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaskCount {
    /// N copies in each slot.
    PerSlot(u64),
    /// N copies in all, spread over the slots.
    Total(u64),
}

/// `attributes`: the interpreted system keys, and everything else carried as-is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attributes {
    /// `system.duration` in seconds, fractions rounded up; 0 = unset (unlimited/default).
    pub duration: u64,
    /// `system.queue`.
    pub queue: Option<String>,
    /// `system.constraints` (RFC 31).
    pub constraints: Option<Constraint>,
    /// The other `system` keys, uninterpreted.
    pub system_other: Map<String, Value>,
    /// `attributes.user`, uninterpreted.
    pub user: Map<String, Value>,
}

impl Resource {
    /// A resource of `count` × `kind` with nothing else set.
    pub fn new(kind: impl Into<String>, count: Count) -> Resource {
        Resource {
            kind: kind.into(),
            count,
            with: Vec::new(),
            exclusive: None,
            label: None,
            unit: None,
            id: None,
        }
    }

    /// Canonical JSON of this vertex and its children.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("type".into(), json!(self.kind));
        m.insert("count".into(), self.count.to_json());
        if let Some(x) = self.exclusive {
            m.insert("exclusive".into(), json!(x));
        }
        if let Some(l) = &self.label {
            m.insert("label".into(), json!(l));
        }
        if let Some(u) = &self.unit {
            m.insert("unit".into(), json!(u));
        }
        if let Some(i) = &self.id {
            m.insert("id".into(), json!(i));
        }
        if !self.with.is_empty() {
            let with: Vec<Value> = self.with.iter().map(Resource::to_json).collect();
            m.insert("with".into(), Value::Array(with));
        }
        Value::Object(m)
    }
}

impl Task {
    /// Canonical JSON of this task.
    pub fn to_json(&self) -> Value {
        let count = match self.count {
            TaskCount::PerSlot(n) => json!({ "per_slot": n }),
            TaskCount::Total(n) => json!({ "total": n }),
        };
        json!({ "command": self.command, "slot": self.slot, "count": count })
    }
}

impl Jobspec {
    /// The canonical JSON form. It parses back (with [`parse_json`](crate::parse_json)) to an
    /// equal `Jobspec`. `attributes.system.duration` is written when set, and always in
    /// version 1 (where it is required).
    pub fn to_json(&self) -> Value {
        let mut system = self.attributes.system_other.clone();
        if self.attributes.duration != 0 || self.version == VERSION_1 {
            system.insert("duration".into(), json!(self.attributes.duration));
        }
        if let Some(q) = &self.attributes.queue {
            system.insert("queue".into(), json!(q));
        }
        if let Some(c) = &self.attributes.constraints {
            system.insert("constraints".into(), c.to_json());
        }
        let mut attributes = Map::new();
        attributes.insert("system".into(), Value::Object(system));
        if !self.attributes.user.is_empty() {
            attributes.insert("user".into(), Value::Object(self.attributes.user.clone()));
        }
        let resources: Vec<Value> = self.resources.iter().map(Resource::to_json).collect();
        let tasks: Vec<Value> = self.tasks.iter().map(Task::to_json).collect();
        json!({
            "version": self.version,
            "resources": resources,
            "tasks": tasks,
            "attributes": Value::Object(attributes),
        })
    }

    /// The fewest nodes the job asks for, as `flux jobs` shows a pending job's NNODES:
    /// each `node` counts its minimum, times the minimum counts of what contains it
    /// (`rack[2] -> node[3]` is 6). `None` when the jobspec names no node (slots only: the
    /// matcher decides how many nodes they land on).
    pub fn nodes_requested(&self) -> Option<u64> {
        fn nodes_in(resources: &[Resource]) -> Option<u64> {
            resources
                .iter()
                .filter_map(|r| {
                    if r.kind == "node" {
                        Some(r.count.min)
                    } else {
                        nodes_in(&r.with).map(|n| n.saturating_mul(r.count.min))
                    }
                })
                .reduce(u64::saturating_add)
        }
        nodes_in(&self.resources)
    }

    /// The labels of every `slot` in the resource tree, in document order (duplicates kept).
    pub fn slot_labels(&self) -> Vec<&str> {
        let mut out = Vec::new();
        let mut stack: Vec<&Resource> = self.resources.iter().rev().collect();
        while let Some(r) = stack.pop() {
            if r.kind == "slot"
                && let Some(l) = &r.label
            {
                out.push(l.as_str());
            }
            stack.extend(r.with.iter().rev());
        }
        out
    }

    /// Whether some resource list offers alternatives: more than one `slot` in one list
    /// (or-slots) or any `xor_slot`. Only Fluxion's flexible traverser matches these.
    pub fn has_alternatives(&self) -> bool {
        fn any(list: &[Resource]) -> bool {
            list.iter().filter(|r| r.kind == "slot").count() > 1
                || list.iter().any(|r| r.kind == "xor_slot" || any(&r.with))
        }
        any(&self.resources)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn range(min: u64, max: u64, operator: CountOp, operand: u64) -> Count {
        Count {
            min,
            max,
            operator,
            operand,
        }
    }

    #[test]
    fn exact_counts() {
        let c = Count::exact(4);
        assert!(c.is_exact());
        assert!(c.is_plain());
        assert_eq!(c.next(4), None);
        assert_eq!(c.values().collect::<Vec<_>>(), vec![4]);
        assert_eq!(c.largest_fitting(3), None);
        assert_eq!(c.largest_fitting(4), Some(4));
        assert_eq!(c.largest_fitting(100), Some(4));
        assert_eq!(c.to_json(), json!(4));
    }

    #[test]
    fn additive_ranges() {
        let c = range(2, 11, CountOp::Add, 3);
        assert_eq!(c.values().collect::<Vec<_>>(), vec![2, 5, 8, 11]);
        assert_eq!(c.largest_fitting(1), None);
        assert_eq!(c.largest_fitting(7), Some(5));
        assert_eq!(c.largest_fitting(1000), Some(11));
        let open = range(1, u64::MAX, CountOp::Add, 1);
        assert_eq!(open.largest_fitting(u64::MAX), Some(u64::MAX));
        assert_eq!(open.next(u64::MAX), None);
        assert_eq!(
            open.to_json(),
            json!({"min": 1, "operator": "+", "operand": 1})
        );
    }

    #[test]
    fn multiplicative_and_power_ranges() {
        let c = range(1, 64, CountOp::Mul, 2);
        assert_eq!(c.values().collect::<Vec<_>>(), vec![1, 2, 4, 8, 16, 32, 64]);
        assert_eq!(c.largest_fitting(50), Some(32));
        let p = range(2, 64, CountOp::Pow, 4);
        assert_eq!(p.values().collect::<Vec<_>>(), vec![2, 16]);
        assert_eq!(p.largest_fitting(20), Some(16));
        // 1^k never grows: the sequence is just {1}.
        let one = range(1, 10, CountOp::Pow, 2);
        assert_eq!(one.values().collect::<Vec<_>>(), vec![1]);
        // Overflow ends the sequence instead of panicking.
        let big = range(1 << 40, u64::MAX, CountOp::Pow, 3);
        assert_eq!(big.next(1 << 40), None);
        let huge_operand = range(2, u64::MAX, CountOp::Pow, u64::MAX);
        assert_eq!(huge_operand.next(2), None);
        assert_eq!(huge_operand.largest_fitting(u64::MAX), Some(2));
    }

    #[test]
    fn count_checks() {
        assert!(Count::exact(1).check().is_ok());
        assert_eq!(
            Count::exact(0).check().unwrap_err(),
            "must be at least 1, found 0"
        );
        assert_eq!(
            range(5, 4, CountOp::Add, 1).check().unwrap_err(),
            "max (4) must not be less than min (5)"
        );
        assert_eq!(
            range(1, 4, CountOp::Mul, 1).check().unwrap_err(),
            "operand must be at least 2 for operator '*', found 1"
        );
        assert_eq!(
            range(1, 4, CountOp::Add, 0).check().unwrap_err(),
            "operand must be at least 1 for operator '+', found 0"
        );
    }

    #[test]
    fn slot_labels_in_document_order() {
        let mut a = Resource::new("slot", Count::exact(1));
        a.label = Some("a".into());
        a.with.push(Resource::new("core", Count::exact(1)));
        let mut b = a.clone();
        b.label = Some("b".into());
        let mut node = Resource::new("node", Count::exact(1));
        node.with = vec![a, b];
        let js = Jobspec {
            version: VERSION_GENERAL,
            resources: vec![node],
            tasks: vec![],
            attributes: Attributes::default(),
        };
        assert_eq!(js.slot_labels(), vec!["a", "b"]);
        assert!(js.has_alternatives(), "two slots in one list");
    }

    #[test]
    fn alternatives_are_or_slots_or_xor_slots_at_any_depth() {
        let js = |resources| Jobspec {
            version: VERSION_GENERAL,
            resources,
            tasks: vec![],
            attributes: Attributes::default(),
        };
        let slot = |kind: &str| {
            let mut s = Resource::new(kind, Count::exact(1));
            s.label = Some("s".into());
            s.with.push(Resource::new("core", Count::exact(1)));
            s
        };
        let mut node = Resource::new("node", Count::exact(1));
        node.with = vec![slot("slot")];
        assert!(!js(vec![node.clone()]).has_alternatives());
        assert!(!js(vec![node.clone(), slot("slot")]).has_alternatives());
        node.with.push(slot("xor_slot"));
        assert!(js(vec![node]).has_alternatives());
        assert!(js(vec![slot("slot"), slot("slot")]).has_alternatives());
    }

    #[test]
    fn nodes_requested_multiplies_down_to_the_nodes() {
        let js = |resources| Jobspec {
            version: VERSION_GENERAL,
            resources,
            tasks: vec![],
            attributes: Attributes::default(),
        };
        let node = |n| Resource::new("node", Count::exact(n));
        let mut rack = Resource::new("rack", range(2, 4, CountOp::Add, 1));
        rack.with.push(node(3));
        assert_eq!(js(vec![node(2)]).nodes_requested(), Some(2));
        assert_eq!(js(vec![rack, node(1)]).nodes_requested(), Some(7));
        let slots = Resource::new("slot", Count::exact(8));
        assert_eq!(js(vec![slots]).nodes_requested(), None);
    }
}
