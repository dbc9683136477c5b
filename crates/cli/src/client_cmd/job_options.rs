//! The submit options Flux and Slurm users reach for first, as `flux submit` names them, and
//! the jobspec attributes they become ([`shardsched_jobspec::options`]): a name, output
//! files, node properties and lists, a begin time, dependencies, the working directory and
//! the environment.
//!
//! As `flux submit` does, a job gets the submitter's working directory and environment
//! unless told otherwise (`--cwd`, `--env`, `--env-remove`), and a jobspec file keeps the
//! ones it names. Every text is checked against its bound here, and again by the shard
//! when it parses the jobspec.

use anyhow::{Result, bail};
use clap::Args;
use shardsched_jobspec::options::{NAME_BYTES_MAX, PATH_BYTES_MAX};
use shardsched_jobspec::{Constraint, Jobspec, Stream};
use shardsched_proto::limits::NODE_NAME_BYTES_MAX;

/// Most node properties `--requires` may name.
pub const REQUIRES_PROPERTIES_MAX: usize = 64;
/// Longest hostlist `--nodelist` or `--exclude` may give, in bytes.
pub const HOSTLIST_BYTES_MAX: usize = 64 * 1024;

/// The flags of `submit` (and of `batch` and its directives) that set job options.
#[derive(Args, Debug, Clone, Default)]
pub struct JobOptions {
    /// The job's name, shown by `jobs` [default: the command's first word].
    #[arg(short = 'J', long = "job-name", value_name = "NAME")]
    pub job_name: Option<String>,
    /// Standard output to this file (exec executor): `{{id}}`, `{{name}}`,
    /// `{{array_id}}` and `{{array_index}}` are filled in; relative to the job's working
    /// directory [default: `stdout` in its job directory].
    #[arg(short = 'o', long, value_name = "TEMPLATE")]
    pub output: Option<String>,
    /// Standard error to this file, as --output [default: `stderr` in its job directory].
    #[arg(short = 'e', long, value_name = "TEMPLATE")]
    pub error: Option<String>,
    /// Only nodes with these properties (comma-separated; `^prop`: without it).
    #[arg(long, value_name = "PROPS", value_delimiter = ',')]
    pub requires: Vec<String>,
    /// Only these nodes (a hostlist, e.g. node[0-3]).
    #[arg(short = 'w', long, value_name = "HOSTLIST")]
    pub nodelist: Option<String>,
    /// Not these nodes (a hostlist).
    #[arg(long, value_name = "HOSTLIST")]
    pub exclude: Option<String>,
    /// Not before this time: `+30m` (from now), `09:00` (today, or tomorrow if past),
    /// `2026-03-01T09:00` (local), or an RFC 3339 instant; the job waits, pending with
    /// reason `begin time`.
    #[arg(long = "begin-time", value_name = "WHEN")]
    pub begin_time: Option<String>,
    /// Hold the job until other jobs get somewhere, in any queue: `TYPE:ID[:ID…][,…]`
    /// where TYPE is `afterok` (ID completed), `afternotok` (failed or was cancelled),
    /// `afterany` (ended), `after` (started); or `singleton` (no other job of yours with
    /// this name runs in the queue). It waits with reason `dependency: waiting on ID`; one
    /// that can never be met (`afterok` on a failed job) says
    /// `dependency never satisfied: ID failed` (see --dependency-policy).
    #[arg(short = 'd', long, value_name = "TYPE:ID[,TYPE:ID…]")]
    pub dependency: Option<String>,
    /// What becomes of the job if a dependency can never be met: `pend` (stay pending,
    /// saying why) or `cancel`.
    #[arg(long = "dependency-policy", value_name = "pend|cancel",
          value_parser = ["pend", "cancel"])]
    pub dependency_policy: Option<String>,
    /// The job's working directory [default: where you submit from].
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<String>,
    /// Environment rules, in order, after your environment is copied: `NAME=VALUE` sets,
    /// `-PATTERN` removes (`*` and `?` match), `NAME` copies one variable.
    #[arg(long, value_name = "RULE")]
    pub env: Vec<String>,
    /// Removes variables matching this pattern from the copied environment (before the
    /// --env rules).
    #[arg(long = "env-remove", value_name = "PATTERN")]
    pub env_remove: Vec<String>,
}

