//! `query`'s heap on transparent huge pages: the session starts itself again, once, with
//! glibc told to put its heap there.
//!
//! Why: a session builds a graph and its calendars once and touches every page of them
//! within milliseconds, so a third of its CPU time is the kernel's, mapping each 4 KiB page
//! at its first touch (~2,500 faults for the first-1024 stream, ~3.5 µs each on the
//! project machine; docs/BENCHMARKS.md). With glibc's heap on 2 MiB pages
//! (`glibc.malloc.hugetlb=1`) that grow 32 MiB at a time (`glibc.malloc.top_pad`), the
//! same session takes 500 to 1,000 faults. glibc reads those settings only from its environment
//! when the process starts (`GLIBC_TUNABLES`); asking from inside would take `mallopt` and
//! `madvise`, which the workspace's `forbid(unsafe_code)` rules out. One more exec of this
//! binary costs less than the faults it saves.
//!
//! Only `query` does this: a daemon keeps its heap for hours, where huge pages would hold
//! memory its 4 KiB pages give back, and the other short commands touch too little to gain.
//! Nothing is done when the host's transparent huge pages are off (`never`); when
//! `GLIBC_TUNABLES` already names `glibc.malloc.hugetlb`, whatever it says (the caller
//! decides: `GLIBC_TUNABLES=glibc.malloc.hugetlb=0` keeps the 4 KiB pages); or when
//! `LD_PRELOAD` is set: something stands between the session and its allocator (valgrind,
//! which would not follow the exec and would measure only this first start, a heap
//! profiler, another allocator), and the session is left to it. If the exec fails, the
//! session runs on as it is.

use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt;

/// The tunable the session is started again with (glibc 2.35 and later read it; earlier
/// ones ignore it).
const HUGETLB: &str = "glibc.malloc.hugetlb";

/// What the session asks of glibc: the heap on transparent huge pages (`hugetlb=1`, which
/// `madvise`s it), grown 32 MiB at a time so that each step is whole huge pages.
const TUNABLES: &str = "glibc.malloc.hugetlb=1:glibc.malloc.top_pad=33554432";

/// The host's policy for transparent huge pages: `always [madvise] never`, the chosen one
/// in brackets.
const THP_POLICY: &str = "/sys/kernel/mm/transparent_hugepage/enabled";

/// Starts this process again with [`TUNABLES`] added to `GLIBC_TUNABLES`, when that helps
/// (see the module documentation); returns only when it does not, or when the exec failed.
pub(super) fn restart_on_huge_pages() {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return;
    }
    let policy = std::fs::read_to_string(THP_POLICY).unwrap_or_default();
    let Some(tunables) = restart_with(
        std::env::var_os("GLIBC_TUNABLES").as_deref(),
        std::env::var_os("LD_PRELOAD").as_deref(),
        &policy,
    ) else {
        return;
    };
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let mut args = std::env::args_os();
    let mut again = std::process::Command::new(exe);
    if let Some(arg0) = args.next() {
        CommandExt::arg0(&mut again, arg0);
    }
    again.args(args).env("GLIBC_TUNABLES", tunables);
    // Only returns on failure; the session then runs here, on 4 KiB pages.
    let _ = CommandExt::exec(&mut again);
}

/// The `GLIBC_TUNABLES` to start again with, given the current one, `LD_PRELOAD` and the
/// host's policy for transparent huge pages (`always [madvise] never`, the chosen one in
/// brackets; empty when unreadable); `None` to run on as is.
fn restart_with(
    tunables: Option<&OsStr>,
    preload: Option<&OsStr>,
    policy: &str,
) -> Option<OsString> {
    let huge_pages_allowed = policy.contains("[always]") || policy.contains("[madvise]");
    if !huge_pages_allowed || preload.is_some_and(|p| !p.is_empty()) {
        return None;
    }
    let Some(current) = tunables.filter(|t| !t.is_empty()) else {
        return Some(TUNABLES.into());
    };
    let named = current
        .to_string_lossy()
        .split(':')
        .any(|t| t.split('=').next() == Some(HUGETLB));
    if named {
        return None;
    }
    let mut with = current.to_os_string();
    with.push(":");
    with.push(TUNABLES);
    Some(with)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MADVISE: &str = "always [madvise] never\n";

    fn with(tunables: &str) -> Option<OsString> {
        restart_with(Some(OsStr::new(tunables)), None, MADVISE)
    }

    #[test]
    fn adds_the_tunables_unless_hugetlb_is_named() {
        assert_eq!(restart_with(None, None, MADVISE), Some(TUNABLES.into()));
        assert_eq!(with(""), Some(TUNABLES.into()));
        assert_eq!(
            with("glibc.malloc.arena_max=2"),
            Some(format!("glibc.malloc.arena_max=2:{TUNABLES}").into())
        );
        assert_eq!(with("glibc.malloc.hugetlb=0"), None);
        assert_eq!(with("glibc.malloc.top_pad=1:glibc.malloc.hugetlb=1"), None);
        // A longer name that starts alike is another tunable.
        assert!(with("glibc.malloc.hugetlbx=1").is_some());
    }

    #[test]
    fn runs_on_as_is_without_huge_pages_or_under_a_preload() {
        assert!(restart_with(None, None, "[always] madvise never\n").is_some());
        assert_eq!(restart_with(None, None, "always madvise [never]\n"), None);
        assert_eq!(restart_with(None, None, ""), None);
        let valgrind = OsStr::new("/usr/libexec/valgrind/vgpreload_core-amd64-linux.so");
        assert_eq!(restart_with(None, Some(valgrind), MADVISE), None);
        assert!(restart_with(None, Some(OsStr::new("")), MADVISE).is_some());
    }
}
