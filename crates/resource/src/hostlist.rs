//! Flux hostlists: lists of hostnames written compactly, e.g. `node[0-3,5],login1,gpu[01-02]`.
//!
//! R's `nodelist`, job constraints (`{hostlist: ["node[0-3]"]}`) and our TOML cluster spec
//! name hosts this way. The rules follow flux-core's `hostlist` (itself LLNL's):
//!
//! - [`decode_hostlist`]: hosts are separated by commas outside brackets; `prefix[ranges]suffix`
//!   expands each id of `ranges` (`lo`, `lo-hi`, comma-separated) in the order written, padded
//!   with zeros to the width of its `lo` (`gpu[01-02]` → `gpu01`, `gpu02`); a host without
//!   brackets stands for itself. Order and duplicates are kept: a hostlist is a list.
//! - [`encode_hostlist`]: flux-core's `hostlist_encode` for a list in the given order. A host
//!   is split into a prefix and its trailing digits; it extends the previous run when the
//!   prefix is the same, its number is one more, and it prints the same at the run's width
//!   (so `node9,node10` join, `node1,node02` do not). Consecutive runs with the same prefix
//!   share one bracket (`node[0-3,5]`); a run of one host with no neighbours is written bare
//!   (`node5`), and a host without trailing digits is always written bare.
//!
//! `decode_hostlist(&encode_hostlist(hosts)) == hosts` for any hosts without `[`, `]` or `,`.

use std::fmt::Write as _;

mod find;
pub use find::HostRanges;

/// The most hosts [`decode_hostlist`] expands, so that `node[0-99999999999]` is an error
/// instead of an allocation of hundreds of gigabytes.
pub const HOSTLIST_HOSTS_MAX: usize = 1_000_000;

/// Why a hostlist could not be decoded; `offset` is the byte where the problem starts.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("hostlist {text:?}: {message} at byte {offset}")]
pub struct HostlistError {
    pub text: String,
    pub offset: usize,
    pub message: String,
}

/// Expands a hostlist into hostnames, in order.
pub fn decode_hostlist(text: &str) -> Result<Vec<String>, HostlistError> {
    let err = |offset: usize, message: &str| HostlistError {
        text: text.to_string(),
        offset,
        message: message.to_string(),
    };
    let mut hosts = Vec::new();
    let mut start = 0;
    let mut depth = 0usize;
    let bytes = text.as_bytes();
    for i in 0..=bytes.len() {
        let b = bytes.get(i).copied();
        match b {
            Some(b'[') => depth += 1,
            Some(b']') if depth == 0 => return Err(err(i, "']' without '['")),
            Some(b']') => depth -= 1,
            Some(b',') if depth > 0 => {}
            Some(b',') | None => {
                if depth > 0 {
                    return Err(err(i, "missing ']'"));
                }
                let token = &text[start..i];
                if !token.is_empty() {
                    expand(token, start, &mut hosts).map_err(|(o, m)| err(o, &m))?;
                }
                start = i + 1;
            }
            Some(b) if b.is_ascii_whitespace() => return Err(err(i, "whitespace in a hostlist")),
            Some(_) => {}
        }
    }
    Ok(hosts)
}

/// Expands one comma-free token (`node[0-3]x` or `login1`) into `hosts`.
fn expand(token: &str, base: usize, hosts: &mut Vec<String>) -> Result<(), (usize, String)> {
    let Some(open) = token.find('[') else {
        return push(hosts, token.to_string(), base);
    };
    let prefix = &token[..open];
    let rest = &token[open + 1..];
    let close = rest
        .find(']')
        .ok_or((base + token.len(), "missing ']'".to_string()))?;
    let ranges = &rest[..close];
    let suffix = &rest[close + 1..];
    if ranges.contains('[') {
        return Err((base + open + 1, "nested '['".to_string()));
    }
    if suffix.contains('[') || suffix.contains(']') {
        return Err((
            base + open + close + 2,
            "only one bracket per host".to_string(),
        ));
    }
    let mut offset = base + open + 1;
    for item in ranges.split(',') {
        let bad = |o: usize| (o, format!("expected a number or a range, found {item:?}"));
        let (lo_s, hi_s) = item.split_once('-').unwrap_or((item, item));
        let lo = parse_number(lo_s).ok_or_else(|| bad(offset))?;
        let hi = parse_number(hi_s).ok_or_else(|| bad(offset))?;
        if hi < lo {
            return Err((offset, format!("range {item:?} ends before it starts")));
        }
        let width = lo_s.len();
        for n in lo..=hi {
            push(hosts, format!("{prefix}{n:0width$}{suffix}"), offset)?;
        }
        offset += item.len() + 1;
    }
    Ok(())
}

