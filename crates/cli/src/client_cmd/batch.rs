//! `shardsched batch [FLAGS] SCRIPT [ARGS…]`: a batch script submitted as a job, its
//! options in the script itself, as `sbatch` and `flux batch` read them.
//!
//! Directive lines come before the script's first command (after its `#!` line, among
//! blank lines and comments), each a list of shell words:
//!
//! | prefix | flags |
//! |---|---|
//! | `#SHARDSCHED` | `shardsched submit`'s |
//! | `#FLUX:` | `flux batch`'s (the same names: `-N`, `-n`, `-c`, `-g`, `-t`, `-q`, `--job-name`, …) |
//! | `#SBATCH` | Slurm's, translated ([`slurm`]): `-N`, `-n`, `-c`, `-t` (Slurm's time formats), `-J`, `-o`/`-e` (`%j` `%x` `%A` `%a`), `-p`, `-w`, `-x`, `-C`, `--begin`, `-D`, `-a`, `--exclusive`, `-H`, `--requeue`, `--export`; others are skipped with a warning |
//!
//! Flags on the command line win over directives (as with `sbatch`). The script travels in
//! the jobspec (`attributes.system.files.script`, at most [`SCRIPT_BYTES_MAX`]); with the
//! exec executor it is written to the job's directory and run once, with `ARGS`, for the
//! whole allocation (on its first node). Its name is the job's unless `-J` says otherwise.

mod slurm;

use std::path::PathBuf;

use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, Parser};
use shardsched_client::output;
use shardsched_jobspec::options::File;

use super::submit::{SubmitFlags, submit_main};

/// Longest batch script, in bytes (it travels in the jobspec).
pub const SCRIPT_BYTES_MAX: usize = 512 * 1024;

/// Most directive lines a script may have.
pub const DIRECTIVES_MAX: usize = 1024;

/// Flags of `shardsched batch`.
#[derive(Args, Debug, Clone)]
pub struct BatchArgs {
    /// What the job asks for and how it runs (over the script's directives).
    #[command(flatten)]
    pub flags: SubmitFlags,
    /// The script, then its arguments.
    #[arg(
        id = "command",
        value_name = "SCRIPT [ARGS]",
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub script: Vec<String>,
}

/// A script's directives parsed as `submit`'s flags.
#[derive(Parser, Debug)]
#[command(no_binary_name = true, args_override_self = true)]
struct Directives {
    #[command(flatten)]
    flags: SubmitFlags,
    /// Never given: `--jobspec` names it in its conflicts.
    #[arg(id = "command", last = true, hide = true)]
    command: Vec<String>,
}

/// The dialect of a directive line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dialect {
    Shardsched,
    Flux,
    Slurm,
}

/// `shardsched batch`.
pub fn main(args: &BatchArgs) -> Result<()> {
    let (path, script_args) = args
        .script
        .split_first()
        .ok_or_else(|| anyhow!("no script given"))?;
    let path = PathBuf::from(path);
    let text = read_script(&path)?;
    let mut warnings = Vec::new();
    let words = directive_words(&text, &mut warnings)
        .with_context(|| format!("script {}", path.display()))?;
    for warning in &warnings {
        output::say(format_args!("{}: warning: {warning}", path.display()));
    }
    let directives = Directives::try_parse_from(&words).map_err(|e| {
        anyhow!(
            "{}: a directive: {}",
            path.display(),
            e.render().to_string().trim()
        )
    })?;
    let mut flags = args.flags.clone().over(directives.flags);
    if flags.jobspec.is_some() {
        bail!("batch takes its options from the script and its flags, not --jobspec");
    }
    if flags.options.job_name.is_none() {
        flags.options.job_name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    }
    let command: Vec<String> = std::iter::once("{{tmpdir}}/script".to_owned())
        .chain(script_args.iter().cloned())
        .collect();
    let mut jobspec = flags.shorthand(command)?;
    jobspec.attributes.set_batch();
    jobspec.attributes.set_file(File {
        name: "script",
        data: &text,
        mode: 0o700,
    });
    submit_main(&flags, jobspec)
}

