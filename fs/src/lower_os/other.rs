//! macOS (and other non-Linux hosts): open(2)'s own flag set, no `O_DIRECT` (no lower there
//! keeps a guest cache, `crate::lower_cache`), and `renameatx_np` for rename with flags.

use std::ffi::CStr;
use std::io;
use std::os::fd::RawFd;

/// The caller's open flags as this host's `openat` takes them, never following a final symlink.
pub(crate) fn open_flags(flags: i32) -> i32 {
    (flags & super::COMMON_OPEN_FLAGS) | libc::O_CLOEXEC | libc::O_NOFOLLOW
}

/// Unchanged: only a Linux guest's 9p `cache=loose` lower needs reads past its cache, and
/// `crate::lower_cache::of_lower` never finds one here.
pub(crate) fn fresh_flags(flags: i32) -> i32 {
    flags
}

/// Nothing is read from `link("/", name)`'s error here: no Linux guest kernel is below, and
/// the order of this host's checks is not relied on.
pub(crate) fn seen_by_link(_errno: i32) -> crate::lower::Seen {
    crate::lower::Seen::Unknown
}

/// Rename with Linux's flags, kept in meaning: RENAME_NOREPLACE is `RENAME_EXCL` (EEXIST when
/// the target exists), RENAME_EXCHANGE is `RENAME_SWAP`; any other flag is EINVAL, as Linux
/// answers one it does not know.
#[cfg(target_os = "macos")]
pub(crate) fn rename_with_flags(from: RawFd, old: &CStr, to: RawFd, new: &CStr, flags: u32) -> io::Result<()> {
    // Linux's values: `Lower::rename` takes the same flags on every host.
    const RENAME_NOREPLACE: u32 = 1;
    const RENAME_EXCHANGE: u32 = 2;
    if flags & !(RENAME_NOREPLACE | RENAME_EXCHANGE) != 0 || flags == RENAME_NOREPLACE | RENAME_EXCHANGE {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let mut mac = 0;
    if flags & RENAME_NOREPLACE != 0 {
        mac |= libc::RENAME_EXCL;
    }
    if flags & RENAME_EXCHANGE != 0 {
        mac |= libc::RENAME_SWAP;
    }
    // SAFETY: valid fds and C strings.
    if unsafe { libc::renameatx_np(from, old.as_ptr(), to, new.as_ptr(), mac) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// No rename with flags on this host: said, never done as a plain rename that could replace.
#[cfg(not(target_os = "macos"))]
pub(crate) fn rename_with_flags(_: RawFd, old: &CStr, _: RawFd, new: &CStr, flags: u32) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        format!("rename {} to {} with flags {flags:#x}: not available on this host", old.to_string_lossy(), new.to_string_lossy()),
    ))
}
