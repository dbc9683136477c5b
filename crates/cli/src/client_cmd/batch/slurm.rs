//! `#SBATCH` directives as `submit` flags: a migration aid. Slurm's options that have a
//! counterpart here are translated (its time formats and output patterns too); the others
//! are skipped with a warning naming them, so a script written for Slurm runs here with
//! what it asks that this scheduler has.

use anyhow::{Result, anyhow, bail};

/// What a Slurm option becomes.
#[derive(Clone, Copy)]
enum To {
    /// This flag, with the option's value as it is.
    Flag(&'static str),
    /// This flag, with the value translated.
    Map(&'static str, fn(&str) -> Result<String>),
    /// These words, for an option without a value.
    Words(&'static [&'static str]),
    /// `--export`: environment rules.
    Export,
}

/// Slurm's options we translate: short name, long name, and what each becomes.
const OPTIONS: &[(Option<char>, &str, To)] = &[
    (Some('N'), "nodes", To::Flag("-N")),
    (Some('n'), "ntasks", To::Flag("-n")),
    (Some('c'), "cpus-per-task", To::Flag("-c")),
    (None, "gpus-per-task", To::Flag("-g")),
    (Some('t'), "time", To::Map("-t", time)),
    (Some('J'), "job-name", To::Flag("-J")),
    (Some('o'), "output", To::Map("-o", pattern)),
    (Some('e'), "error", To::Map("-e", pattern)),
    (Some('p'), "partition", To::Flag("-q")),
    (Some('w'), "nodelist", To::Flag("-w")),
    (Some('x'), "exclude", To::Flag("--exclude")),
    (Some('C'), "constraint", To::Map("--requires", constraint)),
    (Some('b'), "begin", To::Map("--begin-time", begin)),
    (Some('d'), "dependency", To::Flag("--dependency")),
    (
        None,
        "kill-on-invalid-dep",
        To::Map("--dependency-policy", kill_on_invalid_dep),
    ),
    (Some('D'), "chdir", To::Flag("--cwd")),
    (Some('a'), "array", To::Flag("--array")),
    (None, "exclusive", To::Words(&["-x"])),
    (Some('H'), "hold", To::Words(&["--urgency", "hold"])),
    (None, "requeue", To::Words(&["--requeue"])),
    (None, "export", To::Export),
];

/// The `submit` words of one `#SBATCH` line's `words`; skipped options go to `warnings`.
pub(super) fn translate(words: &[String], warnings: &mut Vec<String>) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let word = &words[i];
        i += 1;
        let (option, inline) = split(word)?;
        let known = OPTIONS.iter().find(|(short, long, _)| match &option {
            Name::Short(c) => *short == Some(*c),
            Name::Long(l) => long == l,
        });
        let Some(&(_, _, to)) = known else {
            // Its value is the next word unless it came with one, or the next is a flag.
            if inline.is_none() && words.get(i).is_some_and(|w| !w.starts_with('-')) {
                i += 1;
            }
            warnings.push(format!("#SBATCH {word}: not supported here, skipped"));
            continue;
        };
        if let To::Words(flags) = to {
            out.extend(flags.iter().map(|f| (*f).to_owned()));
            continue;
        }
        let value = match inline {
            Some(v) => v,
            None => {
                let v = words
                    .get(i)
                    .ok_or_else(|| anyhow!("#SBATCH {word} needs a value"))?
                    .clone();
                i += 1;
                v
            }
        };
        match to {
            To::Flag(flag) => out.extend([flag.to_owned(), value]),
            To::Map(flag, map) => out.extend([flag.to_owned(), map(&value)?]),
            To::Export => out.extend(export(&value)),
            To::Words(_) => {}
        }
    }
    Ok(out)
}

enum Name {
    Short(char),
    Long(String),
}

/// An option word: `--name[=value]`, `-X[value]`.
fn split(word: &str) -> Result<(Name, Option<String>)> {
    if let Some(long) = word.strip_prefix("--") {
        return Ok(match long.split_once('=') {
            Some((name, value)) => (Name::Long(name.to_owned()), Some(value.to_owned())),
            None => (Name::Long(long.to_owned()), None),
        });
    }
    let mut chars = word.strip_prefix('-').unwrap_or_default().chars();
    let Some(c) = chars.next() else {
        bail!("#SBATCH {word:?} is not an option");
    };
    let rest: String = chars.collect();
    let rest = rest.strip_prefix('=').map(str::to_owned).unwrap_or(rest);
    Ok((Name::Short(c), (!rest.is_empty()).then_some(rest)))
}

/// Slurm's time limit (`M`, `M:S`, `H:M:S`, `D-H`, `D-H:M`, `D-H:M:S`; `UNLIMITED`) in
/// seconds, as `-t` takes it (`600s`).
fn time(text: &str) -> Result<String> {
    let bad = || anyhow!("#SBATCH --time {text:?} is not a Slurm time (e.g. 30, 1:00:00, 2-12)");
    if text.eq_ignore_ascii_case("unlimited") || text.eq_ignore_ascii_case("infinite") {
        bail!("#SBATCH --time {text}: give a finite time limit");
    }
    let number = |s: &str| s.parse::<u64>().map_err(|_| bad());
    let (days, clock) = match text.split_once('-') {
        Some((d, rest)) => (number(d)?, Some(rest)),
        None => (0, None),
    };
    let seconds = match clock {
        // D-H, D-H:M, D-H:M:S
        Some(rest) => {
            let parts: Vec<&str> = rest.split(':').collect();
            let [h, m, s] = match parts[..] {
                [h] => [h, "0", "0"],
                [h, m] => [h, m, "0"],
                [h, m, s] => [h, m, s],
                _ => return Err(bad()),
            };
            days * 86_400 + number(h)? * 3600 + number(m)? * 60 + number(s)?
        }
        // M, M:S, H:M:S
        None => {
            let parts: Vec<&str> = text.split(':').collect();
            match parts[..] {
                [m] => number(m)? * 60,
                [m, s] => number(m)? * 60 + number(s)?,
                [h, m, s] => number(h)? * 3600 + number(m)? * 60 + number(s)?,
                _ => return Err(bad()),
            }
        }
    };
    Ok(format!("{seconds}s"))
}

