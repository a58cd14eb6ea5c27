//! Names and attributes: lookup, getattr/setattr and the namespace changes, each on the parent's
//! O_PATH fd, as virtiofsd's passthrough does them.

use std::ffi::OsStr;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::Arc;

use fuser::{FileAttr, TimeOrNow};

use super::inodes::Node;
use super::sys::{self, AsCaller, Target};
use super::FastShare;

/// What a reply needs for an entry.
pub struct Found {
    /// The node (one kernel lookup counted on it).
    pub node: Arc<Node>,
    /// Its attributes.
    pub attr: FileAttr,
}

/// What setattr was asked to change.
pub struct SetAttr {
    /// New permission bits.
    pub mode: Option<u32>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
    /// New size.
    pub size: Option<u64>,
    /// New access time.
    pub atime: Option<TimeOrNow>,
    /// New modification time.
    pub mtime: Option<TimeOrNow>,
}

impl FastShare {
    /// Opens `name` in `parent` and registers it (virtiofsd's `do_lookup`).
    pub(crate) fn lookup_name(&self, parent: u64, name: &OsStr) -> io::Result<Found> {
        let p = self.inodes.get(parent)?;
        self.lookup_in(&p, name)
    }

    /// `lookup_name` with the parent's node in hand: an inode the store knows is answered from
    /// one `fstatat`; a new one is opened (O_PATH) and registered with its fd.
    pub(crate) fn lookup_in(&self, p: &Arc<Node>, name: &OsStr) -> io::Result<Found> {
        let pfd = self.inodes.fd(p)?;
        let c = sys::cname(name)?;
        let st = sys::lstatat(pfd.raw(), &c)?;
        if let Some(node) = self.inodes.known(p, name, &st) {
            return Ok(Found { attr: seamfs::attr::to_attr(node.id, &st), node });
        }
        let fd = sys::open_path(pfd.raw(), &c)?;
        let st = sys::fstat(fd.as_raw_fd())?;
        let node = self.inodes.register(p, name, fd, &st);
        Ok(Found { attr: seamfs::attr::to_attr(node.id, &st), node })
    }

    /// The attributes of a node, through the caller's open file when it names one.
    pub(crate) fn attr(&self, id: u64, fh: Option<u64>) -> io::Result<FileAttr> {
        let st = match fh.and_then(|fh| self.handles.file(fh).ok()) {
            Some(h) => match h.opened() {
                Some(fd) => sys::fstat(fd.as_raw_fd())?,
                None => self.node_stat(id)?,
            },
            None => self.node_stat(id)?,
        };
        Ok(seamfs::attr::to_attr(id, &st))
    }

    fn node_stat(&self, id: u64) -> io::Result<libc::stat> {
        let n = self.inodes.get(id)?;
        sys::fstat(self.inodes.fd(&n)?.raw())
    }

    /// Changes what `set` names: mode, owner, size, then times (the order virtiofsd uses).
    pub(crate) fn set_attr(&self, id: u64, fh: Option<u64>, set: &SetAttr) -> io::Result<FileAttr> {
        let n = self.inodes.get(id)?;
        let nfd = self.inodes.fd(&n)?;
        let handle = fh.and_then(|fh| self.handles.file(fh).ok());
        let target = match handle.as_ref().and_then(|h| h.opened()) {
            Some(fd) => Target::Handle(fd),
            None => Target::Path(nfd.raw()),
        };
        if let Some(mode) = set.mode {
            target.chmod(mode & 0o7777)?;
        }
        if set.uid.is_some() || set.gid.is_some() {
            sys::chown(nfd.raw(), set.uid.unwrap_or(u32::MAX), set.gid.unwrap_or(u32::MAX))?;
        }
        if let Some(size) = set.size {
            target.truncate(size)?;
        }
        if set.atime.is_some() || set.mtime.is_some() {
            sys::utimens(nfd.raw(), &[sys::timespec(set.atime), sys::timespec(set.mtime)])?;
        }
        self.attr(id, fh)
    }

    /// A symlink's target.
    pub(crate) fn read_link(&self, id: u64) -> io::Result<Vec<u8>> {
        let n = self.inodes.get(id)?;
        sys::readlink(self.inodes.fd(&n)?.raw())
    }

