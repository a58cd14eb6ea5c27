//! The reverse heal started at a process's first look at HEAD (ADR 0059).
//!
//! When the host (or another box) moved HEAD, the box's index is healed onto the move at the
//! box's next touch of its index: its lookup of `index`, or its lock's create. That touch comes
//! late in a command (after `config`, HEAD, the branch and the hooks), and in `git commit` it
//! sits inside the window between git's read of HEAD and its `HEAD.lock`, where a host commit
//! makes git refuse the box's commit. So the heal is started earlier: a process's first look
//! at HEAD that finds the branch away from the box index's sync point marks the heal due, and
//! the thread that served that look makes it right after its reply, while git goes on with its
//! next requests on the other threads. The process's own touch of the index then finds the heal
//! made, or waits for it on the one-at-a-time lock the heal always takes.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use tracing::debug_span;

use crate::core::Core;
use crate::layer::Layer;

thread_local! {
    /// The heal the current request found due: the git dir, and the process it is made for.
    static DUE: RefCell<Option<(PathBuf, u32)>> = const { RefCell::new(None) };
}

/// Marks the reverse heal of `gitdir` due after this request's reply, for process `pid`.
pub(super) fn mark_due(gitdir: &Path, pid: u32) {
    DUE.with(|d| *d.borrow_mut() = Some((gitdir.to_path_buf(), pid)));
}

/// Takes the heal marked due in this thread's request, if any.
fn take_due() -> Option<(PathBuf, u32)> {
    DUE.with(|d| d.borrow_mut().take())
}

impl<L: Layer> Core<L> {
    /// A process's first look at HEAD found `now` (the commit HEAD names): when that is not the
    /// box index's sync point, its reverse heal is due after the reply.
    pub(super) fn heal_due_if_moved(&self, gitdir: &Path, now: Option<&str>, pid: u32) {
        if !self.layer.index_split() {
            return;
        }
        let Some(now) = now else { return };
        // No sync point yet: the first touch seeds the index, which is not started early.
        if self.base(gitdir).is_some_and(|base| base != now) {
            mark_due(gitdir, pid);
        }
    }

    /// After a request's reply: the reverse heal it found due, made as that process's own
    /// reads (as its lookup of `index` would make it, outside any lock).
    pub(crate) fn heal_if_due(&self) {
        let Some((gitdir, pid)) = take_due() else { return };
        let _s = debug_span!("heal_early", pid, gitdir = %gitdir.display()).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        crate::refresh_scope::as_process(pid, &self.recent_refresh, || self.reverse_heal(&gitdir));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heal_marked_due_is_taken_once_by_its_thread_only() {
        mark_due(Path::new(".git"), 7);
        let other = std::thread::spawn(take_due).join().unwrap();
        assert_eq!(other, None, "another thread's request has no heal due");
        assert_eq!(take_due(), Some((PathBuf::from(".git"), 7)));
        assert_eq!(take_due(), None, "taken once");
    }
}
