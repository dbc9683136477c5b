//! Small text helpers of the writers.

/// Appends `n` in decimal, as `write!(s, "{n}")` does, without the formatting machinery:
/// the simple writer prints one number per line of `query`'s output, and formatting it was
/// a measurable part of a whole `query` run.
pub(super) fn push_int(s: &mut String, n: i64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut m = n.unsigned_abs();
    loop {
        i -= 1;
        digits[i] = b'0' + (m % 10) as u8;
        m /= 10;
        if m == 0 {
            break;
        }
    }
    if n < 0 {
        s.push('-');
    }
    s.extend(digits[i..].iter().map(|&d| char::from(d)));
}

#[cfg(test)]
mod tests {
    use super::push_int;

    #[test]
    fn push_int_prints_what_format_prints() {
        for n in [0, 1, 9, 10, 22, -1, -10, 1 << 40, i64::MAX, i64::MIN] {
            let mut s = String::from("x");
            push_int(&mut s, n);
            assert_eq!(s, format!("x{n}"));
        }
    }
}
