//! The index split's two moments: the first touch of a git dir's `index` seeds `index-box.<id>`, and
//! the box committing its index (rename onto `index`) publishes a shared index the host lacks.

use std::ffi::{CStr, OsStr};
use std::path::PathBuf;

use fuser::Errno;
use tracing::{info, warn};

use crate::core::Core;
use crate::gitdata::{cpath, read_lower};
use crate::index::names::{LEGACY_INDEX_BOX, SHARED_INDEX};
use crate::index::seed::{ensure_index_box, publish, NewFile, SeedOptions, Seeded};
use crate::layer::Layer;
use crate::policy::Class;

impl<L: Layer> Core<L> {
    /// Before removing (or renaming over) a git dir the box emptied: remove the names it cannot
    /// see (the shared index and seamfs's own files) when nothing else is left. True when
    /// something was removed. A git dir a `.git` file named (a separate git dir, a bare repo's
    /// `worktrees/<n>`) is one by identity, wherever it sits.
    pub(crate) fn clear_hidden(&self, parent: u64, name: &OsStr, path: &CStr) -> bool {
        if !self.layer.index_split() {
            return false;
        }
        let by_place = self.child_class(parent, name, true).ok() == Some(Class::GitDir);
        if !by_place && !self.lower.stat(path).is_ok_and(|st| self.is_extra_gitdir(&st)) {
            return false;
        }
        let Ok(listed) = self.lower.list(path) else { return false };
        let names: Vec<std::ffi::OsString> = listed.into_iter().map(|(n, _)| n).collect();
        if names.is_empty() || names.iter().any(|n| self.layer.names().to_box(n).is_some()) {
            return false;
        }
        let dir = crate::gitdata::rel_path(path);
        names.iter().all(|n| self.lower.unlink(&cpath(&dir.join(n)), false).is_ok())
    }

    /// A listing of a git dir shows `index` when the box would see one: seed it first.
    pub(crate) fn seed_for_listing(&self, dir: u64, listed: &[crate::handles::DirEntry]) -> bool {
        if !self.layer.index_split() || self.class_of(dir).ok() != Some(Class::GitDir) {
            return false;
        }
        let has = |n: &str| listed.iter().any(|x| x.lower == n);
        // An older seamfs's index is this box's to take over, as a shared index is to copy.
        if !(has(SHARED_INDEX) || has(LEGACY_INDEX_BOX)) || has(self.layer.names().index()) {
            return false;
        }
        self.seed_index(dir).is_ok()
    }

    /// The box created the git dir at `path` (lower-relative).
    pub(crate) fn box_gitdir_made(&self, path: &CStr) {
        if let Ok(st) = self.lower.stat(path) {
            self.box_gitdirs.insert((st.st_dev, st.st_ino), ());
        }
    }

    /// The git dir node's lower path, the owner/mode new index files there get, and whether
    /// the box made it.
    fn gitdir_of(&self, gitdir: u64) -> Result<(PathBuf, NewFile, bool), Errno> {
        let c = self.inodes.path(gitdir)?;
        let st = self.lower.stat(&c).map_err(Errno::from)?;
        let rel = crate::gitdata::rel_path(&c);
        // A group-writable git dir is a shared repository: keep its index group-writable too.
        let mode = if st.st_mode & 0o020 != 0 { 0o664 } else { 0o644 };
        let by_box = self.box_gitdirs.contains_key(&(st.st_dev, st.st_ino));
        Ok((rel, NewFile { uid: st.st_uid, gid: st.st_gid, mode }, by_box))
    }

    /// First touch: make sure `index-box.<id>` exists (or that the branch is truly unborn). In a
    /// git dir the box made, a missing index is the truth, not a stale read of the host's: no
    /// stand-in is built from HEAD, so a repository copied in (`cp -R`, `tar -x`) gets exactly
    /// the index it copies, when it copies it.
    pub(crate) fn seed_index(&self, gitdir: u64) -> Result<(), Errno> {
        let (rel, owner, by_box) = self.gitdir_of(gitdir)?;
        let opts = SeedOptions { stand_in: !by_box, ..self.layer.seed_options() };
        match ensure_index_box(&self.lower, &rel, self.layer.names(), owner, opts) {
            Ok(Seeded::Present) => {
                self.reverse_heal(&rel);
                Ok(())
            }
            Ok(Seeded::FromShared | Seeded::FromHead) => {
                if let Some(head) = self.head_commit(&rel) {
                    self.set_base(&rel, &head);
                }
                Ok(())
            }
            Ok(Seeded::Unborn | Seeded::Absent) => Ok(()),
            Err(e) => {
                warn!(error = %e, "box index not seeded; the box's git gets EIO instead of an empty index");
                Err(Errno::EIO)
            }
        }
    }

    /// After a rename onto the box's `index`: if the git dir has no shared index (a repo the box
    /// just created), publish a copy, never replacing one the host has.
    pub(crate) fn after_index_commit(&self, parent: u64, name: &OsStr) {
        if name != "index" || !self.layer.index_split() || self.class_of(parent).ok() != Some(Class::GitDir) {
            return;
        }
        let Ok((rel, owner, _)) = self.gitdir_of(parent) else { return };
        let shared = rel.join(SHARED_INDEX);
        let cshared = cpath(&shared);
        self.lower.refresh(&cshared);
        if self.lower.stat(&cshared).is_ok() {
            return;
        }
        match read_lower(&self.lower, &rel.join(self.layer.names().index())) {
            Ok(Some(bytes)) => match publish(&self.lower, &shared, &bytes, owner) {
                Ok(true) => info!(gitdir = %rel.display(), "published the box's index as the shared index (there was none)"),
                Ok(false) => {}
                Err(e) => warn!(error = %e, "publishing a shared index failed"),
            },
            Ok(None) => {}
            Err(e) => warn!(gitdir = %rel.display(), error = %e, "reading the box index to publish it failed"),
        }
    }
}
