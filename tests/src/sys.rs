//! Thin syscall wrappers that return the errno, so a result through the mount can be compared
//! with the same call on the lower, error for error.

use std::ffi::CString;
use std::fmt;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// An errno value, printed by name.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub i32);

impl Errno {
    /// The symbolic name (`ENOENT`), or the number.
    pub fn name(self) -> String {
        let known = [
            (libc::EPERM, "EPERM"),
            (libc::ENOENT, "ENOENT"),
            (libc::EIO, "EIO"),
            (libc::ENXIO, "ENXIO"),
            (libc::EBADF, "EBADF"),
            (libc::EAGAIN, "EAGAIN"),
            (libc::EACCES, "EACCES"),
            (libc::EBUSY, "EBUSY"),
            (libc::EEXIST, "EEXIST"),
            (libc::EXDEV, "EXDEV"),
            (libc::ENODEV, "ENODEV"),
            (libc::ENOTDIR, "ENOTDIR"),
            (libc::EISDIR, "EISDIR"),
            (libc::EINVAL, "EINVAL"),
            (libc::EMFILE, "EMFILE"),
            (libc::ENOSPC, "ENOSPC"),
            (libc::ESPIPE, "ESPIPE"),
            (libc::EROFS, "EROFS"),
            (libc::EMLINK, "EMLINK"),
            (libc::ERANGE, "ERANGE"),
            (libc::ENAMETOOLONG, "ENAMETOOLONG"),
            (libc::ENOSYS, "ENOSYS"),
            (libc::ENOTEMPTY, "ENOTEMPTY"),
            (libc::ELOOP, "ELOOP"),
            (libc::ENODATA, "ENODATA"),
            (libc::EOPNOTSUPP, "EOPNOTSUPP"),
            (libc::ENOTCONN, "ENOTCONN"),
            (libc::ESTALE, "ESTALE"),
            (libc::ETXTBSY, "ETXTBSY"),
            (libc::EFBIG, "EFBIG"),
            (libc::E2BIG, "E2BIG"),
        ];
        known
            .iter()
            .find(|(n, _)| *n == self.0)
            .map(|(_, s)| s.to_string())
            .unwrap_or_else(|| format!("errno {}", self.0))
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// A syscall's result.
pub type Sys<T> = Result<T, Errno>;

fn last() -> Errno {
    Errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
}

fn cvt(r: libc::c_int) -> Sys<libc::c_int> {
    if r < 0 {
        Err(last())
    } else {
        Ok(r)
    }
}

fn cvt_size(r: isize) -> Sys<usize> {
    if r < 0 {
        Err(last())
    } else {
        Ok(r as usize)
    }
}

/// A path as a C string.
pub fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).expect("no NUL in a test path")
}

/// stat(2).
pub fn stat(p: &Path) -> Sys<libc::stat> {
    // SAFETY: zeroed stat is valid; valid C string and out-pointer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    cvt(unsafe { libc::stat(cpath(p).as_ptr(), &mut st) })?;
    Ok(st)
}

/// lstat(2).
pub fn lstat(p: &Path) -> Sys<libc::stat> {
    // SAFETY: as in `stat`.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    cvt(unsafe { libc::lstat(cpath(p).as_ptr(), &mut st) })?;
    Ok(st)
}

/// fstat(2).
pub fn fstat(fd: &OwnedFd) -> Sys<libc::stat> {
    // SAFETY: as in `stat`, on an owned fd.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    cvt(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(st)
}

/// chmod(2).
pub fn chmod(p: &Path, mode: u32) -> Sys<()> {
    // SAFETY: valid C string.
    cvt(unsafe { libc::chmod(cpath(p).as_ptr(), mode) }).map(drop)
}

/// chown(2); u32::MAX leaves a field alone.
pub fn chown(p: &Path, uid: u32, gid: u32) -> Sys<()> {
    // SAFETY: valid C string.
    cvt(unsafe { libc::chown(cpath(p).as_ptr(), uid, gid) }).map(drop)
}

/// lchown(2).
pub fn lchown(p: &Path, uid: u32, gid: u32) -> Sys<()> {
    // SAFETY: valid C string.
    cvt(unsafe { libc::lchown(cpath(p).as_ptr(), uid, gid) }).map(drop)
}

/// truncate(2).
pub fn truncate(p: &Path, len: i64) -> Sys<()> {
    // SAFETY: valid C string.
    cvt(unsafe { libc::truncate(cpath(p).as_ptr(), len) }).map(drop)
}

/// ftruncate(2).
pub fn ftruncate(fd: &OwnedFd, len: i64) -> Sys<()> {
    // SAFETY: owned fd.
    cvt(unsafe { libc::ftruncate(fd.as_raw_fd(), len) }).map(drop)
}

