//! Open file and directory handles: the only fds seamfs holds, one per open in the box.

use std::ffi::{OsStr, OsString};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use dashmap::DashMap;
use fuser::{BackingId, Errno, FileType};
use parking_lot::Mutex;

/// An open file.
#[derive(Debug)]
pub struct FileHandle {
    /// The lower file, opened with the box's flags; unset until first needed when the open was
    /// deferred (`Core::file_fd`).
    fd: OnceLock<OwnedFd>,
    /// The node it was opened as (an unlinked open file is reached through its handle).
    pub node: u64,
    /// Served through the kernel's page cache (counted in the node's `NodeIo::cached`).
    pub cached: bool,
    /// The flags a deferred open opens the lower file with.
    pub flags: i32,
    /// The lower file's stamp and size at open.
    pub stamp: u64,
    /// Size at open.
    pub size: u64,
    /// Bytes from offset 0 that reads through seamfs served without a gap.
    covered: AtomicU64,
    /// The whole file as its open read it, when reads are served from memory (ADR 0048).
    snapshot: Option<Arc<[u8]>>,
    /// The opening process and the stat of that file, sized as the bytes (ADR 0058).
    snapshot_stat: Option<(u32, libc::stat)>,
}

impl FileHandle {
    /// A handle on `fd`, or a deferred one (`fd` None) that opens the lower with `flags` on
    /// first need.
    pub fn new(fd: Option<OwnedFd>, node: u64, cached: bool, flags: i32, stamp: u64, size: u64) -> FileHandle {
        let cell = OnceLock::new();
        if let Some(fd) = fd {
            let _ = cell.set(fd);
        }
        FileHandle { fd: cell, node, cached, flags, stamp, size, covered: AtomicU64::new(0), snapshot: None, snapshot_stat: None }
    }

    /// The same handle, its reads served from `bytes`: the whole file as its open read it, by
    /// the process and with the stat `stat` names.
    pub fn with_snapshot(mut self, bytes: Option<Arc<[u8]>>, stat: Option<(u32, libc::stat)>) -> FileHandle {
        self.snapshot = bytes;
        self.snapshot_stat = stat;
        self
    }

    /// The stat of the file its reads are served from (a snapshot's), sized as its bytes.
    pub fn snapshot_stat(&self) -> Option<libc::stat> {
        self.snapshot_stat.map(|(_, st)| st)
    }

    /// At most `size` bytes at `offset` of the file as its open read it (empty past the end);
    /// None when the handle reads the lower file.
    pub fn snapshot_read(&self, offset: u64, size: u32) -> Option<Vec<u8>> {
        let b = self.snapshot.as_ref()?;
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(b.len());
        let end = start.saturating_add(size as usize).min(b.len());
        Some(b[start..end].to_vec())
    }

    /// The lower file, if it is open.
    pub fn opened(&self) -> Option<&OwnedFd> {
        self.fd.get()
    }

    /// Opened for writing (such an open is never deferred, so its fd is there).
    pub fn writable(&self) -> bool {
        self.flags & libc::O_ACCMODE != libc::O_RDONLY
    }

    /// Sets the lower file of a deferred open (a racing open that got there first wins).
    pub fn set_fd(&self, fd: OwnedFd) -> &OwnedFd {
        let _ = self.fd.set(fd);
        self.fd.get().expect("set above")
    }

    /// Reads served `n` bytes at `offset`.
    pub fn served(&self, offset: u64, n: u64) {
        let _ = self.covered.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
            (offset <= c && offset + n > c).then_some(offset + n)
        });
    }

    /// Every byte of the file as opened went through seamfs's reads (so the kernel's page cache
    /// held all of it).
    pub fn read_whole(&self) -> bool {
        self.covered.load(Ordering::Relaxed) >= self.size
    }
}

/// How one node's open files reach their data. The kernel allows one way at a time per inode:
/// a passthrough open while a page-cache open is alive fails (ETXTBSY), and so does the reverse.
#[derive(Debug, Default)]
struct NodeIo {
    /// The live passthrough registration, while passthrough files are open.
    backing: Weak<BackingId>,
    /// Open files served through the page cache.
    cached: usize,
}

