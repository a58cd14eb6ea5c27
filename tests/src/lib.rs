//! The end-to-end harness for seamfs: real FUSE mounts, the real git CLI, real syscalls.
//!
//! Every test mounts for itself, in its own temporary directories, so tests run in parallel.
//! On failure the guards print what is needed to understand it without re-running: the
//! mount's log, the directories involved and a listing, and for a failed command its
//! arguments, working directory, exit status, stdout and stderr.
//!
//! Modules:
//! - [`bins`]: where the binaries under test are (built by `cargo build` beforehand).
//! - [`tmp`]: unique temporary directories under /tmp.
//! - [`run`]: running a command and reporting it fully when it fails.
//! - [`git`]: the git CLI in a clean environment.
//! - [`fuse_trace`]: FUSE requests one mount's server is sent, counted by the kernel.
//! - [`mount`]: the [`mount::Mount`] guard (seamfs or the share emulator), unmounted on drop.
//! - [`procfs`]: mounts, daemon pids, open fds and limits, read from /proc.
//! - [`listing`]: recursive listings, for failure dumps and mode comparisons.
//! - [`sys`]: thin syscall wrappers returning the errno, for comparing the mount to its lower.
//! - [`strace`]: strace attached to a daemon, ended by its pid.
//!
//! # Limitations
//! - Linux only, run as root (mounts go through mount(2); ownership tests switch uid).
//! - The binaries are not built by the tests: run `cargo build` first.
#![deny(missing_docs)]

pub mod bins;
pub mod fuse_trace;
pub mod git;
pub mod listing;
pub mod mount;
pub mod procfs;
pub mod run;
pub mod strace;
pub mod sys;
pub mod tmp;

pub use git::Git;
pub use mount::Mount;
pub use tmp::TempDir;
