//! Admin commands on queues, moves and node flags, all asked of the coordinator, which
//! journals each change before it answers (docs/MOVES.md, docs/JOURNAL.md):
//!
//! ```text
//! queue enable|disable NAME [--reason R]     accept submissions, or refuse new ones
//! queue start NAME [--take]                  schedule (--take: move in shared nodes)
//! queue stop NAME [--release-to Q]           stop scheduling; running jobs untouched
//! queue move HOSTLIST --from A --to B [--deadline D] [--dry-run [--json]]
//! queue move --cancel MOVE
//! queue moves [--json]                       every move and each node's step
//! resource drain HOSTLIST [--reason R]       no new work on the nodes, in their owner
//! resource undrain HOSTLIST
//! ```
//!
//! The certificate's role decides: users are refused by the coordinator, not here.

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use serde_json::Value;
use shardsched_client::output;
use shardsched_client::{check_locally, run, wire_error};
use shardsched_proto::msg::MoveId;
use shardsched_proto::msg::client_coord::{
    MoveRequest, QueueAction, QueueAdmin, Request, Response,
};
use shardsched_resource::{decode_hostlist, encode_hostlist, sort_hosts};

use super::move_view::{dry_run_json, dry_run_text, move_json, moves_table};

/// `queue` subcommands that change things (admin), and `queue moves`.
#[derive(Subcommand, Debug, Clone)]
pub enum QueueAdminCommand {
    /// Accepts submissions again. Admin only.
    Enable(QueueNameArgs),
    /// Refuses new submissions (queued and running jobs stay). Admin only.
    Disable(QueueReasonArgs),
    /// Starts scheduling with the nodes the queue owns now (`--take` also moves in those of
    /// its definition that started queues own); refused, naming them, when it would own
    /// nothing. Admin only.
    Start(QueueStartArgs),
    /// Stops scheduling: jobs keep being accepted and wait; running jobs are untouched.
    /// Admin only.
    Stop(QueueStopArgs),
    /// Moves nodes from one queue to another while both run (or cancels a move). Admin
    /// only.
    Move(MoveArgs),
    /// Every move in progress and the recent finished ones, with each node's step.
    Moves(MovesArgs),
}

/// `resource` subcommands for drain (admin).
#[derive(Subcommand, Debug, Clone)]
pub enum ResourceAdminCommand {
    /// Takes nodes out of scheduling in their owning queue, without moving them; running
    /// jobs finish. The flag stays with the node across restarts and moves. Admin only.
    Drain(DrainArgs),
    /// Undoes `resource drain`. Admin only.
    Undrain(UndrainArgs),
}

/// A queue name.
#[derive(Args, Debug, Clone)]
pub struct QueueNameArgs {
    /// The queue.
    pub name: String,
}

/// `queue disable`.
#[derive(Args, Debug, Clone)]
pub struct QueueReasonArgs {
    /// The queue.
    pub name: String,
    /// Why (kept with the queue's state).
    #[arg(long, short = 'r', default_value = "")]
    pub reason: String,
}

/// `queue start`.
#[derive(Args, Debug, Clone)]
pub struct QueueStartArgs {
    /// The queue.
    pub name: String,
    /// Move in the nodes of its definition that started queues own.
    #[arg(long)]
    pub take: bool,
}

/// `queue stop`.
#[derive(Args, Debug, Clone)]
pub struct QueueStopArgs {
    /// The queue.
    pub name: String,
    /// Move the queue's nodes that are in this queue's definition to it (nodes still on
    /// their way in go back to their donor).
    #[arg(long, value_name = "QUEUE")]
    pub release_to: Option<String>,
}