    /// mkdir, mknod or symlink as the caller, then the new name looked up.
    pub(crate) fn make(&self, parent: u64, name: &OsStr, caller: (u32, u32), what: Make<'_>) -> io::Result<Found> {
        let p = self.inodes.get(parent)?;
        let pfd = self.inodes.fd(&p)?;
        let c = sys::cname(name)?;
        {
            let _as = AsCaller::new(caller.0, caller.1);
            // SAFETY (each arm): valid C strings and a dir fd of ours.
            sys::call(match what {
                Make::Dir(mode) => unsafe { libc::mkdirat(pfd.raw(), c.as_ptr(), mode) },
                Make::Node(mode, rdev) => unsafe { libc::mknodat(pfd.raw(), c.as_ptr(), mode, rdev.into()) },
                Make::Symlink(target) => {
                    let t = sys::cname(target.as_os_str())?;
                    unsafe { libc::symlinkat(t.as_ptr(), pfd.raw(), c.as_ptr()) }
                }
            })?;
        }
        self.lookup_in(&p, name)
    }

    /// A hard link to `id` as `name` in `parent` (`linkat` with `AT_EMPTY_PATH` on its O_PATH fd).
    pub(crate) fn hard_link(&self, id: u64, parent: u64, name: &OsStr) -> io::Result<Found> {
        let n = self.inodes.get(id)?;
        let p = self.inodes.get(parent)?;
        let (nfd, pfd) = (self.inodes.fd(&n)?, self.inodes.fd(&p)?);
        let c = sys::cname(name)?;
        // SAFETY: an empty path with AT_EMPTY_PATH names the fd; valid C string.
        sys::call(unsafe { libc::linkat(nfd.raw(), c"".as_ptr(), pfd.raw(), c.as_ptr(), libc::AT_EMPTY_PATH) })?;
        self.lookup_in(&p, name)
    }

    /// unlink or rmdir.
    pub(crate) fn remove(&self, parent: u64, name: &OsStr, dir: bool) -> io::Result<()> {
        let p = self.inodes.get(parent)?;
        let pfd = self.inodes.fd(&p)?;
        let c = sys::cname(name)?;
        let flags = if dir { libc::AT_REMOVEDIR } else { 0 };
        // SAFETY: valid C string and dir fd.
        sys::call(unsafe { libc::unlinkat(pfd.raw(), c.as_ptr(), flags) })
    }

    /// `renameat2`, then the moved node(s) remembered by their new names.
    pub(crate) fn rename(&self, parent: u64, name: &OsStr, newparent: u64, newname: &OsStr, flags: u32) -> io::Result<()> {
        let (p, np) = (self.inodes.get(parent)?, self.inodes.get(newparent)?);
        let (pfd, npfd) = (self.inodes.fd(&p)?, self.inodes.fd(&np)?);
        let (c, nc) = (sys::cname(name)?, sys::cname(newname)?);
        // SAFETY: valid C strings and dir fds.
        sys::call(unsafe { libc::renameat2(pfd.raw(), c.as_ptr(), npfd.raw(), nc.as_ptr(), flags) })?;
        if let Ok(st) = sys::lstatat(npfd.raw(), &nc) {
            self.inodes.moved(&np, newname, &st);
        }
        if flags & libc::RENAME_EXCHANGE != 0 {
            if let Ok(st) = sys::lstatat(pfd.raw(), &c) {
                self.inodes.moved(&p, name, &st);
            }
        }
        Ok(())
    }

    /// statfs of the backing filesystem.
    pub(crate) fn stat_fs(&self) -> io::Result<libc::statvfs> {
        let root = self.inodes.get(super::inodes::ROOT)?;
        let fd = self.inodes.fd(&root)?;
        // SAFETY: zeroed plain C struct as an out-parameter.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: an fd of ours and the out-pointer.
        sys::call(unsafe { libc::fstatvfs(fd.raw(), &mut st) })?;
        Ok(st)
    }

    /// The path of a node (and a name in it) below the backing root, for an error's message.
    pub(crate) fn describe(&self, id: u64, name: Option<&OsStr>) -> String {
        let base = self.inodes.get(id).map(|n| self.inodes.path_of(&n)).unwrap_or_else(|_| Path::new("?").into());
        let p = match name {
            Some(n) => base.join(n),
            None => base,
        };
        format!("{}/{}", self.backing.display(), p.display())
    }
}

/// What `make` creates.
pub enum Make<'a> {
    /// A directory with this mode.
    Dir(u32),
    /// A node with this mode and device.
    Node(u32, u32),
    /// A symlink to this target.
    Symlink(&'a Path),
}
