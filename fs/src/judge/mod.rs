//! Git's cross-kernel protocols made sound: lock owners, ref moves judged under git's own lock,
//! operations in progress.
//!
//! - [`procs`]: which box process is which (pid plus start time, so a reused pid is not taken
//!   for the process that held a lock).
//! - [`locks`]: who created each lock file; a dead box owner's lock is removed.
//! - [`index_exclusion`]: the shared `index.lock`, held for a box process while it rewrites the
//!   work tree, so a host commit never scans a file between its unlink and its re-create.
//! - [`heal_locks`]: the shared `index.lock` taken for a box ref transaction before its first
//!   ref lock, in git's lock order, for the sealed heal at its rename.
//! - [`tracker`]: what each box process saw when it started (HEAD, the branch, refs it touched,
//!   operation state) and what it last read of `config` and `packed-refs`.
//! - [`verdict`]: the pure decision for a rename of `<name>.lock` onto `<name>`.
//!
//! Only [`verdict`] is shared with seamd (its list of operation-state names); the rest reads
//! box processes from `/proc` and lives in the mount (feature `fuse`).

#[cfg(feature = "fuse")]
pub mod heal_locks;
#[cfg(feature = "fuse")]
pub mod index_exclusion;
#[cfg(feature = "fuse")]
pub mod locks;
#[cfg(feature = "fuse")]
pub mod procs;
#[cfg(feature = "fuse")]
pub mod tracker;
pub mod verdict;

/// The shared state the judging needs, kept beside the core and used by its reaper thread.
#[cfg(feature = "fuse")]
#[derive(Debug, Default)]
pub struct Judge {
    /// What each box process saw.
    pub tracker: tracker::Tracker,
    /// Box-held locks.
    pub locks: locks::Locks,
    /// Shared index locks held for box processes rewriting the work tree.
    pub index_exclusion: index_exclusion::IndexExclusion,
    /// Shared index locks taken before box ref locks, for the heal.
    pub heal_locks: heal_locks::HealLocks,
    /// Reports already made (a refusal is logged once, quietly after that).
    reported: dashmap::DashMap<String, ()>,
}

#[cfg(feature = "fuse")]
impl Judge {
    /// True the first time `key` is reported.
    pub fn first_time(&self, key: String) -> bool {
        self.reported.insert(key, ()).is_none()
    }
}
