//! Atomic writes, bounded reads, and whether a supervisor or a job's process group is still
//! alive.
//!
//! Liveness is read from `/proc` (Linux): a pid can be a zombie nobody reaped (a
//! supervisor whose shard died is re-parented to init, which may be slow to reap), and a
//! zombie answers `kill(pid, 0)` as if it were alive. Where `/proc` cannot be read, the
//! `kill(pid, 0)` probe is the fallback.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;

use rustix::process::{Pid, test_kill_process, test_kill_process_group};

use crate::{FILE_BYTES_MAX, FileError};

/// Writes `bytes` to `path` so that a reader sees the old file or the whole new one, and
/// the new one survives a crash once this returns: a temporary file beside it, fsync,
/// rename over `path`, fsync of the directory. The temporary file's name carries this
/// process's id, so two processes writing the same file do not trip over each other.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), FileError> {
    replace(path, bytes, true)
}

/// Writes `bytes` to `path` so that a reader sees the old file or the whole new one, as
/// [`write_atomic`], without its two fsyncs: for a file that only matters while the
/// processes that read it run (a crash of the machine ends them too), or that is written
/// again when lost. Another process (a restarted agent, the supervisor) reads it from the
/// page cache all the same.
pub fn write_replace(path: &Path, bytes: &[u8]) -> Result<(), FileError> {
    replace(path, bytes, false)
}

fn replace(path: &Path, bytes: &[u8], durable: bool) -> Result<(), FileError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut file = create_anew(&tmp)?;
        file.write_all(bytes)?;
        if durable {
            file.sync_all()?;
        }
        Ok(())
    };
    write().map_err(|e| FileError::io(&tmp, e))?;
    fs::rename(&tmp, path).map_err(|e| FileError::io(path, e))?;
    if durable && let Some(dir) = path.parent() {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| FileError::io(dir, e))?;
    }
    Ok(())
}

/// Creates `path` empty for writing, removing whatever was at that name first, and never
/// opening through a link left there (`O_EXCL`): the directory may be a job user's and the
/// writer root, whom a link planted by that user would otherwise make truncate another
/// file. Fails (`AlreadyExists`) if something is put back at that name in between.
pub fn create_anew(path: &Path) -> std::io::Result<File> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    OpenOptions::new().write(true).create_new(true).open(path)
}

/// Up to `max` bytes of `path` from byte `offset` (a job's output, read while it grows): a
/// file not written yet reads as empty.
///
/// With `owner`, the file must be a regular file of that uid, opened without following a
/// symbolic link in its last component (and without blocking on a FIFO), and checked on
/// the open file, so that a link swapped in between cannot fool it: a root agent reads a
/// file in a directory a job's user controls, or a file that user named, only if that
/// user could read it anyway.
pub fn read_range(
    path: &Path,
    offset: u64,
    max: u32,
    owner: Option<u32>,
) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    let read = open_for_reading(path, owner).and_then(|mut file| {
        std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(offset))?;
        file.take(u64::from(max)).read_to_end(&mut bytes)
    });
    match read {
        Ok(_) => Ok(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Opens `path` for [`read_range`]: with `owner`, only a regular file of that uid, reached
/// without a symbolic link as its last component.
fn open_for_reading(path: &Path, owner: Option<u32>) -> std::io::Result<File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let Some(uid) = owner else {
        return File::open(path);
    };
    let refused = |why: String| {
        std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("{}: {why}", path.display()),
        )
    };
    let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(
            i32::try_from(flags.bits())
                .map_err(|_| refused("open flags out of range: not read".to_owned()))?,
        )
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(code) if code == rustix::io::Errno::LOOP.raw_os_error() => {
                refused("a symbolic link: not read for the job's user".to_owned())
            }
            _ => e,
        })?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(refused("not a regular file: not read".to_owned()));
    }
    if meta.uid() != uid {
        return Err(refused(format!(
            "belongs to uid {}, not the job's user",
            meta.uid()
        )));
    }
    Ok(file)
}

