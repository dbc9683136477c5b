//! Rules checked on the model: those of every jobspec, and RFC 25's version-1 restrictions.

use crate::error::JobspecError;
use crate::model::{Jobspec, Resource, TaskCount, VERSION_1, VERSION_GENERAL};

impl Jobspec {
    /// Checks the rules every jobspec obeys (and, for version 1, [`check_version1`]):
    /// a supported version; at least one resource and one task; every resource type
    /// non-empty and every count valid (min >= 1, max >= min, operand >= 1 for `+` and >= 2
    /// for `*`/`^`); every `slot` labelled and containing something; every task with a
    /// command, a slot label and a count >= 1.
    ///
    /// A task naming a slot label that does not occur is refused only in version 1: the
    /// general-form jobspecs of Fluxion's test suite do this routinely (Fluxion ignores tasks).
    ///
    /// [`check_version1`]: Jobspec::check_version1
    pub fn validate(&self) -> Result<(), JobspecError> {
        if self.version != VERSION_1 && self.version != VERSION_GENERAL {
            return Err(JobspecError::invalid(
                "version",
                format!(
                    "unsupported version {}; supported are {VERSION_1} (RFC 25) and {VERSION_GENERAL} (the general form)",
                    self.version
                ),
            ));
        }
        if self.resources.is_empty() {
            return Err(JobspecError::invalid(
                "resources",
                "must list at least one of the resources",
            ));
        }
        let mut stack: Vec<(&Resource, String)> = self
            .resources
            .iter()
            .enumerate()
            .rev()
            .map(|(i, r)| (r, format!("resources[{i}]")))
            .collect();
        while let Some((r, path)) = stack.pop() {
            check_resource(r, &path)?;
            stack.extend(
                r.with
                    .iter()
                    .enumerate()
                    .rev()
                    .map(|(i, c)| (c, format!("{path}.with[{i}]"))),
            );
        }
        if self.tasks.is_empty() {
            return Err(JobspecError::invalid(
                "tasks",
                "must list at least one of the tasks",
            ));
        }
        for (i, t) in self.tasks.iter().enumerate() {
            if t.command.is_empty() {
                return Err(JobspecError::invalid(
                    format!("tasks[{i}].command"),
                    "must list at least one of the arguments",
                ));
            }
            if t.slot.is_empty() {
                return Err(JobspecError::invalid(
                    format!("tasks[{i}].slot"),
                    "expected a non-empty string, found string \"\"",
                ));
            }
            let (key, n) = match t.count {
                TaskCount::PerSlot(n) => ("per_slot", n),
                TaskCount::Total(n) => ("total", n),
            };
            if n == 0 {
                return Err(JobspecError::invalid(
                    format!("tasks[{i}].count.{key}"),
                    "must be at least 1, found 0",
                ));
            }
        }
        if self.version == VERSION_1 {
            self.check_version1()?;
        }
        Ok(())
    }

    /// Checks RFC 25's version-1 restrictions (whatever `self.version` says): exactly one
    /// top-level `node` or `slot`; a node holds exactly one slot; a slot holds exactly one
    /// `core` and at most one `gpu`, and nothing else; cores and gpus hold nothing; every count
    /// is a plain integer; `exclusive` only on node and slot; exactly one task, with count
    /// `{per_slot: 1}`, naming a slot label that exists.
    ///
    /// (That `attributes.system.duration` is present is checked by the parser: the model
    /// cannot tell an absent duration from 0.)
    pub fn check_version1(&self) -> Result<(), JobspecError> {
        let top = match self.resources.as_slice() {
            [one] => one,
            _ => {
                return Err(JobspecError::invalid(
                    "resources",
                    format!(
                        "version 1 requires exactly one top-level resource, a node or a slot; found {}",
                        self.resources.len()
                    ),
                ));
            }
        };
        match top.kind.as_str() {
            "node" => {
                check_v1_vertex(top, "resources[0]")?;
                match top.with.as_slice() {
                    [slot] if slot.kind == "slot" => check_v1_slot(slot, "resources[0].with[0]")?,
                    _ => {
                        return Err(JobspecError::invalid(
                            "resources[0].with",
                            "version 1 requires a node to contain exactly one slot",
                        ));
                    }
                }
            }
            "slot" => check_v1_slot(top, "resources[0]")?,
            other => {
                return Err(JobspecError::invalid(
                    "resources[0].type",
                    format!(
                        "version 1 allows only node or slot at the top level, found \"{other}\""
                    ),
                ));
            }
        }
        let task = match self.tasks.as_slice() {
            [one] => one,
            _ => {
                return Err(JobspecError::invalid(
                    "tasks",
                    format!(
                        "version 1 requires exactly one task, found {}",
                        self.tasks.len()
                    ),
                ));
            }
        };
        if task.count != TaskCount::PerSlot(1) {
            return Err(JobspecError::invalid(
                "tasks[0].count",
                "version 1 requires {per_slot: 1}",
            ));
        }
        if !self.slot_labels().contains(&task.slot.as_str()) {
            return Err(JobspecError::invalid(
                "tasks[0].slot",
                format!("no slot is labelled \"{}\"", task.slot),
            ));
        }
        Ok(())
    }
}

