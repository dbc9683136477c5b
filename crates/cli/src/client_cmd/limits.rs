//! Limits (docs/POLICIES.md, "Limits"), asked of the coordinator:
//!
//! ```text
//! limits                                     every limit (any user)
//! limits set NAME VALUE [--user U | --queue Q]   set one, or remove it with `none` (admin)
//! ```

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use shardsched_client::output::escaped;
use shardsched_proto::msg::client_coord::{Request, Response};
use shardsched_proto::msg::quota::{LimitKind, LimitScope, LimitTable};

use super::admin::ask;

/// `shardsched limits`.
#[derive(Args, Debug, Clone)]
pub struct LimitsArgs {
    #[command(subcommand)]
    command: Option<LimitsCommand>,
}

/// `limits` subcommands.
#[derive(Subcommand, Debug, Clone)]
enum LimitsCommand {
    /// Sets a limit: max_running, max_nodes, max_cores or max_pending, for every user (no
    /// option), one user (`--user`) or one queue (`--queue`); VALUE `none` removes it.
    /// Admin only.
    Set(SetArgs),
    /// Lists every limit (the default).
    List,
}

#[derive(Args, Debug, Clone)]
struct SetArgs {
    /// max_running, max_nodes, max_cores or max_pending.
    name: String,
    /// A count, or `none`.
    value: String,
    /// The user it applies to (over every queue).
    #[arg(long, conflicts_with = "queue")]
    user: Option<String>,
    /// The queue it applies to (all its users together).
    #[arg(long)]
    queue: Option<String>,
}

/// Runs `shardsched limits`.
pub fn main(args: &LimitsArgs) -> Result<()> {
    match &args.command {
        Some(LimitsCommand::Set(set)) => set_main(set),
        Some(LimitsCommand::List) | None => list_main(),
    }
}

fn set_main(args: &SetArgs) -> Result<()> {
    let kind = LimitKind::parse(&args.name).map_err(|r| anyhow::anyhow!("{}", r.message))?;
    let value = match args.value.as_str() {
        "none" => None,
        text => Some(text.parse::<u64>().map_err(|_| {
            anyhow::anyhow!(
                "VALUE {:?}: a count or `none`",
                text.escape_debug().to_string()
            )
        })?),
    };
    let scope = match (&args.user, &args.queue) {
        (Some(user), _) => LimitScope::User(user.clone()),
        (None, Some(queue)) => LimitScope::Queue(queue.clone()),
        (None, None) => LimitScope::EachUser,
    };
    let said = match value {
        Some(v) => format!("{kind} {v} for {scope}\n"),
        None => format!("{kind} removed for {scope}\n"),
    };
    ask(
        Request::SetLimit { kind, scope, value },
        |response| match response {
            Response::Done { .. } => Ok(escaped(said)),
            other => bail!("the coordinator answered limits set with {other:?}"),
        },
    )
}

fn list_main() -> Result<()> {
    ask(Request::Limits, |response| match response {
        Response::Limits(table) => Ok(limits_table(&table)),
        other => bail!("the coordinator answered limits with {other:?}"),
    })
}

/// The limits as a table: whom, what, how many.
fn limits_table(table: &LimitTable) -> String {
    if table.limits.is_empty() {
        return "no limits\n".to_owned();
    }
    let rows: Vec<(String, &str, u64)> = table
        .limits
        .iter()
        .map(|l| (escaped(l.scope.to_string()), l.kind.as_str(), l.value))
        .collect();
    let width = rows
        .iter()
        .map(|r| r.0.len())
        .max()
        .unwrap_or(0)
        .max("FOR".len());
    let mut out = format!("{:<width$}  {:<11}  VALUE\n", "FOR", "LIMIT");
    for (scope, kind, value) in rows {
        out.push_str(&format!("{scope:<width$}  {kind:<11}  {value}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_names_whom_each_limit_is_for() {
        let mut table = LimitTable::default();
        table
            .set(
                LimitKind::MaxRunning,
                LimitScope::User("alice".into()),
                Some(2),
            )
            .expect("set");
        table
            .set(
                LimitKind::MaxPending,
                LimitScope::Queue("batch".into()),
                Some(10),
            )
            .expect("set");
        let text = limits_table(&table);
        // Columns are padded to the widest entry: compare the words of each row.
        let rows: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert!(
            rows.contains(&vec!["user", "alice", "max_running", "2"]),
            "{text}"
        );
        assert!(
            rows.contains(&vec!["queue", "batch", "max_pending", "10"]),
            "{text}"
        );
        let widths: Vec<usize> = text
            .lines()
            .map(|l| l.find("max_").unwrap_or(0))
            .skip(1)
            .collect();
        assert!(
            widths.windows(2).all(|w| w[0] == w[1]),
            "columns line up: {text}"
        );
    }
}
