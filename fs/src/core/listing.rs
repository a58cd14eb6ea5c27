//! Directory listings kept for as long as the kernel may keep the entries themselves.
//!
//! A work-tree directory listed again within its class's entry TTL is served from the last
//! listing instead of the lower: the share's own cache is allowed to be that old, and every
//! change the box makes through seamfs drops the listing at once. Git's status lists every
//! directory on each run; without this, each listing costs the lower an open, a read and a close.
//!
//! The kernel keeps a copy too (`FOPEN_CACHE_DIR`): `kernel` remembers which listing it was
//! last told to fill its cache from, and an open may keep that cache only while a listing read
//! from the lower within the TTL has the same content (ADR 0010).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;

use crate::handles::Listing;

/// Listings by directory node.
#[derive(Debug, Default)]
pub(crate) struct Listings {
    map: DashMap<u64, (Instant, Arc<Listing>)>,
    /// Per directory: the tag of the listing the kernel's directory cache was last filled from.
    kernel: DashMap<u64, u32>,
    /// Per directory: when its lower entries were last refreshed in bulk, and lookups since.
    warmed: DashMap<u64, (Instant, u32)>,
    /// Sizes above which `map` and `warmed` are pruned next (0: `PRUNE_ABOVE`).
    prune_at: [AtomicUsize; 2],
}

/// A directory refreshed in bulk within this many TTLs is refreshed again on its first lookup.
const RESCAN: u32 = 30;

/// Above this many listings, stale ones are dropped when a new one is kept (and above twice as
/// many as were left by the last pruning, so a large tree does not prune on every listing).
const PRUNE_ABOVE: usize = 4096;

/// Drops the entries of `m` older than `keep`, when it has grown past its pruning threshold.
fn prune<V>(m: &DashMap<u64, (Instant, V)>, at: &AtomicUsize, keep: Duration) {
    if m.len() <= at.load(Ordering::Relaxed).max(PRUNE_ABOVE) {
        return;
    }
    m.retain(|_, (t, _)| t.elapsed() < keep);
    at.store(m.len() * 2, Ordering::Relaxed);
}

impl Listings {
    /// The listing of `dir` if it is younger than `ttl`.
    pub(crate) fn fresh(&self, dir: u64, ttl: Duration) -> Option<Arc<Listing>> {
        let e = self.map.get(&dir)?;
        (e.0.elapsed() < ttl).then(|| e.1.clone())
    }

    /// Keeps a listing just read from the lower.
    pub(crate) fn keep(&self, dir: u64, entries: Arc<Listing>, ttl: Duration) {
        prune(&self.map, &self.prune_at[0], ttl);
        prune(&self.warmed, &self.prune_at[1], ttl * RESCAN);
        self.map.insert(dir, (Instant::now(), entries));
    }

    /// A lookup in `dir`: true when the directory's lower entries should be refreshed in bulk
    /// now — the second lookup since its last bulk refresh expired (a burst, as in `git
    /// status`; a lone lookup costs no listing), or the first one when the directory was
    /// refreshed in bulk within the last `RESCAN` TTLs (it is being scanned again and again).
    pub(crate) fn should_warm(&self, dir: u64, ttl: Duration) -> bool {
        // Never refreshed: as if refreshed longer ago than the rescan window.
        let never = || Instant::now().checked_sub(ttl * (RESCAN + 1)).unwrap_or_else(Instant::now);
        let mut e = self.warmed.entry(dir).or_insert_with(|| (never(), 0));
        let since = e.0.elapsed();
        if since < ttl {
            return false;
        }
        e.1 += 1;
        if e.1 >= 2 || (e.1 == 1 && since < ttl * RESCAN) {
            *e = (Instant::now(), 0);
            return true;
        }
        false
    }

    /// An open of `dir` about to serve `listing` (read from the lower within the TTL): true
    /// when the kernel's cached copy is that same content and may be kept; otherwise the kernel
    /// drops its copy and refills it from `listing`, which is noted.
    pub(crate) fn kernel_may_keep(&self, dir: u64, listing: &Listing) -> bool {
        if self.kernel.insert(dir, listing.tag) == Some(listing.tag) {
            return true;
        }
        // Forgetting a tag only costs the kernel one refill: bound the map without bookkeeping.
        if self.kernel.len() > PRUNE_ABOVE * 4 {
            self.kernel.clear();
        }
        false
    }

    /// The box changed `dir`: its listing is stale, and so is the kernel's copy.
    pub(crate) fn forget(&self, dir: u64) {
        self.map.remove(&dir);
        self.kernel.remove(&dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts_warm_on_the_second_lookup_and_rescans_on_the_first() {
        let l = Listings::default();
        let ttl = Duration::from_millis(30);
        assert!(!l.should_warm(7, ttl), "a lone lookup lists nothing");
        assert!(l.should_warm(7, ttl), "the second one is a burst");
        assert!(!l.should_warm(7, ttl), "within the TTL the lower's entries are still fresh");
        std::thread::sleep(ttl + Duration::from_millis(5));
        assert!(l.should_warm(7, ttl), "refreshed a moment ago: scanned again, warm at once");
        assert!(!l.should_warm(8, ttl), "another directory starts over");
    }
}
