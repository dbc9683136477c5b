//! An independent schedule checker: it reads a replayed SWF file and the cluster size, and
//! verifies the schedule from the file alone.
//!
//! It shares no code with the replay or the queue manager (not even the SWF reader), so a
//! bug there cannot hide itself here. It checks that
//! - no job starts before it is submitted (a wait is -1 for "never ran", else ≥ 0), and a
//!   job that never ran is marked so (status 5);
//! - at no instant do running jobs hold more processors than the cluster has (a job holds
//!   its processors over `[start, start + run)`, run capped at the requested time, as the
//!   replay defines it; a job ending at `t` frees its processors for one starting at `t`);
//! - under fcfs, jobs start in arrival order (submit time, then file order).

/// What [`check_schedule`] found wrong, one line per violation.
pub type Violations = Vec<String>;

struct Row {
    line: usize,
    submit: i64,
    wait: i64,
    run: i64,
    procs: i64,
    status: i64,
}

/// Checks `swf` (a replay's output) on a cluster of `capacity` processors. `Err` when the
/// file cannot be read at all.
pub fn check_schedule(swf: &str, capacity: u64, fcfs: bool) -> Result<Violations, String> {
    let rows = read(swf)?;
    let cap = i64::try_from(capacity).unwrap_or(i64::MAX);
    let mut out = Vec::new();
    let mut edges: Vec<(i64, i64)> = Vec::new();
    for r in &rows {
        if r.wait < 0 {
            if r.wait != -1 {
                out.push(format!("line {}: starts before it is submitted", r.line));
            } else if r.status != 5 {
                out.push(format!(
                    "line {}: never ran but status is {}",
                    r.line, r.status
                ));
            }
            continue;
        }
        if r.procs <= 0 || r.procs > cap {
            out.push(format!(
                "line {}: ran on {} processors of {cap}",
                r.line, r.procs
            ));
        }
        let start = r.submit.saturating_add(r.wait);
        edges.push((start, r.procs));
        edges.push((start.saturating_add(r.run), -r.procs));
    }
    // Ends before starts at the same instant.
    edges.sort_unstable();
    let mut used = 0i64;
    for (t, d) in edges {
        used = used.saturating_add(d);
        if used > cap {
            out.push(format!("at {t}: {used} processors in use of {cap}"));
        }
    }
    if fcfs {
        let mut order: Vec<&Row> = rows.iter().filter(|r| r.wait >= 0).collect();
        order.sort_by_key(|r| (r.submit, r.line));
        for w in order.windows(2) {
            let (a, b) = (w[0], w[1]);
            let (sa, sb) = (
                a.submit.saturating_add(a.wait),
                b.submit.saturating_add(b.wait),
            );
            if sb < sa {
                out.push(format!(
                    "line {} starts at {sb} before line {}, which arrived earlier, at {sa}",
                    b.line, a.line
                ));
            }
        }
    }
    Ok(out)
}

fn read(swf: &str) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for (i, l) in swf.lines().enumerate() {
        let t = l.trim();
        if t.is_empty() || t.starts_with(';') {
            continue;
        }
        let f: Vec<&str> = t.split_whitespace().collect();
        let num = |k: usize| -> Result<i64, String> {
            f.get(k - 1)
                .and_then(|s| s.parse::<i64>().ok())
                .ok_or_else(|| format!("line {}: field {k} is not an integer", i + 1))
        };
        let (run, requested) = (num(4)?, num(9)?);
        let planned = if requested > 0 { requested } else { run.max(1) };
        rows.push(Row {
            line: i + 1,
            submit: num(2)?,
            wait: num(3)?,
            run: if run >= 0 { run.min(planned) } else { planned },
            procs: if num(8)? > 0 { num(8)? } else { num(5)? },
            status: num(11)?,
        });
    }
    Ok(rows)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn line(submit: i64, wait: i64, run: i64, procs: i64, status: i64) -> String {
        format!(
            "1 {submit} {wait} {run} {procs} -1 -1 {procs} {run} -1 {status} 1 1 -1 1 1 -1 -1\n"
        )
    }

    #[test]
    fn accepts_a_valid_schedule() {
        let s = [
            line(0, 0, 10, 2, 1),
            line(0, 10, 5, 2, 1),
            line(1, -1, 5, 9, 5),
        ]
        .concat();
        assert_eq!(check_schedule(&s, 2, true).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn finds_each_kind_of_violation() {
        let over = [line(0, 0, 10, 2, 1), line(0, 5, 10, 1, 1)].concat();
        assert_eq!(check_schedule(&over, 2, false).unwrap().len(), 1);
        let early = line(5, -3, 10, 1, 1);
        assert_eq!(check_schedule(&early, 2, false).unwrap().len(), 1);
        let unmarked = line(5, -1, 10, 1, 1);
        assert_eq!(check_schedule(&unmarked, 2, false).unwrap().len(), 1);
        let order = [line(0, 10, 1, 1, 1), line(1, 0, 1, 1, 1)].concat();
        assert!(check_schedule(&order, 2, false).unwrap().is_empty());
        assert_eq!(check_schedule(&order, 2, true).unwrap().len(), 1);
        assert!(check_schedule("1 2 x\n", 2, false).is_err());
    }
}
