//! Lock files the box created: who holds each, and the release of a dead owner's lock.
//!
//! A lock is recorded at create with its creator and the lower file's identity. The rename
//! that commits it, or the unlink that rolls it back, forgets it. A reaper removes a lock
//! whose creator died — only while the lower name still holds the very file it created, so a
//! lock someone else took since is never touched. Host-side locks are never recorded, so never
//! removed.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

use dashmap::DashMap;
use tracing::warn;

use super::procs::Proc;
use crate::lower::{same_file, Lower};

/// One box-held lock.
#[derive(Debug, Clone, Copy)]
pub struct LockRecord {
    /// Its creator.
    pub owner: Proc,
    /// Lower device of the lock file.
    pub dev: u64,
    /// Lower inode of the lock file.
    pub ino: u64,
}

/// Box-held locks by lower path.
#[derive(Debug, Default)]
pub struct Locks {
    held: DashMap<CString, LockRecord>,
    /// When each dead owner's lock was first found dead (see `reap`).
    dead_since: DashMap<CString, Instant>,
}

/// How often the reaper looks. A dead owner's lock goes within about this long.
pub const REAP_EVERY: Duration = Duration::from_millis(200);

/// How long a dead owner's lock is looked for while its name reads as another file.
pub const STALE_GRACE: Duration = Duration::from_secs(10);

/// True when the lower's listing of the lock's directory shows `path` as inode `ino`: the
/// truth when a lookup of the name still meets the share's stale entry.
fn listed(lower: &Lower, path: &CStr, ino: u64) -> bool {
    let bytes = path.to_bytes();
    let (dir, name) = match bytes.iter().rposition(|&b| b == b'/') {
        Some(i) => (&bytes[..i], &bytes[i + 1..]),
        None => (&b"."[..], bytes),
    };
    let Ok(dir) = CString::new(dir) else { return false };
    lower.list(&dir).is_ok_and(|names| names.iter().any(|(n, i)| n.as_bytes() == name && *i == ino))
}

/// Unlinks a name; a negative entry the share just served would answer ENOENT without asking
/// the server, so that is refreshed (now a forced revalidation) and tried once more.
fn unlink_fresh(lower: &Lower, path: &CStr) -> std::io::Result<()> {
    match lower.unlink(path, false) {
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
            lower.refresh_again(path);
            lower.unlink(path, false)
        }
        r => r,
    }
}

impl Locks {
    /// Records a lock the box just created.
    pub fn created(&self, path: CString, rec: LockRecord) {
        self.dead_since.remove(&path);
        self.held.insert(path, rec);
    }

    /// Forgets a lock (committed by rename, or removed).
    pub fn released(&self, path: &CStr) {
        self.held.remove(path);
        self.dead_since.remove(path);
    }

    /// Removes the lock at `path` that seamfs took for process `owner` (a shared `index.lock`,
    /// ADR 0032 and 0054), only while the name still holds that very file, and forgets its
    /// record. True when the file was removed; false when it was not `owner`'s to remove (no
    /// record, another holder's, renamed onto the index by a heal, or replaced).
    pub fn remove_held(&self, lower: &Lower, path: &CStr, owner: Proc) -> bool {
        let Some(rec) = self.holder(&path.to_owned()).filter(|r| r.owner == owner) else { return false };
        lower.refresh(path);
        let mut removed = false;
        if lower.stat(path).is_ok_and(|st| same_file(&st, rec.dev, rec.ino)) {
            match lower.unlink(path, false) {
                Ok(()) => removed = true,
                Err(e) => warn!(lock = %path.to_string_lossy(), error = %e, "could not remove the shared index lock taken for a box process"),
            }
        }
        self.released(path);
        removed
    }

    /// The lock named `name` (its last path component) that process `p` holds, if any.
    pub fn held_by(&self, p: Proc, name: &[u8]) -> Option<CString> {
        self.held
            .iter()
            .find(|e| e.value().owner == p && e.key().to_bytes().rsplit(|&b| b == b'/').next() == Some(name))
            .map(|e| e.key().clone())
    }

    /// True when the box holds a lock whose lower path satisfies `pred`.
    pub fn any_held(&self, pred: impl Fn(&CStr) -> bool) -> bool {
        self.held.iter().any(|e| pred(e.key()))
    }

    /// The box record for a lock path, if the box holds it.
    pub fn holder(&self, path: &CString) -> Option<LockRecord> {
        self.held.get(path).map(|r| *r)
    }

    /// Removes locks whose creator is gone; returns how many were removed.
    ///
    /// A lock whose name does not (yet) show the file the box created is kept and looked at
    /// again on later passes, for up to [`STALE_GRACE`] after its owner died: the share may
    /// serve a stale entry for a name replaced moments ago, and giving up at once left locks
    /// behind for good under such windows.
    pub fn reap(&self, lower: &Lower) -> usize {
        let dead: Vec<(CString, LockRecord)> = self
            .held
            .iter()
            .filter(|e| !e.value().owner.alive())
            .map(|e| (e.key().clone(), *e.value()))
            .collect();
        let mut removed = 0;
        for (path, rec) in dead {
            // The share may still hold a stale entry for the name: ask it again first, and
            // trust its listing (never cached) over a lookup that still meets a stale entry.
            lower.refresh_again(&path);
            let ours = match lower.stat(&path) {
                Ok(st) if same_file(&st, rec.dev, rec.ino) => true,
                _ => listed(lower, &path, rec.ino),
            };
            if !ours {
                // Gone, another file under the name, or a stale answer: look again next pass.
                if self.past_grace(&path) {
                    self.forget_dead(&path);
                }
                continue;
            }
            match unlink_fresh(lower, &path) {
                Ok(()) => {
                    self.forget_dead(&path);
                    removed += 1;
                    warn!(lock = %path.to_string_lossy(), pid = rec.owner.pid, "removed a lock left by a box process that died");
                }
                Err(e) if self.past_grace(&path) => {
                    self.forget_dead(&path);
                    warn!(lock = %path.to_string_lossy(), error = %e, "could not remove a dead box process's lock");
                }
                Err(_) => {}
            }
        }
        removed
    }

    /// True once the lock's owner has been dead longer than the grace period.
    fn past_grace(&self, path: &CString) -> bool {
        let since = *self.dead_since.entry(path.clone()).or_insert_with(Instant::now);
        since.elapsed() > STALE_GRACE
    }

    fn forget_dead(&self, path: &CString) {
        self.held.remove(path);
        self.dead_since.remove(path);
    }

    /// Number of box-held locks.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// True when the box holds no lock.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}