/// The script's text, within [`SCRIPT_BYTES_MAX`].
fn read_script(path: &PathBuf) -> Result<String> {
    let size = std::fs::metadata(path)
        .with_context(|| format!("reading script {}", path.display()))?
        .len();
    if size > SCRIPT_BYTES_MAX as u64 {
        bail!(
            "script {} is {size} bytes, more than the {SCRIPT_BYTES_MAX}-byte limit",
            path.display()
        );
    }
    std::fs::read_to_string(path).with_context(|| format!("reading script {}", path.display()))
}

/// Every directive's words, in order, as `submit` flags (Slurm's translated; what cannot
/// be is said in `warnings`).
fn directive_words(text: &str, warnings: &mut Vec<String>) -> Result<Vec<String>> {
    let mut words = Vec::new();
    let mut count = 0;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_start();
        if (n == 0 && line.starts_with("#!")) || line.is_empty() {
            continue;
        }
        let (dialect, rest) = if let Some(rest) = line.strip_prefix("#SHARDSCHED") {
            (Dialect::Shardsched, rest)
        } else if let Some(rest) = line.strip_prefix("#FLUX:") {
            (Dialect::Flux, rest)
        } else if let Some(rest) = line.strip_prefix("#SBATCH") {
            (Dialect::Slurm, rest)
        } else if line.starts_with('#') {
            continue;
        } else {
            break;
        };
        count += 1;
        if count > DIRECTIVES_MAX {
            bail!("more than {DIRECTIVES_MAX} directive lines");
        }
        let line_words =
            shlex::split(rest).ok_or_else(|| anyhow!("line {}: unbalanced quotes", n + 1))?;
        match dialect {
            Dialect::Shardsched | Dialect::Flux => words.extend(line_words),
            Dialect::Slurm => words.extend(
                slurm::translate(&line_words, warnings)
                    .map_err(|e| anyhow!("line {}: {e}", n + 1))?,
            ),
        }
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(script: &str) -> SubmitFlags {
        let mut warnings = Vec::new();
        let words = directive_words(script, &mut warnings).expect("directives");
        Directives::try_parse_from(&words).expect("flags").flags
    }

    #[test]
    fn directives_of_every_dialect_are_read_until_the_first_command() {
        let f = flags(
            "#!/bin/bash\n#SBATCH -N 2 -t 10\n\n# a comment\n#FLUX: -q debug\n\
             #SHARDSCHED --urgency 3\necho hi\n#SBATCH -n 9\n",
        );
        assert_eq!(f.nodes, Some(2));
        assert_eq!(f.time_limit, Some(600), "Slurm's -t 10 is ten minutes");
        assert_eq!(f.queue.as_deref(), Some("debug"));
        assert_eq!(f.urgency, Some(3));
        assert_eq!(
            f.tasks, None,
            "after the first command, nothing is a directive"
        );
    }

    #[test]
    fn the_command_line_wins_over_directives_and_lists_add_up() {
        let script = flags("#SBATCH -N 2 --job-name=script-name\n#SHARDSCHED --env A=1\n");
        let line = SubmitFlags {
            nodes: Some(4),
            options: super::super::job_options::JobOptions {
                env: vec!["B=2".into()],
                ..Default::default()
            },
            ..SubmitFlags::default()
        };
        let f = line.over(script);
        assert_eq!(f.nodes, Some(4));
        assert_eq!(f.options.job_name.as_deref(), Some("script-name"));
        assert_eq!(f.options.env, ["A=1", "B=2"]);
    }

    #[test]
    fn a_later_directive_wins_over_an_earlier_one() {
        assert_eq!(flags("#SBATCH -N 2\n#SBATCH -N 3\n").nodes, Some(3));
        let mut warnings = Vec::new();
        assert!(directive_words("#SBATCH -J \"x\n", &mut warnings).is_err());
    }
}
