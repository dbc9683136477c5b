//! The `exec` executor, end to end: `shardsched up --executor exec` (a coordinator and one
//! shard per queue, real processes), jobs that really run and write files, time limits and
//! cancels that kill whole process groups, exit statuses recorded; and the supervisor on
//! its own, recovered after its shard "died" (every handle dropped).

#![allow(clippy::unwrap_used)]

use crate::harness;

use std::collections::BTreeMap;
use std::path::Path;

use harness::{SUPERVISOR_EXE, System, alive, read_pid_file, wait_for};
use rustix::process::{Signal, kill_process};
use shardsched_proto::Fluid;
use shardsched_shard::exec::launch::Prepared;
use shardsched_shard::exec::{
    CANCEL_FILE, EndCause, Plan, RunningOrEnded, job_dir, launch, recover, request_kill,
};

/// The `SHARDSCHED_*` lines of an `env` dump.
fn shardsched_vars(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| k.starts_with("SHARDSCHED_"))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

#[test]
fn exec_jobs_run_with_their_allocation_in_the_environment_and_record_their_exit() {
    let system = System::start("exec-env", &["--executor", "exec"]);
    let out = system.dir.join("env.txt");
    let script = format!(
        "env > {}.tmp && mv {0}.tmp {0}; echo to-stdout; echo to-stderr >&2",
        out.display()
    );
    let id = system.submit(&["-N", "2", "-t", "60s", "--", "sh", "-c", &script]);
    let row = system.wait_state(&id, "completed");
    let vars = shardsched_vars(&std::fs::read_to_string(&out).unwrap());
    assert_eq!(vars["SHARDSCHED_JOB_ID"], id);
    assert_eq!(
        vars["SHARDSCHED_JOB_NODELIST"],
        row["nodes"].as_str().unwrap()
    );
    assert_eq!(vars["SHARDSCHED_JOB_NNODES"], "2");
    assert_eq!(
        vars["SHARDSCHED_JOB_NCORES"], "8",
        "two whole nodes of 4 cores"
    );
    assert_eq!(vars["SHARDSCHED_JOB_CORES_PER_NODE"], "4,4");
    assert_eq!(vars["SHARDSCHED_JOB_GPUS"], "0");
    assert_eq!(vars["SHARDSCHED_QUEUE"], "alpha");
    assert_eq!(vars["SHARDSCHED_JOB_TIME_LIMIT"], "60");
    let dir = job_dir(&system.shard_dir("alpha").join("jobs"), id.parse().unwrap());
    assert_eq!(Path::new(&vars["SHARDSCHED_JOB_DIR"]), dir);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&vars["SHARDSCHED_JOB_R"]).unwrap()).unwrap();
    assert_eq!(r["execution"]["nodelist"][0], row["nodes"]);
    // Output in the files `job info` names, and the exit status beside them.
    assert_eq!(
        std::fs::read_to_string(dir.join("stdout")).unwrap(),
        "to-stdout\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("stderr")).unwrap(),
        "to-stderr\n"
    );
    // `job output` reads them through the shard.
    assert_eq!(system.ok(&["job", "output", &id]), "to-stdout\n");
    assert_eq!(
        system.ok(&["job", "output", &id, "--stderr"]),
        "to-stderr\n"
    );
    let info = system.ok(&["job", "info", &id]);
    assert!(
        info.contains(&format!("stdout     {}", dir.join("stdout").display())),
        "{info}"
    );
    assert!(
        info.contains("exit       exit code 0 (completed)"),
        "{info}"
    );

    let failing = system.submit(&["-n", "1", "--", "sh", "-c", "exit 7"]);
    let row = system.wait_state(&failing, "failed");
    assert_eq!(row["reason"], "exit code 7");
    let info = system.ok(&["job", "info", &failing]);
    assert!(
        info.contains("exit       exit code 7 (completed)"),
        "{info}"
    );
    let status = std::fs::read_to_string(
        job_dir(
            &system.shard_dir("alpha").join("jobs"),
            failing.parse().unwrap(),
        )
        .join("status"),
    )
    .unwrap();
    assert!(status.contains("\"exit_code\":7"), "{status}");

    let missing = system.submit(&["-n", "1", "--", "/no/such/program"]);
    let row = system.wait_state(&missing, "failed");
    assert!(
        row["reason"]
            .as_str()
            .unwrap()
            .starts_with("could not start"),
        "{row:#}"
    );
}

