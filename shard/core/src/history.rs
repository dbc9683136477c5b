//! The shard's side of job history: its ended jobs, oldest end first after a cursor, as
//! [`HistoryRecord`]s for the coordinator's history store (`wire::msg::history`), with the
//! cores and GPUs counted from each job's R — what usage is summed from.

use shardsched_resource::read_rv1exec;
use shardsched_wire::msg::bounds;
use shardsched_wire::msg::history::{HISTORY_RECORDS_PER_PULL_MAX, HistoryPull, HistoryRecord};

use crate::job::JobRecord;
use crate::snapshot::Snapshot;

impl Snapshot {
    /// The ended jobs ordered after `pull.after` by `(end_ms, id)`, at most `pull.limit`
    /// (0 or more than [`HISTORY_RECORDS_PER_PULL_MAX`]: that many) and what fits a reply.
    pub fn history(&self, pull: &HistoryPull) -> Vec<HistoryRecord> {
        let limit = match pull.limit {
            0 => HISTORY_RECORDS_PER_PULL_MAX,
            n => n.min(HISTORY_RECORDS_PER_PULL_MAX),
        };
        let mut ended: Vec<&JobRecord> = self
            .iter()
            .filter(|j| !j.state.is_active() && j.end_ms.is_some())
            .filter(|j| {
                pull.after
                    .is_none_or(|after| (j.end_ms.unwrap_or(0), j.id) > (after.end_ms, after.id))
            })
            .collect();
        ended.sort_unstable_by_key(|j| (j.end_ms, j.id));
        ended.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        bounds::fit_reply(ended.into_iter().map(|j| self.record(j))).0
    }

    fn record(&self, job: &JobRecord) -> HistoryRecord {
        let (cores, gpus) = job.r_json.as_deref().map_or((0, 0), held_by);
        HistoryRecord {
            job: job.summary(self.queue(), self.started()),
            r_json: job.r_json.as_deref().map(str::to_owned),
            cores,
            gpus,
        }
    }
}

/// The cores and GPUs an R holds (0, 0 for an R that does not read: the shard wrote it, so
/// that is a bug, logged).
fn held_by(r_json: &str) -> (u32, u32) {
    let graph = match read_rv1exec(r_json) {
        Ok(graph) => graph,
        Err(error) => {
            tracing::warn!(%error, "a finished job's R does not read; its usage counts 0");
            return (0, 0);
        }
    };
    let count = |kind: &str| {
        let n = graph
            .vertices()
            .filter(|v| graph.kind_str(*v) == kind)
            .count();
        u32::try_from(n).unwrap_or(u32::MAX)
    };
    (count("core"), count("gpu"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cores_and_gpus_are_counted_from_r() {
        let r = r#"{"version":1,"execution":{"R_lite":[
            {"rank":"0-1","children":{"core":"0-3","gpu":"0"}}],
            "nodelist":["n[0-1]"],"starttime":0,"expiration":0}}"#;
        assert_eq!(held_by(r), (8, 2));
        assert_eq!(held_by("not json"), (0, 0));
    }
}
