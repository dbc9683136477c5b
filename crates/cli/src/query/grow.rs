//! `attach FILE` and `remove PATH true` / `remove RANKS false`: resource-query's grow and
//! shrink of the session's graph (`utilities/command.cpp:548`, `:567`), with its messages.
//! The work is the matcher's ([`shardsched_matcher::Matcher::attach`], `remove_path`,
//! `remove_ranks`); nothing goes to the output file.

use std::collections::BTreeSet;

use shardsched_matcher::MatchError;

use super::Session;
use super::update::within_bound;

/// The most ranks one `remove` may name.
const REMOVE_RANKS_MAX: usize = 1 << 20;

/// Each `cmd_*` is called by [`Session::execute`] only with a line of as many words as the
/// command takes (the table in `command`).
impl Session {
    /// `attach FILE`: adds the JGF's new vertices and edges to the graph.
    pub(super) fn cmd_attach(&mut self, words: &[&str]) {
        let file = words[1];
        if let Err(why) = within_bound(file, "JGF") {
            eprintln!("ERROR: {why}");
            return;
        }
        let Ok(bytes) = std::fs::read(file) else {
            eprintln!("ERROR: can't open {file}");
            return;
        };
        let text = String::from_utf8_lossy(&bytes);
        let result = shardsched_resource::parse_jgf(&text)
            .map_err(|e| format!("{e}\n"))
            .and_then(|doc| self.matcher.attach(&doc).map_err(|e| format!("{e}\n")));
        if let Err(why) = result {
            // Fluxion's layers each add their line (`add_subgraph` twice, then the reader's).
            eprint!(
                "ERROR: can't attach JGF subgraph \nERROR: add_subgraph: ERROR: add subgraph \
                 error: Invalid argument\nadd_subgraph: ERROR: reader returned error: {why}\n\n"
            );
        }
    }

    /// `remove PATH true` (a subtree by path) or `remove RANKS false` (every vertex of the
    /// ranks, an idset).
    pub(super) fn cmd_remove(&mut self, words: &[&str]) {
        let (target, is_path) = (words[1], words[2]);
        match is_path {
            "true" => {
                if let Err(e) = self.matcher.remove_path(target) {
                    let detail = match e {
                        MatchError::NoSuchPath(_) => String::new(),
                        other => why(other),
                    };
                    eprint!(
                        "ERROR: can't remove subgraph \nERROR: remove_subgraph: ERROR: \
                         remove_subgraph error: No such file or directory\nremove_subgraph: \
                         ERROR: traverser returned error: {detail}\n\n"
                    );
                }
            }
            "false" => {
                let Ok(ranks) = shardsched_resource::parse_idset(target, REMOVE_RANKS_MAX) else {
                    eprintln!("ERROR: failed to decode ranks.");
                    return;
                };
                let ranks: BTreeSet<i64> = ranks
                    .into_iter()
                    .filter_map(|r| i64::try_from(r).ok())
                    .collect();
                if let Err(e) = self.matcher.remove_ranks(&ranks) {
                    let why = why(e);
                    eprint!("ERROR: can't partial cancel subgraph \nERROR: remove: {why}.\n");
                }
            }
            _ => eprintln!("ERROR: invalid path boolean input "),
        }
    }
}

/// What a refused `remove` says after Fluxion's prefix: the matcher's reason alone.
fn why(e: MatchError) -> String {
    match e {
        MatchError::BadRequest(why) => why,
        other => other.to_string(),
    }
}
