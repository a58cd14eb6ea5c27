//! Directories: open, read (plain and plus), sync.
//!
//! A directory's entries are read whole from the lower at offset 0 and served from that
//! snapshot; offsets are indexes into it, so a rewind reads the lower again.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use fuser::{Errno, FileType, FopenFlags};

use super::data::sync_fd;
use super::{Core, Entry};
use crate::attr::to_attr;
use crate::handles::{DirEntry, DirHandle, Listing};
use crate::layer::Layer;
use crate::lower::empty_stat;

/// One page of a directory listing, ready for the reply: a range of the handle's listing.
#[derive(Debug)]
pub struct DirPage {
    listing: Arc<Listing>,
    from: usize,
    to: usize,
}

impl DirPage {
    /// `(offset of the next entry, entry)` pairs.
    pub fn entries(&self) -> impl Iterator<Item = (u64, &DirEntry)> {
        (self.from..self.to).map(|i| (self.listing.offset(i), &self.listing.entries[i]))
    }
}

fn kind_of(d_type: u8) -> FileType {
    match d_type {
        libc::DT_DIR => FileType::Directory,
        libc::DT_LNK => FileType::Symlink,
        libc::DT_FIFO => FileType::NamedPipe,
        libc::DT_CHR => FileType::CharDevice,
        libc::DT_BLK => FileType::BlockDevice,
        libc::DT_SOCK => FileType::Socket,
        _ => FileType::RegularFile,
    }
}

/// Reads every entry of an open directory fd (a duplicate is consumed by `fdopendir`).
fn read_all(fd: &std::os::fd::OwnedFd) -> Result<Vec<DirEntry>, Errno> {
    let dup = fd.as_fd().try_clone_to_owned().map_err(Errno::from)?;
    let raw = std::os::fd::IntoRawFd::into_raw_fd(dup);
    // SAFETY: `raw` is ours; fdopendir takes it over, closedir closes it.
    let dir = unsafe { libc::fdopendir(raw) };
    if dir.is_null() {
        // SAFETY: fdopendir failed, so `raw` is still ours to close.
        unsafe { libc::close(raw) };
        return Err(Errno::from(std::io::Error::last_os_error()));
    }
    // SAFETY: `dir` is a valid DIR*; rewind since the dup shares the offset.
    unsafe { libc::rewinddir(dir) };
    let mut out = Vec::new();
    loop {
        // SAFETY: valid DIR*; the entry is copied before the next call.
        let ent = unsafe { libc::readdir64(dir) };
        if ent.is_null() {
            break;
        }
        // SAFETY: readdir returned a valid entry with a NUL-terminated name.
        let (name, ino, ty) = unsafe {
            let e = &*ent;
            (CStr::from_ptr(e.d_name.as_ptr()).to_bytes().to_vec(), e.d_ino, e.d_type)
        };
        out.push(DirEntry { lower: OsString::from_vec(name), shown: None, ino, kind: kind_of(ty) });
    }
    // SAFETY: valid DIR*, closed once.
    unsafe { libc::closedir(dir) };
    Ok(out)
}

impl<L: Layer> Core<L> {
    /// OPENDIR. A cacheable directory's listing is taken now (from the listing cache when read
    /// within its TTL) and the kernel may cache it (`FOPEN_CACHE_DIR`); the kernel keeps its
    /// cached copy (`FOPEN_KEEP_CACHE`) only when that copy has the listing's very content.
    pub fn opendir(&self, id: u64) -> Result<(u64, FopenFlags), Errno> {
        let Some(ttl) = self.listing_ttl(id) else {
            let fd = self.open_dir_fd(id)?;
            let h = DirHandle { fd: Mutex::new(Some(fd)), entries: Mutex::new(None), served: AtomicBool::new(false) };
            return Ok((self.handles.add_dir(h), FopenFlags::empty()));
        };
        let (fd, listing) = match self.listings.fresh(id, ttl) {
            Some(l) => (None, l),
            None => {
                let fd = self.open_dir_fd(id)?;
                let l = self.read_listing(id, &fd)?;
                (Some(fd), l)
            }
        };
        let mut flags = FopenFlags::FOPEN_CACHE_DIR;
        if self.listings.kernel_may_keep(id, &listing) {
            flags |= FopenFlags::FOPEN_KEEP_CACHE;
        }
        let h = DirHandle { fd: Mutex::new(fd), entries: Mutex::new(Some(listing)), served: AtomicBool::new(false) };
        Ok((self.handles.add_dir(h), flags))
    }

