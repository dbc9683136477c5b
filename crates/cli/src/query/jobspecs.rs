//! The jobspecs a `query` session has parsed, kept while their files keep their bytes.
//!
//! resource-query reads and parses the jobspec file a `match` names at every command (a
//! file may change between commands). Command streams repeat a few files thousands of
//! times, so a session parses each once, keeps the file's bytes beside the parse, and uses
//! the kept parse while the file still holds those bytes.
//!
//! The file is read again, to compare, once per read of the commands, not per command,
//! when the session knows when its commands were read ([`CountedReads`]): a change a
//! driver makes before it writes a command was made before the read that brought the
//! command in, so the first use after that read sees it. A change not made before the
//! command was written races with the command under resource-query too (it reads the file
//! whenever it comes to the command). Commands buffered in one read then use the jobspecs
//! as they were at that read. Without counted reads, the file is compared at every use.
//!
//! Comparing bytes sees every change — a rewrite of the same size within one tick of the
//! file system's clock, a file replaced by a rename, a folder on its path swapped, another
//! host's write to a network file system — where a file's size and time (a `statx`, ~2.7
//! µs a call on the project's VM, a tenth of the 2,348-command first-1024 stream's CPU
//! time when done per command) would miss the first. An earlier inotify watch (one `read`
//! a check) cost more than it saved: closing an instance that holds watches waits for the
//! kernel's SRCU grace period, 9–18 ms of wall time at the exit of every session here.

use std::cell::Cell;
use std::collections::HashMap;
use std::io::Read;
use std::rc::Rc;

use shardsched_jobspec::Jobspec;

/// How many distinct jobspecs a session keeps parsed.
const PARSED_JOBSPECS_MAX: usize = 1024;

/// A parsed jobspec and the bytes it was parsed from.
struct Kept {
    text: String,
    jobspec: Rc<Jobspec>,
    /// The count of reads of the commands when the file last held `text`; `None`: not
    /// counted (compared at every use).
    checked: Option<u64>,
}

/// The parsed jobspecs of a session (see the module doc).
#[derive(Default)]
pub(super) struct Jobspecs {
    kept: HashMap<String, Kept>,
    /// The count of reads of the commands; `None`: every use reads the file.
    input: Option<Rc<Cell<u64>>>,
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
    /// The parsed jobspec in `file` (Fluxion's reading), parsed again only when the file's
    /// bytes changed. `Err` carries the message: the file cannot be read (`Ok(Err)`: it
    /// does not parse).
    pub(super) fn get(&mut self, file: &str) -> Result<Result<Rc<Jobspec>, Refused>, String> {
        let now = self.input.as_ref().map(|reads| reads.get());
        let kept = self.kept.get_mut(file);
        if let Some(k) = &kept
            && now.is_some()
            && k.checked == now
        {
            return Ok(Ok(Rc::clone(&k.jobspec)));
        }
        let bytes = std::fs::read(file).map_err(|_| format!("can't open {file}"))?;
        if let Some(k) = kept
            && k.text.as_bytes() == bytes
        {
            k.checked = now;
            return Ok(Ok(Rc::clone(&k.jobspec)));
        }
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
            text,
            jobspec: Rc::clone(&jobspec),
            checked: now,
        };
        self.kept.insert(file.to_string(), kept);
        Ok(Ok(jobspec))
    }

    /// Compares a kept jobspec's file from now on only at its first use after a new read
    /// of the commands, counted in `reads` (see the module doc).
    pub(super) fn follow_input(&mut self, reads: Rc<Cell<u64>>) {
        self.input = Some(reads);
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
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

    /// Writes `contents` to `file` and gives it modification time `at`: a size-and-time
    /// check alone could not tell the new text from the old one.
    fn rewrite_unseen(file: &Path, contents: &str, at: SystemTime) {
        std::fs::write(file, contents).expect("write");
        let f = std::fs::File::options()
            .write(true)
            .open(file)
            .expect("open");
        f.set_modified(at).expect("set mtime");
    }

    fn mtime(file: &Path) -> SystemTime {
        std::fs::metadata(file)
            .and_then(|m| m.modified())
            .expect("mtime")
    }

    #[test]
    fn a_kept_jobspec_is_read_again_after_its_file_changes_in_place() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("job.yaml");
        std::fs::write(&file, text(1)).expect("write");
        let mut j = Jobspecs::default();
        let one = cores(&mut j, &file);
        assert_eq!(cores(&mut j, &file), one, "kept");
        rewrite_unseen(&file, &text(2), mtime(&file));
        let two = cores(&mut j, &file);
        assert_ne!(two, one, "the same size and time, other bytes");
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
        rewrite_unseen(&b.join("job.yaml"), &text(2), mtime(&a.join("job.yaml")));
        let file = a.join("job.yaml");
        let mut j = Jobspecs::default();
        let one = cores(&mut j, &file);
        // `a` becomes `old`, `b` becomes `a`: the same path, another file of the same size
        // and time.
        std::fs::rename(&a, dir.path().join("old")).expect("rename");
        std::fs::rename(&b, &a).expect("rename");
        assert_ne!(cores(&mut j, &file), one, "the swapped-in file's bytes");
    }

    #[test]
    fn with_the_commands_reads_counted_the_file_is_compared_after_each_read() {
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
        rewrite_unseen(&file, &text(2), mtime(&file));
        // Commands of the same read: the jobspec as it was then.
        assert_eq!(cores(&mut j, &file), one);
        reads.set(2);
        let two = cores(&mut j, &file);
        assert_ne!(two, one, "seen after the next read");
        // A file that goes away is an error at the first use after a read, and its
        // jobspec is parsed again when it comes back.
        std::fs::remove_file(&file).expect("remove");
        reads.set(3);
        assert!(j.get(&file.display().to_string()).is_err());
        std::fs::write(&file, text(3)).expect("write");
        assert_ne!(cores(&mut j, &file), two);
    }
}
