//! The user a job runs as: its certificate's name, looked up in the node's user database
//! (NSS, through nix), with its primary and supplementary groups. Root and uids below the
//! site's minimum are refused unless allowed.

use nix::unistd::{Gid, Uid, User};

/// The lowest uid a job may run as by default (Slurm's and most distributions' first
/// ordinary user).
pub const MIN_UID_DEFAULT: u32 = 1000;

/// Most supplementary groups read for a user.
pub const GROUPS_MAX: usize = 1024;

pub use shardsched_process::plan::RunAs;

/// Which users a node runs jobs as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserPolicy {
    /// Uids below this are refused (root always, unless `allow_root`).
    pub min_uid: u32,
    /// Whether uid 0 may run jobs.
    pub allow_root: bool,
}

impl Default for UserPolicy {
    fn default() -> Self {
        UserPolicy {
            min_uid: MIN_UID_DEFAULT,
            allow_root: false,
        }
    }
}

/// Looks `name` up and applies `policy`. The name is used exactly as the certificate says.
pub fn resolve(name: &str, policy: &UserPolicy) -> Result<RunAs, String> {
    let user = User::from_name(name)
        .map_err(|e| format!("cannot look user {name} up: {e}"))?
        .ok_or_else(|| format!("no user {name} on this node"))?;
    let uid = user.uid.as_raw();
    if uid == 0 && !policy.allow_root {
        return Err(format!("user {name} is uid 0: jobs do not run as root"));
    }
    if uid != 0 && uid < policy.min_uid {
        return Err(format!(
            "user {name} is uid {uid}, below this node's minimum of {}",
            policy.min_uid
        ));
    }
    let mut groups = supplementary(&user)?;
    if !groups.contains(&user.gid.as_raw()) {
        groups.insert(0, user.gid.as_raw());
    }
    Ok(RunAs {
        name: name.to_owned(),
        uid,
        gid: user.gid.as_raw(),
        groups,
        home: user.dir.to_string_lossy().into_owned(),
        shell: user.shell.to_string_lossy().into_owned(),
    })
}

/// The groups that list `user` as a member, read from the group database.
fn supplementary(user: &User) -> Result<Vec<u32>, String> {
    // getgrouplist through nix needs the name as a C string.
    let name = std::ffi::CString::new(user.name.as_str())
        .map_err(|_| format!("user name {:?} holds a NUL", user.name))?;
    let groups = nix::unistd::getgrouplist(&name, user.gid)
        .map_err(|e| format!("cannot list the groups of {}: {e}", user.name))?;
    Ok(groups
        .into_iter()
        .take(GROUPS_MAX)
        .map(Gid::as_raw)
        .collect())
}

/// The user this process runs as, by name (for `up`'s admin certificate, and for an agent
/// not running as root, which runs jobs as itself).
pub fn effective_user() -> Option<RunAs> {
    let uid = Uid::effective();
    let user = User::from_uid(uid).ok().flatten()?;
    let groups = nix::unistd::getgroups()
        .map(|g| g.into_iter().map(Gid::as_raw).collect())
        .unwrap_or_default();
    Some(RunAs {
        name: user.name,
        uid: uid.as_raw(),
        gid: user.gid.as_raw(),
        groups,
        home: user.dir.to_string_lossy().into_owned(),
        shell: user.shell.to_string_lossy().into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_unknown_users_are_refused_with_reasons() {
        let refused = resolve("root", &UserPolicy::default()).expect_err("root");
        assert!(refused.contains("uid 0"), "{refused}");
        let unknown =
            resolve("no-such-user-shardsched", &UserPolicy::default()).expect_err("unknown");
        assert!(unknown.contains("no user"), "{unknown}");
        let root = resolve(
            "root",
            &UserPolicy {
                min_uid: 0,
                allow_root: true,
            },
        )
        .expect("allowed");
        assert_eq!((root.uid, root.gid), (0, 0));
    }
}
