//! The inode store: nodes by path, not by pinned fd.
//!
//! A node remembers its parent and name (so its lower path can be rebuilt) and the lower's
//! `(st_dev, st_ino)` (so a name the host replaced is detected and answered with ESTALE). No fd
//! is held per node, which keeps a 100,000-file checkout under the 20,000 open-file limit; a
//! policy may pin an O_PATH fd for a few classes, under a budget.
//!
//! The FUSE node id is the lower's inode number where that is unambiguous (the root's device),
//! so `st_ino` seen in the box matches the share and survives a remount; files on other devices
//! get synthetic ids from the top half of the range.

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;
use fuser::Errno;

use crate::lower_path::LowerPath;
use crate::policy::Class;

/// The FUSE root node id.
pub const ROOT: u64 = 1;
const SYNTHETIC_BASE: u64 = 1 << 63;

/// One known inode.
#[derive(Debug)]
pub struct Node {
    /// Parent node id (the root is its own parent).
    pub parent: u64,
    /// Name in the parent, as last looked up (shared, so rebuilding a path does not copy it).
    pub name: Arc<OsStr>,
    /// Lower device.
    pub dev: u64,
    /// Lower inode number.
    pub ino: u64,
    /// `st_mode & S_IFMT`.
    pub kind: u32,
    /// Path class.
    pub class: Class,
    /// Kernel lookup count.
    pub nlookup: u64,
    /// The FUSE generation: a new one when the lower hands this inode number to a new file
    /// while the kernel may still hold the old one (the kernel then drops its old inode and
    /// every entry naming it instead of serving the new file under an old name, ADR 0027).
    pub generation: u32,
    /// An O_PATH fd kept by policy: the node then keeps reading the file it was looked up as.
    pub pinned: Option<Arc<OwnedFd>>,
    /// The lower file's stamp at the last open served through the page cache (0: none), so
    /// an unchanged file keeps its cached pages (`core::data`).
    pub stamp: u64,
    /// Some open at `stamp` read the whole file through seamfs: the kernel's page cache holds
    /// it, and a read-only open may defer opening the lower (`core::data`).
    pub complete: bool,
    /// `attr::attr_stamp` of the attributes last sent to the kernel for this node (0: none),
    /// so an open of a live ref can tell when the kernel's copy is another file's (ADR 0036).
    pub given: u64,
}

/// All nodes the kernel knows.
#[derive(Debug)]
pub struct InodeTable {
    nodes: DashMap<u64, Node>,
    synthetic: DashMap<(u64, u64), u64>,
    next_synthetic: AtomicU64,
    next_generation: AtomicU32,
    root_dev: u64,
    root_ino: u64,
    pins: AtomicUsize,
    pin_budget: usize,
    /// Nodes of live refs the kernel may hold, with when attributes were last given for each,
    /// so a box lock can drop the ones the kernel may still keep (ADR 0038).
    live_refs: DashMap<u64, Instant>,
}

/// What a lookup learned about a name on the lower.
pub struct Found<'a> {
    /// Parent node id.
    pub parent: u64,
    /// Name in the parent.
    pub name: &'a OsStr,
    /// The lower's stat.
    pub st: &'a libc::stat,
    /// Class of the name.
    pub class: Class,
    /// The lower just made this file (create, mkdir, mknod, symlink): a node already at its
    /// id is another file whose inode number the lower reused.
    pub fresh: bool,
    /// The kernel keeps live refs' entries: a live-ref node met under another name is another
    /// file (git never renames a ref file away, the lower reused its number), so the kernel
    /// must drop the old name's entry rather than reach the new file by it (ADR 0038).
    pub live_kept: bool,
}

