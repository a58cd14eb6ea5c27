//! The shared `index.lock` taken for a box process before its first ref lock (ADR 0054).
//!
//! Host git takes `index.lock`, then `HEAD.lock` and the branch's lock (retrying those for
//! 100 ms while it keeps `index.lock`); the sealed heal took them the other way round, so a host
//! committing again and again starved it for up to the whole lock wait. seamfs now takes the
//! shared lock first, for the box process, and the heal at the rename uses it.

use std::ffi::CStr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use crate::core::names::Child;
use crate::core::Core;
use crate::gitdata::cpath;
use crate::judge::heal_locks::Taken;
use crate::judge::locks::LockRecord;
use crate::judge::procs::Proc;
use crate::layer::Layer;
use crate::lower::{fstat, same_file};

impl<L: Layer> Core<L> {
    /// Before box process `pid` makes `rel` (`HEAD.lock`, or `refs/heads/<b>.lock` of a branch a
    /// work tree is on) in `gitdir`: takes the shared `index.lock` of each work tree whose index
    /// a move would heal, waiting (bounded) for a host git to finish. Never fails the create.
    pub(crate) fn take_heal_lock_before(&self, gitdir: &Path, rel: &str, child: &Child<'_>, pid: u32) {
        if !self.layer.index_split() || pid == 0 {
            return;
        }
        let p = Proc::of(pid);
        let gitdirs = if rel == "HEAD.lock" {
            vec![gitdir.to_path_buf()]
        } else if let Some(name) = rel.strip_suffix(".lock").filter(|n| n.starts_with("refs/heads/")) {
            // Within one transaction `HEAD.lock` comes first and took it already.
            if self.judge.heal_locks.holds_any(p) {
                return;
            }
            self.gitdirs_on(gitdir, name)
        } else {
            return;
        };
        let mut taken = Vec::new();
        for g in gitdirs {
            let shared = cpath(&g.join("index.lock"));
            // Held for this process already: while it rewrites the work tree (ADR 0032). Never
            // taken from under a host operation (a rebase takes the index lock at each step; the
            // heal leaves a proposal then).
            if self.judge.locks.holder(&shared).is_some_and(|r| r.owner == p) || self.host_op_in_progress(&g) {
                continue;
            }
            // A process that waited the bound out for its rewrite (ADR 0032) tries once.
            let wait = if self.judge.index_exclusion.gave_up_by(p) { std::time::Duration::ZERO } else { self.opts.lock_wait };
            match self.take_lock(&g, &shared, wait) {
                Some(fd) => {
                    if let Ok(st) = fstat(fd.as_raw_fd()) {
                        self.judge.locks.created(shared.clone(), LockRecord { owner: p, dev: st.st_dev, ino: st.st_ino });
                    }
                    tracing::debug!(lock = %shared.to_string_lossy(), pid, "took the shared index lock before a box ref lock");
                    taken.push(Taken { shared, gitdir: g, owner: p });
                }
                None => self.judge.heal_locks.gave_up(p, g),
            }
        }
        self.judge.heal_locks.taken(child.path.to_c_string(), taken);
    }

    /// The shared `index.lock` of `gitdir` as process `p` holds it (taken before its ref lock,
    /// or while it rewrote the work tree), opened for the heal to write; None when `p` holds none.
    pub(crate) fn own_heal_lock(&self, p: Proc, lock: &CStr) -> Option<OwnedFd> {
        let rec = self.judge.locks.holder(&lock.to_owned()).filter(|r| r.owner == p)?;
        let fd = self.lower.open_at(lock, libc::O_WRONLY | libc::O_TRUNC | libc::O_NOFOLLOW, 0).ok()?;
        // The name must still hold the file taken: a host user may have removed the lock.
        fstat(fd.as_raw_fd()).ok().filter(|st| same_file(st, rec.dev, rec.ino)).map(|_| fd)
    }

    /// Box ref lock `trigger` went (committed, removed) or was never made: the shared locks taken
    /// for it go too, unless the heal installed them; `only` limits it to one process's.
    pub(crate) fn release_heal_locks(&self, trigger: &CStr, only: Option<Proc>) {
        for t in self.judge.heal_locks.remove(trigger, only) {
            // Nothing to remove when the heal renamed it onto the index already.
            if self.judge.locks.remove_held(&self.lower, &t.shared, t.owner) {
                self.drop_held(&t.gitdir);
            }
        }
    }
}
