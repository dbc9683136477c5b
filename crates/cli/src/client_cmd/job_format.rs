//! `jobs --format`: a job list in the columns the user names, as `flux jobs --format` and
//! `squeue --format` print them: `{field}` for a field, `{field:12}` or `{field:<12}`
//! left-aligned in 12 columns, `{field:>12}` right-aligned; other text as it is (`{{` and
//! `}}` for braces). The header names the fields in capitals.
//!
//! Fields: `id` (`ID[N]` for an array's element), `queue`, `user`, `name`, `state`, `st`
//! (its code), `urgency`, `nnodes`, `nodes`, `time_limit`, `time_left`, `runtime`,
//! `submit`, `start`, `end` (local times), `begin` (a begin time), `reason`, `priority` (a
//! pending job's, while fair-share is on), `array_id`, `array_index`. Values are escaped for the terminal.

use anyhow::{Result, bail};
use shardsched_client::output::{escaped, human_duration, local_time};
use shardsched_proto::msg::{JobState, JobSummary};
use shardsched_resource::encode_hostlist;

use super::job_view::{job_reason, job_ref, nnodes, run_time, state_code};

/// Longest format, in bytes.
pub const FORMAT_BYTES_MAX: usize = 1024;
/// Most fields a format may name.
pub const FORMAT_FIELDS_MAX: usize = 32;

/// Every field a format may name.
pub const FIELDS: &[&str] = &[
    "id",
    "queue",
    "user",
    "name",
    "state",
    "st",
    "urgency",
    "nnodes",
    "nodes",
    "time_limit",
    "time_left",
    "runtime",
    "submit",
    "start",
    "end",
    "begin",
    "reason",
    "priority",
    "array_id",
    "array_index",
];

/// A parsed format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Format {
    parts: Vec<Part>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Text(String),
    Field {
        name: &'static str,
        width: usize,
        right: bool,
    },
}

