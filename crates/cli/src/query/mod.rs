//! `shardsched query`: Fluxion's resource-query, command for command.
//!
//! Reads commands (one a line, until `quit` or end of input) and answers them against one
//! [`Matcher`], exactly as resource-query does: the same command names and abbreviations,
//! the same lines in the output file (`-t`, else stdout) — match results through the
//! session's [writer](shardsched_matcher::writer), the INFO blocks, property and status
//! answers — and the same job numbering (a request refused before matching does not consume
//! its id). `info`, `list`, `stat` and timings go to stdout; errors go to stderr and never
//! stop the session. Unknown commands (and `#` comments) are skipped silently. `attach` and
//! `remove` change the graph itself (`grow`).

mod commands;
mod grow;
mod jobs;
mod jobspecs;
mod matching;
mod update;

use std::cell::Cell;
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::rc::Rc;

use anyhow::{Context, Result};
use clap::Args;
use rustc_hash::FxHashSet;
use shardsched_matcher::writer::MatchWriter;
use shardsched_matcher::{MatchPolicy, Matcher, PruneFilters, Writer};
use shardsched_resource::{GraphFormat, read_graph_file};

use jobspecs::Jobspecs;

/// Flags of `shardsched query` (resource-query's spelling).
#[derive(Args, Debug, Clone)]
pub struct QueryArgs {
    /// Graph file to load (default: the embedded 128-node cluster spec).
    #[arg(short = 'L', long = "load-file")]
    pub load_file: Option<PathBuf>,
    /// Graph format: grug, jgf, rv1exec, hwloc, or spec (our TOML cluster spec).
    #[arg(short = 'f', long = "load-format", default_value = "grug")]
    pub load_format: String,
    /// Subsystems to match: CA (containment), PA (power), C+PA, …
    #[arg(short = 'S', long = "match-subsystems", default_value = "CA")]
    pub subsystems: String,
    /// Match policy: first, firstnodex, high, low, hinode, lonode, hinodex, lonodex,
    /// variation, locality, or knobs (`policy=high node_centric=true …`).
    #[arg(short = 'P', long = "match-policy", default_value = "first")]
    pub policy: String,
    /// Match writer: simple, pretty_simple, jgf, jgf_shorthand, rlite, rv1, rv1_nosched,
    /// rv1_shorthand.
    #[arg(short = 'F', long = "match-format", default_value = "simple")]
    pub format: String,
    /// Traverser: simple or flexible.
    #[arg(short = 'T', long = "traverser-policy", default_value = "simple")]
    pub traverser: String,
    /// Prune filters, e.g. `ALL:core,ALL:node` (repeat to add more; blank is ignored).
    #[arg(short = 'p', long = "prune-filters")]
    pub prune_filters: Vec<String>,
    /// Where match results go (default: standard output).
    #[arg(short = 't', long = "test-output")]
    pub output: Option<PathBuf>,
    /// Print the time each match took.
    #[arg(short = 'e', long = "elapse-time")]
    pub elapse: bool,
    /// Accepted for compatibility (there is no prompt).
    #[arg(short = 'd', long = "disable-prompt")]
    pub disable_prompt: bool,
    /// Types to keep when loading (resource-query: hwloc only; other readers ignore it).
    #[arg(short = 'W', long = "load-allowlist")]
    pub load_allowlist: Option<String>,
    /// Accepted for compatibility: the format of a graph dump (dot, graphml).
    #[arg(short = 'g', long = "graph-format")]
    pub graph_format: Option<String>,
    /// Accepted for compatibility: the base name of a graph dump (not written).
    #[arg(short = 'o', long = "graph-output")]
    pub graph_output: Option<String>,
    /// Accepted for compatibility: vertices to reserve room for.
    #[arg(short = 'r', long = "reserve-vtx-vec")]
    pub reserve_vtx_vec: Option<u64>,
}

