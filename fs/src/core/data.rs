//! File data: open, create, read, write and the calls on an open file.
//!
//! With passthrough on, the kernel reads and writes the lower file itself (`BackingId`); without
//! it (kernels before 6.9, or `--no-passthrough`) seamfs does `pread`/`pwrite` on the handle.

use std::ffi::{CStr, OsStr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

use fuser::{BackingId, Errno, FopenFlags};

use super::namespace::Caller;
use super::{cvt, Core, Entry};
use crate::handles::{FileHandle, IoMode};
use crate::layer::Layer;
use crate::lower::{fstat, same_file};
use crate::policy::Class;

/// A freshly opened file, ready to be registered once the reply can make a backing id.
#[derive(Debug)]
pub struct Opened {
    /// The lower file; None for a deferred open (see `Core::open`).
    pub fd: Option<OwnedFd>,
    /// The flags the lower file is (or will be) opened with.
    pub open_flags: i32,
    /// Size at open.
    pub size: u64,
    /// Open flags for the reply.
    pub flags: FopenFlags,
    /// Whether the kernel should pass data through to `fd` (if the node's other open files
    /// allow it: `Handles::choose_io`).
    pub passthrough: bool,
    /// The node opened (passthrough registrations are shared per node).
    pub node: u64,
    /// Opened read-only: the page cache may be kept when the file is unchanged.
    pub read_only: bool,
    /// The lower file's stamp at open (0: none; see `stamp`).
    pub stamp: u64,
    /// Already counted as a page-cache open of its node (a live ref's, ADR 0040): registered
    /// as one without `Handles::choose_io`.
    pub counted: bool,
    /// The whole file as the open read it, its reads served from memory (ADR 0048).
    pub snapshot: Option<Arc<[u8]>>,
    /// The opening process and that file's stat, sized as the bytes: what its `fstat` is
    /// answered while it holds the handle (ADR 0058).
    pub snapshot_stat: Option<(u32, libc::stat)>,
}

/// Read-only, and not truncating.
fn read_only(flags: i32) -> bool {
    flags & libc::O_ACCMODE == libc::O_RDONLY && flags & libc::O_TRUNC == 0
}

/// A digest of what identifies a file's contents as of an open: inode, size, mtime and ctime
/// (ctime changes with every write, and no one can set it back). Never 0.
pub(crate) fn stamp(st: &libc::stat) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for v in [
        st.st_ino,
        st.st_size as u64,
        st.st_mtime as u64,
        st.st_mtime_nsec as u64,
        st.st_ctime as u64,
        st.st_ctime_nsec as u64,
    ] {
        h = (h ^ v).wrapping_mul(0x0000_0100_0000_01b3);
        h ^= h >> 29;
    }
    h.max(1)
}

/// A stamp of a live file's bytes as a snapshot open read them (ADR 0053): over 9p
/// `cache=loose` the lower's stat of a file changed in place stays what the guest first saw, so
/// the bytes, not the stat, tell whether the node's pages still hold the file. Never 0.
/// Hashed as the listing and guard tags are (SipHash, not a byte-mixing loop of its own).
pub(crate) fn bytes_stamp(ino: u64, bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (ino, bytes).hash(&mut h);
    h.finish().max(1)
}

/// Live files up to this size are opened from their bytes on a lower that never revalidates
/// (ADR 0048): the size up to which ADR 0046 remembers them.
const SNAPSHOT_MAX: u64 = crate::lower_recent_read::MAX_BYTES as u64;

/// Flags the lower open must not see again.
const STRIP: i32 = libc::O_CREAT | libc::O_EXCL | libc::O_NOCTTY;

impl<L: Layer> Core<L> {
    /// Open flags and whether passthrough is wanted, for a file of `size` bytes opened with
    /// `flags`.
    ///
    /// Passthrough makes a file's reads native, but over a FUSE or network share each open of a
    /// passthrough file costs the share one more open, flush and release (the kernel opens its
    /// own backing file on the share). A layer may ask for it only from a size on
    /// (`Layer::passthrough_min`): smaller files are read through seamfs and the page cache.
    /// `live_cached`: a live ref read through the page cache (ADR 0040) though its class reads
    /// directly.
    fn fopen_flags(&self, id: u64, size: u64, flags: i32, live_cached: bool) -> Result<(FopenFlags, bool), Errno> {
        let class = self.class_of(id)?;
        let p = self.policy(class);
        // Nothing to write back from a read-only file: its close need not reach seamfs.
        let no_flush = if flags & libc::O_ACCMODE == libc::O_RDONLY && self.layer.read_cache() {
            FopenFlags::FOPEN_NOFLUSH
        } else {
            FopenFlags::empty()
        };
        if p.direct_io && !live_cached {
            // Live refs too: `HEAD`, the branch and `config` are read at every git command.
            return Ok((FopenFlags::FOPEN_DIRECT_IO | no_flush, false));
        }
        // The index and lock files (`index.lock` is the whole index, written at once) keep
        // passthrough whatever their size at open: a lock is created empty.
        let big = size >= self.layer.passthrough_min() || matches!(class, Class::Index | Class::Lock);
        let pass = p.passthrough && self.passthrough_active() && big;
        let mut fopen = no_flush;
        // Passthrough files have no page cache of their own; KEEP_CACHE only helps without it.
        if matches!(class, Class::Objects) {
            fopen |= FopenFlags::FOPEN_KEEP_CACHE;
        }
        Ok((fopen, pass))
    }

    /// The flags of an open file whose data goes through the page cache: keep the kernel's
    /// cached pages when the node's last page-cache open saw the very same file (`stamp`), so a
    /// file read again is not read from the share again. Any change on the lower (a write
    /// changes ctime) or an open in passthrough mode in between drops them.
    pub(crate) fn cached_open_flags(&self, o: &Opened) -> FopenFlags {
        let previous = self.inodes.swap_stamp(o.node, o.stamp);
        let mut flags = o.flags;
        if o.read_only && o.stamp != 0 && previous == o.stamp && self.layer.read_cache() {
            flags |= FopenFlags::FOPEN_KEEP_CACHE;
        }
        flags
    }

