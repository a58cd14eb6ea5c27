//! File data: open, create, read, write and the calls on an open file.
//!
//! With passthrough on, the kernel reads and writes the lower file itself (`BackingId`); without
//! it (kernels before 6.9, or `--no-passthrough`) seamfs does `pread`/`pwrite` on the handle.

use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use fuser::{BackingId, Errno, FopenFlags};

use super::namespace::Caller;
use super::{cvt, Core, Entry};
use crate::handles::FileHandle;
use crate::layer::Layer;
use crate::lower::{fstat, same_file};

/// A freshly opened file, ready to be registered once the reply can make a backing id.
#[derive(Debug)]
pub struct Opened {
    /// The lower file.
    pub fd: OwnedFd,
    /// Open flags for the reply.
    pub flags: FopenFlags,
    /// Whether the kernel should pass data through to `fd`.
    pub passthrough: bool,
    /// The node opened (passthrough registrations are shared per node).
    pub node: u64,
}

/// Flags the lower open must not see again.
const STRIP: i32 = libc::O_CREAT | libc::O_EXCL | libc::O_NOCTTY;

impl<L: Layer> Core<L> {
    fn fopen_flags(&self, id: u64) -> Result<(FopenFlags, bool), Errno> {
        let class = self.class_of(id)?;
        let p = self.policy(class);
        if p.direct_io {
            return Ok((FopenFlags::FOPEN_DIRECT_IO, false));
        }
        let pass = p.passthrough && self.passthrough_active();
        let mut flags = FopenFlags::empty();
        // Passthrough files have no page cache of their own; KEEP_CACHE only helps without it.
        if !pass && matches!(class, crate::policy::Class::Objects) {
            flags |= FopenFlags::FOPEN_KEEP_CACHE;
        }
        Ok((flags, pass))
    }

