//! What the mount keeps of the feed: whether it is live, the feed thread's own pokes, and the
//! nodes the box changed lately (to tell a host edit from the echo of the box's own).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use dashmap::DashMap;

/// How long the kernel may keep work-tree entries and attributes while the feed is live. Long,
/// so a box tool coming back after a coffee break (`git status` after 60 s idle) finds the tree
/// still cached: the feed, not the clock, keeps these names fresh, and a feed that goes down or
/// loses messages invalidates every one of them at once (`consume::Consumer::invalidate_all`),
/// so the length of this TTL is never how long a stale read can last. Negative entries are not
/// given it (ADR 0021).
pub const FEED_TTL: Duration = Duration::from_secs(3600);

/// Whether the feed is live: the policy table reads it on every reply.
#[derive(Debug, Default)]
pub struct FeedLive(AtomicBool);

impl FeedLive {
    /// True while messages arrive.
    pub fn is_live(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    pub(crate) fn set(&self, on: bool) -> bool {
        self.0.swap(on, Ordering::AcqRel)
    }
}

/// The thread id of the feed thread: its `utimensat` through the mount raises the box's
/// watchers (IN_ATTRIB) and must not change the lower.
static POKER: AtomicU32 = AtomicU32::new(0);

/// True when a request comes from the feed's own poke (answer it without touching the lower).
pub fn is_poke(pid: u32) -> bool {
    pid != 0 && POKER.load(Ordering::Relaxed) == pid
}

pub(super) fn mark_poker() {
    // SAFETY: gettid has no failure mode.
    let tid = unsafe { libc::gettid() } as u32;
    POKER.store(tid, Ordering::Relaxed);
}

/// A message about a node the box itself changed this recently is taken for the echo of that
/// change (the host's watcher saw the box's write through the share): seamfs drops what the
/// kernel cached of it, but skips the share refresh and the watcher poke, which in a guest cost
/// round trips per file (a `git checkout` of 10,000 files would echo 10,000 times). A real host
/// edit in that window is then seen within the share's own TTL, never later.
pub const ECHO_WINDOW: Duration = Duration::from_secs(2);

/// Past this many remembered nodes the old ones are dropped.
const MAX_TOUCHED: usize = 65_536;

/// Nodes (and parent directories) the box changed, when; only kept while a feed is configured.
static TOUCHED: OnceLock<DashMap<u64, Instant>> = OnceLock::new();

/// A box operation by `pid` changed node `id` (a file's data or attributes, a directory's
/// names). The feed's own pokes are not the box's.
pub fn touch(pid: u32, id: u64) {
    let Some(t) = TOUCHED.get() else { return };
    if is_poke(pid) {
        return;
    }
    if t.len() >= MAX_TOUCHED {
        t.retain(|_, at| at.elapsed() < ECHO_WINDOW);
    }
    t.insert(id, Instant::now());
}

/// True when the box changed node `id` within [`ECHO_WINDOW`].
pub fn box_touched(id: u64) -> bool {
    TOUCHED.get().and_then(|t| t.get(&id).map(|at| at.elapsed() < ECHO_WINDOW)).unwrap_or(false)
}

/// Starts remembering what the box changes (only a process with a feed pays for it).
pub(super) fn track_touches() {
    let _ = TOUCHED.set(DashMap::new());
}
