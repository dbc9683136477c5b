//! flux-core's `hostlist_decode` + `hostlist_find`, as ranges: whether a hostname is in a
//! hostlist the way flux-core answers it (Fluxion's `find names=…` asks exactly this).
//!
//! Differences from [`super::decode_hostlist`]: hosts are separated by tabs and spaces as
//! well as commas; ranges are kept as `prefix`, `lo`–`hi` and a width (not expanded, up to
//! 2^20 hosts each); a host whose name cannot be a hostname (`[`, `]`, `,`, whitespace) is
//! silently left out; a hostname is in a range when its prefix is the range's and its
//! trailing number is within the bounds at an equivalent zero-padding (flux-core's
//! `width_equiv`), with flux-core's retry for ranges whose prefix ends in digits
//! (`f00[1-2]`).

/// The most hosts one range of a hostlist may hold (flux-core's `MAX_RANGE`).
const RANGE_HOSTS_MAX: u64 = 1 << 20;
/// The most ranges one bracket may hold (flux-core's `MAX_RANGES`).
const BRACKET_RANGES_MAX: usize = 10240;
/// Characters a hostname may not have.
const INVALID: &[u8] = b",[]\t ";

#[derive(Clone, Debug, PartialEq, Eq)]
struct Range {
    prefix: String,
    lo: u64,
    hi: u64,
    width: usize,
    single: bool,
}

/// A decoded hostlist (flux-core's `struct hostlist`), for membership tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostRanges {
    ranges: Vec<Range>,
}

/// C's `strtoul` over `s`: leading whitespace, an optional sign, decimal digits. Returns the
/// value (negated modulo 2^64 after `-`, saturated on overflow) and the bytes consumed (0
/// when there is no digit).
fn strtoul(s: &[u8]) -> (u64, usize) {
    let mut i = 0;
    while i < s.len() && s[i].is_ascii_whitespace() {
        i += 1;
    }
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let start = i;
    let mut v: u64 = 0;
    let mut over = false;
    while i < s.len() && s[i].is_ascii_digit() {
        match v
            .checked_mul(10)
            .and_then(|x| x.checked_add(u64::from(s[i] - b'0')))
        {
            Some(x) => v = x,
            None => over = true,
        }
        i += 1;
    }
    if i == start {
        return (0, 0);
    }
    if over {
        return (u64::MAX, i);
    }
    (if neg { v.wrapping_neg() } else { v }, i)
}

/// flux-core's `next_tok`: the next token separated by tabs, commas or spaces outside
/// brackets.
fn next_tok<'a>(s: &mut &'a [u8]) -> Option<&'a [u8]> {
    let sep = |b: u8| b == b'\t' || b == b',' || b == b' ';
    let mut i = 0;
    while i < s.len() && sep(s[i]) {
        i += 1;
    }
    if i == s.len() {
        *s = &s[i..];
        return None;
    }
    let start = i;
    let mut level = 0i64;
    while i < s.len() && (level != 0 || !sep(s[i])) {
        match s[i] {
            b'[' => level += 1,
            b']' => level -= 1,
            _ => {}
        }
        i += 1;
    }
    let tok = &s[start..i];
    while i < s.len() && sep(s[i]) {
        i += 1;
    }
    *s = &s[i..];
    Some(tok)
}

/// flux-core's `parse_next_range`: `lo`, `lo-hi` or `lo-` (= `lo`), with its width.
fn parse_range(r: &[u8]) -> Option<(u64, u64, usize)> {
    let (lo_s, hi_s) = match r.iter().position(|&b| b == b'-') {
        Some(p) => (&r[..p], Some(&r[p + 1..])),
        None => (r, None),
    };
    if hi_s.is_some_and(|h| h.first() == Some(&b'-')) {
        return None;
    }
    let (lo, n) = strtoul(lo_s);
    if n == 0 {
        return None;
    }
    let hi = match hi_s {
        Some(h) if !h.is_empty() => {
            let (hi, m) = strtoul(h);
            if m == 0 || m != h.len() {
                return None;
            }
            hi
        }
        _ => {
            if n != lo_s.len() {
                return None;
            }
            lo
        }
    };
    if lo > hi || hi - lo >= RANGE_HOSTS_MAX {
        return None;
    }
    Some((lo, hi, lo_s.len()))
}

/// A hostname split as flux-core's `hostname_create` splits it: prefix length, and the
/// trailing number with its width when there is one.
#[derive(Clone, Copy, Debug)]
struct Name<'a> {
    name: &'a [u8],
    len_prefix: usize,
    /// `(num, width)` of the trailing digits.
    suffix: Option<(u64, usize)>,
}

fn split_name(name: &[u8]) -> Option<Name<'_>> {
    if name.iter().any(|b| INVALID.contains(b)) {
        return None;
    }
    let digits = name.iter().rev().take_while(|b| b.is_ascii_digit()).count();
    let len_prefix = name.len() - digits;
    let suffix = (digits > 0).then(|| (strtoul(&name[len_prefix..]).0, digits));
    Some(Name {
        name,
        len_prefix,
        suffix,
    })
}

/// flux-core's `zero_padded`.
fn zero_padded(num: u64, width: usize) -> usize {
    let digits = num.checked_ilog10().map_or(1, |d| d as usize + 1);
    width.saturating_sub(digits)
}

