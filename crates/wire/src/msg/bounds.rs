//! The bounds of what messages carry, checked where text enters: by the CLI before it sends
//! (so a person gets the error at once) and by every server in [`Rpc::check`](crate::Rpc::check)
//! before a handler runs (so no peer can get past them). Each refusal names the bound.
//!
//! Lists a server sends back are fitted to one frame with [`fit_rows`]: a list longer than
//! [`LIST_REPLY_BYTES_MAX`] is paged or cut with its `truncated` marker, never dropped.

use serde::Serialize;

use super::common::{JobId, JobsQuery, Refusal, RefusalCode, UserFilter};
use crate::array::ArraySpec;
use crate::codec::encoded_len;
use crate::limits::{
    ARRAY_ELEMENTS_MAX, IDS_PER_REQUEST_MAX, JOB_NAME_BYTES_MAX, JOB_STATES_PER_QUERY_MAX,
    LIST_REPLY_BYTES_MAX, NAME_BYTES_MAX, NODE_NAME_BYTES_MAX, NODES_PER_REQUEST_MAX,
    REASON_BYTES_MAX, URGENCY_MAX,
};

/// `text` (called `what` in the refusal) is at most `max` bytes.
pub fn text(what: &str, text: &str, max: usize) -> Result<(), Refusal> {
    if text.len() <= max {
        return Ok(());
    }
    Err(Refusal::new(
        RefusalCode::Invalid,
        format!(
            "{what} is {} bytes, more than the {max}-byte limit",
            text.len()
        ),
    ))
}

/// An admin's reason (drain, down, disable): at most [`REASON_BYTES_MAX`] bytes.
pub fn reason(reason: &str) -> Result<(), Refusal> {
    text("the reason", reason, REASON_BYTES_MAX)
}

/// A queue or user name: at most [`NAME_BYTES_MAX`] bytes (names are certificate names).
pub fn name(what: &str, name: &str) -> Result<(), Refusal> {
    text(what, name, NAME_BYTES_MAX)
}

/// [`name`] for an optional name.
pub fn name_opt(what: &str, name: Option<&str>) -> Result<(), Refusal> {
    name.map_or(Ok(()), |n| self::name(what, n))
}

/// Node names: at most [`NODES_PER_REQUEST_MAX`] of them, each at most
/// [`NODE_NAME_BYTES_MAX`] bytes.
pub fn nodes(nodes: &[String]) -> Result<(), Refusal> {
    if nodes.len() > NODES_PER_REQUEST_MAX {
        return Err(Refusal::new(
            RefusalCode::Invalid,
            format!(
                "{} nodes in one request, more than the limit of {NODES_PER_REQUEST_MAX}",
                nodes.len()
            ),
        ));
    }
    nodes
        .iter()
        .try_for_each(|n| text("a node name", n, NODE_NAME_BYTES_MAX))
}

/// The job ids of one request (`what`: "cancel"): at most [`IDS_PER_REQUEST_MAX`].
pub fn ids(what: &str, ids: &[JobId]) -> Result<(), Refusal> {
    if ids.len() <= IDS_PER_REQUEST_MAX {
        return Ok(());
    }
    Err(Refusal::new(
        RefusalCode::Invalid,
        format!(
            "{} job ids in one {what}, more than the limit of {IDS_PER_REQUEST_MAX}",
            ids.len()
        ),
    ))
}

/// An array's indices: within the wire's bounds ([`ArraySpec::check`] with
/// [`ARRAY_ELEMENTS_MAX`]; the shard checks the configured bound).
pub fn array(spec: &ArraySpec) -> Result<(), Refusal> {
    spec.check(ARRAY_ELEMENTS_MAX)
        .map_err(|e| Refusal::new(RefusalCode::Invalid, format!("array: {e}")))
}

/// An urgency: at most [`URGENCY_MAX`].
pub fn urgency(urgency: u8) -> Result<(), Refusal> {
    if urgency <= URGENCY_MAX {
        return Ok(());
    }
    Err(Refusal::new(
        RefusalCode::Invalid,
        format!("urgency {urgency} is above the maximum, {URGENCY_MAX}"),
    ))
}

/// A job list query's names and states.
pub fn jobs_query(query: &JobsQuery) -> Result<(), Refusal> {
    name_opt("the queue name", query.queue.as_deref())?;
    if let Some(name) = &query.name {
        text("the job name", name, JOB_NAME_BYTES_MAX)?;
    }
    if query.states.len() > JOB_STATES_PER_QUERY_MAX {
        return Err(Refusal::new(
            RefusalCode::Invalid,
            format!(
                "{} states in one job query, more than the limit of {JOB_STATES_PER_QUERY_MAX}",
                query.states.len()
            ),
        ));
    }
    user_filter(&query.user)
}

/// A user filter's name.
pub fn user_filter(user: &UserFilter) -> Result<(), Refusal> {
    match user {
        UserFilter::Named(user) => name("the user name", user),
        UserFilter::Mine | UserFilter::All => Ok(()),
    }
}

/// The longest prefix of `rows` whose encoding takes at most `budget` bytes, and whether
/// rows were left out. At least one row is kept when there is one, so paging always moves
/// on (one row never comes near a frame: every text in it has a bound).
pub fn fit_rows<T: Serialize>(rows: impl IntoIterator<Item = T>, budget: usize) -> (Vec<T>, bool) {
    let mut kept = Vec::new();
    let mut used = 0usize;
    for row in rows {
        used = used.saturating_add(encoded_len(&row));
        if used > budget && !kept.is_empty() {
            return (kept, true);
        }
        kept.push(row);
    }
    (kept, false)
}

/// [`fit_rows`] with the bound of a list reply, [`LIST_REPLY_BYTES_MAX`].
pub fn fit_reply<T: Serialize>(rows: impl IntoIterator<Item = T>) -> (Vec<T>, bool) {
    fit_rows(rows, LIST_REPLY_BYTES_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_past_their_bound_are_refused_naming_it() {
        assert!(reason(&"x".repeat(REASON_BYTES_MAX)).is_ok());
        let refusal = reason(&"x".repeat(REASON_BYTES_MAX + 1)).expect_err("too long");
        assert_eq!(refusal.code, RefusalCode::Invalid);
        assert_eq!(
            refusal.message,
            format!(
                "the reason is {} bytes, more than the {REASON_BYTES_MAX}-byte limit",
                REASON_BYTES_MAX + 1
            )
        );
        assert!(nodes(&["n".repeat(NODE_NAME_BYTES_MAX + 1)]).is_err());
        assert!(name("the queue name", &"q".repeat(NAME_BYTES_MAX + 1)).is_err());
    }

    #[test]
    fn rows_are_fitted_to_a_budget_keeping_at_least_one() {
        let rows: Vec<String> = (0..10).map(|i| format!("row{i:04}")).collect();
        let one = encoded_len(&rows[0]);
        let (kept, more) = fit_rows(rows.clone(), 3 * one);
        assert_eq!((kept.len(), more), (3, true));
        let (kept, more) = fit_rows(rows.clone(), 100 * one);
        assert_eq!((kept.len(), more), (10, false));
        let (kept, more) = fit_rows(rows, 1);
        assert_eq!(
            (kept.len(), more),
            (1, true),
            "one row even past the budget"
        );
    }
}
