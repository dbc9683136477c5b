//! Job dependencies (flux-core's RFC 26): `attributes.system.dependencies` is a list of
//! `{scheme, value}`. Understood: `begin-time` (value: seconds since the Unix epoch, see
//! `options.rs`), `after`, `afterok`, `afternotok`, `afterany` (value: a job id, any FLUID
//! spelling; the shard reads it) and `singleton` (value empty). What a scheme means is
//! the shard's (docs/POLICIES.md); this module reads and writes the list, with its bounds.
//!
//! `attributes.system.dependency-policy` says what becomes of a job whose dependency can
//! never be met: `pend` (the default: it stays pending and says why) or `cancel`.

use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value, json};

use crate::error::JobspecError;
use crate::model::Attributes;
use crate::options::DEPENDENCIES_MAX;
use crate::read::describe;

/// Longest dependency value (a job id) in bytes.
pub const DEPENDENCY_VALUE_BYTES_MAX: usize = 64;

const PATH: &str = "attributes.system.dependencies";
const POLICY_KEY: &str = "dependency-policy";

/// A dependency's scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scheme {
    /// Not before a time (`--begin-time`).
    BeginTime,
    /// After the job started.
    After,
    /// After the job completed successfully.
    AfterOk,
    /// After the job failed or was cancelled.
    AfterNotOk,
    /// After the job ended, however.
    AfterAny,
    /// While no other job of the same user and name runs.
    Singleton,
}

impl Scheme {
    /// RFC 26's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::BeginTime => "begin-time",
            Scheme::After => "after",
            Scheme::AfterOk => "afterok",
            Scheme::AfterNotOk => "afternotok",
            Scheme::AfterAny => "afterany",
            Scheme::Singleton => "singleton",
        }
    }

    /// Whether its value names a job.
    pub fn names_a_job(self) -> bool {
        matches!(
            self,
            Scheme::After | Scheme::AfterOk | Scheme::AfterNotOk | Scheme::AfterAny
        )
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Scheme {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "begin-time" => Scheme::BeginTime,
            "after" => Scheme::After,
            "afterok" => Scheme::AfterOk,
            "afternotok" => Scheme::AfterNotOk,
            "afterany" => Scheme::AfterAny,
            "singleton" => Scheme::Singleton,
            other => {
                return Err(format!(
                    "dependency scheme {other:?} is not supported (after, afterok, afternotok, \
                     afterany, singleton, begin-time)"
                ));
            }
        })
    }
}

/// A dependency on a job (or `singleton`), as the jobspec has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobDependency {
    /// Its scheme (never [`Scheme::BeginTime`]).
    pub scheme: Scheme,
    /// The job id as written (empty for `singleton`).
    pub value: String,
}

/// What becomes of a job whose dependency can never be met.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DependencyPolicy {
    /// It stays pending, saying why.
    #[default]
    Pend,
    /// It is cancelled, saying why.
    Cancel,
}

impl FromStr for DependencyPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "pend" => Ok(DependencyPolicy::Pend),
            "cancel" => Ok(DependencyPolicy::Cancel),
            other => Err(format!(
                "dependency policy {other:?} is not one of pend, cancel"
            )),
        }
    }
}

/// Reads `--dependency TYPE:ID[:ID…][,TYPE:ID…]` (Slurm's and Flux's spelling; `singleton`
/// alone) into RFC 26 dependencies, at most [`DEPENDENCIES_MAX`].
pub fn parse_dependency_arg(text: &str) -> Result<Vec<JobDependency>, String> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim) {
        if part.contains('?') {
            return Err("`?` (any of) dependencies are not supported: use `,` (all of)".into());
        }
        let (scheme, ids) = part.split_once(':').unwrap_or((part, ""));
        let scheme: Scheme = scheme.parse()?;
        match scheme {
            Scheme::BeginTime => return Err("use --begin-time for a begin time".into()),
            Scheme::Singleton if !ids.is_empty() => {
                return Err("singleton takes no job id".into());
            }
            Scheme::Singleton => out.push(JobDependency {
                scheme,
                value: String::new(),
            }),
            _ if ids.is_empty() => return Err(format!("{scheme} needs a job id ({scheme}:ID)")),
            _ => out.extend(ids.split(':').map(|id| JobDependency {
                scheme,
                value: id.trim().to_owned(),
            })),
        }
    }
    if out.len() > DEPENDENCIES_MAX {
        return Err(format!(
            "{} dependencies, more than the limit of {DEPENDENCIES_MAX}",
            out.len()
        ));
    }
    for d in &out {
        check_value(d.scheme, &d.value).map_err(|e| e.to_string())?;
    }
    Ok(out)
}

