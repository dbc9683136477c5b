//! Job facts for dependencies across queues (docs/POLICIES.md): a shard asks what is known
//! of jobs of other queues; the coordinator finds each job's queue by its FLUID generator
//! id, asks that queue's shard, and falls back on its history store for what the shard does
//! not know (a job ended and forgotten there, a queue offline or removed). The plan and the
//! last word are decided here; the driver only asks and reads.

use std::collections::BTreeMap;

use shardsched_wire::msg::JobId;
use shardsched_wire::msg::deps::{Fact, JobFact};

use super::{ConnId, Core};

/// How to answer a shard's `JobFacts`: which shards to ask about which jobs, and what is
/// known already of the others (before the history store is read).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FactsPlan {
    /// Per connected queue: its connection and the jobs to ask it about.
    pub ask: BTreeMap<String, (ConnId, Vec<JobId>)>,
    /// Jobs whose shard cannot be asked: `Unknown` (queue configured, shard offline),
    /// `NotFound` (queue removed: only the history may know it) or `NoQueue`.
    pub known: Vec<JobFact>,
}

impl Core {
    /// Plans the answer to `JobFacts{ids}`.
    pub fn job_facts_plan(&self, ids: &[JobId]) -> FactsPlan {
        let mut plan = FactsPlan::default();
        for &id in ids {
            let generator = id.generator_id();
            let queue = self
                .generators
                .iter()
                .find(|&(_, &g)| g == generator)
                .map(|(q, _)| q);
            let fact = match queue.map(|q| (q, self.queue_index(q))) {
                None => Fact::NoQueue,
                Some((_, None)) => Fact::NotFound,
                Some((q, Some(qi))) => match &self.shards[qi] {
                    Some(link) => {
                        let entry = plan
                            .ask
                            .entry(q.clone())
                            .or_insert_with(|| (link.conn, Vec::new()));
                        entry.1.push(id);
                        continue;
                    }
                    None => Fact::Unknown,
                },
            };
            plan.known.push(JobFact { id, fact });
        }
        plan
    }
}

/// The last word on a job: what its shard (or the plan) said, unless that leaves it
/// unsettled and the history store knows how it ended (`ended`: its final fact there).
pub fn settle_fact(said: Fact, ended: Option<Fact>) -> Fact {
    match (said, ended) {
        (Fact::NotFound | Fact::Unknown | Fact::NoQueue, Some(ended)) => ended,
        (said, _) => said,
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use shardsched_wire::Fluid;
    use shardsched_wire::msg::JobState;
    use shardsched_wire::msg::shard_coord::Register;

    use super::*;
    use crate::config::Config;
    use crate::records::Durable;

    #[test]
    fn each_job_is_asked_of_its_queues_shard_by_its_generator_id() {
        let config = Config::embedded_default().expect("default config");
        let mut core = Core::new(config, &Durable::default(), 1000)
            .expect("core")
            .0;
        let register = Register {
            queue: "batch".into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 7001)),
            held: Vec::new(),
            last_job_id: None,
        };
        core.register(ConnId(1), "batch", register.listen, &register)
            .expect("registered");
        let of = |queue: &str, seq| {
            let g = core.generator_id(queue).expect("generator");
            Fluid::from_parts(1, g, seq).expect("fluid")
        };
        let (a, b, offline) = (of("batch", 1), of("batch", 2), of("debug", 1));
        let nowhere = Fluid::from_parts(1, 999, 1).expect("fluid");
        let plan = core.job_facts_plan(&[a, offline, b, nowhere]);
        assert_eq!(plan.ask.get("batch"), Some(&(ConnId(1), vec![a, b])));
        assert_eq!(
            plan.known,
            [
                JobFact {
                    id: offline,
                    fact: Fact::Unknown
                },
                JobFact {
                    id: nowhere,
                    fact: Fact::NoQueue
                }
            ]
        );
    }

    #[test]
    fn the_history_settles_only_what_the_shard_did_not_know() {
        let ended = Fact::Ended {
            state: JobState::Completed,
            started: true,
        };
        assert_eq!(settle_fact(Fact::NotFound, Some(ended)), ended);
        assert_eq!(settle_fact(Fact::Unknown, Some(ended)), ended);
        assert_eq!(settle_fact(Fact::NoQueue, None), Fact::NoQueue);
        assert_eq!(settle_fact(Fact::Running, Some(ended)), Fact::Running);
        assert_eq!(settle_fact(Fact::Unknown, None), Fact::Unknown);
    }
}
