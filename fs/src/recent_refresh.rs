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
use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;

use crate::lower::Seen;

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

/// The memo: per pid, the names refreshed, when, under which lock epoch, and what the refresh
/// learned. Kept per pid so a hit (most of git's lookups) finds its name by comparison, without
/// allocating a key.
#[derive(Debug)]
pub struct RecentRefresh {
    seen: DashMap<u32, Vec<Refreshed>>,
    epoch: AtomicU64,
    window: Duration,
}

/// One name's last refresh for one process.
#[derive(Debug)]
struct Refreshed {
    path: CString,
    when: Instant,
    epoch: u64,
    /// What it learned, and the lower's name generation read before it (ADR 0037).
    learned: (Seen, u64),
    /// The size the server gave the file while this refresh stands, and the lower's cached stat
    /// it went with ([`SizeKey`]): on a lower that never revalidates (9p `cache=loose`) the size
    /// costs an `O_DIRECT` read, which the process's next look a moment later is spared too.
    sized: Option<(SizeKey, i64)>,
    /// The bytes the server gave the file while this refresh stands, under the same key: the
    /// process's next read of it a moment later is served from them (ADR 0046).
    read: Option<(SizeKey, Arc<[u8]>)>,
}

/// What the lower's own cached stat of a file said when the server sized it: inode, change
/// time and cached size. A write through this lower changes them, so the process that wrote
/// never reads back the size from before its write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeKey {
    /// The lower's inode number.
    pub ino: u64,
    /// Its change time (seconds, nanoseconds).
    pub ctime: (i64, i64),
    /// The size the lower's cache gives it.
    pub cached_size: i64,
}

