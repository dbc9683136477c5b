//! The `flux submit -N -n -c -g -t` shorthand, turned into a version-1 jobspec.

use serde_json::Map;

use crate::error::JobspecError;
use crate::model::{Attributes, Count, Jobspec, Resource, Task, TaskCount, VERSION_1};

/// The slot label flux-core gives the slot of a shorthand jobspec.
pub const SHORTHAND_SLOT_LABEL: &str = "task";

/// What `flux submit` takes on its command line: nodes (`-N`), tasks (`-n`), cores per task
/// (`-c`), gpus per task (`-g`), a duration (`-t`, in seconds), `--exclusive`, a queue and
/// the command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shorthand {
    /// `-N`: number of nodes.
    pub nodes: Option<u64>,
    /// `-n`: number of tasks.
    pub tasks: Option<u64>,
    /// `-c`: cores per task (default 1).
    pub cores_per_task: u64,
    /// `-g`: gpus per task (default 0).
    pub gpus_per_task: u64,
    /// `-t`: duration in seconds (0 = unset).
    pub duration: u64,
    /// `--exclusive`: whole nodes (needs `nodes`).
    pub exclusive: bool,
    /// The command and its arguments.
    pub command: Vec<String>,
    /// `-q`: the queue.
    pub queue: Option<String>,
}

impl Default for Shorthand {
    fn default() -> Self {
        Shorthand {
            nodes: None,
            tasks: None,
            cores_per_task: 1,
            gpus_per_task: 0,
            duration: 0,
            exclusive: false,
            command: Vec::new(),
            queue: None,
        }
    }
}

