//! Open file and directory handles: the only fds seamfs holds, one per open in the box.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use dashmap::DashMap;
use fuser::{BackingId, Errno, FileType};
use parking_lot::Mutex;

/// An open file.
#[derive(Debug)]
pub struct FileHandle {
    /// The lower file, opened with the box's flags.
    pub fd: OwnedFd,
    /// The node it was opened as (an unlinked open file is reached through its handle).
    pub node: u64,
}

/// One directory entry as read from the lower.
#[derive(Debug, Clone)]
pub struct DirEntry {
    /// Name as the box sees it.
    pub name: OsString,
    /// Name on the lower.
    pub lower: OsString,
    /// Lower inode number (informational for plain readdir).
    pub ino: u64,
    /// Type from `d_type`.
    pub kind: FileType,
}

/// An open directory: its fd and a snapshot of its entries taken at the first read.
#[derive(Debug)]
pub struct DirHandle {
    /// The lower directory (O_RDONLY | O_DIRECTORY); opened on first need when the listing
    /// came from the listing cache.
    pub fd: Mutex<Option<Arc<OwnedFd>>>,
    /// Entries, filled on the first readdir at offset 0 (or from the listing cache at open).
    pub entries: Mutex<Option<Arc<Vec<DirEntry>>>>,
    /// True once a listing was served: a later read at offset 0 is a rewind and reads again.
    pub served: std::sync::atomic::AtomicBool,
}

/// All open handles.
#[derive(Debug, Default)]
pub struct Handles {
    next: AtomicU64,
    files: DashMap<u64, Arc<FileHandle>>,
    dirs: DashMap<u64, Arc<DirHandle>>,
    /// Passthrough registrations by handle (with the handle's node), kept alive until release.
    backings: DashMap<u64, (u64, Arc<BackingId>)>,
    /// The live registration of each node with open passthrough files.
    by_node: DashMap<u64, Weak<BackingId>>,
}

impl Handles {
    fn next_id(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Registers an open file.
    pub fn add_file(&self, h: FileHandle) -> u64 {
        let id = self.next_id();
        self.files.insert(id, Arc::new(h));
        id
    }

    /// Any open file of `node` (for a node whose name is gone while it is still open).
    pub fn file_of(&self, node: u64) -> Option<Arc<FileHandle>> {
        self.files.iter().find(|e| e.value().node == node).map(|e| e.value().clone())
    }

    /// Looks up an open file.
    pub fn file(&self, fh: u64) -> Result<Arc<FileHandle>, Errno> {
        self.files.get(&fh).map(|h| h.clone()).ok_or(Errno::EBADF)
    }

    /// Forgets an open file (its fd closes when the last user drops it).
    pub fn remove_file(&self, fh: u64) {
        self.files.remove(&fh);
        if let Some((_, (node, id))) = self.backings.remove(&fh) {
            drop(id);
            self.by_node.remove_if(&node, |_, w| w.strong_count() == 0);
        }
    }

    /// The passthrough registration of `node`, made by `make` when no open file holds one.
    ///
    /// The kernel gives an inode one backing file: a second open whose reply names another
    /// registration fails with EIO while the first is open. So all of a node's open files share
    /// one; the shard lock of `by_node` keeps two first opens from both making one.
    pub fn backing_for(
        &self,
        node: u64,
        make: impl FnOnce() -> std::io::Result<BackingId>,
    ) -> std::io::Result<Arc<BackingId>> {
        let mut slot = self.by_node.entry(node).or_default();
        if let Some(id) = slot.upgrade() {
            return Ok(id);
        }
        let id = Arc::new(make()?);
        *slot = Arc::downgrade(&id);
        Ok(id)
    }

    /// Keeps a passthrough registration until the handle is released.
    pub fn keep_backing(&self, fh: u64, node: u64, id: Arc<BackingId>) {
        self.backings.insert(fh, (node, id));
    }

    /// Registers an open directory.
    pub fn add_dir(&self, h: DirHandle) -> u64 {
        let id = self.next_id();
        self.dirs.insert(id, Arc::new(h));
        id
    }

    /// Looks up an open directory.
    pub fn dir(&self, fh: u64) -> Result<Arc<DirHandle>, Errno> {
        self.dirs.get(&fh).map(|h| h.clone()).ok_or(Errno::EBADF)
    }

    /// Forgets an open directory.
    pub fn remove_dir(&self, fh: u64) {
        self.dirs.remove(&fh);
    }

    /// Number of open files and directories.
    pub fn open_count(&self) -> usize {
        self.files.len() + self.dirs.len()
    }
}
