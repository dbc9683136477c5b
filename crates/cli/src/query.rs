//! `shardsched query`: Fluxion's resource-query, command for command.
//!
//! Reads commands (one a line, until `quit` or end of input) and answers them against one
//! [`Matcher`]. Match results and property reads go to the output file (`-t`, else stdout);
//! `info`, `list`, `stat` and timing go to stdout; errors go to stderr and never stop the
//! session. The byte layout of every line follows resource-query so that Fluxion's own test
//! cases can be replayed against us.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use shardsched_jobspec::Jobspec;
use shardsched_matcher::{
    JobState, MatchOp, MatchOutcome, MatchPolicy, Matcher, PruneFilters, Writer,
};
use shardsched_resource::{GraphFormat, Status, read_graph_file};

/// Flags of `shardsched query` (resource-query's spelling).
#[derive(Args, Debug, Clone)]
pub struct QueryArgs {
    /// Graph file to load (default: the embedded 128-node cluster spec).
    #[arg(short = 'L', long = "load-file")]
    pub load_file: Option<PathBuf>,
    /// Graph format: grug, jgf, rv1exec, or spec (our TOML cluster spec).
    #[arg(short = 'f', long = "load-format", default_value = "grug")]
    pub load_format: String,
    /// Subsystems to use (only containment, `CA`, is matched; others are loaded).
    #[arg(short = 'S', long = "match-subsystems", default_value = "CA")]
    pub subsystems: String,
    /// Match policy: first, high, low, hinode, lonode, hinodex, lonodex, firstnodex.
    #[arg(short = 'P', long = "match-policy", default_value = "first")]
    pub policy: String,
    /// Match writer: simple, pretty_simple, jgf, rv1, rv1_nosched.
    #[arg(short = 'F', long = "match-format", default_value = "simple")]
    pub format: String,
    /// Traverser: simple (flexible is accepted and treated as simple).
    #[arg(short = 'T', long = "traverser", default_value = "simple")]
    pub traverser: String,
    /// Prune filters, e.g. `ALL:core,ALL:node`.
    #[arg(long = "prune-filters", default_value = "ALL:core,ALL:node")]
    pub prune_filters: String,
    /// Where match results go (default: standard output).
    #[arg(short = 't', long = "test-output")]
    pub output: Option<PathBuf>,
    /// Print the time each match took.
    #[arg(short = 'e', long = "elapse-time")]
    pub elapse: bool,
}

fn graph_format(s: &str) -> Result<GraphFormat> {
    Ok(match s {
        "grug" => GraphFormat::Grug,
        "jgf" => GraphFormat::Jgf,
        "rv1exec" => GraphFormat::Rv1exec,
        "spec" | "toml" => GraphFormat::Spec,
        other => anyhow::bail!("-f {other}: unknown load format (grug, jgf, rv1exec, spec)"),
    })
}

/// One resource-query session over a loaded graph.
pub struct Session {
    pub matcher: Matcher,
    writer: Writer,
    elapse: bool,
    next_jobid: u64,
    /// Per-match elapsed seconds, for `stat`.
    timings: Vec<f64>,
    /// Jobspecs already parsed, by file, with the (size, modification time) they were read
    /// at: command streams repeat the same few files thousands of times, and parsing would
    /// otherwise dominate the matching.
    parsed: HashMap<String, (FileStamp, Rc<Jobspec>)>,
}

type FileStamp = (u64, Option<std::time::SystemTime>);

/// How many distinct jobspecs a session keeps parsed.
const PARSED_JOBSPECS_MAX: usize = 1024;

impl Session {
    /// Loads the graph and sets up the matcher as the flags say.
    pub fn open(args: &QueryArgs) -> Result<Session> {
        let graph = match &args.load_file {
            Some(path) => read_graph_file(graph_format(&args.load_format)?, path)?,
            None => {
                shardsched_resource::read_cluster_spec(shardsched_resource::DEFAULT_CLUSTER_TOML)
                    .context("the embedded default cluster")?
            }
        };
        let policy = MatchPolicy::parse(&args.policy)?;
        let writer = Writer::parse(&args.format).with_context(|| {
            format!(
                "-F {}: unknown match format (simple, pretty_simple, jgf, rv1, rv1_nosched)",
                args.format
            )
        })?;
        let filters = PruneFilters::parse(args.prune_filters.trim_matches('"'))?;
        Ok(Session {
            matcher: Matcher::new(graph, policy, &filters),
            writer,
            elapse: args.elapse,
            next_jobid: 1,
            timings: Vec::new(),
            parsed: HashMap::new(),
        })
    }