impl Shorthand {
    /// Builds the version-1 jobspec flux-core builds for these options:
    ///
    /// - without nodes: `slot[n] -> core[c] (+ gpu[g])`, n = tasks (default 1);
    /// - nodes N and tasks n (n a multiple of N): `node[N] -> slot[n/N] -> core[c] (+ gpu[g])`;
    /// - nodes N without tasks: n = N and the nodes are exclusive;
    /// - `exclusive` marks the nodes exclusive (and needs nodes).
    ///
    /// One task with `{per_slot: 1}` in slot `task`; duration and queue in
    /// `attributes.system`.
    pub fn to_jobspec(&self) -> Result<Jobspec, JobspecError> {
        let positive = |field: &str, v: u64| {
            if v == 0 {
                Err(JobspecError::invalid(field, "must be at least 1, found 0"))
            } else {
                Ok(v)
            }
        };
        if self.command.is_empty() {
            return Err(JobspecError::invalid("command", "must not be empty"));
        }
        let cores = positive("cores_per_task", self.cores_per_task)?;
        if let Some(q) = &self.queue
            && q.is_empty()
        {
            return Err(JobspecError::invalid("queue", "must not be empty"));
        }
        let mut slot = Resource::new("slot", Count::exact(0));
        slot.label = Some(SHORTHAND_SLOT_LABEL.to_string());
        slot.with.push(Resource::new("core", Count::exact(cores)));
        if self.gpus_per_task > 0 {
            slot.with
                .push(Resource::new("gpu", Count::exact(self.gpus_per_task)));
        }
        let top = match self.nodes {
            None => {
                if self.exclusive {
                    return Err(JobspecError::invalid(
                        "exclusive",
                        "exclusive can only be used with nodes",
                    ));
                }
                slot.count = Count::exact(positive("tasks", self.tasks.unwrap_or(1))?);
                slot
            }
            Some(nodes) => {
                let nodes = positive("nodes", nodes)?;
                let tasks = positive("tasks", self.tasks.unwrap_or(nodes))?;
                if tasks % nodes != 0 {
                    return Err(JobspecError::invalid(
                        "tasks",
                        format!("{tasks} tasks cannot be spread evenly over {nodes} nodes"),
                    ));
                }
                slot.count = Count::exact(tasks / nodes);
                let mut node = Resource::new("node", Count::exact(nodes));
                if self.exclusive || self.tasks.is_none() {
                    node.exclusive = Some(true);
                }
                node.with.push(slot);
                node
            }
        };
        let jobspec = Jobspec {
            version: VERSION_1,
            resources: vec![top],
            tasks: vec![Task {
                command: self.command.clone(),
                slot: SHORTHAND_SLOT_LABEL.to_string(),
                count: TaskCount::PerSlot(1),
            }],
            attributes: Attributes {
                duration: self.duration,
                queue: self.queue.clone(),
                constraints: None,
                system_other: Map::new(),
                user: Map::new(),
            },
        };
        jobspec.validate()?;
        Ok(jobspec)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::read::parse_json;
    use serde_json::json;

    fn sh() -> Shorthand {
        Shorthand {
            command: vec!["hostname".into()],
            ..Shorthand::default()
        }
    }

    fn resources(s: &Shorthand) -> serde_json::Value {
        s.to_jobspec().unwrap().to_json()["resources"].clone()
    }

    #[test]
    fn default_is_one_task_one_core() {
        assert_eq!(
            resources(&sh()),
            json!([{"type": "slot", "count": 1, "label": "task",
                    "with": [{"type": "core", "count": 1}]}])
        );
    }

    #[test]
    fn tasks_cores_gpus_without_nodes() {
        let s = Shorthand {
            tasks: Some(4),
            cores_per_task: 2,
            gpus_per_task: 1,
            duration: 3600,
            queue: Some("batch".into()),
            ..sh()
        };
        let js = s.to_jobspec().unwrap();
        assert_eq!(
            js.to_json(),
            json!({
                "version": 1,
                "resources": [{"type": "slot", "count": 4, "label": "task", "with": [
                    {"type": "core", "count": 2}, {"type": "gpu", "count": 1}]}],
                "tasks": [{"command": ["hostname"], "slot": "task", "count": {"per_slot": 1}}],
                "attributes": {"system": {"duration": 3600, "queue": "batch"}}
            })
        );
        assert_eq!(parse_json(&js.to_json().to_string()).unwrap(), js);
    }

    #[test]
    fn nodes_and_tasks() {
        let s = Shorthand {
            nodes: Some(2),
            tasks: Some(8),
            ..sh()
        };
        assert_eq!(
            resources(&s),
            json!([{"type": "node", "count": 2, "with": [
                {"type": "slot", "count": 4, "label": "task",
                 "with": [{"type": "core", "count": 1}]}]}])
        );
        let s = Shorthand {
            nodes: Some(3),
            tasks: Some(8),
            ..sh()
        };
        assert_eq!(
            s.to_jobspec().unwrap_err().to_string(),
            "tasks: 8 tasks cannot be spread evenly over 3 nodes"
        );
    }

    #[test]
    fn nodes_without_tasks_are_exclusive() {
        let s = Shorthand {
            nodes: Some(2),
            ..sh()
        };
        assert_eq!(
            resources(&s),
            json!([{"type": "node", "count": 2, "exclusive": true, "with": [
                {"type": "slot", "count": 1, "label": "task",
                 "with": [{"type": "core", "count": 1}]}]}])
        );
        let s = Shorthand {
            nodes: Some(2),
            tasks: Some(2),
            exclusive: true,
            ..sh()
        };
        assert_eq!(resources(&s)[0]["exclusive"], json!(true));
        let s = Shorthand {
            nodes: Some(2),
            tasks: Some(2),
            ..sh()
        };
        assert_eq!(resources(&s)[0].get("exclusive"), None);
    }

    #[test]
    fn shorthand_errors() {
        let err = |s: Shorthand| s.to_jobspec().unwrap_err().to_string();
        assert_eq!(
            err(Shorthand {
                command: vec![],
                ..sh()
            }),
            "command: must not be empty"
        );
        assert_eq!(
            err(Shorthand {
                exclusive: true,
                ..sh()
            }),
            "exclusive: exclusive can only be used with nodes"
        );
        assert_eq!(
            err(Shorthand {
                nodes: Some(0),
                ..sh()
            }),
            "nodes: must be at least 1, found 0"
        );
        assert_eq!(
            err(Shorthand {
                tasks: Some(0),
                ..sh()
            }),
            "tasks: must be at least 1, found 0"
        );
        assert_eq!(
            err(Shorthand {
                cores_per_task: 0,
                ..sh()
            }),
            "cores_per_task: must be at least 1, found 0"
        );
    }

    #[test]
    fn zero_duration_round_trips_in_version1() {
        let js = sh().to_jobspec().unwrap();
        assert_eq!(js.to_json()["attributes"]["system"]["duration"], json!(0));
        assert_eq!(parse_json(&js.to_json().to_string()).unwrap(), js);
    }
}
