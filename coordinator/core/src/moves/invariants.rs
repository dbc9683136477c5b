//! What must hold between the node table and the moves after every input: checked by
//! [`MoveMachine::invariants`], which property tests, the move harness and the simulator
//! call after every step (release builds too), while `debug_assert!`s guard the
//! transitions themselves.

use super::MoveMachine;
use super::state::Phase;

impl MoveMachine {
    /// Checks the machine's invariants; the error names the first one broken:
    ///
    /// - every owner is a known queue, and a node in no move is in its owner's definition;
    /// - a node in a move is in exactly that one: the move is unfinished, holds the node in
    ///   a step not yet done, at the node's generation, and the node's owner is the side
    ///   that step gives it to (the recipient until returned, the donor once cancelled);
    /// - every node of an unfinished move whose step is not done names that move;
    /// - move ids are below the next one, and no move is both unfinished and finished.
    pub fn invariants(&self) -> Result<(), String> {
        let state = &self.state;
        for (name, intent, moving) in state.nodes.iter() {
            if let Some(owner) = &intent.owner {
                let definition = state
                    .definitions
                    .get(owner)
                    .ok_or_else(|| format!("node {name} is owned by {owner}, not a queue"))?;
                if moving.is_none() && !definition.contains(name) {
                    return Err(format!(
                        "node {name} is owned by {owner}, outside its definition"
                    ));
                }
            }
            let Some(id) = moving else { continue };
            let mv = state.active.get(&id).ok_or_else(|| {
                format!("node {name} is in move {}, which is not unfinished", id.0)
            })?;
            let node = mv
                .nodes
                .get(name)
                .ok_or_else(|| format!("node {name} is in move {}, which lacks it", id.0))?;
            if node.generation != intent.generation {
                return Err(format!(
                    "node {name} is at generation {} but its move {} says {}",
                    intent.generation.0, id.0, node.generation.0
                ));
            }
            let side = match node.phase {
                Phase::Outgoing { .. } | Phase::Released => &mv.to,
                Phase::Returning { .. } => &mv.from,
                Phase::Acquired | Phase::Returned => {
                    return Err(format!("node {name} is done in move {} yet in it", id.0));
                }
            };
            if intent.owner.as_ref() != Some(side) {
                return Err(format!(
                    "node {name} of move {} is owned by {:?}, not {side}",
                    id.0, intent.owner
                ));
            }
        }
        for mv in state.active.values() {
            if mv.id.0 >= state.next_move_id {
                return Err(format!(
                    "move {} is not below the next move id {}",
                    mv.id.0, state.next_move_id
                ));
            }
            if state.finished.iter().any(|f| f.id == mv.id) {
                return Err(format!("move {} is both unfinished and finished", mv.id.0));
            }
            for (name, node) in &mv.nodes {
                let done = matches!(node.phase, Phase::Acquired | Phase::Returned);
                if !done && state.nodes.moving(name) != Some(mv.id) {
                    return Err(format!(
                        "node {name} is on its way in move {} but names {:?}",
                        mv.id.0,
                        state.nodes.moving(name)
                    ));
                }
            }
        }
        Ok(())
    }
}
