//! Holds and urgency: a held job stays pending with reason `held` and keeps its place by
//! submit time when released; pending jobs run by urgency, then submit time; users may not
//! raise urgency above 16 nor change others' jobs.

use crate::harness::System;

/// Waits for `id` to run, then cancels it: the next job in the queue's order may start.
fn run_then_cancel(system: &System, id: &str) {
    system.wait_state(id, "running");
    system.ok(&["cancel", id]);
}

#[test]
fn held_jobs_wait_and_jobs_run_by_urgency_then_submit_time() {
    let system = System::start("user-holds", &[]);
    let whole = ["-q", "alpha", "-N", "4", "-t", "1h", "--", "app"];
    let with = |flags: &[&str]| {
        let mut args = flags.to_vec();
        args.extend_from_slice(&whole);
        system.submit(&args)
    };
    let fill = with(&[]);
    system.wait_state(&fill, "running");
    let held = with(&["--urgency", "hold"]);
    let default = with(&[]);
    let low = with(&["--urgency", "1"]);
    let expedited = with(&["--urgency", "expedite"]);
    let raised = with(&[]);
    system.ok(&["job", "urgency", &raised, "20"]);

    let row = system.job(&held);
    assert_eq!(
        (row["state"].as_str(), row["reason"].as_str()),
        (Some("pending"), Some("held"))
    );
    assert_eq!(row["urgency"], 0);
    assert_eq!(system.job(&expedited)["urgency"], 31);
    let table = system.ok(&["jobs"]);
    let line = table.lines().find(|l| l.starts_with(&held)).unwrap();
    assert!(line.ends_with("held"), "{table}");

    // Held, it is passed over; released, it is back in its place by submit time (before
    // `default`, submitted after it, at the same urgency).
    run_then_cancel(&system, &fill);
    run_then_cancel(&system, &expedited);
    system.wait_state(&raised, "running");
    assert_eq!(system.job(&held)["reason"], "held");
    system.ok(&["job", "release", &held]);
    assert_eq!(system.job(&held)["urgency"], 16);
    system.ok(&["cancel", &raised]);
    run_then_cancel(&system, &held);
    system.wait_state(&default, "running");
    assert_eq!(system.job(&low)["state"], "pending");
    system.ok(&["job", "hold", &low]);
    system.ok(&["job", "release", &low]);
    assert_eq!(
        system.job(&low)["urgency"],
        16,
        "release gives the default urgency"
    );
    system.ok(&["cancel", &default]);
    system.wait_state(&low, "running");
}

#[test]
fn users_may_not_expedite_nor_change_others_jobs() {
    let system = System::start("user-urgency-rights", &[]);
    let bob = system.user_dir("bob");
    let fill = system.submit(&["-q", "alpha", "-N", "4", "-t", "1h", "--", "app"]);
    let mine = system.submit(&["-q", "alpha", "-N", "4", "-t", "1h", "--", "app"]);
    let out = system.cli_in(&bob, &["submit", "--urgency", "20", "--", "app"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("above 16"), "{err}");
    let out = system.cli_in(&bob, &["job", "hold", &mine]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("not your job"),
        "{err}"
    );
    let out = system.cli_in(&bob, &["job", "urgency", &mine, "31"]);
    assert!(!out.status.success());
    system.wait_state(&fill, "running");
    let err = system.fails(&["job", "hold", &fill]);
    assert!(err.contains("not pending"), "{err}");
    let err = system.fails(&["submit", "--urgency", "32", "--", "app"]);
    assert!(err.contains("not an urgency"), "{err}");
    // The old flag still works, as an alias.
    let old = system.submit(&["--priority", "3", "-q", "alpha", "--", "app"]);
    assert_eq!(system.job(&old)["urgency"], 3);
}
