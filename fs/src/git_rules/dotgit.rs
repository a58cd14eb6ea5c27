//! `.git` files: a work tree whose git dir lives elsewhere (`git init --separate-git-dir`,
//! linked worktrees, submodules). Linked-worktree and submodule git dirs are recognised by their
//! place; any other git dir a `.git` file names inside the mount is remembered by identity, so
//! it gets the git-dir policies (and the index split) when it is looked up.
//!
//! Never runs git and never follows a chain of `.git` files: a pointer that leaves the mount, names
//! something that is not a directory holding HEAD, or cannot be parsed means "not a git dir",
//! with one log line per file.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use tracing::warn;

use crate::core::Core;
use crate::gitdata::{cpath, join_beneath, parse_gitdir_file, read_lower};
use crate::layer::Layer;
use crate::policy::Class;

impl<L: Layer> Core<L> {
    /// A `.git` regular file was looked up at `path` (lower-relative): remember the git dir it
    /// names, if that is a real git dir inside the mount.
    pub(crate) fn note_dotgit_file(&self, path: &Path, st: &libc::stat) {
        let key = format!("dotgit {} {} {}", st.st_ino, st.st_mtime, st.st_mtime_nsec);
        if !self.judge.first_time(key) {
            return;
        }
        let Some(bytes) = read_lower(&self.lower, path).ok().flatten() else { return };
        let target = match parse_gitdir_file(&bytes) {
            Ok(t) => t,
            Err(e) => {
                warn!(file = %path.display(), problem = %e, "malformed .git file: not a git dir");
                return;
            }
        };
        let Some(rel) = self.inside_mount(path, &target) else {
            warn!(file = %path.display(), gitdir = %target.display(), "a .git file names a git dir outside the mount: not served as a git dir");
            return;
        };
        let crel = cpath(&rel);
        match self.lower.stat(&crel) {
            Ok(t) if t.st_mode & libc::S_IFMT == libc::S_IFDIR && self.lower.stat(&cpath(&rel.join("HEAD"))).is_ok() => {
                self.extra_gitdirs.insert((t.st_dev, t.st_ino), ());
                // Already known (e.g. just created by `git init --separate-git-dir`): reclassify.
                self.inodes.set_class(self.inodes.id_for(&t), Class::GitDir);
            }
            _ => warn!(file = %path.display(), gitdir = %target.display(), "a .git file names no git dir (not a directory holding HEAD): not a git dir"),
        }
    }

    /// The lower-relative path of a `.git` file's target, if it lies inside the mount.
    fn inside_mount(&self, file: &Path, target: &Path) -> Option<PathBuf> {
        if target.is_absolute() {
            let mnt = self.opts.mountpoint.as_deref()?;
            let rest = target.strip_prefix(mnt).ok()?;
            join_beneath(Path::new(""), rest)
        } else {
            join_beneath(file.parent().unwrap_or(Path::new("")), target)
        }
    }

    /// The class of `name` in a directory of `parent_class`, found on the lower as `st`: a
    /// directory a `.git` file named is a git dir wherever it sits (also once moved there).
    pub(crate) fn class_found(&self, parent_class: Class, name: &OsStr, st: &libc::stat) -> Class {
        let is_dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
        if is_dir && parent_class == Class::WorkTree && self.is_extra_gitdir(st) {
            Class::GitDir
        } else {
            self.layer.classify(parent_class, name, is_dir)
        }
    }

    /// True when the directory found as `st` was named as a git dir by a `.git` file.
    pub(crate) fn is_extra_gitdir(&self, st: &libc::stat) -> bool {
        !self.extra_gitdirs.is_empty() && self.extra_gitdirs.contains_key(&(st.st_dev, st.st_ino))
    }

    /// The lower just made a file (`st`): whatever git dir was known by its inode number is gone.
    /// `git worktree remove` deletes `.git/worktrees/<n>`, and the next `mkdir` (a new
    /// repository's, made at once by an agent tool) gets its number: served as a git dir, its own
    /// `.git/index.lock` was created as `index-box.lock` and then never found ("unable to write
    /// new index file", ADR 0027). Checking for `HEAD` at each lookup instead breaks removing a
    /// git dir, whose `HEAD` goes before the directory does.
    pub(crate) fn forget_reused_gitdir(&self, st: &libc::stat) {
        if !self.extra_gitdirs.is_empty() {
            self.extra_gitdirs.remove(&(st.st_dev, st.st_ino));
        }
    }
}
