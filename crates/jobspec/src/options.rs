//! What `flux submit` puts in `attributes.system` beside the duration, queue and
//! constraints, under Flux's names, so that a jobspec carries over between the two:
//!
//! ```text
//! job.name                         the job's name (`--job-name`)
//! shell.options.output.stdout      {type: file, path: TEMPLATE}   (`--output`)
//! shell.options.output.stderr      {type: file, path: TEMPLATE}   (`--error`)
//! cwd                              the working directory (`--cwd`; the submitter's)
//! environment                      {NAME: VALUE, ...} (`--env`; the submitter's)
//! dependencies                     [{scheme: begin-time, value: SECONDS}]  (`--begin-time`),
//!                                  [{scheme: afterok, value: ID}, …]       (`--dependency`,
//!                                  `dependency.rs`)
//! files.NAME                       {data: TEXT, encoding: utf-8, mode: 0o700}  (`batch`)
//! ```
//!
//! `files` (RFC 37's file archive, as `flux batch` ships its script) are written into the
//! job's directory before it starts, and `{{tmpdir}}` in its command names that directory:
//! a batch job's command is `{{tmpdir}}/script`.
//!
//! Each is checked when a jobspec is parsed ([`check`]), with a named bound, so a shard and
//! a client refuse the same jobspecs, naming the field. A dependency scheme not understood
//! (`dependency.rs`) is refused rather than run too early. Output paths are templates: `{{id}}` and `{{name}}` are the job's id and
//! name (`{{array_id}}`, `{{array_index}}` an array element's), filled in when it starts.

use serde_json::{Map, Value, json};

use crate::error::JobspecError;
use crate::model::Attributes;
use crate::read::describe;

/// Longest job name a jobspec may give, in bytes.
pub const NAME_BYTES_MAX: usize = 128;
/// Longest path (output, error, working directory), in bytes (Linux's `PATH_MAX`).
pub const PATH_BYTES_MAX: usize = 4096;
/// Most environment variables a jobspec may carry (their bytes are bounded by the
/// jobspec's).
pub const ENVIRONMENT_VARS_MAX: usize = 4096;
/// Most dependencies a jobspec may list.
pub const DEPENDENCIES_MAX: usize = 16;
/// Most files a jobspec may carry.
pub const FILES_MAX: usize = 16;
/// Longest file name a jobspec's file may have, in bytes (a plain name: no `/`).
pub const FILE_NAME_BYTES_MAX: usize = 255;

/// A file a jobspec carries (`attributes.system.files.NAME`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct File<'a> {
    /// Its name in the job's directory.
    pub name: &'a str,
    /// Its text.
    pub data: &'a str,
    /// Its permission bits (e.g. `0o700`).
    pub mode: u32,
}

/// The output streams a job has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

