//! The lower directory, reached only through a directory fd opened before the mount.
//!
//! Every access is relative to that fd and never follows a symlink on the way (`openat2` with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`; other calls on the last name, `AT_SYMLINK_NOFOLLOW`,
//! from their parent opened that way: `lower_at`), so seamfs can mount over the lower's own path
//! and a symlink planted in the lower cannot lead it outside.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

use crate::lower_at::{at_with, open_beneath, At};
use crate::lower_changes::NameChanges;
use crate::lower_dirs::DirFds;
pub use crate::lower_at::{DIR_REF, PORTABLE};

/// What [`Lower::as_if_stale`] names its stand-in cache.
#[cfg(test)]
const AS_IF_STALE: &str = "as if 9p cache=loose (test)";
#[cfg(target_os = "linux")]
use crate::lower_os::identity_of;
#[cfg(target_os = "linux")]
pub use crate::lower_os::{proc_fd_path, statx_cached};

/// Result of a libc call: -1 becomes the thread's errno.
fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// The lower directory tree.
#[derive(Debug)]
pub struct Lower {
    root: OwnedFd,
    /// The lower's kernel never revalidates what it cached (`crate::lower_cache`): what was
    /// found, or None.
    stale_pages: Option<String>,
    /// A refresh is the link's forced lookup alone (`crate::lower_cache::LowerCache`).
    link_alone: bool,
    /// Parent directories kept open for a moment (the mount's own lower only, ADR 0035).
    dirs: Option<DirFds>,
    /// Names created through any handle on this root (ADR 0037), shared with its clones.
    changes: std::sync::Arc<NameChanges>,
}

/// The parent of a lower-relative path (None for a name in the root): the key of a kept parent.
fn parent_of(rel: &[u8]) -> Option<&[u8]> {
    rel.iter().rposition(|&c| c == b'/').map(|i| &rel[..i])
}

