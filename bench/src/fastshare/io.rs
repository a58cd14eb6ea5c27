//! Open files, directories and xattrs. A file is the inode's O_PATH fd reopened with the caller's
//! flags (virtiofsd's `open_inode`); its data goes by FUSE passthrough when the kernel offers it,
//! as the share emulator's does, so the two shares differ in their metadata path only.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use fuser::BackingId;
use parking_lot::Mutex;
use seamfs::handles::{DirEntry, DirHandle, FileHandle, IoMode, Listing};

use super::ops::Found;
use super::sys::{self, AsCaller};
use super::FastShare;

/// An open file as the reply gives it.
pub struct Opened {
    /// The handle id.
    pub fh: u64,
    /// The passthrough registration, when the data goes by passthrough.
    pub backing: Option<Arc<BackingId>>,
}

impl FastShare {
    /// Opens node `id` with `flags`.
    pub(crate) fn open_node(&self, id: u64, flags: i32) -> io::Result<OwnedFd> {
        let n = self.inodes.get(id)?;
        sys::reopen(self.inodes.fd(&n)?.raw(), flags)
    }

    /// Creates and opens `name` in `parent` as the caller, then looks it up.
    pub(crate) fn create_file(
        &self,
        parent: u64,
        name: &OsStr,
        mode: u32,
        flags: i32,
        caller: (u32, u32),
    ) -> io::Result<(Found, OwnedFd)> {
        let p = self.inodes.get(parent)?;
        let pfd = self.inodes.fd(&p)?;
        let fd = {
            let _as = AsCaller::new(caller.0, caller.1);
            sys::openat(pfd.raw(), &sys::cname(name)?, (flags | libc::O_CREAT) & !libc::O_NOCTTY, mode)?
        };
        Ok((self.lookup_in(&p, name)?, fd))
    }

    /// Registers an open file: passthrough with the node's one registration when the kernel
    /// took passthrough at init (`register` makes one from the fd), else through this process.
    pub(crate) fn settle(
        &self,
        node: u64,
        fd: OwnedFd,
        flags: i32,
        register: impl FnOnce(&OwnedFd) -> io::Result<BackingId>,
    ) -> Opened {
        let mode = self.handles.choose_io(node, self.passthrough, || register(&fd));
        match mode {
            IoMode::Passthrough(id) => {
                let fh = self.handles.add_file(FileHandle::new(Some(fd), node, false, flags, 0, 0));
                self.handles.keep_backing(fh, node, id.clone());
                Opened { fh, backing: Some(id) }
            }
            IoMode::Cached => Opened { fh: self.handles.add_file(FileHandle::new(Some(fd), node, true, flags, 0, 0)), backing: None },
        }
    }

