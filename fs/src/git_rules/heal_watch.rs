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
/// The first look at the watched index comes this long after the install, and the gap between
/// looks doubles up to [`LONGEST_GAP`] (a refresh and a stat through the share each, on this
/// thread: the box's git does not wait for it). A host git's read and lock are usually close,
/// so a write-back comes early and is caught early; six looks instead of twenty cost the guest
/// fewer share round trips per box commit (ADR 0051 amended).
const FIRST: Duration = Duration::from_millis(100);
/// The longest gap between two looks.
const LONGEST_GAP: Duration = Duration::from_millis(400);

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

/// When a watch looks: [`FIRST`] after the install, then with the gap doubling up to
/// [`LONGEST_GAP`], until [`WATCH_FOR`] has passed.
#[derive(Debug)]
struct Schedule {
    until: Instant,
    next: Instant,
    gap: Duration,
}

/// What a watch does at a tick.
#[derive(Debug, PartialEq, Eq)]
enum Due {
    Over,
    Wait,
    Look,
}

impl Schedule {
    fn new(now: Instant) -> Schedule {
        Schedule { until: now + WATCH_FOR, next: now + FIRST, gap: FIRST }
    }

    fn due(&self, now: Instant) -> Due {
        if now >= self.until {
            Due::Over
        } else if now < self.next {
            Due::Wait
        } else {
            Due::Look
        }
    }

    /// After a look at `now`: the next comes a doubled gap later.
    fn looked(&mut self, now: Instant) {
        self.gap = (self.gap * 2).min(LONGEST_GAP);
        self.next = now + self.gap;
    }
}

/// A watch with its schedule.
struct Watched {
    w: Watch,
    when: Schedule,
}

impl Watched {
    /// Looks if its time has come; false when the watch is over.
    fn tick(&mut self, now: Instant) -> bool {
        match self.when.due(now) {
            Due::Over => false,
            Due::Wait => true,
            Due::Look if look(&mut self.w) => false,
            Due::Look => {
                self.when.looked(now);
                true
            }
        }
    }
}

fn run(rx: mpsc::Receiver<Watch>) {
    let mut watched: Vec<Watched> = Vec::new();
    loop {
        let next = match watched.iter().map(|x| x.when.next).min() {
            None => rx.recv().ok(),
            Some(at) => rx.recv_timeout(at.saturating_duration_since(Instant::now())).ok(),
        };
        if let Some(w) = next {
            // A later heal of the same git dir supersedes the earlier one's watch.
            watched.retain(|o| o.w.gitdir != w.gitdir);
            watched.push(Watched { w, when: Schedule::new(Instant::now()) });
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
        let mut s = Schedule::new(t0);
        let mut looks = Vec::new();
        for ms in 0..=3000u64 {
            let now = t0 + Duration::from_millis(ms);
            match s.due(now) {
                Due::Over => break,
                Due::Wait => {}
                Due::Look => {
                    looks.push(ms);
                    s.looked(now);
                }
            }
        }
        assert_eq!(looks, [100, 300, 700, 1100, 1500, 1900]);
    }
}
