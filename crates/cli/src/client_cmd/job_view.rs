//! Jobs as the commands show them: `jobs` rows and JSON, `job info` as text and JSON.
//!
//! The JSON shapes are an interface (tests and scripts parse them), so they are built here
//! field by field rather than derived from the wire types: a wire change must not silently
//! change what `jobs --json` prints. Job ids are F58 text (`ƒ…`, as Flux prints them), node
//! sets are hostlists (`node[0-3]`), states are lowercase words. Text for people is escaped
//! ([`shardsched_client::output`]).

use std::collections::BTreeMap;

use serde_json::{Value, json};
use shardsched_client::output::{
    Table, escaped, human_duration, local_time, now_ms, utc_timestamp,
};
use shardsched_proto::msg::{JobEvent, JobId, JobInfo, JobState, JobSummary};
use shardsched_proto::text::escape_control;
use shardsched_resource::encode_hostlist;

/// Why a job is where it is, for people: the shard's words, with a reservation's time (or
/// a begin time a pending job waits for) in local time and how far off it is (`reserved
/// to start at 14:05:03 CET (in 4m10s)`).
pub fn job_reason(job: &JobSummary, now_ms: u64) -> String {
    let waiting_to_begin = job.state == JobState::Pending && job.reason == "begin time";
    match job
        .reserved_ms
        .or(job.begin_ms.filter(|_| waiting_to_begin))
    {
        Some(at) => format!(
            "{} at {} ({})",
            job.reason,
            local_time(at, now_ms),
            match at.checked_sub(now_ms) {
                Some(ahead) if ahead > 0 => format!("in {}", human_duration(ahead)),
                _ => "due".to_owned(),
            }
        ),
        None => job.reason.clone(),
    }
}

/// A pending job's priority and its parts while fair-share is on (docs/POLICIES.md,
/// "Fair-share"): `41000 (base 16000 + fairshare 100000 x 0.250)`; empty otherwise.
pub fn job_priority(job: &JobSummary) -> String {
    match job.priority {
        Some(p) => format!(
            "{} (base {} + fairshare {} x {:.3})",
            p.total,
            p.base,
            p.weight,
            f64::from(p.factor_ppm) / 1e6
        ),
        None => String::new(),
    }
}

/// A short state code for tables, as `flux jobs` prints them.
pub fn state_code(state: JobState) -> &'static str {
    match state {
        JobState::Pending => "PD",
        JobState::Running => "R",
        JobState::Completed => "CD",
        JobState::Failed => "F",
        JobState::Cancelled => "CA",
    }
}

/// How long a job has run (running) or ran (ended); empty when it never started.
pub fn run_time(job: &JobSummary, now_ms: u64) -> String {
    match (job.start_ms, job.end_ms) {
        (Some(start), Some(end)) => human_duration(end.saturating_sub(start)),
        (Some(start), None) => human_duration(now_ms.saturating_sub(start)),
        _ => String::new(),
    }
}

/// NNODES as `flux jobs` shows it: the nodes a job holds or held, else the fewest its
/// jobspec asks for; `None` for a pending job that asks for slots only.
pub fn nnodes(job: &JobSummary) -> Option<u64> {
    if job.nodes.is_empty() {
        job.nodes_requested
    } else {
        Some(job.nodes.len() as u64)
    }
}

/// A job's id as people name it: `ID`, or `ID[N]` for an array's element.
pub fn job_ref(job: &JobSummary) -> String {
    match job.array {
        Some(element) => element.to_string(),
        None => job.id.to_string(),
    }
}