/// Checks a dependency list: its length, each scheme and value. Returns the latest begin
/// time, ms, if any.
pub(crate) fn check_list(deps: &Value) -> Result<Option<u64>, JobspecError> {
    let Value::Array(list) = deps else {
        return Err(JobspecError::invalid(
            PATH,
            format!("expected a list, found {}", describe(deps)),
        ));
    };
    if list.len() > DEPENDENCIES_MAX {
        return Err(JobspecError::invalid(
            PATH,
            format!(
                "{} dependencies, more than the limit of {DEPENDENCIES_MAX}",
                list.len()
            ),
        ));
    }
    let mut begin = None;
    for (i, dep) in list.iter().enumerate() {
        let path = format!("{PATH}[{i}]");
        let dep = dep.as_object().ok_or_else(|| {
            JobspecError::invalid(&path, format!("expected a map, found {}", describe(dep)))
        })?;
        let scheme: Scheme = match dep.get("scheme").and_then(Value::as_str) {
            Some(s) => s
                .parse()
                .map_err(|e: String| JobspecError::invalid(format!("{path}.scheme"), e))?,
            None => return Err(JobspecError::invalid(&path, "a dependency needs a scheme")),
        };
        if scheme == Scheme::BeginTime {
            let ms = begin_time(dep, &path)?;
            begin = Some(begin.map_or(ms, |b: u64| b.max(ms)));
            continue;
        }
        let value = match dep.get("value") {
            None => "",
            Some(Value::String(s)) => s.as_str(),
            Some(other) => {
                return Err(JobspecError::invalid(
                    format!("{path}.value"),
                    format!("expected a job id, found {}", describe(other)),
                ));
            }
        };
        check_value(scheme, value).map_err(|e| match e {
            JobspecError::Invalid { message, .. } => {
                JobspecError::invalid(format!("{path}.value"), message)
            }
            other => other,
        })?;
    }
    Ok(begin)
}

/// Checks `system.dependency-policy`.
pub(crate) fn check_policy(system: &Map<String, Value>) -> Result<(), JobspecError> {
    match system.get(POLICY_KEY) {
        None => Ok(()),
        Some(Value::String(s)) => s
            .parse::<DependencyPolicy>()
            .map(|_| ())
            .map_err(|e| JobspecError::invalid(format!("attributes.system.{POLICY_KEY}"), e)),
        Some(other) => Err(JobspecError::invalid(
            format!("attributes.system.{POLICY_KEY}"),
            format!("expected pend or cancel, found {}", describe(other)),
        )),
    }
}

fn check_value(scheme: Scheme, value: &str) -> Result<(), JobspecError> {
    let bad = |m: String| JobspecError::invalid(PATH, m);
    if scheme.names_a_job() && value.is_empty() {
        return Err(bad(format!("{scheme} needs a job id")));
    }
    if value.len() > DEPENDENCY_VALUE_BYTES_MAX {
        return Err(bad(format!(
            "{} bytes, more than the limit of {DEPENDENCY_VALUE_BYTES_MAX}",
            value.len()
        )));
    }
    if value.chars().any(char::is_control) {
        return Err(bad("a job id has no control characters".into()));
    }
    Ok(())
}

fn begin_time(dep: &Map<String, Value>, path: &str) -> Result<u64, JobspecError> {
    let seconds = dep
        .get("value")
        .and_then(Value::as_f64)
        .filter(|s| s.is_finite() && *s >= 0.0 && *s < 1e15)
        .ok_or_else(|| {
            JobspecError::invalid(
                format!("{path}.value"),
                "expected a time in seconds since the Unix epoch",
            )
        })?;
    Ok((seconds * 1000.0).round() as u64)
}

impl Attributes {
    /// The dependencies on jobs (and `singleton`), in order; `begin-time` is
    /// [`Attributes::begin_time_ms`]. Checked when the jobspec was parsed.
    pub fn job_dependencies(&self) -> Vec<JobDependency> {
        let Some(Value::Array(list)) = self.system_other.get("dependencies") else {
            return Vec::new();
        };
        list.iter()
            .filter_map(|d| {
                let scheme: Scheme = d.get("scheme")?.as_str()?.parse().ok()?;
                (scheme != Scheme::BeginTime).then(|| JobDependency {
                    scheme,
                    value: d
                        .get("value")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                })
            })
            .collect()
    }

