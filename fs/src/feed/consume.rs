//! seamfs's end of the feed: one thread that connects (again and again), reads messages, and
//! for each changed name refreshes it on the lower, drops what the box kernel cached of it, and
//! raises the box's watchers. Whenever the feed is not live the work tree is on the share's
//! TTLs, and going down invalidates every work-tree entry handed out on the feed's word.

use std::path::{Path, PathBuf};
use std::time::Duration;

use fuser::{INodeNo, Notifier};
use tracing::{info, warn};

use super::addr::{connect, FeedAddr};
use super::again::Again;
use super::lines::{LineReader, Next};
use super::proto::{Kind, Message, DEAD_AFTER};
use super::FeedLive;
use crate::core::Shared;
use crate::gitdata::cpath;
use crate::inode::ROOT;
use crate::lower::statx_cached;

/// How long to wait between connection attempts.
const RETRY: Duration = Duration::from_secs(1);

/// Longer than a worker takes from reading the lower (or the feed's state) to sending its
/// reply: invalidations are made again this long after (`again`).
const IN_FLIGHT: Duration = Duration::from_millis(100);

/// The consumer's parts.
pub struct Consumer {
    /// Where the feed is.
    pub addr: FeedAddr,
    /// The mounted core's shared parts.
    pub shared: Shared,
    /// The session's notifier.
    pub notifier: Notifier,
    /// The mount point, as box processes reach it (for raising watchers).
    pub mountpoint: PathBuf,
    /// Read by the policy table.
    pub live: &'static FeedLive,
}

impl Consumer {
    /// Starts the feed thread; it runs until the process ends.
    pub fn spawn(self) -> std::io::Result<()> {
        std::thread::Builder::new().name("seam-feed".into()).spawn(move || self.run()).map(drop)
    }

    fn run(self) {
        super::mark_poker();
        super::track_touches();
        let mut said_unreachable = false;
        loop {
            match connect(&self.addr) {
                Ok(fd) => {
                    said_unreachable = false;
                    let why = self.session(LineReader::new(fd));
                    self.down(why);
                }
                Err(e) if !said_unreachable => {
                    warn!(feed = %self.addr, error = %e, "change feed not reachable; the work tree stays on the share's TTLs, trying again every second");
                    said_unreachable = true;
                }
                Err(_) => {}
            }
            std::thread::sleep(RETRY);
        }
    }

    /// Serves one connection; returns why it ended.
    fn session(&self, mut r: LineReader) -> String {
        let mut next_seq: Option<u64> = None;
        let mut said_bad = false;
        let mut again = Again::default();
        loop {
            // Beats come every second, so a second pass is never more than about that late.
            self.again(&mut again);
            let line = match r.next(DEAD_AFTER) {
                Ok(Next::Line(l)) => l,
                Ok(Next::TooLong) => {
                    self.bad_once(&mut said_bad, "line too long");
                    continue;
                }
                Ok(Next::Timeout) => return format!("silent for {} s", DEAD_AFTER.as_secs()),
                Ok(Next::Eof) => return "closed by the other end".into(),
                Err(e) => return format!("read failed: {e}"),
            };
            let msg = match Message::decode(&line) {
                Ok(m) => m,
                Err(e) => {
                    self.bad_once(&mut said_bad, e.0);
                    continue;
                }
            };
            let seq = match &msg {
                Message::Hello => continue,
                Message::Change { seq, .. } | Message::Beat { seq } | Message::Overflow { seq } => *seq,
            };
            if !self.live.set(true) {
                info!(feed = %self.addr, "change feed live: host changes are pushed to the box; the work tree is cached until they come");
                self.check_root();
            }
            // A gap in the sequence is a lost message: as good as an overflow.
            if next_seq.is_some_and(|n| n != seq) || matches!(msg, Message::Overflow { .. }) {
                let n = self.invalidate_all();
                again.everything();
                info!(feed = %self.addr, entries = n, "change feed lost messages: everything cached was invalidated");
            }
            next_seq = seq.checked_add(1);
            if let Message::Change { kind, path, .. } = msg {
                self.apply(kind, &path, &mut again);
            }
        }
    }