#[test]
fn time_limits_and_cancels_kill_the_whole_process_group() {
    let system = System::start("exec-kill", &["--executor", "exec"]);
    // Each job starts a background sleep (same process group) and says who is who.
    let script = |tag: &str, trap: &str| {
        let out = system.dir.join(tag);
        format!(
            "{trap} sleep 300 & echo $! > {o}.bg; echo $$ > {o}.sh; wait",
            o = out.display()
        )
    };
    let timed = system.submit(&[
        "-n",
        "1",
        "-t",
        "2s",
        "--",
        "sh",
        "-c",
        &script("timed", ""),
    ]);
    // This one ignores SIGTERM (and so does its sleep): only the SIGKILL after the grace
    // period ends it.
    let stubborn = script("stubborn", "trap '' TERM;");
    let cancelled = system.submit(&["-n", "1", "-t", "600s", "--", "sh", "-c", &stubborn]);
    let pids = |tag: &str| {
        let out = system.dir.join(tag);
        [
            read_pid_file(&out.with_extension("sh")),
            read_pid_file(&out.with_extension("bg")),
        ]
    };
    let (timed_pids, cancelled_pids) = (pids("timed"), pids("stubborn"));
    assert!(cancelled_pids.iter().all(|&p| alive(p)));
    system.ok(&["cancel", &cancelled]);

    let row = system.wait_state(&timed, "failed");
    let reason = row["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("timeout: time limit of 2 s reached"),
        "{reason}"
    );
    assert!(
        timed_pids.iter().all(|&p| !alive(p)),
        "the timed-out job's processes {timed_pids:?} are gone"
    );
    let row = system.wait_state(&cancelled, "cancelled");
    assert!(
        row["reason"].as_str().unwrap().contains("cancelled by"),
        "{row:#}"
    );
    assert!(
        cancelled_pids.iter().all(|&p| !alive(p)),
        "the cancelled job's processes {cancelled_pids:?} are gone"
    );
    let info = system.ok(&["job", "info", &cancelled]);
    assert!(info.contains("killed by signal 9 (cancelled)"), "{info}");
    // Their nodes are free again.
    let next = system.submit(&["-N", "4", "--", "true"]);
    system.wait_state(&next, "completed");

    // A node marked down under a running job: the job fails and its processes are killed.
    let doomed = system.submit(&["-N", "1", "--", "sh", "-c", &script("doomed", "")]);
    let doomed_pids = pids("doomed");
    let node = system.wait_state(&doomed, "running")["nodes"]
        .as_str()
        .unwrap()
        .to_owned();
    system.ok(&["resource", "down", &node, "--reason", "test"]);
    let row = system.wait_state(&doomed, "failed");
    assert_eq!(row["reason"], format!("node {node} went down: test"));
    assert!(
        doomed_pids.iter().all(|&p| !alive(p)),
        "the failed job's processes {doomed_pids:?} are gone"
    );
}

/// A job that outlives its allocation's span (its supervisor counts the time limit from its
/// own start, then gives the kill grace) keeps its nodes until its end is reported: the next
/// job on them starts only after it, and after its processes are gone.
#[test]
fn a_job_past_its_time_limit_keeps_its_nodes_until_its_processes_are_gone() {
    let system = System::start("exec-completing", &["--executor", "exec"]);
    let out = system.dir.join("stubborn");
    let stubborn = format!(
        "trap '' TERM; sleep 300 & echo $! > {o}.bg; wait",
        o = out.display()
    );
    let first = system.submit(&["-N", "4", "-t", "2s", "--", "sh", "-c", &stubborn]);
    let sleep = read_pid_file(&out.with_extension("bg"));
    let second = system.submit(&["-N", "4", "-t", "1m", "--", "true"]);
    system.wait_state(&second, "completed");
    assert!(!alive(sleep), "the first job's sleep {sleep} outlived it");
    let ms = |id: &str, field: &str| {
        system.json(&["job", "info", id, "--json"])[field]
            .as_u64()
            .unwrap()
    };
    assert!(
        ms(&first, "end_ms") <= ms(&second, "start_ms"),
        "the second job started before the first's end was reported"
    );
}

