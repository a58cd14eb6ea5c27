//! Open file and directory handles: the only fds seamfs holds, one per open in the box.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use dashmap::DashMap;
use fuser::{BackingId, Errno, FileType};
use parking_lot::Mutex;

/// An open file.
#[derive(Debug)]
pub struct FileHandle {
    /// The lower file, opened with the box's flags.
    pub fd: OwnedFd,
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
    /// The lower directory (O_RDONLY | O_DIRECTORY).
    pub fd: OwnedFd,
    /// Entries, filled on the first readdir at offset 0.
    pub entries: Mutex<Option<Vec<DirEntry>>>,
}

/// All open handles.
#[derive(Debug, Default)]
pub struct Handles {
    next: AtomicU64,
    files: DashMap<u64, Arc<FileHandle>>,
    dirs: DashMap<u64, Arc<DirHandle>>,
    /// Passthrough registrations, kept alive until release.
    backings: DashMap<u64, BackingId>,
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

    /// Looks up an open file.
    pub fn file(&self, fh: u64) -> Result<Arc<FileHandle>, Errno> {
        self.files.get(&fh).map(|h| h.clone()).ok_or(Errno::EBADF)
    }

    /// Forgets an open file (its fd closes when the last user drops it).
    pub fn remove_file(&self, fh: u64) {
        self.files.remove(&fh);
        self.backings.remove(&fh);
    }

    /// Keeps a passthrough registration until the handle is released.
    pub fn keep_backing(&self, fh: u64, id: BackingId) {
        self.backings.insert(fh, id);
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
