//! The few syscalls the fast share makes, on fds: `*at` calls relative to an inode's O_PATH fd,
//! and `/proc/self/fd/N` for the calls that take no fd (as virtiofsd reaches them).

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

/// `-1` → the thread's errno.
fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// A name as a C string; a NUL inside is EINVAL (the kernel never sends one).
pub fn cname(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `/proc/self/fd/N`: reopens, chmods and xattr calls go through it, since an O_PATH fd takes none.
pub fn proc_path(fd: RawFd) -> CString {
    seamfs::lower::proc_fd_path(fd)
}

/// `openat(dir, name, flags)` with O_CLOEXEC.
pub fn openat(dir: RawFd, name: &CStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    // SAFETY: valid C string; the fd is checked and owned at once.
    let fd = check(unsafe { libc::openat(dir, name.as_ptr(), flags | libc::O_CLOEXEC, mode) })?;
    // SAFETY: a fresh fd of ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An O_PATH fd on `name` in `dir`, not following a symlink: what virtiofsd holds per inode.
pub fn open_path(dir: RawFd, name: &CStr) -> io::Result<OwnedFd> {
    openat(dir, name, libc::O_PATH | libc::O_NOFOLLOW, 0)
}

/// `/proc/self/fd` as a directory fd, opened on first use: in the serving process, after the
/// daemon forked (opened before, it would name the parent's fds). Reopens go relative to it, as
/// virtiofsd's do, instead of walking `/proc/self` each time.
fn proc_fd_dir() -> io::Result<RawFd> {
    static DIR: std::sync::OnceLock<OwnedFd> = std::sync::OnceLock::new();
    if let Some(d) = DIR.get() {
        return Ok(d.as_raw_fd());
    }
    let d = openat(libc::AT_FDCWD, c"/proc/self/fd", libc::O_PATH | libc::O_DIRECTORY, 0)?;
    Ok(DIR.get_or_init(|| d).as_raw_fd())
}

/// Opens the file an O_PATH fd names, with real access flags.
pub fn reopen(fd: RawFd, flags: i32) -> io::Result<OwnedFd> {
    // The kernel did the create and the permission checks; O_NOFOLLOW would refuse the magic link.
    let flags = flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOCTTY | libc::O_NOFOLLOW);
    let name = CString::new(fd.to_string()).expect("digits have no NUL");
    openat(proc_fd_dir()?, &name, flags, 0)
}

/// The entries of the directory an O_PATH fd names, `.` and `..` included, with their inode
/// numbers and `d_type`s: opened relative to the fd (no /proc walk) and read by `readdir`.
pub fn list_dir(dir: RawFd) -> io::Result<Vec<(std::ffi::OsString, u64, u8)>> {
    let fd = openat(dir, c".", libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
    // SAFETY: fdopendir takes the fd (closedir closes it); on failure it is still ours to close.
    let d = unsafe { libc::fdopendir(fd.as_raw_fd()) };
    if d.is_null() {
        return Err(io::Error::last_os_error());
    }
    std::mem::forget(fd);
    let mut out = Vec::new();
    loop {
        // SAFETY: a live DIR stream; errno is cleared first to tell the end from an error.
        unsafe { *libc::__errno_location() = 0 };
        let e = unsafe { libc::readdir64(d) };
        if e.is_null() {
            let err = io::Error::last_os_error();
            // SAFETY: the stream is closed once, here.
            unsafe { libc::closedir(d) };
            return match err.raw_os_error() {
                Some(0) | None => Ok(out),
                _ => Err(err),
            };
        }
        // SAFETY: readdir64 returned a valid entry whose name is NUL-terminated.
        let (name, ino, kind) = unsafe { (CStr::from_ptr((*e).d_name.as_ptr()), (*e).d_ino, (*e).d_type) };
        out.push((OsStr::from_bytes(name.to_bytes()).to_os_string(), ino, kind));
    }
}

/// `fstat` (works on O_PATH fds).
pub fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    seamfs::lower::fstat(fd)
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`.
pub fn lstatat(dir: RawFd, name: &CStr) -> io::Result<libc::stat> {
    let mut st = seamfs::lower::empty_stat();
    // SAFETY: valid C string and out-pointer.
    check(unsafe { libc::fstatat(dir, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) })?;
    Ok(st)
}

/// Runs a syscall returning 0 or -1.
pub fn call(r: libc::c_int) -> io::Result<()> {
    check(r).map(|_| ())
}

/// `readlinkat(fd, "")` on a symlink's O_PATH fd.
pub fn readlink(fd: RawFd) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: buffer of the given length; an empty path names the fd itself.
    let n = unsafe { libc::readlinkat(fd, c"".as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// `utimensat(fd, "", times, AT_EMPTY_PATH)`: the inode itself, symlink or not.
pub fn utimens(fd: RawFd, times: &[libc::timespec; 2]) -> io::Result<()> {
    // SAFETY: an empty path with AT_EMPTY_PATH names the fd; two timespecs.
    call(unsafe { libc::utimensat(fd, c"".as_ptr(), times.as_ptr(), libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW) })
}

/// `fchownat(fd, "", uid, gid, AT_EMPTY_PATH)`; `u32::MAX` leaves an id as it is.
pub fn chown(fd: RawFd, uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: as above.
    call(unsafe { libc::fchownat(fd, c"".as_ptr(), uid, gid, libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW) })
}

/// The open file a setattr may name, else a fresh one for the call.
pub enum Target<'a> {
    /// An open handle of the caller's.
    Handle(&'a OwnedFd),
    /// Only the inode's O_PATH fd.
    Path(RawFd),
}

impl Target<'_> {
    /// `ftruncate` on the handle, else on a write-only reopen of the inode.
    pub fn truncate(&self, size: u64) -> io::Result<()> {
        let len = libc::off_t::try_from(size).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
        match self {
            // SAFETY: an open fd of ours.
            Target::Handle(fd) => call(unsafe { libc::ftruncate(fd.as_raw_fd(), len) }),
            Target::Path(fd) => {
                let f = reopen(*fd, libc::O_WRONLY)?;
                // SAFETY: as above.
                call(unsafe { libc::ftruncate(f.as_raw_fd(), len) })
            }
        }
    }

    /// `fchmod` on the handle, else `chmod` through /proc (fchmod refuses O_PATH fds).
    pub fn chmod(&self, mode: u32) -> io::Result<()> {
        match self {
            // SAFETY: an open fd of ours.
            Target::Handle(fd) => call(unsafe { libc::fchmod(fd.as_raw_fd(), mode) }),
            // SAFETY: a valid C string.
            Target::Path(fd) => call(unsafe { libc::chmod(proc_path(*fd).as_ptr(), mode) }),
        }
    }
}

/// The caller's fs uid and gid on this thread while creating, so new files are theirs (virtiofsd
/// switches credentials the same way); back to root when dropped.
pub struct AsCaller {
    switched: bool,
}

impl AsCaller {
    /// Switches this thread's fsuid/fsgid to `uid`/`gid` (nothing to do for root).
    pub fn new(uid: u32, gid: u32) -> AsCaller {
        if uid == 0 && gid == 0 {
            return AsCaller { switched: false };
        }
        // SAFETY: setfsuid/setfsgid act on this thread only and cannot fail in a way that matters
        // here (a refused switch leaves root, which the kernel's own permission check already vetted).
        unsafe {
            libc::setfsgid(gid);
            libc::setfsuid(uid);
        }
        AsCaller { switched: true }
    }
}

impl Drop for AsCaller {
    fn drop(&mut self) {
        if self.switched {
            // SAFETY: as above.
            unsafe {
                libc::setfsuid(0);
                libc::setfsgid(0);
            }
        }
    }
}

/// A time from FUSE's setattr as a timespec (`UTIME_OMIT` when not given).
pub fn timespec(t: Option<fuser::TimeOrNow>) -> libc::timespec {
    use std::time::UNIX_EPOCH;
    match t {
        None => libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_OMIT },
        Some(fuser::TimeOrNow::Now) => libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_NOW },
        Some(fuser::TimeOrNow::SpecificTime(t)) => match t.duration_since(UNIX_EPOCH) {
            Ok(d) => libc::timespec { tv_sec: d.as_secs() as libc::time_t, tv_nsec: d.subsec_nanos() as libc::c_long },
            Err(e) => {
                // Before 1970: seconds floor towards minus infinity, nanoseconds stay positive.
                let d = e.duration();
                let (mut s, mut ns) = (-(d.as_secs() as i64), -(d.subsec_nanos() as i64));
                if ns < 0 {
                    s -= 1;
                    ns += 1_000_000_000;
                }
                libc::timespec { tv_sec: s as libc::time_t, tv_nsec: ns as libc::c_long }
            }
        },
    }
}