impl SizeKey {
    /// The key of a stat of the lower.
    pub fn of(st: &libc::stat) -> SizeKey {
        SizeKey { ino: st.st_ino, ctime: (st.st_ctime, st.st_ctime_nsec), cached_size: st.st_size }
    }
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
        self.recall(pid, path).is_none()
    }

    /// None when `pid`'s lookup of `path` must refresh the lower first (recorded as made, its
    /// answer unknown until [`RecentRefresh::learned`]); else what the refresh that stands in
    /// learned, with the name generation read before it.
    pub fn recall(&self, pid: u32, path: &CStr) -> Option<(Seen, u64)> {
        self.recall_kept(pid, path, || false)
    }

    /// [`RecentRefresh::recall`]; a refresh that found the name present stands through a box
    /// lock create too when `across_locks` says so (a directory git never removes: ADR 0052),
    /// asked only then.
    pub fn recall_kept(&self, pid: u32, path: &CStr, across_locks: impl FnOnce() -> bool) -> Option<(Seen, u64)> {
        if pid == 0 {
            return None;
        }
        let now = Instant::now();
        let epoch = self.epoch.load(Ordering::Acquire);
        let within = |r: &Refreshed| now.duration_since(r.when) < self.window;
        let before_a_lock = |r: &Refreshed| within(r) && r.epoch != epoch && r.learned.0 == Seen::Present;
        let found_before_a_lock = self.seen.get(&pid).is_some_and(|names| names.iter().any(|r| r.path.as_c_str() == path && before_a_lock(r)));
        // Asked outside the memo's lock: it may look at the lower.
        let kept = found_before_a_lock && across_locks();
        if self.seen.len() >= MAX_PIDS && !self.seen.contains_key(&pid) {
            self.seen.clear();
        }
        let mut names = self.seen.entry(pid).or_default();
        match names.iter_mut().find(|r| r.path.as_c_str() == path) {
            Some(r) if within(r) && r.epoch == epoch => Some(r.learned),
            // Kept through the lock: it stands under this one, so the next look needs no asking.
            Some(r) if kept && before_a_lock(r) => {
                r.epoch = epoch;
                Some(r.learned)
            }
            Some(r) => {
                (r.when, r.epoch, r.learned, r.sized, r.read) = (now, epoch, (Seen::Unknown, 0), None, None);
                None
            }
            None => {
                if names.len() >= MAX_NAMES {
                    names.clear();
                }
                names.push(Refreshed { path: path.to_owned(), when: now, epoch, learned: (Seen::Unknown, 0), sized: None, read: None });
                None
            }
        }
    }

    /// What `pid`'s refresh of `path` (recorded by [`RecentRefresh::recall`]) found.
    pub fn learned(&self, pid: u32, path: &CStr, seen: Seen, generation: u64) {
        self.with_entry(pid, path, |r| r.learned = (seen, generation));
    }

    /// Runs `f` on `pid`'s entry for `path`, if there is one.
    fn with_entry(&self, pid: u32, path: &CStr, f: impl FnOnce(&mut Refreshed)) {
        if let Some(mut names) = self.seen.get_mut(&pid) {
            if let Some(r) = names.iter_mut().find(|r| r.path.as_c_str() == path) {
                f(r);
            }
        }
    }

    /// `pid`'s entry for `path` while its refresh stands, seen through `f`.
    fn standing<T>(&self, pid: u32, path: &CStr, f: impl FnOnce(&Refreshed) -> Option<T>) -> Option<T> {
        let names = self.seen.get(&pid)?;
        let r = names.iter().find(|r| r.path.as_c_str() == path)?;
        if self.stands(r) {
            f(r)
        } else {
            None
        }
    }

    /// The size the server gave `path` for `pid` under the refresh that still stands, when the
    /// lower's cached stat is still `key`'s (nothing wrote the file through this lower since).
    pub fn server_size(&self, pid: u32, path: &CStr, key: SizeKey) -> Option<i64> {
        self.standing(pid, path, |r| r.sized.filter(|(k, _)| *k == key).map(|(_, size)| size))
    }

    /// True while `r`'s refresh stands: the same lock epoch, within the window.
    fn stands(&self, r: &Refreshed) -> bool {
        r.epoch == self.epoch.load(Ordering::Acquire) && r.when.elapsed() < self.window
    }

    /// The bytes the server gave `path` for `pid` under the refresh that still stands, when the
    /// lower's cached stat is still `key`'s.
    pub fn bytes(&self, pid: u32, path: &CStr, key: SizeKey) -> Option<Arc<[u8]>> {
        self.standing(pid, path, |r| r.read.as_ref().filter(|(k, _)| *k == key).map(|(_, b)| Arc::clone(b)))
    }

    /// The bytes the server gave `path` for `pid`, read under its refresh that still stands (not
    /// kept when none does: they would stand for a refresh made before them).
    /// Not for `packed-refs` and the like (`policy::bytes_stand_for_a_process`).
    pub fn note_bytes(&self, pid: u32, path: &CStr, key: SizeKey, bytes: &Arc<[u8]>) {
        if !crate::policy::bytes_stand_for_a_process(path) {
            return;
        }
        self.with_entry(pid, path, |r| {
            if self.stands(r) {
                r.read = Some((key, Arc::clone(bytes)));
            }
        });
    }

    /// A forced refresh of `path` for `pid`: its bytes read before stand for nothing.
    pub fn forget_bytes(&self, pid: u32, path: &CStr) {
        self.with_entry(pid, path, |r| r.read = None);
    }

    /// The size the server gave `path` for `pid`, under the refresh [`RecentRefresh::recall`]
    /// recorded; forgotten with it.
    pub fn note_server_size(&self, pid: u32, path: &CStr, key: SizeKey, size: i64) {
        self.with_entry(pid, path, |r| r.sized = Some((key, size)));
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
    fn a_directory_git_never_removes_stands_through_a_lock_when_it_was_found() {
        let r = RecentRefresh::default();
        assert!(r.recall_kept(7, c".git/refs", || true).is_none(), "the process's first lookup refreshes");
        r.learned(7, c".git/refs", Seen::Present, 0);
        r.barrier();
        assert_eq!(r.recall_kept(7, c".git/refs", || true), Some((Seen::Present, 0)), "kept through the lock");
        assert_eq!(r.recall_kept(7, c".git/refs", || false), Some((Seen::Present, 0)), "kept under this lock: not asked again");
        r.barrier();
        assert!(r.recall_kept(7, c".git/refs", || false).is_none(), "a name not kept refreshes again under a new lock");
        // Found missing: it may be made any moment, so a lock makes it refresh again.
        assert!(r.recall_kept(7, c".git/refs/remotes", || true).is_none());
        r.learned(7, c".git/refs/remotes", Seen::Missing, 0);
        r.barrier();
        assert!(r.recall_kept(7, c".git/refs/remotes", || true).is_none());
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
    fn a_server_size_stands_with_its_refresh_and_cached_stat() {
        let r = RecentRefresh::default();
        let key = SizeKey { ino: 5, ctime: (1, 2), cached_size: 41 };
        assert_eq!(r.recall(7, c".git/HEAD"), None);
        assert_eq!(r.server_size(7, c".git/HEAD", key), None, "not sized yet");
        r.note_server_size(7, c".git/HEAD", key, 21);
        assert_eq!(r.server_size(7, c".git/HEAD", key), Some(21));
        assert_eq!(r.server_size(8, c".git/HEAD", key), None, "another process sizes for itself");
        let written = SizeKey { ctime: (1, 3), ..key };
        assert_eq!(r.server_size(7, c".git/HEAD", written), None, "a write through the lower changed the cached stat");
        r.barrier();
        assert_eq!(r.server_size(7, c".git/HEAD", key), None, "a lock barrier forgets it");
        assert_eq!(r.recall(7, c".git/HEAD"), None, "the next look refreshes");
        assert_eq!(r.server_size(7, c".git/HEAD", key), None, "and sizes again");
    }

    #[test]
    fn bytes_stand_with_their_refresh_and_cached_stat() {
        let r = RecentRefresh::default();
        let key = SizeKey { ino: 5, ctime: (1, 2), cached_size: 41 };
        let b: Arc<[u8]> = Arc::from(&b"ref: refs/heads/main\n"[..]);
        r.note_bytes(7, c".git/HEAD", key, &b);
        assert_eq!(r.bytes(7, c".git/HEAD", key), None, "no refresh recorded: not kept");
        assert_eq!(r.recall(7, c".git/HEAD"), None);
        r.note_bytes(7, c".git/HEAD", key, &b);
        assert_eq!(r.bytes(7, c".git/HEAD", key).as_deref(), Some(&b[..]));
        assert_eq!(r.bytes(8, c".git/HEAD", key), None, "another process reads for itself");
        assert_eq!(r.bytes(7, c".git/HEAD", SizeKey { ino: 6, ..key }), None, "replaced through this lower");
        r.forget_bytes(7, c".git/HEAD");
        assert_eq!(r.bytes(7, c".git/HEAD", key), None, "a forced refresh forgets them");
        r.note_bytes(7, c".git/HEAD", key, &b);
        r.barrier();
        assert_eq!(r.bytes(7, c".git/HEAD", key), None, "a lock barrier forgets them");
        assert_eq!(r.recall(7, c".git/HEAD"), None);
        assert_eq!(r.bytes(7, c".git/HEAD", key), None, "the new refresh has read nothing yet");
    }

    #[test]
    fn a_server_size_ends_with_the_window() {
        let r = RecentRefresh::default();
        let key = SizeKey { ino: 5, ctime: (1, 2), cached_size: 41 };
        assert_eq!(r.recall(7, c".git/HEAD"), None);
        r.note_server_size(7, c".git/HEAD", key, 21);
        std::thread::sleep(MIN_WINDOW + Duration::from_millis(5));
        assert_eq!(r.server_size(7, c".git/HEAD", key), None);
    }

    #[test]
    fn a_spared_lookup_recalls_what_the_refresh_learned() {
        let r = RecentRefresh::default();
        assert_eq!(r.recall(7, c".git/MERGE_HEAD"), None, "the first look refreshes");
        r.learned(7, c".git/MERGE_HEAD", Seen::Missing, 3);
        assert_eq!(r.recall(7, c".git/MERGE_HEAD"), Some((Seen::Missing, 3)));
        r.barrier();
        assert_eq!(r.recall(7, c".git/MERGE_HEAD"), None, "a lock barrier forgets it");
        assert_eq!(r.recall(7, c".git/MERGE_HEAD"), Some((Seen::Unknown, 0)), "until the next refresh says, nothing is known");
    }

    #[test]
    fn unknown_callers_always_refresh() {
        let r = RecentRefresh::default();
        assert!(r.needs(0, c".git/HEAD"));
        assert!(r.needs(0, c".git/HEAD"));
    }
}