/// A shard killed with SIGKILL leaves its jobs running under their supervisors, which
/// write their exit status when the jobs end; `recover` reads it back, and the shard
/// restarted from its journal (by `up`) watches the job again and records its end.
#[test]
fn a_running_job_survives_its_shard_being_killed_and_its_end_reaches_the_restarted_shard() {
    let system = System::start("exec-survive", &["--executor", "exec"]);
    let go = system.dir.join("go");
    let script = format!(
        "echo $$ > {d}/job.pid; while [ ! -e {go} ]; do sleep 0.1; done; exit 5",
        d = system.dir.display(),
        go = go.display()
    );
    let id = system.submit(&["-n", "1", "--", "sh", "-c", &script]);
    system.wait_state(&id, "running");
    let job_pid = read_pid_file(&system.dir.join("job.pid"));
    let shard = system.shard_dir("alpha");
    let dir = job_dir(&shard.join("jobs"), id.parse().unwrap());
    let supervisor = read_pid_file(&dir.join("supervisor.pid"));

    kill_process(harness::pid(system.child_pid("alpha")), Signal::KILL).unwrap();
    assert!(
        alive(supervisor) && alive(job_pid),
        "the job outlives its shard"
    );
    let running = recover(&shard).unwrap();
    assert!(
        matches!(running.as_slice(), [(j, RunningOrEnded::Running { pid })] if j.to_string() == id && *pid == supervisor),
        "{running:?}"
    );
    // `up` restarts the shard; its journal says the job runs.
    assert!(
        wait_for(|| {
            let out = system.cli(&["jobs", "-A", "-a", "--json"]);
            let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            rows.as_array().is_some_and(|rows| {
                rows.iter()
                    .any(|j| j["id"] == id.as_str() && j["state"] == "running")
            })
        }),
        "the restarted shard lists the job running"
    );
    std::fs::write(&go, "").unwrap();
    let row = system.wait_state(&id, "failed");
    assert_eq!(row["reason"], "exit code 5");
    let ended = recover(&shard).unwrap();
    let [(_, RunningOrEnded::Ended(end))] = ended.as_slice() else {
        panic!("expected one ended job: {ended:?}");
    };
    assert_eq!((end.cause, end.exit_code), (EndCause::Completed, Some(5)));
}