/// `queue move`.
#[derive(Args, Debug, Clone)]
pub struct MoveArgs {
    /// The nodes, as a hostlist (`node[0-3,7]`).
    #[arg(value_name = "HOSTLIST", required_unless_present = "cancel")]
    pub nodes: Option<String>,
    /// The queue that owns them now.
    #[arg(long, required_unless_present = "cancel")]
    pub from: Option<String>,
    /// The queue to give them to (they must be in its definition).
    #[arg(long, required_unless_present = "cancel")]
    pub to: Option<String>,
    /// Past this duration (`90s`, `30m`, `2h`; a bare number is seconds), the donor's jobs
    /// still holding the nodes are cancelled.
    #[arg(long, value_name = "DURATION")]
    pub deadline: Option<String>,
    /// Only say when the nodes would be free and which pending jobs could never run;
    /// change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Cancel this move instead: its nodes not yet released go back to the donor.
    #[arg(long, value_name = "MOVE", conflicts_with_all = ["nodes", "from", "to", "deadline", "dry_run"])]
    pub cancel: Option<u64>,
    /// With `--dry-run`: print the report as JSON (times in ms since the Unix epoch).
    #[arg(long, requires = "dry_run")]
    pub json: bool,
}

/// `queue moves`.
#[derive(Args, Debug, Clone)]
pub struct MovesArgs {
    /// Print JSON (with each node's step times, ms since the Unix epoch).
    #[arg(long)]
    pub json: bool,
    /// Only this move (its id, as `queue move` printed it); nothing when the coordinator
    /// no longer remembers it.
    #[arg(long, value_name = "MOVE")]
    pub id: Option<u64>,
}

/// `resource drain`.
#[derive(Args, Debug, Clone)]
pub struct DrainArgs {
    /// The nodes, as a hostlist.
    #[arg(value_name = "HOSTLIST")]
    pub nodes: String,
    /// Why (shown by `resource list`).
    #[arg(long, short = 'r', default_value = "")]
    pub reason: String,
}

/// `resource undrain`.
#[derive(Args, Debug, Clone)]
pub struct UndrainArgs {
    /// The nodes, as a hostlist.
    #[arg(value_name = "HOSTLIST")]
    pub nodes: String,
}

/// Runs a `queue` admin subcommand.
pub fn queue_main(command: &QueueAdminCommand) -> Result<()> {
    match command {
        QueueAdminCommand::Enable(a) => queue_state(&a.name, QueueAction::Enable, "", None),
        QueueAdminCommand::Disable(a) => {
            queue_state(&a.name, QueueAction::Disable, &a.reason, None)
        }
        QueueAdminCommand::Start(a) => {
            queue_state(&a.name, QueueAction::Start { take: a.take }, "", None)
        }
        QueueAdminCommand::Stop(a) => {
            queue_state(&a.name, QueueAction::Stop, "", a.release_to.as_deref())
        }
        QueueAdminCommand::Move(a) => move_main(a),
        QueueAdminCommand::Moves(a) => moves_main(a),
    }
}

/// Runs a `resource` admin subcommand.
pub fn resource_main(command: &ResourceAdminCommand) -> Result<()> {
    let (hostlist, drained, reason) = match command {
        ResourceAdminCommand::Drain(a) => (&a.nodes, true, a.reason.as_str()),
        ResourceAdminCommand::Undrain(a) => (&a.nodes, false, ""),
    };
    let nodes = hostlist_nodes(hostlist)?;
    let request = Request::SetNodeDrain {
        nodes: nodes.clone(),
        drained,
        reason: reason.to_owned(),
    };
    ask(request, |response| match response {
        Response::Done { .. } => {
            let word = if drained { "drained" } else { "undrained" };
            Ok(format!("{} {word}\n", encode_hostlist(&nodes)))
        }
        other => bail!("the coordinator answered resource drain with {other:?}"),
    })
}

fn queue_state(
    queue: &str,
    action: QueueAction,
    reason: &str,
    release_to: Option<&str>,
) -> Result<()> {
    let request = Request::QueueAdmin(QueueAdmin {
        queue: queue.to_owned(),
        action,
        reason: reason.to_owned(),
        release_to: release_to.map(str::to_owned),
    });
    let word = match action {
        QueueAction::Enable => "enabled",
        QueueAction::Disable => "disabled",
        QueueAction::Start { .. } => "started",
        QueueAction::Stop => "stopped",
    };
    let done = |move_id: Option<MoveId>| match move_id {
        Some(MoveId(id)) => format!("{queue} {word}; move {id} carries its nodes\n"),
        None => format!("{queue} {word}\n"),
    };
    ask(request, |response| match response {
        Response::Done { move_id } => Ok(done(move_id)),
        // Done, with what the admin should know beyond it.
        Response::Reconfigured { changes, move_id } => {
            let mut text = done(move_id);
            for line in changes {
                text.push_str(&format!("  {line}\n"));
            }
            Ok(text)
        }
        other => bail!("the coordinator answered queue {word} with {other:?}"),
    })
}