/// A zeroed `stat`, to be filled by the kernel.
pub fn empty_stat() -> libc::stat {
    // SAFETY: `stat` is plain old data; all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}

impl Lower {
    /// Opens `dir` as the lower root. Call before mounting over it.
    pub fn open(dir: &Path) -> io::Result<Lower> {
        let c = CString::new(dir.as_os_str().as_encoded_bytes())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: `c` is a valid C string; the returned fd is owned below.
        let fd = cvt(unsafe { libc::open(c.as_ptr(), DIR_REF | libc::O_CLOEXEC) })?;
        // SAFETY: `fd` was just returned by open(2) and is owned by nobody else.
        let root = unsafe { OwnedFd::from_raw_fd(fd) };
        let cache = crate::lower_cache::of_lower(root.as_raw_fd(), dir);
        Ok(Lower { root, stale_pages: cache.stale_pages, link_alone: cache.link_alone, dirs: None, changes: Default::default() })
    }

    /// The same lower, read as one whose cache never revalidates (the unit tests of ADR 0046's
    /// reads, over a local directory).
    #[cfg(all(test, target_os = "linux"))]
    pub fn as_if_stale(mut self) -> Lower {
        self.stale_pages = Some(AS_IF_STALE.into());
        self
    }

    /// Keeps parent directories open for [`crate::lower_dirs::DIR_FD_TTL`] (the mount's lower,
    /// whose box renames, removals and lock creates forget them: `crate::lower_dirs`).
    pub fn keeping_parent_dirs(mut self) -> Lower {
        self.dirs = Some(DirFds::new(crate::lower_dirs::DIR_FD_TTL));
        self
    }

    /// Forgets every kept parent directory: the next call on any path opens its parent afresh
    /// (at a box lock create, the barrier after which the box reads the share's current state).
    pub fn forget_dirs(&self) {
        if let Some(d) = &self.dirs {
            d.forget_all();
        }
    }

    /// Forgets kept directories at or below `rel` (it was renamed, removed or made anew).
    fn forget_under(&self, rel: &CStr) {
        if let Some(d) = &self.dirs {
            d.forget_under(rel.to_bytes());
        }
    }

    /// Forgets the kept parent of `rel`; true when there was one (ADR 0035).
    fn forget_parent(&self, rel: &CStr) -> bool {
        let Some(d) = &self.dirs else { return false };
        let Some(parent) = parent_of(rel.to_bytes()) else { return false };
        let kept = d.get(parent).is_some();
        if kept {
            d.forget_under(parent);
        }
        kept
    }

    /// `call` on `rels`, made once more from freshly opened parents when it failed through a
    /// kept one with an error `again` names (ADR 0035): the host removed that directory since it
    /// was kept, and may have made it anew. A share answers ESTALE for a directory its server
    /// lost and its kernel cannot walk again from a directory fd; a FUSE share whose server gave
    /// the directory's number to a new file has marked the old inode bad, and answers EIO.
    fn through_kept<T>(&self, rels: &[&CStr], again: Again, call: impl Fn() -> io::Result<T>) -> io::Result<T> {
        match call() {
            // Every kept parent is forgotten, not only the first: either may be the removed one.
            Err(e) if again.covers(&e) && rels.iter().fold(false, |kept, rel| self.forget_parent(rel) | kept) => call(),
            r => r,
        }
    }

    /// Addresses `rel` for a `*at` call (`crate::lower_at::at`), from a kept parent directory
    /// when there is one.
    fn at<'a>(&self, rel: &'a CStr) -> io::Result<At<'a>> {
        let root = self.root_fd();
        at_with(root, rel, |parent| {
            if let Some(fd) = self.dirs.as_ref().and_then(|d| d.get(parent)) {
                return Ok(fd);
            }
            let fd = std::sync::Arc::new(crate::lower_at::open_dir(root, parent)?);
            if let Some(d) = &self.dirs {
                d.put(parent, fd.clone());
            }
            Ok(fd)
        })
    }

    /// Addresses `rel` for [`open_beneath`]: from a kept parent directory when there is one,
    /// else the whole path from the root when it fits one call (no parent opened just for it).
    fn at_for_open_beneath<'a>(&self, rel: &'a CStr) -> io::Result<At<'a>> {
        let kept = self.dirs.as_ref().and_then(|d| parent_of(rel.to_bytes()).and_then(|p| d.get(p)));
        match kept {
            Some(fd) => at_with(self.root_fd(), rel, |_| Ok(fd)),
            None => crate::lower_at::at_for_open_beneath(self.root_fd(), rel),
        }
    }

    /// What makes the lower's cache stale forever (`9p cache=loose`), if anything: then reads
    /// that must see the host's current bytes use [`Lower::open_fresh`].
    pub fn stale_pages(&self) -> Option<&str> {
        self.stale_pages.as_deref()
    }

    /// True when a refresh is the link's forced lookup alone (`crate::lower_cache::LowerCache`).
    pub fn link_alone(&self) -> bool {
        self.link_alone
    }

    /// `open_at` for a read that must see the lower's server, not its cache: O_DIRECT on a lower
    /// whose cache is never revalidated (a read-only open only; writes keep the page cache).
    pub fn open_fresh(&self, rel: &CStr, flags: i32) -> io::Result<OwnedFd> {
        self.open_at(rel, self.fresh_flags(flags), 0)
    }

    /// `flags` for an open that must see the server (see [`Lower::open_fresh`]): a read-only
    /// open, or an appending one (the guest puts an append at its cached size, which is stale;
    /// an O_DIRECT write reaches the server's O_APPEND file, which appends at its real end).
    pub fn fresh_flags(&self, flags: i32) -> i32 {
        // The unit tests' stand-in lives on a local disk, which refuses unaligned O_DIRECT.
        #[cfg(test)]
        if self.stale_pages.as_deref() == Some(AS_IF_STALE) {
            return flags;
        }
        if self.stale_pages.is_some() {
            crate::lower_os::fresh_flags(flags)
        } else {
            flags
        }
    }

    /// The size of `rel` as the server has it: the lower's own size on a coherent lower, the
    /// bytes an O_DIRECT read finds on one that never revalidates (its cached size stays the
    /// first one seen). ENOENT when the server has no such file.
    pub fn fresh_size(&self, rel: &CStr, cached: &libc::stat) -> io::Result<i64> {
        if self.stale_pages.is_none() || cached.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Ok(cached.st_size);
        }
        #[cfg(target_os = "linux")]
        if !PORTABLE {
            return self.fresh_size_scoped(rel);
        }
        // Counted by `seam-lab vm counts` from the guest's debug log.
        tracing::debug!(name = ?rel, "sized by the server");
        let (fd, _) = self.open_regular(rel)?;
        crate::lower_cache::direct_len(fd).map(|n| n as i64)
    }

    /// A lower rooted at a directory fd already opened without following links (for example a
    /// git dir opened through another `Lower`), so later calls address names inside it only.
    pub fn from_fd(root: OwnedFd) -> Lower {
        Lower { root, stale_pages: None, link_alone: false, dirs: None, changes: Default::default() }
    }

    /// Another handle on the same root (for a background thread).
    pub fn try_clone(&self) -> io::Result<Lower> {
        // Without kept directories: only the mount's own calls see the barriers that forget them.
        Ok(Lower {
            root: self.root.try_clone()?,
            stale_pages: self.stale_pages.clone(),
            link_alone: self.link_alone,
            dirs: None,
            changes: self.changes.clone(),
        })
    }

    /// The root directory fd.
    pub fn root_fd(&self) -> RawFd {
        self.root.as_raw_fd()
    }

    /// `lstat` of a path relative to the root.
    pub fn stat(&self, rel: &CStr) -> io::Result<libc::stat> {
        self.through_kept(&[rel], Again::Broken, || {
            let a = self.at(rel)?;
            let mut st = empty_stat();
            // SAFETY: valid fd, C string and out-pointer.
            cvt(unsafe { libc::fstatat(a.fd(), a.name().as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) })?;
            Ok(st)
        })
    }

    /// A path's device and inode number, without asking a FUSE lower for fresh attributes
    /// (see [`identity`]).
    pub fn identity_at(&self, rel: &CStr) -> io::Result<(u64, u64)> {
        #[cfg(target_os = "linux")]
        if !PORTABLE {
            return self.through_kept(&[rel], Again::Broken, || {
                let a = self.at(rel)?;
                statx_cached(a.fd(), a.name(), 0, libc::STATX_INO).map(|x| identity_of(&x))
            });
        }
        // No statx on the portable side: a plain lstat (a FUSE lower may be asked for fresh
        // attributes).
        self.stat(rel).map(|st| dev_ino(&st))
    }

    /// Opens a path relative to the root without following any symlink.
    pub fn open_at(&self, rel: &CStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
        let open = || {
            let a = self.at_for_open_beneath(rel)?;
            open_beneath(a.fd(), a.name(), crate::lower_os::open_flags(flags), mode)
        };
        if flags & libc::O_CREAT == 0 {
            return self.through_kept(&[rel], Again::Broken, open);
        }
        let r = self.through_kept(&[rel], Again::Missing, open);
        self.changes.created(rel);
        r
    }

    /// The generation of names that could create `rel` (`crate::lower_changes`): read before a
    /// refresh, compared when its "missing" is recalled.
    pub fn name_generation(&self, rel: &CStr) -> u64 {
        self.changes.generation(rel)
    }

    /// `mkdirat`.
    pub fn mkdir(&self, rel: &CStr, mode: u32) -> io::Result<()> {
        let r = self.through_kept(&[rel], Again::Missing, || {
            let a = self.at(rel)?;
            // SAFETY: valid fd and C string.
            cvt(unsafe { libc::mkdirat(a.fd(), a.name().as_ptr(), mode as libc::mode_t) }).map(drop)
        });
        // A directory kept at this path was one the host removed.
        self.forget_under(rel);
        self.changes.created(rel);
        r
    }

    /// `mknodat`.
    pub fn mknod(&self, rel: &CStr, mode: u32, rdev: u64) -> io::Result<()> {
        let r = self.through_kept(&[rel], Again::Missing, || {
            let a = self.at(rel)?;
            // SAFETY: valid fd and C string.
            cvt(unsafe { libc::mknodat(a.fd(), a.name().as_ptr(), mode as libc::mode_t, rdev as libc::dev_t) }).map(drop)
        });
        self.changes.created(rel);
        r
    }

    /// `symlinkat`.
    pub fn symlink(&self, target: &CStr, rel: &CStr) -> io::Result<()> {
        let r = self.through_kept(&[rel], Again::Missing, || {
            let a = self.at(rel)?;
            // SAFETY: valid fd and C strings.
            cvt(unsafe { libc::symlinkat(target.as_ptr(), a.fd(), a.name().as_ptr()) }).map(drop)
        });
        self.changes.created(rel);
        r
    }

    /// `linkat` between two paths under the root, without following a symlink source.
    pub fn link(&self, old: &CStr, new: &CStr) -> io::Result<()> {
        let r = self.through_kept(&[old, new], Again::Missing, || {
            let (a, b) = (self.at(old)?, self.at(new)?);
            // SAFETY: valid fds and C strings.
            cvt(unsafe { libc::linkat(a.fd(), a.name().as_ptr(), b.fd(), b.name().as_ptr(), 0) }).map(drop)
        });
        self.changes.created(new);
        r
    }

    /// `unlinkat`, for files (`dir == false`) or directories.
    pub fn unlink(&self, rel: &CStr, dir: bool) -> io::Result<()> {
        let flags = if dir { libc::AT_REMOVEDIR } else { 0 };
        let r = self.through_kept(&[rel], Again::Missing, || {
            let a = self.at(rel)?;
            // SAFETY: valid fd and C string.
            cvt(unsafe { libc::unlinkat(a.fd(), a.name().as_ptr(), flags) }).map(drop)
        });
        if dir {
            self.forget_under(rel);
        }
        r
    }

    /// Rename with the caller's flags, Linux's values (RENAME_NOREPLACE, RENAME_EXCHANGE):
    /// `renameat2` on Linux, `renameatx_np` on macOS (`crate::lower_os`).
    pub fn rename(&self, old: &CStr, new: &CStr, flags: u32) -> io::Result<()> {
        let r = self.through_kept(&[old, new], Again::Missing, || {
            let (a, b) = (self.at(old)?, self.at(new)?);
            if flags == 0 {
                // Plain renameat where no flag is asked for: the call every platform has (seamd's
                // lock commit on a macOS host).
                // SAFETY: valid fds and C strings.
                cvt(unsafe { libc::renameat(a.fd(), a.name().as_ptr(), b.fd(), b.name().as_ptr()) }).map(drop)
            } else {
                crate::lower_os::rename_with_flags(a.fd(), a.name(), b.fd(), b.name(), flags)
            }
        });
        // Either name may be a directory (or replace one): what was kept at either path moved.
        self.forget_under(old);
        self.forget_under(new);
        self.changes.any();
        r
    }

    /// `readlinkat`.
    pub fn readlink(&self, rel: &CStr) -> io::Result<Vec<u8>> {
        self.through_kept(&[rel], Again::Broken, || {
            let a = self.at(rel)?;
            let mut buf = vec![0u8; libc::PATH_MAX as usize];
            // SAFETY: valid fd, C string and buffer of the given length.
            let n = unsafe { libc::readlinkat(a.fd(), a.name().as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            buf.truncate(n as usize);
            Ok(buf)
        })
    }

    /// `fchownat` without following a final symlink; `u32::MAX` leaves a field unchanged.
    pub fn chown(&self, rel: &CStr, uid: u32, gid: u32) -> io::Result<()> {
        self.through_kept(&[rel], Again::Missing, || {
            let a = self.at(rel)?;
            // SAFETY: valid fd and C string.
            cvt(unsafe { libc::fchownat(a.fd(), a.name().as_ptr(), uid, gid, libc::AT_SYMLINK_NOFOLLOW) }).map(drop)
        })
    }

    /// `statvfs` of the lower filesystem.
    pub fn statfs(&self) -> io::Result<libc::statvfs> {
        // SAFETY: zeroed POD out-struct, valid fd.
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        cvt(unsafe { libc::fstatvfs(self.root_fd(), &mut s) })?;
        Ok(s)
    }

    /// Makes the lower's kernel look `rel` up again, creating nothing; says what the server
    /// answered when the call's error tells it.
    ///
    /// `link("/", rel)` revalidates the new name with LOOKUP_EXCL, which FUSE (and so virtiofs)
    /// always sends to its server: EEXIST when the name exists, EXDEV (another mount) or EPERM
    /// (a directory cannot be linked) when it does not. On virtiofs, 9p or a local filesystem
    /// (`link_alone`) the link alone is made: their servers answer every lookup that reaches
    /// them from the host's filesystem (ADR 0041). Elsewhere a stat first makes sure the lower
    /// holds an entry that the forced revalidation then replaces: a lookup of an expired entry
    /// is an ordinary one, which a FUSE server may answer from a cache of its own (the lab's
    /// fault model, ADR 0002); the link's lookup right after it is the forced one.
    /// Within one FUSE request only the first refresh of a name is made (`crate::refresh_scope`);
    /// a later one recalls what it learned. Inside `refresh_scope::as_process`, that process's
    /// refresh of a moment ago stands in.
    pub fn refresh(&self, rel: &CStr) -> Seen {
        use crate::refresh_scope::{self as scope, InRequest};
        if let InRequest::Again(seen, generation) = scope::in_request(rel) {
            return self.recalled(seen, generation, rel);
        }
        if scope::spared_for_process(rel) {
            return Seen::Unknown;
        }
        let generation = self.name_generation(rel);
        let seen = self.refresh_again(rel);
        scope::learned(rel, seen, generation);
        seen
    }

    /// What an earlier refresh of `rel` learned, as it stands now: "missing" while nothing made
    /// through this lower could have created the name since (`generation`: read before that
    /// refresh; ADR 0037), else unknown (the lower's entry, as that refresh left it, answers).
    pub fn recalled(&self, seen: Seen, generation: u64, rel: &CStr) -> Seen {
        if seen == Seen::Missing && self.name_generation(rel) == generation {
            Seen::Missing
        } else {
            Seen::Unknown
        }
    }

    /// `refresh`, made even when this request refreshed `rel` already: for loops that wait for
    /// the share to change.
    pub fn refresh_again(&self, rel: &CStr) -> Seen {
        REFRESHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        #[cfg(test)]
        REFRESHED_HERE.with(|v| v.borrow_mut().push(rel.to_owned()));
        crate::refresh_scope::forget_bytes(rel);
        // Counted by `seam-lab vm counts` from the guest's debug log.
        tracing::debug!(name = ?rel, "refreshed");
        let Ok(a) = self.at(rel) else { return Seen::Unknown };
        let (dir, rel) = (a.fd(), a.name());
        if !self.link_alone {
            let mut st = empty_stat();
            // SAFETY: valid fd, C string, out-pointer. The stat's result is deliberately
            // ignored: only its side effect on the lower's dentry cache matters.
            unsafe { libc::fstatat(dir, rel.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
        }
        // SAFETY: valid fd and C strings. Only the link's errno matters: link never succeeds
        // on "/".
        if unsafe { libc::linkat(libc::AT_FDCWD, c"/".as_ptr(), dir, rel.as_ptr(), 0) } == 0 {
            return Seen::Unknown;
        }
        crate::lower_os::seen_by_link(io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}

/// Which failures through a kept parent directory are met again from a fresh one.
#[derive(Clone, Copy)]
enum Again {
    /// The kept directory is broken (ESTALE, EIO): a read as much as a change.
    Broken,
    /// Broken, or the name is missing from it (ENOENT): a change only. A lookup's ENOENT is the
    /// common answer and is not paid twice; a change that failed changed nothing.
    Missing,
}

impl Again {
    fn covers(self, e: &io::Error) -> bool {
        match e.raw_os_error() {
            Some(libc::ESTALE | libc::EIO) => true,
            Some(libc::ENOENT) => matches!(self, Again::Missing),
            _ => false,
        }
    }
}

#[cfg(test)]
thread_local! {
    /// Listings this thread made (`Lower::list_at_most`), for the unit tests that count them.
    pub(crate) static LISTED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// Names this thread refreshed (`Lower::refresh_again`), for the unit tests that count them.
    pub(crate) static REFRESHED_HERE: std::cell::RefCell<Vec<CString>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// What a forced revalidation learned from the share's server about the name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// The server has the name; the lower's entry for it is fresh.
    Present,
    /// The server has no such name: a stat right after would only ask it again.
    Missing,
    /// Not refreshed now (this request or process did a moment ago), or the answer says neither.
    Unknown,
}

/// Forced revalidations made by this process (`refresh_again`), for `user.seamfs.status`: each
/// is a round trip to the share's server, the cost ADR 0020 counts.
pub static REFRESHES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Lower {
    /// The names in directory `rel` with their inode numbers, read from the lower's server: a
    /// listing is never served from the lower's dentry cache, so it shows what a stale lookup
    /// would hide.
    pub fn list(&self, rel: &CStr) -> io::Result<Vec<(std::ffi::OsString, u64)>> {
        self.list_at_most(rel, usize::MAX)
    }

    /// [`Lower::list`], an error past `max` names: a directory the other side filled with
    /// millions of names costs the reader bounded memory. Read through the directory's own fd
    /// (`fdopendir`), with no `/proc`, so it is the same on every host.
    pub fn list_at_most(&self, rel: &CStr, max: usize) -> io::Result<Vec<(std::ffi::OsString, u64)>> {
        use std::os::fd::IntoRawFd;
        #[cfg(test)]
        LISTED.with(|n| n.set(n.get() + 1));
        use std::os::unix::ffi::OsStringExt;
        let fd = self.open_at(rel, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        // SAFETY: fdopendir takes ownership of a valid directory fd; closedir below releases it.
        let dir = unsafe { libc::fdopendir(fd.into_raw_fd()) };
        if dir.is_null() {
            return Err(io::Error::last_os_error());
        }
        let mut names = Vec::new();
        let result = loop {
            // SAFETY: `dir` is a valid DIR*; readdir returns null at the end.
            let ent = unsafe { libc::readdir(dir) };
            if ent.is_null() {
                break Ok(());
            }
            // SAFETY: d_name is a NUL-terminated name inside the entry readdir returned.
            let name = unsafe { CStr::from_ptr((*ent).d_name.as_ptr()) }.to_bytes();
            if name != b"." && name != b".." {
                // SAFETY: the same valid entry. (d_ino is u64 on Linux and macOS alike.)
                names.push((std::ffi::OsString::from_vec(name.to_vec()), unsafe { (*ent).d_ino }));
            }
            if names.len() > max {
                // No path in it: callers name the directory as they print paths (seamd quotes them).
                break Err(io::Error::other(format!("more than {max} names: not listed further")));
            }
        };
        // SAFETY: `dir` came from fdopendir and is closed once.
        unsafe { libc::closedir(dir) };
        result.map(|()| names)
    }
}

/// `fstat` of an open fd.
pub fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    let mut st = empty_stat();
    // SAFETY: out-pointer to a zeroed stat.
    cvt(unsafe { libc::fstat(fd, &mut st) })?;
    Ok(st)
}

/// An open file's device and inode number, from the kernel's cached attributes: they never
/// change for an open file, so asking a FUSE lower for fresh attributes would only cost a GETATTR.
pub fn identity(fd: RawFd) -> io::Result<(u64, u64)> {
    #[cfg(target_os = "linux")]
    if !PORTABLE {
        return statx_cached(fd, c"", libc::AT_EMPTY_PATH, libc::STATX_INO).map(|x| identity_of(&x));
    }
    // No statx on the portable side: fstat (a FUSE lower may be asked for fresh attributes).
    fstat(fd).map(|st| dev_ino(&st))
}

/// The owner and mode the kernel has cached for `fd`, read without a round trip; None where
/// that cannot be told (the portable build).
fn cached_owner_mode(fd: RawFd) -> Option<(u32, u32, u32)> {
    #[cfg(target_os = "linux")]
    if !PORTABLE {
        let x = statx_cached(fd, c"", libc::AT_EMPTY_PATH, libc::STATX_UID | libc::STATX_GID | libc::STATX_MODE).ok()?;
        return Some((x.stx_uid, x.stx_gid, u32::from(x.stx_mode)));
    }
    let _ = fd;
    None
}

/// Gives a file seamfs just made the owner (and, with `mode`, the permission bits) of the file or
/// directory it stands for, skipping what it has already: a chown or chmod that changes nothing
/// still costs the share's server a round trip. What it has is the kernel's cached view, which
/// the create that made it filled in. An id of `u32::MAX` is left as it is, as `fchown(2)` does.
pub fn own_like(fd: RawFd, uid: u32, gid: u32, mode: Option<u32>) {
    let has = cached_owner_mode(fd);
    let differs = |want: u32, had: u32| want != u32::MAX && want != had;
    let chown = match has {
        Some((u, g, _)) => differs(uid, u) || differs(gid, g),
        None => uid != u32::MAX || gid != u32::MAX,
    };
    if chown {
        // SAFETY: valid fd.
        unsafe { libc::fchown(fd, uid, gid) };
    }
    if let Some(m) = mode.filter(|m| has.is_none_or(|(_, _, h)| h & 0o7777 != m & 0o7777)) {
        // SAFETY: valid fd. (`as _`: mode_t is u16 on macOS.)
        #[allow(clippy::unnecessary_cast)]
        unsafe { libc::fchmod(fd, (m & 0o7777) as _) };
    }
}

/// A stat's device and inode number as `u64`s.
pub fn dev_ino(st: &libc::stat) -> (u64, u64) {
    // The casts are for macOS, whose st_dev is an i32.
    #[allow(clippy::unnecessary_cast)]
    (st.st_dev as u64, st.st_ino as u64)
}

/// Same file: device and inode number.
pub fn same_file(a: &libc::stat, dev: u64, ino: u64) -> bool {
    dev_ino(a) == (dev, ino)
}

/// Writes `bytes` to a file seamfs just made and waits for them to reach the server
/// (`write_back`, ADR 0055), so that the rename publishing it never shows the host a short file.
pub fn write_whole(fd: OwnedFd, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::File::from(fd);
    f.write_all(bytes)?;
    write_back(f.as_raw_fd());
    Ok(())
}

/// Writes back a file's dirty pages and waits for them; unlike fsync it asks no disk flush of
/// the host, and costs nothing when nothing is dirty (virtiofs, FUSE without writeback cache).
/// Before a rename publishes a file on a share that caches writes in the guest (9p
/// `cache=loose`), so the host never reads the new name empty.
pub fn write_back(fd: std::os::fd::RawFd) {
    #[cfg(target_os = "linux")]
    {
        let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE | libc::SYNC_FILE_RANGE_WAIT_AFTER;
        // SAFETY: valid fd; offset 0 and length 0 mean the whole file.
        if unsafe { libc::sync_file_range(fd, 0, 0, flags) } == 0 {
            return;
        }
    }
    // Not supported on this file or system: fsync.
    // SAFETY: valid fd.
    unsafe { libc::fsync(fd) };
}