impl InodeTable {
    /// A table whose root is the lower root with the given stat.
    pub fn new(root: &libc::stat, root_class: Class, pin_budget: usize) -> InodeTable {
        let t = InodeTable {
            nodes: DashMap::new(),
            synthetic: DashMap::new(),
            next_synthetic: AtomicU64::new(SYNTHETIC_BASE),
            next_generation: AtomicU32::new(1),
            root_dev: root.st_dev,
            root_ino: root.st_ino,
            pins: AtomicUsize::new(0),
            pin_budget,
            live_refs: DashMap::new(),
        };
        t.nodes.insert(
            ROOT,
            Node {
                parent: ROOT,
                name: OsStr::new("").into(),
                dev: root.st_dev,
                ino: root.st_ino,
                kind: libc::S_IFDIR,
                class: root_class,
                nlookup: 1,
                generation: 0,
                pinned: None,
                stamp: 0,
                complete: false,
                given: 0,
            },
        );
        t
    }

    /// The node id for a lower file.
    pub fn id_for(&self, st: &libc::stat) -> u64 {
        if st.st_dev == self.root_dev {
            if st.st_ino == self.root_ino {
                return ROOT;
            }
            if st.st_ino != ROOT && st.st_ino < SYNTHETIC_BASE {
                return st.st_ino;
            }
        }
        *self
            .synthetic
            .entry((st.st_dev, st.st_ino))
            .or_insert_with(|| self.next_synthetic.fetch_add(1, Ordering::Relaxed))
    }

    /// Every known node of class `class`: (id, parent, name). For invalidating all of them.
    pub fn nodes_of(&self, class: Class) -> Vec<(u64, u64, Arc<OsStr>)> {
        self.nodes.iter().filter(|n| n.class == class && *n.key() != ROOT).map(|n| (*n.key(), n.parent, n.name.clone())).collect()
    }

    /// The node id of a lower file the table knows, without making one up for a stranger.
    pub fn known_id(&self, dev: u64, ino: u64) -> Option<u64> {
        let id = if dev == self.root_dev && ino == self.root_ino {
            ROOT
        } else if dev == self.root_dev && ino != ROOT && ino < SYNTHETIC_BASE {
            ino
        } else {
            *self.synthetic.get(&(dev, ino))?
        };
        self.nodes.contains_key(&id).then_some(id)
    }

    /// True when the table knows `st`'s file as a name other than `name` in `parent`.
    pub fn known_elsewhere(&self, parent: u64, name: &OsStr, st: &libc::stat) -> bool {
        let Some(id) = self.known_id(st.st_dev, st.st_ino) else { return false };
        id != ROOT && self.nodes.get(&id).is_some_and(|n| n.parent != parent || *n.name != *name)
    }

    /// Records a kernel lookup of a name; returns the node id. `pin` supplies an fd to pin
    /// when the policy wants one and the budget allows.
    pub fn found(&self, f: Found<'_>, pin: Option<&dyn Fn() -> Option<OwnedFd>>) -> u64 {
        let id = self.id_for(f.st);
        let kind = f.st.st_mode & libc::S_IFMT;
        let mut existed = true;
        let mut entry = self.nodes.entry(id).or_insert_with(|| {
            existed = false;
            Node {
                parent: f.parent,
                name: f.name.into(),
                dev: f.st.st_dev,
                ino: f.st.st_ino,
                kind,
                class: f.class,
                nlookup: 0,
                generation: 0,
                pinned: None,
                stamp: 0,
                complete: false,
                given: 0,
            }
        });
        let node = entry.value_mut();
        let renamed = id != ROOT && (node.parent != f.parent || *node.name != *f.name);
        // A live ref found at a node known under another name is another file too, unless that
        // node is a lock (renamed onto the ref) or a ref itself (above): git never links a ref,
        // so the number was reused (ADR 0057).
        let foreign = !matches!(node.class, Class::LiveRef | Class::Lock);
        let live_renamed = existed && renamed && ((f.live_kept && node.class == Class::LiveRef) || (f.class == Class::LiveRef && foreign));
        if renamed {
            node.parent = f.parent;
            node.name = f.name.into();
        }
        let reused = existed && id != ROOT && (f.fresh || live_renamed);
        if reused || node.kind != kind || node.dev != f.st.st_dev || node.ino != f.st.st_ino {
            // Same id, another file (inode number reused): start over, keep the kernel's count.
            node.kind = kind;
            node.dev = f.st.st_dev;
            node.ino = f.st.st_ino;
            if node.pinned.take().is_some() {
                self.pins.fetch_sub(1, Ordering::Relaxed);
            }
            node.stamp = 0;
            node.complete = false;
            node.generation = self.next_generation.fetch_add(1, Ordering::Relaxed);
        }
        node.class = f.class;
        if f.class == Class::LiveRef {
            self.live_refs.insert(id, Instant::now());
        }
        node.nlookup += 1;
        if node.pinned.is_none() && self.pins.load(Ordering::Relaxed) < self.pin_budget {
            if let Some(fd) = pin.and_then(|p| p()) {
                node.pinned = Some(Arc::new(fd));
                self.pins.fetch_add(1, Ordering::Relaxed);
            }
        }
        id
    }

