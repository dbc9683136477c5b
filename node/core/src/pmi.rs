//! PMI-1's simple wire protocol, as a pure state machine: what a job's tasks on one node say
//! to their supervisor on `PMI_FD`, and what it answers. MPICH's `simple_pmi.c` speaks it;
//! so does Flux's job shell, whose behaviour this follows.
//!
//! ```text
//! task → cmd=init pmi_version=1 pmi_subversion=1     ← cmd=response_to_init … rc=0
//!        cmd=get_maxes                               ← cmd=maxes kvsname_max=… keylen_max=… vallen_max=…
//!        cmd=get_my_kvsname                          ← cmd=my_kvsname kvsname=…
//!        cmd=put kvsname=K key=k value=v             ← cmd=put_result rc=0 msg=success
//!        cmd=barrier_in                              ← (once every task of the job is in) cmd=barrier_out
//!        cmd=get kvsname=K key=k                     ← cmd=get_result rc=0 msg=success value=v
//!        cmd=finalize                                ← cmd=finalize_ack
//! ```
//!
//! A barrier spans the job's nodes: once every local task entered it, [`PmiNode`] hands the
//! node's new puts out as a [`Fence`]; the agents merge every node's ([`FenceCollector`], on
//! the job's first node) and each node's supervisor gets the whole space back
//! ([`PmiNode::fence_done`]), which lets its tasks out.

use std::collections::{BTreeMap, BTreeSet};

use shardsched_wire::limits::{PMI_KEY_BYTES_MAX, PMI_KVS_BYTES_MAX, PMI_VALUE_BYTES_MAX};

/// Longest key-value space name, in bytes (MPICH's default).
pub const KVSNAME_BYTES_MAX: usize = 256;

/// Longest line a task may send, in bytes: a put's key and value and the words around them.
pub const PMI_LINE_BYTES_MAX: usize = PMI_KEY_BYTES_MAX + PMI_VALUE_BYTES_MAX + 256;

/// A node's puts of one barrier, for the other nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fence {
    /// Which barrier (0, 1, …).
    pub epoch: u32,
    /// The pairs put on this node since the previous barrier.
    pub kvs: Vec<(String, String)>,
}

/// What the supervisor must do after a line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PmiOutput {
    /// Send this line (with its newline) to the task of this rank.
    Reply {
        /// The task's rank.
        rank: u32,
        /// The line.
        line: String,
    },
    /// Every local task entered the barrier: exchange this node's puts with the others.
    Fence(Fence),
    /// A task called `abort`: the job ends with this message.
    Abort {
        /// The task's rank.
        rank: u32,
        /// Its message.
        message: String,
    },
}

/// One node's share of a job's PMI: its tasks' ranks, the key-value space, the barrier.
#[derive(Clone, Debug)]
pub struct PmiNode {
    kvsname: String,
    size: u32,
    local: BTreeSet<u32>,
    kvs: BTreeMap<String, String>,
    kvs_bytes: usize,
    /// Puts since the last barrier.
    fresh: Vec<(String, String)>,
    in_barrier: BTreeSet<u32>,
    epoch: u32,
}

impl PmiNode {
    /// The PMI of job `kvsname` (its id), `size` tasks in all, `local` of them here.
    pub fn new(kvsname: &str, size: u32, local: impl IntoIterator<Item = u32>) -> PmiNode {
        PmiNode {
            kvsname: kvsname.chars().take(KVSNAME_BYTES_MAX / 4).collect(),
            size,
            local: local.into_iter().collect(),
            kvs: BTreeMap::new(),
            kvs_bytes: 0,
            fresh: Vec::new(),
            in_barrier: BTreeSet::new(),
            epoch: 0,
        }
    }