/// Reads a small file: `None` when it does not exist, an error when it is larger than
/// [`FILE_BYTES_MAX`] or unreadable.
pub fn read_small(path: &Path) -> Result<Option<String>, FileError> {
    let Some(bytes) = read_bounded(path, FILE_BYTES_MAX)? else {
        return Ok(None);
    };
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|e| FileError::BadFile {
            path: path.to_owned(),
            message: e.to_string(),
        })
}

/// Reads a file of at most `max` bytes: `None` when it does not exist, an error when it is
/// larger or unreadable.
pub fn read_bounded(path: &Path, max: u64) -> Result<Option<Vec<u8>>, FileError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(FileError::io(path, e)),
    };
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| FileError::io(path, e))?;
    if bytes.len() as u64 > max {
        return Err(FileError::BadFile {
            path: path.to_owned(),
            message: format!("larger than {max} bytes"),
        });
    }
    Ok(Some(bytes))
}

/// Reads a JSON file into `T`: `None` when it does not exist.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, FileError> {
    let Some(text) = read_small(path)? else {
        return Ok(None);
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| FileError::BadFile {
            path: path.to_owned(),
            message: e.to_string(),
        })
}

/// Reads a pid file: `None` when it does not exist.
pub fn read_pid(path: &Path) -> Result<Option<u32>, FileError> {
    let Some(text) = read_small(path)? else {
        return Ok(None);
    };
    text.trim()
        .parse::<u32>()
        .ok()
        .filter(|&pid| pid > 0)
        .map(Some)
        .ok_or_else(|| FileError::BadFile {
            path: path.to_owned(),
            message: format!("{:?} is not a pid", text.trim()),
        })
}

