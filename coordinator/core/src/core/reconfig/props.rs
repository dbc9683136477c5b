//! Property test: arbitrary sequences of queue table changes (add, update, remove, shards
//! connecting) and coordinator restarts keep the ownership rules, never reuse or change a
//! generator id, never lower a generation, and a restart from the durable state finds
//! exactly the state the changes left.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;

use proptest::prelude::*;
use shardsched_wire::msg::client_coord::QueueSpec;
use shardsched_wire::msg::shard_coord::Register;

use super::*;
use crate::config::Config;
use shardsched_wire::msg::{Generation, QueuePolicy};

const NODES: usize = 24;
const NAMES: [&str; 4] = ["q0", "q1", "q2", "q3"];

fn file() -> Config {
    let text = format!(
        "default_queue = \"base\"\n\
         [cluster.inline]\nname = \"p\"\n[[cluster.inline.nodes]]\nhosts = \"node[0-{}]\"\ncores_per_socket = 1\n\
         [queues.base]\nnodes = \"node[0-3]\"\n",
        NODES - 1
    );
    Config::parse(&text, "props.toml", Path::new(".")).expect("config")
}

#[derive(Clone, Debug)]
enum Op {
    Add {
        name: usize,
        lo: usize,
        len: usize,
        stopped: bool,
    },
    Update {
        name: usize,
        lo: usize,
        len: usize,
        policy: usize,
    },
    Remove {
        name: usize,
    },
    Connect {
        name: usize,
    },
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    let name = 0..NAMES.len();
    prop_oneof![
        (name.clone(), 0..NODES, 1..8usize, any::<bool>()).prop_map(|(name, lo, len, stopped)| {
            Op::Add {
                name,
                lo,
                len,
                stopped,
            }
        }),
        (name.clone(), 0..NODES, 1..8usize, 0..4usize).prop_map(|(name, lo, len, policy)| {
            Op::Update {
                name,
                lo,
                len,
                policy,
            }
        }),
        name.clone().prop_map(|name| Op::Remove { name }),
        name.prop_map(|name| Op::Connect { name }),
        Just(Op::Restart),
    ]
}

fn hostlist(lo: usize, len: usize) -> String {
    let hi = (lo + len - 1).min(NODES - 1);
    format!("node[{lo}-{hi}]")
}

fn nodes() -> Vec<String> {
    (0..NODES).map(|i| format!("node{i}")).collect()
}

/// What a client could observe: owners and generations by node; queues with their
/// generator ids and policies.
type Observed = (
    Vec<Option<String>>,
    Vec<Option<Generation>>,
    Vec<(String, u16, String)>,
);

fn observed(core: &Core) -> Observed {
    let owners = nodes()
        .iter()
        .map(|n| core.owner_of(n).map(str::to_owned))
        .collect();
    let generations = nodes().iter().map(|n| core.generation_of(n)).collect();
    let queues = core
        .config()
        .queues
        .iter()
        .map(|q| {
            (
                q.name.clone(),
                core.generator_id(&q.name).expect("id"),
                q.policy.as_str().to_owned(),
            )
        })
        .collect();
    (owners, generations, queues)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn queue_table_changes_keep_ownership_rules_ids_and_survive_restarts(ops in proptest::collection::vec(op(), 1..24)) {
        let file = file();
        let (mut core, _) = Core::new(file.clone(), &Durable::default(), 1).expect("core");
        let mut ids: BTreeMap<String, u16> = BTreeMap::new();
        let mut generations = [0u64; NODES];
        let mut conn = 0u64;
        for op in ops {
            let result = match op {
                Op::Add { name, lo, len, stopped } => {
                    let spec = QueueSpec {
                        name: NAMES[name].into(),
                        nodes: Some(hostlist(lo, len)),
                        stopped,
                        ..QueueSpec::default()
                    };
                    let def = queue_table::queue_def(core.config(), None, &spec).expect("valid spec");
                    core.add_queue(def).map(|_| ())
                }
                Op::Update { name, lo, len, policy } => {
                    let spec = QueueSpec {
                        name: NAMES[name].into(),
                        nodes: Some(hostlist(lo, len)),
                        policy: Some(QueuePolicy::ALL[policy]),
                        ..QueueSpec::default()
                    };
                    core.update_queue(0, &spec).map(|_| ())
                }
                Op::Remove { name } => core.remove_queue(5, NAMES[name], None).map(|_| ()),
                Op::Connect { name } => {
                    conn += 1;
                    let register = Register {
                        queue: NAMES[name].into(),
                        listen: SocketAddr::from(([127, 0, 0, 1], 4000)),
                        held: Vec::new(),
                        last_job_id: None,
                    };
                    let remote = SocketAddr::from(([127, 0, 0, 1], 5000));
                    if core.register(ConnId(conn), NAMES[name], remote, &register).is_ok() {
                        core.moves_registered(5, NAMES[name], &[]);
                    }
                    Ok(())
                }
                Op::Restart => {
                    let durable = core.durable_state().reread();
                    let (restarted, _) = Core::new(file.clone(), &durable, 2).expect("restart");
                    prop_assert_eq!(observed(&restarted), observed(&core), "a restart changes nothing");
                    core = restarted;
                    Ok(())
                }
            };
            // A refusal changes nothing a client sees; whatever happened, the rules hold.
            let _ = result;
            prop_assert_eq!(core.invariants(), Ok(()));
            for (n, node) in nodes().iter().enumerate() {
                if let Some(owner) = core.owner_of(node) {
                    let def = &core.config().queue(owner).expect("owner is a queue").definition;
                    prop_assert!(def.contains(&n), "{node} owned by {owner} outside its definition");
                }
                let g = core.generation_of(node).expect("node").0;
                prop_assert!(g >= generations[n], "{node}: generation went down");
                generations[n] = g;
            }
            let mut seen = BTreeMap::new();
            for q in &core.config().queues {
                let id = core.generator_id(&q.name).expect("id");
                prop_assert_eq!(*ids.entry(q.name.clone()).or_insert(id), id, "a name keeps its id");
                prop_assert!(seen.insert(id, q.name.clone()).is_none(), "id {} named twice", id);
            }
            let distinct: std::collections::BTreeSet<u16> = ids.values().copied().collect();
            prop_assert_eq!(distinct.len(), ids.len(), "an id is never reused for another name");
            prop_assert!(crate::config::check(core.config()).is_ok());
        }
    }
}
