//! Move commands as the coordinator would send them, and the core a restarted shard
//! builds from its journal and the coordinator's assignment.

use std::collections::BTreeMap;

use shardsched_proto::msg::{Generation, NodeGen};
use shardsched_shard::ShardCore;
use shardsched_shard::journal;

use crate::model::{CLUSTER, Model, core_options, queue_config};
use crate::{MoveOp, NODES};

impl Model {
    /// A generation for a command about node `i`: the current one moved by `delta` (a
    /// positive delta is a new generation, as the coordinator would hand out).
    fn generation(&mut self, i: usize, delta: i8) -> Generation {
        let g = match delta {
            d if d > 0 => {
                self.gens[i] += 1;
                self.gens[i]
            }
            0 => self.gens[i],
            _ => self.gens[i].saturating_sub(1),
        };
        Generation(g)
    }

    pub(crate) fn move_step(&mut self, m: &MoveOp) {
        use shardsched_proto::msg::MoveId;
        use shardsched_proto::msg::coord_shard::{
            Acquire, CancelJobs, Incoming, IncomingNode, Reclaim, Release, Withdraw,
        };
        let ng = |node: usize, generation: Generation| NodeGen {
            node: NODES[node].to_owned(),
            generation,
        };
        let now = self.now;
        // Each command goes where the coordinator would send it: Release to the owner,
        // Incoming/Withdraw to a shard that does not own the node, Acquire to the
        // recipient, Reclaim to the donor.
        use shardsched_shard::nodes::Holding as H;
        let holding = |core: &ShardCore, i: usize| core.nodes().entry(NODES[i]).holding;
        let fits = match *m {
            MoveOp::Release { .. } | MoveOp::CancelJobs { .. } => true,
            MoveOp::Incoming { node, .. } | MoveOp::Withdraw { node, .. } => {
                matches!(holding(&self.core, node), H::NotOwned | H::Incoming { .. })
            }
            MoveOp::Acquire { node, .. } => {
                !matches!(holding(&self.core, node), H::Outgoing { .. })
            }
            MoveOp::Reclaim { node, .. } => {
                !matches!(holding(&self.core, node), H::Incoming { .. })
            }
        };
        if !fits {
            return;
        }
        match *m {
            MoveOp::Release { mask, delta } => {
                let owners: Vec<usize> = (0..NODES.len())
                    .filter(|i| mask & (1 << i) != 0)
                    .filter(|&i| matches!(holding(&self.core, i), H::Owned | H::Outgoing { .. }))
                    .collect();
                let nodes: Vec<NodeGen> = owners
                    .into_iter()
                    .map(|i| {
                        let g = self.generation(i, delta);
                        ng(i, g)
                    })
                    .collect();
                let move_id = MoveId(nodes.iter().map(|n| n.generation.0).max().unwrap_or(0));
                self.core.handle_release(now, &Release { move_id, nodes });
            }
            MoveOp::Incoming { node, delta, in_ms } => {
                let g = self.generation(node, delta);
                self.core.handle_incoming(
                    now,
                    &Incoming {
                        move_id: MoveId(g.0),
                        nodes: vec![IncomingNode {
                            node: ng(node, g),
                            expected_free_ms: in_ms.map(|d| now + d),
                        }],
                    },
                );
            }
            MoveOp::Acquire { node, delta } => {
                let g = self.generation(node, delta);
                self.core.handle_acquire(
                    now,
                    &Acquire {
                        move_id: MoveId(g.0),
                        nodes: vec![ng(node, g)],
                        flags: BTreeMap::new(),
                    },
                );
            }
            MoveOp::Reclaim { node, delta } => {
                let g = self.generation(node, delta);
                self.core.handle_reclaim(
                    now,
                    &Reclaim {
                        move_id: MoveId(g.0),
                        nodes: vec![ng(node, g)],
                    },
                );
            }
            MoveOp::Withdraw { node, delta } => {
                let g = self.generation(node, delta);
                self.core.handle_withdraw(
                    now,
                    &Withdraw {
                        move_id: MoveId(g.0),
                        nodes: vec![ng(node, g)],
                    },
                );
            }
            MoveOp::CancelJobs { node } => {
                let entry = self.core.nodes().entry(NODES[node]);
                let move_id = match entry.holding {
                    shardsched_shard::nodes::Holding::Outgoing { move_id } => move_id,
                    _ => MoveId(entry.generation.0),
                };
                self.core.handle_cancel_jobs(
                    now,
                    &CancelJobs {
                        move_id,
                        nodes: vec![ng(node, entry.generation)],
                    },
                );
            }
        }
    }

    /// The core a restarted shard builds: the coordinator's assignment lists what the move
    /// machine owned and received (at their generations), and the journal brings back the
    /// rest.
    pub(crate) fn restored_core(&self, restored: &journal::Restored) -> ShardCore {
        use shardsched_proto::msg::coord_shard::IncomingNode;
        use shardsched_proto::msg::shard_coord::Assignment;
        use shardsched_proto::msg::{ClusterDescription, ClusterFormat};
        use shardsched_shard::nodes::Holding;
        let mut owned = Vec::new();
        let mut incoming = Vec::new();
        for (name, e) in self.core.nodes().entries() {
            let node = NodeGen {
                node: name.to_owned(),
                generation: e.generation,
            };
            match e.holding {
                Holding::Owned => owned.push(node),
                Holding::Incoming {
                    move_id,
                    expected_free_ms,
                } => incoming.push((
                    move_id,
                    IncomingNode {
                        node,
                        expected_free_ms,
                    },
                )),
                _ => {}
            }
        }
        // The coordinator knows the admin flags and hands them back.
        let mut flags: BTreeMap<String, shardsched_proto::msg::NodeFlags> = BTreeMap::new();
        for (name, reason) in self.core.down_nodes() {
            flags.entry(name.clone()).or_default().down = Some(reason.clone());
        }
        for (name, reason) in self.core.drained_nodes() {
            flags.entry(name.clone()).or_default().drained = Some(reason.clone());
        }
        let assignment = Assignment {
            limits: Default::default(),
            allowances: Vec::new(),
            fairshare: None,
            generator_id: 3,
            cluster: ClusterDescription {
                format: ClusterFormat::Spec,
                text: CLUSTER.into(),
                load_allowlist: Vec::new(),
            },
            queue: queue_config(self.policy),
            owned,
            incoming,
            flags,
        };
        let (core, _) =
            ShardCore::restored(&assignment, core_options(), self.now, restored).expect("restore");
        core
    }
}
