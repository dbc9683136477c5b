//! resource-query's other commands: cancel, properties, status, and the job listings.

use std::io::Write;

use anyhow::Result;
use std::collections::BTreeSet;

use shardsched_matcher::find::FindError;
use shardsched_matcher::{MatchError, RemoveError};
use shardsched_resource::{Status, VertexId};

use super::{BAR, Lifecycle, Session};

/// Each `cmd_*` is called by [`Session::execute`] only with a line of as many words as the
/// command takes (the table in `command`), so it indexes `words` within that count.
impl Session {
    pub(super) fn cmd_cancel(&mut self, words: &[&str], out: &mut dyn Write) -> Result<()> {
        let jobid = strtoll(words[1]) as u64;
        if !self.allocations.contains(&jobid) && !self.reservations.contains(&jobid) {
            eprintln!("cancel: ERROR: nonexistent job {jobid}");
            return Ok(());
        }
        let counts = self.matcher.cancel_counts(jobid);
        if let Err(e) = self.matcher.cancel(jobid) {
            let _ = e;
            eprintln!("cancel: ERROR: error encountered while removing job {jobid}");
            return Ok(());
        }
        self.allocations.remove(&jobid);
        self.reservations.remove(&jobid);
        if let Some(j) = self.jobs.get_mut(jobid) {
            j.state = Lifecycle::Canceled;
        }
        self.matcher.set_visit_totals(counts.unwrap_or((0, 0)));
        if words.get(2) == Some(&"stats") {
            let (pre, post) = counts.unwrap_or((0, 0));
            writeln!(
                out,
                "{BAR}\nINFO: CANCEL PREORDER COUNT=\"{pre}\"\nINFO: CANCEL POSTORDER COUNT=\"{post}\"\n{BAR}"
            )?;
        }
        Ok(())
    }

    /// `partial-cancel JOBID jgf|rv1exec FILE [stats]`: gives back the part of an
    /// allocation the R in FILE names (Fluxion's `remove` with an R).
    pub(super) fn cmd_partial_cancel(
        &mut self,
        words: &[&str],
        out: &mut dyn Write,
        stdout: &mut dyn Write,
    ) -> Result<()> {
        let jobid = strtoll(words[1]) as u64;
        let format = words[2];
        if format != "jgf" && format != "rv1exec" {
            eprintln!("ERROR: unsupported reader {format}");
            return Ok(());
        }
        let Ok(text) = std::fs::read(words[3]) else {
            eprintln!("ERROR: can't open {}", words[3]);
            return Ok(());
        };
        let text = String::from_utf8_lossy(&text);
        if !self.allocations.contains(&jobid) {
            if self.reservations.contains(&jobid) {
                eprintln!("ERROR: reservations not currently supported by partial cancel");
            } else {
                eprintln!("ERROR: nonexistent job {jobid}");
            }
            return Ok(());
        }
        let unread = |_| MatchError::Remove(RemoveError::ReadFailed);
        let result = if format == "rv1exec" {
            rv1exec_ranks(&text)
                .map_err(unread)
                .and_then(|ranks| self.matcher.partial_cancel_ranks(jobid, &ranks))
        } else {
            self.jgf_vertices(&text)
                .map_err(unread)
                .and_then(|vs| self.matcher.partial_cancel_vertices(jobid, &vs))
        };
        match result {
            Ok(done) => {
                if done.full {
                    self.allocations.remove(&jobid);
                    if let Some(j) = self.jobs.get_mut(jobid) {
                        j.state = Lifecycle::Canceled;
                    }
                }
            }
            Err(e) => {
                // resource-query prints why its traverser's `remove` failed on standard
                // output, then the error on standard error.
                if let MatchError::Remove(why) = e {
                    writeln!(stdout, "{why}")?;
                }
                eprintln!("ERROR: error encountered while removing job {jobid}");
            }
        }
        // Fluxion's partial cancel visits nothing it counts, and its totals say so.
        self.matcher.set_visit_totals((0, 0));
        if words.get(4) == Some(&"stats") {
            writeln!(
                out,
                "{BAR}\nINFO: PARTIAL CANCEL PREORDER COUNT=\"0\"\nINFO: PARTIAL CANCEL POSTORDER COUNT=\"0\"\n{BAR}"
            )?;
        }
        Ok(())
    }