    /// One line from the task of `rank` (without its newline).
    pub fn handle_line(&mut self, rank: u32, line: &str) -> Vec<PmiOutput> {
        let reply = |line: String| vec![PmiOutput::Reply { rank, line }];
        if line.len() > PMI_LINE_BYTES_MAX {
            return reply("cmd=error rc=-1 msg=line_too_long".into());
        }
        let words = parse(line);
        let get = |key: &str| words.get(key).map(String::as_str).unwrap_or("");
        match get("cmd") {
            "init" => reply(format!(
                "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc={}",
                if get("pmi_version") == "1" { 0 } else { -1 }
            )),
            "get_maxes" => reply(format!(
                "cmd=maxes rc=0 kvsname_max={KVSNAME_BYTES_MAX} keylen_max={PMI_KEY_BYTES_MAX} \
                 vallen_max={PMI_VALUE_BYTES_MAX}"
            )),
            "get_appnum" => reply("cmd=appnum rc=0 appnum=0".into()),
            "get_my_kvsname" => reply(format!("cmd=my_kvsname rc=0 kvsname={}", self.kvsname)),
            "get_universe_size" => reply(format!("cmd=universe_size rc=0 size={}", self.size)),
            "put" => reply(self.put(get("key"), get("value"))),
            "get" => reply(match self.kvs.get(get("key")) {
                Some(value) => format!("cmd=get_result rc=0 msg=success value={value}"),
                None => "cmd=get_result rc=-1 msg=key_not_found".into(),
            }),
            "barrier_in" => self.barrier_in(rank),
            "finalize" => reply("cmd=finalize_ack rc=0".into()),
            "abort" => vec![PmiOutput::Abort {
                rank,
                message: get("msg").to_owned(),
            }],
            other => reply(format!("cmd={other} rc=-1 msg=unknown_command")),
        }
    }

    fn put(&mut self, key: &str, value: &str) -> String {
        if key.is_empty() || key.len() > PMI_KEY_BYTES_MAX || value.len() > PMI_VALUE_BYTES_MAX {
            return "cmd=put_result rc=-1 msg=key_or_value_out_of_bounds".into();
        }
        if self.kvs_bytes + key.len() + value.len() > PMI_KVS_BYTES_MAX {
            return "cmd=put_result rc=-1 msg=kvs_full".into();
        }
        self.kvs_bytes += key.len() + value.len();
        self.kvs.insert(key.to_owned(), value.to_owned());
        self.fresh.push((key.to_owned(), value.to_owned()));
        "cmd=put_result rc=0 msg=success".into()
    }

    fn barrier_in(&mut self, rank: u32) -> Vec<PmiOutput> {
        if !self.local.contains(&rank) {
            return vec![PmiOutput::Reply {
                rank,
                line: "cmd=barrier_out rc=-1 msg=unknown_rank".into(),
            }];
        }
        self.in_barrier.insert(rank);
        if self.in_barrier.len() < self.local.len() {
            return Vec::new();
        }
        vec![PmiOutput::Fence(Fence {
            epoch: self.epoch,
            kvs: std::mem::take(&mut self.fresh),
        })]
    }

    /// Every node entered barrier `epoch`; `kvs` is the whole space. Lets the local tasks
    /// out. A repeat (or an answer to another epoch) changes nothing.
    pub fn fence_done(&mut self, epoch: u32, kvs: Vec<(String, String)>) -> Vec<PmiOutput> {
        if epoch != self.epoch || self.in_barrier.len() < self.local.len() {
            return Vec::new();
        }
        for (key, value) in kvs {
            if !self.kvs.contains_key(&key) {
                self.kvs_bytes += key.len() + value.len();
            }
            self.kvs.insert(key, value);
        }
        self.epoch += 1;
        std::mem::take(&mut self.in_barrier)
            .into_iter()
            .map(|rank| PmiOutput::Reply {
                rank,
                line: "cmd=barrier_out rc=0".into(),
            })
            .collect()
    }
}

/// The job's first node's agent: gathers each node's fence of an epoch and merges them once
/// all are in.
#[derive(Clone, Debug, Default)]
pub struct FenceCollector {
    nodes: usize,
    epochs: BTreeMap<u32, BTreeMap<String, Vec<(String, String)>>>,
}

