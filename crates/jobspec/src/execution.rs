//! What a jobspec says to run, and where: the command, the working directory and the
//! environment (Flux's `attributes.system.cwd` and `attributes.system.environment`). The
//! executors (the shard's `exec`, the node agent) read them through here, so both take the
//! same words the same way.

use std::path::PathBuf;

use serde_json::Value;

use crate::model::Jobspec;

/// The command of a jobspec, with its working directory and environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Execution {
    /// The program and its arguments (`tasks[0].command`, never empty).
    pub command: Vec<String>,
    /// `attributes.system.cwd`, if given.
    pub cwd: Option<PathBuf>,
    /// `attributes.system.environment`, in its order.
    pub environment: Vec<(String, String)>,
}

impl Execution {
    /// Reads them out of `jobspec`; an error says which part is wrong.
    pub fn of(jobspec: &Jobspec) -> Result<Execution, String> {
        let command = jobspec
            .tasks
            .first()
            .map(|t| t.command.clone())
            .filter(|c| !c.is_empty())
            .ok_or_else(|| "the jobspec's tasks[0].command is empty".to_owned())?;
        let system = &jobspec.attributes.system_other;
        let cwd = match system.get("cwd") {
            None => None,
            Some(Value::String(cwd)) => Some(PathBuf::from(cwd)),
            Some(_) => return Err("attributes.system.cwd is not a string".to_owned()),
        };
        let mut environment = Vec::new();
        match system.get("environment") {
            None => {}
            Some(Value::Object(vars)) => {
                for (name, value) in vars {
                    let Value::String(value) = value else {
                        return Err(format!(
                            "attributes.system.environment.{name} is not a string"
                        ));
                    };
                    environment.push((name.clone(), value.clone()));
                }
            }
            Some(_) => return Err("attributes.system.environment is not an object".to_owned()),
        }
        Ok(Execution {
            command,
            cwd,
            environment,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_cwd_and_environment_are_read_and_bad_ones_named() {
        let text = r#"{"version":1,"resources":[{"type":"slot","count":1,"label":"task",
            "with":[{"type":"core","count":1}]}],"tasks":[{"command":["env"],"slot":"task",
            "count":{"per_slot":1}}],"attributes":{"system":{"duration":60,"cwd":"/tmp",
            "environment":{"A":"1"}}}}"#;
        let jobspec = crate::parse_json(text).expect("jobspec");
        let run = Execution::of(&jobspec).expect("execution");
        assert_eq!(run.command, ["env"]);
        assert_eq!(run.cwd, Some(PathBuf::from("/tmp")));
        assert_eq!(run.environment, [("A".to_owned(), "1".to_owned())]);
        let bad = text.replace(r#""A":"1""#, r#""A":1"#);
        // Parsing checks the environment's values first and names the variable.
        let error = crate::parse_json(&bad).expect_err("a number is refused");
        assert!(error.to_string().contains("environment.A"), "{error}");
    }
}