fn graph_format(s: &str) -> Result<GraphFormat> {
    Ok(match s {
        "grug" => GraphFormat::Grug,
        // Fluxion's jgf_shorthand reader loads a graph as its JGF reader does (the
        // shorthand, an exclusive vertex standing for its subtree, is read by `update`).
        "jgf" | "jgf_shorthand" => GraphFormat::Jgf,
        "rv1exec" | "rv1exec_force" => GraphFormat::Rv1exec,
        "spec" | "toml" => GraphFormat::Spec,
        other => anyhow::bail!(
            "-f {other}: unknown load format (grug, jgf, jgf_shorthand, rv1exec, hwloc, spec)"
        ),
    })
}

/// The dominant subsystem of resource-query's `-S` (its first subsystem): CA, IBA, IBBA,
/// PA, PFS1BA, VA, C+…, IB+IBBA, V+PFS1BA, ALL, in either case.
fn dominant_subsystem(name: &str) -> Result<&'static str> {
    const NAMES: &[(&str, &str)] = &[
        ("CA", "containment"),
        ("IBA", "ibnet"),
        ("IBBA", "ibnetbw"),
        ("PA", "power"),
        ("PFS1BA", "pfs1bw"),
        ("C+IBA", "containment"),
        ("C+IBBA", "containment"),
        ("C+PA", "containment"),
        ("C+PFS1BA", "containment"),
        ("IB+IBBA", "ibnet"),
        ("C+P+IBA", "containment"),
        ("V+PFS1BA", "virtual1"),
        ("VA", "virtual1"),
        ("ALL", "containment"),
    ];
    NAMES
        .iter()
        .find(|(n, _)| *n == name || n.to_lowercase() == name)
        .map(|(_, d)| *d)
        .with_context(|| format!("-S {name}: unknown match subsystems"))
}

/// Fluxion's graph duration (`SYSTEM_MAX_DURATION`, 100 years): a job without a duration
/// lasts that long, and no job runs past it.
const FLUXION_GRAPH_END: i64 = 3_153_600_000;

/// The banner of resource-query's INFO blocks.
const BAR: &str = "INFO: =============================";

/// A job's state as resource-query lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lifecycle {
    Allocated,
    Reserved,
    Canceled,
}

impl Lifecycle {
    fn as_str(self) -> &'static str {
        match self {
            Lifecycle::Allocated => "ALLOCATED",
            Lifecycle::Reserved => "RESERVED",
            Lifecycle::Canceled => "CANCELED",
        }
    }
}

/// What resource-query remembers of a job.
#[derive(Clone, Debug)]
struct JobInfo {
    state: Lifecycle,
    at: i64,
    /// Its jobspec file's path, shared by the jobs matched from one file in a row.
    jobspec: Rc<str>,
    overhead: f64,
}

/// One resource-query session over a loaded graph.
pub struct Session {
    pub matcher: Matcher,
    writer: MatchWriter,
    elapse: bool,
    /// The next job id.
    counter: u64,
    jobs: jobs::JobTable,
    /// The jobs allocated and reserved, asked only whether they hold one (a B-tree's insert
    /// was 360 instructions a match).
    allocations: FxHashSet<u64>,
    reservations: FxHashSet<u64>,
    /// Match times: min, max, sum (seconds).
    perf: (f64, f64, f64),
    /// Jobspecs already parsed: command streams repeat the same few files thousands of
    /// times, and parsing would otherwise dominate the matching.
    jobspecs: Jobspecs,
    /// The last match's printed text, emptied: the next one is written into its memory.
    spare_text: String,
    /// The jobspec path the last recorded job gave, for the next one from the same file.
    last_jobspec: Rc<str>,
    /// resource-query's `errno` as a refused match that sets none prints it
    /// ([`matching::CarriedErrno`]).
    carried_errno: matching::CarriedErrno,
}

