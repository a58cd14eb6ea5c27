//! The one way seamfs and seamd read bytes the other kernel wrote (HEAD, refs, packed-refs,
//! indexes, proposals): only from a regular file, and without ever blocking or opening a device.
//!
//! The name is first opened `O_PATH | O_NOFOLLOW` beneath the root with no symlink followed:
//! that runs no driver's `open` and cannot block on a FIFO. `fstat` of that fd decides; only a
//! regular file is then reopened for reading, through `/proc/self/fd/N` (the same inode, so a
//! swap of the name in between changes nothing), with `O_NONBLOCK`. Reads are size-bounded.
//! The portable resolver (macOS) has neither `O_PATH` nor `/proc`: there the name is `lstat`ed,
//! opened non-blocking and the fd `fstat`ed, and a file swapped in between is refused.

use std::ffi::CStr;
use std::fmt;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};

use crate::lower::{fstat, Lower};

/// Why a file was not read.
#[derive(Debug)]
pub enum ReadError {
    /// Not a regular file: its `st_mode` (a FIFO, device, socket, directory or symlink).
    NotRegular(libc::mode_t),
    /// Larger than the caller's bound: its size.
    TooLarge(u64),
    /// A system call failed.
    Io(io::Error),
}

/// A short phrase for a file type, for messages.
pub fn describe_mode(mode: libc::mode_t) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFREG => "a regular file",
        libc::S_IFDIR => "a directory",
        libc::S_IFLNK => "a symlink",
        libc::S_IFIFO => "a FIFO",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFSOCK => "a socket",
        _ => "a special file",
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::NotRegular(m) => write!(f, "{}, not a regular file", describe_mode(*m)),
            ReadError::TooLarge(n) => write!(f, "{n} bytes, over the bound"),
            ReadError::Io(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ReadError {}

impl From<ReadError> for io::Error {
    fn from(e: ReadError) -> io::Error {
        match e {
            ReadError::Io(e) => e,
            ReadError::NotRegular(_) => io::Error::new(io::ErrorKind::InvalidInput, e.to_string()),
            ReadError::TooLarge(_) => io::Error::new(io::ErrorKind::FileTooLarge, e.to_string()),
        }
    }
}

impl Lower {
    /// Opens `rel` for reading only if it is a regular file (see the module doc); its stat.
    /// A read-only open that must see the server gets `O_DIRECT` ([`Lower::fresh_flags`]).
    pub fn open_regular(&self, rel: &CStr) -> Result<(OwnedFd, libc::stat), ReadError> {
        #[cfg(target_os = "linux")]
        if !crate::lower::PORTABLE {
            return self.open_regular_o_path(rel);
        }
        self.open_regular_portable(rel)
    }

    /// `open_regular` with `O_PATH` and a reopen through `/proc/self/fd` (Linux's resolver).
    #[cfg(target_os = "linux")]
    fn open_regular_o_path(&self, rel: &CStr) -> Result<(OwnedFd, libc::stat), ReadError> {
        let (path, st) = self.regular_path(rel)?;
        Ok((self.reopen(&path)?, st))
    }

    /// `rel` opened `O_PATH` (no driver's `open` runs), and its stat: a regular file only.
    #[cfg(target_os = "linux")]
    fn regular_path(&self, rel: &CStr) -> Result<(OwnedFd, libc::stat), ReadError> {
        let path = self.open_at(rel, libc::O_PATH, 0).map_err(ReadError::Io)?;
        let st = fstat(path.as_raw_fd()).map_err(ReadError::Io)?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(ReadError::NotRegular(st.st_mode));
        }
        Ok((path, st))
    }

    /// The same inode as the `O_PATH` fd `path`, opened for reading through `/proc/self/fd`.
    #[cfg(target_os = "linux")]
    fn reopen(&self, path: &OwnedFd) -> Result<OwnedFd, ReadError> {
        use std::os::fd::FromRawFd;
        let flags = self.fresh_flags(libc::O_RDONLY) | libc::O_NONBLOCK | libc::O_CLOEXEC;
        // SAFETY: a valid C string; the fd is owned below.
        let fd = unsafe { libc::open(crate::lower::proc_fd_path(path.as_raw_fd()).as_ptr(), flags) };
        if fd < 0 {
            return Err(ReadError::Io(io::Error::last_os_error()));
        }
        // SAFETY: a fresh fd from open(2).
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// `open_regular` without `O_PATH` or `/proc` (macOS): `lstat` the name, refuse anything
    /// but a regular file, open it non-blocking, and `fstat` the fd: a name swapped for a FIFO
    /// or another file in between is refused, not read.
    fn open_regular_portable(&self, rel: &CStr) -> Result<(OwnedFd, libc::stat), ReadError> {
        let before = self.stat(rel).map_err(ReadError::Io)?;
        if before.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(ReadError::NotRegular(before.st_mode));
        }
        let flags = self.fresh_flags(libc::O_RDONLY) | libc::O_NONBLOCK;
        let fd = self.open_at(rel, flags, 0).map_err(ReadError::Io)?;
        let st = fstat(fd.as_raw_fd()).map_err(ReadError::Io)?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(ReadError::NotRegular(st.st_mode));
        }
        let (dev, ino) = crate::lower::dev_ino(&before);
        if !crate::lower::same_file(&st, dev, ino) {
            return Err(ReadError::Io(io::Error::other(format!("open {}: replaced while being opened", rel.to_string_lossy()))));
        }
        Ok((fd, st))
    }

    /// Reads the regular file `rel` whole, at most `max` bytes; None when absent.
    /// A small file read a moment ago whose stamps have not moved is not opened again
    /// (`crate::lower_recent_read`).
    pub fn read_regular(&self, rel: &CStr, max: u64) -> Result<Option<(Vec<u8>, libc::stat)>, ReadError> {
        #[cfg(target_os = "linux")]
        if !crate::lower::PORTABLE && self.stale_pages().is_none() {
            return self.read_regular_recalled(rel, max);
        }
        let (fd, st) = match self.open_regular(rel) {
            Ok(x) => x,
            Err(ReadError::Io(e)) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(e) => return Err(e),
        };
        read_bounded(fd, &st, max).map(|b| Some((b, st)))
    }
}