/// The way an open file was given its data.
#[derive(Debug)]
pub enum IoMode {
    /// FUSE passthrough to the lower file, with the node's one registration.
    Passthrough(Arc<BackingId>),
    /// Reads and writes through seamfs (and the kernel's page cache).
    Cached,
}

/// One directory entry as read from the lower.
#[derive(Debug, Clone)]
pub struct DirEntry {
    /// Name on the lower.
    pub lower: OsString,
    /// Name as the box sees it, where it differs from the lower's (`index-box` shows as `index`).
    pub shown: Option<OsString>,
    /// Lower inode number (informational for plain readdir).
    pub ino: u64,
    /// Type from `d_type`.
    pub kind: FileType,
}

impl DirEntry {
    /// Name as the box sees it.
    pub fn name(&self) -> &OsStr {
        self.shown.as_deref().unwrap_or(&self.lower)
    }
}

/// A directory's entries as the box sees them, tagged with a digest of their content.
///
/// The tag goes into every offset handed to the kernel (see [`Listing::offset`]), so the
/// kernel's own directory cache can never splice two different listings together, and it tells
/// whether the listing the kernel cached is still the one on the lower.
#[derive(Debug)]
pub struct Listing {
    /// The entries, in the lower's order.
    pub entries: Vec<DirEntry>,
    /// 31-bit digest of names, inode numbers and types; never zero.
    pub tag: u32,
}

impl Listing {
    /// Tags `entries` by their content.
    pub fn new(entries: Vec<DirEntry>) -> Self {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for e in &entries {
            (e.name(), e.ino, e.kind).hash(&mut h);
        }
        let tag = (h.finish() as u32 & 0x7fff_ffff).max(1);
        Listing { entries, tag }
    }

    /// The offset of the entry after index `i`: the tag above 32 bits, the position below.
    pub fn offset(&self, i: usize) -> u64 {
        (u64::from(self.tag) << 32) | (i as u64 + 1)
    }

    /// The index an offset from [`Listing::offset`] (or 0) continues at.
    pub fn index(offset: u64) -> usize {
        (offset & 0xffff_ffff) as usize
    }
}

/// An open directory: its fd and a snapshot of its entries taken at the first read.
#[derive(Debug)]
pub struct DirHandle {
    /// The lower directory (O_RDONLY | O_DIRECTORY); opened on first need when the listing
    /// came from the listing cache.
    pub fd: Mutex<Option<Arc<OwnedFd>>>,
    /// Entries, filled on the first readdir at offset 0 (or from the listing cache at open).
    pub entries: Mutex<Option<Arc<Listing>>>,
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
    /// Per node with open files: its passthrough registration and its page-cache opens.
    by_node: DashMap<u64, NodeIo>,
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

    /// Open files whose lower file is not open yet (deferred opens).
    pub fn deferred(&self) -> Vec<Arc<FileHandle>> {
        self.files.iter().filter(|e| e.value().opened().is_none()).map(|e| e.value().clone()).collect()
    }

    /// The stat of a snapshot of `node` that process `pid` holds open (ADR 0058).
    pub fn snapshot_stat_of(&self, node: u64, pid: u32) -> Option<libc::stat> {
        self.files.iter().find_map(|e| e.value().snapshot_stat.filter(|(p, _)| e.value().node == node && *p == pid).map(|(_, st)| st))
    }

    /// An open file of `node` that may hold writes the lower has not got: opened for writing.
    pub fn writer_of(&self, node: u64) -> Option<Arc<FileHandle>> {
        self.files.iter().find(|e| e.value().node == node && e.value().writable()).map(|e| e.value().clone())
    }

    /// Looks up an open file.
    pub fn file(&self, fh: u64) -> Result<Arc<FileHandle>, Errno> {
        self.files.get(&fh).map(|h| h.clone()).ok_or(Errno::EBADF)
    }

