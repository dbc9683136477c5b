//! `match` and `multi-match`, as resource-query runs them (its `run_match` and
//! `match_allocate`): what is printed, and which outcomes consume a job id.

use std::io::Write;
use std::time::Instant;

use anyhow::Result;
use shardsched_matcher::writer::WriterError;
use shardsched_matcher::{FluxionOp, MatchError, QueryOutcome};
use shardsched_resource::graph::push_int;

use super::jobspecs::Refused;
use super::{BAR, JobInfo, Lifecycle, Session};

/// resource-query's `errno` after a match, as far as its output tells them apart: EBUSY
/// and ENODEV consume the job id, ENODEV and ENOENT print "Unsatisfiable request".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Errno {
    /// EBUSY: nothing now.
    Busy,
    /// ENODEV: can never fit.
    NoDev,
    /// ENOENT: the id is not consumed, yet the request is called unsatisfiable.
    NoEnt,
    /// EINVAL, ENOTTY and the like: refused; the id is not consumed.
    Inval,
}

impl Errno {
    fn from_matcher(e: shardsched_matcher::Errno) -> Errno {
        use shardsched_matcher::Errno as M;
        match e {
            M::Busy => Errno::Busy,
            M::NoDev => Errno::NoDev,
            M::NoEnt => Errno::NoEnt,
            M::None | M::Range | M::Inval => Errno::Inval,
        }
    }

    fn consumes_id(self) -> bool {
        matches!(self, Errno::Busy | Errno::NoDev)
    }
}

/// The errno a writer's failed emit leaves in Fluxion, and its `strerror`: ENOENT when its
/// edges do not close into one graph, else EINVAL.
pub(super) fn writer_errno(e: &WriterError) -> (Errno, &'static str) {
    match e {
        WriterError::Unbalanced => (Errno::NoEnt, "No such file or directory"),
        _ => (Errno::Inval, "Invalid argument"),
    }
}

/// What resource-query's `errno` holds when a match that sets none is refused: it prints
/// it all the same ("traverser: ..."). Each command starts with ENOTTY (left by the
/// command loop); within one `multi-match` a match that succeeded leaves 0, and a jobspec
/// that could not be opened ENOENT, for the next (random differential seed 62557, against
/// Fluxion's binary).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CarriedErrno {
    Tty,
    Zero,
    NoEnt,
}

impl CarriedErrno {
    fn strerror(self) -> &'static str {
        match self {
            CarriedErrno::Tty => "Inappropriate ioctl for device",
            CarriedErrno::Zero => "Success",
            CarriedErrno::NoEnt => "No such file or directory",
        }
    }
}

/// C's `strerror` of the errno a match left (`carried` when it set none).
fn strerror(e: shardsched_matcher::Errno, carried: CarriedErrno) -> &'static str {
    use shardsched_matcher::Errno as M;
    match e {
        M::None => carried.strerror(),
        M::Busy => "Device or resource busy",
        M::NoDev => "No such device",
        M::NoEnt => "No such file or directory",
        M::Range => "Numerical result out of range",
        M::Inval => "Invalid argument",
    }
}

/// What resource-query's `print_schedule_info` is told of a match or an update.
pub(super) struct Scheduled {
    pub jobid: u64,
    pub ok: bool,
    /// Recorded (allocate, reserve), not only matched.
    pub allocated: bool,
    pub at: i64,
    pub sat: bool,
    pub elapsed: f64,
}

/// What one match produced.
struct Answer {
    ok: bool,
    errno: Errno,
    text: String,
    at: i64,
    elapsed: f64,
}

/// Each `cmd_*` is called by [`Session::execute`] only with a line of as many words as the
/// command takes (the table in `command`), so it indexes `words` within that count.
impl Session {
    /// `match OP FILE` and `multi-match OP FILE…`: one match per jobspec file, in order,
    /// until one fails.
    pub(super) fn cmd_match(
        &mut self,
        words: &[&str],
        out: &mut dyn Write,
        stdout: &mut dyn Write,
    ) -> Result<()> {
        let Some(op) = FluxionOp::parse(words[1]) else {
            eprintln!("ERROR: unknown subcmd {}", words[1]);
            return Ok(());
        };
        self.carried_errno = CarriedErrno::Tty;
        for file in &words[2..] {
            let jobid = self.counter;
            if !self.run_match(jobid, op, file, out, stdout)? {
                break;
            }
        }
        Ok(())
    }

