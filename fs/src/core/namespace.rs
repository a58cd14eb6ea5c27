//! Operations that change names: create nodes, remove, rename, link.
//!
//! New nodes are created as the daemon (root) and then given to the caller's uid and gid, as
//! virtiofsd does; a parent with the set-group-ID bit keeps its group, as on the lower.

use std::ffi::{CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

use fuser::Errno;

use super::names::Child;
use super::{Core, Entry};
use crate::layer::Layer;

/// Who a request comes from.
#[derive(Debug, Clone, Copy)]
pub struct Caller {
    /// uid.
    pub uid: u32,
    /// gid.
    pub gid: u32,
    /// pid.
    pub pid: u32,
}

impl<L: Layer> Core<L> {
    /// The error of a create in `parent` that met ENOENT or ESTALE on the lower. The share's
    /// server is asked whether the parent's name still leads anywhere: when it does not,
    /// ENOENT, as a local directory removed under the caller answers (a retry would meet the
    /// same absence); when it does (the host made it anew), ESTALE, so the kernel walks the path
    /// again and creates in the directory there now. A lower that answered ESTALE itself (the
    /// share's server lost the directory) must not reach the box twice: its kernel's retry
    /// would meet the same answer.
    pub(crate) fn in_parent(&self, parent: u64, e: std::io::Error) -> Errno {
        if !matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ESTALE)) || parent == crate::inode::ROOT {
            return Errno::from(e);
        }
        let Ok(path) = self.inodes.path(parent) else { return Errno::ESTALE };
        if self.lower.refresh_again(&path) == crate::lower::Seen::Missing {
            return Errno::ENOENT;
        }
        // Replaced (ESTALE) or unreadable: that answers; still the same directory: the lower's own.
        match self.stat_node(parent) {
            Err(why) => why,
            Ok(_) => Errno::from(e),
        }
    }

    /// Gives a freshly created node to the caller.
    pub(crate) fn give_to(&self, parent: u64, path: &CStr, who: Caller) -> Result<(), Errno> {
        if who.uid == 0 && who.gid == 0 {
            return Ok(());
        }
        let parent_path = self.inodes.path(parent)?;
        let pst = self.lower.stat(&parent_path).map_err(Errno::from)?;
        let gid = if pst.st_mode & libc::S_ISGID != 0 { u32::MAX } else { who.gid };
        self.lower.chown(path, who.uid, gid).map_err(Errno::from)
    }

    fn created(&self, parent: u64, name: &OsStr, child: &Child<'_>, who: Caller) -> Result<Entry, Errno> {
        self.listings.forget(parent);
        if let Err(e) = self.give_to(parent, &child.path, who) {
            // Do not leave a root-owned node behind for a caller who cannot remove it.
            let dir = self.lower.stat(&child.path).map(|s| s.st_mode & libc::S_IFMT == libc::S_IFDIR).unwrap_or(false);
            let _ = self.lower.unlink(&child.path, dir);
            return Err(e);
        }
        self.record(parent, name, child, true)
    }

    /// MKNOD (fifos, sockets, regular files; devices as the lower allows).
    pub fn mknod(&self, parent: u64, name: &OsStr, mode: u32, umask: u32, rdev: u32, who: Caller) -> Result<Entry, Errno> {
        let c = self.new_child(parent, name)?;
        self.lower.mknod(&c.path, mode & !umask, rdev as u64).map_err(|e| self.in_parent(parent, e))?;
        self.created(parent, name, &c, who)
    }

    /// MKDIR.
    pub fn mkdir(&self, parent: u64, name: &OsStr, mode: u32, umask: u32, who: Caller) -> Result<Entry, Errno> {
        let c = self.new_child(parent, name)?;
        self.lower.mkdir(&c.path, mode & !umask & 0o7777).map_err(|e| self.in_parent(parent, e))?;
        let e = self.created(parent, name, &c, who)?;
        let class = self.child_class(parent, name, true)?;
        if class == crate::policy::Class::GitDir {
            self.box_gitdir_made(&c.path);
        }
        self.guard_created(parent, &c, class, who.pid, true, None);
        Ok(e)
    }

    /// SYMLINK.
    pub fn symlink(&self, parent: u64, name: &OsStr, target: &Path, who: Caller) -> Result<Entry, Errno> {
        let c = self.new_child(parent, name)?;
        let target = CString::new(target.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)?;
        self.lower.symlink(&target, &c.path).map_err(|e| self.in_parent(parent, e))?;
        self.created(parent, name, &c, who)
    }

    /// LINK.
    pub fn link(&self, id: u64, newparent: u64, newname: &OsStr) -> Result<Entry, Errno> {
        let old = self.inodes.path(id)?;
        let new = self.new_child(newparent, newname)?;
        if self.layer.guards() && self.class_of(newparent)?.in_git_dir() {
            // Git publishes objects by link: the content must be on the lower first.
            self.make_durable(&old);
        }
        self.lower.link(&old, &new.path).map_err(|e| self.in_parent(newparent, e))?;
        self.listings.forget(newparent);
        self.record(newparent, newname, &new, false)
    }

    /// UNLINK by process `who_pid`.
    pub fn unlink(&self, parent: u64, name: &OsStr, who_pid: u32) -> Result<(), Errno> {
        let c = self.child(parent, name)?;
        self.open_deferred_at(parent, &c.lower);
        let before = self.ref_before_change(parent, &c.lower);
        self.park_before(parent, name, &c.path, crate::park::Op::Unlink, who_pid);
        self.guard_work_tree_unlink(parent, who_pid);
        self.listings.forget(parent);
        self.lower.unlink(&c.path, false).map_err(Errno::from)?;
        self.listings.forget(parent);
        self.layer.answered(parent, name, None, Duration::ZERO);
        self.guard_removed(parent, &c);
        if let Some(old) = before {
            self.guard_ref_removed(parent, &c.lower, who_pid, old);
        }
        Ok(())
    }

    /// RMDIR.
    pub fn rmdir(&self, parent: u64, name: &OsStr) -> Result<(), Errno> {
        let c = self.child(parent, name)?;
        self.listings.forget(parent);
        match self.lower.unlink(&c.path, true) {
            Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) && self.clear_hidden(parent, name, &c.path) => {
                self.lower.unlink(&c.path, true).map_err(Errno::from)?
            }
            r => r.map_err(Errno::from)?,
        }
        self.listings.forget(parent);
        self.layer.answered(parent, name, None, Duration::ZERO);
        self.guard_removed(parent, &c);
        Ok(())
    }

    /// RENAME by process `pid`, with RENAME_NOREPLACE / RENAME_EXCHANGE passed to the lower.
    /// In a git dir, a commit of `<name>.lock` onto `<name>` is judged first.
    #[allow(clippy::too_many_arguments)]
    pub fn rename(&self, parent: u64, name: &OsStr, newparent: u64, newname: &OsStr, flags: u32, pid: u32) -> Result<(), Errno> {
        let old = self.child(parent, name)?;
        let new = self.new_child(newparent, newname)?;
        if flags & libc::RENAME_EXCHANGE == 0 {
            self.open_deferred_at(newparent, &new.lower);
            self.park_before(newparent, newname, &new.path, crate::park::Op::RenameOver, pid);
        }
        let after = self.guard_rename(parent, &old, newparent, &new, pid)?;
        self.listings.forget(parent);
        self.listings.forget(newparent);
        let mut renamed = self.lower.rename(&old.path, &new.path, flags);
        if renamed.as_ref().is_err_and(|e| e.raw_os_error() == Some(libc::ENOTEMPTY))
            && self.clear_hidden(newparent, newname, &new.path)
        {
            renamed = self.lower.rename(&old.path, &new.path, flags);
        }
        if let Err(e) = renamed {
            if let Some(after) = after {
                self.guard_rename_failed(after);
            }
            return Err(Errno::from(e));
        }
        if let Some(after) = after {
            self.guard_renamed(after);
        }
        self.guard_lock_moved(&old);
        self.guard_moved_names(parent, &old, newparent, &new, pid);
        // Again after the change: a listing read while it was under way may predate it.
        self.listings.forget(parent);
        self.listings.forget(newparent);
        self.follow_move(newparent, newname, &new);
        if flags & libc::RENAME_EXCHANGE != 0 {
            self.follow_move(parent, name, &old);
        } else {
            self.layer.answered(parent, name, None, Duration::ZERO);
        }
        self.after_index_commit(newparent, newname);
        Ok(())
    }

    /// Points the node now at `path` to its new parent and name.
    fn follow_move(&self, parent: u64, name: &OsStr, child: &Child<'_>) {
        let Ok(st) = self.lower.stat(&child.path) else { return };
        let id = self.inodes.id_for(&st);
        if let Ok(parent_class) = self.class_of(parent) {
            self.inodes.moved(id, parent, &child.lower, self.class_found(parent_class, name, &st));
        }
        // The kernel moved its entry here: the name now holds this node (the share's fault model).
        self.layer.answered(parent, name, Some(id), Duration::ZERO);
    }
}
