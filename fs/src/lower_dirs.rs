//! Parent directories of lower paths, kept open for a moment (ADR 0035).
//!
//! Every call on a lower path with a parent opens that parent first (`lower_at`: no symlink is
//! followed on the way) and closes it after: two of the six syscalls seamfs made per FUSE
//! request, and in a guest each `openat2` walks the share's dentries again. One box commit
//! opened its git dir 203 times. A parent opened within [`DIR_FD_TTL`] is used again instead.
//!
//! What that changes: for up to the TTL a name is resolved in the directory that was at its
//! parent's path then, as virtiofsd always does (an fd per inode). seamfs forgets a directory
//! whenever a box rename, rmdir or create touches its path or an ancestor, and forgets all of
//! them at every box lock create (the barrier after which the box reads the share's current
//! state, ADR 0020), so only a directory the *host* renames or removes is met late, by at most
//! the TTL: what the kernel's own entry for a ref-store directory already allows
//! (`policy::REF_DIR_TTL`). A bounded number of fds is kept (the 20,000 open-file limit).

use std::fmt;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// How long an opened parent directory is used again.
pub const DIR_FD_TTL: Duration = Duration::from_millis(100);

/// At most this many directories are kept open.
const MAX_DIRS: usize = 32;

/// One kept directory.
struct Slot {
    path: Box<[u8]>,
    fd: Arc<OwnedFd>,
    at: Instant,
}

/// Parent directories opened within the TTL, by their path below the lower root.
pub(crate) struct DirFds {
    slots: Mutex<Vec<Slot>>,
    ttl: Duration,
}

impl fmt::Debug for DirFds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DirFds({} kept, ttl {:?})", self.slots.lock().len(), self.ttl)
    }
}

impl DirFds {
    /// A cache that keeps directories for `ttl`.
    pub(crate) fn new(ttl: Duration) -> DirFds {
        DirFds { slots: Mutex::new(Vec::with_capacity(MAX_DIRS)), ttl }
    }

    /// The directory at `path` if it was opened within the TTL.
    pub(crate) fn get(&self, path: &[u8]) -> Option<Arc<OwnedFd>> {
        let now = Instant::now();
        let slots = self.slots.lock();
        slots.iter().find(|s| &*s.path == path && now.duration_since(s.at) < self.ttl).map(|s| s.fd.clone())
    }

    /// Keeps `fd`, just opened at `path`, in place of an expired slot or the oldest one.
    pub(crate) fn put(&self, path: &[u8], fd: Arc<OwnedFd>) {
        let now = Instant::now();
        let mut slots = self.slots.lock();
        let slot = Slot { path: path.into(), fd, at: now };
        if let Some(i) = slots.iter().position(|s| &*s.path == path || now.duration_since(s.at) >= self.ttl) {
            slots[i] = slot;
        } else if slots.len() < MAX_DIRS {
            slots.push(slot);
        } else if let Some(i) = (0..slots.len()).min_by_key(|&i| slots[i].at) {
            slots[i] = slot;
        }
    }

    /// Forgets `path` and every directory below it (it was renamed, removed or made anew).
    pub(crate) fn forget_under(&self, path: &[u8]) {
        self.slots.lock().retain(|s| !is_under(&s.path, path));
    }

    /// Forgets every directory (a barrier: what follows resolves every path afresh).
    pub(crate) fn forget_all(&self) {
        self.slots.lock().clear();
    }
}

/// True when `p` is `dir` or a path below it.
fn is_under(p: &[u8], dir: &[u8]) -> bool {
    p.strip_prefix(dir).is_some_and(|rest| rest.is_empty() || rest[0] == b'/') || dir == b"."
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fd() -> Arc<OwnedFd> {
        Arc::new(std::fs::File::open("/").expect("open /").into())
    }

    #[test]
    fn a_directory_is_kept_for_the_ttl_only() {
        let d = DirFds::new(Duration::from_millis(30));
        assert!(d.get(b"r/.git").is_none());
        d.put(b"r/.git", fd());
        assert!(d.get(b"r/.git").is_some());
        assert!(d.get(b"r/.gi").is_none(), "a prefix is another path");
        std::thread::sleep(Duration::from_millis(40));
        assert!(d.get(b"r/.git").is_none(), "expired");
    }

    #[test]
    fn renames_and_barriers_forget() {
        let d = DirFds::new(Duration::from_secs(10));
        for p in [&b"r/.git"[..], b"r/.git/refs/heads", b"r/.gitx", b"s"] {
            d.put(p, fd());
        }
        d.forget_under(b"r/.git");
        assert!(d.get(b"r/.git").is_none() && d.get(b"r/.git/refs/heads").is_none());
        assert!(d.get(b"r/.gitx").is_some(), "a sibling sharing a prefix stays");
        d.forget_all();
        assert!(d.get(b"s").is_none() && d.get(b"r/.gitx").is_none());
    }

    #[test]
    fn at_most_max_dirs_are_kept() {
        let d = DirFds::new(Duration::from_secs(10));
        for i in 0..MAX_DIRS + 5 {
            d.put(format!("d{i}").as_bytes(), fd());
        }
        assert_eq!(d.slots.lock().len(), MAX_DIRS);
        assert!(d.get(format!("d{}", MAX_DIRS + 4).as_bytes()).is_some(), "the newest is kept");
        assert!(d.get(b"d0").is_none(), "the oldest went");
    }
}
