//! `up --agents`: one node agent per node of the cluster, each a supervised child like a
//! shard, so that one machine shows the whole system: every agent listens on a loopback
//! address of its own (`127.0.1.x`, the next block after 254 nodes) with port 0, writes the
//! address it got to its state directory (`$DIR/nodes/<node>/address`), and registers with
//! the coordinator, which tells the shards where it is.
//!
//! Their cgroups are under `shardsched/up-<digest of the state directory>/<node>` in the
//! unified hierarchy, apart from any other system's on the host; an agent that stops
//! removes its own when empty.
//!
//! Run by root, the agents run each job as the user who signed it, `--allow-root` included
//! (the local admin certificate is named after root, whose jobs these are); run by anyone
//! else, they run every job as that user, and say so.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use shardsched_client::Client;
use shardsched_proto::Role;
use shardsched_proto::msg::client_coord::{Request, Response};
use shardsched_proto::state_dir::ADDRESS_FILE;

use super::{POLL_INTERVAL, STARTUP_TIMEOUT, Supervisor};
use crate::cert_cmd;

/// A node agent child's label is this followed by its node's name.
pub const NODE_LABEL_PREFIX: &str = "node ";

/// The loopback address of the `index`-th node's agent: 127.0.1.1, 127.0.1.2, … 127.0.1.254,
/// then 127.0.2.1 and on (a /8 holds them all: 254 × 254 nodes).
pub fn agent_address(index: usize) -> Ipv4Addr {
    let block = u8::try_from(1 + index / 254).unwrap_or(u8::MAX);
    let host = u8::try_from(1 + index % 254).unwrap_or(u8::MAX);
    Ipv4Addr::new(127, 0, block, host)
}

impl Supervisor {
    /// Issues every node's agent its certificate and starts it.
    pub(super) async fn spawn_agents(
        &mut self,
        client: &Client,
        coordinator: SocketAddr,
    ) -> Result<()> {
        let nodes = cluster_nodes(client).await?;
        let as_root = rustix::process::geteuid().is_root();
        // This system's agents keep their cgroups apart from any other's on the host.
        let cgroups = shardsched_node::cgroup::unified_mount()
            .map(|mount| mount.join("shardsched").join(self.cgroup_name()));
        searchable_dir(&self.dir.nodes_dir())?;
        for (index, node) in nodes.iter().enumerate() {
            let dir = self.dir.node_dir(node);
            cert_cmd::issue(&self.dir.coordinator_dir(), Role::Node, node, &dir)?;
            // A stale address from an earlier run would be taken for this one's.
            super::remove_if_present(&dir.join(ADDRESS_FILE))?;
            let mut args = vec![
                "node".to_owned(),
                "--name".to_owned(),
                node.clone(),
                "--coordinator".to_owned(),
                coordinator.to_string(),
                "--state-dir".to_owned(),
                dir.to_string_lossy().into_owned(),
                "--listen".to_owned(),
                SocketAddr::from((agent_address(index), 0)).to_string(),
                "--up-lock".to_owned(),
                self.processes_lock.to_string_lossy().into_owned(),
                "--log-format".to_owned(),
                self.log_format.to_string(),
            ];
            if as_root {
                args.push("--allow-root".to_owned());
            }
            args.extend(self.agent_args.iter().cloned());
            if let Some(cgroups) = &cgroups {
                args.push("--cgroup-root".to_owned());
                args.push(cgroups.join(node).to_string_lossy().into_owned());
            }
            self.spawn_new(
                &format!("{NODE_LABEL_PREFIX}{node}"),
                &format!("node-{node}"),
                args,
            )?;
            self.agent_dirs.push(dir);
        }
        Ok(())
    }

    /// The name of this system's directory of cgroups: `up-` and a digest of the state
    /// directory's path.
    fn cgroup_name(&self) -> String {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.dir.root().hash(&mut hasher);
        format!("up-{:016x}", hasher.finish())
    }

    /// Waits until every agent wrote its address (it registers right after).
    pub(super) async fn wait_for_agents(&mut self) -> Result<()> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            self.check_started_children()?;
            let missing: Vec<&PathBuf> = self
                .agent_dirs
                .iter()
                .filter(|d| !d.join(ADDRESS_FILE).exists())
                .collect();
            if missing.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "{} node agents did not write their address within {} s (first: {})",
                    missing.len(),
                    STARTUP_TIMEOUT.as_secs(),
                    missing[0].display()
                );
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }
}

/// Every node of the cluster, as the coordinator lists them.
async fn cluster_nodes(client: &Client) -> Result<Vec<String>> {
    let mut nodes = Vec::new();
    let mut start = 0;
    loop {
        let request = Request::Resources { queue: None, start };
        match client
            .coordinator(&request)
            .await
            .context("asking the coordinator for the cluster's nodes")?
        {
            Response::Resources { nodes: page, next } => {
                nodes.extend(page.into_iter().map(|n| n.name));
                match next {
                    Some(next) => start = next,
                    None => return Ok(nodes),
                }
            }
            other => bail!("the coordinator answered a node list with {other:?}"),
        }
    }
}

/// Makes `dir` (the agents' state directories' parent) searchable but not readable by
/// others (0711): a job run as its user reaches its directory under its node's.
fn searchable_dir(dir: &std::path::Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711))
        .with_context(|| format!("setting the mode of {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_agent_has_its_own_loopback_address() {
        assert_eq!(agent_address(0), Ipv4Addr::new(127, 0, 1, 1));
        assert_eq!(agent_address(253), Ipv4Addr::new(127, 0, 1, 254));
        assert_eq!(agent_address(254), Ipv4Addr::new(127, 0, 2, 1));
    }
}