fn push(hosts: &mut Vec<String>, host: String, offset: usize) -> Result<(), (usize, String)> {
    if hosts.len() >= HOSTLIST_HOSTS_MAX {
        return Err((offset, format!("more than {HOSTLIST_HOSTS_MAX} hosts")));
    }
    hosts.push(host);
    Ok(())
}

fn parse_number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Splits a hostname into the part before its trailing digits and their value:
/// `node012` → (`node`, Some(12)), `login` → (`login`, None). Digits that do not fit a `u64`
/// count as part of the name.
pub fn split_host(host: &str) -> (&str, Option<u64>) {
    match trailing_number(host) {
        Some((prefix, n, _)) => (prefix, Some(n)),
        None => (host, None),
    }
}

/// (prefix, number, digit count) of a hostname with trailing digits.
fn trailing_number(host: &str) -> Option<(&str, u64, usize)> {
    let digits = host.bytes().rev().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let (prefix, num) = host.split_at(host.len() - digits);
    Some((prefix, num.parse().ok()?, digits))
}

/// One entry of an encoded list: a run `prefix[lo-hi]` at `width`, or a bare host.
enum Run<'a> {
    Range {
        prefix: &'a str,
        lo: u64,
        hi: u64,
        width: usize,
    },
    Bare(&'a str),
}

/// Sorts hostnames in natural order: by the part before their trailing digits, then by
/// the number (`node2` before `node10`), then as text.
pub fn sort_hosts<S: AsRef<str>>(hosts: &mut [S]) {
    hosts.sort_by(|a, b| host_order(a.as_ref(), b.as_ref()));
}

/// The natural order of two hostnames (see [`sort_hosts`]).
pub fn host_order(a: &str, b: &str) -> std::cmp::Ordering {
    (split_host(a), a).cmp(&(split_host(b), b))
}

