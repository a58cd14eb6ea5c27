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
//! Feature `fuse` (default) builds the overlay. Without it (`default-features = false`, as
//! seamd depends on it) only what both sides share is built, and it builds on macOS: the lower
//! (the portable resolver there), bounded reads, the heal, index validation, the feed's
//! address and protocol, the verdict's names and the report format (ADR 0023).
//!
//! # Limitations
//! - Git dirs are recognised by name (`.git`, `worktrees/<n>`, `modules/<n>`); bare repositories
//!   elsewhere on the mount are treated as work tree.
//! - Permission checks are the kernel's (`default_permissions`); new nodes are created by the
//!   daemon and then given to the caller, so for an instant they are root's.
#![deny(missing_docs)]

// Shared with seamd, and built on every host (macOS too): the lower, reads of the other
// side's bytes, the heal rule, index checks, the feed's wire format, the verdict, the report.
pub mod box_id;
pub mod feed;
pub mod gitdata;
pub mod heal;
pub mod index;
pub mod judge;
pub mod lower;
pub mod lower_changes;
mod lower_at;
mod lower_dirs;
mod lower_os;
pub mod lower_cache;
pub mod lower_read;
pub mod lower_recent_read;
pub mod lower_view;
pub mod object_db;
pub mod park;
pub mod policy;
#[cfg(target_os = "linux")]
pub mod mountinfo;
pub mod recent_refresh;
pub mod refresh_scope;
pub mod report;
mod short_read;

#[cfg(all(feature = "fuse", not(target_os = "linux")))]
compile_error!("seamfs's overlay (feature `fuse`) is Linux-only; seamd builds without it (ADR 0023)");

/// Declares the overlay's modules: built with feature `fuse` only (ADR 0023).
macro_rules! overlay_modules {
    ($($m:ident),* $(,)?) => { $( #[cfg(feature = "fuse")] pub mod $m; )* };
}

// The overlay (feature `fuse`, Linux): fuser's glue, the core, the mount and the daemon.
overlay_modules!(
    attr, config, core, daemon, doctor, filesystem, handles, inode, layer, lower_path, mount, options, signals,
    status, users,
);
#[cfg(feature = "fuse")]
mod git_rules;

/// Initialises logging from `SEAMFS_LOG` (an `EnvFilter`, default `info`) to stderr.
pub fn init_logging(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SEAMFS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // A span's creation is logged, so `SEAMFS_LOG=debug` shows every FUSE operation (each has a
    // debug span), not only those that log something inside.
    // `SEAMFS_LOG_SPANS=close` logs each span's close with its busy and idle time instead: where
    // a command's time goes, request by request.
    use tracing_subscriber::fmt::format::FmtSpan;
    let spans = match std::env::var("SEAMFS_LOG_SPANS").as_deref() {
        Ok("close") => FmtSpan::CLOSE,
        _ => FmtSpan::NEW,
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(spans)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}