    /// The fd of an open file.
    fn handle_fd(&self, fh: u64) -> io::Result<Arc<FileHandle>> {
        let h = self.handles.file(fh).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
        if h.opened().is_none() {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        Ok(h)
    }

    /// `pread` into a buffer of `size`.
    pub(crate) fn read_at(&self, fh: u64, offset: u64, size: u32) -> io::Result<Vec<u8>> {
        let h = self.handle_fd(fh)?;
        let fd = h.opened().expect("checked by handle_fd").as_raw_fd();
        let mut buf = vec![0u8; size as usize];
        // SAFETY: a buffer of `size` bytes and an fd of ours.
        let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), offset as libc::off_t) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        buf.truncate(n as usize);
        Ok(buf)
    }

    /// `pwrite` of `data`.
    pub(crate) fn write_at(&self, fh: u64, offset: u64, data: &[u8]) -> io::Result<u32> {
        let h = self.handle_fd(fh)?;
        let fd = h.opened().expect("checked by handle_fd").as_raw_fd();
        // SAFETY: the caller's buffer and an fd of ours.
        let n = unsafe { libc::pwrite(fd, data.as_ptr().cast(), data.len(), offset as libc::off_t) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as u32)
    }

    /// fsync or fdatasync of an open file.
    pub(crate) fn sync_file(&self, fh: u64, datasync: bool) -> io::Result<()> {
        let h = self.handle_fd(fh)?;
        sync_fd(h.opened().expect("checked by handle_fd"), datasync)
    }

    /// fallocate on an open file.
    pub(crate) fn allocate(&self, fh: u64, offset: u64, length: u64, mode: i32) -> io::Result<()> {
        let h = self.handle_fd(fh)?;
        let fd = h.opened().expect("checked by handle_fd").as_raw_fd();
        // SAFETY: an fd of ours.
        sys::call(unsafe { libc::fallocate(fd, mode, offset as libc::off_t, length as libc::off_t) })
    }

    /// lseek (SEEK_DATA / SEEK_HOLE) on an open file.
    pub(crate) fn seek(&self, fh: u64, offset: i64, whence: i32) -> io::Result<i64> {
        let h = self.handle_fd(fh)?;
        let fd = h.opened().expect("checked by handle_fd").as_raw_fd();
        // SAFETY: an fd of ours.
        let r = unsafe { libc::lseek(fd, offset, whence) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(r)
    }

    /// Opens a directory: a handle only; the listing is read at the first readdir.
    pub(crate) fn open_dir(&self, id: u64) -> io::Result<u64> {
        self.inodes.get(id)?;
        let h = DirHandle { fd: Mutex::new(None), entries: Mutex::new(None), served: AtomicBool::new(false) };
        Ok(self.handles.add_dir(h))
    }

    /// The listing of directory `id` open as `fh`: read at offset 0 (again on a rewind), kept for
    /// the reads that continue it.
    pub(crate) fn listing(&self, id: u64, fh: u64, offset: u64) -> io::Result<Arc<Listing>> {
        use std::sync::atomic::Ordering;
        let h = self.handles.dir(fh).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
        let mut entries = h.entries.lock();
        if let Some(l) = entries.as_ref().filter(|_| offset != 0 || !h.served.load(Ordering::Relaxed)) {
            return Ok(l.clone());
        }
        let n = self.inodes.get(id)?;
        let listed = sys::list_dir(self.inodes.fd(&n)?.raw())?;
        let l = Arc::new(Listing::new(listed.into_iter().map(|(lower, ino, t)| entry(lower, ino, t)).collect()));
        h.served.store(true, Ordering::Relaxed);
        *entries = Some(l.clone());
        Ok(l)
    }

    /// fsync of a directory (opened for the call: the handle holds no fd).
    pub(crate) fn sync_dir(&self, id: u64, datasync: bool) -> io::Result<()> {
        sync_fd(&self.open_node(id, libc::O_RDONLY | libc::O_DIRECTORY)?, datasync)
    }

    /// getxattr (`size` 0 asks for the length) through `/proc/self/fd/N` of the O_PATH fd.
    pub(crate) fn get_xattr(&self, id: u64, name: &OsStr, size: u32) -> io::Result<Xattr> {
        let path = self.xattr_path(id)?;
        let c = sys::cname(name)?;
        let mut buf = vec![0u8; size as usize];
        // SAFETY: valid C strings and a buffer of `size` bytes (a null one asks for the length).
        let n = unsafe { libc::getxattr(path.as_ptr(), c.as_ptr(), buf_ptr(&mut buf), buf.len()) };
        xattr_reply(n, buf, size)
    }

    /// listxattr, as getxattr.
    pub(crate) fn list_xattr(&self, id: u64, size: u32) -> io::Result<Xattr> {
        let path = self.xattr_path(id)?;
        let mut buf = vec![0u8; size as usize];
        // SAFETY: as above.
        let n = unsafe { libc::listxattr(path.as_ptr(), buf_ptr(&mut buf).cast(), buf.len()) };
        xattr_reply(n, buf, size)
    }

    /// setxattr.
    pub(crate) fn set_xattr(&self, id: u64, name: &OsStr, value: &[u8], flags: i32) -> io::Result<()> {
        let path = self.xattr_path(id)?;
        let c = sys::cname(name)?;
        // SAFETY: valid C strings and the caller's value.
        sys::call(unsafe { libc::setxattr(path.as_ptr(), c.as_ptr(), value.as_ptr().cast(), value.len(), flags) })
    }

    /// removexattr.
    pub(crate) fn remove_xattr(&self, id: u64, name: &OsStr) -> io::Result<()> {
        let path = self.xattr_path(id)?;
        let c = sys::cname(name)?;
        // SAFETY: valid C strings.
        sys::call(unsafe { libc::removexattr(path.as_ptr(), c.as_ptr()) })
    }

    /// `/proc/self/fd/N` of a node, with its fd kept open while the path is used.
    fn xattr_path(&self, id: u64) -> io::Result<ProcPath> {
        let n = self.inodes.get(id)?;
        let fd = self.inodes.fd(&n)?;
        Ok(ProcPath { path: sys::proc_path(fd.raw()), _fd: fd })
    }
}

/// A /proc path and the fd it names (closing the fd first would make the path name another).
struct ProcPath {
    path: std::ffi::CString,
    _fd: Arc<super::inodes::HeldFd>,
}

impl ProcPath {
    fn as_ptr(&self) -> *const libc::c_char {
        self.path.as_ptr()
    }
}

/// An xattr reply: the length asked for, or the bytes.
pub enum Xattr {
    /// The value's length (`size` 0).
    Size(u32),
    /// The value.
    Data(Vec<u8>),
}

fn buf_ptr(buf: &mut [u8]) -> *mut libc::c_void {
    if buf.is_empty() {
        std::ptr::null_mut()
    } else {
        buf.as_mut_ptr().cast()
    }
}

fn xattr_reply(n: isize, mut buf: Vec<u8>, size: u32) -> io::Result<Xattr> {
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if size == 0 {
        return Ok(Xattr::Size(n as u32));
    }
    buf.truncate(n as usize);
    Ok(Xattr::Data(buf))
}

fn sync_fd(fd: &OwnedFd, datasync: bool) -> io::Result<()> {
    // SAFETY: an fd of ours.
    sys::call(unsafe { if datasync { libc::fdatasync(fd.as_raw_fd()) } else { libc::fsync(fd.as_raw_fd()) } })
}

/// A listed entry: `d_type` shifted is the mode's type (`DT_DIR << 12 == S_IFDIR`); unknown
/// reads as a file.
fn entry(lower: std::ffi::OsString, ino: u64, d_type: u8) -> DirEntry {
    DirEntry { lower, shown: None, ino, kind: seamfs::attr::file_type(u32::from(d_type) << 12) }
}
