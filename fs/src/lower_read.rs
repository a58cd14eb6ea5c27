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
#[cfg(target_os = "linux")]
use std::sync::Arc;

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
        if !crate::lower::PORTABLE {
            return match self.stale_pages() {
                None => self.read_regular_recalled(rel, max),
                Some(_) => self.read_regular_scoped(rel, max),
            };
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
    /// Reads a file only this box's seamfs writes, by rename through this lower (the index's
    /// sync point), whole, at most `max` bytes; None when absent. Its bytes are recalled by
    /// their stamps even on a lower whose attributes never revalidate: there the stamps change
    /// only by this guest kernel's own operations, which are the only ones that replace it.
    pub fn read_own(&self, rel: &CStr, max: u64) -> Result<Option<(Vec<u8>, libc::stat)>, ReadError> {
        #[cfg(target_os = "linux")]
        if !crate::lower::PORTABLE {
            return self.read_regular_recalled(rel, max);
        }
        self.read_regular(rel, max)
    }

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

/// Where the lower never revalidates (9p `cache=loose`): every read is an `O_DIRECT` one, a
/// round trip to the server per call. A small live file read again in the request, or by the
/// process, whose refresh of it still stands is served from the bytes read under that refresh
/// (`crate::refresh_scope::recalled_bytes`, ADR 0046).
#[cfg(target_os = "linux")]
impl Lower {
    fn read_regular_scoped(&self, rel: &CStr, max: u64) -> Result<Option<(Vec<u8>, libc::stat)>, ReadError> {
        let (path, st) = match self.regular_path(rel) {
            Ok(x) => x,
            Err(ReadError::Io(e)) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(e) => return Err(e),
        };
        let key = crate::recent_refresh::SizeKey::of(&st);
        if let Some(b) = crate::refresh_scope::recalled_bytes(rel, key).filter(|b| b.len() as u64 <= max) {
            return Ok(Some((b.to_vec(), st)));
        }
        #[cfg(test)]
        SERVER_READS.with(|n| n.set(n.get() + 1));
        let bytes = read_bounded(self.reopen(&path)?, &st, max)?;
        if bytes.len() <= SCOPED_MAX {
            crate::refresh_scope::note_bytes(rel, key, &Arc::from(bytes.as_slice()));
        }
        Ok(Some((bytes, st)))
    }

    /// `fresh_size` there: the length of the bytes the server gives `rel`, recalled as
    /// [`Lower::read_regular`] recalls them, and remembered the same way when small.
    pub(crate) fn fresh_size_scoped(&self, rel: &CStr) -> io::Result<i64> {
        let (path, st) = self.regular_path(rel)?;
        let key = crate::recent_refresh::SizeKey::of(&st);
        if let Some(b) = crate::refresh_scope::recalled_bytes(rel, key) {
            return Ok(b.len() as i64);
        }
        // Counted by `seam-lab vm counts` from the guest's debug log.
        tracing::debug!(name = ?rel, "sized by the server");
        #[cfg(test)]
        SERVER_READS.with(|n| n.set(n.get() + 1));
        let mut f = std::fs::File::from(self.reopen(&path)?);
        let mut head = vec![0u8; SCOPED_MAX + 1];
        let n = crate::short_read::read_until_short(&mut f, &mut head)?;
        if n <= SCOPED_MAX {
            crate::refresh_scope::note_bytes(rel, key, &Arc::from(&head[..n]));
            return Ok(n as i64);
        }
        Ok((n as u64 + crate::short_read::len_until_short(f, 64 << 10)?) as i64)
    }
}

#[cfg(all(test, target_os = "linux"))]
thread_local! {
    /// Opens and reads [`Lower::read_regular_scoped`] and [`Lower::fresh_size_scoped`] made
    /// on this thread (each is a round trip to a 9p server).
    pub(crate) static SERVER_READS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Live files up to this size are remembered under their refresh (refs, `HEAD`, sync points,
/// `config`; ADR 0046).
#[cfg(target_os = "linux")]
const SCOPED_MAX: usize = crate::lower_recent_read::MAX_BYTES;

/// Reads an fd from [`Lower::open_regular`] to its end, at most `max` bytes.
pub fn read_bounded(fd: OwnedFd, st: &libc::stat, max: u64) -> Result<Vec<u8>, ReadError> {
    if st.st_size as u64 > max {
        return Err(ReadError::TooLarge(st.st_size as u64));
    }
    // One byte over the bound tells a file that grew while read. A short read is the end (ADR
    // 0044): on a lower read `O_DIRECT` each read is a round trip to the server, so the first
    // buffer holds the file's size and more, and a file that fits it costs one read.
    let bound = max.saturating_add(1);
    let first = (st.st_size.max(0) as u64).saturating_add(1).max(4096).min(bound) as usize;
    let mut buf = vec![0u8; first];
    let mut f = std::fs::File::from(fd);
    let n = crate::short_read::read_until_short(&mut f, &mut buf).map_err(ReadError::Io)?;
    buf.truncate(n);
    if n == first && (n as u64) < bound {
        f.take(bound - n as u64).read_to_end(&mut buf).map_err(ReadError::Io)?;
    }
    if buf.len() as u64 > max {
        return Err(ReadError::TooLarge(buf.len() as u64));
    }
    Ok(buf)
}

#[cfg(all(test, target_os = "linux"))]
mod scoped_tests {
    use super::*;
    use crate::recent_refresh::RecentRefresh;
    use crate::refresh_scope::{self, RefreshScope};

    fn reads() -> u64 {
        SERVER_READS.with(|n| n.get())
    }

    /// A git dir with HEAD in a fresh directory, and a lower on it read as a 9p `cache=loose`
    /// lower is.
    fn stale_lower() -> (std::path::PathBuf, Lower) {
        let dir = std::env::temp_dir().join(format!("seamfs-scoped-{}-{:?}", std::process::id(), std::thread::current().id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        let lower = Lower::open(&dir).unwrap().as_if_stale();
        (dir, lower)
    }

    fn read(lower: &Lower) -> Vec<u8> {
        lower.read_regular(c"HEAD", 1024).unwrap().unwrap().0
    }

    #[test]
    fn a_request_reads_a_refreshed_name_once() {
        let (dir, lower) = stale_lower();
        let before = reads();
        {
            let _r = RefreshScope::begin();
            lower.refresh(c"HEAD");
            assert_eq!(read(&lower), b"ref: refs/heads/main\n");
            assert_eq!(read(&lower), b"ref: refs/heads/main\n");
            assert_eq!(lower.fresh_size(c"HEAD", &lower.stat(c"HEAD").unwrap()).unwrap(), 21);
            assert_eq!(reads() - before, 1, "the second read and the sizing are served from the first");
            refresh_scope::pause(std::time::Duration::ZERO);
            lower.refresh(c"HEAD");
            read(&lower);
            assert_eq!(reads() - before, 2, "after a wait on the share the name is read again");
            lower.refresh_again(c"HEAD");
            read(&lower);
            assert_eq!(reads() - before, 3, "after a forced refresh too");
            // Replaced by rename through this kernel: another inode, read anew.
            std::fs::write(dir.join("HEAD.lock"), "ref: refs/heads/other\n").unwrap();
            std::fs::rename(dir.join("HEAD.lock"), dir.join("HEAD")).unwrap();
            assert_eq!(read(&lower), b"ref: refs/heads/other\n");
            assert_eq!(reads() - before, 4);
        }
        read(&lower);
        read(&lower);
        assert_eq!(reads() - before, 6, "outside a request every read reaches the server");
        let _r = RefreshScope::begin();
        read(&lower);
        read(&lower);
        assert_eq!(reads() - before, 8, "a name the request never refreshed is read every time");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_process_reads_a_name_once_while_its_refresh_stands() {
        let (dir, lower) = stale_lower();
        let memo = std::sync::Arc::new(RecentRefresh::new(std::time::Duration::from_secs(1)));
        let before = reads();
        // Two index lookups by process 7, each its own request.
        for _ in 0..2 {
            let _r = RefreshScope::begin();
            refresh_scope::as_process(7, &memo, || {
                lower.refresh(c"HEAD");
                assert_eq!(read(&lower), b"ref: refs/heads/main\n");
            });
        }
        assert_eq!(reads() - before, 1, "the second lookup's read is served from the first's");
        {
            let _r = RefreshScope::begin();
            refresh_scope::as_process(8, &memo, || {
                lower.refresh(c"HEAD");
                read(&lower);
            });
        }
        assert_eq!(reads() - before, 2, "another process reads for itself");
        memo.barrier();
        {
            let _r = RefreshScope::begin();
            refresh_scope::as_process(7, &memo, || {
                lower.refresh(c"HEAD");
                read(&lower);
            });
        }
        assert_eq!(reads() - before, 3, "after a box lock the process reads the share again");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_over_the_first_buffer_is_read_whole() {
        let (dir, lower) = stale_lower();
        let big: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(dir.join("config"), &big).unwrap();
        let _r = RefreshScope::begin();
        lower.refresh(c"config");
        assert_eq!(lower.read_regular(c"config", 1 << 20).unwrap().unwrap().0, big);
        assert_eq!(lower.fresh_size(c"config", &lower.stat(c"config").unwrap()).unwrap(), 20_000);
        assert!(matches!(lower.read_regular(c"config", 19_999), Err(ReadError::TooLarge(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
