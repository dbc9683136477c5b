//! What the read commands print: aligned tables for people, JSON for programs.
//!
//! The JSON shapes are an interface (tests and scripts parse them), so they are built here
//! field by field rather than derived from the wire types: a wire change must not silently
//! change what `jobs --json` prints. Job ids are F58 text (`ƒ…`, as Flux prints them), node
//! sets are hostlists (`node[0-3]`), states are lowercase words.
//!
//! Text for people never carries a control character from what users typed (job names,
//! reasons, queue and node names, servers' refusals): every table cell, `job info` value and
//! message on standard error goes through [`escape_control`] (JSON escapes them itself).

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use shardsched_proto::msg::{
    JobEvent, JobInfo, JobState, JobSummary, NodeState, NodeStatus, QueueStatus,
};
use shardsched_proto::text::escape_control;
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

/// Writes `message` to standard error after `shardsched: `, escaped line by line
/// ([`escape_lines`]): errors and warnings quote what servers and users wrote.
pub fn say(message: impl std::fmt::Display) {
    // Not `eprintln!`, which panics when stderr is closed (a terminal gone, `| tee` stopped).
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr(),
        "shardsched: {}",
        escape_lines(&message.to_string())
    );
}

/// `text` with control characters escaped ([`escape_control`]) line by line, keeping its
/// own line breaks (a multi-line message stays readable, no line of it can forge another).
pub fn escape_lines(text: &str) -> String {
    text.split('\n')
        .map(escape_control)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A cell or value for people: `text` escaped, without a copy when it needs none.
fn escaped(text: String) -> String {
    match escape_control(&text) {
        std::borrow::Cow::Borrowed(_) => text,
        std::borrow::Cow::Owned(safe) => safe,
    }
}

/// A table printed with left-aligned columns separated by two spaces. Cells are escaped
/// ([`escape_control`]): a name or reason cannot forge a row or move the cursor.
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

    /// Adds a row (one cell per header), escaped.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells.into_iter().map(escaped).collect());
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

/// A time in the reader's local time zone (the system's: `TZ`, else `/etc/localtime`):
/// `14:05:03 CET` on `now_ms`'s day, with the date before it otherwise.
pub fn local_time(ms: u64, now_ms: u64) -> String {
    let zone = jiff::tz::TimeZone::system();
    let zoned = |ms: u64| {
        jiff::Timestamp::from_millisecond(i64::try_from(ms).unwrap_or(i64::MAX))
            .ok()
            .map(|t| t.to_zoned(zone.clone()))
    };
    match (zoned(ms), zoned(now_ms)) {
        (Some(at), Some(now)) if at.date() == now.date() => at.strftime("%H:%M:%S %Z").to_string(),
        (Some(at), _) => at.strftime("%Y-%m-%d %H:%M:%S %Z").to_string(),
        (None, _) => utc_timestamp(ms),
    }
}

/// Why a job is where it is, for people: the shard's words, with a reservation's time in
/// local time and how far off it is (`reserved to start at 14:05:03 CET (in 4m10s)`).
pub fn job_reason(job: &JobSummary, now_ms: u64) -> String {
    match job.reserved_ms {
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
        let reason = job_reason(job, now);
        let info = if job.nodes.is_empty() {
            reason
        } else if reason.is_empty() {
            encode_hostlist(&job.nodes)
        } else {
            format!("{} ({reason})", encode_hostlist(&job.nodes))
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
        "reserved_ms": job.reserved_ms,
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
        line("reason", job_reason(job, now_ms()));
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
        "definition": queue.definition,
        "owned": queue.owned,
        "reason": queue.reason,
    })
}

/// `queue list` for people. The default queue is marked with `*`, as `flux queue list` does.
/// `long` adds each queue's definition and owned nodes (hostlists); a REASON column shows
/// why queues were disabled, when any was.
pub fn queues_table(queues: &[QueueStatus], default: Option<&str>, long: bool) -> String {
    let yes_no = |b: bool| if b { "y" } else { "n" }.to_owned();
    let reasons = queues.iter().any(|q| !q.reason.is_empty());
    let mut headers = vec![
        "QUEUE", "EN", "ST", "SHARD", "POLICY", "MATCH", "DEFINED", "OWNED", "UP", "PENDING",
        "RUNNING",
    ];
    if long {
        headers.extend(["DEFINITION", "OWNED_NODES"]);
    }
    if reasons {
        headers.push("REASON");
    }
    let mut table = Table::new(&headers);
    let dash = |s: &str| {
        if s.is_empty() {
            "-".to_owned()
        } else {
            s.to_owned()
        }
    };
    for q in queues {
        let mark = if Some(q.name.as_str()) == default {
            "*"
        } else {
            ""
        };
        let mut row = vec![
            format!("{}{mark}", q.name),
            yes_no(q.enabled),
            yes_no(q.started),
            if q.online { "online" } else { "offline" }.to_owned(),
            q.queue_policy.to_string(),
            q.match_policy.to_string(),
            q.nodes_defined.to_string(),
            q.nodes_owned.to_string(),
            q.nodes_up.to_string(),
            q.jobs_pending.to_string(),
            q.jobs_running.to_string(),
        ];
        if long {
            row.extend([dash(&q.definition), dash(&q.owned)]);
        }
        if reasons {
            row.push(dash(&q.reason));
        }
        table.row(row);
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
    fn what_users_wrote_is_escaped_in_tables_texts_and_messages() {
        let mut t = Table::new(&["NAME", "INFO"]);
        t.row(vec!["evil\x1b[2J".into(), "x\nƒFORGED  alice  R".into()]);
        let text = t.render();
        assert_eq!(text.lines().count(), 2, "{text:?}");
        assert!(text.contains("evil\\u{1b}[2J"), "{text:?}");
        assert_eq!(escape_lines("a\x07\nb"), "a\\u{7}\nb");
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
            priority: 16,
            nodes: Vec::new(),
            submit_ms: now,
            start_ms: None,
            end_ms: None,
            duration_ms: 60_000,
            reason: "reserved to start".into(),
            reserved_ms: Some(now + 250_000),
            nodes_requested: Some(1),
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

    #[test]
    fn tables_align_and_trim() {
        let mut t = Table::new(&["A", "LONGER"]);
        t.row(vec!["xyz".into(), "1".into()]);
        t.row(vec!["".into(), "".into()]);
        assert_eq!(t.render(), "A    LONGER\nxyz  1\n\n");
    }
}
