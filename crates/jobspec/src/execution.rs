//! What a jobspec says to run, and where: the command, the working directory, the
//! environment, the output files and the files it carries (Flux's `attributes.system.cwd`,
//! `.environment`, `.shell.options.output` and `.files`). The executors (the shard's `exec`,
//! the node agent) read them through here, so both take the same words the same way.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::Jobspec;
use crate::options::Stream;

/// The word in a command that names the job's directory, where its carried files are
/// (`flux batch` runs `{{tmpdir}}/script`).
pub const TMPDIR_TEMPLATE: &str = "{{tmpdir}}";

/// A file a jobspec carries, to write into the job's directory before it starts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CarriedFile {
    /// Its name (a plain name: the jobspec was checked when parsed).
    pub name: String,
    /// Its text.
    pub data: String,
    /// Its permission bits.
    pub mode: u32,
}

/// The values an output path template may name: `{{id}}`, `{{name}}`, `{{array_id}}`,
/// `{{array_index}}` (flux-core's mustache tags).
#[derive(Clone, Copy, Debug)]
pub struct TemplateValues<'a> {
    /// The job's id.
    pub id: &'a str,
    /// The job's name.
    pub name: &'a str,
    /// Its array's id (the job's own id when it is not an array's element).
    pub array_id: &'a str,
    /// Its index in its array (`0` when it is not an element).
    pub array_index: &'a str,
}

impl TemplateValues<'_> {
    /// `template` with the values in. A `/` in a value becomes `_`, so no value makes
    /// directories or climbs out of them.
    pub fn fill(&self, template: &str) -> String {
        let plain = |v: &str| v.replace('/', "_");
        template
            .replace("{{id}}", &plain(self.id))
            .replace("{{name}}", &plain(self.name))
            .replace("{{array_id}}", &plain(self.array_id))
            .replace("{{array_index}}", &plain(self.array_index))
    }
}

/// The name a job is known by: its `system.job.name`, else its command's program without
/// its directory (`job` when even that is empty), at most `max_bytes` bytes (a longer one is
/// cut at a character boundary and ends in `…`).
pub fn job_name(jobspec: &Jobspec, max_bytes: usize) -> String {
    let name = jobspec.attributes.job_name().unwrap_or_else(|| {
        jobspec
            .tasks
            .first()
            .and_then(|t| t.command.first())
            .map(|c| c.rsplit('/').next().unwrap_or(c))
            .filter(|c| !c.is_empty())
            .unwrap_or("job")
    });
    if name.len() <= max_bytes {
        return name.to_owned();
    }
    const MARK: &str = "…";
    let mut end = max_bytes.saturating_sub(MARK.len());
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{MARK}", &name[..end])
}

/// The command of a jobspec, with its working directory and environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Execution {
    /// The program and its arguments (`tasks[0].command`, never empty).
    pub command: Vec<String>,
    /// `attributes.system.cwd`, if given.
    pub cwd: Option<PathBuf>,
    /// `attributes.system.environment`, in its order.
    pub environment: Vec<(String, String)>,
    /// Standard output's path template (`attributes.system.shell.options.output`), if any.
    pub stdout: Option<String>,
    /// Standard error's path template, if any.
    pub stderr: Option<String>,
    /// The files the jobspec carries (`attributes.system.files`).
    pub files: Vec<CarriedFile>,
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
        let attributes = &jobspec.attributes;
        Ok(Execution {
            command,
            cwd,
            environment,
            stdout: attributes.output(Stream::Stdout).map(str::to_owned),
            stderr: attributes.output(Stream::Stderr).map(str::to_owned),
            files: attributes
                .files()
                .map(|f| CarriedFile {
                    name: f.name.to_owned(),
                    data: f.data.to_owned(),
                    mode: f.mode,
                })
                .collect(),
        })
    }

    /// The command with [`TMPDIR_TEMPLATE`] replaced by `dir`, the job's directory.
    pub fn command_in(&self, dir: &Path) -> Vec<String> {
        let dir = dir.to_string_lossy();
        self.command
            .iter()
            .map(|w| w.replace(TMPDIR_TEMPLATE, &dir))
            .collect()
    }

    /// Where `stream` goes: its template filled with `values`, a relative path taken from
    /// `cwd`; `None` when the jobspec names no file for it.
    pub fn output_path(
        &self,
        stream: Stream,
        cwd: &Path,
        values: &TemplateValues<'_>,
    ) -> Option<PathBuf> {
        let template = match stream {
            Stream::Stdout => self.stdout.as_deref(),
            Stream::Stderr => self.stderr.as_deref(),
        }?;
        Some(cwd.join(values.fill(template)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_directories_and_names_are_filled_in_one_way() {
        let text = r##"{"version":1,"resources":[{"type":"slot","count":1,"label":"task",
            "with":[{"type":"core","count":1}]}],"tasks":[{"command":["{{tmpdir}}/script","a"],
            "slot":"task","count":{"per_slot":1}}],"attributes":{"system":{"duration":60,
            "shell":{"options":{"output":{"stdout":{"type":"file","path":"{{name}}-{{id}}.out"},
            "stderr":{"type":"file","path":"/logs/{{array_id}}_{{array_index}}.err"}}}},
            "files":{"script":{"data":"#!/bin/sh\necho hi\n","mode":448}}}}}"##;
        let jobspec = crate::parse_json(text).expect("jobspec");
        let run = Execution::of(&jobspec).expect("execution");
        assert_eq!(run.command_in(Path::new("/j/7")), ["/j/7/script", "a"]);
        assert_eq!(
            run.files,
            [CarriedFile {
                name: "script".into(),
                data: "#!/bin/sh\necho hi\n".into(),
                mode: 0o700
            }]
        );
        let values = TemplateValues {
            id: "f7",
            name: "a/b",
            array_id: "f5",
            array_index: "3",
        };
        let cwd = Path::new("/home/u");
        assert_eq!(
            run.output_path(Stream::Stdout, cwd, &values),
            Some(PathBuf::from("/home/u/a_b-f7.out"))
        );
        assert_eq!(
            run.output_path(Stream::Stderr, cwd, &values),
            Some(PathBuf::from("/logs/f5_3.err"))
        );
        assert_eq!(job_name(&jobspec, 128), "script");
        let cut = job_name(&jobspec, 4);
        assert!(cut.len() <= 4 && cut.ends_with('…'), "{cut}");
    }

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