    /// Reads the lower directory behind `fd` as the box sees it, and keeps it when cacheable.
    fn read_listing(&self, dir: u64, fd: &std::os::fd::OwnedFd) -> Result<Arc<Listing>, Errno> {
        let class = self.class_of(dir)?;
        let mut all = read_all(fd)?;
        if self.seed_for_listing(dir, &all) {
            all = read_all(fd)?;
        }
        self.show_box_names(class, &mut all);
        let listing = Arc::new(Listing::new(all));
        if let Some(ttl) = self.class_listing_ttl(class) {
            self.listings.keep(dir, listing.clone(), ttl);
        }
        Ok(listing)
    }

    /// Before a lookup in `dir`: on a burst of lookups after the share's entries expired, list
    /// the lower directory once. The share's kernel then refreshes every entry with one
    /// READDIRPLUS, and the lookups that follow hit its cache instead of asking it one by one.
    pub(crate) fn warm_lower_dir(&self, dir: u64) {
        let Some(ttl) = self.listing_ttl(dir) else { return };
        if !self.listings.should_warm(dir, ttl) {
            return;
        }
        // Read only to refresh the share's entries (and kept, as any listing of the directory).
        if let Ok(fd) = self.open_dir_fd(dir) {
            let _ = self.read_listing(dir, &fd);
        }
    }

    /// Names as the box sees them; hidden names dropped.
    fn show_box_names(&self, class: crate::policy::Class, all: &mut Vec<DirEntry>) {
        all.retain_mut(|e| match self.box_name(class, &e.lower) {
            Some(n) if n != e.lower.as_os_str() => {
                e.shown = Some(n.to_os_string());
                true
            }
            Some(_) => true,
            None => false,
        });
    }

    /// How long a directory's listing may be kept (None: never; live and object dirs change
    /// under the box and must be listed fresh).
    fn listing_ttl(&self, id: u64) -> Option<Duration> {
        self.class_listing_ttl(self.class_of(id).ok()?)
    }

    /// `listing_ttl` for a directory of class `class`.
    fn class_listing_ttl(&self, class: crate::policy::Class) -> Option<Duration> {
        if !self.layer.listings() {
            return None;
        }
        let ttl = self.layer.listing_ttl(class);
        let cacheable = matches!(class, crate::policy::Class::WorkTree | crate::policy::Class::GitOther);
        (cacheable && !ttl.is_zero()).then_some(ttl)
    }