    /// The vertices a JGF R names, found as Fluxion's JGF reader finds them (by path and
    /// rank, then the same type, basename, name, id, size and paths); `None` where not.
    fn jgf_vertices(&self, text: &str) -> std::result::Result<Vec<Option<VertexId>>, String> {
        let doc = shardsched_resource::parse_jgf(text).map_err(|e| e.to_string())?;
        Ok(self.jgf_vertices_of(&doc))
    }

    /// [`Session::jgf_vertices`] of a parsed JGF: one entry per vertex up to and including
    /// the first not found.
    pub(super) fn jgf_vertices_of(
        &self,
        doc: &shardsched_resource::JgfDocument,
    ) -> Vec<Option<VertexId>> {
        let g = &self.matcher.graph;
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::with_capacity(doc.vertices.len());
        for jv in &doc.vertices {
            if !seen.insert(jv.key.clone()) {
                out.push(None);
                break;
            }
            // Every path it gives must name the same vertex (Fluxion's `find_vtx`).
            let mut at_paths = jv.paths.values().map(|p| g.find_path(p));
            let first = at_paths.next().flatten();
            let found = first
                .filter(|&v| at_paths.all(|u| u == Some(v)))
                .filter(|&v| {
                    let spec = &jv.spec;
                    g.rank(v) == spec.rank
                        && g.kind_str(v) == spec.kind
                        && g.basename(v) == spec.basename
                        && spec.name.as_deref().is_none_or(|n| g.name(v) == n)
                        && g.id(v) == spec.id
                        && g.size(v) == spec.size
                });
            out.push(found);
            if found.is_none() {
                break;
            }
        }
        out
    }

    /// `find CRITERIA…`: the vertices found, then the expression between bars.
    pub(super) fn cmd_find(&mut self, words: &[&str], out: &mut dyn Write) -> Result<()> {
        if words.len() < 2 {
            eprintln!("ERROR: malformed command: ");
            return Ok(());
        }
        let criteria = words[1..].join(" ");
        if let Err(e) = self.matcher.find(&criteria, &mut self.writer) {
            match e {
                FindError::Invalid(c) => eprintln!("findfind: invalid criteria: {c}."),
                FindError::SpanMissing(v) => {
                    eprintln!("finddom_find_dfv: span missing in job2span  for vertex: {v}");
                }
                FindError::Writer(_) => {}
            }
            return Ok(());
        }
        match self.writer.emit_find() {
            Ok(text) => out.write_all(text.unwrap_or_default().as_bytes())?,
            Err(e) => {
                let (_, why) = super::matching::writer_errno(&e);
                eprintln!("find: ERROR: find writer emit: {why}");
                return Ok(());
            }
        }
        writeln!(out, "{BAR}\nINFO: EXPRESSION=\"{criteria}\"\n{BAR}")?;
        Ok(())
    }

    pub(super) fn cmd_set_property(&mut self, words: &[&str], out: &mut dyn Write) -> Result<()> {
        let (path, kv) = (words[1], words[2]);
        let pos = kv.find('=');
        let (k, v) = match pos {
            Some(p) if p != 0 && p != kv.len() - 1 => (&kv[..p], &kv[p + 1..]),
            _ => {
                writeln!(
                    out,
                    "Incorrect input format. \nPlease use `set-property <resource> PROPERTY=VALUE`."
                )?;
                return Ok(());
            }
        };
        match self.matcher.vertices(path) {
            Ok(at) => {
                for vx in at {
                    self.matcher.graph.set_property(vx, k, v);
                }
            }
            Err(_) => writeln!(out, "Couldn't find path {path} in resource graph.")?,
        }
        Ok(())
    }

