//! How a `*at` call reaches a lower path: never through a symlink, and at any length.
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

#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

const RESOLVE_NO_SYMLINKS: u64 = 0x04;
const RESOLVE_BENEATH: u64 = 0x08;

/// The longest path handed to one syscall, without its NUL.
const MAX_AT_ONCE: usize = libc::PATH_MAX as usize - 1;

/// `openat2(dirfd, rel)` beneath `dirfd`, following no symlink on the way.
pub(crate) fn openat2(dirfd: RawFd, rel: &CStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
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

/// Where a `*at` call addresses a lower path.
#[derive(Debug)]
pub(crate) enum At<'a> {
    /// The root fd and the path itself (it fits one syscall).
    Whole(RawFd, &'a CStr),
    /// The path's parent directory, opened from the root in chunks, and the last name.
    Parent(OwnedFd, CString),
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
    let bytes = rel.to_bytes();
    let Some(i) = bytes.iter().rposition(|&b| b == b'/') else {
        if bytes.len() > MAX_AT_ONCE {
            return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
        }
        return Ok(At::Whole(root, rel));
    };
    let dir = open_dir_in_chunks(root, &bytes[..i])?;
    let name = CString::new(&bytes[i + 1..]).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    Ok(At::Parent(dir, name))
}

/// Addresses `rel` for `openat2`, which resolves beneath `root` without symlinks itself: the
/// whole path when it fits one call, else as [`at`] does.
pub(crate) fn at_for_openat2(root: RawFd, rel: &CStr) -> io::Result<At<'_>> {
    if rel.to_bytes().len() <= MAX_AT_ONCE {
        return Ok(At::Whole(root, rel));
    }
    at(root, rel)
}

/// Opens directory `path` below `root` as an `O_PATH` fd, at most `MAX_AT_ONCE` bytes a step.
fn open_dir_in_chunks(root: RawFd, path: &[u8]) -> io::Result<OwnedFd> {
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC | libc::O_NOFOLLOW;
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
        dir = Some(openat2(from, &chunk, flags, 0)?);
        rest = rest[take..].strip_prefix(b"/").unwrap_or(&rest[take..]);
    }
    match dir {
        Some(d) => Ok(d),
        None => openat2(root, c".", flags, 0),
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
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
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
