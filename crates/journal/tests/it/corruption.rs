//! A damaged journal either refuses to open, naming the file, or opens with every
//! acknowledged record intact: truncations at many offsets, byte flips at many offsets, and
//! random corruptions (proptest), of a journal closed cleanly and of one left as SIGKILL
//! leaves it. (The killed case is what rules out redb's one-phase commit: with it, a flip
//! in the newest commit slot of a killed journal silently brings back the previous commit.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use shardsched_journal::{Batch, Journal};

/// What was acknowledged: table → key → value, and the named values.
#[derive(Clone, Debug, Default, PartialEq)]
struct Acked {
    tables: BTreeMap<String, BTreeMap<u64, Vec<u8>>>,
    metas: BTreeMap<String, Vec<u8>>,
}

/// How the sample journal's process ended.
#[derive(Clone, Copy, Debug)]
enum Ending {
    /// Closed cleanly.
    Closed,
    /// Killed: the bytes are taken while the journal is still open, as SIGKILL leaves them
    /// (redb then repairs on open, which is where a damaged commit slot could be replaced by
    /// the previous commit).
    Killed,
}

/// Writes a journal of several commits (puts, deletes, a retention cut, named values) and
/// returns its bytes and what it acknowledged.
fn sample_journal(dir: &Path, ending: Ending) -> (Vec<u8>, Acked) {
    let path = dir.join("sample.redb");
    let journal = Journal::open(&path).expect("open");
    let mut acked = Acked::default();
    for round in 0..20u64 {
        let mut batch = Batch::new();
        for i in 0..10u64 {
            let key = round * 10 + i;
            let value = format!(
                "job {key} round {round} {}",
                "x".repeat((key % 37) as usize)
            )
            .into_bytes();
            batch.put("jobs", key, value.clone());
            acked
                .tables
                .entry("jobs".into())
                .or_default()
                .insert(key, value);
        }
        if round % 3 == 0 {
            batch.put("nodes", round, vec![round as u8; 24]);
            acked
                .tables
                .entry("nodes".into())
                .or_default()
                .insert(round, vec![round as u8; 24]);
        }
        if round >= 5 {
            batch.delete("jobs", round * 10 - 45);
            if let Some(t) = acked.tables.get_mut("jobs") {
                t.remove(&(round * 10 - 45));
            }
        }
        batch.put_meta("last_round", round.to_le_bytes());
        acked
            .metas
            .insert("last_round".into(), round.to_le_bytes().to_vec());
        journal.commit(&batch).expect("commit");
    }
    let mut cut = Batch::new();
    cut.delete_below("jobs", 20);
    journal.commit(&cut).expect("commit");
    if let Some(t) = acked.tables.get_mut("jobs") {
        t.retain(|&k, _| k >= 20);
    }
    let bytes = match ending {
        Ending::Killed => std::fs::read(&path).expect("read journal"),
        Ending::Closed => {
            drop(journal);
            std::fs::read(&path).expect("read journal")
        }
    };
    (bytes, acked)
}

/// Opens the damaged bytes at `path`; Ok(true) if it opened intact, Ok(false) if it was
/// refused with the file named, Err(why) for anything else (a silent loss, an error that
/// does not name the file).
fn check(path: &Path, bytes: &[u8], acked: &Acked) -> Result<bool, String> {
    std::fs::write(path, bytes).map_err(|e| e.to_string())?;
    let opened = Journal::open(path);
    let journal = match opened {
        Err(e) => {
            let text = e.to_string();
            return if text.contains(&path.display().to_string()) && e.path == path {
                Ok(false)
            } else {
                Err(format!("error does not name the file: {text}"))
            };
        }
        Ok(j) => j,
    };
    let mut found = Acked::default();
    for table in journal.tables().map_err(|e| e.to_string())? {
        let rows = match journal.scan(&table) {
            Ok(rows) => rows,
            Err(e) => return Err(format!("opened, then failed reading {table}: {e}")),
        };
        found.tables.insert(table, rows.into_iter().collect());
    }
    found.metas = journal.metas().map_err(|e| e.to_string())?;
    found.tables.retain(|_, t| !t.is_empty());
    if &found != acked {
        return Err("opened with acknowledged records missing or changed".into());
    }
    Ok(true)
}

fn scratch(dir: &Path) -> PathBuf {
    dir.join("damaged.redb")
}

#[test]
fn an_intact_copy_opens_with_everything() {
    for ending in [Ending::Closed, Ending::Killed] {
        let dir = tempfile::tempdir().expect("temp dir");
        let (bytes, acked) = sample_journal(dir.path(), ending);
        assert_eq!(
            check(&scratch(dir.path()), &bytes, &acked),
            Ok(true),
            "{ending:?}"
        );
    }
}

#[test]
fn truncations_refuse_or_keep_everything() {
    for ending in [Ending::Closed, Ending::Killed] {
        truncations(ending);
    }
}

fn truncations(ending: Ending) {
    let dir = tempfile::tempdir().expect("temp dir");
    let (bytes, acked) = sample_journal(dir.path(), ending);
    let len = bytes.len();
    let mut offsets: Vec<usize> = vec![
        0,
        1,
        7,
        64,
        511,
        512,
        4095,
        4096,
        4097,
        len / 3,
        len / 2,
        len - 4096,
        len - 1,
    ];
    offsets.extend((0..len).step_by(len / 23 + 1));
    let mut refused = 0;
    for at in offsets {
        match check(&scratch(dir.path()), &bytes[..at], &acked) {
            Ok(true) => {}
            Ok(false) => refused += 1,
            Err(why) => panic!("{ending:?}, truncated at {at} of {len}: {why}"),
        }
    }
    assert!(refused > 0, "no truncation was noticed");
}

#[test]
fn byte_flips_refuse_or_keep_everything() {
    for ending in [Ending::Closed, Ending::Killed] {
        byte_flips(ending);
    }
}

fn byte_flips(ending: Ending) {
    let dir = tempfile::tempdir().expect("temp dir");
    let (bytes, acked) = sample_journal(dir.path(), ending);
    let len = bytes.len();
    // The header's first 320 bytes (god byte, layout, both commit slots: every byte of
    // the first 64, every third after), then about 400 offsets over the whole file.
    let mut offsets: Vec<usize> = (0..64).chain((64..320).step_by(3)).collect();
    offsets.extend((320..len).step_by(len / 400 + 1));
    let mut refused = 0;
    let mut failures = Vec::new();
    for at in offsets {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x5a;
        match check(&scratch(dir.path()), &damaged, &acked) {
            Ok(true) => {}
            Ok(false) => refused += 1,
            Err(why) => failures.push(format!("{ending:?}, flip at {at}: {why}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of the flips: {:#?}",
        failures.len(),
        failures
    );
    assert!(refused > 0, "no flip was noticed");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    #[test]
    fn random_corruptions_refuse_or_keep_everything(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..6),
        truncate in proptest::option::of(any::<prop::sample::Index>()),
        killed in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().expect("temp dir");
        let ending = if killed { Ending::Killed } else { Ending::Closed };
        let (mut bytes, acked) = sample_journal(dir.path(), ending);
        for (at, mask) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= mask;
        }
        if let Some(at) = truncate {
            let n = at.index(bytes.len());
            bytes.truncate(n);
        }
        let outcome = check(&scratch(dir.path()), &bytes, &acked);
        prop_assert!(outcome.is_ok(), "{:?}", outcome);
    }
}
