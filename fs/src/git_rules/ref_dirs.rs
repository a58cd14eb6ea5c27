//! Ref-store directories git never removes (ADR 0052): a process's refresh of one stands
//! through the box's lock creates, where every other live name is refreshed again, and the
//! kernel keeps its entry as long as the git dir's own.
//!
//! Under a lock git reads files (the ref it moves, `packed-refs`, `HEAD`), never these
//! directories' entries; and since git's files backend spares `[logs/]refs/` and its immediate
//! subdirectories when it prunes, the directory the process found a moment ago is still the one
//! at its name. Refreshing `.git/refs` and `.git/refs/heads` again after each of a commit's
//! three locks cost the share a round trip each.

use std::ffi::{CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::time::Duration;

use crate::core::Core;
use crate::layer::Layer;
use crate::policy::{ref_dir_never_removed, Class};

/// How deep below its git dir a directory git never removes lies (`logs/refs/heads`).
const DEEPEST: usize = 3;

impl<L: Layer> Core<L> {
    /// True when directory node `id` is one git never removes ([`ref_dir_never_removed`]).
    pub(crate) fn ref_dir_never_removed(&self, id: u64) -> bool {
        let Ok((parent, name)) = self.inodes.with(id, |n| (n.parent, n.name.clone())) else { return false };
        self.in_ref_store_never_removed(parent, &name)
    }

    /// True when `name` in directory node `parent` is one git never removes and the lower holds
    /// a directory at `path` (its own entry: nothing is asked of the share's server).
    pub(crate) fn ref_dir_never_removed_at(&self, parent: u64, name: &OsStr, path: &CStr) -> bool {
        self.in_ref_store_never_removed(parent, name)
            && self.lower.stat(path).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
    }

    /// The entry TTL the kernel gets for `name` in `parent`, found as `st` and classed `class`,
    /// when it is a directory git never removes: the git dir's own, no longer than the share's
    /// own cache keeps it. Git walks `refs/` in every command; with the ref-store TTL
    /// (`policy::REF_DIR_TTL`, kept short for directories that can become files) the kernel
    /// asked seamfs for `refs`, `refs/heads` and `refs/tags` again several times per command.
    pub(crate) fn never_removed_dir_ttl(&self, parent: u64, name: &OsStr, class: Class, st: &libc::stat) -> Option<Duration> {
        let dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
        (class == Class::RefDir && dir && self.in_ref_store_never_removed(parent, name))
            .then(|| self.policy(Class::GitDir).entry_ttl)
    }

    /// Walks up from `parent` through ref-store directories to a git dir, and judges the path
    /// of `name` below it.
    /// Only the ancestors' names are held (the node table's own `Arc`s): this runs on lookups.
    fn in_ref_store_never_removed(&self, parent: u64, name: &OsStr) -> bool {
        let mut above: Vec<Arc<OsStr>> = Vec::with_capacity(DEEPEST);
        let mut at = parent;
        while above.len() < DEEPEST {
            let Ok((class, up, own)) = self.inodes.with(at, |n| (n.class, n.parent, n.name.clone())) else { return false };
            match class {
                Class::GitDir => {
                    let below: Vec<&[u8]> = above.iter().rev().map(|n| n.as_bytes()).chain([name.as_bytes()]).collect();
                    return ref_dir_never_removed(&below);
                }
                Class::RefDir => {
                    above.push(own);
                    at = up;
                }
                _ => return false,
            }
        }
        false
    }
}
