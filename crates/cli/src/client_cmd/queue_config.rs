//! `shardsched queue add|remove|update` and `shardsched reload`: run-time changes of the
//! coordinator's queue table (admin only; docs/CONFIG.md, "Runtime changes").
//!
//! The flags mirror the configuration file's keys; the policies are checked here (they
//! travel typed), the other values by the coordinator with the file's rules, so a refusal
//! reads like a configuration error. Under `up`, an added
//! queue's shard is started, a removed queue's shard stopped, and a shard whose queue
//! changed restarts with its jobs (from its journal).

use anyhow::{Result, bail};
use clap::Args;
use shardsched_client::{check_locally, output, run, wire_error};
use shardsched_proto::msg::client_coord::{QueueSpec, Request, Response};
use shardsched_proto::msg::{MatchPolicy, QueuePolicy};

/// Definition, policies and limits, as in a `[queues.NAME]` table.
#[derive(Args, Debug, Clone, Default)]
pub struct QueueFlags {
    /// The definition: nodes the queue may own, as a hostlist (`node[0-15]`).
    #[arg(long, value_name = "HOSTLIST")]
    pub nodes: Option<String>,
    /// Queue policy: fcfs, easy, hybrid, conservative [add: fcfs].
    #[arg(long, value_name = "P", value_parser = QueuePolicy::parse)]
    pub policy: Option<QueuePolicy>,
    /// Match policy: first, firstnodex, high, low, hinode, lonode, hinodex, lonodex,
    /// variation, or knobs as `policy=low stop_on_1_matches=true` [add: first].
    #[arg(long, value_name = "M", value_parser = MatchPolicy::parse)]
    pub match_policy: Option<MatchPolicy>,
    /// Pending jobs considered per scheduling cycle, 0 for all [add: 32].
    #[arg(long, value_name = "N")]
    pub queue_depth: Option<u32>,
    /// Reservations made by `hybrid`, 0 for all considered [add: 64].
    #[arg(long, value_name = "N")]
    pub reservation_depth: Option<u32>,
    /// Duration of a job that names none: 90, 30m, 1.5h, 2d [add: 1h, capped at the max].
    #[arg(long, value_name = "D")]
    pub default_duration: Option<String>,
    /// Longest duration accepted; 0 or `unlimited` for none [add: unlimited].
    #[arg(long, value_name = "D")]
    pub max_duration: Option<String>,
}

/// Flags of `queue add`.
#[derive(Args, Debug, Clone)]
pub struct AddArgs {
    /// The new queue's name (also its shard's certificate name).
    pub name: String,
    #[command(flatten)]
    pub flags: QueueFlags,
    /// Add it stopped: it accepts jobs but schedules none until `queue start`.
    #[arg(long)]
    pub stopped: bool,
}

/// Flags of `queue update`.
#[derive(Args, Debug, Clone)]
pub struct UpdateArgs {
    /// The queue.
    pub name: String,
    #[command(flatten)]
    pub flags: QueueFlags,
    /// Move the nodes the new `--nodes` leaves out, and the queue owns, to this queue
    /// (each once its jobs end); without it such an update is refused.
    #[arg(long, value_name = "Q", requires = "nodes")]
    pub give_to: Option<String>,
}

/// Flags of `queue remove`.
#[derive(Args, Debug, Clone)]
pub struct RemoveArgs {
    /// The queue.
    pub name: String,
    /// Move the queue's nodes to this queue first; the queue is removed once they are there.
    #[arg(long, value_name = "Q")]
    pub give_to: Option<String>,
}

/// Flags of `shardsched reload`.
#[derive(Args, Debug, Clone)]
pub struct ReloadArgs {}

impl QueueFlags {
    fn spec(&self, name: &str, stopped: bool) -> QueueSpec {
        QueueSpec {
            name: name.to_owned(),
            nodes: self.nodes.clone(),
            policy: self.policy,
            match_policy: self.match_policy,
            queue_depth: self.queue_depth,
            reservation_depth: self.reservation_depth,
            default_duration: self.default_duration.clone(),
            max_duration: self.max_duration.clone(),
            stopped,
            give_to: None,
        }
    }

    fn is_empty(&self) -> bool {
        self.spec("", false) == QueueSpec::default()
    }
}

/// `queue add NAME --nodes HOSTLIST …`.
pub fn add_main(args: &AddArgs) -> Result<()> {
    if args.flags.nodes.is_none() {
        bail!(
            "queue add {}: --nodes HOSTLIST is required (the queue's definition)",
            args.name
        );
    }
    change(
        Request::AddQueue(args.flags.spec(&args.name, args.stopped)),
        "queue add",
    )
}

/// `queue update NAME [flags]`.
pub fn update_main(args: &UpdateArgs) -> Result<()> {
    if args.flags.is_empty() {
        bail!(
            "queue update {}: nothing to change (give --nodes, --policy, …)",
            args.name
        );
    }
    let spec = QueueSpec {
        give_to: args.give_to.clone(),
        ..args.flags.spec(&args.name, false)
    };
    change(Request::UpdateQueue(spec), "queue update")
}

/// `queue remove NAME [--give-to Q]`.
pub fn remove_main(args: &RemoveArgs) -> Result<()> {
    let request = Request::RemoveQueue {
        queue: args.name.clone(),
        give_to: args.give_to.clone(),
    };
    change(request, "queue remove")
}

/// `shardsched reload`.
pub fn reload_main(_args: &ReloadArgs) -> Result<()> {
    change(Request::Reload, "reload")
}

/// Sends one change and prints what the coordinator says it did.
fn change(request: Request, what: &'static str) -> Result<()> {
    check_locally(&request)?;
    run(|client| async move {
        let answer = client
            .coordinator(&request)
            .await
            .map_err(|e| wire_error(e, "coordinator"))?;
        match answer {
            Response::Reconfigured { changes, move_id } => {
                let mut text = String::new();
                for line in changes {
                    text.push_str(&shardsched_proto::text::escape_control(&line));
                    text.push('\n');
                }
                if let Some(id) = move_id {
                    text.push_str(&format!("move {} started (queue moves shows it)\n", id.0));
                }
                output::emit(&text)
            }
            other => bail!("the coordinator answered {what} with {other:?}"),
        }
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        flags: QueueFlags,
    }

    #[test]
    fn policies_are_read_typed_and_an_unknown_one_is_refused_naming_the_known() {
        let read = Flags::try_parse_from(["q", "--policy", "hybrid", "--match-policy", "lonode"])
            .expect("known policies");
        assert_eq!(read.flags.policy, Some(QueuePolicy::Hybrid));
        assert_eq!(read.flags.match_policy, Some(MatchPolicy::LoNode));
        let refused = Flags::try_parse_from(["q", "--policy", "lifo"])
            .err()
            .expect("an unknown policy")
            .to_string();
        assert!(
            refused.contains(
                "unknown queue policy \"lifo\" (expected fcfs, easy, hybrid or conservative)"
            ),
            "{refused}"
        );
        let refused = Flags::try_parse_from(["q", "--match-policy", "best"])
            .err()
            .expect("an unknown match policy")
            .to_string();
        assert!(
            refused.contains("unknown match policy \"best\""),
            "{refused}"
        );
    }
}
