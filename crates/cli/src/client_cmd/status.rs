//! `shardsched queue list` and `shardsched resource list`: the coordinator's cluster-wide
//! views (it holds node ownership, and aggregates the shards' status reports).

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use serde_json::Value;
use shardsched_client::{check_locally, output, run, wire_error};
use shardsched_proto::msg::client_coord::{Request, Response};
use shardsched_resource::{decode_hostlist, encode_hostlist};

use super::cluster_view;

/// Flags of `shardsched queue`.
#[derive(Args, Debug, Clone)]
pub struct QueueArgs {
    #[command(subcommand)]
    pub command: QueueCommand,
}

/// What `shardsched queue` does.
#[derive(Subcommand, Debug, Clone)]
pub enum QueueCommand {
    /// Every queue: enabled/started, policies, nodes, jobs (`-l`: definitions and owned
    /// nodes). `*` marks the default queue.
    List(ListArgs),
    /// Adds a queue at run time: `queue add NAME --nodes HOSTLIST [--policy P] …`. Admin
    /// only.
    Add(super::queue_config::AddArgs),
    /// Removes a queue: refused while it has jobs or owns nodes (`--give-to Q` moves its
    /// nodes first). Admin only.
    Remove(super::queue_config::RemoveArgs),
    /// Changes a queue's definition, policies, depths or durations: its shard takes them
    /// as it runs, and restarts with its jobs for a new match policy or durations. Admin
    /// only.
    Update(super::queue_config::UpdateArgs),
    #[command(flatten)]
    Admin(super::admin::QueueAdminCommand),
}

/// Flags of `shardsched resource`.
#[derive(Args, Debug, Clone)]
pub struct ResourceArgs {
    #[command(subcommand)]
    pub command: ResourceCommand,
}

/// What `shardsched resource` does.
#[derive(Subcommand, Debug, Clone)]
pub enum ResourceCommand {
    /// Nodes with their owning queue and state (up, down, drained, draining, outgoing,
    /// incoming).
    List(ResourceListArgs),
    /// Marks nodes down (failed): jobs running on them fail, or are requeued when submitted
    /// with `--requeue`, and the nodes leave scheduling until marked up. Admin only.
    Down(NodeStateArgs),
    /// Marks nodes up again after `resource down`. Admin only.
    Up(NodeStateArgs),
    #[command(flatten)]
    Admin(super::admin::ResourceAdminCommand),
}

/// Flags of `resource down` and `resource up`.
#[derive(Args, Debug, Clone)]
pub struct NodeStateArgs {
    /// The nodes, as a hostlist (`node[0-3,7]`).
    #[arg(value_name = "HOSTLIST")]
    pub nodes: String,
    /// Why (shown by `resource list` and in the reason of the jobs that fail).
    #[arg(long, short = 'r', default_value = "")]
    pub reason: String,
}

/// Flags of `queue list`.
#[derive(Args, Debug, Clone)]
pub struct ListArgs {
    /// Print JSON instead of a table (with each queue's `definition` and `owned` nodes).
    #[arg(long)]
    pub json: bool,
    /// Add each queue's definition and owned nodes (hostlists) to the table.
    #[arg(long, short = 'l', short_alias = 'o')]
    pub long: bool,
}

/// Flags of `resource list`.
#[derive(Args, Debug, Clone)]
pub struct ResourceListArgs {
    /// Only this queue's nodes.
    #[arg(short = 'q', long)]
    pub queue: Option<String>,
    /// One row per node, with its free cores and GPUs.
    #[arg(short = 'l', long)]
    pub long: bool,
    /// Print a JSON list of nodes instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `shardsched queue …`.
pub fn queue_main(args: &QueueArgs) -> Result<()> {
    let list = match &args.command {
        QueueCommand::List(list) => list,
        QueueCommand::Add(add) => return super::queue_config::add_main(add),
        QueueCommand::Remove(remove) => return super::queue_config::remove_main(remove),
        QueueCommand::Update(update) => return super::queue_config::update_main(update),
        QueueCommand::Admin(command) => return super::admin::queue_main(command),
    };
    run(|client| async move {
        let routes = client.routes().await?;
        let queues = match client
            .coordinator(&Request::Queues)
            .await
            .map_err(|e| wire_error(e, "coordinator"))?
        {
            Response::Queues(queues) => queues,
            other => bail!("the coordinator answered queue list with {other:?}"),
        };
        let default = routes.default_queue.as_deref();
        if list.json {
            let rows: Vec<Value> = queues
                .iter()
                .map(|q| cluster_view::queue_json(q, Some(q.name.as_str()) == default))
                .collect();
            output::emit(&format!("{}\n", Value::Array(rows)))
        } else {
            output::emit(&cluster_view::queues_table(&queues, default, list.long))
        }
    })
}

/// `shardsched resource …`.
pub fn resource_main(args: &ResourceArgs) -> Result<()> {
    let list = match &args.command {
        ResourceCommand::List(list) => list,
        ResourceCommand::Down(nodes) => return node_state_main(nodes, true),
        ResourceCommand::Up(nodes) => return node_state_main(nodes, false),
        ResourceCommand::Admin(command) => return super::admin::resource_main(command),
    };
    run(|client| async move {
        let nodes = client.resources(list.queue.as_deref()).await?;
        if list.json {
            let rows: Vec<Value> = nodes.iter().map(cluster_view::node_json).collect();
            output::emit(&format!("{}\n", Value::Array(rows)))
        } else {
            output::emit(&cluster_view::resources_table(&nodes, list.long))
        }
    })
}

/// `shardsched resource down|up HOSTLIST`: asks the coordinator, which forwards to the
/// shards owning the nodes; it answers once they applied it.
fn node_state_main(args: &NodeStateArgs, down: bool) -> Result<()> {
    let nodes = decode_hostlist(&args.nodes)
        .map_err(|e| anyhow::anyhow!("HOSTLIST {:?}: {e}", args.nodes))?;
    if nodes.is_empty() {
        bail!("HOSTLIST {:?} names no node", args.nodes);
    }
    if !down && !args.reason.is_empty() {
        bail!("--reason goes with `resource down`, not `resource up`");
    }
    let request = Request::SetNodeState {
        nodes: nodes.clone(),
        down,
        reason: args.reason.clone(),
    };
    check_locally(&request)?;
    run(|client| async move {
        match client
            .coordinator(&request)
            .await
            .map_err(|e| wire_error(e, "coordinator"))?
        {
            Response::Done { .. } => {}
            other => bail!("the coordinator answered resource down/up with {other:?}"),
        }
        let word = if down { "down" } else { "up" };
        output::emit(&format!("{} {word}\n", encode_hostlist(&nodes)))
    })
}
