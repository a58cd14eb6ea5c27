//! Extended attributes, through `/proc/self/fd/N` of a verified O_PATH fd (as virtiofsd does:
//! the magic link reaches the node itself, a symlink included, and nothing else). One name is
//! virtual: `user.seamfs.verdict` (`verdict_xattr`)
//! and, on the mount root, `user.seamfs.status` (`status_xattr`).

use std::ffi::{CString, OsStr};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;

use fuser::Errno;

use super::fresh_files::CAPS;
use super::Core;
use crate::layer::Layer;
use crate::lower::proc_fd_path;

/// What a get/list call returns: the size asked about, or the bytes.
#[derive(Debug)]
pub enum XattrReply {
    /// Size only (the caller passed size 0).
    Size(u32),
    /// The value or name list.
    Data(Vec<u8>),
}

fn sized(n: isize, buf: Vec<u8>, size: u32) -> Result<XattrReply, Errno> {
    if n < 0 {
        return Err(Errno::from(std::io::Error::last_os_error()));
    }
    if size == 0 {
        return Ok(XattrReply::Size(n as u32));
    }
    let mut buf = buf;
    buf.truncate(n as usize);
    Ok(XattrReply::Data(buf))
}

/// A value computed here (not read from the lower), answered as getxattr(2) would.
fn answer(value: Vec<u8>, size: u32) -> Result<XattrReply, Errno> {
    match size {
        0 => Ok(XattrReply::Size(value.len() as u32)),
        s if (s as usize) < value.len() => Err(Errno::ERANGE),
        _ => Ok(XattrReply::Data(value)),
    }
}

fn cname(name: &OsStr) -> Result<CString, Errno> {
    CString::new(name.as_bytes()).map_err(|_| Errno::EINVAL)
}

impl<L: Layer> Core<L> {
    /// GETXATTR by request pid `pid` (`user.seamfs.verdict` is judged for its parent).
    pub fn getxattr(&self, id: u64, name: &OsStr, size: u32, pid: u32) -> Result<XattrReply, Errno> {
        if self.is_verdict_xattr(name) {
            return answer(self.verdict_xattr(id, pid)?, size);
        }
        if self.is_status_xattr(id, name) {
            return answer(self.status_xattr(), size);
        }
        let caps = name.as_bytes() == CAPS;
        if let Some(e) = caps.then(|| self.fresh_files.no_caps(id)).flatten() {
            return Err(e);
        }
        let fd = self.node_or_open_fd(id)?;
        let p = proc_fd_path(fd.as_raw_fd());
        let n = cname(name)?;
        let mut buf = vec![0u8; size as usize];
        // SAFETY: valid C strings and a buffer of `size` bytes (null when size is 0).
        let r = unsafe {
            libc::getxattr(p.as_ptr(), n.as_ptr(), if size == 0 { std::ptr::null_mut() } else { buf.as_mut_ptr().cast() }, size as usize)
        };
        let answer = sized(r, buf, size);
        if caps {
            self.fresh_files.learn(&answer);
        }
        answer
    }

    /// LISTXATTR.
    pub fn listxattr(&self, id: u64, size: u32) -> Result<XattrReply, Errno> {
        let fd = self.node_or_open_fd(id)?;
        let p = proc_fd_path(fd.as_raw_fd());
        let mut buf = vec![0u8; size as usize];
        // SAFETY: valid C string and a buffer of `size` bytes (null when size is 0).
        let r = unsafe {
            libc::listxattr(p.as_ptr(), if size == 0 { std::ptr::null_mut() } else { buf.as_mut_ptr().cast() }, size as usize)
        };
        sized(r, buf, size)
    }

    /// SETXATTR.
    pub fn setxattr(&self, id: u64, name: &OsStr, value: &[u8], flags: i32) -> Result<(), Errno> {
        if self.is_verdict_xattr(name) || self.is_status_xattr(id, name) {
            // Computed on every read: a stored value would be a stale answer.
            return Err(Errno::EPERM);
        }
        self.fresh_files.changed(id);
        let fd = self.node_or_open_fd(id)?;
        let p = proc_fd_path(fd.as_raw_fd());
        let n = cname(name)?;
        // SAFETY: valid C strings and value buffer.
        super::cvt(unsafe { libc::setxattr(p.as_ptr(), n.as_ptr(), value.as_ptr().cast(), value.len(), flags) }).map(drop)
    }

    /// REMOVEXATTR.
    pub fn removexattr(&self, id: u64, name: &OsStr) -> Result<(), Errno> {
        if self.is_verdict_xattr(name) || self.is_status_xattr(id, name) {
            return Err(Errno::EPERM);
        }
        self.fresh_files.changed(id);
        let fd = self.node_or_open_fd(id)?;
        let p = proc_fd_path(fd.as_raw_fd());
        let n = cname(name)?;
        // SAFETY: valid C strings.
        super::cvt(unsafe { libc::removexattr(p.as_ptr(), n.as_ptr()) }).map(drop)
    }
}
