//! A moment's watch on the shared index after a sealed heal is installed (ADR 0051).
//!
//! `git commit` reads the index before it takes `index.lock`, and when its refresh changed a
//! stat entry it writes what it read back under the lock, unchecked (lab.md bug 9). A host
//! commit that read the index before a box commit's heal was installed, and locked after, puts
//! the pre-heal index back; its own commit fails git's compare-and-swap, but the index now lacks
//! the box's commit under a HEAD that has it, and the host's next commit takes the box's work
//! back. seamfs cannot stop a host git from writing its index, so for two seconds after each
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

/// When a watch looks, after the install: early first (a host git's read of the index and its
/// lock are usually milliseconds apart, so a write-back comes early), then every 400 ms until
/// two seconds have passed (more on a large index: its preload). Each look is a refresh and a
/// stat through the share on this thread; six looks instead of twenty cost the guest fewer
/// share round trips per box commit (ADR 0051 amended).
const LOOKS_AT_MS: [u64; 6] = [100, 300, 700, 1100, 1500, 1900];

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

/// Watches `w` for two seconds ([`LOOKS_AT_MS`]), on the one watcher thread (started on first use).
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

/// When the look after `made` looks is due, for a heal installed at `installed`; None after the
/// last.
fn look_due(installed: Instant, made: usize) -> Option<Instant> {
    LOOKS_AT_MS.get(made).map(|ms| installed + Duration::from_millis(*ms))
}

/// A watch with the install's time and the looks made.
struct Watched {
    w: Watch,
    installed: Instant,
    looks: usize,
}

impl Watched {
    /// When its next look is due; None once it has made them all.
    fn next(&self) -> Option<Instant> {
        look_due(self.installed, self.looks)
    }

    /// Looks if its time has come; false when the watch is over (all looks made, or the
    /// write-back found).
    fn tick(&mut self, now: Instant) -> bool {
        match self.next() {
            None => false,
            Some(at) if now < at => true,
            Some(_) => {
                self.looks += 1;
                !look(&mut self.w) && self.next().is_some()
            }
        }
    }
}

fn run(rx: mpsc::Receiver<Watch>) {
    let mut watched: Vec<Watched> = Vec::new();
    loop {
        let next = match watched.iter().filter_map(Watched::next).min() {
            None => rx.recv().ok(),
            Some(at) => rx.recv_timeout(at.saturating_duration_since(Instant::now())).ok(),
        };
        if let Some(w) = next {
            // A later heal of the same git dir supersedes the earlier one's watch.
            watched.retain(|o| o.w.gitdir != w.gitdir);
            watched.push(Watched { w, installed: Instant::now(), looks: 0 });
            continue;
        }
        let now = Instant::now();
        watched.retain_mut(|x| x.tick(now));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_looks_six_times_early_first_within_its_two_seconds() {
        let t0 = Instant::now();
        let looks: Vec<u64> = (0..).map_while(|n| look_due(t0, n)).map(|at| (at - t0).as_millis() as u64).collect();
        assert_eq!(looks, [100, 300, 700, 1100, 1500, 1900]);
        assert!(looks.windows(2).all(|w| w[0] < w[1] && w[1] - w[0] <= 400), "early first, then at most 400 ms apart");
        assert!(*looks.last().unwrap() < 2000, "every look within two seconds of the install");
    }
}