    /// Runs commands from `input` until `quit` or end of input.
    pub fn run(
        &mut self,
        mut input: impl BufRead,
        out: &mut dyn Write,
        stdout: &mut dyn Write,
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
            let words: Vec<&str> = line.split_whitespace().collect();
            if words.first() == Some(&"quit") {
                break;
            }
            if let Err(e) = self.execute(&words, out, stdout) {
                eprintln!("ERROR: {e:#}");
            }
        }
        out.flush()?;
        stdout.flush()?;
        Ok(())
    }

    /// Executes one command line (already split into words).
    pub fn execute(
        &mut self,
        words: &[&str],
        out: &mut dyn Write,
        stdout: &mut dyn Write,
    ) -> Result<()> {
        let Some(&cmd) = words.first() else {
            return Ok(());
        };
        match cmd {
            "match" => self.cmd_match(words, out, stdout),
            "multi-match" => {
                let (op, files) = words.split_at(2.min(words.len()));
                for f in files {
                    let mut w: Vec<&str> = op.to_vec();
                    w.push(f);
                    self.cmd_match(&w, out, stdout)?;
                }
                Ok(())
            }
            "cancel" => {
                let id = parse_jobid(words.get(1))?;
                self.matcher.cancel(id)?;
                Ok(())
            }
            "set-status" => {
                let (path, status) = (arg(words, 1, "PATH")?, arg(words, 2, "up|down")?);
                let status = match status {
                    "up" => Status::Up,
                    "down" => Status::Down,
                    other => anyhow::bail!("set-status: unknown status {other:?} (up or down)"),
                };
                self.matcher.set_status(path, status)?;
                Ok(())
            }
            "get-status" => {
                let v = self.matcher.vertex(arg(words, 1, "PATH")?)?;
                writeln!(out, "{}", self.matcher.graph.status(v).as_str())?;
                Ok(())
            }
            "set-property" => {
                let path = arg(words, 1, "PATH")?;
                let kv = arg(words, 2, "KEY=VALUE")?;
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                let vx = self.matcher.vertex(path)?;
                self.matcher.graph.set_property(vx, k, v);
                Ok(())
            }
            "get-property" => {
                let vx = self.matcher.vertex(arg(words, 1, "PATH")?)?;
                match self.matcher.graph.properties(vx) {
                    Some(props) if !props.is_empty() => {
                        for (k, v) in props {
                            writeln!(out, "{k}={v}")?;
                        }
                    }
                    _ => anyhow::bail!("get-property: no properties set on {}", words[1]),
                }
                Ok(())
            }
            "info" => {
                let id = parse_jobid(words.get(1))?;
                let job = self
                    .matcher
                    .job(id)
                    .with_context(|| format!("info: nonexistent job {id}"))?;
                let mode = match job.state {
                    JobState::Allocated => "ALLOCATED",
                    JobState::Reserved => "RESERVED",
                };
                writeln!(stdout, "INFO: {id}, {mode}, {}", job.alloc.at)?;
                Ok(())
            }
            "list" => {
                for (id, job) in self.matcher.jobs() {
                    let mode = match job.state {
                        JobState::Allocated => "ALLOCATED",
                        JobState::Reserved => "RESERVED",
                    };
                    writeln!(stdout, "INFO: {id}, {mode}, {}", job.alloc.at)?;
                }
                Ok(())
            }
            "stat" => {
                let g = &self.matcher.graph;
                writeln!(stdout, "INFO: Num. of Vertices: {}", g.len())?;
                writeln!(stdout, "INFO: Num. of Edges: {}", g.edge_count(None))?;
                writeln!(stdout, "INFO: Num. of Jobs Matched: {}", self.timings.len())?;
                if !self.timings.is_empty() {
                    let sum: f64 = self.timings.iter().sum();
                    let max = self.timings.iter().copied().fold(0.0, f64::max);
                    let min = self.timings.iter().copied().fold(f64::INFINITY, f64::min);
                    writeln!(stdout, "INFO: Min. Match Time: {min}")?;
                    writeln!(stdout, "INFO: Max. Match Time: {max}")?;
                    writeln!(
                        stdout,
                        "INFO: Avg. Match Time: {}",
                        sum / self.timings.len() as f64
                    )?;
                }
                Ok(())
            }
            c if c.starts_with('#') => Ok(()),
            other => anyhow::bail!("unknown command {other:?}"),
        }
    }

    /// The parsed jobspec in `file`, parsed again only when the file changed (by size or
    /// modification time): streams repeat the same few files thousands of times.
    fn jobspec(&mut self, file: &str) -> Result<Rc<Jobspec>> {
        let meta = std::fs::metadata(file).with_context(|| format!("can't open {file}"))?;
        let stamp = (meta.len(), meta.modified().ok());
        if let Some((seen, js)) = self.parsed.get(file)
            && *seen == stamp
        {
            return Ok(Rc::clone(js));
        }
        let text = std::fs::read_to_string(file).with_context(|| format!("can't open {file}"))?;
        let js = Rc::new(shardsched_jobspec::parse(&text).with_context(|| file.to_string())?);
        if self.parsed.len() >= PARSED_JOBSPECS_MAX {
            self.parsed.clear();
        }
        self.parsed
            .insert(file.to_string(), (stamp, Rc::clone(&js)));
        Ok(js)
    }

    fn cmd_match(
        &mut self,
        words: &[&str],
        out: &mut dyn Write,
        stdout: &mut dyn Write,
    ) -> Result<()> {
        let sub = arg(
            words,
            1,
            "allocate|allocate_with_satisfiability|allocate_orelse_reserve|satisfiability",
        )?;
        let op =
            MatchOp::parse(sub).with_context(|| format!("match: unknown subcommand {sub:?}"))?;
        let file = arg(words, 2, "JOBSPEC")?;
        let js = self.jobspec(file)?;
        let jobid = self.next_jobid;
        let started = Instant::now();
        let outcome = self.matcher.run(op, &js, jobid, 0)?;
        let elapsed = started.elapsed().as_secs_f64();
        let bar = "INFO: =============================";
        match outcome {
            MatchOutcome::Satisfiable(sat) => {
                writeln!(out, "{bar}")?;
                writeln!(
                    out,
                    "INFO: {}",
                    if sat {
                        "Satisfiable request"
                    } else {
                        "Unsatisfiable request"
                    }
                )?;
                writeln!(out, "{bar}")?;
                return Ok(());
            }
            MatchOutcome::Allocated(a) | MatchOutcome::Reserved(a) => {
                out.write_all(self.writer.render(&self.matcher.graph, &a).as_bytes())?;
                let reserved = a.at != 0;
                writeln!(out, "{bar}")?;
                writeln!(out, "INFO: JOBID={jobid}")?;
                writeln!(
                    out,
                    "INFO: RESOURCES={}",
                    if reserved { "RESERVED" } else { "ALLOCATED" }
                )?;
                let at = if reserved {
                    a.at.to_string()
                } else {
                    "Now".to_string()
                };
                writeln!(out, "INFO: SCHEDULED AT={at}")?;
                if self.elapse {
                    writeln!(stdout, "INFO: ELAPSE={elapsed:.6}")?;
                }
                writeln!(out, "{bar}")?;
            }
            MatchOutcome::NoMatch { satisfiable } => {
                writeln!(out, "{bar}")?;
                writeln!(out, "INFO: No matching resources found")?;
                if satisfiable == Some(false) {
                    writeln!(out, "INFO: Unsatisfiable request")?;
                }
                writeln!(out, "INFO: JOBID={jobid}")?;
                if self.elapse {
                    writeln!(stdout, "INFO: ELAPSE={elapsed:.6}")?;
                }
                writeln!(out, "{bar}")?;
            }
        }
        self.timings.push(elapsed);
        self.next_jobid += 1;
        Ok(())
    }
}

