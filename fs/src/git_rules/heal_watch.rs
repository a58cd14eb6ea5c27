//! A moment's watch on the shared index after a sealed heal is installed (ADR 0051).
//!
//! `git commit` reads the index before it takes `index.lock`, and when its refresh changed a
//! stat entry it writes what it read back under the lock, unchecked (lab.md bug 9). A host
//! commit that read the index before a box commit's heal was installed, and locked after, puts
//! the pre-heal index back; its own commit fails git's compare-and-swap, but the index now lacks
//! the box's commit under a HEAD that has it, and the host's next commit takes the box's work
//! back. seamfs cannot stop a host git from writing its index, so for [`WATCH_FOR`] after each
//! install one thread looks for exactly that write-back: an index whose entries are the
//! pre-heal index's while HEAD is still the box's commit. It heals that index again and leaves
//! it as a proposal on those very bytes, which seamd installs under `index.lock` only while the
//! index and HEAD are still what it was healed from.

use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tracing::{debug, info, warn};

use crate::gitdata::{cpath, read_lower, GitDirRef, HeadOid};
use crate::heal::{entries_digest, heal_owned, HealOptions, HealOutcome};
use crate::index::names::SHARED_INDEX;
use crate::lower::Lower;

/// How long after an install a write-back is looked for: a host git's read of the index and
/// its lock are milliseconds apart, more on a large index (its preload).
pub const WATCH_FOR: Duration = Duration::from_secs(2);
/// How often the watched index is looked at (a refresh and a stat through the share, on this
/// thread: the box's git does not wait for it).
const EVERY: Duration = Duration::from_millis(100);

/// One installed heal being watched.
pub(crate) struct Watch {
    pub lower: Lower,
    pub gitdir: PathBuf,
    pub objects: PathBuf,
    pub old: String,
    pub new: String,
    /// The entries of the shared index the heal was made from (`heal::entries_digest`).
    pub pre: gix::ObjectId,
    /// The installed index's inode, size and mtime: a change is a new write.
    pub seen: (u64, i64, i64, i64),
}

/// The stat fields that tell one write of a file from another.
// The casts are for libc's other stat layouts (32-bit fields elsewhere).
#[allow(clippy::unnecessary_cast)]
pub(crate) fn identity(st: &libc::stat) -> (u64, i64, i64, i64) {
    (st.st_ino as u64, st.st_size as i64, st.st_mtime as i64, st.st_mtime_nsec as i64)
}

static QUEUE: OnceLock<Mutex<mpsc::Sender<Watch>>> = OnceLock::new();

/// Watches `w` for [`WATCH_FOR`], on the one watcher thread (started on first use).
pub(crate) fn watch(w: Watch) {
    let q = QUEUE.get_or_init(|| {
        let (tx, rx) = mpsc::channel();
        if let Err(e) = crate::signals::spawn_blocked("seam-heal-watch", move || run(rx)) {
            warn!(error = %e, "could not start the heal watcher: a host git writing back the index it read before a heal is not caught");
        }
        Mutex::new(tx)
    });
    let _ = q.lock().send(w);
}

fn run(rx: mpsc::Receiver<Watch>) {
    let mut watched: Vec<(Watch, Instant)> = Vec::new();
    loop {
        let next = if watched.is_empty() { rx.recv().ok() } else { rx.recv_timeout(EVERY).ok() };
        if let Some(w) = next {
            // A later heal of the same git dir supersedes the earlier one's watch.
            watched.retain(|(o, _)| o.gitdir != w.gitdir);
            watched.push((w, Instant::now() + WATCH_FOR));
            continue;
        }
        let now = Instant::now();
        watched.retain_mut(|(w, until)| now < *until && !look(w));
    }
}

/// One look; true when the watch is done (the write-back was found and proposed).
fn look(w: &mut Watch) -> bool {
    let index = w.gitdir.join(SHARED_INDEX);
    let c = cpath(&index);
    w.lower.refresh(&c);
    let Ok(st) = w.lower.stat(&c) else { return false };
    if identity(&st) == w.seen {
        return false;
    }
    w.seen = identity(&st);
    let Some(current) = read_lower(&w.lower, &index).ok().flatten() else { return false };
    let kind = super::heal_seal::hash_kind(&w.new);
    if entries_digest(&current, kind) != Some(w.pre) {
        // The host's own staging on top of the healed index: nothing to do, keep watching.
        debug!(gitdir = %w.gitdir.display(), "shared index rewritten after a heal, not with the pre-heal entries");
        return false;
    }
    match GitDirRef::open(&w.lower, w.gitdir.clone()).head_oid() {
        Ok(HeadOid::At(h)) if h == w.new => {}
        _ => return true,
    }
    let mtime = std::time::UNIX_EPOCH + Duration::new(st.st_mtime.max(0) as u64, st.st_mtime_nsec.clamp(0, 999_999_999) as u32);
    let opts = HealOptions { index_mtime: Some(mtime), hints: &[] };
    match heal_owned(&w.objects, current.clone(), &w.old, &w.new, opts) {
        Ok(HealOutcome::Healed { bytes, kind: heal_kind }) => {
            info!(gitdir = %w.gitdir.display(), head = %w.new, "a host git wrote back the index it read before the box's heal: the heal is left again as a proposal for seamd");
            super::heal_seal::propose_on(&w.lower, &w.gitdir, &current, &w.new, &bytes, heal_kind);
        }
        Ok(other) => debug!(gitdir = %w.gitdir.display(), outcome = ?other, "pre-heal entries written back, but healing them again changes nothing"),
        Err(e) => warn!(gitdir = %w.gitdir.display(), error = %e, "pre-heal entries written back, and healing them again failed"),
    }
    true
}