    /// A node's FUSE generation (0 for an unknown node: the kernel holds none by that id). The
    /// kernel keeps 32 bits of it (`inode->i_generation`), so the table does too.
    pub fn generation(&self, id: u64) -> u64 {
        self.nodes.get(&id).map_or(0, |n| u64::from(n.generation))
    }

    /// Adds one kernel reference to an existing node (a stale answer served again).
    pub fn add_lookup(&self, id: u64) -> bool {
        match self.nodes.get_mut(&id) {
            Some(mut n) => {
                n.nlookup += 1;
                true
            }
            None => false,
        }
    }

    /// Drops `n` kernel references; the node goes when none are left.
    pub fn forget(&self, id: u64, n: u64) {
        if id == ROOT {
            return;
        }
        let gone = match self.nodes.get_mut(&id) {
            Some(mut node) => {
                node.nlookup = node.nlookup.saturating_sub(n);
                node.nlookup == 0
            }
            None => false,
        };
        if gone {
            if let Some((_, node)) = self.nodes.remove_if(&id, |_, node| node.nlookup == 0) {
                if node.pinned.is_some() {
                    self.pins.fetch_sub(1, Ordering::Relaxed);
                }
                self.live_refs.remove(&id);
                if node.dev != self.root_dev || id >= SYNTHETIC_BASE {
                    self.synthetic.remove(&(node.dev, node.ino));
                }
            }
        }
    }

    /// Runs `f` on a node.
    pub fn with<T>(&self, id: u64, f: impl FnOnce(&Node) -> T) -> Result<T, Errno> {
        self.nodes.get(&id).map(|n| f(&n)).ok_or(Errno::ESTALE)
    }

    /// Sets a node's data stamp; returns the previous one (0 for an unknown node). A new stamp
    /// forgets that the file was read whole.
    pub fn swap_stamp(&self, id: u64, stamp: u64) -> u64 {
        match self.nodes.get_mut(&id) {
            Some(mut n) => {
                let old = std::mem::replace(&mut n.stamp, stamp);
                if old != stamp {
                    n.complete = false;
                }
                old
            }
            None => 0,
        }
    }

    /// Notes the attributes just sent to the kernel for node `id` (`attr::attr_stamp`).
    pub fn note_given(&self, id: u64, stamp: u64) {
        if let Some(mut n) = self.nodes.get_mut(&id) {
            n.given = stamp;
        }
        if let Some(mut at) = self.live_refs.get_mut(&id) {
            *at = Instant::now();
        }
    }

    /// The stamp of the attributes last sent for node `id` (0: none, or an unknown node).
    pub fn given(&self, id: u64) -> u64 {
        self.nodes.get(&id).map_or(0, |n| n.given)
    }

    /// An open at `stamp` read the whole file (ignored if the stamp moved on meanwhile).
    pub fn mark_complete(&self, id: u64, stamp: u64) {
        if let Some(mut n) = self.nodes.get_mut(&id) {
            if n.stamp == stamp && stamp != 0 {
                n.complete = true;
            }
        }
    }

    /// Changes a known node's class (a directory learnt to be a git dir).
    pub fn set_class(&self, id: u64, class: Class) {
        if let Some(mut n) = self.nodes.get_mut(&id) {
            n.class = class;
        }
    }