impl FenceCollector {
    /// A collector for a job on `nodes` nodes.
    pub fn new(nodes: usize) -> FenceCollector {
        FenceCollector {
            nodes,
            epochs: BTreeMap::new(),
        }
    }

    /// Node `node`'s fence; the merged space once every node's fence of the epoch is in.
    pub fn add(&mut self, node: &str, fence: Fence) -> Option<Vec<(String, String)>> {
        let epoch = self.epochs.entry(fence.epoch).or_default();
        epoch.insert(node.to_owned(), fence.kvs);
        if epoch.len() < self.nodes {
            return None;
        }
        let all = self.epochs.remove(&fence.epoch)?;
        Some(all.into_values().flatten().collect())
    }
}

/// The `key=value` words of a line.
fn parse(line: &str) -> BTreeMap<String, String> {
    line.split_ascii_whitespace()
        .filter_map(|word| word.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replies(out: &[PmiOutput]) -> Vec<(u32, &str)> {
        out.iter()
            .filter_map(|o| match o {
                PmiOutput::Reply { rank, line } => Some((*rank, line.as_str())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn two_nodes_exchange_their_puts_at_the_barrier() {
        let mut a = PmiNode::new("job1", 3, [0, 1]);
        let mut b = PmiNode::new("job1", 3, [2]);
        assert_eq!(
            replies(&a.handle_line(0, "cmd=init pmi_version=1 pmi_subversion=1")),
            [(
                0,
                "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0"
            )]
        );
        assert_eq!(
            replies(&a.handle_line(0, "cmd=get_my_kvsname")),
            [(0, "cmd=my_kvsname rc=0 kvsname=job1")]
        );
        a.handle_line(0, "cmd=put kvsname=job1 key=addr-0 value=tcp://a");
        b.handle_line(2, "cmd=put kvsname=job1 key=addr-2 value=tcp://b");
        assert!(
            a.handle_line(0, "cmd=barrier_in").is_empty(),
            "rank 1 is not in"
        );
        let [PmiOutput::Fence(fence_a)] = &a.handle_line(1, "cmd=barrier_in")[..] else {
            panic!("node a's fence");
        };
        let [PmiOutput::Fence(fence_b)] = &b.handle_line(2, "cmd=barrier_in")[..] else {
            panic!("node b's fence");
        };
        let mut leader = FenceCollector::new(2);
        assert!(leader.add("a", fence_a.clone()).is_none());
        let all = leader.add("b", fence_b.clone()).expect("all in");
        assert_eq!(
            replies(&a.fence_done(0, all.clone())),
            [(0, "cmd=barrier_out rc=0"), (1, "cmd=barrier_out rc=0")]
        );
        assert_eq!(
            replies(&b.fence_done(0, all)),
            [(2, "cmd=barrier_out rc=0")]
        );
        assert_eq!(
            replies(&b.handle_line(2, "cmd=get kvsname=job1 key=addr-0")),
            [(2, "cmd=get_result rc=0 msg=success value=tcp://a")]
        );
        assert!(
            b.fence_done(0, Vec::new()).is_empty(),
            "a repeat does nothing"
        );
        let missing = b.handle_line(2, "cmd=get kvsname=job1 key=nope");
        assert!(replies(&missing)[0].1.contains("rc=-1"));
    }

    #[test]
    fn bounds_and_unknown_commands_are_answered_not_obeyed() {
        let mut pmi = PmiNode::new("j", 1, [0]);
        let long = "v".repeat(PMI_VALUE_BYTES_MAX + 1);
        let out = pmi.handle_line(0, &format!("cmd=put kvsname=j key=k value={long}"));
        assert!(replies(&out)[0].1.contains("rc=-1"));
        let out = pmi.handle_line(0, "cmd=frobnicate");
        assert_eq!(
            replies(&out),
            [(0, "cmd=frobnicate rc=-1 msg=unknown_command")]
        );
        let out = pmi.handle_line(0, "cmd=abort msg=bye");
        assert_eq!(
            out,
            [PmiOutput::Abort {
                rank: 0,
                message: "bye".into()
            }]
        );
    }
}
