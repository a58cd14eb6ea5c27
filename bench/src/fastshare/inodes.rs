//! The inode store: one node per backing inode, keyed by `(st_dev, st_ino)` as virtiofsd's
//! `InodeStore` is, each holding an O_PATH fd — but under a budget.
//!
//! virtiofsd keeps one fd per inode the guest knows and answers ENFILE once its limit is spent;
//! here the open-file limit (20,000) is below the files of a big checkout, so past the budget the
//! store drops the fds of nodes not used lately (a clock, second chance) and keeps their remembered
//! parent + name. A node without an fd is reopened by that name on its next use and checked against
//! its `(st_dev, st_ino)`: a different inode there now is ESTALE, which makes the kernel walk the
//! path again. A lookup always opens the name it finds, so a dropped node gets its fd back for free.

use std::collections::{HashMap, VecDeque};
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use super::sys;

/// The FUSE node id of the root.
pub const ROOT: u64 = 1;

/// An O_PATH fd a node holds; counted while it is open, wherever its last user drops it.
#[derive(Debug)]
pub struct HeldFd {
    fd: OwnedFd,
    open: Arc<AtomicUsize>,
}

impl HeldFd {
    /// The raw fd, for `*at` calls.
    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl Drop for HeldFd {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Where a node was last seen: the name it is reopened by after its fd was dropped.
#[derive(Debug, Clone)]
struct Loc {
    parent: Arc<Node>,
    name: OsString,
}

/// One backing inode the kernel knows.
#[derive(Debug)]
pub struct Node {
    /// The FUSE node id.
    pub id: u64,
    /// `(st_dev, st_ino)` of the backing inode.
    pub key: (u64, u64),
    /// The file type bits of its mode (they never change for an inode).
    pub kind: u32,
    /// Lookups the kernel holds (FORGET gives them back).
    lookups: AtomicU64,
    /// Parent and name (None for the root, whose fd is never dropped).
    loc: Mutex<Option<Loc>>,
    /// The O_PATH fd, when held.
    fd: Mutex<Option<Arc<HeldFd>>>,
    /// Used since the clock hand last passed.
    used: AtomicBool,
}

/// A multiply-rotate hash for integer keys (FxHash's): node ids and inode numbers are not chosen
/// by an adversary, and SipHash was a tenth of the share's CPU in a warm `git status`.
#[derive(Debug, Default, Clone, Copy)]
struct IntHasher(u64);

impl std::hash::Hasher for IntHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type IntMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<IntHasher>>;

#[derive(Debug, Default)]
struct Maps {
    by_id: IntMap<u64, Arc<Node>>,
    /// The node of each `(st_dev, st_ino)`.
    by_key: IntMap<(u64, u64), Arc<Node>>,
}

/// The store.
#[derive(Debug)]
pub struct Inodes {
    maps: Mutex<Maps>,
    next: AtomicU64,
    /// Most nodes that hold an fd at once (the root's is extra).
    budget: usize,
    /// Nodes holding an fd now.
    held: AtomicUsize,
    /// O_PATH fds open now, counting ones an in-flight request still uses after a drop.
    open: Arc<AtomicUsize>,
    /// Nodes that got an fd, oldest first: the clock the budget evicts from.
    clock: Mutex<VecDeque<Weak<Node>>>,
}

fn key_of(st: &libc::stat) -> (u64, u64) {
    (st.st_dev, st.st_ino)
}

/// The node of `st`'s inode, if the store has one of the same file type.
fn find(maps: &Maps, st: &libc::stat) -> Option<Arc<Node>> {
    let n = maps.by_key.get(&key_of(st))?;
    (n.kind == st.st_mode & libc::S_IFMT).then(|| n.clone())
}

/// One more kernel lookup of `n`, found as `name` in `parent`: the latest name wins, so a rename
/// on the host heals at the next lookup (the root has no name).
fn counted(n: &Arc<Node>, parent: &Arc<Node>, name: &OsStr) {
    n.lookups.fetch_add(1, Ordering::Relaxed);
    if n.id == ROOT {
        return;
    }
    let mut loc = n.loc.lock();
    if !loc.as_ref().is_some_and(|l| l.parent.id == parent.id && l.name == name) {
        *loc = Some(Loc { parent: parent.clone(), name: name.to_os_string() });
    }
}

impl Inodes {
    /// A store whose root is `root` (an O_PATH or directory fd on the backing dir).
    pub fn new(root: OwnedFd, budget: usize) -> io::Result<Inodes> {
        let st = sys::fstat(root.as_raw_fd())?;
        let open = Arc::new(AtomicUsize::new(1));
        let node = Arc::new(Node {
            id: ROOT,
            key: key_of(&st),
            kind: st.st_mode & libc::S_IFMT,
            lookups: AtomicU64::new(1),
            loc: Mutex::new(None),
            fd: Mutex::new(Some(Arc::new(HeldFd { fd: root, open: open.clone() }))),
            used: AtomicBool::new(true),
        });
        let mut maps = Maps::default();
        maps.by_key.insert(node.key, node.clone());
        maps.by_id.insert(ROOT, node);
        Ok(Inodes {
            maps: Mutex::new(maps),
            next: AtomicU64::new(ROOT + 1),
            budget: budget.max(1),
            held: AtomicUsize::new(0),
            open,
            clock: Mutex::new(VecDeque::new()),
        })
    }

    /// O_PATH fds open now (the root's included).
    pub fn open_fds(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// The node of a FUSE id; ESTALE for one the kernel already forgot.
    pub fn get(&self, id: u64) -> io::Result<Arc<Node>> {
        self.maps.lock().by_id.get(&id).cloned().ok_or_else(|| io::Error::from_raw_os_error(libc::ESTALE))
    }

    /// The node's O_PATH fd: the held one, or the name it was last seen by, reopened and checked.
    pub fn fd(&self, node: &Arc<Node>) -> io::Result<Arc<HeldFd>> {
        node.used.store(true, Ordering::Relaxed);
        if let Some(fd) = node.fd.lock().clone() {
            return Ok(fd);
        }
        let loc = node.loc.lock().clone().ok_or_else(|| io::Error::from_raw_os_error(libc::ESTALE))?;
        let pfd = self.fd(&loc.parent)?;
        let fd = sys::open_path(pfd.raw(), &sys::cname(&loc.name)?).map_err(|e| match e.raw_os_error() {
            // The name is gone: the node is no longer reachable by it.
            Some(libc::ENOENT) => io::Error::from_raw_os_error(libc::ESTALE),
            _ => e,
        })?;
        if key_of(&sys::fstat(fd.as_raw_fd())?) != node.key {
            return Err(io::Error::from_raw_os_error(libc::ESTALE));
        }
        Ok(self.install(node, fd))
    }

    /// Gives `node` the fd (unless a racing request did first) and keeps the budget.
    fn install(&self, node: &Arc<Node>, fd: OwnedFd) -> Arc<HeldFd> {
        let held = {
            let mut slot = node.fd.lock();
            if let Some(have) = slot.clone() {
                return have;
            }
            self.open.fetch_add(1, Ordering::Relaxed);
            let held = Arc::new(HeldFd { fd, open: self.open.clone() });
            *slot = Some(held.clone());
            held
        };
        self.held.fetch_add(1, Ordering::Relaxed);
        node.used.store(true, Ordering::Relaxed);
        self.clock.lock().push_back(Arc::downgrade(node));
        self.trim();
        held
    }

    /// Drops fds of nodes not used since the clock hand last passed until the budget holds.
    fn trim(&self) {
        let mut clock = self.clock.lock();
        let mut turns = 2 * clock.len() + 1;
        while self.held.load(Ordering::Relaxed) > self.budget && turns > 0 {
            turns -= 1;
            let Some(w) = clock.pop_front() else { break };
            let Some(n) = w.upgrade() else { continue };
            if n.used.swap(false, Ordering::Relaxed) {
                clock.push_back(w);
                continue;
            }
            self.drop_fd(&n);
        }
        // Entries of dropped or forgotten nodes linger until the hand reaches them; bound them.
        if clock.len() > 2 * self.budget + 1024 {
            clock.retain(|w| w.upgrade().is_some_and(|n| n.fd.lock().is_some()));
        }
    }

    fn drop_fd(&self, n: &Node) {
        if n.id != ROOT && n.fd.lock().take().is_some() {
            self.held.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// The node already holding `st`'s inode (same type: a reused inode number with another
    /// type is a new inode), with one more kernel lookup counted and `name` in `parent`
    /// remembered as its latest name; None for an inode the store does not know. A lookup of a
    /// known inode needs no fd: one `fstatat` answers it (virtiofsd opens one and closes it).
    pub fn known(&self, parent: &Arc<Node>, name: &OsStr, st: &libc::stat) -> Option<Arc<Node>> {
        let maps = self.maps.lock();
        let n = find(&maps, st)?;
        counted(&n, parent, name);
        Some(n)
    }

    /// Registers what `fd` (an O_PATH fd just opened as `name` in `parent`) is, counting one
    /// kernel lookup: the existing node of its `(st_dev, st_ino)`, or a new one.
    pub fn register(&self, parent: &Arc<Node>, name: &OsStr, fd: OwnedFd, st: &libc::stat) -> Arc<Node> {
        let node = {
            let mut maps = self.maps.lock();
            match find(&maps, st) {
                Some(n) => {
                    counted(&n, parent, name);
                    n
                }
                None => {
                    let id = self.next.fetch_add(1, Ordering::Relaxed);
                    let n = Arc::new(Node {
                        id,
                        key: key_of(st),
                        kind: st.st_mode & libc::S_IFMT,
                        lookups: AtomicU64::new(1),
                        loc: Mutex::new(Some(Loc { parent: parent.clone(), name: name.to_os_string() })),
                        fd: Mutex::new(None),
                        used: AtomicBool::new(true),
                    });
                    maps.by_key.insert(n.key, n.clone());
                    maps.by_id.insert(id, n.clone());
                    n
                }
            }
        };
        if node.fd.lock().is_none() {
            self.install(&node, fd);
        }
        node
    }

    /// Gives back `n` kernel lookups of `id`; the last one removes the node and drops its fd (a
    /// child that remembers it as its parent can still reopen it by its own name).
    pub fn forget(&self, id: u64, n: u64) {
        if id == ROOT {
            return;
        }
        let gone = {
            let mut maps = self.maps.lock();
            let Some(node) = maps.by_id.get(&id).cloned() else { return };
            let left = node.lookups.load(Ordering::Relaxed).saturating_sub(n);
            node.lookups.store(left, Ordering::Relaxed);
            if left > 0 {
                return;
            }
            maps.by_id.remove(&id);
            if maps.by_key.get(&node.key).is_some_and(|n| n.id == id) {
                maps.by_key.remove(&node.key);
            }
            node
        };
        self.drop_fd(&gone);
    }

    /// Undoes one lookup `register` counted (a readdirplus entry that did not fit the reply).
    pub fn unlookup(&self, node: &Node) {
        self.forget(node.id, 1);
    }

    /// After a rename: the node now at `name` in `parent` is remembered by that name.
    pub fn moved(&self, parent: &Arc<Node>, name: &OsStr, st: &libc::stat) {
        let found = {
            let maps = self.maps.lock();
            find(&maps, st)
        };
        if let Some(n) = found.filter(|n| n.id != ROOT) {
            *n.loc.lock() = Some(Loc { parent: parent.clone(), name: name.to_os_string() });
        }
    }

    /// The node's path below the backing root as last seen (for error messages).
    pub fn path_of(&self, node: &Node) -> PathBuf {
        let mut names = Vec::new();
        let mut loc = node.loc.lock().clone();
        while let Some(l) = loc {
            names.push(l.name);
            loc = l.parent.loc.lock().clone();
        }
        names.iter().rev().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    fn dir_fd(p: &std::path::Path) -> OwnedFd {
        let c = std::ffi::CString::new(p.as_os_str().as_bytes()).expect("no NUL");
        sys::openat(libc::AT_FDCWD, &c, libc::O_PATH | libc::O_DIRECTORY, 0).expect("open dir")
    }

    fn look(s: &Inodes, parent: &Arc<Node>, name: &str) -> Arc<Node> {
        let pfd = s.fd(parent).expect("parent fd");
        let fd = sys::open_path(pfd.raw(), &sys::cname(OsStr::new(name)).expect("name")).expect("open");
        let st = sys::fstat(fd.as_raw_fd()).expect("fstat");
        s.register(parent, OsStr::new(name), fd, &st)
    }

    /// Over budget, fds are dropped, and a dropped node reopens by its name to the same inode;
    /// a name replaced by another inode is ESTALE.
    #[test]
    fn budget_holds_and_dropped_nodes_reopen_or_go_stale() {
        let tmp = std::env::temp_dir().join(format!("fastshare-inodes-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).expect("mkdir");
        for i in 0..50 {
            std::fs::write(tmp.join(format!("f{i}")), b"x").expect("write");
        }
        let s = Inodes::new(dir_fd(&tmp), 8).expect("store");
        let root = s.get(ROOT).expect("root");
        let nodes: Vec<_> = (0..50).map(|i| look(&s, &root, &format!("f{i}"))).collect();
        assert!(s.held.load(Ordering::Relaxed) <= 8);
        assert!(s.open_fds() <= 9, "{} fds open", s.open_fds());
        // f0's fd was dropped long ago: it reopens by name, to the same inode.
        assert!(nodes[0].fd.lock().is_none());
        assert_eq!(key_of(&sys::fstat(s.fd(&nodes[0]).expect("reopen").raw()).expect("fstat")), nodes[0].key);
        // f1 replaced on the backing side: a different inode under the name is ESTALE.
        assert!(nodes[1].fd.lock().is_none());
        std::fs::write(tmp.join("new"), b"y").expect("write");
        std::fs::rename(tmp.join("new"), tmp.join("f1")).expect("rename");
        assert_eq!(s.fd(&nodes[1]).expect_err("stale").raw_os_error(), Some(libc::ESTALE));
        // The same inode looked up again is the same node; forgetting both lookups removes it.
        let again = look(&s, &root, "f2");
        assert_eq!(again.id, nodes[2].id);
        s.forget(again.id, 2);
        assert!(s.get(again.id).is_err());
        assert_eq!(s.path_of(&nodes[3]), PathBuf::from("f3"));
        let _ = std::fs::remove_dir_all(&tmp);
    }
}
