//! The lower's calls whose flags differ by host kernel: which open flags pass, how a read is
//! made to reach the server, and `rename` with flags. Linux has `openat2`'s flag set,
//! `O_DIRECT` and `renameat2`; macOS has none of them and gets its own equivalents
//! (`renameatx_np`), so the shared crate builds there for seamd (ADR 0023).

/// Open flags every host's `openat` takes and the lower passes on; each host adds its own.
const COMMON_OPEN_FLAGS: i32 = libc::O_ACCMODE
    | libc::O_APPEND
    | libc::O_NONBLOCK
    | libc::O_DSYNC
    | libc::O_SYNC
    | libc::O_TRUNC
    | libc::O_DIRECTORY
    | libc::O_CREAT
    | libc::O_EXCL;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
// `pub`: `statx_cached` and `proc_fd_path` are re-exported by `crate::lower` for the mount.
pub use linux::*;

#[cfg(not(target_os = "linux"))]
mod other;
#[cfg(not(target_os = "linux"))]
pub(crate) use other::*;