impl Stream {
    fn key(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// Checks the keys of `attributes.system` this module reads: types and bounds.
pub(crate) fn check(system: &Map<String, Value>) -> Result<(), JobspecError> {
    if let Some(job) = system.get("job") {
        let job = object(job, "attributes.system.job")?;
        if let Some(name) = job.get("name") {
            bounded(name, "attributes.system.job.name", NAME_BYTES_MAX)?;
        }
    }
    if let Some(shell) = system.get("shell") {
        let output = object(shell, "attributes.system.shell")?
            .get("options")
            .map(|o| object(o, "attributes.system.shell.options"))
            .transpose()?
            .and_then(|o| o.get("output"));
        if let Some(output) = output {
            let output = object(output, "attributes.system.shell.options.output")?;
            for stream in [Stream::Stdout, Stream::Stderr] {
                let path = format!("attributes.system.shell.options.output.{}", stream.key());
                if let Some(file) = output.get(stream.key()) {
                    let file = object(file, &path)?;
                    let target = file.get("path").ok_or_else(|| {
                        JobspecError::invalid(&path, "a file output needs a path")
                    })?;
                    bounded(target, &format!("{path}.path"), PATH_BYTES_MAX)?;
                }
            }
        }
    }
    if let Some(cwd) = system.get("cwd") {
        bounded(cwd, "attributes.system.cwd", PATH_BYTES_MAX)?;
    }
    if let Some(env) = system.get("environment") {
        let env = object(env, "attributes.system.environment")?;
        if env.len() > ENVIRONMENT_VARS_MAX {
            return Err(JobspecError::invalid(
                "attributes.system.environment",
                format!(
                    "{} variables, more than the limit of {ENVIRONMENT_VARS_MAX}",
                    env.len()
                ),
            ));
        }
        for (name, value) in env {
            if !value.is_string() {
                return Err(JobspecError::invalid(
                    format!("attributes.system.environment.{name}"),
                    format!("expected a string, found {}", describe(value)),
                ));
            }
        }
    }
    if let Some(deps) = system.get("dependencies") {
        crate::dependency::check_list(deps)?;
    }
    crate::dependency::check_policy(system)?;
    if let Some(files) = system.get("files") {
        check_files(files)?;
    }
    Ok(())
}

/// `attributes.system.files`: at most [`FILES_MAX`] plain names, each with UTF-8 `data`
/// (bounded by the jobspec's size) and a `mode` of permission bits.
fn check_files(files: &Value) -> Result<(), JobspecError> {
    const PATH: &str = "attributes.system.files";
    let files = object(files, PATH)?;
    if files.len() > FILES_MAX {
        return Err(JobspecError::invalid(
            PATH,
            format!("{} files, more than the limit of {FILES_MAX}", files.len()),
        ));
    }
    for (name, file) in files {
        let path = format!("{PATH}.{name}");
        let plain = !name.is_empty()
            && name.len() <= FILE_NAME_BYTES_MAX
            && !name.contains('/')
            && name != "."
            && name != "..";
        if !plain {
            return Err(JobspecError::invalid(
                &path,
                format!(
                    "a file's name must be a plain name of at most {FILE_NAME_BYTES_MAX} bytes"
                ),
            ));
        }
        let file = object(file, &path)?;
        if !file.get("data").is_some_and(Value::is_string) {
            return Err(JobspecError::invalid(
                format!("{path}.data"),
                "expected a string",
            ));
        }
        if let Some(encoding) = file.get("encoding")
            && encoding.as_str() != Some("utf-8")
        {
            return Err(JobspecError::invalid(
                format!("{path}.encoding"),
                "only utf-8 is supported",
            ));
        }
        let mode_ok = match file.get("mode") {
            None => true,
            Some(m) => m.as_u64().is_some_and(|m| m <= 0o7777),
        };
        if !mode_ok {
            return Err(JobspecError::invalid(
                format!("{path}.mode"),
                "expected permission bits (0 to 0o7777)",
            ));
        }
    }
    Ok(())
}

impl Attributes {
    /// `system.job.name`, if given.
    pub fn job_name(&self) -> Option<&str> {
        self.system_other.get("job")?.get("name")?.as_str()
    }

    /// Sets `system.job.name`.
    pub fn set_job_name(&mut self, name: &str) {
        self.system_mut("job").insert("name".into(), json!(name));
    }

    /// The path template of `stream`'s output file, if given.
    pub fn output(&self, stream: Stream) -> Option<&str> {
        self.system_other
            .get("shell")?
            .get("options")?
            .get("output")?
            .get(stream.key())?
            .get("path")?
            .as_str()
    }

    /// Sends `stream` to the file `template` names.
    pub fn set_output(&mut self, stream: Stream, template: &str) {
        let shell = self.system_mut("shell");
        let options = child(shell, "options");
        let output = child(options, "output");
        output.insert(
            stream.key().into(),
            json!({"type": "file", "path": template}),
        );
    }

    /// `system.cwd`, if given.
    pub fn cwd(&self) -> Option<&str> {
        self.system_other.get("cwd")?.as_str()
    }

    /// Sets `system.cwd`.
    pub fn set_cwd(&mut self, cwd: &str) {
        self.system_other.insert("cwd".into(), json!(cwd));
    }

    /// `system.environment`, name and value, if given.
    pub fn environment(&self) -> Option<impl Iterator<Item = (&str, &str)>> {
        let env = self.system_other.get("environment")?.as_object()?;
        Some(
            env.iter()
                .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?))),
        )
    }

    /// Sets `system.environment`.
    pub fn set_environment<'a>(&mut self, vars: impl IntoIterator<Item = (&'a str, &'a str)>) {
        let env: Map<String, Value> = vars
            .into_iter()
            .map(|(k, v)| (k.to_owned(), json!(v)))
            .collect();
        self.system_other
            .insert("environment".into(), Value::Object(env));
    }

    /// The files the jobspec carries (checked when it was parsed).
    pub fn files(&self) -> impl Iterator<Item = File<'_>> {
        self.system_other
            .get("files")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(name, f)| {
                Some(File {
                    name,
                    data: f.get("data")?.as_str()?,
                    mode: f
                        .get("mode")
                        .and_then(Value::as_u64)
                        .and_then(|m| u32::try_from(m).ok())
                        .unwrap_or(0o600),
                })
            })
    }

    /// Adds a file (replacing one of the same name).
    pub fn set_file(&mut self, file: File<'_>) {
        self.system_mut("files").insert(
            file.name.to_owned(),
            json!({"data": file.data, "encoding": "utf-8", "mode": file.mode}),
        );
    }

    /// Whether this is a batch job (`system.batch`, set by `shardsched batch`): its command,
    /// the script, runs once, on the first of its nodes; the other nodes are the script's to
    /// use (as the nested instance of `flux batch` runs the script on its rank 0 only).
    pub fn is_batch(&self) -> bool {
        self.system_other.get("batch").and_then(Value::as_bool) == Some(true)
    }

    /// Marks this a batch job ([`Attributes::is_batch`]).
    pub fn set_batch(&mut self) {
        self.system_other.insert("batch".into(), Value::Bool(true));
    }

    /// The `begin-time` dependency: not before this time, ms since the Unix epoch.
    pub fn begin_time_ms(&self) -> Option<u64> {
        let deps = self.system_other.get("dependencies")?;
        crate::dependency::check_list(deps).ok().flatten()
    }

    /// Adds the `begin-time` dependency (replacing one already there).
    pub fn set_begin_time_ms(&mut self, at_ms: u64) {
        let value = json!({"scheme": "begin-time", "value": at_ms as f64 / 1000.0});
        let deps = self
            .system_other
            .entry("dependencies")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = deps {
            list.retain(|d| d.get("scheme").and_then(Value::as_str) != Some("begin-time"));
            list.push(value);
        }
    }

    /// `system.KEY` as an object, made if absent (replacing a value of another kind).
    fn system_mut(&mut self, key: &str) -> &mut Map<String, Value> {
        child(&mut self.system_other, key)
    }
}