/// utimensat(2) relative to the cwd; `nsec` may be `UTIME_OMIT` or `UTIME_NOW`.
pub fn utimens(p: &Path, atime: (i64, i64), mtime: (i64, i64), flags: i32) -> Sys<()> {
    let ts =
        [libc::timespec { tv_sec: atime.0, tv_nsec: atime.1 }, libc::timespec { tv_sec: mtime.0, tv_nsec: mtime.1 }];
    // SAFETY: valid C string and two timespecs.
    cvt(unsafe { libc::utimensat(libc::AT_FDCWD, cpath(p).as_ptr(), ts.as_ptr(), flags) }).map(drop)
}

/// readlink(2).
pub fn readlink(p: &Path) -> Sys<Vec<u8>> {
    let mut buf = vec![0u8; 4096];
    // SAFETY: valid C string and buffer of the given size.
    let n = cvt_size(unsafe { libc::readlink(cpath(p).as_ptr(), buf.as_mut_ptr().cast(), buf.len()) })?;
    buf.truncate(n);
    Ok(buf)
}

/// mknod(2).
pub fn mknod(p: &Path, mode: u32, dev: u64) -> Sys<()> {
    // SAFETY: valid C string.
    cvt(unsafe { libc::mknod(cpath(p).as_ptr(), mode, dev) }).map(drop)
}

/// mkfifo(3).
pub fn mkfifo(p: &Path, mode: u32) -> Sys<()> {
    // SAFETY: valid C string.
    cvt(unsafe { libc::mkfifo(cpath(p).as_ptr(), mode) }).map(drop)
}

/// mkdir(2).
pub fn mkdir(p: &Path, mode: u32) -> Sys<()> {
    // SAFETY: valid C string.
    cvt(unsafe { libc::mkdir(cpath(p).as_ptr(), mode) }).map(drop)
}

/// unlink(2).
pub fn unlink(p: &Path) -> Sys<()> {
    // SAFETY: valid C string.
    cvt(unsafe { libc::unlink(cpath(p).as_ptr()) }).map(drop)
}

/// rmdir(2).
pub fn rmdir(p: &Path) -> Sys<()> {
    // SAFETY: valid C string.
    cvt(unsafe { libc::rmdir(cpath(p).as_ptr()) }).map(drop)
}

/// symlink(2): `link` pointing at `target`.
pub fn symlink(target: &str, link: &Path) -> Sys<()> {
    let t = CString::new(target).expect("no NUL");
    // SAFETY: valid C strings.
    cvt(unsafe { libc::symlink(t.as_ptr(), cpath(link).as_ptr()) }).map(drop)
}

/// renameat2(2) with `flags` (RENAME_NOREPLACE, RENAME_EXCHANGE), by raw syscall.
pub fn rename2(from: &Path, to: &Path, flags: u32) -> Sys<()> {
    // SAFETY: valid C strings; renameat2 takes (olddirfd, oldpath, newdirfd, newpath, flags).
    let r = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            cpath(from).as_ptr(),
            libc::AT_FDCWD,
            cpath(to).as_ptr(),
            flags,
        )
    };
    cvt(r as libc::c_int).map(drop)
}

/// link(2).
pub fn link(from: &Path, to: &Path) -> Sys<()> {
    // SAFETY: valid C strings.
    cvt(unsafe { libc::link(cpath(from).as_ptr(), cpath(to).as_ptr()) }).map(drop)
}

/// open(2).
pub fn open(p: &Path, flags: i32, mode: u32) -> Sys<OwnedFd> {
    // SAFETY: valid C string; the fd is owned by the result.
    let fd = cvt(unsafe { libc::open(cpath(p).as_ptr(), flags | libc::O_CLOEXEC, mode) })?;
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// pread(2) of up to `len` bytes.
pub fn pread(fd: &OwnedFd, len: usize, off: i64) -> Sys<Vec<u8>> {
    let mut buf = vec![0u8; len];
    // SAFETY: owned fd and buffer of `len` bytes.
    let n = cvt_size(unsafe { libc::pread(fd.as_raw_fd(), buf.as_mut_ptr().cast(), len, off) })?;
    buf.truncate(n);
    Ok(buf)
}

/// read(2) at the file offset.
pub fn read(fd: &OwnedFd, len: usize) -> Sys<Vec<u8>> {
    let mut buf = vec![0u8; len];
    // SAFETY: owned fd and buffer of `len` bytes.
    let n = cvt_size(unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), len) })?;
    buf.truncate(n);
    Ok(buf)
}