fn move_main(args: &MoveArgs) -> Result<()> {
    if let Some(id) = args.cancel {
        return ask(
            Request::CancelMove {
                move_id: MoveId(id),
            },
            |response| match response {
                Response::Cancelled { returned } if returned.is_empty() => Ok(format!(
                    "move {id} cancelled; every node was already released, nothing returns\n"
                )),
                Response::Cancelled { returned } => Ok(format!(
                    "move {id} cancelled; {} go back to the donor\n",
                    encode_hostlist(&returned)
                )),
                other => bail!("the coordinator answered the cancel with {other:?}"),
            },
        );
    }
    let (Some(hostlist), Some(from), Some(to)) = (&args.nodes, &args.from, &args.to) else {
        bail!("queue move needs HOSTLIST, --from and --to (or --cancel MOVE)");
    };
    let nodes = hostlist_nodes(hostlist)?;
    let deadline_ms = match &args.deadline {
        None => None,
        Some(text) => {
            let deadline = crate::duration_arg::seconds_or_units(text)
                .map_err(|e| anyhow::anyhow!("--deadline: {e}"))?;
            if deadline.is_zero() {
                bail!("--deadline {text:?}: must be more than zero");
            }
            Some(deadline.as_millis() as u64)
        }
    };
    let hosts = {
        let mut sorted = nodes.clone();
        sort_hosts(&mut sorted);
        encode_hostlist(&sorted)
    };
    let request = Request::Move(MoveRequest {
        nodes,
        from: from.clone(),
        to: to.clone(),
        deadline_ms,
        dry_run: args.dry_run,
    });
    ask(request, |response| match response {
        Response::Done {
            move_id: Some(MoveId(id)),
        } => Ok(format!(
            "move {id} started: {hosts} from {from} to {to} (`shardsched queue moves` follows it)\n"
        )),
        Response::DryRun(report) if args.json => Ok(format!("{}\n", dry_run_json(&report))),
        Response::DryRun(report) => Ok(dry_run_text(&report, output::now_ms())),
        other => bail!("the coordinator answered queue move with {other:?}"),
    })
}

fn moves_main(args: &MovesArgs) -> Result<()> {
    let json = args.json;
    let request = match args.id {
        Some(id) => Request::MoveOf {
            move_id: MoveId(id),
        },
        None => Request::Moves,
    };
    ask(request, |response| match response {
        Response::Moves { moves, truncated } => {
            if truncated {
                eprintln!("shardsched: too many moves for one answer; the newest are left out");
            }
            if json {
                let rows: Vec<Value> = moves.iter().map(move_json).collect();
                Ok(format!("{}\n", Value::Array(rows)))
            } else {
                Ok(moves_table(&moves, output::now_ms()))
            }
        }
        other => bail!("the coordinator answered queue moves with {other:?}"),
    })
}

/// Sends one request to the coordinator and prints what `show` makes of the answer.
pub(crate) fn ask(request: Request, show: impl FnOnce(Response) -> Result<String>) -> Result<()> {
    check_locally(&request)?;
    let response = run(|client| async move {
        client
            .coordinator(&request)
            .await
            .map_err(|e| wire_error(e, "coordinator"))
    })?;
    output::emit(&show(response)?)
}

fn hostlist_nodes(hostlist: &str) -> Result<Vec<String>> {
    let nodes =
        decode_hostlist(hostlist).map_err(|e| anyhow::anyhow!("HOSTLIST {hostlist:?}: {e}"))?;
    if nodes.is_empty() {
        bail!("HOSTLIST {hostlist:?} names no node");
    }
    Ok(nodes)
}
