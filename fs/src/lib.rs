//! seamfs: a FUSE overlay that makes a git checkout safe to share between two kernels.
//!
//! A box (VM) sees the host's checkout over virtiofs or 9p, whose guest cache serves names the
//! host replaced as old or missing. seamfs sits on that share in the box and applies one policy
//! per kind of path (see [`policy`]): the work tree and objects pass through with caching,
//! refs, HEAD, config and operation state always read fresh from the lower.
//!
//! Layers, bottom up:
//! - [`lower`]: the lower directory, reached only through a directory fd, never following links.
//! - [`inode`], [`handles`]: nodes by path (no fd per inode), fds only while open.
//! - [`policy`], [`layer`]: the path-policy table and the trait a layer implements.
//! - [`core`]: every FUSE operation as a plain function returning `Result<_, Errno>`.
//! - [`heal`]: the heal of a stale index after the other side's commit, and its proposals.
//! - [`filesystem`]: the thin `fuser::Filesystem` glue.
//! - [`mount`], [`daemon`], [`signals`]: mounting, serving, unmounting, daemonising.
//! - [`mountinfo`], [`status`], [`users`]: what is mounted where, who serves it, who uses it.
//!
//! # Limitations
//! - Git dirs are recognised by name (`.git`, `worktrees/<n>`, `modules/<n>`); bare repositories
//!   elsewhere on the mount are treated as work tree.
//! - Permission checks are the kernel's (`default_permissions`); new nodes are created by the
//!   daemon and then given to the caller, so for an instant they are root's.
#![deny(missing_docs)]

pub mod attr;
pub mod config;
pub mod core;
pub mod daemon;
pub mod feed;
pub mod filesystem;
pub mod gitdata;
pub mod handles;
pub mod heal;
pub mod index;
pub mod inode;
pub mod judge;
pub mod layer;
pub mod lower;
mod lower_at;
pub mod lower_cache;
pub mod lower_read;
pub mod lower_path;
pub mod lower_view;
pub mod mount;
pub mod mountinfo;
pub mod options;
pub mod policy;
pub mod recent_refresh;
pub mod refresh_scope;
pub mod report;
pub mod doctor;
pub mod signals;
pub mod status;
pub mod users;

/// Initialises logging from `SEAMFS_LOG` (an `EnvFilter`, default `info`) to stderr.
pub fn init_logging(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SEAMFS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // A span's creation is logged, so `SEAMFS_LOG=debug` shows every FUSE operation (each has a
    // debug span), not only those that log something inside.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::NEW)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}
