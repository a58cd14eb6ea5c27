//! How a `*at` call reaches a lower path: never through a symlink, and at any length.
//!
//! Opens beneath a directory fd go through [`open_beneath`]: `openat2` on Linux, or the
//! portable resolver (macOS hosts; on Linux with the `portable-resolver` feature, which CI runs
//! seamd's suite with): one name at a time, `openat` with `O_NOFOLLOW` (directories
//! `O_DIRECTORY | O_NOFOLLOW`, checked by `fstat`), `..` and absolute paths refused with EXDEV
//! as `RESOLVE_BENEATH` does, a link met anywhere ELOOP as `RESOLVE_NO_SYMLINKS` does. Without
//! `O_PATH` there, a directory reference is a read-only open ([`DIR_REF`]) and
//! `Lower::open_regular` checks a file's type by `lstat` and the opened fd by `fstat`.
//!
//! seamfs and seamd address the lower by the whole path below its root. A `*at` call with a
//! path of several names follows symlinks in the middle (a box link `refs/heads/x -> /net/...`
//! read as `refs/heads/x/y` would reach the host's automounts), so a path with a parent has
//! that parent opened first with `openat2` (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`), and the
//! call is made on the last name relative to it: one more syscall, about 0.5 us. A box that
//! `cd`s deep into the mount can make the parent longer than the kernel accepts at once
//! (`PATH_MAX`): it is then opened in chunks, each beneath the last. A single name costs nothing.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

/// The longest path handed to one syscall, without its NUL.
const MAX_AT_ONCE: usize = libc::PATH_MAX as usize - 1;

/// Flags for a directory fd used only to address names beneath it: `O_PATH` where the resolver
/// is `openat2`; the portable resolver (macOS has no `O_PATH`) opens directories for reading.
#[cfg(all(target_os = "linux", not(feature = "portable-resolver")))]
pub const DIR_REF: i32 = libc::O_PATH | libc::O_DIRECTORY;
/// Flags for a directory fd used only to address names beneath it (see the Linux definition).
#[cfg(any(not(target_os = "linux"), feature = "portable-resolver"))]
pub const DIR_REF: i32 = libc::O_RDONLY | libc::O_DIRECTORY;

/// True when names are resolved one component at a time ([`open_beneath`]'s portable side).
pub const PORTABLE: bool = cfg!(any(not(target_os = "linux"), feature = "portable-resolver"));

/// Opens `rel` beneath `dirfd`, following no symlink on the way or at its end: ELOOP at a
/// symlink, EXDEV for an absolute path or one with `..`. One signature, two implementations:
/// Linux's `openat2` (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`), and a descent one name at a
/// time (macOS, or Linux with the `portable-resolver` feature, so CI runs seamd's suite on it).
pub(crate) fn open_beneath(dirfd: RawFd, rel: &CStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    resolver::open_beneath(dirfd, rel, flags, mode)
}

#[cfg(all(target_os = "linux", not(feature = "portable-resolver")))]
mod resolver {
    use super::*;

    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }

    const RESOLVE_NO_SYMLINKS: u64 = 0x04;
    const RESOLVE_BENEATH: u64 = 0x08;

    pub(super) fn open_beneath(dirfd: RawFd, rel: &CStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
        let how = OpenHow {
            flags: flags as u64,
            mode: if flags & (libc::O_CREAT | libc::O_TMPFILE) != 0 { mode as u64 } else { 0 },
            resolve: RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS,
        };
        // SAFETY: openat2 with a valid fd, C string and `open_how` of the size we pass.
        let fd = unsafe {
            libc::syscall(libc::SYS_openat2, dirfd, rel.as_ptr(), &how as *const OpenHow, std::mem::size_of::<OpenHow>())
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh fd from openat2.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
    }
}

#[cfg(any(not(target_os = "linux"), feature = "portable-resolver"))]
mod resolver {
    use super::*;