/// flux-core's `width_equiv` (whose "same width" shortcut compares pointers, never true).
fn width_equiv(n: u64, wn: usize, m: u64, wm: usize) -> bool {
    let (npad, nmpad) = (zero_padded(n, wn), zero_padded(n, wm));
    let (mpad, mnpad) = (zero_padded(m, wm), zero_padded(m, wn));
    !(npad != nmpad && mpad != mnpad)
}

/// flux-core's `hostrange_hn_within`.
fn within(hr: &Range, hn: &Name<'_>) -> bool {
    if hr.single {
        return hr.prefix.as_bytes() == hn.name;
    }
    let Some((num, width)) = hn.suffix else {
        return false;
    };
    let p = hr.prefix.as_bytes();
    if p.len() < hn.len_prefix || p[..hn.len_prefix] != hn.name[..hn.len_prefix] {
        return false;
    }
    if hn.len_prefix < p.len()
        && width > 1
        && p.last().is_some_and(u8::is_ascii_digit)
        && p[hn.len_prefix] == hn.name[hn.len_prefix]
    {
        // The range's prefix ends in digits (`f00[1-2]`): retry with one digit more in the
        // name's prefix.
        let w = width - 1;
        if w >= 10 {
            return false;
        }
        let lp = hn.len_prefix + 1;
        let shorter = Name {
            name: hn.name,
            len_prefix: lp,
            suffix: Some((strtoul(&hn.name[lp..]).0, w)),
        };
        return within(hr, &shorter);
    }
    hr.prefix.len() == hn.len_prefix
        && (hr.lo..=hr.hi).contains(&num)
        && width_equiv(hr.lo, hr.width, num, width)
}

impl HostRanges {
    /// flux-core's `hostlist_decode`; `None` where it fails (unbalanced brackets, a bad
    /// range, too many hosts in a range or ranges in a bracket).
    pub fn decode(text: &str) -> Option<HostRanges> {
        let mut rest = text.as_bytes();
        let mut ranges = Vec::new();
        while let Some(tok) = next_tok(&mut rest) {
            let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
            if let Some(open) = tok.iter().position(|&b| b == b'[') {
                let prefix = &tok[..open];
                let inner = &tok[open + 1..];
                let close = inner.iter().position(|&b| b == b']')?;
                let list = &inner[..close];
                let suffix = &inner[close + 1..];
                let parts: Vec<&[u8]> = list.split(|&b| b == b',').collect();
                if parts.len() > BRACKET_RANGES_MAX {
                    return None;
                }
                let mut found = Vec::with_capacity(parts.len());
                for part in parts {
                    found.push(parse_range(part)?);
                }
                for (lo, hi, width) in found {
                    if suffix.is_empty() {
                        ranges.push(Range {
                            prefix: text(prefix),
                            lo,
                            hi,
                            width,
                            single: false,
                        });
                        continue;
                    }
                    for j in lo..=hi {
                        ranges.push(Range {
                            prefix: format!("{}{j:0width$}{}", text(prefix), text(suffix)),
                            lo: 0,
                            hi: 0,
                            width: 0,
                            single: true,
                        });
                    }
                }
            } else if tok.contains(&b']') {
                return None;
            } else if let Some(hn) = split_name(tok) {
                ranges.push(match hn.suffix {
                    Some((num, width)) => Range {
                        prefix: text(&tok[..hn.len_prefix]),
                        lo: num,
                        hi: num,
                        width,
                        single: false,
                    },
                    None => Range {
                        prefix: text(tok),
                        lo: 0,
                        hi: 0,
                        width: 0,
                        single: true,
                    },
                });
            }
        }
        Some(HostRanges { ranges })
    }

    /// flux-core's `hostlist_find(hl, host) >= 0`.
    pub fn contains(&self, host: &str) -> bool {
        let Some(hn) = split_name(host.as_bytes()) else {
            return false;
        };
        self.ranges.iter().any(|r| within(r, &hn))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn has(list: &str, host: &str) -> bool {
        HostRanges::decode(list).expect("decodes").contains(host)
    }

    #[test]
    fn ranges_and_singles() {
        assert!(has("node[0-3]", "node2"));
        assert!(!has("node[0-3]", "node4"));
        assert!(has("node1,fat[2-3] login", "login"));
        assert!(has("node1,fat[2-3] login", "fat3"));
        assert!(!has("node1", "node01"));
        assert!(has("node[01-02]", "node01"));
        assert!(!has("node[01-02]", "node1"));
        assert!(has("f00[1-2]", "f001"));
        assert!(has("node[1-2]x", "node2x"));
        assert!(!has("node6)", "node6"));
        assert!(!has("", "node0"));
    }

    #[test]
    fn decode_errors() {
        assert!(HostRanges::decode("node[0-").is_none());
        assert!(HostRanges::decode("node0]").is_none());
        assert!(HostRanges::decode("node[3-1]").is_none());
        assert!(HostRanges::decode("node[0--1]").is_none());
        assert!(HostRanges::decode("node[a]").is_none());
        assert!(HostRanges::decode("node[0-2000000]").is_none());
        assert!(HostRanges::decode("node[1-]").is_some());
    }
}