/// The job table of `shardsched jobs`: one row per job, one per array (its elements
/// folded, with their count in each state).
pub fn jobs_table(jobs: &[JobSummary]) -> String {
    let now = now_ms();
    let mut table = Table::new(&[
        "JOBID", "QUEUE", "USER", "NAME", "ST", "NNODES", "TIME", "INFO",
    ]);
    let mut arrays: BTreeMap<JobId, Vec<&JobSummary>> = BTreeMap::new();
    for job in jobs {
        if let Some(element) = job.array {
            arrays.entry(element.array).or_default().push(job);
        }
    }
    for job in jobs {
        if let Some(element) = job.array {
            if let Some(elements) = arrays.remove(&element.array) {
                table.row(array_row(element.array, &elements));
            }
            continue;
        }
        let reason = job_reason(job, now);
        let info = if job.nodes.is_empty() {
            match job_priority(job) {
                p if p.is_empty() => reason,
                p if reason.is_empty() => format!("priority {p}"),
                p => format!("{reason}; priority {p}"),
            }
        } else if reason.is_empty() {
            encode_hostlist(&job.nodes)
        } else {
            format!("{} ({reason})", encode_hostlist(&job.nodes))
        };
        table.row(vec![
            job_ref(job),
            job.queue.clone(),
            job.owner.clone(),
            job.name.clone(),
            state_code(job.state).to_owned(),
            nnodes(job).map_or_else(String::new, |n| n.to_string()),
            run_time(job, now),
            info,
        ]);
    }
    table.render()
}

/// The row of an array whose listed `elements` are these: its id with their indices,
/// the most advanced state (running, else pending, else how they ended), the nodes its
/// running elements hold, and how many are in each state.
fn array_row(array: JobId, elements: &[&JobSummary]) -> Vec<String> {
    let mut indices: Vec<u32> = elements
        .iter()
        .filter_map(|j| j.array)
        .map(|e| e.index)
        .collect();
    indices.sort_unstable();
    let count = |state: JobState| elements.iter().filter(|j| j.state == state).count();
    let states = [
        JobState::Running,
        JobState::Pending,
        JobState::Completed,
        JobState::Failed,
        JobState::Cancelled,
    ];
    let shown = states
        .iter()
        .copied()
        .find(|&s| count(s) > 0)
        .unwrap_or(JobState::Pending);
    let counts: Vec<String> = states
        .iter()
        .filter(|&&s| count(s) > 0)
        .map(|&s| format!("{} {}", count(s), s.as_str()))
        .collect();
    let nodes: usize = elements
        .iter()
        .filter(|j| j.state == JobState::Running)
        .map(|j| j.nodes.len())
        .sum();
    let first = elements[0];
    vec![
        format!("{array}[{}]", index_ranges(&indices)),
        first.queue.clone(),
        first.owner.clone(),
        first.name.clone(),
        state_code(shown).to_owned(),
        if nodes > 0 {
            nodes.to_string()
        } else {
            String::new()
        },
        String::new(),
        counts.join(", "),
    ]
}

/// Sorted indices as ranges: `1-3,7,9-10`.
pub fn index_ranges(sorted: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            sorted[i].to_string()
        } else {
            format!("{}-{}", sorted[i], sorted[j])
        });
        i = j + 1;
    }
    out.join(",")
}

/// One job as `jobs --json` prints it (an array's element with id `ID[N]`, and its array's
/// id and its index apart).
pub fn job_json(job: &JobSummary) -> Value {
    json!({
        "id": job_ref(job),
        "id_decimal": job.id.0,
        "array_id": job.array.map(|e| e.array.to_string()),
        "array_index": job.array.map(|e| e.index),
        "queue": job.queue,
        "owner": job.owner,
        "name": job.name,
        "state": job.state.as_str(),
        "urgency": job.urgency,
        "nodes": encode_hostlist(&job.nodes),
        "nnodes": nnodes(job),
        "submit_ms": job.submit_ms,
        "start_ms": job.start_ms,
        "end_ms": job.end_ms,
        "duration_ms": job.duration_ms,
        "reason": job.reason,
        "reserved_ms": job.reserved_ms,
        "begin_ms": job.begin_ms,
        "priority": job.priority.map(|p| json!({
            "total": p.total,
            "base": p.base,
            "fairshare": p.fairshare,
            "weight": p.weight,
            "factor": f64::from(p.factor_ppm) / 1e6,
        })),
    })
}

/// JSON text, or the text itself as a JSON string when it is not JSON (a shard's R or event
/// context should always be JSON, but a printer must not fail on what it did not write).
fn embedded_json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// `job info --json`: the summary's fields, then the jobspec, R and events as JSON.
pub fn job_info_json(info: &JobInfo) -> Value {
    let mut value = job_json(&info.summary);
    if let Value::Object(map) = &mut value {
        map.insert(
            "jobspec".into(),
            info.jobspec_json
                .as_deref()
                .map_or(Value::Null, embedded_json),
        );
        map.insert(
            "R".into(),
            info.r_json.as_deref().map_or(Value::Null, embedded_json),
        );
        map.insert(
            "events".into(),
            Value::Array(info.events.iter().map(event_json).collect()),
        );
    }
    value
}

