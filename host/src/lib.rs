//! seamd: the host side of seamfs.
//!
//! When the box's sealed heal cannot take the shared `index.lock` in time, it leaves a proposal
//! (`index.seam-proposed.<head>.<base>.<ff|carry>`) beside the index; `seamd run` installs it
//! under `index.lock`, only while the index is still `<base>` and HEAD still `<head>`, and puts
//! the old index back if HEAD moved during the install. `seamd doctor` reports what a human
//! should look at.
//!
//! seamd starts no process (never git: the checkout's config is the box's to write, and
//! `core.fsmonitor` or a filter would run its code) and follows no link: every file is reached
//! through `seamfs::lower::Lower` rooted at the checkout (`openat2` with `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS`, or the portable one-name-at-a-time resolver meant for macOS hosts,
//! feature `portable-resolver`), refs are read as data, worktree git dirs are reached by name.
//!
//! - [`gitdirs`]: the checkout and its git dirs.
//! - [`fsx`]: bounded no-link reads, listings, the lock file.
//! - [`install`]: one proposal's install.
//! - [`run`]: passes over all git dirs.
//! - [`doctor`]: the report.
//! - [`error`]: errors naming operation and path.
//! - [`quote`]: box-chosen names made safe to print (shell words, one-line messages).
//!
//! # Limitations
//! - Builds for macOS (seamfs without its `fuse` feature, ADR 0023; checked for
//!   `x86_64-apple-darwin` in CI when the target is installed) but is tested on Linux only,
//!   where the `portable-resolver` feature runs the whole suite on macOS's path resolution.
//!   vsock feeds are Linux-only.
//! - Submodule git dirs (`.git/modules/<n>`) are not served.
//! - A reftable repository's HEAD never resolves as data: its proposals are pruned as stale.
#![deny(missing_docs)]

pub mod doctor;
pub mod error;
pub mod feed;
pub mod fsx;
pub mod gitdirs;
pub mod install;
pub mod quote;
pub mod run;
