//! Generated ids (Fluxion's `gen_id`), one at a time and a parent's children at once.

use super::recipe::RecipeEdge;
use crate::error::{Location, ReadError};

/// Fluxion's `gen_id`: the id of the `i`-th child of the `j`-th source vertex of `e`, with
/// `scales` the `multi_scale`s of the tree edges on the DFS path, innermost last.
pub(super) fn gen_id(e: &RecipeEdge, scales: &[i64], i: i64, j: i64) -> Result<i64, ReadError> {
    let overflow = || {
        let msg = format!("edge {:?}: the generated id overflows", e.name);
        ReadError::invalid(Location::Line(e.line), msg)
    };
    if e.id_scope < 0 {
        return Ok(-1);
    }
    if e.id_scope == 0 {
        // Fluxion ignores the stride at scope 0.
        return e.id_start.checked_add(i).ok_or_else(overflow);
    }
    let step = i.checked_mul(e.id_stride).ok_or_else(overflow)?;
    let scope = usize::try_from(e.id_scope)
        .unwrap_or(usize::MAX)
        .min(scales.len());
    let mut wrap: i64 = 1;
    for s in scales.iter().rev().take(scope) {
        wrap = wrap.checked_mul(*s).ok_or_else(overflow)?;
    }
    let block = match wrap {
        0 => 0,
        w => j % w,
    };
    let base = block
        .checked_mul(e.multi_scale)
        .and_then(|b| b.checked_mul(e.id_stride))
        .ok_or_else(overflow)?;
    e.id_start
        .checked_add(base)
        .and_then(|b| b.checked_add(step))
        .ok_or_else(overflow)
}

/// The ids of the `multi_scale` children of the `j`-th source vertex of `e`: [`gen_id`] of
/// each, found from the first and the last. For a fixed `j` the ids are `first + i * d`,
/// `d` being 0 (a negative scope), 1 (scope 0) or the stride, and the arithmetic `gen_id`
/// checks is monotonic in `i`: when the first and the last id are made without overflow,
/// so is every id between, and when one overflows `gen_id` fails for some child (with the
/// same error for every child). So a parent's children cost two `gen_id`s, not one each.
pub(super) fn sibling_ids(
    e: &RecipeEdge,
    scales: &[i64],
    j: i64,
) -> Result<impl ExactSizeIterator<Item = i64> + Clone + use<>, ReadError> {
    let count = usize::try_from(e.multi_scale).unwrap_or(0);
    let (first, d) = match count {
        0 => (0, 0),
        _ => {
            let first = gen_id(e, scales, 0, j)?;
            gen_id(e, scales, e.multi_scale - 1, j)?;
            let d = match e.id_scope {
                s if s < 0 => 0,
                0 => 1,
                _ => e.id_stride,
            };
            (first, d)
        }
    };
    // No overflow: each id lies between the first and the last.
    Ok((0..count).map(move |i| first + i as i64 * d))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use proptest::prelude::*;

    use super::*;
    use crate::grug::recipe::GenMethod;

    fn edge(id_scope: i64, id_start: i64, id_stride: i64, multi_scale: i64) -> RecipeEdge {
        RecipeEdge {
            name: "e".into(),
            line: 1,
            source: 0,
            target: 1,
            e_subsystem: "containment".into(),
            id_scope,
            id_start,
            id_stride,
            gen_method: GenMethod::Multiply,
            multi_scale,
            as_tgt_subsystem: "containment".into(),
            as_tgt_uplvl: 1,
            as_src_uplvl: 1,
        }
    }

    /// What `sibling_ids` must equal: every child's `gen_id`, or the first error.
    fn one_by_one(e: &RecipeEdge, scales: &[i64], j: i64) -> Result<Vec<i64>, String> {
        (0..e.multi_scale.max(0))
            .map(|i| gen_id(e, scales, i, j).map_err(|err| err.to_string()))
            .collect()
    }

    fn at_once(e: &RecipeEdge, scales: &[i64], j: i64) -> Result<Vec<i64>, String> {
        sibling_ids(e, scales, j)
            .map(Iterator::collect)
            .map_err(|err| err.to_string())
    }

    #[test]
    fn siblings_ids_are_gen_ids_near_the_limits_too() {
        let big = [
            i64::MIN,
            i64::MIN + 1,
            -7,
            -1,
            0,
            1,
            3,
            i64::MAX - 2,
            i64::MAX,
        ];
        for scope in [-1, 0, 1, 2, 5] {
            for start in big {
                for stride in big {
                    for scale in [0, 1, 2, 3, 22] {
                        let e = edge(scope, start, stride, scale);
                        for scales in [&[][..], &[16, 64], &[i64::MAX, 2]] {
                            for j in [0, 5, 1023] {
                                assert_eq!(
                                    at_once(&e, scales, j),
                                    one_by_one(&e, scales, j),
                                    "scope {scope} start {start} stride {stride} scale {scale}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    proptest! {
        #[test]
        fn siblings_ids_are_gen_ids(
            scope in -2i64..4,
            start in any::<i64>(),
            stride in prop_oneof![any::<i64>(), -100i64..100],
            scale in 0i64..40,
            j in 0i64..5000,
            scales in proptest::collection::vec(prop_oneof![0i64..70, any::<i64>()], 0..4),
        ) {
            let e = edge(scope, start, stride, scale);
            prop_assert_eq!(at_once(&e, &scales, j), one_by_one(&e, &scales, j));
        }
    }
}
