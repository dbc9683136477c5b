//! The jobspecs a `query` session has parsed, kept until their files change.
//!
//! resource-query reads and parses the jobspec file a `match` names at every command (a
//! file may change between commands). Command streams repeat a few files thousands of
//! times, so a session parses each once and checks, before using it again, that the file
//! did not change. Checked by its size and time (a `statx` of the path), that check was a
//! tenth of the whole 2,348-command first-1024 stream's CPU time (~2.7 µs a call on the
//! project's VM). So a kept jobspec is also *watched* (inotify): the file itself, and every
//! folder on its path, where a file replaced by a rename, deleted and written again, or a
//! folder swapped for another shows. While no event has come, a kept jobspec is used with
//! one `read` of the watch that finds nothing; after any event, every kept jobspec is read
//! and parsed again at its next use.
//!
//! The watch is read once per read of the commands, not per command, when the session
//! knows when its commands were read ([`CountedReads`]): a change a driver makes before it
//! writes a command was made before the read that brought the command in, and inotify
//! queues the event within the changing call, so the check after that read sees it. A
//! change not made before the command was written races with the command under
//! resource-query too (it reads the file whenever it comes to the command). Commands
//! buffered in one read then use the jobspecs as they were at that read.
//!
//! Where inotify cannot see every change — no inotify, a watch refused (the user's watch
//! limit), a file on a file system other than the local ones listed in [`LOCAL_FS`]
//! (another host's writes to NFS raise no event here) — the size-and-time check stays, at
//! every use.

use std::cell::Cell;
use std::collections::HashMap;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
use shardsched_jobspec::Jobspec;

/// How many distinct jobspecs a session keeps parsed.
const PARSED_JOBSPECS_MAX: usize = 1024;

/// File systems whose every change raises an inotify event here (`statfs`'s `f_type`):
/// ext2/3/4, tmpfs, XFS, Btrfs, overlayfs.
const LOCAL_FS: [i64; 5] = [0xEF53, 0x0102_1994, 0x5846_5342, 0x9123_683E, 0x794C_7630];

/// A file's size and modification time, as read when its jobspec was parsed.
type FileStamp = (u64, Option<std::time::SystemTime>);

/// A parsed jobspec and what says it is still the file's.
struct Kept {
    stamp: FileStamp,
    jobspec: Rc<Jobspec>,
    /// Watched since before it was read, with no event since: used as kept. Else its
    /// size and time are checked at each use.
    watched: bool,
}

/// The parsed jobspecs of a session (see the module doc).
#[derive(Default)]
pub(super) struct Jobspecs {
    kept: HashMap<String, Kept>,
    /// The inotify instance, non-blocking; `None` where there is none.
    watch: Option<OwnedFd>,
    /// Whether creating the instance was tried.
    tried: bool,
    /// The count of reads of the commands, and its value at the last look at the watch;
    /// `None`: the watch is looked at for every jobspec asked for.
    input: Option<(Rc<Cell<u64>>, u64)>,
}

/// A reader of commands that counts its reads ([`Jobspecs::follow_input`]).
pub(super) struct CountedReads<R> {
    inner: R,
    reads: Rc<Cell<u64>>,
}

impl<R: Read> CountedReads<R> {
    /// `inner`, counting its reads in `reads`.
    pub(super) fn new(inner: R, reads: Rc<Cell<u64>>) -> CountedReads<R> {
        CountedReads { inner, reads }
    }
}

impl<R: Read> Read for CountedReads<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.reads.set(self.reads.get().wrapping_add(1));
        self.inner.read(buf)
    }
}

/// A jobspec Fluxion's reader refuses: its message, and the resource types it read before
/// the error (`shardsched_jobspec::parse_fluxion_noting`): that reader refuses a type it
/// does not know first, and which types it knows is the graph's to say, at each match.
#[derive(Clone, Debug)]
pub(super) struct Refused {
    pub(super) message: String,
    pub(super) types: Vec<String>,
}

impl Refused {
    fn message(message: String) -> Refused {
        Refused {
            message,
            types: Vec::new(),
        }
    }
}

