//! Named failpoints for fault tests: `SHARDSCHED_FAILPOINTS=NAME=ACTION[;NAME=ACTION…]`.
//!
//! A process calls [`hit`] at each step worth crashing at (`coord.move.after_journal`,
//! `shard.release.before_answer`, …); with the variable unset every call is one relaxed
//! atomic load. Actions:
//!
//! | action | what happens at the point |
//! |---|---|
//! | `exit` | the process exits at once with [`FAILPOINT_EXIT_CODE`] (no destructors, no flush: as close to SIGKILL as a process can do to itself) |
//! | `abort` | `std::process::abort()` |
//! | `panic` | `panic!` in the calling thread, unwinding as a bug would (what stops the process is then the code around it: a coordinator's core task, a shard's loop) |
//! | `sleep(MS)` | the calling thread sleeps MS milliseconds (to widen a race) |
//! | `off` | nothing (lets a test list a point without arming it) |
//!
//! An action may be prefixed with `N*` to fire only at the N-th hit (`2*exit`: the second time
//! the point is reached), so a test can crash in the middle of a sequence. The list is read
//! once, at the first hit; a malformed entry is reported on stderr, naming it, and ignored
//! (a failpoint never takes a process down by being misspelt).
//!
//! Two more knobs make them usable under `shardsched up`, whose children all inherit the
//! same environment and are restarted when they die:
//!
//! - **Scope.** A process names itself once ([`set_scope`]: `coordinator`, or the shard's
//!   queue). An entry `SCOPE/NAME=ACTION` fires only in that process (`beta/shard.acquire.
//!   before_up=exit` crashes beta's shard, not alpha's); an entry without a scope fires in all.
//! - **Once.** With `SHARDSCHED_FAILPOINTS_ONCE_DIR=DIR`, a point fires at most once across
//!   processes: before firing it creates `DIR/<scope>.<name>` (create-new), and a point whose
//!   file exists does not fire. So the process `up` restarts after the crash runs through.
//!
//! Names are listed where they are hit; docs/MOVES.md lists the move protocol's.

pub mod mutant;

use std::collections::HashMap;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The environment variable holding the armed failpoints.
pub const FAILPOINTS_VAR: &str = "SHARDSCHED_FAILPOINTS";
/// With this variable set to a directory, each failpoint fires at most once (see above).
pub const FAILPOINTS_ONCE_DIR_VAR: &str = "SHARDSCHED_FAILPOINTS_ONCE_DIR";
/// Exit status of a process stopped by an `exit` failpoint.
pub const FAILPOINT_EXIT_CODE: i32 = 86;
/// Most failpoints one process arms.
pub const FAILPOINTS_MAX: usize = 64;

/// What an armed failpoint does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Exit at once with [`FAILPOINT_EXIT_CODE`].
    Exit,
    /// Abort.
    Abort,
    /// Panic (unwinding).
    Panic,
    /// Sleep this long.
    Sleep(Duration),
    /// Nothing.
    Off,
}

/// One armed failpoint: its action, the hit it fires at (`None`: every hit), and its hits so
/// far.
#[derive(Debug)]
struct Armed {
    action: Action,
    at_hit: Option<u64>,
    hits: AtomicU64,
}

static SCOPE: OnceLock<String> = OnceLock::new();

/// Names this process for scoped failpoints (`coordinator`, or a shard's queue). Call once,
/// before the first [`hit`]; later calls are ignored.
pub fn set_scope(scope: &str) {
    let _ = SCOPE.set(scope.to_owned());
}

fn armed() -> &'static HashMap<String, Armed> {
    static ARMED: OnceLock<HashMap<String, Armed>> = OnceLock::new();
    ARMED.get_or_init(|| match std::env::var(FAILPOINTS_VAR) {
        Ok(spec) => {
            let (points, errors) = parse(&spec);
            for e in errors {
                eprintln!("shardsched: ignoring failpoint in {FAILPOINTS_VAR}: {e}");
            }
            points
        }
        Err(_) => HashMap::new(),
    })
}

/// Whether any failpoint is armed in this process: a caller that must not block its
/// thread at a point (an async task) moves the [`hit`] elsewhere only then.
pub fn any_armed() -> bool {
    !armed().is_empty()
}