fn event_json(event: &JobEvent) -> Value {
    json!({
        "time_ms": event.time_ms,
        "name": event.name,
        "context": embedded_json(&event.context_json),
    })
}

/// What `job info` says instead of a job's jobspec, R and events when they are not the
/// asker's to see.
pub const PRIVATE_NOTE: &str =
    "\n(the jobspec, R and events of a job are shown to its owner and to admins only)\n";

/// `job info` for people: the summary, R, and the eventlog with times relative to submit.
pub fn job_info_text(info: &JobInfo) -> String {
    let job = &info.summary;
    let mut out = String::new();
    let mut line = |key: &str, value: String| {
        out.push_str(&format!("{key:<10} {}\n", escaped(value)));
    };
    line("id", format!("{} ({})", job_ref(job), job.id.0));
    line("queue", job.queue.clone());
    line("owner", job.owner.clone());
    line("name", job.name.clone());
    line("state", job.state.as_str().to_owned());
    line("urgency", job.urgency.to_string());
    line("submitted", utc_timestamp(job.submit_ms));
    line("duration", human_duration(job.duration_ms));
    if !job.nodes.is_empty() {
        line(
            "nodes",
            format!("{} ({})", encode_hostlist(&job.nodes), job.nodes.len()),
        );
    }
    if let Some(start) = job.start_ms {
        line(
            "waited",
            human_duration(start.saturating_sub(job.submit_ms)),
        );
    }
    let ran = run_time(job, now_ms());
    if !ran.is_empty() {
        line("ran", ran);
    }
    if !job.reason.is_empty() {
        line("reason", job_reason(job, now_ms()));
    }
    if job.priority.is_some() {
        line("priority", job_priority(job));
    }
    for (key, value) in exec_lines(info) {
        line(key, value);
    }
    if info.jobspec_json.is_none() {
        out.push_str(PRIVATE_NOTE);
        return out;
    }
    out.push_str("\nR:\n");
    match &info.r_json {
        Some(r) => {
            let pretty = serde_json::from_str::<Value>(r)
                .ok()
                .and_then(|v| serde_json::to_string_pretty(&v).ok())
                .unwrap_or_else(|| r.clone());
            for l in pretty.lines() {
                out.push_str(&format!("  {}\n", escape_control(l)));
            }
        }
        None => out.push_str("  (not allocated)\n"),
    }
    out.push_str("\nevents:\n");
    for event in &info.events {
        let at = event.time_ms.saturating_sub(job.submit_ms);
        let context = if event.context_json.trim() == "{}" {
            String::new()
        } else {
            format!(" {}", event.context_json)
        };
        out.push_str(&format!(
            "  +{:>9.3}s  {}{}\n",
            at as f64 / 1000.0,
            escape_control(&event.name),
            escape_control(&context)
        ));
    }
    out
}

