//! The core's entry points: one call per destructive op, before it, that returns nothing and
//! never fails the op. Only work-tree files, only on seamfs's own layer (not the emulator).

use std::ffi::{CStr, OsStr};

use super::Op;
use crate::core::Core;
use crate::layer::Layer;
use crate::policy::Class;

impl<L: Layer> Core<L> {
    /// Before `name` in `parent` (lower path `path`) is unlinked, truncated or replaced by `op`.
    pub(crate) fn park_before(&self, parent: u64, name: &OsStr, path: &CStr, op: Op, pid: u32) {
        let Some(p) = &self.parker else { return };
        if name == ".git" {
            // A work tree being removed (`git worktree remove`) may lose its `.git` file
            // before the files parking must still place in their repository.
            return p.work_tree_going(path);
        }
        if self.child_class(parent, name, false) == Ok(Class::WorkTree) {
            p.park(path, op, pid);
        }
    }

    /// Before node `id` is truncated (`op`): by an O_TRUNC open (`flags`) or a smaller size.
    pub(crate) fn park_node(&self, id: u64, flags: i32, new_size: Option<u64>, pid: u32) {
        let Some(p) = &self.parker else { return };
        let op = match new_size {
            Some(_) => Op::Truncate,
            None if flags & libc::O_TRUNC != 0 && flags & libc::O_ACCMODE != libc::O_RDONLY => Op::OpenTrunc,
            None => return,
        };
        if self.class_of(id) != Ok(Class::WorkTree) {
            return;
        }
        let Ok(path) = self.inodes.path(id) else { return };
        if let Some(size) = new_size {
            // Growing a file destroys nothing.
            if self.lower.stat(&path).map_or(true, |st| st.st_size as u64 <= size) {
                return;
            }
        }
        p.park(&path, op, pid);
    }

    /// `user.seamfs.status` lines of parking.
    pub(crate) fn park_status(&self) -> String {
        use std::sync::atomic::Ordering::Relaxed;
        let Some(p) = &self.parker else { return "park=off\n".into() };
        let s = p.stats();
        format!(
            "park=on\npark_pending={}\npark_reads={}\npark_parked={}\npark_ignored={}\npark_clean={}\npark_not_parked={}\npark_commits={}\n",
            p.pending(),
            s.reads.load(Relaxed),
            s.parked.load(Relaxed),
            s.ignored.load(Relaxed),
            s.clean.load(Relaxed),
            s.not_parked.load(Relaxed),
            s.commits.load(Relaxed)
        )
    }
}
