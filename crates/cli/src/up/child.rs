//! One child of `up`: started with its output in its log, restarted with bounded backoff
//! when it dies, stopped with SIGTERM then SIGKILL.

use std::fmt::Write as _;
use std::fs::{self, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Instant;

use anyhow::{Context, Result};
use rustix::process::{Pid, Signal, kill_process};
use shardsched_journal::UNREADABLE_EXIT_STATUS;

use super::{
    LOG_TAIL_LINES, POLL_INTERVAL, RESTART_BACKOFF, RESTART_STABLE_RUN, RESTARTS_MAX,
    SHUTDOWN_GRACE, queues,
};

/// One supervised process.
pub(super) struct Supervised {
    /// `coordinator`, or `shard <queue>`.
    pub(super) label: String,
    /// Its log file.
    pub(super) log: PathBuf,
    /// Arguments after the executable.
    pub(super) args: Vec<String>,
    pub(super) process: Option<Child>,
    pub(super) started_at: Instant,
    /// Consecutive runs that ended before [`RESTART_STABLE_RUN`].
    pub(super) failures: u32,
    /// When to start it again after it died.
    pub(super) restart_at: Option<Instant>,
    /// Given up after [`RESTARTS_MAX`] failures.
    pub(super) abandoned: bool,
}

impl Supervised {
    pub(super) fn spawn(&mut self, exe: &Path) -> Result<()> {
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("opening log {}", self.log.display()))?;
        let _ = writeln!(
            log,
            "==== shardsched up: starting {} at {}: {} {}",
            self.label,
            shardsched_client::output::utc_timestamp(shardsched_client::output::now_ms()),
            exe.display(),
            self.args.join(" ")
        );
        let stderr = log.try_clone().context("duplicating a log file handle")?;
        let mut command = Command::new(exe);
        command
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(stderr));
        // Own process group: a terminal's Ctrl-C reaches `up` only, which stops children in
        // order.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let process = command
            .spawn()
            .with_context(|| format!("starting {}", self.label))?;
        self.process = Some(process);
        self.started_at = Instant::now();
        self.restart_at = None;
        Ok(())
    }

    /// The exit status if the process has exited (reaping it).
    pub(super) fn try_exited(&mut self) -> Result<Option<ExitStatus>> {
        let Some(process) = &mut self.process else {
            return Ok(None);
        };
        let status = process
            .try_wait()
            .with_context(|| format!("waiting for {}", self.label))?;
        if status.is_some() {
            self.process = None;
        }
        Ok(status)
    }

    /// One supervision step: notice a death, schedule and perform restarts.
    pub(super) fn tend(&mut self, exe: &Path) {
        if self.abandoned {
            return;
        }
        match self.try_exited() {
            Ok(Some(status)) if queues::is_restart(status) => {
                note!(
                    "shardsched up: {} stopped to apply its new queue configuration; restarting it",
                    self.label
                );
                self.restart_at = Some(Instant::now());
            }
            Ok(Some(status)) if status.code() == Some(i32::from(UNREADABLE_EXIT_STATUS)) => {
                // Its journal cannot be read back: a restart would fail the same way.
                note!(
                    "shardsched up: {} cannot read its journal back (exit status {}); not \
                     restarting it: an admin must look at the file its log names{}",
                    self.label,
                    UNREADABLE_EXIT_STATUS,
                    self.log_tail()
                );
                self.abandoned = true;
                return;
            }
            Ok(Some(status)) => {
                let ran = self.started_at.elapsed();
                if ran >= RESTART_STABLE_RUN {
                    self.failures = 0;
                }
                self.failures += 1;
                if self.failures > RESTARTS_MAX {
                    note!(
                        "shardsched up: {} exited ({}) after {} failed runs in a row; giving \
                         up on it (log: {})",
                        self.label,
                        describe_status(status),
                        RESTARTS_MAX,
                        self.log.display()
                    );
                    self.abandoned = true;
                    return;
                }
                let backoff = RESTART_BACKOFF.after(self.failures);
                note!(
                    "shardsched up: {} exited ({}) after {:.1} s; restarting in {:.1} s (log: {})",
                    self.label,
                    describe_status(status),
                    ran.as_secs_f64(),
                    backoff.as_secs_f64(),
                    self.log.display()
                );
                self.restart_at = Some(Instant::now() + backoff);
            }
            Ok(None) => {}
            Err(e) => note!("shardsched up: {e:#}"),
        }
        if self.process.is_none()
            && let Some(at) = self.restart_at
            && Instant::now() >= at
        {
            match self.spawn(exe) {
                Ok(()) => note!("shardsched up: restarted {}", self.label),
                Err(e) => {
                    note!("shardsched up: {e:#}");
                    self.failures += 1;
                    self.restart_at = Some(Instant::now() + RESTART_BACKOFF.after(self.failures));
                }
            }
        }
    }

    /// The end of the log, for error messages.
    pub(super) fn log_tail(&self) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
        let mut out = format!("\n--- last lines of {} ---", self.log.display());
        for line in tail {
            let _ = write!(out, "\n{line}");
        }
        out
    }
}

/// SIGTERM to every live process in `children`, wait up to [`SHUTDOWN_GRACE`] for all of
/// them, then SIGKILL whoever is left.
pub(super) async fn stop_all<'a>(children: impl Iterator<Item = &'a mut Supervised>) {
    let mut live: Vec<&mut Supervised> = children.filter(|c| c.process.is_some()).collect();
    for child in &live {
        if let Some(process) = &child.process {
            let _ = kill_process(Pid::from_child(process), Signal::TERM);
        }
    }
    let deadline = Instant::now() + SHUTDOWN_GRACE;
    while Instant::now() < deadline {
        live.retain_mut(|c| !matches!(c.try_exited(), Ok(Some(_)) | Err(_)));
        if live.is_empty() {
            return;
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
    for child in live {
        note!(
            "shardsched up: {} did not stop within {} s; killing it",
            child.label,
            SHUTDOWN_GRACE.as_secs()
        );
        if let Some(process) = &mut child.process {
            let _ = process.kill();
            let _ = process.wait();
        }
        child.process = None;
    }
}

pub(super) fn describe_status(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => status.to_string(),
    }
}