    /// The second invalidations that are due.
    fn again(&self, again: &mut Again) {
        let due = again.due(IN_FLIGHT);
        if due.all {
            self.invalidate_all();
        }
        for (parent, name) in &due.names {
            self.shared.forget_listing(*parent);
            let _ = self.notifier.inval_entry(INodeNo(*parent), name);
        }
    }

    /// seamd names changes relative to the checkout it watches, and seamfs reads them relative to
    /// its lower's root: a mount of any other directory (a parent of the checkout) gets names it
    /// does not have, so host edits never reach the box. A checkout's root holds `.git`.
    fn check_root(&self) {
        if let Err(e) = self.shared.lower().stat(c".git") {
            warn!(
                feed = %self.addr,
                mountpoint = %self.mountpoint.display(),
                error = %e,
                "the change feed names paths relative to the checkout seamd watches, and this mount's root has no .git: \
                 mount seamfs over that checkout itself (or run seamd on the directory this mount serves), else host edits \
                 reach box tools only on the share's TTLs"
            );
        }
    }

    fn bad_once(&self, said: &mut bool, why: &str) {
        if !std::mem::replace(said, true) {
            warn!(feed = %self.addr, why, "dropped a malformed change-feed line (said once per connection)");
        }
    }

    fn down(&self, why: String) {
        if self.live.set(false) {
            let mut n = self.invalidate_all();
            // A reply already computed while the feed was live may reach the kernel after the
            // pass above, carrying FEED_TTL: a second pass once such replies are out catches it.
            std::thread::sleep(IN_FLIGHT);
            n += self.invalidate_all();
            self.look_dirs_up_again();
            warn!(feed = %self.addr, why = %why, entries = n, "change feed down: the work tree is back on the share's TTLs (everything cached on the feed's word invalidated)");
        }
    }

    /// Drops every work-tree entry and attribute the kernel may hold (and the listings kept
    /// for as long as those entries), the root's own attributes too; returns how many nodes.
    /// Negative entries are never given FEED_TTL, so they expire on the share's TTL by themselves.
    fn invalidate_all(&self) -> usize {
        let keep_dirs = self.live.is_live();
        let nodes = self.shared.work_tree_nodes();
        self.shared.forget_listing(ROOT);
        let _ = self.notifier.inval_inode(INodeNo(ROOT), -1, 0);
        for (id, parent, name) in &nodes {
            self.shared.forget_listing(*parent);
            // A directory's own listing too, when none of its names is known (an empty one).
            self.shared.forget_listing(*id);
            // While the feed stays live (a gap or an overflow), a directory the share still
            // holds at its name keeps its entry, so the cwd of box processes inside stays
            // theirs (one share round trip per directory, at a rare event). A feed gone down
            // drops every entry: one kept would carry FEED_TTL with nothing left to end it.
            if !(keep_dirs && self.shared.dir_still_at_its_name(*id)) {
                let _ = self.notifier.inval_entry(INodeNo(*parent), name);
            }
            let _ = self.notifier.inval_inode(INodeNo(*id), -1, 0);
        }
        nodes.len()
    }

    /// Looks every known work-tree directory up again through the mount, after a feed gone down
    /// dropped their entries. A lookup that finds the same directory rehashes the kernel's
    /// dropped dentry of it (a directory has one), which is the cwd of any box process inside:
    /// its `getcwd` works again, and the entry now carries the share's TTL. A directory
    /// replaced meanwhile is another inode, and its old dentry stays dropped.
    fn look_dirs_up_again(&self) {
        for rel in self.shared.work_tree_dirs() {
            let _ = std::fs::symlink_metadata(self.mountpoint.join(rel));
        }
    }