    pub(super) fn cmd_get_property(&mut self, words: &[&str], out: &mut dyn Write) -> Result<()> {
        let path = words[1];
        let Ok(at) = self.matcher.vertices(path) else {
            writeln!(out, "Could not find path {path} in resource graph.")?;
            return Ok(());
        };
        let g = &self.matcher.graph;
        for vx in at {
            match g.properties(vx).filter(|p| !p.is_empty()) {
                Some(props) => {
                    for (k, v) in props {
                        writeln!(out, "{k}={v}")?;
                    }
                }
                None => writeln!(
                    out,
                    "No properties were found for {path} (vtx's uniq_id={}).",
                    g.uniq_id(vx)
                )?,
            }
        }
        Ok(())
    }

    pub(super) fn cmd_set_status(&mut self, words: &[&str], out: &mut dyn Write) -> Result<()> {
        let path = words[1];
        if self.matcher.vertices(path).is_err() {
            writeln!(out, "Could not find path {path} in resource graph.")?;
            return Ok(());
        }
        let status = match words[2] {
            "up" => Status::Up,
            "down" => Status::Down,
            other => {
                let _ = other;
                eprintln!("ERROR: unrecognized status");
                return Ok(());
            }
        };
        if let Err(e) = self.matcher.set_status(path, status) {
            eprintln!("ERROR: {e}");
        }
        Ok(())
    }

    pub(super) fn cmd_get_status(&mut self, words: &[&str], out: &mut dyn Write) -> Result<()> {
        let path = words[1];
        match self.matcher.vertices(path) {
            Ok(at) => {
                for v in at {
                    writeln!(out, "{path} is {}", self.matcher.graph.status(v).as_str())?;
                }
            }
            Err(_) => writeln!(out, "Could not find path {path} in resource graph.")?,
        }
        Ok(())
    }

    pub(super) fn cmd_info(&mut self, words: &[&str], stdout: &mut dyn Write) -> Result<()> {
        let jobid = strtoll(words[1]) as u64;
        match self.jobs.get(jobid) {
            Some(j) => writeln!(
                stdout,
                "INFO: {jobid}, {}, {}, {}, {}",
                j.state.as_str(),
                j.at,
                j.jobspec,
                fmt_g(j.overhead)
            )?,
            None => eprintln!("info: ERROR: nonexistent job {jobid}"),
        }
        Ok(())
    }

    pub(super) fn cmd_list(&mut self, stdout: &mut dyn Write) -> Result<()> {
        for (id, j) in self.jobs.iter() {
            writeln!(
                stdout,
                "INFO: {id}, {}, {}, {}, {}",
                j.state.as_str(),
                j.at,
                j.jobspec,
                fmt_g(j.overhead)
            )?;
        }
        Ok(())
    }

    pub(super) fn cmd_stat(&mut self, stdout: &mut dyn Write) -> Result<()> {
        let n = self.jobs.len();
        let (min, avg) = if n > 0 {
            (self.perf.0, self.perf.2 / n as f64)
        } else {
            (0.0, 0.0)
        };
        writeln!(stdout, "INFO: Num. of Jobs Matched: {n}")?;
        writeln!(stdout, "INFO: Min. Match Time: {}", fmt_g(min))?;
        writeln!(stdout, "INFO: Max. Match Time: {}", fmt_g(self.perf.1))?;
        writeln!(stdout, "INFO: Avg. Match Time: {}", fmt_g(avg))?;
        Ok(())
    }

    pub(super) fn cmd_cat(&mut self, words: &[&str], stdout: &mut dyn Write) -> Result<()> {
        let Some(file) = words.get(1) else {
            return Ok(());
        };
        if let Ok(text) = std::fs::read_to_string(file) {
            for line in text.lines() {
                writeln!(stdout, "{line}")?;
            }
        }
        writeln!(stdout, "INFO: Jobspec in {file}")?;
        Ok(())
    }
}

