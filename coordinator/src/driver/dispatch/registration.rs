//! A shard's registration: answered by the core at once, or after the connection that
//! holds its queue was probed.

use shardsched_proto::msg::shard_coord::{self, Response as ShardResponse};
use shardsched_proto::msg::{Refusal, RefusalCode};

use super::super::core_task::{After, CoreTask};
use super::super::event::{Event, Registration};
use super::super::followups;
use crate::core::{ConnId, RegisterError, Registering};

impl CoreTask {
    /// A shard registers; when another connection holds its queue, that one is probed
    /// first ([`Event::HolderProbed`]).
    pub(in crate::driver) fn register(&mut self, now: u64, reg: Registration) {
        if !self.links.contains_key(&reg.conn) {
            let gone = Refusal::new(RefusalCode::Unavailable, "the connection has ended");
            return self.answer_shard(reg.reply, Err(gone));
        }
        let registered = self.core.register_shard(now, registering(&reg));
        match registered {
            Ok(assignment) => self.registered(reg, assignment),
            Err(RegisterError::Refused(refusal)) => self.refuse_registration(reg, refusal),
            Err(RegisterError::Held { conn: holder, .. }) => {
                let Some(link) = self.links.get(&holder) else {
                    return self.holder_probed(now, false, holder, reg);
                };
                let (session, events) = (link.session().clone(), self.events.clone());
                self.after.push(After::Spawn(Box::pin(async move {
                    let alive = followups::alive(session).await;
                    let probed = Event::HolderProbed {
                        alive,
                        holder,
                        registration: reg,
                    };
                    let _ = events.send(probed).await;
                })));
            }
        }
    }

    /// The holder was probed: the core decides ([`Core::register_after_probe`]); a
    /// newcomer whose own connection is gone meanwhile is refused as if the holder lived.
    ///
    /// [`Core::register_after_probe`]: crate::core::Core::register_after_probe
    pub(in crate::driver) fn holder_probed(
        &mut self,
        now: u64,
        alive: bool,
        holder: ConnId,
        reg: Registration,
    ) {
        let alive = alive || !self.links.contains_key(&reg.conn);
        if !alive && let Some(old) = self.links.remove(&holder) {
            old.session().close();
        }
        let registered = self
            .core
            .register_after_probe(now, holder, alive, registering(&reg));
        match registered {
            Ok(assignment) => self.registered(reg, assignment),
            Err(refusal) => self.refuse_registration(reg, refusal),
        }
    }

    pub(in crate::driver) fn refuse_registration(&mut self, reg: Registration, refusal: Refusal) {
        tracing::warn!(peer = %reg.peer, remote = %reg.remote, %refusal, "registration refused");
        self.answer_shard(reg.reply, Err(refusal));
    }

    /// The registration answer names generations: it leaves once the batch is durable.
    pub(in crate::driver) fn registered(
        &mut self,
        reg: Registration,
        assignment: shard_coord::Assignment,
    ) {
        let queue = &reg.register.queue;
        let address = self.core.shard(queue).map(|l| l.address);
        tracing::info!(
            %queue,
            address = ?address,
            generator_id = assignment.generator_id,
            owned = assignment.owned.len(),
            "shard registered"
        );
        self.answer_shard(
            reg.reply,
            Ok(ShardResponse::Registered(Box::new(assignment))),
        );
    }
}

/// The core's view of a registration the driver holds.
fn registering(reg: &Registration) -> Registering<'_> {
    Registering {
        conn: reg.conn,
        shard_name: &reg.peer.name,
        remote: reg.remote,
        register: &reg.register,
    }
}