    /// One changed name.
    fn apply(&self, kind: Kind, rel: &Path, again: &mut Again) {
        let Some(name) = rel.file_name() else { return };
        let parent_rel = rel.parent().unwrap_or(Path::new(""));
        let parent = self.shared.node_of(parent_rel);
        let seen = self.shared.node_of(rel);
        // The echo of the box's own change (`ECHO_WINDOW`): the kernel's copy is dropped, nothing more.
        let echo = parent.is_some_and(super::box_touched) || seen.is_some_and(super::box_touched);
        let mut node = seen;
        if !echo {
            self.shared.lower().refresh(&cpath(rel));
            node = self.shared.node_of(rel);
            if kind == Kind::Remove {
                self.raise_delete(parent_rel, rel);
            }
        }
        if let Some(p) = parent {
            self.shared.forget_listing(p);
            // A directory still at its name keeps its entry: dropping it would unhash the
            // dentry of every box process's cwd inside it (`getcwd` then fails with ENOENT, and
            // git with "unable to get current working directory"). Its attributes and listing
            // are dropped below and above. The share is asked again first, echo or not (one
            // round trip per directory): an entry kept for FEED_TTL must be the share's truth.
            let dir = seen.is_some_and(|n| self.shared.is_dir_node(n));
            if kind == Kind::Remove || !dir || self.shared.dir_known_at(p, name, &cpath(rel)).is_none() {
                let _ = self.notifier.inval_entry(INodeNo(p), name);
                // An echo is the box's own change, which no lookup in flight can predate.
                if !echo {
                    again.name(p, name);
                }
            }
        }
        if kind != Kind::Remove {
            if let Some(id) = node {
                let _ = self.notifier.inval_inode(INodeNo(id), 0, 0);
            }
            if !echo {
                self.raise_change(rel);
            }
        }
    }

    /// A name the host removed that the kernel still holds: the feed thread unlinks it through
    /// the mount, which seamfs answers without touching the lower (`is_poke`), so the kernel
    /// drops its entry the way an unlink does and watchers get IN_DELETE. Only when the lower
    /// lacks the name (a forged message cannot hide a file). Without a cached entry the kernel
    /// would look the name up, find it gone and send nothing: the directory's times are set
    /// instead (IN_ATTRIB on the directory).
    fn raise_delete(&self, parent_rel: &Path, rel: &Path) {
        if self.shared.lower().stat(&cpath(rel)).is_ok() {
            return;
        }
        let at = cpath(&self.mountpoint.join(rel));
        // The kernel's cached view through the mount: no request is sent to seamfs for it.
        let Ok(st) = statx_cached(libc::AT_FDCWD, &at, 0, libc::STATX_INO | libc::STATX_TYPE) else {
            self.raise_change(parent_rel);
            return;
        };
        let dir = st.stx_mode as u32 & libc::S_IFMT == libc::S_IFDIR;
        // SAFETY: a C string.
        unsafe { libc::unlinkat(libc::AT_FDCWD, at.as_ptr(), if dir { libc::AT_REMOVEDIR } else { 0 }) };
    }

    /// A created or changed name: its times set to what they are, through the mount, which the
    /// kernel reports to watchers as IN_ATTRIB (seamfs answers it without touching the lower).
    fn raise_change(&self, rel: &Path) {
        let Ok(st) = self.shared.lower().stat(&cpath(rel)) else { return };
        let p = cpath(&self.mountpoint.join(rel));
        let times = [
            libc::timespec { tv_sec: st.st_atime, tv_nsec: st.st_atime_nsec },
            libc::timespec { tv_sec: st.st_mtime, tv_nsec: st.st_mtime_nsec },
        ];
        // SAFETY: C string and two timespecs.
        unsafe { libc::utimensat(libc::AT_FDCWD, p.as_ptr(), times.as_ptr(), libc::AT_SYMLINK_NOFOLLOW) };
    }
}
