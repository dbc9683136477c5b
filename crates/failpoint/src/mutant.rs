//! Mutants: deliberate bugs in the cores' real code paths, for proving that the
//! simulator's checker catches them (`shardsched sim --mutant NAME`, docs/SIM.md). Only a
//! build with the cargo feature `mutants` can switch one on ([`Active`]); in any other
//! build [`active`] is a constant `false` and the compiler removes the mutated branches.
//!
//! ```text
//! up-before-release     a recipient brings a node up on `Incoming`, before the donor
//!                       released it                       (shard core, node table)
//! no-generation-check   a shard takes a command whose generation is older than one it
//!                       has seen                          (shard core, node table)
//! ack-before-journal    a batch's journal records are handed out one batch late, so its
//!                       answers and commands leave before they are durable
//!                                                         (shard core, coordinator core)
//! release-while-held    a donor releases a node at once, though a running job holds it
//!                                                         (shard core, node table)
//! agent-no-fence        a node agent takes a launch whose generation is older than its
//!                       owner's, from whichever queue     (node agent core, fencing)
//! allowance-unjournaled a shard returns allowance under a per-user limit without
//!                       journaling it, so a restart holds it again
//!                                                         (shard core, allowances)
//! kill-unjournaled      a shard answers a cancel of a running job without journaling
//!                       its kill request, so a restart runs the job on
//!                                                         (shard core, exec side)
//! ```
//!
//! The switch is thread-local: seeds run side by side in a test's threads, each with its
//! own mutant or none.

#[cfg(feature = "mutants")]
use std::cell::Cell;

/// A deliberate bug (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mutant {
    /// The recipient brings a node up before the donor's release.
    UpBeforeRelease,
    /// A shard accepts a stale generation.
    NoGenerationCheck,
    /// An answer leaves before its journal write is durable.
    AckBeforeJournal,
    /// The donor releases a node a running job still holds.
    ReleaseWhileHeld,
    /// A node agent accepts a launch from a stale generation.
    AgentNoFence,
    /// A shard returns allowance without journaling it.
    AllowanceUnjournaled,
    /// The coordinator counts a fair-share usage batch it had counted already.
    UsageRecounted,
    /// A shard answers a kill request (a cancel) without journaling it.
    KillUnjournaled,
}

impl Mutant {
    /// Every mutant.
    pub const ALL: [Mutant; 8] = [
        Mutant::UpBeforeRelease,
        Mutant::NoGenerationCheck,
        Mutant::AckBeforeJournal,
        Mutant::ReleaseWhileHeld,
        Mutant::AgentNoFence,
        Mutant::AllowanceUnjournaled,
        Mutant::UsageRecounted,
        Mutant::KillUnjournaled,
    ];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mutant::UpBeforeRelease => "up-before-release",
            Mutant::NoGenerationCheck => "no-generation-check",
            Mutant::AckBeforeJournal => "ack-before-journal",
            Mutant::ReleaseWhileHeld => "release-while-held",
            Mutant::AgentNoFence => "agent-no-fence",
            Mutant::AllowanceUnjournaled => "allowance-unjournaled",
            Mutant::UsageRecounted => "usage-recounted",
            Mutant::KillUnjournaled => "kill-unjournaled",
        }
    }

    /// The mutant named `name`.
    pub fn from_name(name: &str) -> Option<Mutant> {
        Mutant::ALL.into_iter().find(|m| m.name() == name)
    }
}

#[cfg(feature = "mutants")]
thread_local! {
    static ACTIVE: Cell<Option<Mutant>> = const { Cell::new(None) };
}

/// Whether `mutant` is switched on in this thread (never, without the feature `mutants`).
#[inline(always)]
pub fn active(mutant: Mutant) -> bool {
    #[cfg(feature = "mutants")]
    return ACTIVE.with(|a| a.get() == Some(mutant));
    #[cfg(not(feature = "mutants"))]
    {
        let _ = mutant;
        false
    }
}

/// Switches a mutant on in this thread until the guard is dropped.
#[cfg(feature = "mutants")]
#[must_use = "the mutant is switched off again when the guard is dropped"]
pub struct Active {
    before: Option<Mutant>,
}

#[cfg(feature = "mutants")]
impl Active {
    /// Switches `mutant` on (`None`: none) for this thread.
    pub fn set(mutant: Option<Mutant>) -> Active {
        let before = ACTIVE.with(|a| a.replace(mutant));
        Active { before }
    }
}

#[cfg(feature = "mutants")]
impl Drop for Active {
    fn drop(&mut self) {
        ACTIVE.with(|a| a.set(self.before));
    }
}

#[cfg(all(test, feature = "mutants"))]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_the_switch_is_scoped_to_its_guard() {
        for m in Mutant::ALL {
            assert_eq!(Mutant::from_name(m.name()), Some(m));
        }
        assert_eq!(Mutant::from_name("no-such"), None);
        assert!(!active(Mutant::AckBeforeJournal));
        {
            let _on = Active::set(Some(Mutant::AckBeforeJournal));
            assert!(active(Mutant::AckBeforeJournal));
            assert!(!active(Mutant::UpBeforeRelease));
        }
        assert!(!active(Mutant::AckBeforeJournal));
    }
}