impl Jobspecs {
    /// The parsed jobspec in `file` (Fluxion's reading), parsed again only when the file
    /// changed. `Err` carries the message: the file cannot be read (`Ok(Err)`: it does not
    /// parse).
    pub(super) fn get(&mut self, file: &str) -> Result<Result<Rc<Jobspec>, Refused>, String> {
        if self.input_read() && self.any_event() {
            // Which file changed is not asked: events are rare, and every kept jobspec is
            // read again at its next use.
            self.kept.clear();
        }
        let watched = match self.kept.get(file) {
            Some(k) if k.watched => return Ok(Ok(Rc::clone(&k.jobspec))),
            // Kept unwatched (it could not be): its size and time alone, at each use.
            Some(_) => false,
            // Watched before it is read: a change from this point on raises an event.
            None => self.watch_path(file),
        };
        let meta = std::fs::metadata(file).map_err(|_| format!("can't open {file}"))?;
        let stamp = (meta.len(), meta.modified().ok());
        if let Some(k) = self.kept.get(file)
            && k.stamp == stamp
        {
            return Ok(Ok(Rc::clone(&k.jobspec)));
        }
        let bytes = std::fs::read(file).map_err(|_| format!("can't open {file}"))?;
        let Ok(text) = String::from_utf8(bytes) else {
            return Ok(Err(Refused::message(
                "the jobspec is not valid UTF-8".to_string(),
            )));
        };
        let mut types = Vec::new();
        let jobspec = match shardsched_jobspec::parse_fluxion_noting(&text, &mut types) {
            Ok(js) => Rc::new(js),
            // Fluxion's message alone, as resource-query writes it: flux-sched's own tests
            // compare standard error byte for byte (t3013, t3038), so the file and field
            // are not added.
            Err(shardsched_jobspec::JobspecError::Invalid { message, .. }) => {
                return Ok(Err(Refused { message, types }));
            }
            Err(e) => return Ok(Err(Refused::message(e.to_string()))),
        };
        if self.kept.len() >= PARSED_JOBSPECS_MAX {
            self.kept.clear();
        }
        let kept = Kept {
            stamp,
            jobspec: Rc::clone(&jobspec),
            watched,
        };
        self.kept.insert(file.to_string(), kept);
        Ok(Ok(jobspec))
    }

    /// Looks at the watch from now on only after a new read of the commands, counted in
    /// `reads` (see the module doc).
    pub(super) fn follow_input(&mut self, reads: Rc<Cell<u64>>) {
        let now = reads.get();
        self.input = Some((reads, now));
    }

    /// Whether the watch is to be looked at: always, unless the commands' reads are
    /// counted; then once after each read.
    fn input_read(&mut self) -> bool {
        let Some((reads, seen)) = &mut self.input else {
            return true;
        };
        let now = reads.get();
        std::mem::replace(seen, now) != now
    }

    /// Whether any watched file or folder changed since the last call (reading every
    /// event there is, without waiting). An instance that cannot be read is dropped: every
    /// jobspec is checked by size and time from then on.
    fn any_event(&mut self) -> bool {
        let Some(fd) = &self.watch else {
            return false;
        };
        let mut buf = [0u8; 4096];
        let mut any = false;
        loop {
            match rustix::io::read(fd, &mut buf) {
                Ok(0) => break,
                Ok(_) => any = true,
                Err(rustix::io::Errno::AGAIN) => break,
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => {
                    self.watch = None;
                    return true;
                }
            }
        }
        any
    }

    /// Watches `file` and every folder on its path (see the module doc); false when any
    /// of them cannot be watched or is not on a file system of [`LOCAL_FS`].
    fn watch_path(&mut self, file: &str) -> bool {
        if !self.tried {
            self.tried = true;
            self.watch = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).ok();
        }
        let Some(fd) = &self.watch else {
            return false;
        };
        let path = Path::new(file);
        let contents = WatchFlags::MODIFY
            | WatchFlags::ATTRIB
            | WatchFlags::CLOSE_WRITE
            | WatchFlags::MOVE_SELF
            | WatchFlags::DELETE_SELF;
        let entries = WatchFlags::CREATE
            | WatchFlags::DELETE
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVED_TO
            | WatchFlags::MOVE_SELF
            | WatchFlags::DELETE_SELF
            | WatchFlags::ONLYDIR;
        if !local(path) || inotify::add_watch(fd, path, contents).is_err() {
            return false;
        }
        folders_of(path).all(|dir| local(&dir) && inotify::add_watch(fd, &dir, entries).is_ok())
    }
}

/// Whether `path` is on a file system of [`LOCAL_FS`].
fn local(path: &Path) -> bool {
    rustix::fs::statfs(path).is_ok_and(|s| LOCAL_FS.contains(&i64::from(s.f_type as u32)))
}