    /// A passthrough open: pages cached before it no longer describe the file for sure.
    pub(crate) fn passthrough_opened(&self, node: u64) {
        self.inodes.swap_stamp(node, 0);
    }

    /// OPEN by process `pid`: the lower file with the box's flags, verified to be the node's.
    pub fn open(&self, id: u64, flags: i32, pid: u32) -> Result<Opened, Errno> {
        let flags = self.lower_open_flags(flags & !STRIP);
        self.refresh_kept_live(id, pid)?;
        self.guard_open(id, flags, pid);
        self.park_node(id, flags, None, pid);
        let (dev, ino, pinned, class, kind) =
            self.inodes.with(id, |n| (n.dev, n.ino, n.pinned.clone(), n.class, n.kind))?;
        // What a box process reads of its index is the index at the sync point of this open: a
        // reverse heal cannot land between the two (it holds the same lock).
        let _no_heal_now = (class == Class::Index && self.layer.index_split()).then(|| {
            let held = self.reverse_heals.lock();
            self.note_index_open(id, pid);
            held
        });
        if pinned.is_none() {
            // Bytes this process read under its refresh that still stands are recalled (ADR 0046).
            let snapshot = crate::refresh_scope::as_process(pid, &self.recent_refresh, || self.open_snapshot(id, flags, class, dev, ino, pid));
            if let Some(o) = snapshot? {
                return Ok(o);
            }
            if let Some(o) = self.open_deferred(id, flags, dev, ino)? {
                return Ok(o);
            }
        }
        let lower_flags = self.lower_read_flags(flags, class);
        let (fd, st, slot) = match pinned {
            // A pinned node reopens the very file it was looked up as.
            Some(p) => {
                let path = crate::lower::proc_fd_path(p.as_raw_fd());
                // SAFETY: valid C string; fd owned below.
                let fd = cvt(unsafe { libc::open(path.as_ptr(), (lower_flags | libc::O_CLOEXEC) & !libc::O_NOFOLLOW) })?;
                // SAFETY: fresh fd.
                let fd: OwnedFd = unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) };
                let st = fstat(fd.as_raw_fd()).map_err(Errno::from)?;
                (fd, st, None)
            }
            None => {
                let path = self.inodes.path(id)?;
                // Counted before the name is checked: a GETATTR that finds the name moved on
                // from here sees this open, and gives the node no other file's size (ADR 0040).
                let slot = self.live_page_cache(class, flags, &path).then(|| CachedSlot::enter(&self.handles, id));
                let fd = match self.lower.open_at(&path, lower_flags, 0) {
                    Ok(fd) => fd,
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Err(Errno::ESTALE),
                    Err(e) => return Err(Errno::from(e)),
                };
                let st = fstat(fd.as_raw_fd()).map_err(Errno::from)?;
                if same_file(&st, dev, ino) {
                    (fd, st, slot)
                } else {
                    drop(slot);
                    if !super::serves_name(class, kind, &st) || self.other_version_cached(class, id) {
                        return Err(Errno::ESTALE);
                    }
                    (fd, st, None)
                }
            }
        };
        if class == Class::LiveRef {
            self.drop_other_files_attrs(id, &st);
        }
        let (fopen, passthrough) = self.fopen_flags(id, st.st_size as u64, flags, slot.is_some())?;
        let size = st.st_size as u64;
        let counted = slot.map(CachedSlot::keep).is_some();
        Ok(Opened { fd: Some(fd), open_flags: flags, size, flags: fopen, passthrough, node: id, read_only: read_only(flags), stamp: stamp(&st), counted, snapshot: None, snapshot_stat: None })
    }

    /// A live ref whose reads may go through the kernel's page cache (ADR 0040): a read-only
    /// open of a ref, `HEAD` or `config` (`policy::read_through_page_cache`), while the kernel
    /// keeps live refs' entries, on a lower whose own cache revalidates. Only an open of the
    /// node's own file becomes one.
    fn live_page_cache(&self, class: Class, flags: i32, path: &CStr) -> bool {
        class == Class::LiveRef
            && read_only(flags)
            && self.live_entries_kept()
            && self.lower.stale_pages().is_none()
            && crate::policy::read_through_page_cache(path)
    }

    /// True when live ref `id` is read through the page cache by an open file: the name now
    /// holds another file, which must not be served as this node (its size would become the
    /// node's, and cut those reads short): the kernel walks the path again instead.
    pub(crate) fn other_version_cached(&self, class: Class, id: u64) -> bool {
        class == Class::LiveRef && self.handles.cached_opens(id) > 0
    }

    /// An open of a live ref through an entry the kernel kept (ADR 0038) had no LOOKUP to
    /// refresh the name on the share: refresh it here (once a moment per process, as a lookup
    /// would). A name gone from the share answers ESTALE: the kernel walks the path again.
    fn refresh_kept_live(&self, id: u64, pid: u32) -> Result<(), Errno> {
        let class = self.class_of(id)?;
        if class != Class::LiveRef || !self.live_entries_kept() {
            return Ok(());
        }
        let path = self.inodes.path(id)?;
        match self.refresh_for(pid, &path) {
            crate::lower::Seen::Missing => Err(Errno::ESTALE),
            _ => Ok(()),
        }
    }

    /// A box lock: what git reads under it must be the share's current state, and the kernel
    /// may keep live refs' entries and attributes (ADR 0038). Git reads a ref's bytes by an
    /// OPEN, which checks the share; its `stat`s (a ref's existence, the `packed-refs`
    /// snapshot's size, times and inode) must too: every live ref's attributes are dropped, so
    /// the next `stat` asks seamfs. Attributes only: that notify takes no lock the CREATE holds
    /// (as at OPEN, ADR 0036).
    fn drop_live_attrs(&self) {
        let Some(n) = self.notifier.get().filter(|_| self.live_entries_kept()) else { return };
        // Attributes given longer ago than their TTL have expired in the kernel already (twice
        // the TTL: the kernel counts it from when the reply reached it).
        for id in self.inodes.live_refs(self.policy(Class::LiveRef).attr_ttl * 2) {
            // ENOENT for a node the kernel has forgotten meanwhile.
            if let Err(e) = n.inval_inode(fuser::INodeNo(id), -1, 0) {
                tracing::trace!(id, error = %e, "live ref attributes not dropped");
            }
        }
    }

    /// A live ref's node serves its name, so the file opened may not be the one whose attributes
    /// the kernel keeps (the host renamed another in since): those are dropped before the open
    /// is answered, so an `fstat` on the new fd asks again (git sizes what it reads of `config`
    /// and `packed-refs` by it). The notify is made inside the OPEN, which holds no lock the
    /// kernel's attribute invalidation takes (ADR 0036).
    fn drop_other_files_attrs(&self, id: u64, st: &libc::stat) {
        let now = crate::attr::attr_stamp(&crate::attr::to_attr(id, st));
        // The note can disagree with the kernel's copy when two processes' replies for one node
        // cross (the kernel keeps the newer request's by `attr_version`, seamfs noted the later
        // reply): the files git sizes by `fstat` are always dropped (ADR 0038).
        let sized = self.inodes.with(id, |n| matches!(n.name.as_bytes(), b"config" | b"packed-refs" | b"config.worktree"));
        let given = self.inodes.given(id);
        if given == now && sized == Ok(false) {
            return;
        }
        if let Some(n) = self.notifier.get() {
            tracing::debug!(id, given, now, "dropping the kernel's attributes of a live ref");
            if let Err(e) = n.inval_inode(fuser::INodeNo(id), -1, 0) {
                tracing::debug!(id, error = %e, "could not drop the kernel's attributes of a live ref");
            }
        }
        self.inodes.note_given(id, now);
    }

    /// A read-only open of a file the kernel's page cache holds whole, unchanged since (same
    /// stamp): answered without opening the lower, so the share pays no open, flush and
    /// release for a file read again. The lower file is opened if a read still comes (the
    /// kernel dropped pages), verified to be the same file (`file_fd`).
    fn open_deferred(&self, id: u64, flags: i32, dev: u64, ino: u64) -> Result<Option<Opened>, Errno> {
        if !self.layer.read_cache() || !read_only(flags) || self.handles.has_backing(id) {
            return Ok(None);
        }
        let class = self.class_of(id)?;
        let (node_stamp, complete) = self.inodes.with(id, |n| (n.stamp, n.complete))?;
        if !complete {
            return Ok(None);
        }
        let path = self.inodes.path(id)?;
        // A ref read through the page cache (ADR 0040) is one too, counted before its check.
        let live = self.live_page_cache(class, flags, &path);
        if self.policy(class).direct_io && !live {
            return Ok(None);
        }
        let slot = live.then(|| CachedSlot::enter(&self.handles, id));
        let st = match self.lower.stat(&path) {
            Ok(st) => st,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Err(Errno::ESTALE),
            Err(e) => return Err(Errno::from(e)),
        };
        let size = st.st_size as u64;
        if !same_file(&st, dev, ino) || stamp(&st) != node_stamp || st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Ok(None);
        }
        if live {
            self.drop_other_files_attrs(id, &st);
        }
        let (fopen, passthrough) = self.fopen_flags(id, size, flags, live)?;
        if passthrough {
            return Ok(None);
        }
        let counted = slot.map(CachedSlot::keep).is_some();
        Ok(Some(Opened { fd: None, open_flags: flags, size, flags: fopen, passthrough, node: id, read_only: true, stamp: node_stamp, counted, snapshot: None, snapshot_stat: None }))
    }

    /// A read-only open of a small live file on a lower that never revalidates (9p
    /// `cache=loose`, where every read is an `O_DIRECT` round trip): the file is read whole now,
    /// as the open's refresh stands (recalled from the bytes read under it, ADR 0046), and the
    /// handle's reads are served from those bytes (ADR 0048). git opens, reads to the end and
    /// closes; the lower file is opened only if a call on the handle needs it.
    ///
    /// A ref, `HEAD` or `config` (ADR 0040's files) is a page-cache open, kept while its bytes
    /// are the ones the node's pages hold (ADR 0053): git reads it again without a READ.
    fn open_snapshot(&self, id: u64, flags: i32, class: Class, dev: u64, ino: u64, pid: u32) -> Result<Option<Opened>, Errno> {
        if class != Class::LiveRef || !read_only(flags) || self.lower.stale_pages().is_none() || self.handles.writer_of(id).is_some() {
            return Ok(None);
        }
        let path = self.inodes.path(id)?;
        // Counted before the name is read, as ADR 0040's opens are: a GETATTR that finds the
        // name moved on from here gives the node no other file's size.
        let slot = self.snapshot_page_cache(&path).then(|| CachedSlot::enter(&self.handles, id));
        // Absent, not a regular file or larger: the open below answers as it always has.
        let Ok(Some((bytes, st))) = self.lower.read_regular(&path, SNAPSHOT_MAX) else { return Ok(None) };
        if !same_file(&st, dev, ino) {
            return Ok(None);
        }
        let size = bytes.len() as u64;
        // The kernel cuts a page-cache read at the node's size, which comes from the lower's
        // stat: only bytes of that very size go through the page cache.
        let slot = slot.filter(|_| st.st_size as u64 == size);
        let (fopen, passthrough) = self.fopen_flags(id, size, flags, slot.is_some())?;
        if passthrough {
            return Ok(None);
        }
        self.drop_other_files_attrs(id, &st);
        tracing::debug!(name = ?path, size, page_cache = slot.is_some(), "opened from the bytes read under its refresh");
        // The lower's stat never changes for a file changed in place on the host: the bytes
        // themselves are what the node's pages must hold to be kept.
        let stamp = if slot.is_some() { bytes_stamp(st.st_ino, &bytes) } else { stamp(&st) };
        let counted = slot.map(CachedSlot::keep).is_some();
        let snapshot = Some(Arc::from(bytes));
        let mut sized = st;
        sized.st_size = size as i64;
        let snapshot_stat = Some((pid, sized));
        Ok(Some(Opened { fd: None, open_flags: flags, size, flags: fopen, passthrough, node: id, read_only: true, stamp, counted, snapshot, snapshot_stat }))
    }

    /// A snapshot open that goes through the page cache (ADR 0053): ADR 0040's files while the
    /// kernel keeps live refs' entries.
    fn snapshot_page_cache(&self, path: &CStr) -> bool {
        self.live_entries_kept() && crate::policy::read_through_page_cache(path)
    }

    /// The lower file of an open handle, opened now if the open was deferred. A deferred file
    /// whose name now leads elsewhere is ESTALE (as NFS answers for an open file removed on the
    /// server): the box's open file is gone from the lower, and another file's bytes must not be
    /// served under it.
    pub(crate) fn file_fd<'h>(&self, h: &'h FileHandle) -> Result<&'h OwnedFd, Errno> {
        if let Some(fd) = h.opened() {
            return Ok(fd);
        }
        let (dev, ino) = self.inodes.with(h.node, |n| (n.dev, n.ino)).map_err(|_| Errno::EIO)?;
        let path = self.inodes.path(h.node).map_err(|_| Errno::EIO)?;
        let class = self.class_of(h.node).map_err(|_| Errno::EIO)?;
        let fd = self.lower.open_at(&path, self.lower_read_flags(h.flags, class), 0).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOENT) => Errno::ESTALE,
            _ => Errno::from(e),
        })?;
        if crate::lower::identity(fd.as_raw_fd()).map_err(Errno::from)? != (dev, ino) {
            tracing::warn!(node = h.node, "a deferred open's file was replaced on the lower before its first read");
            return Err(Errno::ESTALE);
        }
        Ok(h.set_fd(fd))
    }

    /// The lower's open flags for a node of `class`: a git-dir file other than an object must
    /// be read from (and appended to) the server, not a lower cache that never looks again
    /// (`lower_cache`).
    fn lower_read_flags(&self, flags: i32, class: crate::policy::Class) -> i32 {
        if class.in_git_dir() && class != crate::policy::Class::Objects {
            self.lower.fresh_flags(flags)
        } else {
            flags
        }
    }

    /// Before the box removes or replaces name `lower_name` of `parent`: deferred opens of the
    /// file there open it now, so they keep reaching it by their handle once the name is gone
    /// (POSIX: an open file outlives its name). The host removing it is still ESTALE.
    pub(crate) fn open_deferred_at(&self, parent: u64, lower_name: &OsStr) {
        for h in self.handles.deferred() {
            let here = self.inodes.with(h.node, |n| n.parent == parent && *n.name == *lower_name).unwrap_or(false);
            if here {
                let _ = self.file_fd(&h);
            }
        }
    }

    /// An open file of node `id`, for a node whose name is gone while it is open (fstat,
    /// fchmod or fgetxattr of a file unlinked while open reach seamfs by node only).
    pub(crate) fn open_file_of(&self, id: u64) -> Result<Arc<OwnedFd>, Errno> {
        let h = self.handles.file_of(id).ok_or(Errno::ESTALE)?;
        Ok(Arc::new(self.file_fd(&h)?.try_clone().map_err(Errno::from)?))
    }

    /// The file of node `id` for a call without a handle: the node verified by its name, else
    /// an open file of it.
    pub(crate) fn node_or_open_fd(&self, id: u64) -> Result<Arc<OwnedFd>, Errno> {
        match self.node_fd(id) {
            Err(e) if e == Errno::ESTALE => self.open_file_of(id),
            r => r,
        }
    }

    /// The file a call is about: its handle's when it comes with one, else `node_or_open_fd`.
    pub(crate) fn handle_or_node_fd(&self, id: u64, fh: Option<u64>) -> Result<Arc<OwnedFd>, Errno> {
        match fh.and_then(|fh| self.handles.file(fh).ok()) {
            Some(h) => Ok(Arc::new(self.file_fd(&h)?.try_clone().map_err(Errno::from)?)),
            None => self.node_or_open_fd(id),
        }
    }

    /// CREATE: O_EXCL is decided by the lower; only a file this call created changes owner.
    pub fn create(&self, parent: u64, name: &OsStr, mode: u32, umask: u32, flags: i32, who: Caller) -> Result<(Entry, Opened), Errno> {
        let child = self.new_child(parent, name)?;
        let path = child.path.clone();
        let mode = mode & !umask & 0o7777;
        let open_flags = self.lower_open_flags(flags & !STRIP);
        let class = self.child_class(parent, name, false)?;
        // Held until the lock is recorded as the box's (ADR 0060).
        let mut _kept_negatives_out = None;
        if class == crate::policy::Class::Lock {
            // What the box reads from now on (under this lock) must be the share's current state.
            self.recent_refresh.barrier();
            _kept_negatives_out = self.packed_refs_lock_barrier(&path);
            self.drop_live_attrs();
            self.lower.forget_dirs();
            self.guard_lock_create(parent, &child, who.pid)?;
        }
        let mut attempt = self.lower.open_at(&path, open_flags | libc::O_CREAT | libc::O_EXCL, mode);
        if class == crate::policy::Class::Lock && flags & libc::O_EXCL != 0 && is_eexist(&attempt) {
            // A host-held lock: wait for it (bounded) rather than fail the box command.
            self.wait_host_lock(&path);
            attempt = self.lower.open_at(&path, open_flags | libc::O_CREAT | libc::O_EXCL, mode);
            if is_eexist(&attempt) && self.forget_stale_name(parent, name) {
                attempt = self.lower.open_at(&path, open_flags | libc::O_CREAT | libc::O_EXCL, mode);
            }
        }
        // Only a file this call made is the caller's: an existing one opened without O_EXCL
        // (`touch`, `>>`) may be a live lock of someone else.
        let made = attempt.is_ok();
        if class == crate::policy::Class::Lock && !made {
            self.guard_lock_not_made(&child, who.pid);
        }
        let fd = match attempt {
            Ok(fd) => {
                if let Err(e) = self.give_to(parent, &path, who) {
                    let _ = self.lower.unlink(&path, false);
                    if class == crate::policy::Class::Lock {
                        self.guard_lock_not_made(&child, who.pid);
                    }
                    return Err(e);
                }
                fd
            }
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) && flags & libc::O_EXCL == 0 => {
                if open_flags & libc::O_TRUNC != 0 { self.park_before(parent, name, &path, crate::park::Op::OpenTrunc, who.pid) }
                self.lower.open_at(&path, open_flags, 0).map_err(Errno::from)?
            }
            Err(e) => return Err(self.in_parent(parent, e)),
        };
        self.listings.forget(parent);
        // The entry comes from the new file's own fd: a path stat could meet a stale entry.
        let created = fstat(fd.as_raw_fd()).ok();
        let entry = match created {
            Some(st) => self.record_stat(parent, name, &child, st, made)?,
            None => self.record(parent, name, &child, made)?,
        };
        self.guard_created(parent, &child, class, who.pid, made, created.as_ref());
        let node = entry.attr.ino.0;
        if made {
            self.fresh_files.made(node);
        }
        let size = created.map_or(0, |st| st.st_size as u64);
        let (fopen, passthrough) = self.fopen_flags(node, size, open_flags, false)?;
        Ok((entry, Opened { fd: Some(fd), open_flags, size, flags: fopen, passthrough, node, read_only: false, stamp: 0, counted: false, snapshot: None, snapshot_stat: None }))
    }

    /// Registers an opened file; returns the handle id.
    pub fn register(&self, o: Opened, cached: bool) -> u64 {
        self.handles.add_file(FileHandle::new(o.fd, o.node, cached, o.open_flags, o.stamp, o.size).with_snapshot(o.snapshot, o.snapshot_stat))
    }

    /// How a new open file of `node` gets its data (`Handles::choose_io`).
    pub fn choose_io(
        &self,
        node: u64,
        want_passthrough: bool,
        make: impl FnOnce() -> std::io::Result<BackingId>,
    ) -> IoMode {
        self.handles.choose_io(node, want_passthrough, make)
    }

    /// Keeps the kernel's passthrough registration of `fh` (on `node`) until release.
    pub fn keep_backing(&self, fh: u64, node: u64, id: std::sync::Arc<BackingId>) {
        self.handles.keep_backing(fh, node, id);
    }

    /// READ (when not passed through).
    pub fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        let h = self.handles.file(fh)?;
        // A file opened from its bytes (ADR 0048) reads them, unless the box has it open for
        // writing now: then its reads see those writes, from the file.
        if let Some(bytes) = h.snapshot_read(offset, size).filter(|_| self.handles.writer_of(h.node).is_none()) {
            h.served(offset, bytes.len() as u64);
            return Ok(bytes);
        }
        let fd = self.file_fd(&h)?;
        let mut buf = vec![0u8; size as usize];
        let raw = fd.as_raw_fd();
        let done = crate::short_read::read_at_until_short(&mut buf, offset, |part, at| {
            // SAFETY: valid fd and a buffer of `part.len()` bytes.
            let n = unsafe { libc::pread(raw, part.as_mut_ptr().cast(), part.len(), at as libc::off_t) };
            if n < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        })
        .map_err(Errno::from)?;
        buf.truncate(done);
        h.served(offset, done as u64);
        Ok(buf)
    }

    /// WRITE (when not passed through).
    pub fn write(&self, fh: u64, offset: u64, data: &[u8]) -> Result<u32, Errno> {
        let h = self.handles.file(fh)?;
        // SAFETY: valid fd and buffer.
        let n = unsafe { libc::pwrite(self.file_fd(&h)?.as_raw_fd(), data.as_ptr().cast(), data.len(), offset as libc::off_t) };
        if n < 0 {
            return Err(Errno::from(std::io::Error::last_os_error()));
        }
        self.drop_pages_written_under(h.node);
        Ok(n as u32)
    }

    /// An in-place write to a live ref that other opens read through the page cache (ADR 0040,
    /// 0053): their pages no longer hold the file, and a reader holding it open must see the
    /// write, so the kernel drops them. The notify takes no lock a WRITE holds (only pages).
    fn drop_pages_written_under(&self, node: u64) {
        if self.handles.cached_opens(node) == 0 || self.class_of(node) != Ok(Class::LiveRef) {
            return;
        }
        if let Some(n) = self.notifier.get() {
            if let Err(e) = n.inval_inode(fuser::INodeNo(node), 0, 0) {
                tracing::debug!(node, error = %e, "could not drop the pages of a live ref written in place");
            }
        }
    }

    /// FLUSH: close a duplicate, so the lower sees a close as it would without seamfs.
    pub fn flush(&self, fh: u64) -> Result<(), Errno> {
        let h = self.handles.file(fh)?;
        let Some(fd) = h.opened() else { return Ok(()) };
        // A git-dir file is published by a rename or link after its close: its data must be on
        // the lower's server by then (`Core::make_durable`).
        // A read-only handle has nothing to flush, and seamfs keeps no POSIX locks on the lower
        // (the kernel keeps them: no lock ops), so the share's FLUSH would be a wasted round trip.
        if !h.writable() {
            return Ok(());
        }
        if self.inodes.with(h.node, |n| n.class.in_git_dir()).unwrap_or(false) {
            crate::lower::write_back(fd.as_raw_fd());
        }
        let dup = fd.as_fd().try_clone_to_owned().map_err(Errno::from)?;
        drop(dup);
        Ok(())
    }

    /// RELEASE.
    pub fn release(&self, fh: u64) {
        if let Some(h) = self.handles.remove_file(fh) {
            if h.cached && h.read_whole() {
                self.inodes.mark_complete(h.node, h.stamp);
            }
            // `index` written in place (git renames a lock onto it; a copy tool writes it):
            // published as the shared index as after a rename, if the host has none.
            if h.writable() {
                if let Ok((Class::Index, parent)) = self.inodes.with(h.node, |n| (n.class, n.parent)) {
                    self.after_index_commit(parent, OsStr::new("index"));
                }
            }
        }
    }

    /// FSYNC.
    pub fn fsync(&self, fh: u64, datasync: bool) -> Result<(), Errno> {
        let h = self.handles.file(fh)?;
        // A deferred open was never written through.
        let Some(fd) = h.opened() else { return Ok(()) };
        sync_fd(fd.as_fd(), datasync)
    }

    /// LSEEK (SEEK_DATA / SEEK_HOLE need the lower).
    pub fn lseek(&self, fh: u64, offset: i64, whence: i32) -> Result<i64, Errno> {
        let h = self.handles.file(fh)?;
        // SAFETY: valid fd.
        let r = unsafe { libc::lseek(self.file_fd(&h)?.as_raw_fd(), offset as libc::off_t, whence) };
        if r < 0 {
            return Err(Errno::from(std::io::Error::last_os_error()));
        }
        Ok(r as i64)
    }

    /// FALLOCATE.
    pub fn fallocate(&self, fh: u64, offset: u64, length: u64, mode: i32) -> Result<(), Errno> {
        let h = self.handles.file(fh)?;
        // SAFETY: valid fd.
        cvt(unsafe { libc::fallocate(self.file_fd(&h)?.as_raw_fd(), mode, offset as libc::off_t, length as libc::off_t) }).map(drop)
    }

    /// COPY_FILE_RANGE, done by the lower where it can.
    pub fn copy_file_range(&self, fh_in: u64, off_in: u64, fh_out: u64, off_out: u64, len: u64) -> Result<u32, Errno> {
        let a = self.handles.file(fh_in)?;
        let b = self.handles.file(fh_out)?;
        let mut oi = off_in as libc::loff_t;
        let mut oo = off_out as libc::loff_t;
        let (fa, fb) = (self.file_fd(&a)?.as_raw_fd(), self.file_fd(&b)?.as_raw_fd());
        // SAFETY: valid fds and offset pointers.
        let n = unsafe { libc::copy_file_range(fa, &mut oi, fb, &mut oo, len as usize, 0) };
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

/// A page-cache open counted on its node before its file is checked (`Handles::enter_cached`);
/// dropped, the count is undone.
struct CachedSlot<'a> {
    handles: &'a crate::handles::Handles,
    node: u64,
}

