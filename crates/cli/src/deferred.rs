//! A subcommand's arguments, defined only when that subcommand runs.
//!
//! clap's derive builds the whole command tree at every start: each of the ~25
//! subcommands' arguments, help texts and value parsers, most of them never used by the
//! one command being run. That was ~0.85 M instructions and ~117 page faults (half a
//! megabyte of fresh heap, ~3 µs a fault on the project's VM) before `query`, `submit` or
//! any other command did anything of its own. [`Deferred`] hands the arguments' definition
//! to [`clap::Command::defer`]: clap runs it when the parse enters that subcommand, or when
//! it builds the whole tree (`Command::build`). Completion scripts and man pages define
//! every subcommand at once ([`defined_at_once`]). What a user sees is
//! the same: every help, error, man page and completion text was compared byte for byte.

use std::cell::Cell;

use clap::builder::{Resettable, StyledStr};
use clap::{ArgMatches, Args, Command, Error, FromArgMatches};

/// `T`'s arguments, added to their subcommand only once clap needs them (module doc).
pub struct Deferred<T>(pub T);

impl<T> std::ops::Deref for Deferred<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

thread_local! {
    /// Set while [`defined_at_once`] runs, on its thread (the tests of other modules build
    /// trees on their own threads at the same time).
    static AT_ONCE: Cell<bool> = const { Cell::new(false) };
}

/// What `make` makes, with every [`Deferred`] argument it makes defined at once: for the
/// completion scripts, whose `help` subcommand's tree is made from the subcommands as they
/// are when the tree is built (clap's derive passes nothing else to `augment_args`).
pub fn defined_at_once<R>(make: impl FnOnce() -> R) -> R {
    let before = AT_ONCE.replace(true);
    let made = make();
    AT_ONCE.set(before);
    made
}

impl<T: Args> Args for Deferred<T> {
    fn augment_args(cmd: Command) -> Command {
        augment::<T, false>(cmd)
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        augment::<T, true>(cmd)
    }
}

/// `T`'s arguments on `cmd`: at once under [`defined_at_once`], else deferred.
fn augment<T: Args, const FOR_UPDATE: bool>(cmd: Command) -> Command {
    if AT_ONCE.get() {
        args::<T, FOR_UPDATE>(cmd)
    } else {
        cmd.defer(define::<T, FOR_UPDATE>)
    }
}

/// The derive's own definition of `T`'s arguments (for `update_from_arg_matches` with
/// `FOR_UPDATE`).
fn args<T: Args, const FOR_UPDATE: bool>(cmd: Command) -> Command {
    if FOR_UPDATE {
        T::augment_args_for_update(cmd)
    } else {
        T::augment_args(cmd)
    }
}

/// The deferred definition: `T`'s arguments on `cmd`, its about texts left as they were.
/// The derive sets them from the variant's doc comment *after* the arguments, over the
/// arguments struct's own, and a deferred definition runs after both.
fn define<T: Args, const FOR_UPDATE: bool>(cmd: Command) -> Command {
    let about = resettable(cmd.get_about());
    let long_about = resettable(cmd.get_long_about());
    args::<T, FOR_UPDATE>(cmd)
        .about(about)
        .long_about(long_about)
}

fn resettable(text: Option<&StyledStr>) -> Resettable<StyledStr> {
    text.map_or(Resettable::Reset, |t| Resettable::Value(t.clone()))
}

impl<T: FromArgMatches> FromArgMatches for Deferred<T> {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, Error> {
        T::from_arg_matches(matches).map(Deferred)
    }

    fn from_arg_matches_mut(matches: &mut ArgMatches) -> Result<Self, Error> {
        T::from_arg_matches_mut(matches).map(Deferred)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), Error> {
        self.0.update_from_arg_matches(matches)
    }

    fn update_from_arg_matches_mut(&mut self, matches: &mut ArgMatches) -> Result<(), Error> {
        self.0.update_from_arg_matches_mut(matches)
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// What clap prints for `argv` (its help or an error); empty when `argv` parses.
    fn help_of(argv: &[&str]) -> String {
        match crate::Cli::command().try_get_matches_from(argv) {
            Ok(_) => String::new(),
            Err(e) => e.render().to_string(),
        }
    }

    #[test]
    fn a_subcommands_arguments_wait_for_it_and_its_about_text_stays_the_variants() {
        let tree = crate::Cli::command();
        let query = tree.find_subcommand("query").expect("query");
        assert_eq!(
            query.get_arguments().count(),
            0,
            "not defined before the parse"
        );
        let help = help_of(&["shardsched", "query", "--help"]);
        assert!(help.contains("--load-file"), "{help}");
        assert!(
            help.starts_with("Fluxion resource-query compatible matcher"),
            "{help}"
        );
    }
}
