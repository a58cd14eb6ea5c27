//! The FUSE glue of the fast share: each request one call into [`FastShare`], one reply site,
//! and a failed call logged (at debug) with its operation and the path it was on.

use std::ffi::OsStr;
use std::io;
use std::path::Path;
use std::time::SystemTime;

use fuser::{
    BsdFileFlags, Errno, FileHandle, Filesystem, FopenFlags, Generation, INodeNo, InitFlags, KernelConfig, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty,
    ReplyEntry, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use tracing::info;

use super::io::Xattr;
use super::ops::{Make, SetAttr};
use super::FastShare;

const GEN: Generation = Generation(0);

fn is_dot(name: &OsStr) -> bool {
    name == "." || name == ".."
}

fn caller(req: &Request) -> (u32, u32) {
    (req.uid(), req.gid())
}

impl FastShare {
    /// The errno for the kernel; the operation and path in the debug log (built only when it is on).
    fn fail(&self, op: &str, id: u64, name: Option<&OsStr>, e: io::Error) -> Errno {
        if tracing::enabled!(tracing::Level::DEBUG) {
            tracing::debug!(op, path = %self.describe(id, name), error = %e, "failed");
        }
        Errno::from(e)
    }

    fn reply_entry(&self, reply: ReplyEntry, op: &str, parent: u64, name: &OsStr, r: io::Result<super::ops::Found>) {
        match r {
            Ok(f) => reply.entry(&self.ttl, &f.attr, GEN),
            Err(e) => reply.error(self.fail(op, parent, Some(name), e)),
        }
    }

    fn reply_empty(&self, reply: ReplyEmpty, op: &str, id: u64, name: Option<&OsStr>, r: io::Result<()>) {
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.fail(op, id, name, e)),
        }
    }

    fn reply_xattr(&self, reply: ReplyXattr, op: &str, id: u64, r: io::Result<Xattr>) {
        match r {
            Ok(Xattr::Size(n)) => reply.size(n),
            Ok(Xattr::Data(d)) => reply.data(&d),
            Err(e) => reply.error(self.fail(op, id, None, e)),
        }
    }
}