/// Slurm's file name patterns as templates: `%j` the job id, `%x` its name, `%A` and `%a`
/// an array's id and index, `%%` a `%`.
fn pattern(text: &str) -> Result<String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('j') => out.push_str("{{id}}"),
            Some('x') => out.push_str("{{name}}"),
            Some('A') => out.push_str("{{array_id}}"),
            Some('a') => out.push_str("{{array_index}}"),
            Some('%') => out.push('%'),
            Some(other) => bail!("#SBATCH output pattern %{other} is not supported here"),
            None => out.push('%'),
        }
    }
    Ok(out)
}

/// Slurm's `--constraint` (`a&b`, `a,b`): properties all required.
fn constraint(text: &str) -> Result<String> {
    if text.contains(['|', '[', '*']) {
        bail!("#SBATCH --constraint {text:?}: only features joined by & are supported here");
    }
    Ok(text.replace('&', ","))
}

/// Slurm's `--begin` (`now+1hour`, `16:00`, `2026-01-20T12:34:00`) as `--begin-time`.
/// `--kill-on-invalid-dep=yes|no`: `--dependency-policy cancel|pend`.
fn kill_on_invalid_dep(text: &str) -> Result<String> {
    match text {
        "yes" => Ok("cancel".to_owned()),
        "no" => Ok("pend".to_owned()),
        other => bail!("#SBATCH --kill-on-invalid-dep: {other:?} is not yes or no"),
    }
}

fn begin(text: &str) -> Result<String> {
    let Some(ahead) = text.strip_prefix("now+") else {
        return Ok(text.to_owned());
    };
    let digits = ahead.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = match &ahead[digits.len()..] {
        "" | "s" | "sec" | "secs" | "second" | "seconds" => "s",
        "min" | "mins" | "minute" | "minutes" => "m",
        "hour" | "hours" => "h",
        "day" | "days" => "d",
        other => bail!("#SBATCH --begin: unknown unit {other:?}"),
    };
    Ok(format!("+{digits}{unit}"))
}

/// Slurm's `--export` (`ALL`, `NONE`, `[ALL,]NAME[=VALUE],…`) as environment rules.
fn export(text: &str) -> Vec<String> {
    let items: Vec<&str> = text.split(',').filter(|s| !s.is_empty()).collect();
    let all = items.iter().any(|i| i.eq_ignore_ascii_case("ALL"));
    let mut out = Vec::new();
    if !all {
        // NONE, or a list without ALL: only what it names.
        out.extend(["--env-remove".to_owned(), "*".to_owned()]);
    }
    for item in items {
        if !item.eq_ignore_ascii_case("ALL") && !item.eq_ignore_ascii_case("NONE") {
            out.extend(["--env".to_owned(), item.to_owned()]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> (Vec<String>, Vec<String>) {
        let mut warnings = Vec::new();
        let split = shlex::split(line).expect("words");
        let out = translate(&split, &mut warnings).expect("translated");
        (out, warnings)
    }

    #[test]
    fn slurm_options_become_submit_flags() {
        let (out, warnings) = words("-N 2 -t 10 --job-name=sweep -o out-%j-%a.txt -p debug");
        assert_eq!(
            out,
            [
                "-N",
                "2",
                "-t",
                "600s",
                "-J",
                "sweep",
                "-o",
                "out-{{id}}-{{array_index}}.txt",
                "-q",
                "debug"
            ]
        );
        assert!(warnings.is_empty());
        let (out, _) = words("-N2 --exclusive -H --begin=now+2hours -C ssd&gpu");
        assert_eq!(
            out,
            [
                "-N",
                "2",
                "-x",
                "--urgency",
                "hold",
                "--begin-time",
                "+2h",
                "--requires",
                "ssd,gpu"
            ]
        );
    }

    #[test]
    fn dependencies_become_the_dependency_flags() {
        let (out, warnings) = words("--dependency=afterok:12:13 --kill-on-invalid-dep=yes");
        assert_eq!(
            out,
            [
                "--dependency",
                "afterok:12:13",
                "--dependency-policy",
                "cancel"
            ]
        );
        assert!(warnings.is_empty());
    }

    #[test]
    fn unsupported_options_are_skipped_with_a_warning() {
        let (out, warnings) = words("--mem=4G -A physics --mail-type END -n 4");
        assert_eq!(out, ["-n", "4"]);
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(warnings[0].contains("--mem=4G"), "{warnings:?}");
    }

    #[test]
    fn slurm_times_and_exports_read_as_slurm_means_them() {
        assert_eq!(time("10").expect("t"), "600s");
        assert_eq!(time("1:30").expect("t"), "90s");
        assert_eq!(time("2:00:00").expect("t"), "7200s");
        assert_eq!(time("1-12").expect("t"), "129600s");
        assert_eq!(time("1-0:30:5").expect("t"), "88205s");
        assert!(time("1:2:3:4").is_err());
        assert!(time("UNLIMITED").is_err());
        assert_eq!(export("ALL"), Vec::<String>::new());
        assert_eq!(export("NONE"), ["--env-remove", "*"]);
        assert_eq!(
            export("A=1,B"),
            ["--env-remove", "*", "--env", "A=1", "--env", "B"]
        );
    }
}