    /// `openat` of one name with `O_NOFOLLOW`: a symlink there fails (ELOOP), never followed.
    fn open_one(dirfd: RawFd, name: &CStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
        // SAFETY: a valid fd and C string; the fd is owned below.
        let fd = unsafe { libc::openat(dirfd, name.as_ptr(), flags | libc::O_NOFOLLOW | libc::O_CLOEXEC, mode as libc::c_uint) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh fd from openat.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Without `O_PATH` a reference is a real open: a directory for reading, anything else
    /// non-blocking (a FIFO must not hang the caller; readers of other sides' bytes check the
    /// type before opening, `Lower::open_regular`).
    #[cfg(target_os = "linux")]
    fn without_o_path(flags: i32) -> i32 {
        if flags & libc::O_PATH == 0 {
            return flags;
        }
        let rest = flags & !(libc::O_PATH | libc::O_ACCMODE);
        if flags & libc::O_DIRECTORY != 0 {
            rest | libc::O_RDONLY
        } else {
            rest | libc::O_RDONLY | libc::O_NONBLOCK
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn without_o_path(flags: i32) -> i32 {
        flags
    }

    /// Linux's `O_DIRECTORY | O_NOFOLLOW` on a symlink says ENOTDIR; say ELOOP as openat2's
    /// `RESOLVE_NO_SYMLINKS` does, so a planted link reads the same under either resolver.
    fn link_is_eloop(dirfd: RawFd, name: &CStr, e: io::Error) -> io::Error {
        if e.raw_os_error() != Some(libc::ENOTDIR) {
            return e;
        }
        let mut st = crate::lower::empty_stat();
        // SAFETY: a valid fd, C string and out-pointer.
        let r = unsafe { libc::fstatat(dirfd, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
        if r == 0 && st.st_mode & libc::S_IFMT == libc::S_IFLNK {
            io::Error::from_raw_os_error(libc::ELOOP)
        } else {
            e
        }
    }

    pub(super) fn open_beneath(dirfd: RawFd, rel: &CStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
        let bytes = rel.to_bytes();
        // RESOLVE_BENEATH's answer to a path that leaves the directory.
        if bytes.first() == Some(&b'/') {
            return Err(io::Error::from_raw_os_error(libc::EXDEV));
        }
        let names: Vec<&[u8]> = bytes.split(|&b| b == b'/').filter(|n| !n.is_empty() && *n != b".").collect();
        if names.iter().any(|n| *n == b"..") {
            return Err(io::Error::from_raw_os_error(libc::EXDEV));
        }
        let flags = without_o_path(flags);
        let Some((last, dirs)) = names.split_last() else {
            return open_one(dirfd, c".", flags, mode);
        };
        let mut cur: Option<OwnedFd> = None;
        for d in dirs {
            let name = CString::new(*d).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
            let from = cur.as_ref().map_or(dirfd, |f| f.as_raw_fd());
            let next = open_one(from, &name, libc::O_RDONLY | libc::O_DIRECTORY, 0).map_err(|e| link_is_eloop(from, &name, e))?;
            // O_DIRECTORY | O_NOFOLLOW already refuse a link or a file; the fstat makes the
            // descent's invariant explicit where a platform's O_NOFOLLOW could be weaker.
            if crate::lower::fstat(next.as_raw_fd())?.st_mode & libc::S_IFMT != libc::S_IFDIR {
                return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
            }
            cur = Some(next);
        }
        let name = CString::new(*last).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let from = cur.as_ref().map_or(dirfd, |f| f.as_raw_fd());
        open_one(from, &name, flags, mode).map_err(|e| if flags & libc::O_DIRECTORY != 0 { link_is_eloop(from, &name, e) } else { e })
    }
}

/// Where a `*at` call addresses a lower path.
#[derive(Debug)]
pub(crate) enum At<'a> {
    /// The root fd and the path itself (it fits one syscall).
    Whole(RawFd, &'a CStr),
    /// The path's parent directory, opened from the root in chunks (or kept from a moment ago,
    /// `crate::lower_dirs`), and the last name.
    Parent(Arc<OwnedFd>, CString),
}

impl At<'_> {
    /// The directory fd of the call.
    pub(crate) fn fd(&self) -> RawFd {
        match self {
            At::Whole(fd, _) => *fd,
            At::Parent(fd, _) => fd.as_raw_fd(),
        }
    }

    /// The path of the call, relative to `fd`.
    pub(crate) fn name(&self) -> &CStr {
        match self {
            At::Whole(_, rel) => rel,
            At::Parent(_, name) => name,
        }
    }
}

/// Addresses `rel` (relative to `root`) for a `*at` call. A single name is used as it is; a
/// longer path has its parent opened beneath `root` with no symlink followed (`openat2`, in
/// chunks when long), so no call ever resolves a symlink in the middle of a path: a `*at` call
/// follows every intermediate link, `AT_SYMLINK_NOFOLLOW` spares only the last name.
pub(crate) fn at(root: RawFd, rel: &CStr) -> io::Result<At<'_>> {
    at_with(root, rel, |parent| open_dir_in_chunks(root, parent).map(Arc::new))
}

/// [`at`], with the parent directory (a path below `root`) supplied by `parent_dir`, which may
/// hand back one it opened a moment ago.
pub(crate) fn at_with<'a>(root: RawFd, rel: &'a CStr, parent_dir: impl FnOnce(&[u8]) -> io::Result<Arc<OwnedFd>>) -> io::Result<At<'a>> {
    let bytes = rel.to_bytes();
    let Some(i) = bytes.iter().rposition(|&b| b == b'/') else {
        if bytes.len() > MAX_AT_ONCE {
            return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
        }
        return Ok(At::Whole(root, rel));
    };
    let dir = parent_dir(&bytes[..i])?;
    let name = CString::new(&bytes[i + 1..]).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    Ok(At::Parent(dir, name))
}

/// Opens directory `path` below `root` as a [`DIR_REF`] fd, following no symlink.
pub(crate) fn open_dir(root: RawFd, path: &[u8]) -> io::Result<OwnedFd> {
    open_dir_in_chunks(root, path)
}

/// Addresses `rel` for [`open_beneath`], which resolves beneath `root` without symlinks itself:
/// the whole path when it fits one call, else as [`at`] does.
pub(crate) fn at_for_open_beneath(root: RawFd, rel: &CStr) -> io::Result<At<'_>> {
    if rel.to_bytes().len() <= MAX_AT_ONCE {
        return Ok(At::Whole(root, rel));
    }
    at(root, rel)
}

/// Opens directory `path` below `root` as a [`DIR_REF`] fd, at most `MAX_AT_ONCE` bytes a step.
fn open_dir_in_chunks(root: RawFd, path: &[u8]) -> io::Result<OwnedFd> {
    let flags = DIR_REF | libc::O_CLOEXEC | libc::O_NOFOLLOW;
    let mut dir: Option<OwnedFd> = None;
    let mut rest = path;
    while !rest.is_empty() {
        let take = if rest.len() <= MAX_AT_ONCE {
            rest.len()
        } else {
            // Cut at the last '/' that keeps the chunk short enough (a name is at most 255 bytes).
            rest[..=MAX_AT_ONCE].iter().rposition(|&b| b == b'/').filter(|&i| i > 0)
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ENAMETOOLONG))?
        };
        let chunk = CString::new(&rest[..take]).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let from = dir.as_ref().map_or(root, |d| d.as_raw_fd());
        dir = Some(open_beneath(from, &chunk, flags, 0)?);
        rest = rest[take..].strip_prefix(b"/").unwrap_or(&rest[take..]);
    }
    match dir {
        Some(d) => Ok(d),
        None => open_beneath(root, c".", flags, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_paths_resolve_from_directory_fds() {
        let base = std::env::temp_dir().join(format!("seam-lower-at-{}", std::process::id()));
        std::fs::create_dir_all(&base).expect("mkdir base");
        let c = CString::new(base.to_str().expect("utf-8")).expect("no NUL");
        // SAFETY: valid C string; the fd is owned below.
        let fd = unsafe { libc::open(c.as_ptr(), DIR_REF | libc::O_CLOEXEC) };
        assert!(fd >= 0, "open {}: {}", base.display(), io::Error::last_os_error());
        // SAFETY: a fresh fd.
        let root = unsafe { OwnedFd::from_raw_fd(fd) };
        // 40 levels of 200-byte names: about 8 KiB, twice what one syscall takes.
        let name = "d".repeat(200);
        let mut rel = String::new();
        for _ in 0..40 {
            if !rel.is_empty() {
                rel.push('/');
            }
            rel.push_str(&name);
            let c = CString::new(rel.as_str()).expect("no NUL");
            let a = at(root.as_raw_fd(), &c).expect("resolve");
            // SAFETY: valid fd and C string.
            let r = unsafe { libc::mkdirat(a.fd(), a.name().as_ptr(), 0o755) };
            assert_eq!(r, 0, "mkdir at depth {} ({} bytes): {}", rel.len() / 201, rel.len(), io::Error::last_os_error());
        }
        assert!(matches!(at(root.as_raw_fd(), &CString::new(rel.as_str()).expect("no NUL")).expect("resolve"), At::Parent(..)));
        std::fs::remove_dir_all(&base).expect("clean up");
    }
}