impl Filesystem for FastShare {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        let caps = config.capabilities();
        // What virtiofsd asks for by default, readdirplus included (cache=auto).
        let plus = if self.readdirplus {
            InitFlags::FUSE_DO_READDIRPLUS | InitFlags::FUSE_READDIRPLUS_AUTO
        } else {
            InitFlags::empty()
        };
        let wanted = plus
            | InitFlags::FUSE_PARALLEL_DIROPS
            | InitFlags::FUSE_AUTO_INVAL_DATA
            | InitFlags::FUSE_ASYNC_READ
            | InitFlags::FUSE_ATOMIC_O_TRUNC;
        let _ = config.add_capabilities(wanted & caps);
        let _ = config.set_max_background(64);
        // One stacking level: seamfs over this share takes the second.
        self.passthrough = self.want_passthrough
            && caps.contains(InitFlags::FUSE_PASSTHROUGH)
            && config.set_max_stack_depth(1).is_ok()
            && config.add_capabilities(InitFlags::FUSE_PASSTHROUGH).is_ok();
        info!(
            abi = %config.kernel_abi(),
            passthrough = self.passthrough,
            readdirplus = self.readdirplus,
            budget = self.budget,
            "fast share initialised"
        );
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let r = self.lookup_name(parent.0, name);
        match r {
            Ok(f) => reply.entry(&self.ttl, &f.attr, GEN),
            // A missing name is an error reply, as virtiofsd gives: the kernel caches no negative entry.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => reply.error(Errno::ENOENT),
            Err(e) => reply.error(self.fail("lookup", parent.0, Some(name), e)),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.inodes.forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr(ino.0, fh.map(|f| f.0)) {
            Ok(a) => reply.attr(&self.ttl, &a),
            Err(e) => reply.error(self.fail("getattr", ino.0, None, e)),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let set = SetAttr { mode, uid, gid, size, atime, mtime };
        match self.set_attr(ino.0, fh.map(|f| f.0), &set) {
            Ok(a) => reply.attr(&self.ttl, &a),
            Err(e) => reply.error(self.fail("setattr", ino.0, None, e)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.read_link(ino.0) {
            Ok(d) => reply.data(&d),
            Err(e) => reply.error(self.fail("readlink", ino.0, None, e)),
        }
    }

    fn mknod(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, _umask: u32, rdev: u32, reply: ReplyEntry) {
        let r = self.make(parent.0, name, caller(req), Make::Node(mode, rdev));
        self.reply_entry(reply, "mknod", parent.0, name, r);
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, _umask: u32, reply: ReplyEntry) {
        let r = self.make(parent.0, name, caller(req), Make::Dir(mode));
        self.reply_entry(reply, "mkdir", parent.0, name, r);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = self.remove(parent.0, name, false);
        self.reply_empty(reply, "unlink", parent.0, Some(name), r);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = self.remove(parent.0, name, true);
        self.reply_empty(reply, "rmdir", parent.0, Some(name), r);
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let r = self.make(parent.0, link_name, caller(req), Make::Symlink(target));
        self.reply_entry(reply, "symlink", parent.0, link_name, r);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let r = self.rename(parent.0, name, newparent.0, newname, flags.bits());
        self.reply_empty(reply, "rename", parent.0, Some(name), r);
    }

    fn link(&self, _req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        let r = self.hard_link(ino.0, newparent.0, newname);
        self.reply_entry(reply, "link", newparent.0, newname, r);
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.open_node(ino.0, flags.0) {
            Ok(fd) => {
                let o = self.settle(ino.0, fd, flags.0, |fd| reply.open_backing(fd));
                match &o.backing {
                    Some(id) => reply.opened_passthrough(FileHandle(o.fh), FopenFlags::FOPEN_PASSTHROUGH, id),
                    // cache=auto: neither KEEP_CACHE nor DIRECT_IO, as virtiofsd opens.
                    None => reply.opened(FileHandle(o.fh), FopenFlags::empty()),
                }
            }
            Err(e) => reply.error(self.fail("open", ino.0, None, e)),
        }
    }

    fn create(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, _umask: u32, flags: i32, reply: ReplyCreate) {
        match self.create_file(parent.0, name, mode, flags, caller(req)) {
            Ok((f, fd)) => {
                let o = self.settle(f.node.id, fd, flags, |fd| reply.open_backing(fd));
                match &o.backing {
                    Some(id) => {
                        reply.created_passthrough(&self.ttl, &f.attr, GEN, FileHandle(o.fh), FopenFlags::FOPEN_PASSTHROUGH, id)
                    }
                    None => reply.created(&self.ttl, &f.attr, GEN, FileHandle(o.fh), FopenFlags::empty()),
                }
            }
            Err(e) => reply.error(self.fail("create", parent.0, Some(name), e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.read_at(fh.0, offset, size) {
            Ok(d) => reply.data(&d),
            Err(e) => reply.error(self.fail("read", ino.0, None, e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.write_at(fh.0, offset, data) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(self.fail("write", ino.0, None, e)),
        }
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        // Writes reach the backing file at once (no writeback cache): nothing is held back here.
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.handles.remove_file(fh.0);
        reply.ok();
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        let r = self.sync_file(fh.0, datasync);
        self.reply_empty(reply, "fsync", ino.0, None, r);
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.open_dir(ino.0) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(self.fail("opendir", ino.0, None, e)),
        }
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let l = match self.listing(ino.0, fh.0, offset) {
            Ok(l) => l,
            Err(e) => return reply.error(self.fail("readdir", ino.0, None, e)),
        };
        for (i, e) in l.entries.iter().enumerate().skip(seamfs::handles::Listing::index(offset)) {
            if reply.add(INodeNo(e.ino), l.offset(i), e.kind, e.name()) {
                break;
            }
        }
        reply.ok();
    }

    fn readdirplus(&self, _req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectoryPlus) {
        let l = match self.listing(ino.0, fh.0, offset) {
            Ok(l) => l,
            Err(e) => return reply.error(self.fail("readdirplus", ino.0, None, e)),
        };
        let parent = match self.inodes.get(ino.0) {
            Ok(p) => p,
            Err(e) => return reply.error(self.fail("readdirplus", ino.0, None, e)),
        };
        for (i, e) in l.entries.iter().enumerate().skip(seamfs::handles::Listing::index(offset)) {
            if is_dot(e.name()) {
                // The kernel takes no lookup for these: answer with the directory's own attributes.
                let Ok(attr) = self.attr(ino.0, None) else { continue };
                if reply.add(INodeNo(ino.0), l.offset(i), e.name(), &self.ttl, &attr, GEN) {
                    break;
                }
                continue;
            }
            // Each entry is a lookup, as virtiofsd's readdirplus does; one gone since the listing is left out.
            let Ok(f) = self.lookup_in(&parent, e.name()) else { continue };
            if reply.add(INodeNo(f.node.id), l.offset(i), e.name(), &self.ttl, &f.attr, GEN) {
                // It did not fit: the kernel never saw it, so it holds no lookup of it.
                self.inodes.unlookup(&f.node);
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        self.handles.remove_dir(fh.0);
        reply.ok();
    }

    fn fsyncdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        let r = self.sync_dir(ino.0, datasync);
        self.reply_empty(reply, "fsyncdir", ino.0, None, r);
    }

    fn statfs(&self, _req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        match self.stat_fs() {
            Ok(s) => reply.statfs(
                s.f_blocks,
                s.f_bfree,
                s.f_bavail,
                s.f_files,
                s.f_ffree,
                s.f_bsize as u32,
                s.f_namemax as u32,
                s.f_frsize as u32,
            ),
            Err(e) => reply.error(self.fail("statfs", ino.0, None, e)),
        }
    }

    fn setxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, value: &[u8], flags: i32, _position: u32, reply: ReplyEmpty) {
        let r = self.set_xattr(ino.0, name, value, flags);
        self.reply_empty(reply, "setxattr", ino.0, None, r);
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let r = self.get_xattr(ino.0, name, size);
        self.reply_xattr(reply, "getxattr", ino.0, r);
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let r = self.list_xattr(ino.0, size);
        self.reply_xattr(reply, "listxattr", ino.0, r);
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = self.remove_xattr(ino.0, name);
        self.reply_empty(reply, "removexattr", ino.0, None, r);
    }

    fn fallocate(&self, _req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, length: u64, mode: i32, reply: ReplyEmpty) {
        let r = self.allocate(fh.0, offset, length, mode);
        self.reply_empty(reply, "fallocate", ino.0, None, r);
    }

    fn lseek(&self, _req: &Request, ino: INodeNo, fh: FileHandle, offset: i64, whence: i32, reply: ReplyLseek) {
        match self.seek(fh.0, offset, whence) {
            Ok(o) => reply.offset(o),
            Err(e) => reply.error(self.fail("lseek", ino.0, None, e)),
        }
    }
}