    /// Forgets an open file (its fd closes when the last user drops it); returns it.
    pub fn remove_file(&self, fh: u64) -> Option<Arc<FileHandle>> {
        let removed = self.files.remove(&fh);
        let backing = self.backings.remove(&fh);
        let node = match (&removed, &backing) {
            (Some((_, h)), _) => h.node,
            (None, Some((_, (node, _)))) => *node,
            (None, None) => return None,
        };
        drop(backing);
        match &removed {
            Some((_, h)) if h.cached => self.leave_cached(node),
            _ => self.forget_idle(node),
        }
        removed.map(|(_, h)| h)
    }

    /// True while `node` has passthrough files open.
    pub fn has_backing(&self, node: u64) -> bool {
        self.by_node.get(&node).is_some_and(|io| io.backing.strong_count() > 0)
    }

    /// Chooses how a new open file of `node` gets its data, and counts it.
    ///
    /// The kernel gives an inode one backing file: a second open whose reply names another
    /// registration fails while the first is open, and passthrough and page-cache opens of one
    /// inode exclude each other. So a node with passthrough files open gets passthrough with the
    /// same registration; a node with page-cache files open gets the page cache; otherwise
    /// `want_passthrough` decides, and `make` registers the file (a refusal falls back to the page
    /// cache). The shard lock of `by_node` keeps two first opens from choosing differently.
    pub fn choose_io(
        &self,
        node: u64,
        want_passthrough: bool,
        make: impl FnOnce() -> std::io::Result<BackingId>,
    ) -> IoMode {
        let mut io = self.by_node.entry(node).or_default();
        if let Some(id) = io.backing.upgrade() {
            return IoMode::Passthrough(id);
        }
        if want_passthrough && io.cached == 0 {
            match make() {
                Ok(id) => {
                    let id = Arc::new(id);
                    io.backing = Arc::downgrade(&id);
                    return IoMode::Passthrough(id);
                }
                Err(e) => tracing::warn!(error = %e, "passthrough refused for this file; serving reads and writes"),
            }
        }
        io.cached += 1;
        IoMode::Cached
    }

    /// Counts a page-cache open of `node` before its file is known to be the node's own (a live
    /// ref, ADR 0040): undone by [`Handles::leave_cached`], or kept by the handle registered
    /// with `cached` set, whose release undoes it.
    pub fn enter_cached(&self, node: u64) {
        self.by_node.entry(node).or_default().cached += 1;
    }

    /// Undoes [`Handles::enter_cached`] (or a page-cache open's count, at its release).
    pub fn leave_cached(&self, node: u64) {
        if let Some(mut io) = self.by_node.get_mut(&node) {
            io.cached = io.cached.saturating_sub(1);
        }
        self.forget_idle(node);
    }

    /// Forgets `node`'s entry once no file of it is open in either way.
    fn forget_idle(&self, node: u64) {
        self.by_node.remove_if(&node, |_, io| io.cached == 0 && io.backing.strong_count() == 0);
    }

    /// Open files of `node` served through the kernel's page cache.
    pub fn cached_opens(&self, node: u64) -> usize {
        self.by_node.get(&node).map_or(0, |io| io.cached)
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

#[cfg(test)]
mod tests {
    use super::FileHandle;

    #[test]
    fn a_snapshot_serves_its_bytes_and_ends_where_they_end() {
        let h = FileHandle::new(None, 7, false, libc::O_RDONLY, 1, 41)
            .with_snapshot(Some(b"0123456789abcdef0123456789abcdef01234567\n".as_slice().into()), None);
        assert_eq!(h.snapshot_read(0, 4096).unwrap().len(), 41, "the whole file in one read");
        assert_eq!(h.snapshot_read(38, 10).unwrap(), b"67\n", "a read across the end stops at it");
        assert!(h.snapshot_read(41, 4096).unwrap().is_empty(), "at the end: no bytes, and no server asked");
        assert!(h.snapshot_read(u64::MAX, 1).unwrap().is_empty());
        let plain = FileHandle::new(None, 7, false, libc::O_RDONLY, 1, 41);
        assert!(plain.snapshot_read(0, 10).is_none(), "a handle without a snapshot reads its lower file");
    }
}
