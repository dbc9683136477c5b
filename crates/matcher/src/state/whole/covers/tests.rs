//! The whole covers' rows, against a list of covers per whole.

use proptest::prelude::*;

use super::WholeCovers;

/// One step: add a cover `[start, start + len)` to a whole, remove one of its covers,
/// or ask about a window.
#[derive(Clone, Debug)]
enum Step {
    Add(u32, i64, i64),
    /// Add a cover over one window to each whole of a mask it is free for, in a row, as a
    /// commit adds a job's.
    AddEach(i64, i64, u8),
    Remove(u32, usize),
    /// Remove the covers starting at an instant of the wholes in a mask, together.
    RemoveEach(i64, u8),
    Ask(u32, i64, i64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..3u32, 0..60i64, 1..12i64).prop_map(|(c, s, l)| Step::Add(c, s, l)),
        (0..60i64, 1..12i64, 0..8u8).prop_map(|(s, l, m)| Step::AddEach(s, l, m)),
        (0..3u32, 0..8usize).prop_map(|(c, k)| Step::Remove(c, k)),
        (0..60i64, 0..8u8).prop_map(|(t, m)| Step::RemoveEach(t, m)),
        (0..3u32, -5..70i64, 0..20i64).prop_map(|(c, s, l)| Step::Ask(c, s, l)),
    ]
}

/// A cover is removed by its start, and only a start some cover has removes one.
#[test]
fn removed_by_start() {
    let mut w = WholeCovers::new(1);
    assert!(w.add(0, 0, 10));
    assert!(w.add(0, 10, 20));
    assert!(!w.add(0, 5, 12), "over two others");
    assert!(!w.add(0, 30, 30), "an empty window");
    assert_eq!(w.remove(0, 5), None, "no cover starts at 5");
    assert_eq!(w.remove(0, 20), None, "a bound, but where a cover ends");
    assert_eq!(w.remove(0, 10), Some((10, 20)));
    assert_eq!(w.remove(0, 10), None, "removed already");
    assert_eq!(w.remove(0, 0), Some((0, 10)));
    assert_eq!(w.live, 0);
    assert_eq!(w.remove(1, 0), None, "no such whole");
    assert_eq!(w, WholeCovers::new(1), "no bound is left");
}

/// More bounds than a plane holds: the rows get another and keep their covers.
#[test]
fn rows_widen() {
    let mut w = WholeCovers::new(2);
    for i in 0..100i64 {
        assert!(w.add((i % 2) as usize, i * 10, i * 10 + 5));
    }
    assert_eq!(w.all(1).count(), 50);
    assert_eq!(w.all(0).map(|x| (x.start, x.end)).nth(49), Some((980, 985)));
    for i in 0..100i64 {
        assert_eq!(
            w.remove((i % 2) as usize, i * 10),
            Some((i * 10, i * 10 + 5))
        );
    }
    assert_eq!(w, WholeCovers::new(2));
}

/// A job's covers cut short differently end at two bounds: taken out together all the
/// same, each counted (proptest's case, met at 3,000 cases).
#[test]
fn covers_ending_apart_taken_out_together() {
    let mut w = WholeCovers::new(3);
    for (c, start, end) in [(0, 13, 14), (1, 13, 14), (1, 0, 1), (2, 13, 15)] {
        assert!(w.add(c, start, end));
    }
    assert!(w.remove_each(&[0, 1, 2], 13));
    assert_eq!(w.live, 1);
    assert_eq!(
        w.all(1).map(|x| (x.start, x.end)).collect::<Vec<_>>(),
        [(0, 1)]
    );
    assert_eq!(w.remove(1, 0), Some((0, 1)));
    assert_eq!(w, WholeCovers::new(3));
}

/// A list naming a whole twice takes its cover out once and says it could not take out
/// every one (the job holds one cover a whole: never met but by a bug).
#[test]
fn a_whole_named_twice_is_taken_out_once() {
    let mut w = WholeCovers::new(2);
    assert!(w.add(0, 0, 10));
    assert!(w.add(1, 0, 10));
    assert!(!w.remove_each(&[0, 1, 1], 0));
    assert_eq!(w.live, 0);
    assert_eq!(w, WholeCovers::new(2));
}

