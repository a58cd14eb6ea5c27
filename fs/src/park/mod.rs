//! Parking: before a box process destroys a work-tree file whose bytes are in no object
//! (modified and uncommitted, or untracked and not ignored), seamfs keeps them as a blob and
//! logs them on `refs/seam/parked` (ADR 0029). Nothing here is in the passthrough core: the
//! core calls [`Core::park_before`](crate::core::Core) once per destructive op.
//!
//! - [`manifest`]: the log's line format and the path check every reader applies.
//! - [`objects`]: loose objects and the park ref, written through the lower.
//! - [`log`]: one commit per burst; reading and pruning the chain.
//! - [`restore`]: what `seamfs parked` and `seamd parked` do (built without `fuse`, for seamd).
//! - daemon only (`fuse`): `repo`, `ignore`, `tracked` (is it worth parking), `keep` (the
//!   parker and its committing thread), `hook` (the core's entry points).

use std::time::Duration;

pub mod cli;
pub mod log;
pub mod manifest;
pub mod objects;
pub mod restore;

#[cfg(feature = "fuse")]
mod cache;
#[cfg(feature = "fuse")]
mod hook;
#[cfg(feature = "fuse")]
mod ignore;
#[cfg(feature = "fuse")]
pub mod keep;
#[cfg(feature = "fuse")]
mod repo;
#[cfg(feature = "fuse")]
mod tracked;

pub use manifest::Op;

/// Bounds of parking.
#[derive(Debug, Clone)]
pub struct ParkConfig {
    /// Files larger than this are logged, not parked. Default 16 MiB.
    pub max_size: u64,
    /// Parks past this many in one burst are logged, not read. Default 10,000.
    pub burst_cap: usize,
    /// Bytes past this many in one burst are logged, not read. Default 1 GiB.
    pub burst_bytes: u64,
    /// A burst ends after this long without a park (then it is committed). Default 1 s.
    pub quiet: Duration,
    /// A burst is committed at the latest this long after it began. Default 5 s.
    pub max_burst: Duration,
    /// Park commits older than this are dropped (at most hourly, after a commit). Default 14 days.
    pub retention: Duration,
}

impl Default for ParkConfig {
    fn default() -> Self {
        ParkConfig { max_size: 16 << 20, burst_cap: 10_000, burst_bytes: 1 << 30, quiet: Duration::from_secs(1), max_burst: Duration::from_secs(5), retention: restore::RETENTION }
    }
}