impl<'a> CachedSlot<'a> {
    fn enter(handles: &'a crate::handles::Handles, node: u64) -> Self {
        handles.enter_cached(node);
        CachedSlot { handles, node }
    }

    /// The open became a page-cache one: its handle's release undoes the count.
    fn keep(self) {
        std::mem::forget(self);
    }
}

impl Drop for CachedSlot<'_> {
    fn drop(&mut self) {
        self.handles.leave_cached(self.node);
    }
}

/// ADR 0048 over a local directory read the way a 9p `cache=loose` lower is read.
#[cfg(all(test, target_os = "linux"))]
mod snapshot_tests {
    use std::ffi::OsStr;
    use std::path::PathBuf;

    use crate::core::{Core, CoreOptions};
    use crate::layer::GitLayer;
    use crate::lower::Lower;
    use crate::policy::Class;

    const HEAD: &[u8] = b"ref: refs/heads/main\n";

    /// A fresh `git init` checkout.
    fn repo(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("seamfs-snapshot-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let ok = std::process::Command::new("git").args(["init", "-q", "-b", "main"]).current_dir(&dir).status().unwrap().success();
        assert!(ok, "git init in {}", dir.display());
        dir
    }

    fn core(dir: &std::path::Path, stale: bool) -> Core<GitLayer> {
        let lower = Lower::open(dir).unwrap();
        let lower = if stale { lower.as_if_stale() } else { lower };
        Core::new(lower, GitLayer::default(), Class::WorkTree, CoreOptions { passthrough: false, ..CoreOptions::default() }).unwrap()
    }

    /// A checkout, a core over it, this process's pid and the node of `.git/HEAD` it looked up.
    fn head(tag: &str, stale: bool) -> (PathBuf, Core<GitLayer>, u32, u64) {
        let dir = repo(tag);
        let c = core(&dir, stale);
        let pid = std::process::id();
        let git = c.lookup(1, OsStr::new(".git"), pid).unwrap().attr.ino.0;
        let id = c.lookup(git, OsStr::new("HEAD"), pid).unwrap().attr.ino.0;
        (dir, c, pid, id)
    }

    #[test]
    fn a_live_file_is_opened_from_its_bytes_and_read_to_its_end() {
        let (dir, c, pid, id) = head("read", true);
        let o = c.open(id, libc::O_RDONLY, pid).unwrap();
        assert!(o.fd.is_none(), "no lower file opened: the bytes read under the refresh serve it");
        assert_eq!(o.snapshot.as_deref(), Some(HEAD));
        let fh = c.register(o, false);
        assert_eq!(c.read(fh, 0, 4096).unwrap(), HEAD);
        assert!(c.read(fh, HEAD.len() as u64, 4096).unwrap().is_empty(), "the end, without the server");
        let h = c.handles.file(fh).unwrap();
        assert!(h.opened().is_none(), "reading it opened nothing");
        c.release(fh);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_box_writer_of_the_file_is_read_through() {
        let (dir, c, pid, id) = head("writer", true);
        let reader = c.open(id, libc::O_RDONLY, pid).unwrap();
        assert!(reader.snapshot.is_some());
        let reader = c.register(reader, false);
        let writer = c.open(id, libc::O_WRONLY, pid).unwrap();
        let writer = c.register(writer, false);
        let moved = b"ref: refs/heads/next\n";
        assert_eq!(c.write(writer, 0, moved).unwrap() as usize, moved.len());
        assert_eq!(c.read(reader, 0, 4096).unwrap(), moved, "an in-place write through seamfs is seen by an open reader");
        let again = c.open(id, libc::O_RDONLY, pid).unwrap();
        assert!(again.fd.is_some() && again.snapshot.is_none(), "no snapshot while the box has the file open for writing");
        c.release(writer);
        c.release(reader);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// An open of `id` as the kernel would get it answered: its flags, and whether it is counted
    /// as a page-cache open; the handle is registered.
    fn settle(c: &Core<GitLayer>, id: u64, pid: u32) -> (fuser::FopenFlags, bool, u64) {
        let o = c.open(id, libc::O_RDONLY, pid).unwrap();
        assert!(o.fd.is_none() && o.snapshot.is_some(), "opened from its bytes");
        let counted = o.counted;
        let flags = if counted { c.cached_open_flags(&o) } else { o.flags };
        (flags, counted, c.register(o, counted))
    }

    #[test]
    fn a_ref_opened_from_its_bytes_is_read_through_the_page_cache_kept_while_they_are_the_same() {
        use fuser::FopenFlags;
        crate::core::AS_IF_MOUNTED.with(|m| m.set(true));
        let (dir, c, pid, id) = head("pages", true);
        assert!(c.live_entries_kept());
        let (flags, counted, fh) = settle(&c, id, pid);
        assert!(counted && !flags.contains(FopenFlags::FOPEN_DIRECT_IO), "HEAD goes through the page cache: {flags:?}");
        assert!(!flags.contains(FopenFlags::FOPEN_KEEP_CACHE), "the first open has no pages to keep");
        assert_eq!(c.handles.cached_opens(id), 1, "counted on its node while open (ADR 0040's ESTALE rule)");
        assert_eq!(c.read(fh, 0, 4096).unwrap(), HEAD, "the kernel fills its pages from the bytes");
        c.release(fh);
        assert_eq!(c.handles.cached_opens(id), 0);
        let (flags, _, fh) = settle(&c, id, pid);
        assert!(flags.contains(FopenFlags::FOPEN_KEEP_CACHE), "the same bytes again: the pages are kept");
        c.release(fh);
        // Changed in place on the host (same inode, same length): the lower's stat cannot tell
        // over 9p cache=loose, the bytes do.
        std::fs::OpenOptions::new().write(true).open(dir.join(".git/HEAD")).and_then(|mut f| {
            use std::io::Write;
            f.write_all(b"ref: refs/heads/next\n")
        }).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1100)); // past the process's refresh window
        let (flags, _, fh) = settle(&c, id, pid);
        assert!(!flags.contains(FopenFlags::FOPEN_KEEP_CACHE), "other bytes: the kernel drops the pages");
        assert_eq!(c.read(fh, 0, 4096).unwrap(), b"ref: refs/heads/next\n");
        c.release(fh);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn packed_refs_opened_from_its_bytes_stays_direct() {
        crate::core::AS_IF_MOUNTED.with(|m| m.set(true));
        let (dir, c, pid, _) = head("packed", true);
        std::fs::write(dir.join(".git/packed-refs"), "# pack-refs with: peeled fully-peeled sorted \n").unwrap();
        let git = c.lookup(1, OsStr::new(".git"), pid).unwrap().attr.ino.0;
        let id = c.lookup(git, OsStr::new("packed-refs"), pid).unwrap().attr.ino.0;
        let (flags, counted, fh) = settle(&c, id, pid);
        assert!(!counted && flags.contains(fuser::FopenFlags::FOPEN_DIRECT_IO), "git checks its snapshot by the name's stat: {flags:?}");
        c.release(fh);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_lower_that_revalidates_opens_the_file() {
        let (dir, c, pid, id) = head("fresh", false);
        let o = c.open(id, libc::O_RDONLY, pid).unwrap();
        assert!(o.fd.is_some() && o.snapshot.is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Over a lower that never revalidates, asking its server whether a lock exists is a listing
    /// of the git dir. A lock a box process holds is not the host's: git's lookups of its own
    /// lock before the rename ask nothing; a lock the host made is still asked about.
    #[test]
    fn a_lock_the_box_holds_is_looked_up_without_a_listing() {
        use crate::core::namespace::Caller;
        use crate::lower::LISTED;
        let dir = repo("heldlock");
        let lower = Lower::open(&dir).unwrap().as_if_stale();
        let opts = CoreOptions { passthrough: false, lock_wait: std::time::Duration::from_millis(20), ..CoreOptions::default() };
        let c = Core::new(lower, GitLayer::default(), Class::WorkTree, opts).unwrap();
        let pid = std::process::id();
        // SAFETY: plain getters.
        let who = Caller { uid: unsafe { libc::getuid() }, gid: unsafe { libc::getgid() }, pid };
        let git = c.lookup(1, OsStr::new(".git"), pid).unwrap().attr.ino.0;
        let (_, o) = c.create(git, OsStr::new("HEAD.lock"), 0o100644, 0o022, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, who).unwrap();
        let fh = c.register(o, false);
        let listed = |f: &dyn Fn()| {
            let before = LISTED.with(|n| n.get());
            f();
            LISTED.with(|n| n.get()) - before
        };
        let held = listed(&|| {
            c.lookup(git, OsStr::new("HEAD.lock"), pid).unwrap();
        });
        assert_eq!(held, 0, "a lookup of the box's own lock listed the git dir {held} times");
        std::fs::write(dir.join(".git/ORIG_HEAD.lock"), b"").unwrap();
        let host = listed(&|| {
            c.lookup(git, OsStr::new("ORIG_HEAD.lock"), pid).unwrap();
        });
        assert!(host >= 1, "a lock the host made is asked of the server (its listing): the count counts");
        c.release(fh);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// git looks `config` up and then opens it three times (setup, the repository's config, the
    /// full read): over 9p `cache=loose` the lookup's read of it serves those opens.
    #[test]
    fn config_opened_after_its_lookup_is_not_read_again() {
        let (looked, opened) = opened_after_lookup("cfgopen", "config");
        assert_eq!((looked, opened), (1, 0), "config: server reads at the lookup, and at three opens after it");
    }

    /// So is `HEAD`, which the lookup reads for the guard's note before it sizes it.
    #[test]
    fn head_opened_after_its_lookup_is_not_read_again() {
        let (looked, opened) = opened_after_lookup("headopen", "HEAD");
        assert_eq!((looked, opened), (2, 0), "HEAD: server reads at the lookup (HEAD, its branch), and at three opens after it");
    }

    /// The branch HEAD names, read at the process's first look (the guard's note), is not read
    /// again at its own lookup a moment later.
    #[test]
    fn the_branch_noted_at_the_first_look_is_not_read_again() {
        use crate::lower_read::SERVER_READS;
        use crate::refresh_scope::RefreshScope;
        let dir = repo("branchlook");
        assert!(std::process::Command::new("git").args(["commit", "-q", "--allow-empty", "-m", "x"]).current_dir(&dir).status().unwrap().success());
        let c = core(&dir, true);
        let pid = std::process::id();
        let look = |parent: u64, name: &str| {
            let _r = RefreshScope::begin();
            c.lookup(parent, OsStr::new(name), pid).unwrap().attr.ino.0
        };
        let git = look(1, ".git");
        look(git, "HEAD");
        let heads = look(look(git, "refs"), "heads");
        let before = SERVER_READS.with(|n| n.get());
        look(heads, "main");
        assert_eq!(SERVER_READS.with(|n| n.get()) - before, 0, "the branch's lookup read it from the server again");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `packed-refs` is read from the server at each of git's opens, even by one process a
    /// moment apart: git pairs it with the loose refs it lists afresh, so bytes from a moment
    /// ago would lose a ref the host just packed (ADR 0046 amended).
    #[test]
    fn packed_refs_is_read_again_at_each_open() {
        let (_, opened) = opened_after_lookup("packedopen", "packed-refs");
        assert_eq!(opened, 3, "packed-refs: server reads at three opens after its lookup");
    }

    /// git sizes `packed-refs` by `fstat` and reads that many bytes: a process holding it open
    /// from its bytes is answered their size, though the host packed more refs since; another
    /// process, and the same one after its close, are not (ADR 0058).
    #[test]
    fn an_open_packed_refs_is_sized_as_its_bytes_for_its_process() {
        use crate::refresh_scope::RefreshScope;
        let dir = repo("packedsize");
        let git = |args: &[&str]| assert!(std::process::Command::new("git").args(args).current_dir(&dir).status().unwrap().success());
        git(&["commit", "-q", "--allow-empty", "-m", "x"]);
        git(&["pack-refs", "--all"]);
        let c = core(&dir, true);
        let pid = std::process::id();
        let scoped = |f: &dyn Fn() -> u64| {
            let _r = RefreshScope::begin();
            f()
        };
        let gitdir = scoped(&|| c.lookup(1, OsStr::new(".git"), pid).unwrap().attr.ino.0);
        let id = scoped(&|| c.lookup(gitdir, OsStr::new("packed-refs"), pid).unwrap().attr.ino.0);
        let fh = scoped(&|| {
            let o = c.open(id, libc::O_RDONLY, pid).unwrap();
            assert!(o.snapshot.is_some(), "opened from its bytes");
            c.register(o, false)
        });
        let held = std::fs::metadata(dir.join(".git/packed-refs")).unwrap().len();
        git(&["tag", "t1"]);
        git(&["pack-refs", "--all"]);
        let now = std::fs::metadata(dir.join(".git/packed-refs")).unwrap().len();
        assert!(now > held, "the host's repack grew it");
        // Another process sees the file at the name (or walks again to it).
        let size_for = |who: u32| scoped(&|| c.getattr(id, None, who).map_or(u64::MAX, |(a, _)| a.size));
        assert_eq!(size_for(pid), held, "the holder's fstat must size what its reads serve");
        assert_ne!(size_for(1), held, "another process was answered the holder's snapshot");
        c.release(fh);
        assert_ne!(size_for(pid), held, "after its close the holder is answered the share again");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Server reads a box process's lookup of `.git/<name>` made, and its three read-only opens
    /// after it, each request in its own scope as the FUSE glue serves them, over a lower read
    /// as 9p `cache=loose` is.
    fn opened_after_lookup(tag: &str, name: &str) -> (u64, u64) {
        use crate::lower_read::SERVER_READS;
        use crate::refresh_scope::RefreshScope;
        let dir = repo(tag);
        for args in [&["commit", "-q", "--allow-empty", "-m", "x"][..], &["pack-refs", "--all"]] {
            assert!(std::process::Command::new("git").args(args).current_dir(&dir).status().unwrap().success());
        }
        let c = core(&dir, true);
        let pid = std::process::id();
        let reads = || SERVER_READS.with(|n| n.get());
        let git = {
            let _r = RefreshScope::begin();
            c.lookup(1, OsStr::new(".git"), pid).unwrap().attr.ino.0
        };
        let before = reads();
        let id = {
            let _r = RefreshScope::begin();
            c.lookup(git, OsStr::new(name), pid).unwrap().attr.ino.0
        };
        let looked = reads() - before;
        for _ in 0..3 {
            let _r = RefreshScope::begin();
            let o = c.open(id, libc::O_RDONLY, pid).unwrap();
            assert!(o.snapshot.is_some(), "opened from its bytes");
            let fh = c.register(o, false);
            c.release(fh);
        }
        let _ = std::fs::remove_dir_all(&dir);
        (looked, reads() - before - looked)
    }

    /// The heal check at the box's `index.lock` create refreshes HEAD and its branch after the
    /// create's barrier; those refreshes stand for the process, so its lookup of `index` after
    /// the rename (as git makes it) asks the share nothing more about them (ADR 0033).
    #[test]
    fn the_index_lock_creates_heal_check_stands_for_the_process() {
        use crate::core::namespace::Caller;
        use crate::lower::REFRESHED_HERE;
        let dir = repo("lockcheck");
        let git_cli = |args: &[&str]| assert!(std::process::Command::new("git").args(args).current_dir(&dir).status().unwrap().success());
        std::fs::write(dir.join("a.txt"), "a\n").unwrap();
        git_cli(&["add", "a.txt"]);
        git_cli(&["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "a"]);
        let c = core(&dir, false);
        let pid = std::process::id();
        // SAFETY: plain getters.
        let who = Caller { uid: unsafe { libc::getuid() }, gid: unsafe { libc::getgid() }, pid };
        let git = c.lookup(1, OsStr::new(".git"), pid).unwrap().attr.ino.0;
        c.lookup(git, OsStr::new("index"), pid).unwrap();
        let (_, o) = c.create(git, OsStr::new("index.lock"), 0o100644, 0o022, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, who).unwrap();
        let fh = c.register(o, false);
        REFRESHED_HERE.with(|v| v.borrow_mut().clear());
        c.lookup(git, OsStr::new("index"), pid).unwrap();
        let again: Vec<_> = REFRESHED_HERE.with(|v| v.borrow().clone());
        let named = |n: &std::ffi::CStr| again.iter().any(|r| r.as_c_str() == n);
        assert!(!named(c".git/HEAD") && !named(c".git/refs/heads/main"), "the lookup refreshed again: {again:?}");
        c.release(fh);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
