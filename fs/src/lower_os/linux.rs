//! Linux: `openat2`'s flag set, `O_DIRECT` for a lower that never revalidates, `renameat2`,
//! `statx` from cached attributes, `/proc/self/fd` paths.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::RawFd;

/// The caller's open flags as `openat2` takes them, never following a final symlink.
pub(crate) fn open_flags(flags: i32) -> i32 {
    // openat2 refuses bits open(2) ignores, and FUSE passes kernel-internal ones (FMODE_EXEC).
    const VALID: i32 =
        super::COMMON_OPEN_FLAGS | libc::O_DIRECT | libc::O_NOATIME | libc::O_LARGEFILE | libc::O_PATH | libc::O_TMPFILE;
    let mut flags = (flags & VALID) | libc::O_CLOEXEC | libc::O_NOFOLLOW;
    if flags & libc::O_PATH != 0 {
        // O_PATH allows only a few companions.
        flags &= libc::O_PATH | libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_DIRECTORY;
    }
    flags
}

/// `flags` for an open that must reach the server of a lower whose cache never revalidates:
/// O_DIRECT on a plain read or an append of a file (`Lower::fresh_flags` says when).
pub(crate) fn fresh_flags(flags: i32) -> i32 {
    let file = flags & (libc::O_PATH | libc::O_DIRECTORY) == 0;
    let plain_read = flags & libc::O_ACCMODE == libc::O_RDONLY && flags & libc::O_CREAT == 0;
    let append = flags & libc::O_APPEND != 0;
    if file && (plain_read || append) {
        flags | libc::O_DIRECT
    } else {
        flags
    }
}

/// What `link("/", name)`'s error says of `name` on the server (`Lower::refresh`): the lookup
/// comes first, so EEXIST means present; EXDEV (another mount), EPERM (a directory cannot be
/// linked) and EROFS are only reached past a negative lookup, and ENOENT (the parent was
/// removed) leaves no name either.
pub(crate) fn seen_by_link(errno: i32) -> crate::lower::Seen {
    use crate::lower::Seen;
    match errno {
        libc::EEXIST => Seen::Present,
        libc::EXDEV | libc::EPERM | libc::EROFS | libc::ENOENT => Seen::Missing,
        _ => Seen::Unknown,
    }
}

/// `renameat2` with Linux's flags (RENAME_NOREPLACE, RENAME_EXCHANGE, RENAME_WHITEOUT).
pub(crate) fn rename_with_flags(from: RawFd, old: &CStr, to: RawFd, new: &CStr, flags: u32) -> io::Result<()> {
    // SAFETY: valid fds and C strings.
    let r = unsafe { libc::syscall(libc::SYS_renameat2, from, old.as_ptr(), to, new.as_ptr(), flags) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `statx` of `rel` under `dirfd` (`flags` as for statx; no symlink followed) from the kernel's
/// cached attributes (`AT_STATX_DONT_SYNC`): a FUSE lower is not asked for fresh ones.
pub fn statx_cached(dirfd: RawFd, rel: &CStr, flags: i32, mask: u32) -> io::Result<libc::statx> {
    // SAFETY: an all-zero statx is a valid out-buffer.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    let flags = flags | libc::AT_STATX_DONT_SYNC | libc::AT_SYMLINK_NOFOLLOW;
    // SAFETY: valid fd, C string and out-pointer.
    if unsafe { libc::statx(dirfd, rel.as_ptr(), flags, mask, &mut stx) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(stx)
}

/// Device and inode number from a `statx`.
pub(crate) fn identity_of(x: &libc::statx) -> (u64, u64) {
    (libc::makedev(x.stx_dev_major, x.stx_dev_minor), x.stx_ino)
}

/// The `/proc/self/fd/N` path of an fd, to reach what an O_PATH fd refers to.
pub fn proc_fd_path(fd: RawFd) -> CString {
    CString::new(format!("/proc/self/fd/{fd}")).expect("no NUL in a number")
}