impl Session {
    /// Loads the graph and sets up the matcher as the flags say.
    pub fn open(args: &QueryArgs) -> Result<Session> {
        let graph = match &args.load_file {
            Some(path) if args.load_format == "hwloc" => {
                let allowlist = args.load_allowlist.as_deref().unwrap_or("");
                let types: Vec<&str> = allowlist.split(',').filter(|t| !t.is_empty()).collect();
                shardsched_resource::read_hwloc_file(path, &types)?
            }
            Some(path) => read_graph_file(graph_format(&args.load_format)?, path)?,
            None => {
                shardsched_resource::read_cluster_spec(shardsched_resource::DEFAULT_CLUSTER_TOML)
                    .context("the embedded default cluster")?
            }
        };
        let policy = MatchPolicy::parse(&args.policy)?;
        let writer = Writer::parse(&args.format).with_context(|| {
            format!(
                "-F {}: unknown match format (simple, pretty_simple, jgf, jgf_shorthand, rlite, rv1, rv1_nosched, rv1_shorthand)",
                args.format
            )
        })?;
        let spec: Vec<&str> = args
            .prune_filters
            .iter()
            .map(|f| f.trim_matches('"'))
            .filter(|f| !f.trim().is_empty())
            .collect();
        let filters = PruneFilters::parse(&spec.join(","))?;
        let flexible = match args.traverser.as_str() {
            "simple" => false,
            "flexible" => true,
            other => anyhow::bail!("-T {other}: unknown traverser policy (simple, flexible)"),
        };
        let mut matcher = Matcher::new(graph, policy, &filters);
        matcher.count_visits(args.elapse);
        matcher.keep_complaints();
        matcher.set_graph_end(FLUXION_GRAPH_END);
        matcher.set_flexible(flexible);
        let dominant = dominant_subsystem(&args.subsystems)?;
        if dominant != shardsched_resource::CONTAINMENT {
            matcher.set_dominant_subsystem(dominant)?;
        }
        Ok(Session {
            matcher,
            writer: writer.session(),
            elapse: args.elapse,
            counter: 1,
            jobs: jobs::JobTable::default(),
            allocations: FxHashSet::default(),
            reservations: FxHashSet::default(),
            perf: (f64::MAX, 0.0, 0.0),
            jobspecs: Jobspecs::default(),
            spare_text: String::new(),
            last_jobspec: Rc::from(""),
            carried_errno: matching::CarriedErrno::Tty,
        })
    }

    /// `file` as a recorded job keeps it: the same allocation as the last job's when it
    /// names the same file (command streams match one file thousands of times in a row).
    fn jobspec_path(&mut self, file: &str) -> Rc<str> {
        if *self.last_jobspec != *file {
            self.last_jobspec = Rc::from(file);
        }
        Rc::clone(&self.last_jobspec)
    }

    /// Runs commands from `input` until `quit` or end of input. With `flush_each`, what a
    /// command wrote to `out` is flushed before the next command runs (see
    /// [`shares_a_stream`]).
    pub fn run(
        &mut self,
        mut input: impl BufRead,
        out: &mut dyn Write,
        stdout: &mut dyn Write,
        flush_each: bool,
    ) -> Result<()> {
        let mut raw = Vec::new();
        loop {
            raw.clear();
            if input
                .read_until(b'\n', &mut raw)
                .context("reading commands")?
                == 0
            {
                break;
            }
            // A line that is not UTF-8 is one bad command, not the end of the session.
            let Ok(line) = std::str::from_utf8(&raw) else {
                eprintln!("ERROR: command line is not valid UTF-8");
                continue;
            };
            // A command has at most a few words: no allocation for them per line.
            let words: smallvec::SmallVec<[&str; 8]> = words(line).collect();
            let go_on = self.execute(&words, out, stdout)?;
            // resource-query's output is line-flushed: its messages on stderr land after
            // what the commands before printed, even when both go to one file. (Standard
            // output's flush costs nothing when a command printed nothing there.)
            if flush_each {
                out.flush()?;
            }
            stdout.flush()?;
            if !go_on {
                break;
            }
        }
        out.flush()?;
        stdout.flush()?;
        Ok(())
    }