/// Encodes hostnames, in the order given, into Flux's compressed form.
pub fn encode_hostlist<S: AsRef<str>>(hosts: &[S]) -> String {
    let mut runs: Vec<Run<'_>> = Vec::new();
    for host in hosts {
        let host = host.as_ref();
        let Some((prefix, n, digits)) = trailing_number(host) else {
            runs.push(Run::Bare(host));
            continue;
        };
        if let Some(Run::Range {
            prefix: p,
            hi,
            width,
            ..
        }) = runs.last_mut()
        {
            let digit_str = &host[prefix.len()..];
            if *p == prefix
                && hi.checked_add(1) == Some(n)
                && format!("{n:0w$}", w = *width) == digit_str
            {
                *hi = n;
                continue;
            }
        }
        runs.push(Run::Range {
            prefix,
            lo: n,
            hi: n,
            width: digits,
        });
    }
    let mut out = String::new();
    let mut i = 0;
    while i < runs.len() {
        if !out.is_empty() {
            out.push(',');
        }
        match runs[i] {
            Run::Bare(host) => {
                out.push_str(host);
                i += 1;
            }
            Run::Range {
                prefix,
                lo,
                hi,
                width,
            } => {
                let mut j = i + 1;
                while matches!(runs.get(j), Some(Run::Range { prefix: p, .. }) if *p == prefix) {
                    j += 1;
                }
                out.push_str(prefix);
                if j == i + 1 && lo == hi {
                    let _ = write!(out, "{lo:0width$}");
                } else {
                    out.push('[');
                    for (k, run) in runs[i..j].iter().enumerate() {
                        if let Run::Range { lo, hi, width, .. } = *run {
                            if k > 0 {
                                out.push(',');
                            }
                            let _ = write!(out, "{lo:0width$}");
                            if hi != lo {
                                let _ = write!(out, "-{hi:0width$}");
                            }
                        }
                    }
                    out.push(']');
                }
                i = j;
            }
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hosts(s: &str) -> Vec<String> {
        decode_hostlist(s).unwrap()
    }

    #[test]
    fn decodes_ranges_padding_and_plain_hosts() {
        assert_eq!(
            hosts("node[0-3,5],login1,gpu[01-02]"),
            [
                "node0", "node1", "node2", "node3", "node5", "login1", "gpu01", "gpu02"
            ]
        );
        assert_eq!(hosts("n[8-10]"), ["n8", "n9", "n10"]);
        assert_eq!(hosts("n[098-100]"), ["n098", "n099", "n100"]);
        assert_eq!(hosts("rack[1-2]a"), ["rack1a", "rack2a"]);
        assert_eq!(hosts("[3-4]"), ["3", "4"]);
        assert_eq!(hosts("n[3,1]"), ["n3", "n1"]);
        assert!(hosts("").is_empty());
        assert_eq!(hosts("a,,b,"), ["a", "b"]);
    }

    #[test]
    fn decode_errors_have_offsets() {
        assert_eq!(decode_hostlist("node[0-3").unwrap_err().offset, 8);
        assert_eq!(decode_hostlist("node0]").unwrap_err().offset, 5);
        assert_eq!(decode_hostlist("a,node[1,x]").unwrap_err().offset, 9);
        assert!(decode_hostlist("node[3-1]").is_err());
        assert!(decode_hostlist("n[1]x[2]").is_err());
        assert!(decode_hostlist("n[[1]]").is_err());
        assert!(decode_hostlist("a b").is_err());
        let e = decode_hostlist("n[0-99999999999]").unwrap_err();
        assert!(e.message.contains("more than"), "{e}");
    }

    #[test]
    fn natural_order_puts_node2_before_node10() {
        let mut names = vec!["node10", "node2", "login1", "node1", "node100", "node02"];
        sort_hosts(&mut names);
        assert_eq!(
            names,
            ["login1", "node1", "node02", "node2", "node10", "node100"]
        );
        let mut names: Vec<String> = hosts("node[0-12]");
        names.sort();
        sort_hosts(&mut names);
        assert_eq!(encode_hostlist(&names), "node[0-12]");
    }

    #[test]
    fn encodes_like_flux() {
        let enc = |s: &[&str]| encode_hostlist(s);
        assert_eq!(
            enc(&["node0", "node1", "node2", "node3", "node5"]),
            "node[0-3,5]"
        );
        assert_eq!(enc(&["node5"]), "node5");
        assert_eq!(enc(&["node0", "login1", "node1"]), "node0,login1,node1");
        assert_eq!(
            enc(&["gpu01", "gpu02", "node9", "node10"]),
            "gpu[01-02],node[9-10]"
        );
        assert_eq!(enc(&["n1", "n02"]), "n[1,02]");
        assert_eq!(enc(&["n3", "n2", "n1"]), "n[3,2,1]");
        assert_eq!(enc(&["login", "login"]), "login,login");
        assert_eq!(enc(&["n099", "n100"]), "n[099-100]");
        assert_eq!(enc(&[]), "");
        assert_eq!(split_host("node012"), ("node", Some(12)));
        assert_eq!(split_host("login"), ("login", None));
    }

    fn host() -> impl Strategy<Value = String> {
        let prefix = prop_oneof![
            Just(""),
            Just("node"),
            Just("n"),
            Just("gpu-"),
            Just("login")
        ];
        (prefix, proptest::option::of((0u64..40, 1usize..4))).prop_map(|(p, num)| match num {
            Some((n, w)) => format!("{p}{n:0w$}"),
            None if p.is_empty() => "x".to_string(),
            None => p.to_string(),
        })
    }

    proptest! {
        #[test]
        fn encode_then_decode_round_trips(list in proptest::collection::vec(host(), 0..40)) {
            let text = encode_hostlist(&list);
            prop_assert_eq!(decode_hostlist(&text).unwrap(), list);
            // Encoding is stable: a decoded encoding encodes to itself.
            prop_assert_eq!(encode_hostlist(&decode_hostlist(&text).unwrap()), text);
        }

        #[test]
        fn sorted_runs_round_trip(lo in 0u64..500, len in 1u64..50, width in 1usize..5) {
            let list: Vec<String> = (lo..lo + len).map(|n| format!("node{n:0width$}")).collect();
            let text = encode_hostlist(&list);
            prop_assert_eq!(decode_hostlist(&text).unwrap(), list);
        }

        #[test]
        fn decode_never_panics(s in "\\PC{0,30}") {
            let _ = decode_hostlist(&s);
        }

        #[test]
        fn decode_never_panics_on_hostlist_like_text(s in "[a-c0-9\\[\\],\\-]{0,30}") {
            let _ = decode_hostlist(&s);
        }
    }
}