/// The folders a path's resolution goes through, from its first (`/` or the current
/// folder) to the file's own.
fn folders_of(path: &Path) -> impl Iterator<Item = PathBuf> + '_ {
    let first = if path.is_absolute() {
        PathBuf::from("/")
    } else {
        PathBuf::from(".")
    };
    let parents: Vec<PathBuf> = path
        .ancestors()
        .skip(1)
        .filter(|p| {
            !p.as_os_str().is_empty() && p.components().next_back() != Some(Component::RootDir)
        })
        .map(Path::to_path_buf)
        .collect();
    std::iter::once(first).chain(parents.into_iter().rev())
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;

    /// A jobspec asking for `cores` cores (one digit: every text has the same length).
    fn text(cores: u32) -> String {
        format!(
            "version: 9999\nresources:\n  - type: core\n    count: {cores}\n\
             attributes:\n  system:\n    duration: 3600\n\
             tasks:\n  - command: [app]\n    slot: default\n    count: {{per_slot: 1}}\n"
        )
    }

    fn cores(j: &mut Jobspecs, file: &Path) -> String {
        let js = j
            .get(&file.display().to_string())
            .expect("readable")
            .expect("parses");
        format!("{:?}", js.resources)
    }

    /// Whether `file`'s jobspec is kept watched (else the test says why it checks less).
    fn watched(j: &Jobspecs, file: &Path) -> bool {
        let w = j
            .kept
            .get(&file.display().to_string())
            .is_some_and(|k| k.watched);
        if !w {
            eprintln!(
                "{} is not watched here: only size and time are checked",
                file.display()
            );
        }
        w
    }

    /// Writes `contents` to `file` and gives it modification time `at`: the size-and-time
    /// check alone cannot tell the new text from the old one.
    fn rewrite_unseen(file: &Path, contents: &str, at: SystemTime) {
        std::fs::write(file, contents).expect("write");
        let f = std::fs::File::options()
            .write(true)
            .open(file)
            .expect("open");
        f.set_modified(at).expect("set mtime");
    }

    #[test]
    fn a_kept_jobspec_is_read_again_after_its_file_changes_in_place() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("job.yaml");
        std::fs::write(&file, text(1)).expect("write");
        let mut j = Jobspecs::default();
        let one = cores(&mut j, &file);
        assert_eq!(cores(&mut j, &file), one, "kept");
        let at = std::fs::metadata(&file)
            .and_then(|m| m.modified())
            .expect("mtime");
        rewrite_unseen(&file, &text(2), at);
        let watching = watched(&j, &file);
        let two = cores(&mut j, &file);
        if watching {
            assert_ne!(two, one, "the watch saw the rewrite");
        }
        // A change the size and time show is seen with or without a watch.
        std::fs::write(&file, text(3) + "\n").expect("write");
        assert_ne!(cores(&mut j, &file), two);
    }

    #[test]
    fn a_kept_jobspec_is_read_again_after_a_folder_on_its_path_is_swapped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        for (folder, n) in [(&a, 1), (&b, 2)] {
            std::fs::create_dir(folder).expect("mkdir");
            std::fs::write(folder.join("job.yaml"), text(n)).expect("write");
        }
        let at = std::fs::metadata(a.join("job.yaml"))
            .and_then(|m| m.modified())
            .expect("mtime");
        rewrite_unseen(&b.join("job.yaml"), &text(2), at);
        let file = a.join("job.yaml");
        let mut j = Jobspecs::default();
        let one = cores(&mut j, &file);
        let watching = watched(&j, &file);
        // `a` becomes `old`, `b` becomes `a`: the same path, another file of the same size
        // and time.
        std::fs::rename(&a, dir.path().join("old")).expect("rename");
        std::fs::rename(&b, &a).expect("rename");
        let now = cores(&mut j, &file);
        if watching {
            assert_ne!(now, one, "the folder's watch saw the swap");
        }
    }

    #[test]
    fn with_the_commands_reads_counted_the_watch_is_read_after_each_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("job.yaml");
        std::fs::write(&file, text(1)).expect("write");
        let reads = Rc::new(Cell::new(0));
        let mut j = Jobspecs::default();
        j.follow_input(Rc::clone(&reads));
        let mut input =
            std::io::BufReader::new(CountedReads::new(&b"match\n"[..], Rc::clone(&reads)));
        let mut line = String::new();
        std::io::BufRead::read_line(&mut input, &mut line).expect("read");
        assert_eq!(reads.get(), 1);
        let one = cores(&mut j, &file);
        let watching = watched(&j, &file);
        let at = std::fs::metadata(&file)
            .and_then(|m| m.modified())
            .expect("mtime");
        rewrite_unseen(&file, &text(2), at);
        // Commands of the same read: the jobspec as it was then.
        assert_eq!(cores(&mut j, &file), one);
        reads.set(2);
        if watching {
            assert_ne!(cores(&mut j, &file), one, "seen after the next read");
        }
    }

    #[test]
    fn folders_on_a_path_are_listed_from_its_start() {
        let list = |p: &str| -> Vec<String> {
            folders_of(Path::new(p))
                .map(|d| d.display().to_string())
                .collect()
        };
        assert_eq!(list("job.yaml"), ["."]);
        assert_eq!(list("d/e/job.yaml"), [".", "d", "d/e"]);
        assert_eq!(list("/d/e/job.yaml"), ["/", "/d", "/d/e"]);
    }
}