/// pwrite(2).
pub fn pwrite(fd: &OwnedFd, data: &[u8], off: i64) -> Sys<usize> {
    // SAFETY: owned fd and buffer.
    cvt_size(unsafe { libc::pwrite(fd.as_raw_fd(), data.as_ptr().cast(), data.len(), off) })
}

/// write(2) at the file offset.
pub fn write(fd: &OwnedFd, data: &[u8]) -> Sys<usize> {
    // SAFETY: owned fd and buffer.
    cvt_size(unsafe { libc::write(fd.as_raw_fd(), data.as_ptr().cast(), data.len()) })
}

/// fsync(2).
pub fn fsync(fd: &OwnedFd) -> Sys<()> {
    // SAFETY: owned fd.
    cvt(unsafe { libc::fsync(fd.as_raw_fd()) }).map(drop)
}

/// fdatasync(2).
pub fn fdatasync(fd: &OwnedFd) -> Sys<()> {
    // SAFETY: owned fd.
    cvt(unsafe { libc::fdatasync(fd.as_raw_fd()) }).map(drop)
}

/// Every entry of a directory, `.` and `..` included, as sorted `(name, d_type)`.
pub fn readdir(p: &Path) -> Sys<Vec<(String, u8)>> {
    // SAFETY: valid C string; the DIR* is closed below.
    let dir = unsafe { libc::opendir(cpath(p).as_ptr()) };
    if dir.is_null() {
        return Err(last());
    }
    let mut out = Vec::new();
    loop {
        // SAFETY: valid DIR*; the entry is copied before the next call.
        let ent = unsafe { libc::readdir64(dir) };
        if ent.is_null() {
            break;
        }
        // SAFETY: a valid entry with a NUL-terminated name.
        let (name, ty) = unsafe {
            let e = &*ent;
            (std::ffi::CStr::from_ptr(e.d_name.as_ptr()).to_string_lossy().into_owned(), e.d_type)
        };
        out.push((name, ty));
    }
    // SAFETY: valid DIR*, closed once.
    unsafe { libc::closedir(dir) };
    out.sort();
    Ok(out)
}

/// statvfs(3).
pub fn statvfs(p: &Path) -> Sys<libc::statvfs> {
    // SAFETY: zeroed statvfs is valid; valid C string and out-pointer.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    cvt(unsafe { libc::statvfs(cpath(p).as_ptr(), &mut s) })?;
    Ok(s)
}

/// statfs(2) (for f_type).
pub fn statfs(p: &Path) -> Sys<libc::statfs> {
    // SAFETY: zeroed statfs is valid; valid C string and out-pointer.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    cvt(unsafe { libc::statfs(cpath(p).as_ptr(), &mut s) })?;
    Ok(s)
}

fn cname(name: &str) -> CString {
    CString::new(name).expect("no NUL")
}

/// setxattr(2) (or lsetxattr when `nofollow`).
pub fn setxattr(p: &Path, name: &str, value: &[u8], flags: i32, nofollow: bool) -> Sys<()> {
    let (p, n) = (cpath(p), cname(name));
    // SAFETY: valid C strings and value buffer.
    let r = unsafe {
        if nofollow {
            libc::lsetxattr(p.as_ptr(), n.as_ptr(), value.as_ptr().cast(), value.len(), flags)
        } else {
            libc::setxattr(p.as_ptr(), n.as_ptr(), value.as_ptr().cast(), value.len(), flags)
        }
    };
    cvt(r).map(drop)
}

/// getxattr(2) (or lgetxattr when `nofollow`) into a buffer of `size` bytes. With `size` 0
/// the call only asks for the value's length, returned as a vec of that many zeros.
pub fn getxattr(p: &Path, name: &str, size: usize, nofollow: bool) -> Sys<Vec<u8>> {
    let (p, n) = (cpath(p), cname(name));
    let mut buf = vec![0u8; size];
    let ptr = if size == 0 { std::ptr::null_mut() } else { buf.as_mut_ptr().cast() };
    // SAFETY: valid C strings and a buffer of `size` bytes (or null with size 0).
    let r = unsafe {
        if nofollow {
            libc::lgetxattr(p.as_ptr(), n.as_ptr(), ptr, size)
        } else {
            libc::getxattr(p.as_ptr(), n.as_ptr(), ptr, size)
        }
    };
    let len = cvt_size(r)?;
    if size == 0 {
        return Ok(vec![0u8; len]);
    }
    buf.truncate(len);
    Ok(buf)
}