/// A cancel acknowledged is kept across a shard killed with SIGKILL before the job's
/// processes are gone (they ignore SIGTERM, so they live through the kill grace): the
/// restarted shard asks for the kill again from its journal, and the job ends cancelled
/// with the cancel's own reason. Twice: with the kill held back after the answer (the
/// failpoint `shard.kill.before_exec`: no cancel file was ever written), and with the kill
/// under way (the shard killed during the grace).
#[test]
fn a_cancel_survives_its_shard_being_killed_before_the_processes_are_gone() {
    let once = std::env::temp_dir().join(format!(
        "shardsched-failpoints-once-cancel-{}-{}",
        std::process::id(),
        harness::now_ms()
    ));
    std::fs::create_dir_all(&once).unwrap();
    let system = System::start_with_env(
        "exec-cancel-restart",
        &harness::two_queues_config(),
        &["--executor", "exec"],
        &[
            (
                "SHARDSCHED_FAILPOINTS",
                "alpha/shard.kill.before_exec=sleep(600000)",
            ),
            ("SHARDSCHED_FAILPOINTS_ONCE_DIR", once.to_str().unwrap()),
        ],
    );
    let stubborn = |tag: &str| {
        let o = system.dir.join(tag);
        let o = o.display();
        let script = format!("trap '' TERM; sleep 300 & echo $! > {o}.bg; echo $$ > {o}.sh; wait");
        let id = system.submit(&[
            "-q", "alpha", "-n", "1", "-t", "600s", "--", "sh", "-c", &script,
        ]);
        let pids = ["sh", "bg"].map(|ext| read_pid_file(&system.dir.join(format!("{tag}.{ext}"))));
        (id, pids)
    };
    let (held, held_pids) = stubborn("held");
    let (under_way, under_way_pids) = stubborn("under-way");
    let _cleanup: Vec<KillOnDrop> = [held_pids, under_way_pids]
        .concat()
        .into_iter()
        .map(KillOnDrop)
        .collect();
    let jobs = system.shard_dir("alpha").join("jobs");
    let cancel_file = |id: &str| job_dir(&jobs, id.parse().unwrap()).join(CANCEL_FILE);
    let killed_shard = |system: &System| {
        kill_process(harness::pid(system.child_pid("alpha")), Signal::KILL).unwrap();
    };
    let cancelled_by_its_cancel = |id: &str, pids: &[u32]| {
        // Not listed while the shard restarts: wait for the row, then for the state.
        let mut row = serde_json::Value::Null;
        let ended = wait_for(|| {
            let out = system.cli(&["jobs", "-A", "-a", "--json"]);
            let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            let listed = rows
                .as_array()
                .and_then(|r| r.iter().find(|j| j["id"] == id));
            row = listed.cloned().unwrap_or_default();
            row["state"] == "cancelled"
        });
        assert!(ended, "job {id} never ended cancelled: {row:#}");
        let reason = row["reason"].as_str().unwrap_or_default();
        assert!(
            reason.starts_with("cancelled by admin ") && !reason.contains(':'),
            "the cancel's own reason: {row:#}"
        );
        assert!(
            wait_for(|| pids.iter().all(|&p| !alive(p))),
            "job {id}'s processes {pids:?} outlived it"
        );
    };

    // The answer left; the kill did not (the failpoint holds it): the shard dies. Killed
    // only once the failpoint has fired (its once-marker is made before it sleeps): a
    // shard killed before its exec task reached the point would leave the point to fire
    // in the restarted shard, holding back the very kill this test waits for.
    system.ok(&["cancel", &held]);
    let fired = once.join("alpha.shard.kill.before_exec");
    assert!(wait_for(|| fired.exists()), "the failpoint never fired");
    assert!(!cancel_file(&held).exists(), "the kill was held back");
    assert!(held_pids.iter().all(|&p| alive(p)));
    killed_shard(&system);
    cancelled_by_its_cancel(&held, &held_pids);

    // The kill under way (its cancel file written, SIGTERM ignored): the shard dies
    // during the grace (or, on a slow machine, after: the job ends the same way).
    system.ok(&["cancel", &under_way]);
    assert!(
        wait_for(|| cancel_file(&under_way).exists()),
        "the kill never reached the supervisor"
    );
    killed_shard(&system);
    cancelled_by_its_cancel(&under_way, &under_way_pids);
    let _ = std::fs::remove_dir_all(&once);
}

/// Kills a process when dropped: a failing test leaves no `sleep 120` behind.
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if alive(self.0) {
            let _ = kill_process(harness::pid(self.0), Signal::KILL);
        }
    }
}

/// No job outlives its accounting: a supervisor killed outright (SIGKILL) leaves its job's
/// `sleep 120` running; the shard kills it, and the job holds its nodes until it is gone,
/// so the next job on those nodes never runs beside it.
#[test]
fn a_job_whose_supervisor_is_killed_holds_its_nodes_until_its_processes_are_gone() {
    let system = System::start("exec-orphan", &["--executor", "exec"]);
    let sleep_pid = system.dir.join("sleep.pid");
    let script = format!("sleep 120 & echo $! > {}; wait", sleep_pid.display());
    let first = system.submit(&["-N", "4", "--", "sh", "-c", &script]);
    system.wait_state(&first, "running");
    let sleep = read_pid_file(&sleep_pid);
    let _cleanup = KillOnDrop(sleep);
    let dir = job_dir(
        &system.shard_dir("alpha").join("jobs"),
        first.parse().unwrap(),
    );
    let supervisor = read_pid_file(&dir.join("supervisor.pid"));
    // The next job wants the same (exclusive) nodes.
    let next = system.submit(&["-N", "4", "--", "true"]);
    kill_process(harness::pid(supervisor), Signal::KILL).unwrap();
    let done = wait_for(|| {
        // The states first: a sleep still alive after them was alive when they were read.
        let (a, b) = (system.job(&first), system.job(&next));
        let sleeping = alive(sleep);
        if sleeping {
            assert_eq!(a["state"], "running", "freed while its sleep runs: {a:#}");
            assert_eq!(b["state"], "pending", "started beside the sleep: {b:#}");
        }
        !sleeping && b["state"] == "completed"
    });
    assert!(done, "the orphaned sleep is killed and the next job runs");
    let row = system.job(&first);
    assert_eq!(row["state"], "failed");
    let reason = row["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("lost") && reason.contains("no process of the job is left"),
        "{reason}"
    );
}