/// resource-query's `help`: the commands it knows.
pub(super) fn help(words: &[&str], stdout: &mut dyn Write) -> Result<()> {
    const NOTES: &[(&str, &str, &str)] = &[
        ("match", "m", "Allocate or reserve matching resources"),
        (
            "multi-match",
            "M",
            "Allocate or reserve for multiple jobspecs",
        ),
        ("find", "f", "Find resources matched with criteria"),
        ("cancel", "c", "Cancel an allocation or reservation"),
        ("partial-cancel", "pc", "Partially release an allocation"),
        ("set-property", "p", "Add a property to a resource"),
        ("get-property", "g", "Get all properties of a resource"),
        ("set-status", "t", "Set resource status on vertex"),
        ("get-status", "e", "Get the graph resource vertex status"),
        ("list", "l", "List all jobs"),
        ("info", "i", "Print info on a jobid"),
        ("stat", "s", "Print overall stats"),
        ("cat", "a", "Print jobspec file"),
        ("help", "h", "Print help message"),
        ("quit", "q", "Quit the session"),
    ];
    let want = words.get(1).copied();
    let mut found = false;
    for (name, abbr, note) in NOTES {
        if want.is_none_or(|w| w == *name || w == *abbr) {
            writeln!(stdout, "INFO: {name} ({abbr}) -- {note}")?;
            found = true;
        }
    }
    if let (Some(w), false) = (want, found) {
        writeln!(stdout, "ERROR: unknown command: {w}")?;
    }
    Ok(())
}

/// Most ranks a partial cancel's rv1exec R may name (each is looked up in the graph).
const PARTIAL_CANCEL_RANKS_MAX: u128 = 1 << 24;

/// The ranks of an rv1exec R's `execution.R_lite` (Fluxion's rv1exec partial cancel).
fn rv1exec_ranks(text: &str) -> std::result::Result<BTreeSet<i64>, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if v.get("version").and_then(serde_json::Value::as_i64) != Some(1) {
        return Err("R: version 1 expected".into());
    }
    let lite = v
        .get("execution")
        .and_then(|e| e.get("R_lite"))
        .ok_or("R: no execution.R_lite")?;
    let mut ranks = BTreeSet::new();
    for entry in lite.as_array().map(Vec::as_slice).unwrap_or_default() {
        let r = entry
            .get("rank")
            .and_then(serde_json::Value::as_str)
            .ok_or("R_lite: an entry without a rank")?;
        // As flux-core's `idset_decode_add` reads it (ascending, no leading zero, …).
        let ids = shardsched_resource::IdSet::parse_rfc22(r).map_err(|e| e.to_string())?;
        if ids.len() > PARTIAL_CANCEL_RANKS_MAX {
            return Err(format!(
                "R_lite: more than {PARTIAL_CANCEL_RANKS_MAX} ranks"
            ));
        }
        ranks.extend(ids.iter().map(|i| i as i64));
    }
    Ok(ranks)
}

/// A number as C++'s `ostream << double` prints it (`%g`: 6 significant digits, trailing
/// zeros dropped, exponent form below 1e-4 and from 1e6).
pub(super) fn fmt_g(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return if x.is_nan() {
            "nan".into()
        } else if x.is_infinite() {
            if x > 0.0 { "inf".into() } else { "-inf".into() }
        } else {
            "0".into()
        };
    }
    let sci = format!("{x:.5e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{}e{sign}{:02}", trim(mant), exp.abs());
    }
    let decimals = usize::try_from(5 - exp).unwrap_or(0);
    trim(&format!("{x:.decimals$}"))
}

/// C's `strtoll(s, NULL, 10)`: leading blanks and sign, then digits; 0 when none.
pub(super) fn strtoll(s: &str) -> i64 {
    let t = s.trim_start();
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let end = digits
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(digits.len());
    let n = digits[..end]
        .parse::<i64>()
        .unwrap_or(if end == 0 { 0 } else { i64::MAX });
    if neg { -n } else { n }
}