    /// Executes one command line (already split into [`words`]); false at `quit`. Errors are
    /// those of the output only: a command's own errors go to stderr.
    pub fn execute(
        &mut self,
        words: &[&str],
        out: &mut dyn Write,
        stdout: &mut dyn Write,
    ) -> Result<bool> {
        let Some(&cmd) = words.first() else {
            return Ok(true);
        };
        let command = command(cmd);
        if let Some((_, words_taken)) = &command
            && !words_taken.contains(&words.len())
        {
            eprintln!("ERROR: malformed command");
            return Ok(true);
        }
        match command.map(|(name, _)| name) {
            Some("match" | "multi-match") => self.cmd_match(words, out, stdout)?,
            Some("update") => self.cmd_update(words, out, stdout)?,
            Some("cancel") => self.cmd_cancel(words, out)?,
            Some("find") => self.cmd_find(words, out)?,
            Some("partial-cancel") => self.cmd_partial_cancel(words, out, stdout)?,
            Some("set-property") => self.cmd_set_property(words, out)?,
            Some("get-property") => self.cmd_get_property(words, out)?,
            Some("set-status") => self.cmd_set_status(words, out)?,
            Some("get-status") => self.cmd_get_status(words, out)?,
            Some("info") => self.cmd_info(words, stdout)?,
            Some("list") => self.cmd_list(stdout)?,
            Some("stat") => self.cmd_stat(stdout)?,
            Some("cat") => self.cmd_cat(words, stdout)?,
            Some("attach") => self.cmd_attach(words),
            Some("remove") => self.cmd_remove(words),
            Some("help") => commands::help(words, stdout)?,
            Some("quit") => return Ok(false),
            // resource-query skips what it does not know (comments too), silently.
            Some(_) | None => {}
        }
        Ok(true)
    }
}

/// resource-query's command table: names and abbreviations (the first that matches wins,
/// so `j` is `attach`).
fn command(word: &str) -> Option<(&'static str, RangeInclusive<usize>)> {
    /// Every command: its name, its abbreviation, and how many words a line of it takes,
    /// the command's own included (resource-query calls a line outside that "malformed"
    /// and skips it; [`ANY`]: the command looks at its line itself, or takes none).
    const TABLE: &[(&str, &str, RangeInclusive<usize>)] = &[
        ("match", "m", 3..=3),
        ("multi-match", "M", 4..=usize::MAX),
        ("update", "u", 7..=7),
        ("attach", "j", 2..=2),
        ("remove", "j", 3..=3),
        ("find", "f", ANY),
        ("cancel", "c", 2..=3),
        ("partial-cancel", "pc", 4..=5),
        ("set-property", "p", 3..=3),
        ("get-property", "g", 2..=2),
        ("set-status", "t", 3..=3),
        ("get-status", "e", 2..=2),
        ("list", "l", ANY),
        ("info", "i", 2..=2),
        ("stat", "s", 1..=1),
        ("cat", "a", ANY),
        ("help", "h", ANY),
        ("quit", "q", ANY),
    ];
    /// Any number of words.
    const ANY: RangeInclusive<usize> = 1..=usize::MAX;
    TABLE
        .iter()
        .find(|(name, abbr, _)| *name == word || *abbr == word)
        .map(|(name, _, words)| (*name, words.clone()))
}

/// Runs `shardsched query`.
pub fn main(args: &QueryArgs) -> Result<()> {
    let started = std::time::Instant::now();
    let mut session = Session::open(args)?;
    if args.elapse {
        let secs = started.elapsed().as_secs_f64();
        print!("{}", graph_info(&session.matcher.graph, secs));
    }
    let result = run_session(&mut session, args);
    // The process ends right after: freeing a large graph vertex by vertex would only
    // delay the exit.
    std::mem::forget(session);
    result
}

/// What resource-query prints about the graph under `-e`: the load time, vertex and edge
/// counts, the distinct types, names and paths, and how many vertices have each rank.
fn graph_info(g: &shardsched_resource::ResourceGraph, load_secs: f64) -> String {
    let types: std::collections::HashSet<&str> = g.vertices().map(|v| g.kind_str(v)).collect();
    let names: std::collections::HashSet<&str> = g.vertices().map(|v| g.name(v)).collect();
    let mut ranks: BTreeMap<i64, usize> = BTreeMap::new();
    for v in g.vertices() {
        *ranks.entry(g.rank(v)).or_default() += 1;
    }
    let mut out = format!(
        "INFO: Graph Load Time: {}\nINFO: Vertex Count: {}\nINFO: Edge Count: {}\n\
         INFO: by_type Key-Value Pairs: {}\nINFO: by_name Key-Value Pairs: {}\n\
         INFO: by_path Key-Value Pairs: {}\n",
        commands::fmt_g(load_secs),
        g.len(),
        g.edge_count(None),
        types.len(),
        names.len(),
        g.path_count(),
    );
    for (rank, n) in ranks {
        out.push_str(&format!("INFO: number of vertices with rank {rank}: {n}\n"));
    }
    out
}

