//! The host change feed (issue #11): seamd watches the checkout and streams the names that
//! changed; seamfs refreshes exactly those names and tells the box kernel, so host edits show at
//! once, box watchers fire, and the work tree can stay cached until something really changes.
//!
//! Correctness never rests on the feed: live refs, locks, the index and the judge read the
//! share as without it. A feed that stalls, drops or overflows puts the work tree back on the
//! share's TTLs at once, everything cached on its word invalidated (ADR 0021).

pub mod addr;
pub mod consume;
pub mod lines;
pub mod proto;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

pub use addr::FeedAddr;

/// How long the kernel may keep work-tree entries and attributes while the feed is live.
pub const FEED_TTL: Duration = Duration::from_secs(60);

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

fn mark_poker() {
    // SAFETY: gettid has no failure mode.
    let tid = unsafe { libc::gettid() } as u32;
    POKER.store(tid, Ordering::Relaxed);
}
