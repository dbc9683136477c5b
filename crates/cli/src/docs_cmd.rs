//! `shardsched completions SHELL` and `shardsched man [--dir DIR]`: the shell completions
//! and man pages, generated from the clap definition itself (clap_complete, clap_mangen), so
//! they can never describe other flags than the binary takes.
//!
//! ```text
//! shardsched completions bash > ~/.local/share/bash-completion/completions/shardsched
//! shardsched completions zsh  > ~/.zfunc/_shardsched
//! shardsched man | man -l -                          # read it now
//! shardsched man --dir /usr/local/share/man/man1     # shardsched.1, shardsched-submit.1, …
//! ```

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, CommandFactory};
use clap_complete::Shell;

/// The program's name in completions and man pages.
const BIN_NAME: &str = "shardsched";

/// Flags of `shardsched completions`.
#[derive(Args, Debug, Clone)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Flags of `shardsched man`.
#[derive(Args, Debug, Clone)]
pub struct ManArgs {
    /// Write one page per command into this directory (shardsched.1, shardsched-submit.1,
    /// …) instead of printing the main page.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// The command tree with every subcommand's arguments defined at once, not
/// [`Deferred`](crate::deferred::Deferred): building the tree makes the `help`
/// subcommand's own tree from the subcommands as they are then, and a completion script
/// lists that one too (`shardsched help queue <TAB>`).
fn whole_command() -> clap::Command {
    crate::deferred::defined_at_once(crate::Cli::command)
}

/// `shardsched completions SHELL`: the script on standard output.
pub fn completions_main(args: &CompletionsArgs) -> Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut whole_command(), BIN_NAME, &mut script);
    emit(&script)
}

/// `shardsched man`: the main page on standard output, or every page into `--dir`.
pub fn man_main(args: &ManArgs) -> Result<()> {
    let command = whole_command();
    match &args.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            clap_mangen::generate_to(command, dir)
                .with_context(|| format!("writing man pages into {}", dir.display()))
        }
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(command).render(&mut page)?;
            emit(&page)
        }
    }
}

fn emit(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .context("writing to standard output")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn completions(shell: Shell) -> String {
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut whole_command(), BIN_NAME, &mut script);
        String::from_utf8(script).unwrap()
    }

    #[test]
    fn completions_know_the_commands_and_their_flags() {
        let bash = completions(Shell::Bash);
        for word in [
            "submit",
            "queue",
            "moves",
            "--json",
            "--log-format",
            "completions",
        ] {
            assert!(bash.contains(word), "bash completions lack {word}");
        }
        assert!(completions(Shell::Zsh).contains("#compdef shardsched"));
        assert!(completions(Shell::Fish).contains("complete -c shardsched"));
    }

    #[test]
    fn completions_offer_the_help_subcommands_own_tree() {
        // `shardsched help queue <TAB>` offers `moves`: the tree was built with every
        // subcommand's arguments and subcommands defined (not deferred).
        let bash = completions(Shell::Bash);
        assert!(
            bash.contains("shardsched__subcmd__help__subcmd__queue__subcmd__moves"),
            "bash completions lack `help queue moves`"
        );
    }

    #[test]
    fn man_pages_cover_every_visible_command() {
        let mut page = Vec::new();
        clap_mangen::Man::new(crate::Cli::command())
            .render(&mut page)
            .unwrap();
        let page = String::from_utf8(page).unwrap();
        assert!(page.starts_with(".ie"), "{page}");
        assert!(page.contains(".TH shardsched 1"), "{page}");
        assert!(page.contains("submit"), "{page}");

        let dir = tempfile::tempdir().unwrap();
        man_main(&ManArgs {
            dir: Some(dir.path().to_owned()),
        })
        .unwrap();
        for page in [
            "shardsched.1",
            "shardsched-submit.1",
            "shardsched-queue-move.1",
        ] {
            assert!(dir.path().join(page).is_file(), "no {page}");
        }
        // Hidden commands get no page.
        assert!(!dir.path().join("shardsched-differential.1").exists());
    }
}
