//! What `up` prints once everything is routable: where things are and what to type next.

use std::fmt::Write as _;
use std::fs;
use std::net::SocketAddr;
use std::path::Path;

use shardsched_proto::msg::QueueStatus;

use shardsched_client::StateDir;

/// The commands `up` suggests once it is up; the README's quick start shows the same ones
/// (a test checks it).
pub const HINT_COMMANDS: [&str; 5] = [
    "submit -N 2 -t 1m -- sleep 60",
    "jobs -a",
    "queue list",
    "resource list",
    "demo",
];

/// What `up` prints once everything is routable: where things are and what to type next.
pub(super) fn banner(
    exe: &Path,
    dir: &StateDir,
    (address, http): (SocketAddr, SocketAddr),
    user: &str,
    queues: &[QueueStatus],
    routes: &shardsched_proto::msg::RouteTable,
) -> String {
    let cmd = command_name(exe);
    let mut out = String::new();
    let _ = writeln!(out, "shardsched is up: coordinator at {address}");
    let mut table = shardsched_client::output::Table::new(&["  QUEUE", "STATE", "SHARD", "NODES"]);
    for q in queues {
        // The route carries the shard's own flags; the queue list may predate its first
        // status report.
        let route = routes.queue(&q.name);
        let started = route.map_or(q.started, |r| r.started);
        let enabled = route.map_or(q.enabled, |r| r.enabled);
        let mut state = if started { "started" } else { "stopped" }.to_owned();
        if !enabled {
            state.push_str(", disabled");
        }
        if routes.default_queue.as_deref() == Some(q.name.as_str()) {
            state.push_str(", default");
        }
        let shard = route.map_or_else(String::new, |r| r.address.to_string());
        table.row(vec![
            format!("  {}", q.name),
            state,
            shard,
            format!("{} defined", q.nodes_defined),
        ]);
    }
    out.push_str(&table.render());
    // The line the README's tour and the tests look for.
    let _ = writeln!(out, "status page: http://{http}/");
    let root = dir.root().display();
    let _ = writeln!(out, "state directory: {root}  (logs in {root}/logs)");
    let _ = writeln!(
        out,
        "clients use the admin certificate {user:?} in {root}/client"
    );
    let _ = writeln!(out);
    let _ = writeln!(out, "In another terminal:");
    let default_root = StateDir::default_root().ok();
    if default_root.as_deref() != Some(dir.root()) {
        let _ = writeln!(out, "  export SHARDSCHED_DIR={root}");
    } else {
        let _ = writeln!(
            out,
            "  export SHARDSCHED_DIR={root}   # the default: only needed if set elsewhere"
        );
    }
    for example in HINT_COMMANDS {
        let _ = writeln!(out, "  {cmd} {example}");
    }
    let _ = writeln!(out, "Ctrl-C stops everything.");
    out
}

/// `shardsched` when this executable is the one found on `PATH`, else its full path (as
/// under `cargo run`), so the printed commands work when pasted.
fn command_name(exe: &Path) -> String {
    let on_path = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|d| {
            let candidate = d.join("shardsched");
            match (fs::canonicalize(&candidate), fs::canonicalize(exe)) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            }
        })
    });
    if on_path {
        "shardsched".to_owned()
    } else {
        exe.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `up`'s printed hint and the README's quick start must not disagree (they once said
    /// `-N 1` and `-N 2`).
    #[test]
    fn the_readme_shows_the_commands_up_suggests() {
        let readme = include_str!("../../../../README.md");
        for command in HINT_COMMANDS {
            assert!(
                readme.lines().any(|line| line
                    .trim_start()
                    .starts_with(&format!("shardsched {command}"))),
                "the README's quick start does not show `shardsched {command}`"
            );
        }
    }
}
