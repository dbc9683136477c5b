//! What the read commands print: aligned tables for people, JSON for programs.
//!
//! The JSON shapes are an interface (tests and scripts parse them), so they are built here
//! field by field rather than derived from the wire types: a wire change must not silently
//! change what `jobs --json` prints. Job ids are F58 text (`ƒ…`, as Flux prints them), node
//! sets are hostlists (`node[0-3]`), states are lowercase words.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use shardsched_proto::msg::{
    JobEvent, JobInfo, JobState, JobSummary, NodeState, NodeStatus, QueueStatus,
};
use shardsched_resource::encode_hostlist;

/// Writes `text` to standard output. A closed pipe (`shardsched jobs | head`) ends the output
/// quietly, as it does for other Unix tools, instead of panicking as `print!` would.
pub fn emit(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => anyhow::Context::context(other, "writing to standard output"),
    }
}

/// A table printed with left-aligned columns separated by two spaces.
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(headers: &[&str]) -> Table {
        Table {
            rows: vec![headers.iter().map(|h| (*h).to_owned()).collect()],
        }
    }

    /// Adds a row (one cell per header).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as text, one line per row, trailing spaces trimmed.
    pub fn render(&self) -> String {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let mut widths = vec![0; columns];
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for row in &self.rows {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                line.push_str(cell);
                if i + 1 < row.len() {
                    let pad = widths[i] - cell.chars().count() + 2;
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A time as UTC ISO 8601 with milliseconds, `2026-11-30T05:17:15.123Z`: unambiguous in logs
/// and bug reports whatever the reader's time zone.
pub fn utc_timestamp(ms: u64) -> String {
    let days = (ms / 86_400_000) as i64;
    let in_day = ms % 86_400_000;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3_600_000,
        (in_day / 60_000) % 60,
        (in_day / 1000) % 60,
        in_day % 1000
    )
}

/// A duration for people: `850ms`, `12.3s`, `4m05s`, `2h03m`, `3d04h`.
pub fn human_duration(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0 => format!("{ms}ms"),
        1..60 => format!("{:.1}s", ms as f64 / 1000.0),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86_400 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3600),
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

/// The job table of `shardsched jobs`.
pub fn jobs_table(jobs: &[JobSummary]) -> String {
    let now = now_ms();
    let mut table = Table::new(&[
        "JOBID", "QUEUE", "USER", "NAME", "ST", "NNODES", "TIME", "INFO",
    ]);
    for job in jobs {
        let info = if job.nodes.is_empty() {
            job.reason.clone()
        } else if job.reason.is_empty() {
            encode_hostlist(&job.nodes)
        } else {
            format!("{} ({})", encode_hostlist(&job.nodes), job.reason)
        };
        table.row(vec![
            job.id.to_string(),
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

/// One job as `jobs --json` prints it.
pub fn job_json(job: &JobSummary) -> Value {
    json!({
        "id": job.id.to_string(),
        "id_decimal": job.id.0,
        "queue": job.queue,
        "owner": job.owner,
        "name": job.name,
        "state": job.state.as_str(),
        "priority": job.priority,
        "nodes": encode_hostlist(&job.nodes),
        "nnodes": nnodes(job),
        "submit_ms": job.submit_ms,
        "start_ms": job.start_ms,
        "end_ms": job.end_ms,
        "duration_ms": job.duration_ms,
        "reason": job.reason,
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
        map.insert("jobspec".into(), embedded_json(&info.jobspec_json));
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

/// `job info` for people: the summary, R, and the eventlog with times relative to submit.
pub fn job_info_text(info: &JobInfo) -> String {
    let job = &info.summary;
    let mut out = String::new();
    let mut line = |key: &str, value: String| {
        out.push_str(&format!("{key:<10} {value}\n"));
    };
    line("id", format!("{} ({})", job.id, job.id.0));
    line("queue", job.queue.clone());
    line("owner", job.owner.clone());
    line("name", job.name.clone());
    line("state", job.state.as_str().to_owned());
    line("priority", job.priority.to_string());
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
        line("reason", job.reason.clone());
    }
    for (key, value) in exec_lines(info) {
        line(key, value);
    }
    out.push_str("\nR:\n");
    match &info.r_json {
        Some(r) => {
            let pretty = serde_json::from_str::<Value>(r)
                .ok()
                .and_then(|v| serde_json::to_string_pretty(&v).ok())
                .unwrap_or_else(|| r.clone());
            for l in pretty.lines() {
                out.push_str(&format!("  {l}\n"));
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
            event.name,
            context
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

/// One node as `resource list --json` prints it.
pub fn node_json(node: &NodeStatus) -> Value {
    json!({
        "name": node.name,
        "queue": node.queue,
        "state": node_state(node),
        "generation": node.generation.0,
        "jobs_running": node.jobs_running,
        "reason": node.reason,
    })
}

/// A node's state as flux-core words it: a drained node still running jobs is `draining`
/// until they end.
pub fn node_state(node: &NodeStatus) -> &'static str {
    if node.state == NodeState::Drained && node.jobs_running > 0 {
        "draining"
    } else {
        node.state.as_str()
    }
}

/// `resource list` for people: nodes grouped by state and owner, as `flux resource list`
/// groups them, with how many of them run jobs.
pub fn resources_table(nodes: &[NodeStatus]) -> String {
    // Groups in first-seen order, which is the coordinator's (graph) order. Nodes down for
    // different reasons are different groups.
    let mut groups: Vec<(String, String, Vec<&NodeStatus>)> = Vec::new();
    for node in nodes {
        let state = match &node.reason {
            Some(reason) => format!("{} ({reason})", node_state(node)),
            None => node_state(node).to_owned(),
        };
        let queue = node.queue.clone().unwrap_or_else(|| "-".to_owned());
        match groups
            .iter_mut()
            .find(|(s, q, _)| *s == state && *q == queue)
        {
            Some((_, _, members)) => members.push(node),
            None => groups.push((state, queue, vec![node])),
        }
    }
    let mut table = Table::new(&["STATE", "QUEUE", "NNODES", "BUSY", "NODELIST"]);
    for (state, queue, members) in groups {
        let names: Vec<&str> = members.iter().map(|n| n.name.as_str()).collect();
        let busy = members.iter().filter(|n| n.jobs_running > 0).count();
        table.row(vec![
            state,
            queue,
            members.len().to_string(),
            busy.to_string(),
            encode_hostlist(&names),
        ]);
    }
    table.render()
}

/// One queue as `queue list --json` prints it.
pub fn queue_json(queue: &QueueStatus, default: bool) -> Value {
    json!({
        "name": queue.name,
        "default": default,
        "enabled": queue.enabled,
        "started": queue.started,
        "queue_policy": queue.queue_policy,
        "match_policy": queue.match_policy,
        "nodes_defined": queue.nodes_defined,
        "nodes_owned": queue.nodes_owned,
        "nodes_up": queue.nodes_up,
        "jobs_pending": queue.jobs_pending,
        "jobs_running": queue.jobs_running,
        "online": queue.online,
    })
}

/// `queue list` for people. The default queue is marked with `*`, as `flux queue list` does.
pub fn queues_table(queues: &[QueueStatus], default: Option<&str>) -> String {
    let yes_no = |b: bool| if b { "y" } else { "n" }.to_owned();
    let mut table = Table::new(&[
        "QUEUE", "EN", "ST", "SHARD", "POLICY", "MATCH", "DEFINED", "OWNED", "UP", "PENDING",
        "RUNNING",
    ]);
    for q in queues {
        let mark = if Some(q.name.as_str()) == default {
            "*"
        } else {
            ""
        };
        table.row(vec![
            format!("{}{mark}", q.name),
            yes_no(q.enabled),
            yes_no(q.started),
            if q.online { "online" } else { "offline" }.to_owned(),
            q.queue_policy.clone(),
            q.match_policy.clone(),
            q.nodes_defined.to_string(),
            q.nodes_owned.to_string(),
            q.nodes_up.to_string(),
            q.jobs_pending.to_string(),
            q.jobs_running.to_string(),
        ]);
    }
    table.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human_duration(850), "850ms");
        assert_eq!(human_duration(12_340), "12.3s");
        assert_eq!(human_duration(245_000), "4m05s");
        assert_eq!(human_duration(7_380_000), "2h03m");
        assert_eq!(human_duration(273_600_000), "3d04h");
    }

    #[test]
    fn timestamps_are_utc_iso_8601() {
        assert_eq!(utc_timestamp(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc_timestamp(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(utc_timestamp(1_735_689_599_999), "2024-12-31T23:59:59.999Z");
    }

    #[test]
    fn tables_align_and_trim() {
        let mut t = Table::new(&["A", "LONGER"]);
        t.row(vec!["xyz".into(), "1".into()]);
        t.row(vec!["".into(), "".into()]);
        assert_eq!(t.render(), "A    LONGER\nxyz  1\n\n");
    }
}
