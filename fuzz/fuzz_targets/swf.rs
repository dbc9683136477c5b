//! Arbitrary bytes into the SWF reader (`shardsched replay --workload FILE`) and back out
//! through its writer: nothing may panic, every error must print, and what it accepts must
//! round-trip — written back with no fates, every line byte for byte; written with a fate
//! for each job, the same lines and jobs with only the wait (and, for a job that never ran,
//! the status) changed. (A wait wider than the field it replaces can push a line past
//! `SWF_LINE_BYTES_MAX`; such output is not read back.)

#![no_main]

use libfuzzer_sys::fuzz_target;
use shardsched_replay::swf::{
    Fate, STATUS_NOT_RUN, SWF_LINE_BYTES_MAX, parse, parse_bytes, write_with_waits,
};

fuzz_target!(|data: &[u8]| {
    let workload = match parse_bytes(data) {
        Ok(workload) => workload,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    let unchanged: String = workload.lines.iter().map(|l| format!("{l}\n")).collect();
    assert_eq!(write_with_waits(&workload, &[]), unchanged);

    // A fate for each job, drawn from its own fields.
    let fates: Vec<Fate> = workload
        .jobs
        .iter()
        .map(|job| match job.number % 3 {
            0 => Fate::NotRun,
            _ => Fate::Waited(job.submit.wrapping_mul(7) % 100_000),
        })
        .collect();
    let written = write_with_waits(&workload, &fates);
    if written.lines().any(|l| l.len() > SWF_LINE_BYTES_MAX) {
        return;
    }
    let again = parse(&written).expect("what the writer wrote reads back");
    assert_eq!(again.lines.len(), workload.lines.len());
    assert_eq!(again.jobs.len(), workload.jobs.len());
    for ((before, after), fate) in workload.jobs.iter().zip(&again.jobs).zip(&fates) {
        let (wait, status) = match *fate {
            Fate::Waited(wait) => (wait, before.status),
            Fate::NotRun => (-1, STATUS_NOT_RUN),
        };
        assert_eq!(after.wait, wait);
        assert_eq!(after.status, status);
        assert_eq!(
            (after.line, after.number, after.submit, after.run, after.user),
            (before.line, before.number, before.submit, before.run, before.user)
        );
    }
});