    /// OPEN by process `pid`: the lower file with the box's flags, verified to be the node's.
    pub fn open(&self, id: u64, flags: i32, pid: u32) -> Result<Opened, Errno> {
        let flags = flags & !STRIP;
        self.guard_open(id, flags, pid);
        let (dev, ino, pinned, class, kind) =
            self.inodes.with(id, |n| (n.dev, n.ino, n.pinned.clone(), n.class, n.kind))?;
        let fd = match pinned {
            // A pinned node reopens the very file it was looked up as.
            Some(p) => {
                let path = crate::lower::proc_fd_path(p.as_raw_fd());
                // SAFETY: valid C string; fd owned below.
                let fd = cvt(unsafe { libc::open(path.as_ptr(), (flags | libc::O_CLOEXEC) & !libc::O_NOFOLLOW) })?;
                // SAFETY: fresh fd.
                unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) }
            }
            None => {
                let path = self.inodes.path(id)?;
                let fd = match self.lower.open_at(&path, flags, 0) {
                    Ok(fd) => fd,
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Err(Errno::ESTALE),
                    Err(e) => return Err(Errno::from(e)),
                };
                let st = fstat(fd.as_raw_fd()).map_err(Errno::from)?;
                if !same_file(&st, dev, ino) && !super::serves_name(class, kind, &st) {
                    return Err(Errno::ESTALE);
                }
                fd
            }
        };
        let (fopen, passthrough) = self.fopen_flags(id)?;
        Ok(Opened { fd, flags: fopen, passthrough, node: id })
    }

    /// CREATE: O_EXCL is decided by the lower; only a file this call created changes owner.
    pub fn create(&self, parent: u64, name: &OsStr, mode: u32, umask: u32, flags: i32, who: Caller) -> Result<(Entry, Opened), Errno> {
        let child = self.new_child(parent, name)?;
        let path = child.path.clone();
        let mode = mode & !umask & 0o7777;
        let open_flags = flags & !STRIP;
        let class = self.child_class(parent, name, false)?;
        if class == crate::policy::Class::Lock {
            self.guard_lock_create(parent, &child)?;
        }
        let mut attempt = self.lower.open_at(&path, open_flags | libc::O_CREAT | libc::O_EXCL, mode);
        if class == crate::policy::Class::Lock && flags & libc::O_EXCL != 0 && is_eexist(&attempt) {
            // A host-held lock: wait for it (bounded) rather than fail the box command.
            self.wait_host_lock(&path);
            attempt = self.lower.open_at(&path, open_flags | libc::O_CREAT | libc::O_EXCL, mode);
        }
        let fd = match attempt {
            Ok(fd) => {
                if let Err(e) = self.give_to(parent, &path, who) {
                    let _ = self.lower.unlink(&path, false);
                    return Err(e);
                }
                fd
            }
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) && flags & libc::O_EXCL == 0 => {
                self.lower.open_at(&path, open_flags, 0).map_err(Errno::from)?
            }
            Err(e) => return Err(self.in_parent(parent, e)),
        };
        self.listings.forget(parent);
        // The entry comes from the new file's own fd: a path stat could meet a stale entry.
        let created = fstat(fd.as_raw_fd()).ok();
        let entry = match created {
            Some(st) => self.record_stat(parent, name, &child, st)?,
            None => self.record(parent, name, &child)?,
        };
        self.guard_created(parent, &child, class, who.pid, created.as_ref());
        let node = entry.attr.ino.0;
        let (fopen, passthrough) = self.fopen_flags(node)?;
        Ok((entry, Opened { fd, flags: fopen, passthrough, node }))
    }

    /// Registers an opened file; returns the handle id.
    pub fn register(&self, fd: OwnedFd, node: u64) -> u64 {
        self.handles.add_file(FileHandle { fd, node })
    }

    /// The passthrough registration for `node`'s open files, made by `make` when none is alive.
    pub fn shared_backing(
        &self,
        node: u64,
        make: impl FnOnce() -> std::io::Result<BackingId>,
    ) -> std::io::Result<std::sync::Arc<BackingId>> {
        self.handles.backing_for(node, make)
    }

    /// Keeps the kernel's passthrough registration of `fh` (on `node`) until release.
    pub fn keep_backing(&self, fh: u64, node: u64, id: std::sync::Arc<BackingId>) {
        self.handles.keep_backing(fh, node, id);
    }

    /// READ (when not passed through).
    pub fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        let h = self.handles.file(fh)?;
        let mut buf = vec![0u8; size as usize];
        let mut done = 0usize;
        while done < buf.len() {
            // SAFETY: valid fd and a buffer of at least the requested remaining length.
            let n = unsafe {
                libc::pread(
                    h.fd.as_raw_fd(),
                    buf[done..].as_mut_ptr().cast(),
                    buf.len() - done,
                    (offset + done as u64) as libc::off_t,
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return Err(Errno::from(e));
            }
            if n == 0 {
                break;
            }
            done += n as usize;
        }
        buf.truncate(done);
        Ok(buf)
    }

    /// WRITE (when not passed through).
    pub fn write(&self, fh: u64, offset: u64, data: &[u8]) -> Result<u32, Errno> {
        let h = self.handles.file(fh)?;
        // SAFETY: valid fd and buffer.
        let n = unsafe { libc::pwrite(h.fd.as_raw_fd(), data.as_ptr().cast(), data.len(), offset as libc::off_t) };
        if n < 0 {
            return Err(Errno::from(std::io::Error::last_os_error()));
        }
        Ok(n as u32)
    }

    /// FLUSH: close a duplicate, so the lower sees a close as it would without seamfs.
    pub fn flush(&self, fh: u64) -> Result<(), Errno> {
        let h = self.handles.file(fh)?;
        let dup = h.fd.as_fd().try_clone_to_owned().map_err(Errno::from)?;
        drop(dup);
        Ok(())
    }

    /// RELEASE.
    pub fn release(&self, fh: u64) {
        self.handles.remove_file(fh);
    }

    /// FSYNC.
    pub fn fsync(&self, fh: u64, datasync: bool) -> Result<(), Errno> {
        let h = self.handles.file(fh)?;
        sync_fd(h.fd.as_fd(), datasync)
    }

    /// LSEEK (SEEK_DATA / SEEK_HOLE need the lower).
    pub fn lseek(&self, fh: u64, offset: i64, whence: i32) -> Result<i64, Errno> {
        let h = self.handles.file(fh)?;
        // SAFETY: valid fd.
        let r = unsafe { libc::lseek(h.fd.as_raw_fd(), offset as libc::off_t, whence) };
        if r < 0 {
            return Err(Errno::from(std::io::Error::last_os_error()));
        }
        Ok(r as i64)
    }

    /// FALLOCATE.
    pub fn fallocate(&self, fh: u64, offset: u64, length: u64, mode: i32) -> Result<(), Errno> {
        let h = self.handles.file(fh)?;
        // SAFETY: valid fd.
        cvt(unsafe { libc::fallocate(h.fd.as_raw_fd(), mode, offset as libc::off_t, length as libc::off_t) }).map(drop)
    }

    /// COPY_FILE_RANGE, done by the lower where it can.
    pub fn copy_file_range(&self, fh_in: u64, off_in: u64, fh_out: u64, off_out: u64, len: u64) -> Result<u32, Errno> {
        let a = self.handles.file(fh_in)?;
        let b = self.handles.file(fh_out)?;
        let mut oi = off_in as libc::loff_t;
        let mut oo = off_out as libc::loff_t;
        // SAFETY: valid fds and offset pointers.
        let n = unsafe { libc::copy_file_range(a.fd.as_raw_fd(), &mut oi, b.fd.as_raw_fd(), &mut oo, len as usize, 0) };
        if n < 0 {
            return Err(Errno::from(std::io::Error::last_os_error()));
        }
        Ok(n as u32)
    }
}

fn is_eexist<T>(r: &std::io::Result<T>) -> bool {
    matches!(r, Err(e) if e.raw_os_error() == Some(libc::EEXIST))
}

/// fsync or fdatasync.
pub(crate) fn sync_fd(fd: BorrowedFd<'_>, datasync: bool) -> Result<(), Errno> {
    // SAFETY: valid fd.
    let r = unsafe {
        if datasync {
            libc::fdatasync(fd.as_raw_fd())
        } else {
            libc::fsync(fd.as_raw_fd())
        }
    };
    cvt(r).map(drop)
}
