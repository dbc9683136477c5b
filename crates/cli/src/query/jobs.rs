//! The jobs a session recorded, by id: what `info` and `list` print.

use std::collections::BTreeMap;

use super::JobInfo;

/// Jobs by id. A session numbers its jobs upwards, so they go at the end of one array;
/// an id `update` gives below the last one goes to a map beside it (a lookup asks both),
/// and one an earlier job had replaces that job, as a map's insert does. A job is never
/// removed: a cancelled one stays, `CANCELED`. Why not a map alone: filled in order, a
/// `BTreeMap`'s nodes stay half empty (~100 bytes a job where an entry is 48).
#[derive(Debug, Default)]
pub(super) struct JobTable {
    in_order: Vec<(u64, JobInfo)>,
    others: BTreeMap<u64, JobInfo>,
}

impl JobTable {
    fn position(&self, id: u64) -> Result<usize, usize> {
        match self.in_order.last() {
            Some(&(last, _)) if last < id => Err(self.in_order.len()),
            _ => self.in_order.binary_search_by_key(&id, |e| e.0),
        }
    }

    pub(super) fn insert(&mut self, id: u64, job: JobInfo) {
        match self.position(id) {
            Ok(i) => self.in_order[i].1 = job,
            // Past the last: `others` holds only ids below it (they went there for that).
            Err(i) if i == self.in_order.len() => self.in_order.push((id, job)),
            Err(_) => {
                self.others.insert(id, job);
            }
        }
    }

    pub(super) fn get(&self, id: u64) -> Option<&JobInfo> {
        match self.position(id) {
            Ok(i) => Some(&self.in_order[i].1),
            Err(_) => self.others.get(&id),
        }
    }

    pub(super) fn get_mut(&mut self, id: u64) -> Option<&mut JobInfo> {
        match self.position(id) {
            Ok(i) => Some(&mut self.in_order[i].1),
            Err(_) => self.others.get_mut(&id),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.in_order.len() + self.others.len()
    }

    /// The jobs in id order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u64, &JobInfo)> {
        let mut a = self.in_order.iter().map(|(id, j)| (*id, j)).peekable();
        let mut b = self.others.iter().map(|(id, j)| (*id, j)).peekable();
        std::iter::from_fn(move || match (a.peek(), b.peek()) {
            (Some(x), Some(y)) if y.0 < x.0 => b.next(),
            (Some(_), _) => a.next(),
            (None, _) => b.next(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use super::*;
    use crate::query::Lifecycle;

    fn job(at: i64) -> JobInfo {
        JobInfo {
            state: Lifecycle::Allocated,
            at,
            jobspec: Rc::from("j.yaml"),
            overhead: 0.0,
        }
    }

    #[test]
    fn jobs_come_back_in_id_order_and_an_id_given_again_replaces_its_job() {
        let mut t = JobTable::default();
        for (id, at) in [
            (1, 10),
            (2, 20),
            (7, 70),
            (4, 40),
            (2, 22),
            (9, 90),
            (4, 44),
        ] {
            t.insert(id, job(at));
        }
        let got: Vec<(u64, i64)> = t.iter().map(|(id, j)| (id, j.at)).collect();
        assert_eq!(got, [(1, 10), (2, 22), (4, 44), (7, 70), (9, 90)]);
        assert_eq!((t.len(), t.get(3).is_none()), (5, true));
        if let Some(j) = t.get_mut(7) {
            j.state = Lifecycle::Canceled;
        }
        assert!(matches!(
            t.get(7).map(|j| j.state),
            Some(Lifecycle::Canceled)
        ));
    }
}