/// `map.KEY` as an object, made if absent (replacing a value of another kind).
fn child<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let entry = map.entry(key).or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    match entry {
        Value::Object(m) => m,
        _ => unreachable!("made an object just above"),
    }
}

fn object<'a>(value: &'a Value, path: &str) -> Result<&'a Map<String, Value>, JobspecError> {
    value.as_object().ok_or_else(|| {
        JobspecError::invalid(path, format!("expected a map, found {}", describe(value)))
    })
}

/// A non-empty string of at most `max` bytes.
fn bounded(value: &Value, path: &str, max: usize) -> Result<(), JobspecError> {
    match value {
        Value::String(s) if s.is_empty() => Err(JobspecError::invalid(path, "must not be empty")),
        Value::String(s) if s.len() > max => Err(JobspecError::invalid(
            path,
            format!("{} bytes, more than the limit of {max}", s.len()),
        )),
        Value::String(_) => Ok(()),
        other => Err(JobspecError::invalid(
            path,
            format!("expected a string, found {}", describe(other)),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Shorthand;

    fn jobspec() -> crate::Jobspec {
        Shorthand {
            command: vec!["app".into()],
            ..Shorthand::default()
        }
        .to_jobspec()
        .expect("jobspec")
    }

    #[test]
    fn options_round_trip_under_fluxs_names() {
        let mut js = jobspec();
        let a = &mut js.attributes;
        a.set_job_name("sweep");
        a.set_output(Stream::Stdout, "out-{{id}}.txt");
        a.set_output(Stream::Stderr, "/tmp/{{name}}.err");
        a.set_cwd("/home/alice/run");
        a.set_environment([("OMP_NUM_THREADS", "4")]);
        a.set_begin_time_ms(1_800_000_000_500);
        let text = js.to_json().to_string();
        assert!(text.contains(r#""job":{"name":"sweep"}"#), "{text}");
        let back = crate::parse_json(&text).expect("parses");
        let a = &back.attributes;
        assert_eq!(a.job_name(), Some("sweep"));
        assert_eq!(a.output(Stream::Stdout), Some("out-{{id}}.txt"));
        assert_eq!(a.output(Stream::Stderr), Some("/tmp/{{name}}.err"));
        assert_eq!(a.cwd(), Some("/home/alice/run"));
        let env: Vec<_> = a.environment().expect("env").collect();
        assert_eq!(env, [("OMP_NUM_THREADS", "4")]);
        assert_eq!(a.begin_time_ms(), Some(1_800_000_000_500));
        let mut js = back;
        js.attributes.set_file(File {
            name: "script",
            data: "#!/bin/sh\necho hi\n",
            mode: 0o700,
        });
        let back = crate::parse_json(&js.to_json().to_string()).expect("parses");
        let files: Vec<File<'_>> = back.attributes.files().collect();
        assert_eq!(files.len(), 1);
        assert_eq!((files[0].name, files[0].mode), ("script", 0o700));
    }

    #[test]
    fn options_past_their_bounds_or_of_the_wrong_kind_are_refused_by_field() {
        let refuse = |system: Value| {
            let mut js = jobspec();
            js.attributes.system_other = system.as_object().expect("map").clone();
            crate::parse_json(&js.to_json().to_string())
                .expect_err("refused")
                .to_string()
        };
        let long = "x".repeat(NAME_BYTES_MAX + 1);
        assert_eq!(
            refuse(json!({"job": {"name": long}})),
            "attributes.system.job.name: 129 bytes, more than the limit of 128"
        );
        assert!(refuse(json!({"cwd": 3})).starts_with("attributes.system.cwd: expected a string"));
        assert!(
            refuse(json!({"environment": {"A": 1}}))
                .starts_with("attributes.system.environment.A: expected a string")
        );
        assert!(
            refuse(json!({"dependencies": [{"scheme": "aftercorr", "value": "f1"}]}))
                .contains("\"aftercorr\" is not supported")
        );
        assert!(
            refuse(json!({"shell": {"options": {"output": {"stdout": {"type": "file"}}}}}))
                .contains("needs a path")
        );
        assert!(
            refuse(json!({"files": {"../evil": {"data": "x"}}})).contains("a plain name"),
            "no file escapes the job's directory"
        );
    }
}
