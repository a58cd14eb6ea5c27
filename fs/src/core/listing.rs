//! Directory listings kept for as long as the kernel may keep the entries themselves.
//!
//! A work-tree directory listed again within its class's entry TTL is served from the last
//! listing instead of the lower: the share's own cache is allowed to be that old, and every
//! change the box makes through seamfs drops the listing at once. Git's status lists every
//! directory on each run; without this, each listing costs the lower an open, a read and a close.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;

use crate::handles::DirEntry;

/// Listings by directory node.
#[derive(Debug, Default)]
pub(crate) struct Listings {
    map: DashMap<u64, (Instant, Arc<Vec<DirEntry>>)>,
    /// Per directory: when its lower entries were last refreshed in bulk, and lookups since.
    warmed: DashMap<u64, (Instant, u32)>,
}

/// Above this many listings, stale ones are dropped when a new one is kept.
const PRUNE_ABOVE: usize = 4096;

impl Listings {
    /// The listing of `dir` if it is younger than `ttl`.
    pub(crate) fn fresh(&self, dir: u64, ttl: Duration) -> Option<Arc<Vec<DirEntry>>> {
        let e = self.map.get(&dir)?;
        (e.0.elapsed() < ttl).then(|| e.1.clone())
    }

    /// Keeps a listing just read from the lower.
    pub(crate) fn keep(&self, dir: u64, entries: Arc<Vec<DirEntry>>, ttl: Duration) {
        if self.map.len() > PRUNE_ABOVE {
            self.map.retain(|_, (at, _)| at.elapsed() < ttl);
        }
        if self.warmed.len() > PRUNE_ABOVE {
            self.warmed.retain(|_, (at, _)| at.elapsed() < ttl);
        }
        self.map.insert(dir, (Instant::now(), entries));
    }

    /// A lookup in `dir`: true when the directory's lower entries should be refreshed in bulk
    /// now — the second lookup since its last bulk refresh expired (a burst, as in `git
    /// status`; a lone lookup costs no listing).
    pub(crate) fn should_warm(&self, dir: u64, ttl: Duration) -> bool {
        let mut e = self.warmed.entry(dir).or_insert((Instant::now() - ttl - ttl, 0));
        if e.0.elapsed() < ttl {
            return false;
        }
        e.1 += 1;
        if e.1 >= 2 {
            *e = (Instant::now(), 0);
            return true;
        }
        false
    }

    /// The box changed `dir`: its listing is stale.
    pub(crate) fn forget(&self, dir: u64) {
        self.map.remove(&dir);
    }
}