    /// Moves a node to a new parent and name (after a rename through seamfs).
    pub fn moved(&self, id: u64, parent: u64, name: &OsStr, class: Class) {
        if let Some(mut n) = self.nodes.get_mut(&id) {
            n.parent = parent;
            n.name = name.into();
            n.class = class;
            if class == Class::LiveRef {
                self.live_refs.insert(id, Instant::now());
            }
        }
    }

    /// Live-ref nodes whose attributes were given to the kernel within `ttl` (those it may
    /// still keep; a node dropped since may be listed).
    pub fn live_refs(&self, ttl: Duration) -> Vec<u64> {
        self.live_refs.iter().filter(|e| e.value().elapsed() <= ttl).map(|e| *e.key()).collect()
    }

    /// The node's path relative to the lower root ("." for the root).
    pub fn path(&self, id: u64) -> Result<LowerPath, Errno> {
        self.path_with(id, None)
    }

    /// The path of `name` inside directory `parent`.
    pub fn child_path(&self, parent: u64, name: &OsStr) -> Result<LowerPath, Errno> {
        self.path_with(parent, Some(name))
    }

    /// The path of `id` (and `leaf` below it); the names are gathered in a per-thread scratch
    /// list and joined into a pooled buffer, so a warm lookup allocates nothing.
    fn path_with(&self, id: u64, leaf: Option<&OsStr>) -> Result<LowerPath, Errno> {
        thread_local! {
            static PARTS: std::cell::RefCell<Vec<Arc<OsStr>>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        PARTS.with(|parts| {
            let mut parts = parts.borrow_mut();
            parts.clear();
            let mut cur = id;
            while cur != ROOT {
                let Some(n) = self.nodes.get(&cur) else {
                    parts.clear();
                    return Err(Errno::ESTALE);
                };
                parts.push(n.name.clone());
                cur = n.parent;
                if parts.len() > 4096 {
                    parts.clear();
                    return Err(Errno::ELOOP);
                }
            }
            let path = LowerPath::join(parts.iter().rev().map(|p| p.as_bytes()).chain(leaf.map(|l| l.as_bytes())));
            parts.clear();
            path
        })
    }

    /// Number of nodes (for memory reports).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when only the root is known.
    pub fn is_empty(&self) -> bool {
        self.nodes.len() <= 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(dev: u64, ino: u64, mode: u32) -> libc::stat {
        let mut s = crate::lower::empty_stat();
        s.st_dev = dev;
        s.st_ino = ino;
        s.st_mode = mode;
        s
    }

    fn add(t: &InodeTable, parent: u64, name: &str, s: &libc::stat) -> u64 {
        t.found(Found { parent, name: OsStr::new(name), st: s, class: Class::WorkTree, fresh: false, live_kept: false }, None)
    }

    #[test]
    fn ids_follow_the_lower_and_paths_follow_parents() {
        let t = InodeTable::new(&st(7, 100, libc::S_IFDIR), Class::WorkTree, 0);
        let d = add(&t, ROOT, "dir", &st(7, 200, libc::S_IFDIR));
        let f = add(&t, d, "file", &st(7, 300, libc::S_IFREG));
        assert_eq!((d, f), (200, 300), "node id is the lower inode number");
        assert_eq!(t.path(ROOT).unwrap().to_bytes(), b".");
        assert_eq!(t.path(f).unwrap().to_bytes(), b"dir/file");
        assert_eq!(t.child_path(d, OsStr::new("x")).unwrap().to_bytes(), b"dir/x");
        t.moved(f, ROOT, OsStr::new("renamed"), Class::WorkTree);
        assert_eq!(t.path(f).unwrap().to_bytes(), b"renamed");
    }

    #[test]
    fn other_devices_and_inode_one_get_synthetic_ids() {
        let t = InodeTable::new(&st(7, 100, libc::S_IFDIR), Class::WorkTree, 0);
        let a = add(&t, ROOT, "a", &st(8, 200, libc::S_IFREG));
        let b = add(&t, ROOT, "b", &st(7, 1, libc::S_IFREG));
        assert!(a >= SYNTHETIC_BASE && b >= SYNTHETIC_BASE && a != b);
        assert_eq!(add(&t, ROOT, "a", &st(8, 200, libc::S_IFREG)), a, "stable while known");
    }

    #[test]
    fn a_reused_inode_number_is_a_new_generation() {
        let t = InodeTable::new(&st(7, 100, libc::S_IFDIR), Class::WorkTree, 0);
        let old = add(&t, ROOT, "w0", &st(7, 200, libc::S_IFDIR));
        let gen = t.generation(old);
        assert_eq!(add(&t, ROOT, "w0", &st(7, 200, libc::S_IFDIR)), old);
        assert_eq!(t.generation(old), gen, "a lookup of the same file keeps its generation");
        let made = Found { parent: ROOT, name: OsStr::new(".git"), st: &st(7, 200, libc::S_IFDIR), class: Class::GitDir, fresh: true, live_kept: false };
        assert_eq!(t.found(made, None), old, "the id follows the inode number");
        assert_ne!(t.generation(old), gen, "a file the lower just made under a known number is another file");
        assert_eq!(t.with(old, |n| (n.nlookup, n.class)), Ok((3, Class::GitDir)), "the kernel's count is kept");
        let g2 = t.generation(old);
        add(&t, ROOT, "hard-link", &st(7, 200, libc::S_IFDIR));
        assert_eq!(t.generation(old), g2, "a lookup under another name (a link, a rename) is the same file");
    }

    #[test]
    fn a_kept_live_ref_met_under_another_name_is_another_file() {
        let t = InodeTable::new(&st(7, 100, libc::S_IFDIR), Class::WorkTree, 0);
        let file = st(7, 300, libc::S_IFREG);
        let look = |name: &str, class, live_kept| {
            t.found(Found { parent: ROOT, name: OsStr::new(name), st: &file, class, fresh: false, live_kept }, None)
        };
        let main = look("main", Class::LiveRef, true);
        let gen = t.generation(main);
        assert_eq!(t.live_refs(Duration::from_secs(1)), vec![main], "a box lock can reach it");
        assert!(t.live_refs(Duration::ZERO).is_empty(), "attributes given longer ago than the TTL have expired in the kernel");
        // The host replaced `main` and its next lock got the old file's number (ADR 0026).
        assert_eq!(look("main.lock", Class::Lock, true), main);
        assert_ne!(t.generation(main), gen, "the kernel must drop `main`'s entry, not read the lock by it");
        let gen = t.generation(main);
        // A lock renamed onto a ref is followed: the lock's name was never kept.
        assert_eq!(look("main", Class::LiveRef, true), main);
        assert_eq!(t.generation(main), gen);
        // Without kept entries every walk is a LOOKUP, which names the node afresh.
        let u = InodeTable::new(&st(7, 100, libc::S_IFDIR), Class::WorkTree, 0);
        let f = |name: &'static str, class| Found { parent: ROOT, name: OsStr::new(name), st: &file, class, fresh: false, live_kept: false };
        let id = u.found(f("main", Class::LiveRef), None);
        let gen = u.generation(id);
        u.found(f("main.lock", Class::Lock), None);
        assert_eq!(u.generation(id), gen, "followed as a rename");
        u.forget(id, 2);
        assert!(u.live_refs(Duration::from_secs(1)).is_empty(), "a forgotten node leaves the list");
    }

    #[test]
    fn forget_removes_only_at_zero() {
        let t = InodeTable::new(&st(7, 100, libc::S_IFDIR), Class::WorkTree, 0);
        let f = add(&t, ROOT, "f", &st(7, 300, libc::S_IFREG));
        add(&t, ROOT, "f", &st(7, 300, libc::S_IFREG));
        t.forget(f, 1);
        assert!(t.with(f, |n| n.nlookup).is_ok());
        t.forget(f, 1);
        assert_eq!(t.with(f, |n| n.nlookup), Err(Errno::ESTALE));
        t.forget(ROOT, 10);
        assert!(t.path(ROOT).is_ok(), "the root is never forgotten");
    }
}
