//! The passthrough core: every FUSE operation as a plain function returning `Result<_, Errno>`.
//!
//! Inodes are kept by path (`inode`), handles only while open (`handles`), and every decision
//! about caching and freshness is asked of the `Layer`. The FUSE glue (`filesystem`) only turns
//! requests into calls of these functions and replies once.

mod data;
mod dir;
mod fresh_files;
mod killpriv;
mod listing;
pub(crate) mod names;
mod namespace;
mod shared;
pub mod status_xattr;
mod xattr;

use std::ffi::{CStr, OsStr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fuser::{Errno, FileAttr, TimeOrNow};

use crate::attr::to_attr;
use crate::handles::Handles;
use crate::inode::{Found, InodeTable, ROOT};
use crate::judge::Judge;
use crate::layer::{Answer, Layer, LookupView};
use crate::lower::{fstat, proc_fd_path, same_file, Lower, Seen};
use crate::policy::{CachePolicy, Class};

pub use data::Opened;
pub use dir::DirPage;
pub use namespace::Caller;
pub use shared::Shared;
pub use xattr::XattrReply;

/// Options of the core that are not per class.
#[derive(Debug, Clone)]
pub struct CoreOptions {
    /// Use FUSE passthrough for file data when the kernel offers it. Default true.
    pub passthrough: bool,
    /// `max_stack_depth` to ask for with passthrough (1 over a plain fs, 2 over a FUSE lower).
    pub max_stack_depth: u32,
    /// How many O_PATH fds the layer may pin. Default 4096.
    pub pin_budget: usize,
    /// How long a box lock create waits behind a host-held lock before EEXIST. Default 1 s.
    pub lock_wait: Duration,
    /// Where the mount is, as box processes see it (absolute `gitdir:` paths in `.git` files
    /// are resolved against it). Default none: absolute pointers are not followed.
    pub mountpoint: Option<std::path::PathBuf>,
    /// Clear set-user-ID and set-group-ID bits in seamfs (`FUSE_HANDLE_KILLPRIV_V2`), which
    /// spares the kernel a `security.capability` lookup before every write. Default true.
    pub kill_privs: bool,
    /// Ask the kernel to cache writes (`FUSE_WRITEBACK_CACHE`): only the share emulator does,
    /// to play a guest-caching share. Default false.
    pub writeback_cache: bool,
    /// `key=value` facts the root's `user.seamfs.status` attribute reports (lower, ttl...),
    /// given by the binary that mounted. Default none.
    pub status: Vec<(String, String)>,
    /// Keep what box ops destroy (`park`, ADR 0029); None: off. Default off (the emulator).
    pub park: Option<crate::park::ParkConfig>,
}

impl Default for CoreOptions {
    fn default() -> Self {
        CoreOptions {
            passthrough: true,
            max_stack_depth: 2,
            pin_budget: 4096,
            lock_wait: Duration::from_secs(1),
            mountpoint: None,
            kill_privs: true,
            writeback_cache: false,
            status: Vec::new(),
            park: None,
        }
    }
}

/// A looked-up entry: node id, attributes and the TTLs to send.
#[derive(Debug)]
pub struct Entry {
    /// Attributes; `ino` 0 means a negative entry.
    pub attr: FileAttr,
    /// Entry TTL.
    pub entry_ttl: Duration,
    /// Attribute TTL.
    pub attr_ttl: Duration,
    /// The node's FUSE generation (`inode::Node::generation`).
    pub generation: u64,
}

/// The passthrough filesystem over one lower directory.
#[derive(Debug)]
pub struct Core<L: Layer> {
    pub(crate) lower: Lower,
    pub(crate) inodes: Arc<InodeTable>,
    pub(crate) handles: Handles,
    pub(crate) layer: L,
    pub(crate) opts: CoreOptions,
    /// Set at init when the kernel accepted passthrough.
    pub(crate) passthrough_on: AtomicBool,
    /// True once the kernel agreed to cache writes (`CoreOptions::writeback_cache`).
    pub(crate) writeback_on: AtomicBool,
    /// True once the kernel left clearing set-ID bits to seamfs (`CoreOptions::kill_privs`).
    pub(crate) killpriv_on: AtomicBool,
    /// Lock owners and what box processes saw (shared with the reaper thread).
    pub(crate) judge: Arc<Judge>,
    /// Git dirs named by `.git` files outside the usual places, by lower identity.
    pub(crate) extra_gitdirs: dashmap::DashMap<(u64, u64), ()>,
    /// Live names each process had refreshed on the lower a moment ago.
    pub(crate) recent_refresh: Arc<crate::recent_refresh::RecentRefresh>,
    /// Git dirs the box created since the mount, by lower identity: their index is only ever
    /// what the box wrote (`Core::seed_index`).
    pub(crate) box_gitdirs: dashmap::DashMap<(u64, u64), ()>,
    /// Recent work-tree directory listings (see `listing`).
    pub(crate) listings: Arc<listing::Listings>,
    /// One reverse heal at a time: a lookup of `index` during another's heal waits for it
    /// rather than find the heal's lock, skip, and hand the box the index being replaced.
    pub(crate) reverse_heals: parking_lot::Mutex<()>,
    /// Keeps what box ops would destroy (None: parking off).
    pub(crate) parker: Option<crate::park::keep::Parker>,
    /// The session's notifier, once mounted (`Core::notifier_slot`): without it live refs'
    /// attributes are not kept (ADR 0036).
    pub(crate) notifier: Arc<std::sync::OnceLock<fuser::Notifier>>,
    /// Files CREATE made, whose capabilities the kernel asks about before their first write.
    pub(crate) fresh_files: fresh_files::FreshFiles,
    /// Negative entries given for a missing `packed-refs` (ADR 0060).
    pub(crate) missing_packed_refs: crate::git_rules::missing_packed_refs::MissingPackedRefs,
}

fn io_err(e: std::io::Error) -> Errno {
    Errno::from(e)
}

impl<L: Layer> Core<L> {
    /// A core over `lower`, whose root is classified as `root_class`.
    pub fn new(lower: Lower, layer: L, root_class: Class, opts: CoreOptions) -> std::io::Result<Self> {
        let st = lower.stat(c".")?;
        let inodes = InodeTable::new(&st, root_class, opts.pin_budget);
        let judge = Arc::new(Judge::default());
        if layer.guards() {
            match crate::judge::procs::proc_mismatch() {
                None => start_reaper(judge.clone(), lower.try_clone()?, layer.names().id().to_string()),
                Some(why) => tracing::warn!(
                    reason = %why,
                    "no lock reaper: box processes cannot be told alive or dead here, so a dead box process's lock stays until removed by hand; mount seamfs where /proc is its own pid namespace's"
                ),
            }
        }
        let parker = match opts.park.clone().filter(|_| layer.guards()) {
            Some(cfg) => Some(crate::park::keep::Parker::start(lower.try_clone()?, opts.mountpoint.clone(), cfg, layer.names().index())?),
            None => None,
        };
        let recent_refresh = Arc::new(crate::recent_refresh::RecentRefresh::new(layer.refresh_window()));
        let missing_packed_refs = crate::git_rules::missing_packed_refs::MissingPackedRefs::new(layer.refresh_window());
        Ok(Core {
            missing_packed_refs,
            parker,
            lower,
            inodes: Arc::new(inodes),
            handles: Handles::default(),
            layer,
            opts,
            passthrough_on: AtomicBool::new(false),
            writeback_on: AtomicBool::new(false),
            killpriv_on: AtomicBool::new(false),
            judge,
            extra_gitdirs: Default::default(),
            recent_refresh,
            box_gitdirs: Default::default(),
            listings: Default::default(),
            reverse_heals: Default::default(),
            notifier: Default::default(),
            fresh_files: Default::default(),
        })
    }

    /// Where the mount puts its session's notifier (`mount::serve_with`'s `mounted`). Once it
    /// is there, a live ref's entry and attributes are kept (ADR 0036, 0038), an open that
    /// finds another file behind the name drops the kernel's copy first, and a box lock drops
    /// every live ref's.
    pub fn notifier_slot(&self) -> Arc<std::sync::OnceLock<fuser::Notifier>> {
        self.notifier.clone()
    }

    /// The layer.
    pub fn layer(&self) -> &L {
        &self.layer
    }

    /// Whether passthrough was accepted by the kernel.
    pub fn passthrough_active(&self) -> bool {
        self.passthrough_on.load(Ordering::Relaxed)
    }

    pub(crate) fn set_passthrough(&self, on: bool) {
        self.passthrough_on.store(on, Ordering::Relaxed);
    }

    pub(crate) fn set_writeback(&self, on: bool) {
        self.writeback_on.store(on, Ordering::Relaxed);
    }

    pub(crate) fn set_killpriv(&self, on: bool) {
        self.killpriv_on.store(on, Ordering::Relaxed);
    }

    /// The lower open flags for the box's: under a writeback cache the kernel reads pages of a
    /// file opened write-only and places appends itself (as libfuse's passthrough does).
    pub(crate) fn lower_open_flags(&self, flags: i32) -> i32 {
        if !self.writeback_on.load(Ordering::Relaxed) {
            return flags;
        }
        let flags = flags & !libc::O_APPEND;
        if flags & libc::O_ACCMODE == libc::O_WRONLY {
            (flags & !libc::O_ACCMODE) | libc::O_RDWR
        } else {
            flags
        }
    }

    /// Nodes currently known (for memory reports).
    pub fn node_count(&self) -> usize {
        self.inodes.len()
    }

    pub(crate) fn class_of(&self, id: u64) -> Result<Class, Errno> {
        self.inodes.with(id, |n| n.class)
    }

    pub(crate) fn policy(&self, class: Class) -> CachePolicy {
        let p = self.layer.cache(class);
        if class == Class::LiveRef && self.notifier.get().is_none() && !as_if_mounted() {
            // Nothing could drop a stale copy at an open (ADR 0036) or a box lock (ADR 0038;
            // the share emulator keeps its entries: that is its fault model).
            let entry_ttl = if self.layer.guards() { Duration::ZERO } else { p.entry_ttl };
            return CachePolicy { attr_ttl: Duration::ZERO, entry_ttl, ..p };
        }
        p
    }

    /// The kernel keeps live refs' entries (ADR 0038).
    pub(crate) fn live_entries_kept(&self) -> bool {
        self.layer.guards() && !self.policy(Class::LiveRef).entry_ttl.is_zero()
    }

    /// Class a new child of `parent` gets.
    pub(crate) fn child_class(&self, parent: u64, name: &OsStr, is_dir: bool) -> Result<Class, Errno> {
        Ok(self.layer.classify(self.class_of(parent)?, name, is_dir))
    }

    /// The stat of a node, verified to still be the same file (ESTALE otherwise).
    pub(crate) fn stat_node(&self, id: u64) -> Result<libc::stat, Errno> {
        self.stat_node_for(id, 0)
    }

    /// `stat_node` for process `pid`: a live name that process refreshed a moment ago is not
    /// refreshed again (ADR 0020; git stats `config` and `HEAD` right after each lookup).
    pub(crate) fn stat_node_for(&self, id: u64, pid: u32) -> Result<libc::stat, Errno> {
        let (dev, ino, pinned, class, kind) =
            self.inodes.with(id, |n| (n.dev, n.ino, n.pinned.clone(), n.class, n.kind))?;
        if let Some(fd) = pinned {
            return fstat(fd.as_raw_fd()).map_err(io_err);
        }
        let path = self.inodes.path(id)?;
        let seen = self.refresh_live(class, pid, &path, || kind == libc::S_IFDIR && self.ref_dir_never_removed(id));
        match self.stat_after(seen, &path).and_then(|st| self.live_size(class, pid, &path, st)) {
            Ok(st) if same_file(&st, dev, ino) => Ok(st),
            // A live ref the host replaced by rename since the kernel looked it up: the box
            // asked about the name, and the name holds a newer file (see `serves_name`).
            // Not while the node's own file is read through the page cache (ADR 0040).
            Ok(st) if serves_name(class, kind, &st) && !self.other_version_cached(class, id) => Ok(st),
            // Replaced or gone on the lower: make the kernel walk the path again.
            Ok(_) => Err(Errno::ESTALE),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Err(Errno::ESTALE),
            Err(e) => Err(io_err(e)),
        }
    }

    /// Refreshes live name `path` for process `pid` unless that process refreshed it a moment
    /// ago (ADR 0020); then the rest of this request reads it as that refresh left it.
    /// A name it found missing stays missing for that process while nothing made through seamfs
    /// could have created it (ADR 0037).
    pub(crate) fn refresh_for(&self, pid: u32, path: &CStr) -> Seen {
        self.refresh_kept(pid, path, || false)
    }

    /// `refresh_for`; with `across_locks`, a refresh that found the name stands through a box
    /// lock create (a ref-store directory git never removes: ADR 0052).
    fn refresh_kept(&self, pid: u32, path: &CStr, across_locks: impl FnOnce() -> bool) -> Seen {
        match self.recent_refresh.recall_kept(pid, path, across_locks) {
            None => {
                let generation = self.lower.name_generation(path);
                let seen = self.lower.refresh(path);
                self.recent_refresh.learned(pid, path, seen, generation);
                seen
            }
            Some((seen, generation)) => {
                crate::refresh_scope::spare(path, seen, generation);
                self.lower.recalled(seen, generation, path)
            }
        }
    }

    /// `refresh_for` when names of `class` are refreshed (live names); else nothing is learned.
    /// `never_removed` says whether the name is a directory git never removes (asked only when
    /// the process found it present before a lock: `RecentRefresh::recall_kept`).
    fn refresh_live(&self, class: Class, pid: u32, path: &CStr, never_removed: impl FnOnce() -> bool) -> Seen {
        if self.policy(class).refresh {
            self.refresh_kept(pid, path, never_removed)
        } else {
            Seen::Unknown
        }
    }

    /// `lstat` of a live name just refreshed: a refresh that found it missing answers ENOENT
    /// without asking the server again.
    pub(crate) fn stat_after(&self, seen: Seen, path: &CStr) -> std::io::Result<libc::stat> {
        match seen {
            Seen::Missing => Err(std::io::Error::from_raw_os_error(libc::ENOENT)),
            _ => self.lower.stat(path),
        }
    }

    /// A looked-up name's stat (sized by `live_size`). A live name whose look was spared by a
    /// recent refresh may show the lower's entry of a file the host has since replaced, whose
    /// inode number its filesystem gave to a new file: when seamfs knows that number under
    /// another name, the name is asked again (ADR 0057).
    fn live_stat(&self, parent: u64, child: &names::Child<'_>, class: Class, pid: u32, seen: Seen) -> std::io::Result<libc::stat> {
        let path = child.path.as_c_str();
        let look = |seen| self.stat_after(seen, path).and_then(|st| self.live_size(class, pid, path, st));
        let st = look(seen)?;
        if !self.policy(class).refresh || !self.inodes.known_elsewhere(parent, &child.lower, &st) {
            return Ok(st);
        }
        tracing::debug!(name = ?path, ino = st.st_ino, "a live name's number is known under another name: asked again");
        look(self.lower.refresh_again(path))
    }

    /// A live ref's stat with the size its server has (a lower that never revalidates keeps the
    /// first size it saw: `crate::lower_cache`); ENOENT when the server has no such file.
    /// There, a size the server gave process `pid` stands while its refresh does, for the
    /// files git reads to their end and `config` (ADR 0039, 0046).
    fn live_size(&self, class: Class, pid: u32, path: &CStr, mut st: libc::stat) -> std::io::Result<libc::stat> {
        if class != Class::LiveRef {
            return Ok(st);
        }
        if self.lower.stale_pages().is_none() || !crate::policy::size_a_moment_old_is_harmless(path) {
            st.st_size = self.lower.fresh_size(path, &st)?;
            return Ok(st);
        }
        let key = crate::recent_refresh::SizeKey::of(&st);
        st.st_size = match self.recent_refresh.server_size(pid, path, key) {
            Some(size) => size,
            None => {
                // Bytes the process's reads left under the refresh that stands size it too (ADR 0046).
                let size = crate::refresh_scope::as_process(pid, &self.recent_refresh, || self.lower.fresh_size(path, &st))?;
                self.recent_refresh.note_server_size(pid, path, key, size);
                size
            }
        };
        Ok(st)
    }

    /// An O_PATH fd on a node, verified to be the same file.
    pub(crate) fn node_fd(&self, id: u64) -> Result<Arc<OwnedFd>, Errno> {
        let (dev, ino, pinned) = self.inodes.with(id, |n| (n.dev, n.ino, n.pinned.clone()))?;
        if let Some(fd) = pinned {
            return Ok(fd);
        }
        let path = self.inodes.path(id)?;
        let fd = match self.lower.open_at(&path, libc::O_PATH, 0) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Err(Errno::ESTALE),
            Err(e) => return Err(io_err(e)),
        };
        if crate::lower::identity(fd.as_raw_fd()).map_err(io_err)? != (dev, ino) {
            return Err(Errno::ESTALE);
        }
        Ok(Arc::new(fd))
    }

    fn entry_for(&self, id: u64, st: &libc::stat, class: Class, ttl: Option<Duration>) -> Entry {
        let p = self.policy(class);
        Entry { attr: to_attr(id, st), entry_ttl: ttl.unwrap_or(p.entry_ttl), attr_ttl: p.attr_ttl, generation: self.inodes.generation(id) }
    }

    fn negative(&self, class: Class, ttl: Option<Duration>) -> Result<Entry, Errno> {
        let ttl = ttl.unwrap_or(self.policy(class).negative_ttl);
        if ttl.is_zero() {
            return Err(Errno::ENOENT);
        }
        let st = crate::lower::empty_stat();
        Ok(Entry { attr: to_attr(0, &st), entry_ttl: ttl, attr_ttl: ttl, generation: 0 })
    }

    /// Records a name the core itself just created or found, and builds its entry.
    /// `fresh`: the lower just made the file (not a link to an existing one).
    pub(crate) fn record(&self, parent: u64, name: &OsStr, child: &names::Child<'_>, fresh: bool) -> Result<Entry, Errno> {
        let st = self.lower.stat(&child.path).map_err(io_err)?;
        self.record_stat(parent, name, child, st, fresh)
    }

    /// A file the lower just made has the inode number of a node seamfs knows under another
    /// name: on a lower that never revalidates, that name's entry is stale (the host removed its
    /// file, and its filesystem gave the number to this one). Its lower path, if so (ADR 0047).
    fn stale_alias(&self, parent: u64, name: &OsStr, st: &libc::stat) -> Option<crate::lower_path::LowerPath> {
        self.lower.stale_pages()?;
        let id = self.inodes.id_for(st);
        let (other_parent, other_name) = self.inodes.with(id, |n| (n.parent, n.name.clone())).ok()?;
        if id == crate::inode::ROOT || (other_parent == parent && *other_name == *name) {
            return None;
        }
        // Only while the guest still gives the other name that number: a name the box removed
        // through this kernel freed the number for real (git's temporary objects, its locks).
        let other = self.inodes.path(id).ok()?;
        let still = self.lower.stat(&other).ok()?;
        (crate::lower::dev_ino(&still) == crate::lower::dev_ino(st)).then_some(other)
    }

    /// `record`, with the stat already taken (from the new file's own fd).
    pub(crate) fn record_stat(&self, parent: u64, name: &OsStr, child: &names::Child<'_>, st: libc::stat, fresh: bool) -> Result<Entry, Errno> {
        if fresh {
            self.forget_reused_gitdir(&st);
        }
        let class = self.child_class(parent, name, st.st_mode & libc::S_IFMT == libc::S_IFDIR)?;
        let alias = if fresh { self.stale_alias(parent, &child.lower, &st) } else { None };
        let id = self.found(parent, &child.lower, &st, class, &child.path, fresh);
        if let Some(other) = alias {
            // After `found`: it let go of the old node's pin, which kept the stale entry.
            self.lower.forget_stale_number(&child.path, &other);
        }
        let entry = self.entry_for(id, &st, class, None);
        // The reply gives the kernel this entry as a lookup would (the share's fault model).
        self.layer.answered(parent, name, Some(id), entry.entry_ttl);
        Ok(entry)
    }

    fn found(&self, parent: u64, name: &OsStr, st: &libc::stat, class: Class, path: &CStr, fresh: bool) -> u64 {
        let pin = || self.lower.open_at(path, libc::O_PATH, 0).ok();
        let pin_ref: Option<&dyn Fn() -> Option<OwnedFd>> = if self.layer.pin(class) { Some(&pin) } else { None };
        self.inodes.found(Found { parent, name, st, class, fresh, live_kept: self.live_entries_kept() }, pin_ref)
    }

    /// LOOKUP by process `pid`.
    pub fn lookup(&self, parent: u64, name: &OsStr, pid: u32) -> Result<Entry, Errno> {
        let parent_class = self.class_of(parent)?;
        let guess = self.layer.classify(parent_class, name, false);
        let child = self.child(parent, name)?;
        let path = child.path.as_c_str();
        let mut packed_refs = self.packed_refs_lookup(parent_class, name);
        if guess == Class::Index && self.layer.index_split() {
            // Outside a lock the check reads HEAD, the branch and the box index as this process
            // last refreshed them (ADR 0033); a lock create's own check refreshes them again.
            crate::refresh_scope::as_process(pid, &self.recent_refresh, || self.seed_index(parent))?;
            // The sync point read again on purpose: the seed or reverse heal above may have just moved it.
            self.note_index_read(parent, pid);
        }
        let seen = self.refresh_live(guess, pid, path, || self.ref_dir_never_removed_at(parent, name, path));
        self.guard_lookup(parent, guess, &child, pid, seen);
        if !guess.in_git_dir() {
            self.warm_lower_dir(parent);
        }
        let st = match self.live_stat(parent, &child, guess, pid, seen) {
            Ok(st) => Some(st),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => self.guard_missing(parent, guess, &child, pid)?,
            Err(e) => return Err(io_err(e)),
        };
        let class = match &st {
            Some(st) => {
                if st.st_mode & libc::S_IFMT == libc::S_IFREG && name == ".git" && self.layer.index_split() {
                    self.note_dotgit_file(&crate::gitdata::rel_path(path), st);
                }
                self.class_found(parent_class, name, st)
            }
            None => guess,
        };
        let fresh = st.as_ref().map(|st| self.inodes.id_for(st));
        let (answer, ttl) = self.layer.answer(&LookupView { parent, name, class, fresh });
        let ttl = ttl.or_else(|| st.as_ref().and_then(|st| self.never_removed_dir_ttl(parent, name, class, st)));
        let ttl = match (&st, packed_refs.as_mut()) {
            (None, Some(a)) if ttl.is_none() => self.packed_refs_negative_ttl(a, path),
            _ => ttl,
        };
        let result = match (answer, st) {
            (Answer::Old(old), _) if Some(old) != fresh && self.inodes.add_lookup(old) => {
                let st = self.inodes.with(old, |n| n.pinned.clone())?;
                match st.map(|fd| fstat(fd.as_raw_fd())) {
                    Some(Ok(st)) => Ok(self.entry_for(old, &st, class, ttl)),
                    _ => {
                        self.inodes.forget(old, 1);
                        Err(Errno::ENOENT)
                    }
                }
            }
            (Answer::Missing, _) | (_, None) => self.negative(class, ttl),
            (_, Some(st)) => {
                let id = self.found(parent, &child.lower, &st, class, path, false);
                Ok(self.entry_for(id, &st, class, ttl))
            }
        };
        match &result {
            Ok(e) => self.layer.answered(parent, name, (e.attr.ino.0 != 0).then_some(e.attr.ino.0), e.entry_ttl),
            Err(_) => self.layer.answered(parent, name, None, Duration::ZERO),
        }
        result
    }

    /// FORGET.
    pub fn forget(&self, id: u64, n: u64) {
        self.fresh_files.changed(id);
        self.inodes.forget(id, n);
    }

    /// GETATTR by process `pid`; with an open handle the handle's file answers.
    pub fn getattr(&self, id: u64, fh: Option<u64>, pid: u32) -> Result<(FileAttr, Duration), Errno> {
        let class = self.class_of(id)?;
        if let Some(st) = self.snapshot_held(id, class, fh, pid) {
            // Not kept by the kernel: it is this process's view while it holds the handle.
            return Ok((node_attr(id, class, &st, &self.inodes), Duration::ZERO));
        }
        let opened = fh.and_then(|fh| self.handles.file(fh).ok()).filter(|h| h.opened().is_some());
        let st = match opened.as_ref().and_then(|h| h.opened()) {
            Some(fd) => fstat(fd.as_raw_fd()).map_err(io_err)?,
            _ => match self.stat_node_for(id, pid) {
                Err(e) if e == Errno::ESTALE => fstat(self.open_file_of(id)?.as_raw_fd()).map_err(io_err)?,
                r => r?,
            },
        };
        Ok((node_attr(id, class, &st, &self.inodes), self.policy(class).attr_ttl))
    }

    /// The stat of a snapshot (ADR 0048) of live node `id` the caller holds open: git sizes
    /// `packed-refs` by `fstat` and reads that many bytes, so the size must be the bytes' its
    /// handle serves, not the server's a moment later (ADR 0058). The kernel's GETATTR carries
    /// no handle for `fstat`: the process's own open snapshot answers it.
    fn snapshot_held(&self, id: u64, class: Class, fh: Option<u64>, pid: u32) -> Option<libc::stat> {
        if class != Class::LiveRef || self.lower.stale_pages().is_none() {
            return None;
        }
        fh.and_then(|fh| self.handles.file(fh).ok()).and_then(|h| h.snapshot_stat()).or_else(|| self.handles.snapshot_stat_of(id, pid))
    }

    /// SETATTR: mode, owner, size and times, in that order, on the handle or the verified node.
    #[allow(clippy::too_many_arguments)]
    pub fn setattr(
        &self,
        id: u64,
        fh: Option<u64>,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        by_uid: u32,
        by_pid: u32,
    ) -> Result<(FileAttr, Duration), Errno> {
        // An open file is changed through its own fd, never its name (which may be gone).
        let handle = fh.is_some_and(|fh| self.handles.file(fh).is_ok());
        let node = self.handle_or_node_fd(id, fh)?;
        let proc_path = proc_fd_path(node.as_raw_fd());
        let is_link = self.inodes.with(id, |n| n.kind == libc::S_IFLNK)?;
        if let Some(mode) = mode {
            if is_link {
                return Err(Errno::EOPNOTSUPP);
            }
            // SAFETY: valid C string.
            cvt(unsafe { libc::chmod(proc_path.as_ptr(), (mode & 0o7777) as libc::mode_t) })?;
        }
        if uid.is_some() || gid.is_some() {
            let (u, g) = (uid.unwrap_or(u32::MAX), gid.unwrap_or(u32::MAX));
            // SAFETY: O_PATH fds may be chowned through AT_EMPTY_PATH.
            cvt(unsafe {
                libc::fchownat(node.as_raw_fd(), c"".as_ptr(), u, g, libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW)
            })?;
        }
        if let Some(size) = size {
            self.park_node(id, 0, Some(size), by_pid);
            let _ = if handle {
                // SAFETY: valid fd.
                cvt(unsafe { libc::ftruncate(node.as_raw_fd(), size as libc::off_t) })?
            } else {
                // SAFETY: valid C string.
                cvt(unsafe { libc::truncate(proc_path.as_ptr(), size as libc::off_t) })?
            };
            self.kill_privs_after_trunc(by_uid, node.as_raw_fd())?;
        }
        if atime.is_some() || mtime.is_some() {
            let ts = [timespec(atime), timespec(mtime)];
            if is_link {
                // SAFETY: valid fd, empty path with AT_EMPTY_PATH works on O_PATH fds.
                cvt(unsafe {
                    libc::utimensat(node.as_raw_fd(), c"".as_ptr(), ts.as_ptr(), libc::AT_EMPTY_PATH)
                })?;
            } else {
                // SAFETY: valid C string and two timespecs.
                cvt(unsafe { libc::utimensat(libc::AT_FDCWD, proc_path.as_ptr(), ts.as_ptr(), 0) })?;
            }
        }
        let st = fstat(node.as_raw_fd()).map_err(io_err)?;
        let class = self.class_of(id)?;
        Ok((to_attr(id, &st), self.policy(class).attr_ttl))
    }

    /// READLINK.
    pub fn readlink(&self, id: u64) -> Result<Vec<u8>, Errno> {
        let fd = self.node_fd(id)?;
        let mut buf = vec![0u8; libc::PATH_MAX as usize];
        // SAFETY: valid fd, empty path (reads the O_PATH symlink itself), buffer of given size.
        let n = unsafe { libc::readlinkat(fd.as_raw_fd(), c"".as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            return Err(Errno::from(std::io::Error::last_os_error()));
        }
        buf.truncate(n as usize);
        Ok(buf)
    }

    /// STATFS of the lower.
    pub fn statfs(&self) -> Result<libc::statvfs, Errno> {
        self.lower.statfs().map_err(io_err)
    }

    /// ACCESS: existence check (permission checks are the kernel's, `default_permissions`).
    pub fn access(&self, id: u64) -> Result<(), Errno> {
        if id == ROOT {
            return Ok(());
        }
        self.stat_node(id).map(drop)
    }
}

/// A live ref (HEAD, a branch, `config`, `packed-refs`...) is only ever replaced whole, by
/// rename, and is read by its name: when the node the kernel holds is no longer at its name but a
/// file of the same kind is, that file answers. ESTALE would make the kernel walk the path once
/// more, and a host rewriting HEAD in a loop (`git checkout`, `update-ref`) can replace it again
/// before that walk ends: the second ESTALE reaches git, whose `is_git_directory` then says
/// "not a git repository". The kind must match: the kernel takes a changed type for a bad inode.
pub(crate) fn serves_name(class: Class, kind: u32, st: &libc::stat) -> bool {
    class == Class::LiveRef && st.st_mode & libc::S_IFMT == kind
}

/// Attributes of node `id` as `st`. A live ref's node serves its name and may answer for a
/// newer file than the one looked up: that file's own number is shown, so a stat check (git's
/// `packed-refs` snapshot compares `st_ino`) sees the change (ADR 0038).
fn node_attr(id: u64, class: Class, st: &libc::stat, inodes: &InodeTable) -> FileAttr {
    if class == Class::LiveRef {
        return to_attr(inodes.id_for(st), st);
    }
    to_attr(id, st)
}

#[cfg(test)]
mod reused_number_tests;

#[cfg(test)]
thread_local! {
    /// A unit test's core on this thread keeps live refs' entries as a mounted one does, though
    /// it has no notifier (there is no kernel to notify).
    pub(crate) static AS_IF_MOUNTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[cfg(test)]
fn as_if_mounted() -> bool {
    AS_IF_MOUNTED.with(|m| m.get())
}

#[cfg(not(test))]
fn as_if_mounted() -> bool {
    false
}

/// Removes dead box processes' locks and forgets their baselines, for the life of the daemon.
fn start_reaper(judge: Arc<Judge>, lower: Lower, box_id: String) {
    let spawned = crate::signals::spawn_blocked("seam-reaper", move || {
        // First the locks a seamfs of this box that died here left (its records, `held`).
        crate::git_rules::held::release_all_dead(&lower, &box_id);
        let mut ticks = 0u32;
        loop {
            std::thread::sleep(crate::judge::locks::REAP_EVERY);
            judge.locks.reap(&lower);
            ticks = ticks.wrapping_add(1);
            if ticks % 25 == 0 {
                judge.tracker.prune();
                judge.heal_locks.prune_dead();
            }
        }
    });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "could not start the lock reaper; dead box processes' locks will stay");
    }
}

/// -1 → errno, as an `Errno`.
pub(crate) fn cvt(ret: libc::c_int) -> Result<libc::c_int, Errno> {
    if ret < 0 {
        Err(Errno::from(std::io::Error::last_os_error()))
    } else {
        Ok(ret)
    }
}

fn timespec(t: Option<TimeOrNow>) -> libc::timespec {
    match t {
        None => libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_OMIT },
        Some(TimeOrNow::Now) => libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_NOW },
        Some(TimeOrNow::SpecificTime(t)) => {
            let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            libc::timespec { tv_sec: d.as_secs() as libc::time_t, tv_nsec: d.subsec_nanos() as libc::c_long }
        }
    }
}