impl Lower {
    /// `read_regular` through the memory of recent reads: the name's stat from its `O_PATH`
    /// fd, its bytes from memory when the stamps match, else one open and read.
    #[cfg(target_os = "linux")]
    fn read_regular_recalled(&self, rel: &CStr, max: u64) -> Result<Option<(Vec<u8>, libc::stat)>, ReadError> {
        let (path, st) = match self.regular_path(rel) {
            Ok(x) => x,
            Err(ReadError::Io(e)) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(e) => return Err(e),
        };
        if let Some(bytes) = crate::lower_recent_read::recall(&st).filter(|b| b.len() as u64 <= max) {
            return Ok(Some((bytes, st)));
        }
        let bytes = read_bounded(self.reopen(&path)?, &st, max)?;
        crate::lower_recent_read::remember(&st, &bytes);
        Ok(Some((bytes, st)))
    }
}

/// Reads an fd from [`Lower::open_regular`] to its end, at most `max` bytes.
pub fn read_bounded(fd: OwnedFd, st: &libc::stat, max: u64) -> Result<Vec<u8>, ReadError> {
    if st.st_size as u64 > max {
        return Err(ReadError::TooLarge(st.st_size as u64));
    }
    let mut buf = Vec::with_capacity(st.st_size.max(0) as usize);
    // One byte over the bound tells a file that grew while read.
    std::fs::File::from(fd).take(max + 1).read_to_end(&mut buf).map_err(ReadError::Io)?;
    if buf.len() as u64 > max {
        return Err(ReadError::TooLarge(buf.len() as u64));
    }
    Ok(buf)
}
