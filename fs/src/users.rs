//! Processes using a directory: their cwd, root or an open file is at or below it.
//!
//! A mount over a directory does not move what was already in it: a process whose cwd or
//! open file is there stays on the directory beneath the mount. `seamfs mount --over` warns
//! about them, and `seamfs umount` names them when a busy mount had to be detached lazily.

use std::fmt;
use std::path::{Path, PathBuf};

/// One process and what of it is under the directory.
#[derive(Debug, Clone, PartialEq)]
pub struct User {
    /// Its pid.
    pub pid: u32,
    /// Its command name (`/proc/<pid>/comm`).
    pub comm: String,
    /// `cwd`, `root`, or the open file's path.
    pub what: String,
}

impl fmt::Display for User {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} ({})", self.pid, self.comm, self.what)
    }
}

fn under(link: &Path, dir: &Path) -> bool {
    link.starts_with(dir)
}

/// What of process `pid` is under `dir`: its cwd, its root, else its first open file there.
fn use_of(pid: u32, dir: &Path) -> Option<String> {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    for what in ["cwd", "root"] {
        if std::fs::read_link(proc.join(what)).is_ok_and(|l| under(&l, dir)) {
            return Some(what.into());
        }
    }
    std::fs::read_dir(proc.join("fd")).ok()?.flatten().find_map(|e| {
        let l = std::fs::read_link(e.path()).ok()?;
        under(&l, dir).then(|| format!("open {}", l.display()))
    })
}

/// Every process but this one using `dir` (absolute), by pid.
pub fn users_of(dir: &Path) -> Vec<User> {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut out: Vec<User> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter_map(|pid| {
            let what = use_of(pid, dir)?;
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim().to_string();
            Some(User { pid, comm, what })
        })
        .collect();
    out.sort_by_key(|u| u.pid);
    out
}

/// At most `max` users as one line, with how many more there are.
pub fn describe(users: &[User], max: usize) -> String {
    let mut s = users.iter().take(max).map(User::to_string).collect::<Vec<_>>().join(", ");
    if users.len() > max {
        s.push_str(&format!(" and {} more", users.len() - max));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_child_whose_cwd_is_inside() {
        let dir = std::env::temp_dir().join(format!("seamfs-users-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let mut child = std::process::Command::new("sleep").arg("5").current_dir(dir.join("sub")).spawn().unwrap();
        let found = users_of(&dir);
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_dir_all(&dir);
        let u = found.iter().find(|u| u.pid == child.id()).expect("the child is a user");
        assert_eq!((u.comm.as_str(), u.what.as_str()), ("sleep", "cwd"));
        assert!(describe(&found, 0).contains("more"));
    }
}