    /// Adds dependencies on jobs (after those already there).
    pub fn add_job_dependencies(&mut self, deps: &[JobDependency]) {
        let list = self
            .system_other
            .entry("dependencies")
            .or_insert_with(|| Value::Array(Vec::new()));
        if !list.is_array() {
            *list = Value::Array(Vec::new());
        }
        if let Value::Array(list) = list {
            list.extend(
                deps.iter()
                    .map(|d| json!({"scheme": d.scheme.as_str(), "value": d.value})),
            );
        }
    }

    /// What becomes of the job if a dependency can never be met.
    pub fn dependency_policy(&self) -> DependencyPolicy {
        self.system_other
            .get(POLICY_KEY)
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
            .unwrap_or_default()
    }

    /// Sets [`Attributes::dependency_policy`] (the default is not written).
    pub fn set_dependency_policy(&mut self, policy: DependencyPolicy) {
        match policy {
            DependencyPolicy::Pend => self.system_other.remove(POLICY_KEY),
            DependencyPolicy::Cancel => {
                self.system_other.insert(POLICY_KEY.into(), json!("cancel"))
            }
        };
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
    fn the_flag_reads_slurms_and_fluxs_spellings() {
        let deps = parse_dependency_arg("afterok:ƒ2a:ƒ3b,afterany:12,singleton").expect("ok");
        let pairs: Vec<_> = deps.iter().map(|d| (d.scheme, d.value.as_str())).collect();
        assert_eq!(
            pairs,
            [
                (Scheme::AfterOk, "ƒ2a"),
                (Scheme::AfterOk, "ƒ3b"),
                (Scheme::AfterAny, "12"),
                (Scheme::Singleton, "")
            ]
        );
        assert!(
            parse_dependency_arg("afterok")
                .expect_err("refused")
                .contains("needs a job id")
        );
        assert!(
            parse_dependency_arg("aftercorr:1")
                .expect_err("refused")
                .contains("not supported")
        );
        assert!(
            parse_dependency_arg("afterok:1?afterany:2")
                .expect_err("refused")
                .contains('?')
        );
        let many = vec!["afterok:1"; DEPENDENCIES_MAX + 1].join(",");
        assert!(
            parse_dependency_arg(&many)
                .expect_err("refused")
                .contains("limit")
        );
    }

    #[test]
    fn dependencies_and_policy_round_trip_beside_a_begin_time() {
        let mut js = jobspec();
        js.attributes.set_begin_time_ms(1_800_000_000_000);
        let deps = parse_dependency_arg("afterok:ƒ2a,after:ƒ3b").expect("ok");
        js.attributes.add_job_dependencies(&deps);
        js.attributes
            .set_dependency_policy(DependencyPolicy::Cancel);
        let text = js.to_json().to_string();
        assert!(
            text.contains(r#"{"scheme":"afterok","value":"ƒ2a"}"#),
            "{text}"
        );
        let back = crate::parse_json(&text).expect("parses");
        assert_eq!(back.attributes.job_dependencies(), deps);
        assert_eq!(back.attributes.begin_time_ms(), Some(1_800_000_000_000));
        assert_eq!(
            back.attributes.dependency_policy(),
            DependencyPolicy::Cancel
        );
    }

    #[test]
    fn bad_dependencies_are_refused_by_field() {
        let refuse = |system: Value| {
            let mut js = jobspec();
            js.attributes.system_other = system.as_object().expect("map").clone();
            crate::parse_json(&js.to_json().to_string())
                .expect_err("refused")
                .to_string()
        };
        assert!(
            refuse(json!({"dependencies": [{"scheme": "afterok"}]})).contains("needs a job id")
        );
        assert!(
            refuse(json!({"dependencies": [{"scheme": "afterok", "value": 7}]}))
                .starts_with("attributes.system.dependencies[0].value: expected a job id")
        );
        assert!(
            refuse(json!({"dependencies": [{"scheme": "aftercorr", "value": "1"}]}))
                .contains("not supported")
        );
        assert!(refuse(json!({"dependency-policy": "kill"})).contains("not one of"));
    }
}
