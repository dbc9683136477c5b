//! The fixed-point arithmetic of fair-share: exponential decay by the half-life and Slurm's
//! factor `2^(-U/S)`, in integers only, so that the simulator replays a seed to the same
//! bits on any machine (no `powf`, whose last bits differ between libms).
//!
//! Both reduce to `2^(-x)` for `x ≥ 0` in Q16 (`x / 65536`): whole halvings are a shift,
//! and the fraction is a product of `2^(-1/2^k)` for each bit `k` set (a table in Q32).

/// `2^(-1/2^(k+1))` in Q32, for the fraction's bits from the highest.
const HALF_POWERS_Q32: [u64; 16] = [
    3_037_000_500,
    3_611_622_603,
    3_938_502_376,
    4_112_874_773,
    4_202_935_003,
    4_248_701_965,
    4_271_771_996,
    4_283_353_945,
    4_289_156_690,
    4_292_061_010,
    4_293_513_907,
    4_294_240_540,
    4_294_603_903,
    4_294_785_595,
    4_294_876_445,
    4_294_921_870,
];

/// One, in Q32.
pub(crate) const ONE_Q32: u64 = 1 << 32;

/// `2^(-x / 65536)` in Q32 (0 past 32 halvings).
pub(crate) fn pow2_neg_q16(x: u64) -> u64 {
    let whole = x >> 16;
    if whole >= 32 {
        return 0;
    }
    let mut value = ONE_Q32 >> whole;
    for (k, factor) in HALF_POWERS_Q32.iter().enumerate() {
        if x & (1 << (15 - k)) != 0 {
            value = ((u128::from(value) * u128::from(*factor)) >> 32) as u64;
        }
    }
    value
}

/// The decay exponent from a clock's origin to `elapsed_ms` after it, in Q16 half-lives
/// (rounded down). Each step applies the difference from the last step's, so that many
/// small steps decay exactly as one long one (no rounding carried per step).
pub(crate) fn exponent_q16(elapsed_ms: u64, half_life_ms: u64) -> u64 {
    let x = (u128::from(elapsed_ms) << 16) / u128::from(half_life_ms.max(1));
    u64::try_from(x).unwrap_or(u64::MAX)
}

/// The milliseconds a Q16 exponent stands for (rounded down): the inverse of
/// [`exponent_q16`].
pub(crate) fn exponent_ms(x_q16: u64, half_life_ms: u64) -> u64 {
    let ms = (u128::from(x_q16) * u128::from(half_life_ms)) >> 16;
    u64::try_from(ms).unwrap_or(u64::MAX)
}

/// `value × 2^(-x / 65536)`, rounded down.
pub(crate) fn decayed(value: u64, x_q16: u64) -> u64 {
    ((u128::from(value) * u128::from(pow2_neg_q16(x_q16))) >> 32) as u64
}

/// Slurm's classic fair-share factor `2^(-U/S)` with equal shares among `users`:
/// `U = usage / total`, `S = 1 / users`, as parts per million (1 when there is no usage).
pub(crate) fn factor_ppm(usage: u64, total: u64, users: u64) -> u32 {
    if total == 0 {
        return 1_000_000;
    }
    let x = ((u128::from(usage) * u128::from(users.max(1))) << 16) / u128::from(total);
    let f = pow2_neg_q16(u64::try_from(x).unwrap_or(u64::MAX));
    ((u128::from(f) * 1_000_000) >> 32) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn powers_of_two_match_floating_point_closely() {
        for x in (0..(20 << 16)).step_by(997) {
            let want = 2f64.powf(-(x as f64) / 65536.0);
            let got = pow2_neg_q16(x) as f64 / ONE_Q32 as f64;
            assert!((want - got).abs() < 1e-8, "2^-{x}/65536: {got} vs {want}");
        }
    }

    /// `value` decayed from 0 to `until_ms` in steps of `step_ms`, each step's exponent
    /// counted from the origin, as the ledger does.
    fn stepped(value: u64, step_ms: u64, until_ms: u64, half_life_ms: u64) -> u64 {
        let (mut value, mut applied, mut now) = (value, 0, 0);
        while now < until_ms {
            now = (now + step_ms).min(until_ms);
            let total = exponent_q16(now, half_life_ms);
            value = decayed(value, total - applied);
            applied = total;
        }
        value
    }

    #[test]
    fn usage_halves_per_half_life_whatever_the_steps() {
        let hour = 3_600_000;
        let half: u64 = 1 << 39;
        assert_eq!(stepped(1 << 40, hour, hour, hour), half);
        for step in [60_000, 1000, 777] {
            let got = stepped(1 << 40, step, hour, hour);
            assert!(
                got.abs_diff(half) < half / 10_000,
                "{got} in steps of {step} ms"
            );
        }
        // A week's half-life in steps of a second.
        let week = 7 * 24 * hour;
        let got = stepped(1 << 40, 1000, week / 7, week);
        let want = (2f64.powf(-1.0 / 7.0) * (1u64 << 40) as f64) as u64;
        assert!(got.abs_diff(want) < want / 10_000, "{got} vs {want}");
    }

    #[test]
    fn slurms_factor_for_two_users() {
        // All the usage: U = 1, S = 1/2, F = 2^-2.
        assert_eq!(factor_ppm(100, 100, 2), 250_000);
        // None of it: F = 1.
        assert_eq!(factor_ppm(0, 100, 2), 1_000_000);
        // Its fair share exactly: F = 1/2.
        assert_eq!(factor_ppm(50, 100, 2), 500_000);
    }
}