/// listxattr(2): the sorted names.
pub fn listxattr(p: &Path) -> Sys<Vec<String>> {
    let c = cpath(p);
    let mut buf = vec![0u8; 65536];
    // SAFETY: valid C string and buffer.
    let n = cvt_size(unsafe { libc::listxattr(c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) })?;
    Ok(names_of(&buf[..n]))
}

/// The sorted names of a listxattr buffer.
fn names_of(buf: &[u8]) -> Vec<String> {
    let mut names: Vec<String> =
        buf.split(|b| *b == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned()).collect();
    names.sort();
    names
}

/// fchmod(2).
pub fn fchmod(fd: &OwnedFd, mode: u32) -> Sys<()> {
    // SAFETY: owned fd.
    cvt(unsafe { libc::fchmod(fd.as_raw_fd(), mode) }).map(drop)
}

/// fchown(2); u32::MAX leaves a field alone.
pub fn fchown(fd: &OwnedFd, uid: u32, gid: u32) -> Sys<()> {
    // SAFETY: owned fd.
    cvt(unsafe { libc::fchown(fd.as_raw_fd(), uid, gid) }).map(drop)
}

/// futimens(2).
pub fn futimens(fd: &OwnedFd, atime: (i64, i64), mtime: (i64, i64)) -> Sys<()> {
    let ts =
        [libc::timespec { tv_sec: atime.0, tv_nsec: atime.1 }, libc::timespec { tv_sec: mtime.0, tv_nsec: mtime.1 }];
    // SAFETY: owned fd and two timespecs.
    cvt(unsafe { libc::futimens(fd.as_raw_fd(), ts.as_ptr()) }).map(drop)
}

/// fsetxattr(2).
pub fn fsetxattr(fd: &OwnedFd, name: &str, value: &[u8], flags: i32) -> Sys<()> {
    let n = cname(name);
    // SAFETY: owned fd, valid C string and value buffer.
    cvt(unsafe { libc::fsetxattr(fd.as_raw_fd(), n.as_ptr(), value.as_ptr().cast(), value.len(), flags) }).map(drop)
}

/// fgetxattr(2) into a 4 KiB buffer.
pub fn fgetxattr(fd: &OwnedFd, name: &str) -> Sys<Vec<u8>> {
    let n = cname(name);
    let mut buf = vec![0u8; 4096];
    // SAFETY: owned fd, valid C string and buffer.
    let len = cvt_size(unsafe { libc::fgetxattr(fd.as_raw_fd(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) })?;
    buf.truncate(len);
    Ok(buf)
}

/// flistxattr(2): the sorted names.
pub fn flistxattr(fd: &OwnedFd) -> Sys<Vec<String>> {
    let mut buf = vec![0u8; 65536];
    // SAFETY: owned fd and buffer.
    let n = cvt_size(unsafe { libc::flistxattr(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) })?;
    Ok(names_of(&buf[..n]))
}

/// fremovexattr(2).
pub fn fremovexattr(fd: &OwnedFd, name: &str) -> Sys<()> {
    // SAFETY: owned fd and valid C string.
    cvt(unsafe { libc::fremovexattr(fd.as_raw_fd(), cname(name).as_ptr()) }).map(drop)
}

/// removexattr(2).
pub fn removexattr(p: &Path, name: &str) -> Sys<()> {
    // SAFETY: valid C strings.
    cvt(unsafe { libc::removexattr(cpath(p).as_ptr(), cname(name).as_ptr()) }).map(drop)
}

/// access(2).
pub fn access(p: &Path, mode: i32) -> Sys<()> {
    // SAFETY: valid C string.
    cvt(unsafe { libc::access(cpath(p).as_ptr(), mode) }).map(drop)
}

/// fallocate(2).
pub fn fallocate(fd: &OwnedFd, mode: i32, off: i64, len: i64) -> Sys<()> {
    // SAFETY: owned fd.
    cvt(unsafe { libc::fallocate(fd.as_raw_fd(), mode, off, len) }).map(drop)
}

/// lseek(2).
pub fn lseek(fd: &OwnedFd, off: i64, whence: i32) -> Sys<i64> {
    // SAFETY: owned fd.
    let r = unsafe { libc::lseek(fd.as_raw_fd(), off, whence) };
    if r < 0 {
        Err(last())
    } else {
        Ok(r)
    }
}

/// copy_file_range(2) between explicit offsets.
pub fn copy_file_range(src: &OwnedFd, off_in: i64, dst: &OwnedFd, off_out: i64, len: usize) -> Sys<usize> {
    let (mut a, mut b) = (off_in, off_out);
    // SAFETY: owned fds and offset pointers.
    cvt_size(unsafe { libc::copy_file_range(src.as_raw_fd(), &mut a, dst.as_raw_fd(), &mut b, len, 0) })
}