    /// Runs one match and prints its answer; false when it failed.
    fn run_match(
        &mut self,
        jobid: u64,
        op: FluxionOp,
        file: &str,
        out: &mut dyn Write,
        stdout: &mut dyn Write,
    ) -> Result<bool> {
        let js = match self.jobspecs.get(file) {
            Err(msg) => {
                eprintln!("ERROR: {msg}");
                self.carried_errno = CarriedErrno::NoEnt;
                return Ok(true);
            }
            Ok(parsed) => parsed,
        };
        let mut a = self.match_allocate(op, jobid, file, js);
        if a.ok {
            self.carried_errno = CarriedErrno::Zero;
        }
        let sat = a.ok || !matches!(a.errno, Errno::NoDev | Errno::NoEnt);
        out.write_all(a.text.as_bytes())?;
        self.spare_text = std::mem::take(&mut a.text);
        if op == FluxionOp::Satisfiability {
            let what = if sat { "Satisfiable" } else { "Unsatisfiable" };
            writeln!(out, "{BAR}\nINFO: {what} request\n{BAR}")?;
            if self.elapse {
                writeln!(stdout, "INFO: ELAPSE={:.6}", a.elapsed)?;
                self.print_visit_counts(stdout)?;
            }
            return Ok(a.ok);
        }
        let allocated = !matches!(
            op,
            FluxionOp::WithoutAllocating | FluxionOp::WithoutAllocatingFuture
        );
        self.print_schedule_info(
            out,
            stdout,
            &Scheduled {
                jobid,
                ok: a.ok,
                allocated,
                at: a.at,
                sat,
                elapsed: a.elapsed,
            },
        )?;
        Ok(a.ok)
    }

    /// resource-query's `print_schedule_info`: the INFO block after a match or an update.
    pub(super) fn print_schedule_info(
        &self,
        out: &mut dyn Write,
        stdout: &mut dyn Write,
        s: &Scheduled,
    ) -> Result<()> {
        let jobid = s.jobid;
        if s.ok {
            let mode = match (s.allocated, s.at) {
                (false, _) => "MATCHED",
                (true, 0) => "ALLOCATED",
                (true, _) => "RESERVED",
            };
            // By hand rather than `writeln!`: one per match, 1,300 instructions a job of
            // first-1024 through the formatting machinery.
            let mut text = String::with_capacity(160);
            text.push_str(BAR);
            text.push_str("\nINFO: JOBID=");
            match i64::try_from(jobid) {
                Ok(id) => push_int(&mut text, id),
                Err(_) => text.push_str(&jobid.to_string()),
            }
            text.push_str("\nINFO: RESOURCES=");
            text.push_str(mode);
            text.push_str("\nINFO: SCHEDULED AT=");
            if s.at == 0 {
                text.push_str("Now");
            } else {
                push_int(&mut text, s.at);
            }
            text.push('\n');
            if self.elapse {
                out.write_all(text.as_bytes())?;
                text.clear();
                writeln!(stdout, "INFO: ELAPSE={:.6}", s.elapsed)?;
                self.print_visit_counts(stdout)?;
            }
            // The closing bar in the same write (a `writeln!` of it was another 300
            // instructions a match).
            text.push_str(BAR);
            text.push('\n');
            out.write_all(text.as_bytes())?;
        } else {
            writeln!(out, "{BAR}\nINFO: No matching resources found")?;
            if !s.sat {
                writeln!(out, "INFO: Unsatisfiable request")?;
            }
            writeln!(out, "INFO: JOBID={jobid}")?;
            if self.elapse {
                writeln!(out, "INFO: ELAPSE={:.6}", s.elapsed)?;
                self.print_visit_counts(stdout)?;
            }
            writeln!(out, "{BAR}")?;
        }
        Ok(())
    }

    /// The traverser's visit totals, which resource-query prints to standard output after
    /// each ELAPSE line of a match (see the matcher's `visits` module).
    fn print_visit_counts(&self, stdout: &mut dyn Write) -> Result<()> {
        let (pre, post) = self.matcher.visit_totals();
        writeln!(
            stdout,
            "INFO: PREORDER VISIT COUNT={pre}\nINFO: POSTORDER VISIT COUNT={post}"
        )?;
        Ok(())
    }

    /// The errno a refused match leaves: the traverser's, or the one the command carried
    /// when it set none (a jobspec that could not be opened left ENOENT: "Unsatisfiable").
    fn refused_errno(&self) -> Errno {
        match (self.matcher.last_errno(), self.carried_errno) {
            (shardsched_matcher::Errno::None, CarriedErrno::NoEnt) => Errno::NoEnt,
            (e, _) => Errno::from_matcher(e),
        }
    }

