//! The FUSE glue: each request becomes one call into `Core`, with one reply site and a debug span.

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::path::Path;
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, BackingId, BsdFileFlags, CopyFileRangeFlags, Errno, FileAttr, FileHandle, Filesystem, FopenFlags, Generation, INodeNo,
    InitFlags, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request,
    TimeOrNow, WriteFlags,
};
use tracing::{debug, debug_span, info};

use crate::attr::attr_stamp;
use crate::core::{Caller, Core, Entry, Opened, XattrReply};
use crate::handles::IoMode;
use crate::layer::Layer;


fn caller(req: &Request) -> Caller {
    Caller { uid: req.uid(), gid: req.gid(), pid: req.pid() }
}

fn reply_empty(reply: ReplyEmpty, r: Result<(), Errno>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

fn reply_xattr(reply: ReplyXattr, r: Result<XattrReply, Errno>) {
    match r {
        Ok(XattrReply::Size(n)) => reply.size(n),
        Ok(XattrReply::Data(d)) => reply.data(&d),
        Err(e) => reply.error(e),
    }
}

/// How an open is answered: its handle, its flags and its passthrough registration, if any.
struct Settled {
    fh: FileHandle,
    flags: FopenFlags,
    backing: Option<Arc<BackingId>>,
}

impl<L: Layer> Core<L> {
    /// Registers an opened file: with passthrough when it was asked for, the node's other open
    /// files allow it and the kernel takes the backing file (`open_backing`); else through the
    /// page cache (or direct I/O, as its class says).
    fn settle(&self, o: Opened, open_backing: impl FnOnce(&OwnedFd) -> std::io::Result<BackingId>) -> Settled {
        if o.flags.contains(FopenFlags::FOPEN_DIRECT_IO) {
            let flags = o.flags;
            return Settled { fh: FileHandle(self.register(o, false)), flags, backing: None };
        }
        if o.counted {
            // A live ref's page-cache open, counted when its file was checked (ADR 0040).
            let flags = self.cached_open_flags(&o);
            return Settled { fh: FileHandle(self.register(o, true)), flags, backing: None };
        }
        let make = || match &o.fd {
            Some(fd) => open_backing(fd),
            None => Err(std::io::Error::from_raw_os_error(libc::EBADF)),
        };
        match self.choose_io(o.node, o.passthrough, make) {
            IoMode::Passthrough(id) => {
                let (node, flags) = (o.node, (o.flags - FopenFlags::FOPEN_KEEP_CACHE) | FopenFlags::FOPEN_PASSTHROUGH);
                self.passthrough_opened(node);
                let fh = self.register(o, false);
                self.keep_backing(fh, node, id.clone());
                Settled { fh: FileHandle(fh), flags, backing: Some(id) }
            }
            IoMode::Cached => {
                let flags = self.cached_open_flags(&o);
                Settled { fh: FileHandle(self.register(o, true)), flags, backing: None }
            }
        }
    }

    fn reply_opened(&self, reply: ReplyOpen, o: Opened) {
        let s = self.settle(o, |fd| reply.open_backing(fd));
        tracing::debug!(fh = s.fh.0, flags = ?s.flags, passthrough = s.backing.is_some(), "opened");
        match &s.backing {
            Some(id) => reply.opened_passthrough(s.fh, s.flags, id),
            None => reply.opened(s.fh, s.flags),
        }
    }

    /// Replies to a request that looked a name up (or made one); notes the attributes given.
    fn reply_entry(&self, reply: ReplyEntry, r: Result<Entry, Errno>) {
        match r {
            Ok(e) => {
                self.inodes.note_given(e.attr.ino.0, attr_stamp(&e.attr));
                reply.entry_with_ttls(&e.attr_ttl, &e.entry_ttl, &e.attr, Generation(e.generation))
            }
            Err(e) => reply.error(e),
        }
    }

    /// Replies with attributes; notes them as the ones the kernel holds (`Core::open`).
    /// (`attr.ino` may differ from the node: a live ref's name holding a newer file, ADR 0038.)
    fn reply_attr(&self, reply: ReplyAttr, node: u64, r: Result<(FileAttr, Duration), Errno>) {
        match r {
            Ok((attr, ttl)) => {
                self.inodes.note_given(node, attr_stamp(&attr));
                reply.attr(&ttl, &attr)
            }
            Err(e) => reply.error(e),
        }
    }

    fn reply_created(&self, reply: ReplyCreate, e: Entry, o: Opened) {
        self.inodes.note_given(e.attr.ino.0, attr_stamp(&e.attr));
        let s = self.settle(o, |fd| reply.open_backing(fd));
        match &s.backing {
            Some(id) => reply.created_passthrough(&e.entry_ttl, &e.attr, Generation(e.generation), s.fh, s.flags, id),
            None => reply.created(&e.entry_ttl, &e.attr, Generation(e.generation), s.fh, s.flags),
        }
    }
}

impl<L: Layer> Filesystem for Core<L> {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let caps = config.capabilities();
        let wanted = InitFlags::FUSE_DO_READDIRPLUS
            | InitFlags::FUSE_READDIRPLUS_AUTO
            | InitFlags::FUSE_PARALLEL_DIROPS
            | InitFlags::FUSE_ATOMIC_O_TRUNC;
        let _ = config.add_capabilities(wanted & caps);
        let _ = config.set_max_background(64);
        let pass = self.opts.passthrough
            && caps.contains(InitFlags::FUSE_PASSTHROUGH)
            && config.set_max_stack_depth(self.opts.max_stack_depth).is_ok()
            && config.add_capabilities(InitFlags::FUSE_PASSTHROUGH).is_ok();
        self.set_passthrough(pass);
        // An option the kernel may refuse: on only when wanted, offered and taken.
        let mut opt_in = |wanted: bool, flag: InitFlags| wanted && caps.contains(flag) && config.add_capabilities(flag).is_ok();
        let writeback = opt_in(self.opts.writeback_cache, InitFlags::FUSE_WRITEBACK_CACHE);
        self.set_writeback(writeback);
        let killpriv = opt_in(self.opts.kill_privs, InitFlags::FUSE_HANDLE_KILLPRIV_V2);
        self.set_killpriv(killpriv);
        // Said in words: a VM maker reads this line to learn which path a guest kernel runs.
        let data_path = match (pass, caps.contains(InitFlags::FUSE_PASSTHROUGH)) {
            (true, _) => "FUSE passthrough",
            (false, true) => "reads and writes through seamfs (passthrough turned off)",
            (false, false) => "reads and writes through seamfs (the kernel offers no FUSE passthrough)",
        };
        info!(
            abi = %config.kernel_abi(),
            data_path,
            passthrough = pass,
            writeback,
            killpriv,
            offered = caps.contains(InitFlags::FUSE_PASSTHROUGH),
            "kernel connection initialised"
        );
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        {
            let _s = debug_span!("lookup", parent = parent.0, ?name).entered();
            let _r = crate::refresh_scope::RefreshScope::begin();
            self.reply_entry(reply, Core::lookup(self, parent.0, name, req.pid()));
        }
        // Git goes on with its next requests on the other threads meanwhile (ADR 0059).
        self.heal_if_due();
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        Core::forget(self, ino.0, nlookup);
    }

    fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let _s = debug_span!("getattr", ino = ino.0).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        self.reply_attr(reply, ino.0, Core::getattr(self, ino.0, fh.map(|f| f.0), req.pid()));
    }

    fn setattr(
        &self,
        req: &Request,
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
        let _s = debug_span!("setattr", ino = ino.0, ?mode, ?uid, ?gid, ?size).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        crate::feed::touch(req.pid(), ino.0);
        // The change feed raising the box's watchers: answered as a getattr, the lower untouched.
        let r = if crate::feed::is_poke(req.pid()) && mode.is_none() && uid.is_none() && gid.is_none() && size.is_none() {
            Core::getattr(self, ino.0, fh.map(|f| f.0), req.pid())
        } else {
            Core::setattr(self, ino.0, fh.map(|f| f.0), mode, uid, gid, size, atime, mtime, req.uid(), req.pid())
        };
        self.reply_attr(reply, ino.0, r);
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let _s = debug_span!("readlink", ino = ino.0).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        match Core::readlink(self, ino.0) {
            Ok(d) => reply.data(&d),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, rdev: u32, reply: ReplyEntry) {
        let _s = debug_span!("mknod", parent = parent.0, ?name, mode).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        crate::feed::touch(req.pid(), parent.0);
        self.reply_entry(reply, Core::mknod(self, parent.0, name, mode, umask, rdev, caller(req)));
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let _s = debug_span!("mkdir", parent = parent.0, ?name, mode).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        crate::feed::touch(req.pid(), parent.0);
        self.reply_entry(reply, Core::mkdir(self, parent.0, name, mode, umask, caller(req)));
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _s = debug_span!("unlink", parent = parent.0, ?name).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        crate::feed::touch(req.pid(), parent.0);
        // The change feed telling the box's watchers of a name the host removed (IN_DELETE):
        // the kernel drops its entry; the lower, which lacks the name already, is untouched.
        if crate::feed::is_poke(req.pid()) {
            return reply.ok();
        }
        reply_empty(reply, Core::unlink(self, parent.0, name, req.pid()));
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _s = debug_span!("rmdir", parent = parent.0, ?name).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        crate::feed::touch(req.pid(), parent.0);
        if crate::feed::is_poke(req.pid()) {
            return reply.ok();
        }
        reply_empty(reply, Core::rmdir(self, parent.0, name));
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let _s = debug_span!("symlink", parent = parent.0, name = ?link_name).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        crate::feed::touch(req.pid(), parent.0);
        self.reply_entry(reply, Core::symlink(self, parent.0, link_name, target, caller(req)));
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let _s = debug_span!("rename", parent = parent.0, ?name, newparent = newparent.0, ?newname).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        crate::feed::touch(req.pid(), parent.0);
        crate::feed::touch(req.pid(), newparent.0);
        reply_empty(reply, Core::rename(self, parent.0, name, newparent.0, newname, flags.bits(), req.pid()));
    }

    fn link(&self, req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        let _s = debug_span!("link", ino = ino.0, newparent = newparent.0, ?newname).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        crate::feed::touch(req.pid(), newparent.0);
        self.reply_entry(reply, Core::link(self, ino.0, newparent.0, newname));
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        {
            let _s = debug_span!("open", ino = ino.0, flags = flags.0).entered();
            let _r = crate::refresh_scope::RefreshScope::begin();
            match Core::open(self, ino.0, flags.0, req.pid()) {
                Ok(o) => match self.kill_privs_after_open(req.uid(), &o) {
                    Ok(()) => self.reply_opened(reply, o),
                    Err(e) => reply.error(e),
                },
                Err(e) => reply.error(e),
            }
        }
        self.heal_if_due();
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
        let _s = debug_span!("read", ino = ino.0, offset, size).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        match Core::read(self, fh.0, offset, size) {
            Ok(d) => reply.data(&d),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let _s = debug_span!("write", ino = ino.0, offset, len = data.len()).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        crate::feed::touch(req.pid(), ino.0);
        if write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID) {
            if let Err(e) = Core::kill_privs_of_handle(self, fh.0) {
                return reply.error(e);
            }
        }
        match Core::write(self, fh.0, offset, data) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }

    fn flush(&self, _req: &Request, ino: INodeNo, fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        let _s = debug_span!("flush", ino = ino.0).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        reply_empty(reply, Core::flush(self, fh.0));
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let _s = debug_span!("release", ino = ino.0).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        Core::release(self, fh.0);
        reply.ok();
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        let _s = debug_span!("fsync", ino = ino.0).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        reply_empty(reply, Core::fsync(self, fh.0, datasync));
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let _s = debug_span!("opendir", ino = ino.0).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        match Core::opendir(self, ino.0) {
            Ok((fh, flags)) => reply.opened(FileHandle(fh), flags),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let _s = debug_span!("readdir", ino = ino.0, offset).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        match Core::readdir(self, ino.0, fh.0, offset, usize::MAX) {
            Ok(page) => {
                for (next, e) in page.entries() {
                    if reply.add(INodeNo(e.ino.max(1)), next, e.kind, e.name()) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(e),
        }
    }

    fn readdirplus(&self, _req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectoryPlus) {
        let _s = debug_span!("readdirplus", ino = ino.0, offset).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        match Core::readdir(self, ino.0, fh.0, offset, usize::MAX) {
            Ok(page) => {
                for (next, e) in page.entries() {
                    let Some(entry) = self.plus_entry(ino.0, fh.0, e.name(), &e.lower) else { continue };
                    self.inodes.note_given(entry.attr.ino.0, attr_stamp(&entry.attr));
                    if reply.add(entry.attr.ino, next, e.name(), &entry.entry_ttl, &entry.attr, Generation(entry.generation)) {
                        // The buffer is full: the kernel never saw this entry, so undo its count.
                        if e.name() != "." && e.name() != ".." {
                            Core::forget(self, entry.attr.ino.0, 1);
                        }
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(e),
        }
    }

    fn releasedir(&self, _req: &Request, ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        let _s = debug_span!("releasedir", ino = ino.0).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        Core::releasedir(self, fh.0);
        reply.ok();
    }

    fn fsyncdir(&self, _req: &Request, ino: INodeNo, fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        let _s = debug_span!("fsyncdir", ino = ino.0).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        reply_empty(reply, Core::fsyncdir(self, ino.0, fh.0, datasync));
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let _s = debug_span!("statfs").entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        match Core::statfs(self) {
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
            Err(e) => reply.error(e),
        }
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let _s = debug_span!("setxattr", ino = ino.0, ?name).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        reply_empty(reply, Core::setxattr(self, ino.0, name, value, flags));
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let _s = debug_span!("getxattr", ino = ino.0, ?name).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        reply_xattr(reply, Core::getxattr(self, ino.0, name, size, req.pid()));
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let _s = debug_span!("listxattr", ino = ino.0).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        reply_xattr(reply, Core::listxattr(self, ino.0, size));
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _s = debug_span!("removexattr", ino = ino.0, ?name).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        reply_empty(reply, Core::removexattr(self, ino.0, name));
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        let _s = debug_span!("access", ino = ino.0).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        reply_empty(reply, Core::access(self, ino.0));
    }

    fn create(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, flags: i32, reply: ReplyCreate) {
        let _s = debug_span!("create", parent = parent.0, ?name, mode, flags).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        crate::feed::touch(req.pid(), parent.0);
        match Core::create(self, parent.0, name, mode, umask, flags, caller(req)) {
            Ok((e, o)) => match self.kill_privs_after_open(req.uid(), &o) {
                Ok(()) => self.reply_created(reply, e, o),
                Err(err) => reply.error(err),
            },
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(&self, req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, length: u64, mode: i32, reply: ReplyEmpty) {
        let _s = debug_span!("fallocate", ino = ino.0, offset, length, mode).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        crate::feed::touch(req.pid(), ino.0);
        reply_empty(reply, Core::fallocate(self, fh.0, offset, length, mode));
    }

    fn lseek(&self, _req: &Request, ino: INodeNo, fh: FileHandle, offset: i64, whence: i32, reply: ReplyLseek) {
        let _s = debug_span!("lseek", ino = ino.0, offset, whence).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        match Core::lseek(self, fh.0, offset, whence) {
            Ok(o) => reply.offset(o),
            Err(e) => reply.error(e),
        }
    }

    fn copy_file_range(
        &self,
        _req: &Request,
        ino_in: INodeNo,
        fh_in: FileHandle,
        offset_in: u64,
        _ino_out: INodeNo,
        fh_out: FileHandle,
        offset_out: u64,
        len: u64,
        _flags: CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        let _s = debug_span!("copy_file_range", ino = ino_in.0, len).entered();
        let _r = crate::refresh_scope::RefreshScope::begin();
        match Core::copy_file_range(self, fh_in.0, offset_in, fh_out.0, offset_out, len) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }

    fn destroy(&mut self) {
        debug!("session destroyed");
    }
}