fn check_resource(r: &Resource, path: &str) -> Result<(), JobspecError> {
    if r.kind.is_empty() {
        return Err(JobspecError::invalid(
            format!("{path}.type"),
            "expected a non-empty string, found string \"\"",
        ));
    }
    r.count
        .check()
        .map_err(|m| JobspecError::invalid(format!("{path}.count"), m))?;
    if r.label.as_deref() == Some("") {
        return Err(JobspecError::invalid(
            format!("{path}.label"),
            "expected a non-empty string, found string \"\"",
        ));
    }
    if r.kind == "slot" {
        if r.label.is_none() {
            return Err(JobspecError::invalid(
                format!("{path}.label"),
                "a slot must have a label",
            ));
        }
        if r.with.is_empty() {
            return Err(JobspecError::invalid(
                format!("{path}.with"),
                "a slot must contain at least one resource",
            ));
        }
    }
    Ok(())
}

/// Count and `exclusive` rules of version 1 for one vertex.
fn check_v1_vertex(r: &Resource, path: &str) -> Result<(), JobspecError> {
    if !r.count.is_plain() {
        return Err(JobspecError::invalid(
            format!("{path}.count"),
            "version 1 requires a plain integer count",
        ));
    }
    if r.exclusive.is_some() && r.kind != "node" && r.kind != "slot" {
        return Err(JobspecError::invalid(
            format!("{path}.exclusive"),
            format!(
                "version 1 allows exclusive only on node and slot, not on {}",
                r.kind
            ),
        ));
    }
    Ok(())
}