    /// What resource-query prints when its traverser fails with `errno`: the traverser's
    /// messages when it left any, else the errno unless it is EBUSY or ENODEV (a match that
    /// found nothing, or can never).
    fn say_why_the_traverser_failed(&self, errno: Errno) {
        let said = self.matcher.last_complaints();
        if !said.is_empty() {
            eprintln!("match_allocate: ERROR: {said}");
        } else if !errno.consumes_id() {
            eprintln!(
                "match_allocate: ERROR: traverser: {}",
                strerror(self.matcher.last_errno(), self.carried_errno)
            );
        }
    }

    /// resource-query's `match_allocate`: runs the match, feeds and empties the writer,
    /// records the job, consumes the id unless the request was refused before matching.
    fn match_allocate(
        &mut self,
        op: FluxionOp,
        jobid: u64,
        file: &str,
        js: Result<std::rc::Rc<shardsched_jobspec::Jobspec>, Refused>,
    ) -> Answer {
        let started = Instant::now();
        let fail = |errno, started: Instant| Answer {
            ok: false,
            errno,
            text: String::new(),
            at: 0,
            elapsed: started.elapsed().as_secs_f64(),
        };
        let js = match js {
            Ok(js) => js,
            Err(refused) => {
                // A type read before the error that Fluxion does not know is what its reader
                // refuses first.
                let (types, graph) = (self.matcher.types(), &self.matcher.graph);
                let msg = if refused
                    .types
                    .iter()
                    .any(|t| types.lookup(graph, t).is_none())
                {
                    shardsched_matcher::UNKNOWN_TYPE_MESSAGE
                } else {
                    refused.message.as_str()
                };
                eprintln!("match_allocate: ERROR: Jobspec error for {jobid}: {msg}");
                return fail(Errno::Inval, started);
            }
        };
        let outcome = match self.matcher.schedule(op, &js, jobid, 0) {
            Ok(o) => o,
            Err(MatchError::BadRequest(msg)) if msg == shardsched_matcher::UNKNOWN_TYPE_MESSAGE => {
                eprintln!("match_allocate: ERROR: Jobspec error for {jobid}: {msg}");
                return fail(Errno::Inval, started);
            }
            Err(_) => {
                eprintln!("match_allocate: ERROR: traverser: Invalid argument");
                return fail(Errno::Inval, started);
            }
        };
        let (ok, errno, at, record) = match &outcome {
            QueryOutcome::Allocated(at, a)
            | QueryOutcome::Reserved(at, a)
            | QueryOutcome::Matched(at, a) => {
                let recorded = !matches!(outcome, QueryOutcome::Matched(..));
                self.matcher.feed_writer(&mut self.writer, a, recorded);
                if let Some(q) = &js.attributes.queue {
                    self.writer.emit_attr("queue", q);
                }
                let record = !matches!(outcome, QueryOutcome::Matched(..));
                (op != FluxionOp::Satisfiability, Errno::Busy, *at, record)
            }
            QueryOutcome::NoMatch { .. } => {
                let e = self.refused_errno();
                self.say_why_the_traverser_failed(e);
                if !e.consumes_id() {
                    // As resource-query: refused without consuming the id.
                    return fail(e, started);
                }
                (false, e, 0, false)
            }
            QueryOutcome::Satisfiable(b) => {
                let e = if *b {
                    Errno::Busy
                } else {
                    let e = self.refused_errno();
                    self.say_why_the_traverser_failed(e);
                    e
                };
                (*b, e, 0, false)
            }
        };
        if let QueryOutcome::Allocated(_, a)
        | QueryOutcome::Reserved(_, a)
        | QueryOutcome::Matched(_, a) = outcome
        {
            // Its memory serves the next match's list instead of being freed and taken again.
            self.matcher.recycle(a);
        }
        let mut text = std::mem::take(&mut self.spare_text);
        text.clear();
        if let Err(e) = self.writer.emit(&mut text) {
            let (errno, why) = writer_errno(&e);
            eprintln!("match_allocate: ERROR: match writer emit: {why}");
            return fail(errno, started);
        }
        let elapsed = started.elapsed().as_secs_f64();
        if ok && record {
            let state = if at == 0 {
                self.allocations.insert(jobid);
                Lifecycle::Allocated
            } else {
                self.reservations.insert(jobid);
                Lifecycle::Reserved
            };
            let jobspec = self.jobspec_path(file);
            self.jobs.insert(
                jobid,
                JobInfo {
                    state,
                    at,
                    jobspec,
                    overhead: elapsed,
                },
            );
        }
        if !matches!(
            op,
            FluxionOp::Satisfiability
                | FluxionOp::WithoutAllocating
                | FluxionOp::WithoutAllocatingFuture
        ) {
            // (resource-query's match times are kept by `update` only.)
            self.counter += 1;
        }
        Answer {
            ok,
            errno,
            text,
            at,
            elapsed,
        }
    }
}
