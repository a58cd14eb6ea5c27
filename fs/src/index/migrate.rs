//! A git dir a seamfs from before box ids used holds `index-box`, `index-box.seam-base` and
//! `COMMIT_EDITMSG-box` (ADR 0028). The first box whose first touch finds its own index absent
//! takes them over, once: each is renamed to this box's name, never over one that exists.
//! The index goes first, by an atomic no-replace rename, so only the box that won it takes the
//! rest; later boxes seed their own as any new box does.

use std::path::Path;

use tracing::{info, warn};

use super::names::BoxNames;
use crate::gitdata::cpath;
use crate::lower::Lower;

/// Renames `old` to `new` (lower-relative) unless `new` exists. Over a share whose rename
/// takes no flags (9p: EINVAL), a link and an unlink: two boxes racing there may both keep a
/// copy of the same old file, which is where both stood anyway.
fn take(lower: &Lower, old: &Path, new: &Path) -> std::io::Result<()> {
    let (o, n) = (cpath(old), cpath(new));
    match lower.rename(&o, &n, libc::RENAME_NOREPLACE) {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            lower.link(&o, &n)?;
            lower.unlink(&o, false)
        }
        r => r,
    }
}

/// Takes over the old names in `gitdir` (lower-relative) for this box; true when it did.
pub fn migrate(lower: &Lower, gitdir: &Path, names: &BoxNames) -> bool {
    let legacy = gitdir.join(super::names::LEGACY_INDEX_BOX);
    lower.refresh(&cpath(&legacy));
    if lower.stat(&cpath(&legacy)).is_err() {
        return false;
    }
    let mut pairs = names.legacy_pairs().into_iter();
    let (old, new) = pairs.next().expect("the index comes first");
    match take(lower, &gitdir.join(old), &gitdir.join(new)) {
        Ok(()) => {}
        // Another box took it first, or this box's own index appeared: nothing to migrate.
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::EEXIST)) => return false,
        Err(e) => {
            warn!(gitdir = %gitdir.display(), error = %e, "rename {old} to {new} failed; seeding a new index instead (the old one stays)");
            return false;
        }
    }
    for (old, new) in pairs {
        match take(lower, &gitdir.join(old), &gitdir.join(new)) {
            Ok(()) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT)) => {}
            Err(e) => warn!(gitdir = %gitdir.display(), error = %e, "rename {old} to {new} failed during migration"),
        }
    }
    info!(gitdir = %gitdir.display(), box_id = %names.id(), "migrated index-box (a seamfs before box ids) to {new}");
    true
}