/// A command line's words, split as resource-query's `std::istream_iterator<std::string>`
/// splits them in the C locale: at runs of the six ASCII spaces of `isspace` (space, tab,
/// line feed, vertical tab, form feed, carriage return). A no-break space or another
/// Unicode space is part of a word, as `isspace` has it. (Reading a pipe in the C locale,
/// resource-query's readline takes each byte above 0x7F for a Meta key, and such bytes
/// never reach its split: `job<U+00A0>a.yaml` is opened there as `joba.yaml`. Not
/// imitated: a file name is kept as written.)
fn words(line: &str) -> impl Iterator<Item = &str> {
    line.split(is_c_space).filter(|w| !w.is_empty())
}

/// `isspace` in the C locale ([`words`]). (A test of each char: an array pattern searches
/// and was slower on the reference streams.)
fn is_c_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\x0B' | '\x0C' | '\r')
}

fn run_session(session: &mut Session, args: &QueryArgs) -> Result<()> {
    // Commands come in reads of up to 64 KiB, counted: a kept jobspec is compared with
    // its file at its first use after each.
    let reads = Rc::new(Cell::new(0));
    session.jobspecs.follow_input(Rc::clone(&reads));
    let stdin = std::io::BufReader::with_capacity(
        1 << 16,
        jobspecs::CountedReads::new(std::io::stdin().lock(), reads),
    );
    let mut stdout = std::io::stdout().lock();
    match &args.output {
        Some(path) => {
            let file = std::fs::File::create(path)
                .with_context(|| format!("creating {}", path.display()))?;
            let flush_each = shares_a_stream(&file);
            let mut out = std::io::BufWriter::with_capacity(OUTPUT_BUFFER_BYTES, file);
            session.run(stdin, &mut out, &mut stdout, flush_each)
        }
        None => {
            // Both streams are standard output, in the order printed (as resource-query's).
            drop(stdout);
            let mut out = std::io::stdout();
            let mut info = std::io::stdout();
            session.run(stdin, &mut out, &mut info, true)
        }
    }
}

/// The `-t` file's write buffer: a match stream writes megabytes there, and one `write`
/// per command was a tenth of a whole `query`'s time.
const OUTPUT_BUFFER_BYTES: usize = 1 << 16;

/// Whether the `-t` file is the file standard error or standard output writes to (`-t
/// /dev/stderr`, or both redirected to one file): only then can anyone see in which order
/// the lines of the two streams were written, so only then is the file flushed after every
/// command (as resource-query's line-flushed output). Unknown counts as shared.
fn shares_a_stream(file: &std::fs::File) -> bool {
    use std::os::fd::{AsFd, BorrowedFd};
    use std::os::unix::fs::MetadataExt;
    let id = |m: std::fs::Metadata| (m.dev(), m.ino());
    let of_fd = |fd: BorrowedFd<'_>| {
        fd.try_clone_to_owned()
            .map(std::fs::File::from)
            .and_then(|f| f.metadata())
            .ok()
            .map(id)
    };
    let Some(mine) = file.metadata().ok().map(id) else {
        return true;
    };
    [
        of_fd(std::io::stderr().as_fd()),
        of_fd(std::io::stdout().as_fd()),
    ]
    .iter()
    .any(|other| other.is_none_or(|o| o == mine))
}

#[cfg(test)]
mod tests {
    use super::words;

    #[test]
    fn words_split_at_the_c_locales_spaces_only() {
        let line = "match\tallocate \x0B\x0Cjob\u{a0}one.yaml\r\n";
        assert_eq!(
            words(line).collect::<Vec<_>>(),
            ["match", "allocate", "job\u{a0}one.yaml"]
        );
        assert_eq!(words(" \t\r\n").count(), 0);
        // U+2003 (em space) is whitespace to Rust's `split_whitespace`, not to `isspace`.
        assert_eq!(
            words("a\u{2003}b c").collect::<Vec<_>>(),
            ["a\u{2003}b", "c"]
        );
    }
}