/// A supervisor launched as a shard would, whose every handle is then dropped (the shard
/// "died"), is found running by `recover`, obeys a kill request, and its end is found.
#[test]
fn a_supervisor_outlives_its_shard_and_is_recovered() {
    let state =
        std::env::temp_dir().join(format!("shardsched-exec-recover-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);
    let jobs = state.join("jobs");
    let prepared = |id: Fluid, command: &str, time_limit_ms: u64| {
        let dir = job_dir(&jobs, id);
        Prepared {
            id,
            plan: Plan {
                job: id.to_string(),
                run_as: None,
                command: vec!["sh".into(), "-c".into(), command.into()],
                cwd: dir.clone(),
                stdout: None,
                stderr: None,
                truncate_output: true,
                files: Vec::new(),
                inherit_env: true,
                env: vec![],
                ranks: vec![0],
                size: 1,
                nnodes: 1,
                time_limit_ms,
                kill_grace_ms: 300,
                cgroups: Default::default(),
                lease: None,
            },
            dir,
            r_json: "{}".into(),
        }
    };
    let (stubborn, quick, limited) = (Fluid(1 << 30), Fluid(2 << 30), Fluid(3 << 30));
    let program = Path::new(SUPERVISOR_EXE);
    for job in [
        prepared(stubborn, "trap '' TERM; echo $$ > pid; sleep 300", 0),
        prepared(quick, "exit 4", 0),
        prepared(limited, "sleep 300", 500),
    ] {
        drop(launch(program, &job).unwrap());
    }
    let ended = |id: Fluid| {
        recover(&state)
            .unwrap()
            .into_iter()
            .find(|(j, _)| *j == id)
            .and_then(|(_, s)| match s {
                RunningOrEnded::Ended(end) => Some(end),
                RunningOrEnded::Running { .. } => None,
            })
    };
    assert!(wait_for(
        || ended(quick).is_some() && ended(limited).is_some()
    ));
    let end = ended(quick).unwrap();
    assert_eq!((end.cause, end.exit_code), (EndCause::Completed, Some(4)));
    let end = ended(limited).unwrap();
    assert_eq!((end.cause, end.signal), (EndCause::Timeout, Some(15)));

    let job_pid = read_pid_file(&job_dir(&jobs, stubborn).join("pid"));
    let found = recover(&state).unwrap();
    let Some((_, RunningOrEnded::Running { pid })) = found.iter().find(|(j, _)| *j == stubborn)
    else {
        panic!("the stubborn job's supervisor is not found running: {found:?}");
    };
    assert!(alive(*pid) && alive(job_pid));

    request_kill(&job_dir(&jobs, stubborn), "test over").unwrap();
    assert!(wait_for(|| ended(stubborn).is_some()));
    let end = ended(stubborn).unwrap();
    assert_eq!(end.cause, EndCause::Cancelled);
    assert_eq!(
        end.signal,
        Some(9),
        "SIGTERM is ignored: SIGKILL after the grace"
    );
    assert_eq!(end.note, "test over");
    assert!(!alive(job_pid));

    // A supervisor killed outright is reported lost, not running forever.
    let lost = Fluid(4 << 30);
    drop(launch(program, &prepared(lost, "echo $$ > pid; exec sleep 300", 0)).unwrap());
    let job_pid = read_pid_file(&job_dir(&jobs, lost).join("pid"));
    let mut supervisor = None;
    assert!(wait_for(|| {
        supervisor = recover(&state)
            .unwrap()
            .into_iter()
            .find_map(|(j, s)| match s {
                RunningOrEnded::Running { pid } if j == lost => Some(pid),
                _ => None,
            });
        supervisor.is_some()
    }));
    let supervisor = supervisor.unwrap();
    kill_process(harness::pid(supervisor), Signal::KILL).unwrap();
    assert!(wait_for(|| ended(lost).is_some()));
    assert_eq!(ended(lost).unwrap().cause, EndCause::Lost);
    let _ = kill_process(harness::pid(job_pid), Signal::KILL);
    let _ = std::fs::remove_dir_all(&state);
}