/// A cover taken out leaves its bounds dead, in place; a cover over the same window brings
/// them back without moving a row; past `DEAD_BOUNDS_MAX` dead ones, all go at once.
#[test]
fn dead_bounds_come_back_or_go_together() {
    let mut w = WholeCovers::new(2);
    assert!(w.add(0, 0, 10));
    assert!(w.add(1, 5, 20));
    assert_eq!(w.remove(0, 0), Some((0, 10)));
    assert_eq!((w.bounds.as_slice(), w.dead), (&[0, 5, 10, 20][..], 2));
    assert_eq!(
        w.all(1).map(|x| (x.start, x.end)).collect::<Vec<_>>(),
        [(5, 20)]
    );
    assert!(!w.meets(0, 0, 100), "a dead bound holds nothing");
    let epoch = w.epoch;
    assert!(w.add(0, 0, 10));
    assert_eq!(
        (w.dead, w.epoch),
        (0, epoch),
        "both bounds came back as they were"
    );
    assert_eq!(w.remove(0, 0), Some((0, 10)));
    assert_eq!(w.remove(1, 5), Some((5, 20)));
    assert_eq!(w, WholeCovers::new(2), "equal, dead bounds aside");
    let dead = w.dead;
    for i in 0..100 {
        assert!(w.add(0, 100 + 10 * i, 105 + 10 * i));
        assert_eq!(
            w.remove(0, 100 + 10 * i),
            Some((100 + 10 * i, 105 + 10 * i))
        );
        if w.dead == 0 {
            break;
        }
        assert!(w.dead > dead && w.dead <= super::change::DEAD_BOUNDS_MAX);
    }
    assert_eq!((w.bounds.len(), w.dead), (0, 0), "taken out together");
}

proptest! {
    /// The rows answer as a list of each whole's covers would, whatever was added and
    /// removed between two questions.
    #[test]
    fn rows_answer_as_lists(steps in proptest::collection::vec(step(), 1..200)) {
        let mut w = WholeCovers::new(3);
        let mut lists: Vec<Vec<(i64, i64)>> = vec![Vec::new(); 3];
        for s in steps {
            match s {
                Step::Add(c, start, len) => {
                    let list = &mut lists[c as usize];
                    let free = !list.iter().any(|x| x.0 < start + len && x.1 > start);
                    prop_assert_eq!(w.add(c as usize, start, start + len), free);
                    if free {
                        list.push((start, start + len));
                        list.sort_unstable();
                    }
                }
                Step::AddEach(start, len, mask) => {
                    for c in (0..3usize).filter(|c| mask >> c & 1 == 1) {
                        let list = &mut lists[c];
                        if !list.iter().any(|x| x.0 < start + len && x.1 > start) {
                            w.add_free(c, start, start + len);
                            list.push((start, start + len));
                            list.sort_unstable();
                        }
                    }
                }
                Step::Remove(c, k) => {
                    let list = &mut lists[c as usize];
                    if k < list.len() {
                        let x = list.remove(k);
                        prop_assert_eq!(w.remove(c as usize, x.0), Some(x));
                    }
                }
                Step::RemoveEach(t, mask) => {
                    let cs: Vec<u32> = (0..3u32).filter(|c| mask >> c & 1 == 1).collect();
                    let all = cs.iter().all(|&c| lists[c as usize].iter().any(|x| x.0 == t));
                    let before = w.clone();
                    prop_assert_eq!(w.remove_each(&cs, t), all);
                    if all {
                        for &c in &cs {
                            lists[c as usize].retain(|x| x.0 != t);
                        }
                    } else {
                        prop_assert_eq!(&w, &before, "nothing taken out");
                    }
                }
                Step::Ask(c, at, len) => {
                    let end = at + len;
                    let list = &lists[c as usize];
                    let meet: Vec<(i64, i64)> = list
                        .iter()
                        .filter(|x| x.0 < end && x.1 > at)
                        .map(|x| (x.0.max(at), x.1.min(end)))
                        .collect();
                    prop_assert_eq!(w.meets(c, at, end), !meet.is_empty());
                    prop_assert_eq!(w.meeting(c, at, end).collect::<Vec<_>>(), meet.clone());
                    prop_assert_eq!(w.jobs_meeting(c, at, end), meet.len() as i64);
                    let after: Vec<(i64, i64)> =
                        list.iter().copied().filter(|x| x.1 > at).collect();
                    let got: Vec<(i64, i64)> =
                        w.ending_after(c, at).map(|x| (x.start, x.end)).collect();
                    prop_assert_eq!(got, after);
                    let mut free = at;
                    for x in list {
                        if x.1 > free && x.0 < free + len {
                            free = x.1;
                        }
                    }
                    prop_assert_eq!(w.free_from(c, at, len, Some), Some(free));
                    // Other records free only from an instant on.
                    let own = |t: i64| Some(t.max(30));
                    let mut want = at;
                    loop {
                        let t = own(want).unwrap_or(want);
                        let mut moved = t;
                        for x in list {
                            if x.1 > moved && x.0 < moved + len {
                                moved = x.1;
                            }
                        }
                        want = moved;
                        if moved == t {
                            break;
                        }
                    }
                    prop_assert_eq!(w.free_from(c, at, len, own), Some(want));
                }
            }
            prop_assert_eq!(w.live, lists.iter().map(Vec::len).sum::<usize>());
        }
        for (c, list) in lists.iter().enumerate() {
            let got: Vec<(i64, i64)> = w.all(c as u32).map(|x| (x.start, x.end)).collect();
            prop_assert_eq!(&got, list);
            for x in list {
                prop_assert_eq!(w.remove(c, x.0), Some(*x));
            }
        }
        prop_assert_eq!(w, WholeCovers::new(3));
    }
}