/// Whether process `pid` is alive (not a zombie) and, when `/proc` can tell, runs a
/// command line containing every one of `markers` (so that a recycled pid is not taken
/// for ours).
pub fn process_alive(pid: u32, markers: &[&str]) -> bool {
    let Some(raw) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return false;
    };
    let proc_dir = Path::new("/proc").join(pid.to_string());
    match fs::read_to_string(proc_dir.join("stat")) {
        Ok(stat) => {
            if matches!(stat_fields(&stat), Some((state, _)) if state == 'Z' || state == 'X') {
                return false;
            }
            match fs::read(proc_dir.join("cmdline")) {
                Ok(cmdline) => cmdline_matches(&cmdline, markers),
                Err(_) => true,
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && Path::new("/proc/self").exists() => {
            false
        }
        Err(_) => test_kill_process(raw).is_ok(),
    }
}

/// Whether a live process's `/proc/PID/cmdline` is one of ours: it holds every marker, or
/// it is empty, which tells nothing: a process in the middle of `execve` (its parent,
/// released from `vfork` once the new image is mapped, can look before the kernel has set
/// the new arguments up) reads empty, and taking a supervisor just started for a dead one
/// would end its job as lost and remove its cgroup under it.
fn cmdline_matches(cmdline: &[u8], markers: &[&str]) -> bool {
    if cmdline.is_empty() {
        return true;
    }
    let cmdline = String::from_utf8_lossy(cmdline);
    markers.iter().all(|m| cmdline.contains(m))
}

/// Whether any process of group `pgid` is still alive (zombies do not count). A group with
/// no process at all, zombies included (the common case: a job's task ended and was
/// reaped), is told by one `kill(-pgid, 0)`, without reading every process's `/proc` entry.
pub fn group_alive(pgid: u32) -> bool {
    let Some(raw) = i32::try_from(pgid).ok().and_then(Pid::from_raw) else {
        return false;
    };
    if test_kill_process_group(raw) == Err(rustix::io::Errno::SRCH) {
        return false;
    }
    let Ok(entries) = fs::read_dir("/proc") else {
        return test_kill_process_group(raw).is_ok();
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let Some((state, group)) = stat_fields(&stat)
            && group == pgid
            && state != 'Z'
            && state != 'X'
        {
            return true;
        }
    }
    false
}

/// SIGKILLs the live processes of group `pgid` whose real uid is `uid`, and only those;
/// whether there were any. For a group named in a file that user could write (a job's
/// `group.pid`): a root starter then kills only what that user could have killed itself,
/// whatever group the file names.
pub fn kill_group_of_user(pgid: u32, uid: u32) -> bool {
    let Some(raw) = i32::try_from(pgid).ok().and_then(Pid::from_raw) else {
        return false;
    };
    if test_kill_process_group(raw) == Err(rustix::io::Errno::SRCH) {
        return false;
    }
    let Ok(entries) = fs::read_dir("/proc") else {
        return false;
    };
    let mut found = false;
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
            .and_then(Pid::from_raw)
        else {
            continue;
        };
        let member = fs::read_to_string(entry.path().join("stat"))
            .ok()
            .and_then(|stat| stat_fields(&stat))
            .is_some_and(|(state, group)| group == pgid && state != 'Z' && state != 'X');
        if member
            && fs::read_to_string(entry.path().join("status"))
                .ok()
                .and_then(|status| real_uid(&status))
                == Some(uid)
        {
            found = true;
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
    found
}

/// The real uid in a `/proc/PID/status` text (`Uid:\treal\teffective\tsaved\tfs`).
fn real_uid(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().next())
        .and_then(|id| id.parse().ok())
}

/// State and process group from a `/proc/PID/stat` line (`pid (comm) S ppid pgrp …`; the
/// command name may itself contain spaces and parentheses, so read after the last `)`).
fn stat_fields(stat: &str) -> Option<(char, u32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

/// The reason in a kill request file (a job directory's `cancel`), if there is one: its
/// text, `cancelled` when empty, or the error that kept it from being read.
pub fn kill_reason(path: &Path) -> Option<String> {
    match read_small(path) {
        Ok(Some(text)) => Some(match text.trim() {
            "" => "cancelled".to_owned(),
            why => why.to_owned(),
        }),
        Ok(None) => None,
        Err(e) => Some(format!("cancelled ({e})")),
    }
}

/// Moves an earlier run's job directory aside as `DIR.run-N`, the first free N (a
/// requeued job runs again in a fresh directory). The caller has checked that nothing of
/// that run still runs.
pub fn set_aside(dir: &Path) -> Result<(), FileError> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    for run in 1u32.. {
        let aside = dir.with_file_name(format!("{name}.run-{run}"));
        if !aside.exists() {
            return fs::rename(dir, &aside).map_err(|e| FileError::io(&aside, e));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "shardsched-exec-files-{name}-{}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("scratch dir");
        dir
    }

    #[test]
    fn a_range_is_read_only_from_a_file_of_the_owner_asked_for() {
        use std::os::unix::fs::MetadataExt;
        let dir = scratch("owner");
        let path = dir.join("out");
        fs::write(&path, b"hello world").expect("write");
        let mine = fs::metadata(&path).expect("stat").uid();
        assert_eq!(read_range(&path, 6, 3, None).expect("read"), b"wor");
        assert_eq!(read_range(&path, 0, 5, Some(mine)).expect("read"), b"hello");
        let other = read_range(&path, 0, 5, Some(mine.wrapping_add(1))).expect_err("refused");
        assert_eq!(other.kind(), std::io::ErrorKind::PermissionDenied);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_range_for_a_user_is_never_read_through_a_link_or_from_a_special_file() {
        use std::os::unix::fs::MetadataExt;
        let dir = scratch("links");
        let secret = dir.join("secret");
        fs::write(&secret, b"not for the job").expect("write");
        let mine = fs::metadata(&secret).expect("stat").uid();
        let link = dir.join("task-0.out");
        std::os::unix::fs::symlink(&secret, &link).expect("symlink");
        let through_link = read_range(&link, 0, 100, Some(mine)).expect_err("refused");
        assert_eq!(through_link.kind(), std::io::ErrorKind::PermissionDenied);
        assert!(
            through_link.to_string().contains("symbolic link"),
            "{through_link}"
        );
        let fifo = dir.join("task-1.out");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .expect("mkfifo");
        // Opened without blocking (no writer), then refused.
        let special = read_range(&fifo, 0, 100, Some(mine)).expect_err("refused");
        assert!(
            special.to_string().contains("not a regular file"),
            "{special}"
        );
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_replaced_file_is_not_written_through_a_link_left_at_its_temporary_name() {
        let dir = scratch("tmp-link");
        let target = dir.join("target");
        fs::write(&target, b"kept").expect("write");
        let path = dir.join("cancel");
        let tmp = dir.join(format!(".cancel.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&target, &tmp).expect("symlink");
        write_replace(&path, b"why").expect("write");
        assert_eq!(fs::read(&target).expect("read"), b"kept");
        assert_eq!(fs::read(&path).expect("read"), b"why");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn atomic_writes_replace_whole_files() {
        let dir = scratch("atomic");
        let path = dir.join("status");
        write_atomic(&path, b"one").expect("write");
        write_atomic(&path, b"two").expect("write");
        assert_eq!(read_small(&path).expect("read").as_deref(), Some("two"));
        write_replace(&path, b"three").expect("write");
        assert_eq!(read_small(&path).expect("read").as_deref(), Some("three"));
        let left: Vec<_> = fs::read_dir(&dir).expect("dir").flatten().collect();
        assert_eq!(left.len(), 1, "no temporary file is left");
        assert_eq!(read_small(&dir.join("absent")).expect("read"), None);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn bad_pid_files_name_the_file() {
        let dir = scratch("pid");
        let path = dir.join("supervisor.pid");
        fs::write(&path, "12x").expect("write");
        let e = read_pid(&path).expect_err("not a pid");
        assert!(e.to_string().contains("supervisor.pid"), "{e}");
        fs::write(&path, "42\n").expect("write");
        assert_eq!(read_pid(&path).expect("pid"), Some(42));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn stat_lines_with_odd_names_parse() {
        assert_eq!(stat_fields("12 (a b) c) S 1 12 12 0"), Some(('S', 12)));
        assert_eq!(stat_fields("12 (sleep) Z 1 40 40 0"), Some(('Z', 40)));
        assert_eq!(stat_fields("garbage"), None);
    }

    #[test]
    fn this_process_is_alive_and_its_group_too() {
        let me = std::process::id();
        assert!(process_alive(me, &[]));
        assert!(!process_alive(me, &["no-such-marker-in-a-test-cmdline"]));
        let group = rustix::process::getpgrp().as_raw_nonzero().get();
        assert!(group_alive(u32::try_from(group).expect("pgid")));
    }

    #[test]
    fn only_the_given_users_processes_of_a_group_are_killed() {
        use std::os::unix::process::{CommandExt, ExitStatusExt};
        assert_eq!(real_uid("Name:\tsh\nUid:\t4242\t0\t0\t0\n"), Some(4242));
        let me = rustix::process::getuid().as_raw();
        let mut child = std::process::Command::new("sleep")
            .arg("600")
            .process_group(0)
            .spawn()
            .expect("sleep");
        let group = child.id();
        // A group is left alone when none of its processes is the given user's.
        assert!(!kill_group_of_user(group, me.wrapping_add(1)));
        assert!(child.try_wait().expect("wait").is_none(), "still running");
        assert!(kill_group_of_user(group, me));
        let status = child.wait().expect("wait");
        assert_eq!(status.signal(), Some(9));
    }

    #[test]
    fn a_command_line_not_set_up_yet_does_not_say_the_process_is_gone() {
        assert!(cmdline_matches(b"", &["node-supervise", "job-1"]));
        assert!(cmdline_matches(
            b"shardsched\0node-supervise\0/x/job-1\0",
            &["node-supervise", "job-1"]
        ));
        assert!(!cmdline_matches(b"bash\0-c\0true\0", &["node-supervise"]));
    }
}
