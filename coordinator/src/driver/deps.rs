//! The driver's side of dependencies across queues (docs/POLICIES.md): a shard's status
//! report lists the jobs of other queues its pending jobs wait on; the core plans who
//! knows each ([`Core::job_facts_plan`](crate::core::Core::job_facts_plan)), a follow-up
//! task asks those shards (their published, durable snapshot), reads the history store
//! for what they do not know ([`settle_fact`]), and tells the waiting shard (`Facts`).
//! Nothing is kept: a lost question or answer is asked again by the next report.

use std::collections::HashMap;

use shardsched_proto::Session;
use shardsched_proto::msg::JobId;
use shardsched_proto::msg::coord_shard;
use shardsched_proto::msg::deps::{Fact, JobFact};

use super::SHARD_COMMAND_TIMEOUT;
use super::core_task::{After, CoreTask};
use super::link::ask;
use crate::core::{ConnId, settle_fact};

impl CoreTask {
    /// The shard on `conn` waits on jobs `ids` of other queues: find out and tell it.
    pub(super) fn facts_due(&mut self, conn: ConnId, ids: &[JobId]) {
        if ids.is_empty() {
            return;
        }
        let Some(waiter) = self.links.get(&conn).map(|l| l.session().clone()) else {
            return;
        };
        let plan = self.core.job_facts_plan(ids);
        let asks: Vec<(Option<Session>, Vec<JobId>)> = plan
            .ask
            .into_values()
            .map(|(owner, ids)| (self.links.get(&owner).map(|l| l.session().clone()), ids))
            .collect();
        let known = plan.known;
        let store = self.history.store();
        self.after.push(After::Spawn(Box::pin(async move {
            let mut facts = known;
            for (session, ids) in asks {
                facts.extend(ask_owner(session.as_ref(), ids).await);
            }
            let unsettled: Vec<JobId> = facts
                .iter()
                .filter(|f| settle_fact(f.fact, Some(Fact::NotFound)) != f.fact)
                .map(|f| f.id)
                .collect();
            if !unsettled.is_empty() {
                let read = tokio::task::spawn_blocking(move || store.ended(&unsettled)).await;
                let ended: HashMap<JobId, Fact> = match read {
                    Ok(Ok(ended)) => ended,
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "job history not read for dependencies");
                        HashMap::new()
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "job history not read for dependencies");
                        HashMap::new()
                    }
                };
                for f in &mut facts {
                    f.fact = settle_fact(f.fact, ended.get(&f.id).copied());
                }
            }
            let told = ask(
                &waiter,
                &coord_shard::Request::Facts(facts),
                SHARD_COMMAND_TIMEOUT,
            )
            .await;
            if let Err(refusal) = told {
                tracing::debug!(%refusal, "facts not delivered; the next report asks again");
            }
        })));
    }
}

/// What the owning shard (on `session`, if connected) says of `ids`; `Unknown` for all
/// when it cannot say.
async fn ask_owner(session: Option<&Session>, ids: Vec<JobId>) -> Vec<JobFact> {
    let unknown = |ids: Vec<JobId>| {
        ids.into_iter()
            .map(|id| JobFact {
                id,
                fact: Fact::Unknown,
            })
            .collect()
    };
    let Some(session) = session else {
        return unknown(ids);
    };
    let request = coord_shard::Request::JobFacts { ids: ids.clone() };
    match ask(session, &request, SHARD_COMMAND_TIMEOUT).await {
        Ok(coord_shard::Response::JobFacts(facts)) => facts,
        Ok(other) => {
            tracing::warn!(answer = ?other, "a shard answered JobFacts with something else");
            unknown(ids)
        }
        Err(refusal) => {
            tracing::debug!(%refusal, "a shard did not answer JobFacts");
            unknown(ids)
        }
    }
}
