//! The shared index's lock, held for a box process while it rewrites the work tree (ADR 0032).
//!
//! On one kernel, and on the raw share, `git reset --hard` and a host `git commit -a` take the
//! one `index.lock`, so the commit never scans the work tree while the reset unlinks and
//! re-creates a file. Through seamfs the box locks `index-box.<id>.lock` and nothing excluded the
//! host: its `commit -a` could record the deletion of a file the box was only rewriting. At a box
//! process's first unlink of a work-tree file while it holds its index lock, seamfs takes the
//! shared `index.lock` too (waiting for a holder, as a box lock create waits for a host lock), and
//! removes it with the box's lock. It is recorded as that process's lock, so the reaper removes
//! it if the process dies holding it.

use std::ffi::{CStr, CString};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use dashmap::DashMap;
use tracing::{debug, warn};

use super::locks::{LockRecord, Locks};
use super::procs::Proc;
use crate::lower::Lower;

/// The shared index's lock name, beside the box's own index lock.
const SHARED_LOCK: &[u8] = b"index.lock";

/// Shared index locks seamfs holds for box processes.
#[derive(Debug, Default)]
pub struct IndexExclusion {
    /// By the box index lock it goes with: the shared lock's path and the process it is held for.
    held: DashMap<CString, (CString, Proc)>,
    /// Box index locks whose process waited the whole bound for the shared lock and went on
    /// without it: its later unlinks do not wait again.
    gave_up: DashMap<CString, Proc>,
}

/// The directory part of a lower path, without its last `/` ("" for a name at the root).
fn dir_of(path: &CStr) -> &[u8] {
    let bytes = path.to_bytes();
    bytes.iter().rposition(|&b| b == b'/').map_or(&b""[..], |i| &bytes[..i])
}

/// `index.lock` in the directory of `box_lock`.
fn shared_lock_beside(box_lock: &CStr) -> CString {
    let dir = dir_of(box_lock);
    let sep: &[u8] = if dir.is_empty() { b"" } else { b"/" };
    CString::new([dir, sep, SHARED_LOCK].concat()).expect("no NUL in a lower path")
}

impl IndexExclusion {
    /// Box process `p` is about to unlink a work-tree file: if it holds its index lock (named
    /// `box_lock_name` in its git dir) and no shared lock goes with it yet, take one, waiting up
    /// to `wait` for another holder. Never fails the unlink: past the wait it is logged.
    pub fn before_work_tree_change(&self, lower: &Lower, locks: &Locks, p: Proc, box_lock_name: &[u8], wait: Duration) -> Option<Taken> {
        let box_lock = locks.held_by(p, box_lock_name)?;
        self.take(lower, locks, p, box_lock, wait)
    }

    /// Whether process `p` waited the whole bound for a shared lock and went on without it.
    pub fn gave_up_by(&self, p: Proc) -> bool {
        self.gave_up.iter().any(|g| *g.value() == p)
    }

    /// Takes the shared lock beside `box_lock` for `p`, unless one goes with it already.
    fn take(&self, lower: &Lower, locks: &Locks, p: Proc, box_lock: CString, wait: Duration) -> Option<Taken> {
        if self.held.get(&box_lock).is_some_and(|h| h.1 == p) || self.gave_up.get(&box_lock).is_some_and(|g| *g == p) {
            return None;
        }
        let shared = shared_lock_beside(&box_lock);
        let deadline = Instant::now() + wait;
        loop {
            match lower.open_at(&shared, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o644) {
                Ok(fd) => {
                    give_like_dir(lower, &box_lock, &fd);
                    if let Ok(st) = crate::lower::fstat(fd.as_raw_fd()) {
                        locks.created(shared.clone(), LockRecord { owner: p, dev: st.st_dev, ino: st.st_ino });
                    }
                    debug!(lock = %shared.to_string_lossy(), pid = p.pid, "took the shared index lock while a box process rewrites the work tree");
                    self.held.insert(box_lock.clone(), (shared, p));
                    return Some(Taken { gitdir: gitdir_of(&box_lock), fd });
                }
                // On a lower that never revalidates (9p cache=loose) the name may be one the host
                // removed long ago, which no refresh forgets: the server's listing says.
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) && Instant::now() < deadline => {
                    if !lower.forget_stale_name(&shared) {
                        crate::refresh_scope::pause(Duration::from_millis(5));
                        lower.refresh_again(&shared);
                    }
                }
                Err(e) => {
                    warn!(lock = %shared.to_string_lossy(), pid = p.pid, error = %e, "could not take the shared index lock before a box process rewrites the work tree: a host commit now may see a file it rewrites as deleted");
                    self.gave_up.insert(box_lock, p);
                    return None;
                }
            }
        }
    }

    /// The box index lock at `box_lock` was committed or removed: so is the shared lock taken
    /// with it, if the name still holds the file seamfs made. Returns the git dir of a shared
    /// lock it removed (whose record `index.seam-held` the caller drops).
    pub fn released(&self, lower: &Lower, locks: &Locks, box_lock: &CStr) -> Option<PathBuf> {
        self.gave_up.remove(box_lock);
        let (_, (shared, p)) = self.held.remove(box_lock)?;
        locks.remove_held(lower, &shared, p).then(|| gitdir_of(box_lock))
    }
}

/// A shared lock just taken: its git dir and its open file (for the durable record).
pub struct Taken {
    /// The git dir, lower-relative.
    pub gitdir: PathBuf,
    /// The lock, open.
    pub fd: std::os::fd::OwnedFd,
}

/// The git dir a box index lock sits in, lower-relative.
fn gitdir_of(box_lock: &CStr) -> PathBuf {
    PathBuf::from(std::ffi::OsStr::from_bytes(dir_of(box_lock)))
}

/// Owned like the git dir, so the host's user can remove it (as any lock git leaves).
fn give_like_dir(lower: &Lower, box_lock: &CStr, fd: &std::os::fd::OwnedFd) {
    let dir = match dir_of(box_lock) {
        b"" => &b"."[..],
        d => d,
    };
    let Ok(dir) = CString::new(dir) else { return };
    if let Ok(st) = lower.stat(&dir) {
        crate::lower::own_like(fd.as_raw_fd(), st.st_uid, st.st_gid, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_lock_sits_beside_the_box_lock() {
        assert_eq!(shared_lock_beside(c"r/.git/index-box.b1.lock").as_bytes(), b"r/.git/index.lock");
        assert_eq!(shared_lock_beside(c"r/.git/worktrees/w/index-box.b1.lock").as_bytes(), b"r/.git/worktrees/w/index.lock");
        assert_eq!(shared_lock_beside(c"index-box.b1.lock").as_bytes(), b"index.lock");
    }
}