/// Reaches the failpoint `name`: does what `SHARDSCHED_FAILPOINTS` arms it to, else nothing.
/// `name` may be `format_args!(…)`: it is only formatted when some failpoint is armed, so an
/// unarmed process pays one load per point, not a string per point.
pub fn hit(name: impl std::fmt::Display) {
    let points = armed();
    if points.is_empty() {
        return;
    }
    let name = name.to_string();
    let name = name.as_str();
    let scope = SCOPE.get().map_or("", String::as_str);
    let scoped = format!("{scope}/{name}");
    let Some(point) = points.get(&scoped).or_else(|| points.get(name)) else {
        return;
    };
    let n = point.hits.fetch_add(1, Ordering::Relaxed) + 1;
    if point.at_hit.is_some_and(|at| at != n) {
        return;
    }
    if point.action != Action::Off
        && let Some(dir) = std::env::var_os(FAILPOINTS_ONCE_DIR_VAR)
    {
        let marker = std::path::Path::new(&dir).join(format!("{scope}.{name}"));
        let first = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&marker)
            .and_then(|f| f.sync_all());
        if first.is_err() {
            return;
        }
    }
    match point.action {
        Action::Exit => {
            eprintln!("shardsched: failpoint {name}: exit");
            std::process::exit(FAILPOINT_EXIT_CODE);
        }
        Action::Abort => {
            eprintln!("shardsched: failpoint {name}: abort");
            std::process::abort();
        }
        Action::Panic => panic!("failpoint {name}: panic"),
        Action::Sleep(d) => std::thread::sleep(d),
        Action::Off => {}
    }
}

/// Parses `NAME=ACTION;…` into armed points and the errors of the entries it skipped.
fn parse(spec: &str) -> (HashMap<String, Armed>, Vec<String>) {
    let mut points = HashMap::new();
    let mut errors = Vec::new();
    for entry in spec.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        if points.len() >= FAILPOINTS_MAX {
            errors.push(format!("{entry:?}: more than {FAILPOINTS_MAX} failpoints"));
            continue;
        }
        match parse_entry(entry) {
            Ok((name, armed)) => {
                points.insert(name, armed);
            }
            Err(e) => errors.push(format!("{entry:?}: {e}")),
        }
    }
    (points, errors)
}

fn parse_entry(entry: &str) -> Result<(String, Armed), String> {
    let (name, action) = entry
        .split_once('=')
        .ok_or("expected NAME=ACTION, e.g. coord.move.after_journal=exit")?;
    let name = name.trim();
    if name.is_empty() {
        return Err("empty failpoint name".to_owned());
    }
    let action = action.trim();
    let (at_hit, action) = match action.split_once('*') {
        Some((n, rest)) => {
            let n: u64 = n
                .trim()
                .parse()
                .map_err(|_| format!("{n:?} is not a hit count (N*ACTION)"))?;
            if n == 0 {
                return Err("hit counts start at 1".to_owned());
            }
            (Some(n), rest.trim())
        }
        None => (None, action),
    };
    let action = match action {
        "exit" => Action::Exit,
        "abort" => Action::Abort,
        "panic" => Action::Panic,
        "off" => Action::Off,
        other => {
            let ms = other
                .strip_prefix("sleep(")
                .and_then(|r| r.strip_suffix(')'))
                .and_then(|ms| ms.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    format!("unknown action {other:?} (exit, abort, panic, sleep(MS), off)")
                })?;
            Action::Sleep(Duration::from_millis(ms))
        }
    };
    Ok((
        name.to_owned(),
        Armed {
            action,
            at_hit,
            hits: AtomicU64::new(0),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_bad_entries_are_reported_not_fatal() {
        let (points, errors) = parse(
            "coord.move.after_journal=exit; shard.release.before_answer = 2*abort;\
             x=sleep(15);y=off;p=3*panic;bad;z=explode;w=0*exit;=exit",
        );
        assert_eq!(points["coord.move.after_journal"].action, Action::Exit);
        assert_eq!(points["coord.move.after_journal"].at_hit, None);
        assert_eq!(points["shard.release.before_answer"].action, Action::Abort);
        assert_eq!(points["shard.release.before_answer"].at_hit, Some(2));
        assert_eq!(points["x"].action, Action::Sleep(Duration::from_millis(15)));
        assert_eq!(points["y"].action, Action::Off);
        assert_eq!(points["p"].action, Action::Panic);
        assert_eq!(points["p"].at_hit, Some(3));
        assert_eq!(points.len(), 5);
        assert_eq!(errors.len(), 4, "{errors:?}");
        assert!(errors.iter().any(|e| e.contains("explode")));
    }
}