/// What the exec executor recorded in a job's events about its last run (a requeued job
/// has several): where its output goes (`start`) and its exit status (`finish`).
fn exec_lines(info: &JobInfo) -> Vec<(&'static str, String)> {
    let last_start = info.events.iter().rposition(|e| e.name == "start");
    let run = &info.events[last_start.unwrap_or(info.events.len())..];
    let context = |name: &str| {
        run.iter()
            .find(|e| e.name == name)
            .and_then(|e| serde_json::from_str::<Value>(&e.context_json).ok())
    };
    let mut lines = Vec::new();
    if let Some(start) = context("start") {
        for key in ["stdout", "stderr"] {
            if let Some(path) = start.get(key).and_then(Value::as_str) {
                lines.push((key, path.to_owned()));
            }
        }
    }
    if !lines.is_empty()
        && let Some(finish) = context("finish")
        && let Some(status) = finish.get("status").and_then(Value::as_i64)
    {
        let exit = if status & 0x7f != 0 {
            format!("killed by signal {}", status & 0x7f)
        } else {
            format!("exit code {}", status >> 8)
        };
        let cause = finish
            .get("cause")
            .and_then(Value::as_str)
            .unwrap_or("completed");
        lines.push(("exit", format!("{exit} ({cause})")));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_arrays_elements_fold_into_one_row_with_their_counts() {
        assert_eq!(index_ranges(&[1, 2, 3, 7, 9, 10]), "1-3,7,9-10");
        assert_eq!(index_ranges(&[]), "");
        let array = shardsched_proto::Fluid(1 << 30);
        let element = |index: u32, state: JobState| JobSummary {
            id: shardsched_proto::array::element_id(array, index).expect("id"),
            queue: "batch".into(),
            owner: "alice".into(),
            name: "sweep".into(),
            state,
            urgency: 16,
            nodes: if state == JobState::Running {
                vec!["n1".into()]
            } else {
                Vec::new()
            },
            nodes_requested: None,
            submit_ms: 0,
            start_ms: None,
            end_ms: None,
            duration_ms: 0,
            reason: String::new(),
            reserved_ms: None,
            array: Some(shardsched_proto::array::ArrayElement { array, index }),
            begin_ms: None,
            priority: None,
        };
        let jobs = [
            element(1, JobState::Running),
            element(2, JobState::Pending),
            element(3, JobState::Pending),
        ];
        let table = jobs_table(&jobs);
        let rows: Vec<&str> = table.lines().skip(1).collect();
        assert_eq!(rows.len(), 1, "{table}");
        let columns: Vec<&str> = rows[0].split_whitespace().collect();
        assert_eq!(columns[0], format!("{array}[1-3]"));
        assert_eq!(columns[4..6], ["R", "1"], "{table}");
        assert!(rows[0].ends_with("1 running, 2 pending"), "{table}");
        assert_eq!(job_json(&jobs[1])["id"], format!("{array}[2]"));
    }

    #[test]
    fn a_pending_jobs_priority_shows_its_parts() {
        let job = JobSummary {
            id: shardsched_proto::Fluid(1),
            queue: "batch".into(),
            owner: "heavy".into(),
            name: "app".into(),
            state: JobState::Pending,
            urgency: 16,
            nodes: Vec::new(),
            submit_ms: 0,
            start_ms: None,
            end_ms: None,
            duration_ms: 60_000,
            reason: "queued".into(),
            reserved_ms: None,
            nodes_requested: Some(1),
            array: None,
            begin_ms: None,
            priority: Some(shardsched_proto::msg::fairshare::JobPriority {
                total: 41_000,
                base: 16_000,
                fairshare: 25_000,
                weight: 100_000,
                factor_ppm: 250_000,
            }),
        };
        let table = jobs_table(std::slice::from_ref(&job));
        assert!(
            table.contains("queued; priority 41000 (base 16000 + fairshare 100000 x 0.250)"),
            "{table}"
        );
        assert_eq!(job_json(&job)["priority"]["total"], 41_000);
        assert_eq!(job_json(&job)["priority"]["factor"], 0.25);
    }

    #[test]
    fn a_reserved_start_reads_in_local_time_and_from_now() {
        let now = 1_800_000_000_000;
        let job = JobSummary {
            id: shardsched_proto::Fluid(1),
            queue: "batch".into(),
            owner: "alice".into(),
            name: "app".into(),
            state: JobState::Pending,
            urgency: 16,
            nodes: Vec::new(),
            submit_ms: now,
            start_ms: None,
            end_ms: None,
            duration_ms: 60_000,
            reason: "reserved to start".into(),
            reserved_ms: Some(now + 250_000),
            nodes_requested: Some(1),
            array: None,
            begin_ms: None,
            priority: None,
        };
        let text = job_reason(&job, now);
        assert!(text.starts_with("reserved to start at "), "{text}");
        assert!(text.ends_with("(in 4m10s)"), "{text}");
        assert!(!text.contains("1800000250000"), "no raw epoch ms: {text}");
        let clock = local_time(now + 250_000, now);
        assert!(text.contains(&clock), "{text} / {clock}");
        assert_eq!(clock.matches(':').count(), 2, "{clock}");
        assert!(
            local_time(now + 3 * 86_400_000, now).contains('-'),
            "another day: the date"
        );
        let plain = JobSummary {
            reserved_ms: None,
            reason: "queued".into(),
            ..job
        };
        assert_eq!(job_reason(&plain, now), "queued");
    }
}