fn check_v1_slot(slot: &Resource, path: &str) -> Result<(), JobspecError> {
    check_v1_vertex(slot, path)?;
    let (mut cores, mut gpus) = (0, 0);
    for (i, child) in slot.with.iter().enumerate() {
        let child_path = format!("{path}.with[{i}]");
        match child.kind.as_str() {
            "core" => cores += 1,
            "gpu" => gpus += 1,
            other => {
                return Err(JobspecError::invalid(
                    format!("{child_path}.type"),
                    format!("version 1 allows only core and gpu in a slot, found \"{other}\""),
                ));
            }
        }
        check_v1_vertex(child, &child_path)?;
        if !child.with.is_empty() {
            return Err(JobspecError::invalid(
                format!("{child_path}.with"),
                format!("version 1 does not allow resources inside a {}", child.kind),
            ));
        }
    }
    if cores != 1 || gpus > 1 {
        return Err(JobspecError::invalid(
            format!("{path}.with"),
            format!(
                "version 1 requires a slot to contain exactly one core and at most one gpu; found {cores} core and {gpus} gpu entries"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::{Attributes, Count, CountOp, Task};

    fn plain(n: u64) -> Count {
        Count::exact(n)
    }

    fn v1() -> Jobspec {
        let mut slot = Resource::new("slot", plain(1));
        slot.label = Some("task".into());
        slot.with = vec![
            Resource::new("core", plain(4)),
            Resource::new("gpu", plain(1)),
        ];
        let mut node = Resource::new("node", plain(2));
        node.with = vec![slot];
        Jobspec {
            version: VERSION_1,
            resources: vec![node],
            tasks: vec![Task {
                command: vec!["app".into()],
                slot: "task".into(),
                count: TaskCount::PerSlot(1),
            }],
            attributes: Attributes {
                duration: 60,
                ..Attributes::default()
            },
        }
    }

    fn v1_err(f: impl FnOnce(&mut Jobspec)) -> String {
        let mut js = v1();
        f(&mut js);
        js.validate().unwrap_err().to_string()
    }

    #[test]
    fn valid_version1_passes() {
        v1().validate().unwrap();
        let mut bare_slot = v1();
        bare_slot.resources = bare_slot.resources[0].with.clone();
        bare_slot.validate().unwrap();
    }

    #[test]
    fn version1_top_level() {
        assert_eq!(
            v1_err(|js| js.resources.push(js.resources[0].clone())),
            "resources: version 1 requires exactly one top-level resource, a node or a slot; found 2"
        );
        assert_eq!(
            v1_err(|js| js.resources[0].kind = "rack".into()),
            "resources[0].type: version 1 allows only node or slot at the top level, found \"rack\""
        );
    }

    #[test]
    fn version1_node_holds_one_slot() {
        assert_eq!(
            v1_err(|js| {
                let s = js.resources[0].with[0].clone();
                js.resources[0].with.push(s);
            }),
            "resources[0].with: version 1 requires a node to contain exactly one slot"
        );
        assert_eq!(
            v1_err(|js| js.resources[0].with = js.resources[0].with[0].with.clone()),
            "resources[0].with: version 1 requires a node to contain exactly one slot"
        );
    }

    #[test]
    fn version1_slot_contents() {
        assert_eq!(
            v1_err(|js| js.resources[0].with[0].with[1].kind = "memory".into()),
            "resources[0].with[0].with[1].type: version 1 allows only core and gpu in a slot, found \"memory\""
        );
        assert_eq!(
            v1_err(|js| {
                js.resources[0].with[0].with.remove(0);
            }),
            "resources[0].with[0].with: version 1 requires a slot to contain exactly one core and at most one gpu; found 0 core and 1 gpu entries"
        );
        assert_eq!(
            v1_err(|js| js.resources[0].with[0].with[1].kind = "core".into()),
            "resources[0].with[0].with: version 1 requires a slot to contain exactly one core and at most one gpu; found 2 core and 0 gpu entries"
        );
        assert_eq!(
            v1_err(|js| {
                let extra = Resource::new("core", plain(1));
                js.resources[0].with[0].with[0].with.push(extra);
            }),
            "resources[0].with[0].with[0].with: version 1 does not allow resources inside a core"
        );
    }

    #[test]
    fn version1_counts_and_exclusive() {
        assert_eq!(
            v1_err(|js| {
                js.resources[0].count = Count {
                    min: 1,
                    max: 4,
                    operator: CountOp::Add,
                    operand: 1,
                }
            }),
            "resources[0].count: version 1 requires a plain integer count"
        );
        assert_eq!(
            v1_err(|js| js.resources[0].with[0].with[0].exclusive = Some(true)),
            "resources[0].with[0].with[0].exclusive: version 1 allows exclusive only on node and slot, not on core"
        );
        let mut js = v1();
        js.resources[0].exclusive = Some(true);
        js.resources[0].with[0].exclusive = Some(false);
        js.validate().unwrap();
    }

    #[test]
    fn version1_tasks() {
        assert_eq!(
            v1_err(|js| js.tasks.push(js.tasks[0].clone())),
            "tasks: version 1 requires exactly one task, found 2"
        );
        assert_eq!(
            v1_err(|js| js.tasks[0].count = TaskCount::Total(4)),
            "tasks[0].count: version 1 requires {per_slot: 1}"
        );
        assert_eq!(
            v1_err(|js| js.tasks[0].slot = "other".into()),
            "tasks[0].slot: no slot is labelled \"other\""
        );
    }

    #[test]
    fn general_rules() {
        let general = |f: &dyn Fn(&mut Jobspec)| {
            let mut js = v1();
            js.version = VERSION_GENERAL;
            f(&mut js);
            js.validate().map_err(|e| e.to_string())
        };
        assert_eq!(general(&|_| {}), Ok(()));
        // Unknown task slot labels are accepted in the general form.
        assert_eq!(general(&|js| js.tasks[0].slot = "other".into()), Ok(()));
        assert_eq!(
            general(&|js| js.resources[0].with[0].label = None),
            Err("resources[0].with[0].label: a slot must have a label".into())
        );
        assert_eq!(
            general(&|js| js.resources[0].with[0].with.clear()),
            Err("resources[0].with[0].with: a slot must contain at least one resource".into())
        );
        assert_eq!(
            general(&|js| js.resources[0].with[0].with[0].count = plain(0)),
            Err("resources[0].with[0].with[0].count: must be at least 1, found 0".into())
        );
        assert_eq!(
            general(&|js| js.resources[0].kind.clear()),
            Err("resources[0].type: expected a non-empty string, found string \"\"".into())
        );
        assert_eq!(
            general(&|js| js.version = 2),
            Err("version: unsupported version 2; supported are 1 (RFC 25) and 9999 (the general form)".into())
        );
    }
}
