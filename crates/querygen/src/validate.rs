//! A structural check of a `-t` output: every line is one resource-query can print. It
//! knows nothing of which resources should be chosen; it catches garbage, half-written
//! lines and JSON that does not parse, with or without an oracle to compare against.

/// Checks every line of `out`; the error names the first bad line (1-based).
pub fn check_output(out: &[u8]) -> Result<(), String> {
    let text = std::str::from_utf8(out).map_err(|e| format!("not UTF-8: {e}"))?;
    if !text.is_empty() && !text.ends_with('\n') {
        return Err("the last line has no newline".to_string());
    }
    for (i, line) in text.lines().enumerate() {
        if !line_ok(line) {
            return Err(format!("line {}: unexpected {line:?}", i + 1));
        }
    }
    Ok(())
}

const FIXED_PREFIXES: [&str; 6] = [
    "INFO: ",
    "No properties were found for ",
    "Could not find path ",
    "Couldn't find path ",
    "Incorrect input format. ",
    "Please use `set-property",
];

fn line_ok(line: &str) -> bool {
    if FIXED_PREFIXES.iter().any(|p| line.starts_with(p)) {
        return true;
    }
    if line.starts_with('{') || line.starts_with('[') {
        return serde_json::from_str::<serde_json::Value>(line).is_ok();
    }
    if line.starts_with("      ---") {
        return tree_line_ok(line);
    }
    // get-status: resource-query prints `PATH is up`; ours has printed the bare status (a
    // difference the comparison reports, not a malformed line).
    if line.ends_with(" is up") || line.ends_with(" is down") || line == "up" || line == "down" {
        return true;
    }
    // get-property: key=value.
    matches!(line.split_once('='), Some((k, _)) if !k.is_empty() && !k.contains(' '))
}

/// `      ---…name[N:x]` (simple, find) or `…[N:exclusive]` (pretty_simple).
fn tree_line_ok(line: &str) -> bool {
    let rest = line.trim_start_matches(' ').trim_start_matches('-');
    let Some((name, tail)) = rest.split_once('[') else {
        return false;
    };
    let Some((needs, mode)) = tail.strip_suffix(']').and_then(|t| t.split_once(':')) else {
        return false;
    };
    !name.is_empty()
        && needs.parse::<u64>().is_ok()
        && matches!(mode, "x" | "s" | "exclusive" | "shared")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_what_resource_query_prints() {
        let out = "      ---core35[1:x]\n      ---tiny0[1:s]\n      ---memory0[32:exclusive]\n\
            INFO: =============================\nINFO: JOBID=1\n{\"graph\": {\"nodes\": []}}\n\
            [{\"rank\": \"1\", \"children\": {\"core\": \"35\"}}]\n/tiny0/rack0/node0 is down\n\
            perf_class=2\nCould not find path /x in resource graph.\n";
        assert_eq!(check_output(out.as_bytes()), Ok(()));
    }

    #[test]
    fn rejects_garbage_and_broken_json() {
        assert!(check_output(b"      ---core35[1:q]\n").is_err());
        assert!(check_output(b"{\"graph\": \n").is_err());
        assert!(check_output(b"hello world\n").is_err());
        assert!(check_output(b"INFO: no newline").is_err());
    }
}
