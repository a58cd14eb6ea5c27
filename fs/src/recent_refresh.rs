//! Live names a process had refreshed on the lower a moment ago (ADR 0020, 0033).
//!
//! Git stats `HEAD` forty times in one commit; each lookup used to cost the share a forced
//! revalidation (the link trick: one server round trip, a millisecond in a guest). A process
//! that looks the same name up again within the window is served from the lower's entry as that
//! refresh left it, so one git process sees the name as of its own last refresh: never older than
//! the window, never older than its previous read (no value goes back). Any lock a box process
//! creates is a barrier: every later lookup refreshes again, so what git reads under a lock (the
//! ref it is about to move, `packed-refs`, the index) is the share's current state.

use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dashmap::DashMap;

/// The shortest window a process's refresh of a name stands in for the next: ADR 0020's fixed
/// one. The window is the work-tree TTL within these bounds (ADR 0033: no older than the share's
/// own cache would show it); 50 ms is shorter than one git process in a guest.
pub const MIN_WINDOW: Duration = Duration::from_millis(50);
/// The longest window.
pub const MAX_WINDOW: Duration = Duration::from_secs(1);

/// Past this many remembered processes the memo starts over; past this many names of one
/// process (a walk of many tags or loose refs), that process's list does. A name forgotten is
/// only refreshed again.
const MAX_PIDS: usize = 64;
const MAX_NAMES: usize = 256;

/// The memo: per pid, the names refreshed, when, and under which lock epoch. Kept per pid so a
/// hit (most of git's lookups) finds its name by comparison, without allocating a key.
#[derive(Debug)]
pub struct RecentRefresh {
    seen: DashMap<u32, Vec<(CString, Instant, u64)>>,
    epoch: AtomicU64,
    window: Duration,
}

impl Default for RecentRefresh {
    fn default() -> Self {
        RecentRefresh::new(MIN_WINDOW)
    }
}

impl RecentRefresh {
    /// A memo whose refreshes stand for `window`, clamped to [`MIN_WINDOW`]..=[`MAX_WINDOW`].
    pub fn new(window: Duration) -> Self {
        RecentRefresh { seen: DashMap::new(), epoch: AtomicU64::new(0), window: window.clamp(MIN_WINDOW, MAX_WINDOW) }
    }

    /// How long one refresh stands for the same process's next.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// True when `pid`'s lookup of `path` must refresh the lower first; records that it will.
    /// Pid 0 (a caller seamfs cannot name) always refreshes.
    pub fn needs(&self, pid: u32, path: &CStr) -> bool {
        if pid == 0 {
            return true;
        }
        let now = Instant::now();
        let epoch = self.epoch.load(Ordering::Acquire);
        if self.seen.len() >= MAX_PIDS && !self.seen.contains_key(&pid) {
            self.seen.clear();
        }
        let mut names = self.seen.entry(pid).or_default();
        match names.iter_mut().find(|(p, _, _)| p.as_c_str() == path) {
            Some((_, when, e)) if *e == epoch && now.duration_since(*when) < self.window => false,
            Some(seen) => {
                (seen.1, seen.2) = (now, epoch);
                true
            }
            None => {
                if names.len() >= MAX_NAMES {
                    names.clear();
                }
                names.push((path.to_owned(), now, epoch));
                true
            }
        }
    }

    /// A box process creates a lock: every lookup from now on refreshes again.
    pub fn barrier(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lookup_by_the_same_process_is_spared() {
        let r = RecentRefresh::default();
        assert!(r.needs(7, c".git/HEAD"));
        assert!(!r.needs(7, c".git/HEAD"), "within the window: served from the refresh just made");
        assert!(r.needs(8, c".git/HEAD"), "another process refreshes for itself");
        assert!(r.needs(7, c".git/refs/heads/main"), "another name refreshes");
    }

    #[test]
    fn a_lock_is_a_barrier() {
        let r = RecentRefresh::default();
        assert!(r.needs(7, c".git/refs/heads/main"));
        r.barrier();
        assert!(r.needs(7, c".git/refs/heads/main"), "under a new lock the name is refreshed again");
        assert!(!r.needs(7, c".git/refs/heads/main"));
    }

    #[test]
    fn the_window_ends() {
        let r = RecentRefresh::default();
        assert!(r.needs(7, c".git/HEAD"));
        std::thread::sleep(MIN_WINDOW + Duration::from_millis(5));
        assert!(r.needs(7, c".git/HEAD"));
    }

    #[test]
    fn the_window_is_clamped() {
        assert_eq!(RecentRefresh::new(Duration::ZERO).window(), MIN_WINDOW, "ttl 0 keeps ADR 0020's window");
        assert_eq!(RecentRefresh::new(Duration::from_secs(60)).window(), MAX_WINDOW);
        let r = RecentRefresh::new(Duration::from_millis(300));
        assert!(r.needs(7, c".git/HEAD"));
        std::thread::sleep(Duration::from_millis(100));
        assert!(!r.needs(7, c".git/HEAD"), "within 300 ms the refresh still stands");
    }

    #[test]
    fn unknown_callers_always_refresh() {
        let r = RecentRefresh::default();
        assert!(r.needs(0, c".git/HEAD"));
        assert!(r.needs(0, c".git/HEAD"));
    }
}