impl Format {
    /// Reads a format (see the module documentation).
    pub fn parse(text: &str) -> Result<Format> {
        if text.len() > FORMAT_BYTES_MAX {
            bail!(
                "the format is {} bytes, more than the {FORMAT_BYTES_MAX}-byte limit",
                text.len()
            );
        }
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(c) = rest.chars().next() {
            if let Some(after) = rest.strip_prefix("{{") {
                literal.push('{');
                rest = after;
            } else if let Some(after) = rest.strip_prefix("}}") {
                literal.push('}');
                rest = after;
            } else if c == '{' {
                let Some(end) = rest.find('}') else {
                    bail!("format {text:?}: a `{{` without its `}}`");
                };
                if !literal.is_empty() {
                    parts.push(Part::Text(std::mem::take(&mut literal)));
                }
                parts.push(field(&rest[1..end])?);
                rest = &rest[end + 1..];
            } else {
                literal.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
        if !literal.is_empty() {
            parts.push(Part::Text(literal));
        }
        let fields = parts
            .iter()
            .filter(|p| matches!(p, Part::Field { .. }))
            .count();
        if fields == 0 {
            bail!("format {text:?} names no field ({})", FIELDS.join(", "));
        }
        if fields > FORMAT_FIELDS_MAX {
            bail!(
                "format {text:?} names {fields} fields, more than the limit of {FORMAT_FIELDS_MAX}"
            );
        }
        Ok(Format { parts })
    }

    /// The header line and one line per job.
    pub fn render(&self, jobs: &[JobSummary], now_ms: u64, header: bool) -> String {
        let mut out = String::new();
        if header {
            out.push_str(&self.line(|name| name.to_uppercase()));
        }
        for job in jobs {
            out.push_str(&self.line(|name| value(job, name, now_ms)));
        }
        out
    }

    fn line(&self, mut value: impl FnMut(&str) -> String) -> String {
        let mut line = String::new();
        for part in &self.parts {
            match part {
                Part::Text(text) => line.push_str(&escaped(text.clone())),
                Part::Field { name, width, right } => {
                    let v = escaped(value(name));
                    let pad = width.saturating_sub(v.chars().count());
                    if *right {
                        line.extend(std::iter::repeat_n(' ', pad));
                        line.push_str(&v);
                    } else {
                        line.push_str(&v);
                        line.extend(std::iter::repeat_n(' ', pad));
                    }
                }
            }
        }
        let mut line = line.trim_end().to_owned();
        line.push('\n');
        line
    }
}

/// `name`, `name:12`, `name:<12`, `name:>12`.
fn field(spec: &str) -> Result<Part> {
    let (name, align) = spec.split_once(':').unwrap_or((spec, ""));
    let Some(&known) = FIELDS.iter().find(|f| **f == name) else {
        bail!("no field {name:?} (fields: {})", FIELDS.join(", "));
    };
    let (right, width) = match align.strip_prefix('>') {
        Some(w) => (true, w),
        None => (false, align.strip_prefix('<').unwrap_or(align)),
    };
    let width = if width.is_empty() {
        0
    } else {
        match width.parse::<usize>() {
            Ok(w) if w <= 256 => w,
            _ => bail!("field {name:?}: {width:?} is not a width (0 to 256)"),
        }
    };
    Ok(Part::Field {
        name: known,
        width,
        right,
    })
}

/// One field of `job` as text.
fn value(job: &JobSummary, name: &str, now_ms: u64) -> String {
    let time = |ms: Option<u64>| ms.map_or_else(String::new, |t| local_time(t, now_ms));
    match name {
        "id" => job_ref(job),
        "queue" => job.queue.clone(),
        "user" => job.owner.clone(),
        "name" => job.name.clone(),
        "state" => job.state.as_str().to_owned(),
        "st" => state_code(job.state).to_owned(),
        "urgency" => job.urgency.to_string(),
        "nnodes" => nnodes(job).map_or_else(String::new, |n| n.to_string()),
        "nodes" => encode_hostlist(&job.nodes),
        "time_limit" => limit(job.duration_ms),
        "time_left" => match (job.state, job.start_ms) {
            _ if job.duration_ms == 0 => "unlimited".to_owned(),
            (JobState::Running, Some(start)) => {
                human_duration((start + job.duration_ms).saturating_sub(now_ms))
            }
            (JobState::Pending, _) => human_duration(job.duration_ms),
            _ => String::new(),
        },
        "runtime" => run_time(job, now_ms),
        "submit" => time(Some(job.submit_ms)),
        "start" => time(job.start_ms),
        "end" => time(job.end_ms),
        "begin" => time(job.begin_ms),
        "reason" => job_reason(job, now_ms),
        "priority" => job
            .priority
            .map_or_else(String::new, |p| p.total.to_string()),
        "array_id" => job.array.map_or_else(String::new, |e| e.array.to_string()),
        "array_index" => job.array.map_or_else(String::new, |e| e.index.to_string()),
        _ => String::new(),
    }
}

fn limit(ms: u64) -> String {
    if ms == 0 {
        "unlimited".to_owned()
    } else {
        human_duration(ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> JobSummary {
        JobSummary {
            id: shardsched_proto::Fluid(1 << 30),
            queue: "batch".into(),
            owner: "alice".into(),
            name: "sim\x1b".into(),
            state: JobState::Running,
            urgency: 16,
            nodes: vec!["n1".into(), "n2".into()],
            nodes_requested: Some(2),
            submit_ms: 1_000,
            start_ms: Some(2_000),
            end_ms: None,
            duration_ms: 600_000,
            reason: String::new(),
            reserved_ms: None,
            array: None,
            begin_ms: None,
            priority: None,
        }
    }

    #[test]
    fn fields_are_aligned_escaped_and_headed() {
        let format = Format::parse("{id:>4}|{name:<6}|{nodes} {time_left} {{x}}").expect("format");
        let text = format.render(&[job()], 62_000, true);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "  ID|NAME  |NODES TIME_LEFT {x}");
        assert!(lines[1].ends_with("|sim\\u{1b}|n[1-2] 9m00s {x}"), "{text}");
    }

    #[test]
    fn bad_formats_say_why() {
        let e = Format::parse("{nope}").expect_err("unknown").to_string();
        assert!(
            e.contains("no field \"nope\"") && e.contains("time_left"),
            "{e}"
        );
        assert!(Format::parse("{id").is_err());
        assert!(Format::parse("plain").is_err(), "no field");
        assert!(Format::parse("{id:x}").is_err());
        assert!(Format::parse(&"{id}".repeat(300)).is_err());
    }
}