impl JobOptions {
    /// Sets the options on `jobspec`, at `now_ms`. The working directory and environment
    /// are the submitter's unless the jobspec names its own.
    pub fn apply(&self, jobspec: &mut Jobspec, now_ms: u64) -> Result<()> {
        let a = &mut jobspec.attributes;
        if let Some(name) = &self.job_name {
            check_text("--job-name", name, NAME_BYTES_MAX)?;
            a.set_job_name(name);
        }
        for (flag, stream, template) in [
            ("--output", Stream::Stdout, &self.output),
            ("--error", Stream::Stderr, &self.error),
        ] {
            if let Some(template) = template {
                check_text(flag, template, PATH_BYTES_MAX)?;
                a.set_output(stream, template);
            }
        }
        if let Some(constraint) = self.constraint()? {
            a.constraints = Some(match a.constraints.take() {
                Some(theirs) => Constraint::And(vec![theirs, constraint]),
                None => constraint,
            });
        }
        if let Some(when) = &self.begin_time {
            let at = crate::time_arg::begin_time_ms(when, now_ms)
                .map_err(|e| anyhow::anyhow!("--begin-time: {e}"))?;
            a.set_begin_time_ms(at);
        }
        if let Some(deps) = &self.dependency {
            let deps = shardsched_jobspec::parse_dependency_arg(deps)
                .map_err(|e| anyhow::anyhow!("--dependency: {e}"))?;
            a.add_job_dependencies(&deps);
        }
        if let Some(policy) = &self.dependency_policy {
            let policy = policy
                .parse()
                .map_err(|e| anyhow::anyhow!("--dependency-policy: {e}"))?;
            a.set_dependency_policy(policy);
        }
        match &self.cwd {
            Some(cwd) => {
                check_text("--cwd", cwd, PATH_BYTES_MAX)?;
                a.set_cwd(cwd);
            }
            None if a.cwd().is_none() => {
                let here = std::env::current_dir()?;
                let Some(here) = here.to_str() else {
                    bail!("the working directory {here:?} is not UTF-8: give --cwd");
                };
                a.set_cwd(here);
            }
            None => {}
        }
        if a.environment().is_none() || !self.env.is_empty() || !self.env_remove.is_empty() {
            let base: Vec<(String, String)> = match a.environment() {
                Some(theirs) => theirs.map(|(k, v)| (k.to_owned(), v.to_owned())).collect(),
                None => std::env::vars_os()
                    .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                    .collect(),
            };
            let env = environment(base, &self.env_remove, &self.env)?;
            a.set_environment(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        }
        Ok(())
    }

    /// `--requires`, `--nodelist` and `--exclude` as one constraint (RFC 31).
    fn constraint(&self) -> Result<Option<Constraint>> {
        let mut all = Vec::new();
        if !self.requires.is_empty() {
            if self.requires.len() > REQUIRES_PROPERTIES_MAX {
                bail!(
                    "--requires names {} properties, more than the limit of \
                     {REQUIRES_PROPERTIES_MAX}",
                    self.requires.len()
                );
            }
            for p in &self.requires {
                check_text("a --requires property", p, NODE_NAME_BYTES_MAX)?;
            }
            all.push(Constraint::Properties(self.requires.clone()));
        }
        if let Some(hosts) = &self.nodelist {
            check_text("--nodelist", hosts, HOSTLIST_BYTES_MAX)?;
            all.push(Constraint::Hostlist(vec![hosts.clone()]));
        }
        if let Some(hosts) = &self.exclude {
            check_text("--exclude", hosts, HOSTLIST_BYTES_MAX)?;
            all.push(Constraint::Not(vec![Constraint::Hostlist(vec![
                hosts.clone(),
            ])]));
        }
        Ok(match all.len() {
            0 => None,
            1 => all.pop(),
            _ => Some(Constraint::And(all)),
        })
    }
}

/// `text` (given as `what`) is not empty and at most `max` bytes.
fn check_text(what: &str, text: &str, max: usize) -> Result<()> {
    if text.is_empty() {
        bail!("{what} is empty");
    }
    if text.len() > max {
        bail!(
            "{what} is {} bytes, more than the {max}-byte limit",
            text.len()
        );
    }
    Ok(())
}

/// `base` with the variables matching `remove` taken out, then the `rules` applied in
/// order (`NAME=VALUE`, `-PATTERN`, `NAME`).
fn environment(
    mut env: Vec<(String, String)>,
    remove: &[String],
    rules: &[String],
) -> Result<Vec<(String, String)>> {
    for pattern in remove {
        env.retain(|(k, _)| !wildcard(pattern, k));
    }
    for rule in rules {
        if let Some(pattern) = rule.strip_prefix('-') {
            env.retain(|(k, _)| !wildcard(pattern, k));
        } else if let Some((name, value)) = rule.split_once('=') {
            if name.is_empty() {
                bail!("--env {rule:?}: no variable name");
            }
            env.retain(|(k, _)| k != name);
            env.push((name.to_owned(), value.to_owned()));
        } else if !env.iter().any(|(k, _)| k == rule)
            && let Ok(value) = std::env::var(rule)
        {
            env.push((rule.clone(), value));
        }
    }
    env.sort();
    Ok(env)
}

/// Whether `name` matches `pattern`, where `*` is any run of characters and `?` one
/// (the shell's wildcards, as Flux's `--env-remove`).
fn wildcard(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // The classic two-pointer match with one backtrack point for the last `*`.
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < n.len() {
        if i < p.len() && (p[i] == '?' || p[i] == n[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_as_the_shell_does() {
        assert!(wildcard("SLURM_*", "SLURM_JOB_ID"));
        assert!(wildcard("*PATH", "LD_LIBRARY_PATH"));
        assert!(wildcard("A?C", "ABC"));
        assert!(!wildcard("A?C", "AC"));
        assert!(wildcard("*", ""));
        assert!(!wildcard("HOME", "HOMER"));
    }

    #[test]
    fn environment_rules_apply_in_order() {
        let base = vec![
            ("HOME".to_owned(), "/h".to_owned()),
            ("SLURM_A".to_owned(), "1".to_owned()),
            ("SLURM_B".to_owned(), "2".to_owned()),
        ];
        let env = environment(
            base,
            &["SLURM_*".to_owned()],
            &["X=1".to_owned(), "-HOME".to_owned(), "X=2".to_owned()],
        )
        .expect("env");
        assert_eq!(env, [("X".to_owned(), "2".to_owned())]);
    }

    #[test]
    fn node_options_make_one_constraint() {
        let options = JobOptions {
            requires: vec!["ssd".into()],
            exclude: Some("node[3-4]".into()),
            ..JobOptions::default()
        };
        let c = options.constraint().expect("constraint").expect("some");
        assert_eq!(
            c.to_json().to_string(),
            r#"{"and":[{"properties":["ssd"]},{"not":[{"hostlist":["node[3-4]"]}]}]}"#
        );
        let long = JobOptions {
            job_name: Some("n".repeat(NAME_BYTES_MAX + 1)),
            ..JobOptions::default()
        };
        let mut js = shardsched_jobspec::Shorthand {
            command: vec!["app".into()],
            ..shardsched_jobspec::Shorthand::default()
        }
        .to_jobspec()
        .expect("jobspec");
        let e = long.apply(&mut js, 0).expect_err("too long");
        assert!(e.to_string().contains("129 bytes"), "{e}");
    }
}
