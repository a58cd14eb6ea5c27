//! File access for seamd, all through `seamfs::lower::Lower`: no symlink is followed anywhere on
//! a path, reads are bounded, and changes inside a git dir go through that dir's own fd by single
//! names, so nothing the box renames mid-way can redirect them.

use std::ffi::{CString, OsStr, OsString};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use seamfs::lower::Lower;

use crate::error::IoError;

/// The largest file seamd reads: an index or a proposal of 256 MiB.
pub const MAX_FILE: u64 = 256 << 20;

/// A C string for a name or relative path ("." for an empty one).
pub fn c(p: &Path) -> CString {
    let b = p.as_os_str().as_bytes();
    CString::new(if b.is_empty() { b".".to_vec() } else { b.to_vec() }).unwrap_or_else(|_| CString::from(c"."))
}

/// What a name is, by `lstat` (links are never followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// Anything else (FIFO, socket, device).
    Other,
}

impl Kind {
    /// A short word for messages.
    pub fn describe(self) -> &'static str {
        match self {
            Kind::File => "a regular file",
            Kind::Dir => "a directory",
            Kind::Symlink => "a symlink",
            Kind::Other => "a special file",
        }
    }
}

/// `lstat` of `rel` under `l`: its kind and stat, None when absent.
pub fn lstat(l: &Lower, rel: &Path) -> std::io::Result<Option<(Kind, libc::stat)>> {
    match l.stat(&c(rel)) {
        Ok(st) => Ok(Some((kind_of(st.st_mode), st))),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

fn kind_of(mode: libc::mode_t) -> Kind {
    match mode & libc::S_IFMT {
        libc::S_IFREG => Kind::File,
        libc::S_IFDIR => Kind::Dir,
        libc::S_IFLNK => Kind::Symlink,
        _ => Kind::Other,
    }
}

/// Opens the directory `rel` under `l` as a `Lower` of its own. Fails with ELOOP when any piece
/// of the path is a symlink.
pub fn open_dir(l: &Lower, rel: &Path) -> std::io::Result<Lower> {
    l.open_at(&c(rel), seamfs::lower::DIR_REF, 0).map(Lower::from_fd)
}

/// Why a file was not read.
#[derive(Debug)]
pub enum ReadError {
    /// It is not a regular file (a FIFO, a directory, a link).
    NotRegular(Kind),
    /// It is larger than the bound.
    TooLarge(u64),
    /// A system call failed.
    Io(std::io::Error),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::NotRegular(k) => write!(f, "{}, not a regular file", k.describe()),
            ReadError::TooLarge(n) => write!(f, "{n} bytes, over the {MAX_FILE}-byte bound"),
            ReadError::Io(e) => e.fmt(f),
        }
    }
}

/// Reads the regular file `rel` under `l` whole, at most [`MAX_FILE`] bytes; None when absent.
/// Through `Lower::read_regular`: never through a link, and a FIFO or device planted under the
/// name is neither opened nor waited on.
pub fn read_regular(l: &Lower, rel: &Path) -> Result<Option<(Vec<u8>, libc::stat)>, ReadError> {
    l.read_regular(&c(rel), MAX_FILE).map_err(|e| match e {
        seamfs::lower_read::ReadError::NotRegular(mode) => ReadError::NotRegular(kind_of(mode)),
        seamfs::lower_read::ReadError::TooLarge(n) => ReadError::TooLarge(n),
        seamfs::lower_read::ReadError::Io(e) => ReadError::Io(e),
    })
}

/// The most names seamd takes from one directory: a git dir the box filled with millions of
/// names must not cost seamd unbounded memory and time every pass.
pub const MAX_NAMES: usize = 100_000;

/// The names in directory `rel` under `l` (without `.` and `..`), sorted; an error past
/// [`MAX_NAMES`].
pub fn list(l: &Lower, rel: &Path) -> std::io::Result<Vec<OsString>> {
    let mut names: Vec<OsString> = l.list_at_most(&c(rel), MAX_NAMES)?.into_iter().map(|(n, _)| n).collect();
    names.sort();
    Ok(names)
}

/// Removes the name `name` in `dir` if (and only if) it is a regular file. Links, FIFOs and
/// directories are left alone. Returns whether it removed something.
pub fn remove_if_regular(dir: &Lower, name: &OsStr) -> std::io::Result<bool> {
    match lstat(dir, Path::new(name))? {
        Some((Kind::File, _)) => match dir.unlink(&c(Path::new(name)), false) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
            Err(e) => Err(e),
        },
        _ => Ok(false),
    }
}

/// A `<name>.lock` created with O_CREAT|O_EXCL in a git dir, as git takes its own locks. Dropped
/// without [`LockFile::commit`], it is removed: seamd never leaves a lock behind.
#[must_use = "a lock is released when dropped"]
pub struct LockFile<'a> {
    dir: &'a Lower,
    lock: CString,
    target: CString,
    shown: std::path::PathBuf,
    file: Option<std::fs::File>,
}

impl<'a> LockFile<'a> {
    /// Takes `<target>.lock` in `dir` with permission bits `mode` (and, when running as root,
    /// owner `owner`). None when someone else holds it. `shown` is the git dir for messages.
    pub fn take(dir: &'a Lower, shown: &Path, target: &str, mode: u32, owner: Option<(u32, u32)>) -> Result<Option<LockFile<'a>>, IoError> {
        let lock = format!("{target}.lock");
        let shown = shown.join(&lock);
        let cl = CString::new(lock).expect("a lock name has no NUL");
        let fd = match dir.open_at(&cl, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, mode) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => return Ok(None),
            Err(e) => return Err(IoError::new("create", shown, e)),
        };
        if let Some((uid, gid)) = owner {
            // SAFETY: a valid fd; failure only leaves the file root's, which git can still read.
            unsafe { libc::fchown(fd.as_raw_fd(), uid, gid) };
        }
        let target = CString::new(target).expect("a file name has no NUL");
        Ok(Some(LockFile { dir, lock: cl, target, shown, file: Some(std::fs::File::from(fd)) }))
    }

    /// Writes `bytes`, syncs them, and renames the lock onto its target.
    pub fn commit(mut self, bytes: &[u8]) -> Result<(), IoError> {
        let mut f = self.file.take().expect("a lock is committed once");
        f.write_all(bytes).and_then(|()| f.sync_all()).map_err(|e| IoError::new("write", &self.shown, e))?;
        drop(f);
        self.dir.rename(&self.lock, &self.target, 0).map_err(|e| IoError::new("rename onto its target", &self.shown, e))?;
        // The rename is done: nothing left to remove on drop.
        self.lock = CString::default();
        // Make the rename durable; a failure here leaves a correct, maybe not yet durable index.
        if let Ok(d) = self.dir.open_at(c".", libc::O_RDONLY | libc::O_DIRECTORY, 0) {
            let _ = std::fs::File::from(d).sync_all();
        }
        Ok(())
    }
}

impl Drop for LockFile<'_> {
    fn drop(&mut self) {
        if !self.lock.as_bytes().is_empty() {
            let _ = self.dir.unlink(&self.lock, false);
        }
    }
}
