//! Clearing set-user-ID and set-group-ID bits on writes, as the kernel asks with
//! `FUSE_HANDLE_KILLPRIV_V2`.
//!
//! Without it the kernel asks the filesystem for `security.capability` before every write (two
//! round trips through seamfs and the share) to decide itself. With it, seamfs clears the bits:
//! on a write the kernel flags (the writer lacks `CAP_FSETID`), and on a truncation or an
//! `O_TRUNC` open by a caller other than root (fuser does not pass the kernel's flag for those).
//! File capabilities need nothing: the lower's own write or truncation removes them.

use std::os::fd::{AsRawFd, RawFd};

use fuser::Errno;

use super::{cvt, Core};
use crate::layer::Layer;
use crate::lower::{proc_fd_path, statx_cached};

/// The mode without the bits a write by an unprivileged caller clears: set-user-ID, and
/// set-group-ID where group execute is set (otherwise it marks mandatory locking).
fn cleared(mode: u32) -> Option<u32> {
    let mut m = mode & 0o7777;
    m &= !libc::S_ISUID;
    if mode & libc::S_IXGRP != 0 {
        m &= !libc::S_ISGID;
    }
    (m != mode & 0o7777).then_some(m)
}

/// Clears the bits on the file behind `fd` (any fd, O_PATH included). The mode is read from
/// the lower kernel's cached attributes: a bit set by the host within the share's TTL may be
/// missed, as the share itself would show the old mode for that long.
fn clear_on(fd: RawFd) -> Result<(), Errno> {
    let stx = statx_cached(fd, c"", libc::AT_EMPTY_PATH, libc::STATX_MODE).map_err(Errno::from)?;
    let mode = u32::from(stx.stx_mode);
    if mode & libc::S_IFMT != libc::S_IFREG {
        return Ok(());
    }
    let Some(m) = cleared(mode) else { return Ok(()) };
    let path = proc_fd_path(fd);
    // SAFETY: valid C string.
    cvt(unsafe { libc::chmod(path.as_ptr(), m as libc::mode_t) })?;
    Ok(())
}

impl<L: Layer> Core<L> {
    /// Whether the kernel left clearing the bits to seamfs.
    pub fn kills_privs(&self) -> bool {
        self.killpriv_on.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Before a write the kernel flagged `FUSE_WRITE_KILL_SUIDGID`.
    pub fn kill_privs_of_handle(&self, fh: u64) -> Result<(), Errno> {
        let h = self.handles.file(fh)?;
        clear_on(self.file_fd(&h)?.as_raw_fd())
    }

    /// After an open: one with `O_TRUNC` by a caller other than root clears the bits.
    pub fn kill_privs_after_open(&self, uid: u32, o: &super::data::Opened) -> Result<(), Errno> {
        match &o.fd {
            Some(fd) if o.open_flags & libc::O_TRUNC != 0 => self.kill_privs_after_trunc(uid, fd.as_raw_fd()),
            _ => Ok(()),
        }
    }

    /// After a truncation or an `O_TRUNC` open by `uid`: non-root callers lose the bits.
    pub(crate) fn kill_privs_after_trunc(&self, uid: u32, fd: RawFd) -> Result<(), Errno> {
        if uid == 0 || !self.kills_privs() {
            return Ok(());
        }
        clear_on(fd)
    }
}

#[cfg(test)]
mod tests {
    use super::cleared;

    #[test]
    fn setuid_always_and_setgid_only_with_group_execute() {
        assert_eq!(cleared(0o4755), Some(0o755));
        assert_eq!(cleared(0o6755), Some(0o755));
        assert_eq!(cleared(0o2644), None, "setgid without group execute marks locking: kept");
        assert_eq!(cleared(0o6744), Some(0o2744));
        assert_eq!(cleared(0o755), None);
    }
}