    /// Opens the node's lower directory, verified to be the same directory.
    fn open_dir_fd(&self, id: u64) -> Result<Arc<std::os::fd::OwnedFd>, Errno> {
        let (dev, ino) = self.inodes.with(id, |n| (n.dev, n.ino))?;
        let path = self.inodes.path(id)?;
        let fd = match self.lower.open_at(&path, libc::O_RDONLY | libc::O_DIRECTORY, 0) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Err(Errno::ESTALE),
            Err(e) => return Err(Errno::from(e)),
        };
        if crate::lower::identity(fd.as_raw_fd()).map_err(Errno::from)? != (dev, ino) {
            return Err(Errno::ESTALE);
        }
        Ok(Arc::new(fd))
    }

    /// The handle's lower fd, opened now if the listing came from the cache.
    fn handle_fd(&self, dir: u64, h: &DirHandle) -> Result<Arc<std::os::fd::OwnedFd>, Errno> {
        let mut fd = h.fd.lock();
        if let Some(f) = fd.as_ref() {
            return Ok(f.clone());
        }
        let f = self.open_dir_fd(dir)?;
        *fd = Some(f.clone());
        Ok(f)
    }

    /// READDIR / READDIRPLUS: entries from `offset` on, at most `max` of them.
    pub fn readdir(&self, dir: u64, fh: u64, offset: u64, max: usize) -> Result<DirPage, Errno> {
        let h = self.handles.dir(fh)?;
        let mut guard = h.entries.lock();
        let rewind = offset == 0 && h.served.swap(true, Ordering::Relaxed);
        if rewind || guard.is_none() {
            let fd = self.handle_fd(dir, &h)?;
            *guard = Some(self.read_listing(dir, &fd)?);
        }
        let listing = guard.as_ref().expect("filled above").clone();
        let from = Listing::index(offset).min(listing.entries.len());
        let to = from.saturating_add(max).min(listing.entries.len());
        Ok(DirPage { listing, from, to })
    }

    /// The entry READDIRPLUS sends for one name; None when the name is gone.
    ///
    /// Every entry is a real node (a zero node id would also zero `d_ino`, and glibc hides such
    /// entries). Live names get their class's TTL of zero, so their next use looks them up
    /// again, with a refresh. "." and ".." are not counted: the kernel takes no reference on them.
    pub fn plus_entry(&self, dir: u64, fh: u64, name: &OsStr, lower: &OsStr) -> Option<Entry> {
        if name == "." || name == ".." {
            let id = if name == "." { dir } else { self.inodes.with(dir, |n| n.parent).ok()? };
            let st = self.stat_node(id).ok()?;
            let generation = self.inodes.generation(id);
            return Some(Entry { attr: to_attr(id, &st), entry_ttl: Duration::ZERO, attr_ttl: Duration::ZERO, generation });
        }
        let h = self.handles.dir(fh).ok()?;
        let fd = h.fd.lock().clone();
        let st = match fd {
            Some(fd) => {
                let cname = CString::new(lower.as_bytes()).ok()?;
                let mut st = empty_stat();
                // SAFETY: valid dir fd, C string and out-pointer.
                let r = unsafe { libc::fstatat(fd.as_raw_fd(), cname.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
                if r < 0 {
                    return None;
                }
                st
            }
            // A cached listing: stat by path (the attributes are never taken from the cache).
            None => self.lower.stat(&self.inodes.child_path(dir, lower).ok()?).ok()?,
        };
        let is_dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
        let mut class = self.child_class(dir, name, is_dir).ok()?;
        if is_dir && class == crate::policy::Class::WorkTree && self.is_extra_gitdir(&st) {
            class = crate::policy::Class::GitDir;
        }
        let id = if self.layer.pin(class) {
            let path = self.inodes.child_path(dir, lower).ok()?;
            self.found(dir, lower, &st, class, &path, false)
        } else {
            // No fd to pin: the node needs no path now (it is rebuilt from parents when used).
            self.inodes.found(crate::inode::Found { parent: dir, name: lower, st: &st, class, fresh: false, live_kept: self.live_entries_kept() }, None)
        };
        let p = self.policy(class);
        // A listing's entry sets the kernel's TTL of a name it already knows too: `refs/heads`
        // listed in `refs/` must keep the TTL its lookup gave it (ADR 0052).
        let entry_ttl = self.never_removed_dir_ttl(dir, name, class, &st).unwrap_or(p.entry_ttl);
        Some(Entry { attr: to_attr(id, &st), entry_ttl, attr_ttl: p.attr_ttl, generation: self.inodes.generation(id) })
    }

    /// RELEASEDIR.
    pub fn releasedir(&self, fh: u64) {
        self.handles.remove_dir(fh);
    }

    /// FSYNCDIR.
    pub fn fsyncdir(&self, dir: u64, fh: u64, datasync: bool) -> Result<(), Errno> {
        let h = self.handles.dir(fh)?;
        let fd = self.handle_fd(dir, &h)?;
        sync_fd(fd.as_fd(), datasync)
    }
}