fn arg<'a>(words: &[&'a str], i: usize, what: &str) -> Result<&'a str> {
    words
        .get(i)
        .copied()
        .with_context(|| format!("{}: missing {what}", words.first().copied().unwrap_or("")))
}

fn parse_jobid(w: Option<&&str>) -> Result<u64> {
    let w = w.context("missing JOBID")?;
    w.parse().with_context(|| format!("bad JOBID {w:?}"))
}

/// Runs `shardsched query`.
pub fn main(args: &QueryArgs) -> Result<()> {
    let mut session = Session::open(args)?;
    let result = run_session(&mut session, args);
    // The process ends right after: freeing a large graph vertex by vertex would only
    // delay the exit.
    std::mem::forget(session);
    result
}

fn run_session(session: &mut Session, args: &QueryArgs) -> Result<()> {
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    match &args.output {
        Some(path) => {
            let file = std::fs::File::create(path)
                .with_context(|| format!("creating {}", path.display()))?;
            let mut out = std::io::BufWriter::new(file);
            session.run(stdin.lock(), &mut out, &mut stdout)
        }
        None => {
            let mut buf = Vec::new();
            let result = session.run(stdin.lock(), &mut buf, &mut stdout);
            // What was matched before an error is still printed.
            stdout.write_all(&buf)?;
            result
        }
    }
}
