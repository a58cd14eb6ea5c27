//! seamd's end of the change feed: watch the checkout (inotify on Linux, FSEvents on macOS,
//! through `notify`), coalesce bursts, and send each box the names that changed
//! (`seamfs::feed::proto`). Names under a `.git` directory are not sent: live refs, locks and
//! the index are read fresh by seamfs anyway, and objects never change.
//!
//! Symlinks are not followed (the watcher stays inside the checkout); a watcher error or a
//! lost-events flag becomes an `overflow` message, after which every box trusts nothing cached.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use notify::event::{EventKind, ModifyKind, RenameMode};
use notify::{RecursiveMode, Watcher};
use seamfs::feed::proto::{Kind, Message, BEAT_EVERY};
use seamfs::feed::FeedAddr;

/// How long a burst of events is gathered before it is sent (one message per name).
pub const COALESCE: Duration = Duration::from_millis(5);

/// A burst never holds more names than this; past it, an overflow is sent instead.
const MAX_BURST: usize = 10_000;

/// A test hook: the environment variable that lowers [`MAX_BURST`], so a test can force the
/// overflow a burst of 10,000 names would cause (`0`: every burst overflows).
pub const MAX_BURST_ENV: &str = "SEAMD_FEED_MAX_BURST";

fn max_burst() -> usize {
    std::env::var(MAX_BURST_ENV).ok().and_then(|v| v.parse().ok()).unwrap_or(MAX_BURST)
}

/// Where the lines go: every connected box.
#[derive(Default)]
struct Clients {
    socks: Vec<File>,
    /// A character device is written to directly (reopened after an error).
    device: Option<(PathBuf, Option<File>)>,
}

/// Starts the feed: a watcher on `checkout`, a listener (or the device) at `addr`, and the
/// thread that sends. Runs until `stop` is set.
pub fn serve(checkout: &Path, addr: &FeedAddr, stop: &'static AtomicBool, log: impl Fn(&str) + Send + Sync + 'static) -> io::Result<()> {
    let root = std::fs::canonicalize(checkout)?;
    let (tx, rx) = channel();
    let config = notify::Config::default().with_follow_symlinks(false);
    let mut watcher = notify::RecommendedWatcher::new(tx, config).map_err(io::Error::other)?;
    watcher.watch(&root, RecursiveMode::Recursive).map_err(io::Error::other)?;
    let clients = Arc::new(Mutex::new(Clients::default()));
    let log = Arc::new(log);
    match addr {
        FeedAddr::Device(p) => clients.lock().expect("feed clients").device = Some((p.clone(), None)),
        FeedAddr::Unix(p) => {
            // A socket left by an earlier seamd; anything else at the path is refused by bind.
            if std::fs::symlink_metadata(p).is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_socket(&m.file_type())) {
                let _ = std::fs::remove_file(p);
            }
            let l = std::os::unix::net::UnixListener::bind(p)?;
            spawn_accept(l.into(), clients.clone(), stop)?;
        }
        FeedAddr::Vsock { cid, port } => spawn_accept(seamfs::feed::addr::vsock_listen(*cid, *port)?, clients.clone(), stop)?,
    }
    log(&format!("change feed: watching {} for {addr}", root.display()));
    let max = max_burst();
    if max != MAX_BURST {
        log(&format!("change feed: bursts of more than {max} names overflow ({MAX_BURST_ENV})"));
    }
    std::thread::Builder::new().name("seamd-feed".into()).spawn(move || {
        let _keep = watcher;
        send_loop(&root, &rx, &clients, stop, max, &*log);
    })?;
    Ok(())
}

fn spawn_accept(listener: OwnedFd, clients: Arc<Mutex<Clients>>, stop: &'static AtomicBool) -> io::Result<()> {
    std::thread::Builder::new().name("seamd-feed-accept".into()).spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            // SAFETY: a listening socket; the peer address is not wanted.
            let fd = unsafe { libc::accept(listener.as_raw_fd(), std::ptr::null_mut(), std::ptr::null_mut()) };
            if fd < 0 {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            // SAFETY: accept returned a new fd we own.
            let mut sock = File::from(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) });
            set_send_timeout(&sock, Duration::from_secs(1));
            if sock.write_all(&Message::Hello.encode()).is_ok() {
                clients.lock().expect("feed clients").socks.push(sock);
            }
        }
    })?;
    Ok(())
}

/// A box that does not read within a second is dropped (it reconnects, and its cache is reset).
fn set_send_timeout(fd: &File, t: Duration) {
    let tv = libc::timeval { tv_sec: t.as_secs() as libc::time_t, tv_usec: 0 };
    // SAFETY: valid socket and option value of the stated size.
    unsafe {
        libc::setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDTIMEO, &tv as *const _ as *const libc::c_void, std::mem::size_of_val(&tv) as u32);
    }
}

fn send_loop(root: &Path, rx: &Receiver<notify::Result<notify::Event>>, clients: &Mutex<Clients>, stop: &AtomicBool, max: usize, log: &dyn Fn(&str)) {
    let mut seq: u64 = 0;
    let mut last_sent = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let mut burst = Burst::new(max);
        match rx.recv_timeout(BEAT_EVERY.saturating_sub(last_sent.elapsed())) {
            Ok(ev) => burst.add(root, ev),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        let until = Instant::now() + COALESCE;
        while let Ok(ev) = rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
            burst.add(root, ev);
        }
        let mut msgs: Vec<Message> = Vec::new();
        if burst.overflow {
            log("change feed: the watcher lost events; boxes are told to trust nothing cached");
            msgs.push(Message::Overflow { seq: 0 });
        } else {
            msgs.extend(burst.changes.iter().map(|(kind, path)| Message::Change { seq: 0, kind: *kind, path: path.clone() }));
        }
        if msgs.is_empty() && last_sent.elapsed() >= BEAT_EVERY {
            msgs.push(Message::Beat { seq: 0 });
        }
        let mut lines = Vec::new();
        for mut m in msgs {
            seq += 1;
            match &mut m {
                Message::Change { seq: s, .. } | Message::Beat { seq: s } | Message::Overflow { seq: s } => *s = seq,
                Message::Hello => {}
            }
            lines.extend_from_slice(&m.encode());
        }
        if !lines.is_empty() {
            broadcast(clients, &lines);
            last_sent = Instant::now();
        }
    }
}

fn broadcast(clients: &Mutex<Clients>, lines: &[u8]) {
    let mut c = clients.lock().expect("feed clients");
    // SIGPIPE is ignored (`ignore_sigpipe`): a box gone away is a write error.
    c.socks.retain_mut(|sock| sock.write_all(lines).is_ok());
    if let Some((path, fd)) = &mut c.device {
        if fd.is_none() {
            *fd = std::fs::OpenOptions::new().write(true).open(&*path).ok();
        }
        if let Some(f) = fd {
            if f.write_all(lines).is_err() {
                *fd = None;
            }
        }
    }
}

/// One burst of watcher events: distinct (kind, name) pairs in order of first sight.
struct Burst {
    changes: Vec<(Kind, PathBuf)>,
    seen: BTreeSet<(u8, PathBuf)>,
    overflow: bool,
    /// More names than this and the burst is an overflow.
    max: usize,
}

impl Burst {
    fn new(max: usize) -> Burst {
        Burst { changes: Vec::new(), seen: BTreeSet::new(), overflow: false, max }
    }

    fn add(&mut self, root: &Path, ev: notify::Result<notify::Event>) {
        let ev = match ev {
            Ok(ev) if !ev.need_rescan() => ev,
            _ => {
                self.overflow = true;
                return;
            }
        };
        let kinds: Vec<Kind> = match ev.kind {
            EventKind::Access(_) => return,
            EventKind::Create(_) | EventKind::Modify(ModifyKind::Name(RenameMode::To)) => vec![Kind::Create],
            EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(RenameMode::From)) => vec![Kind::Remove],
            EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => vec![Kind::Remove, Kind::Create],
            // FSEvents (macOS) does not say which side of a rename a path was: see below.
            EventKind::Modify(ModifyKind::Name(RenameMode::Any)) => vec![],
            _ => vec![Kind::Modify],
        };
        for (i, p) in ev.paths.iter().enumerate() {
            let kind = kinds.get(i).or(kinds.last()).copied().unwrap_or_else(|| renamed_side(p));
            if let Some(rel) = feed_path(root, p) {
                let key = (kind as u8, rel.clone());
                if self.seen.insert(key) {
                    self.changes.push((kind, rel));
                }
            }
        }
        if self.changes.len() > self.max {
            self.overflow = true;
            self.changes.clear();
        }
    }
}

/// A path renamed without saying which side it was (FSEvents): a name there now was renamed to,
/// a missing one renamed from, so the box's watchers see a create or a delete, as on Linux.
fn renamed_side(p: &Path) -> Kind {
    if std::fs::symlink_metadata(p).is_ok() {
        Kind::Create
    } else {
        Kind::Remove
    }
}

/// The name a box is told about: relative to the checkout, outside every `.git` directory,
/// and one the feed may carry.
fn feed_path(root: &Path, p: &Path) -> Option<PathBuf> {
    let rel = p.strip_prefix(root).ok()?;
    if rel.components().any(|c| c.as_os_str() == ".git") {
        return None;
    }
    seamfs::feed::proto::checked_path(std::os::unix::ffi::OsStrExt::as_bytes(rel.as_os_str())).ok()
}

/// Ignores SIGPIPE so a box that went away is a write error, not seamd's death.
pub fn ignore_sigpipe() {
    // SAFETY: setting a signal to SIG_IGN has no preconditions.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_outside_git_dirs_only() {
        let root = Path::new("/c");
        assert_eq!(feed_path(root, Path::new("/c/src/a.rs")), Some(PathBuf::from("src/a.rs")));
        assert_eq!(feed_path(root, Path::new("/c/.git/HEAD")), None);
        assert_eq!(feed_path(root, Path::new("/c/sub/.git/index")), None);
        assert_eq!(feed_path(root, Path::new("/elsewhere/x")), None);
        assert_eq!(feed_path(root, Path::new("/c")), None, "the root itself is not a name");
    }

    #[test]
    fn bursts_coalesce() {
        let root = Path::new("/c");
        let mut b = Burst::new(MAX_BURST);
        let ev = |k, p: &str| Ok(notify::Event::new(k).add_path(PathBuf::from(p)));
        b.add(root, ev(EventKind::Modify(ModifyKind::Any), "/c/a"));
        b.add(root, ev(EventKind::Modify(ModifyKind::Any), "/c/a"));
        b.add(root, ev(EventKind::Remove(notify::event::RemoveKind::File), "/c/b"));
        assert_eq!(b.changes, vec![(Kind::Modify, PathBuf::from("a")), (Kind::Remove, PathBuf::from("b"))]);
        b.add(root, Err(notify::Error::generic("queue overflow")));
        assert!(b.overflow);
    }

    #[test]
    fn a_rename_of_unknown_side_is_told_by_what_is_there() {
        let dir = std::env::temp_dir().join(format!("seamd-feed-rename-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("to"), "x").unwrap();
        let mut b = Burst::new(MAX_BURST);
        let name = EventKind::Modify(ModifyKind::Name(RenameMode::Any));
        b.add(&dir, Ok(notify::Event::new(name).add_path(dir.join("from"))));
        b.add(&dir, Ok(notify::Event::new(name).add_path(dir.join("to"))));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(b.changes, vec![(Kind::Remove, PathBuf::from("from")), (Kind::Create, PathBuf::from("to"))]);
    }

    #[test]
    fn a_burst_past_its_bound_is_an_overflow_and_carries_no_names() {
        let root = Path::new("/c");
        let mut b = Burst::new(2);
        for p in ["/c/a", "/c/b"] {
            b.add(root, Ok(notify::Event::new(EventKind::Create(notify::event::CreateKind::File)).add_path(PathBuf::from(p))));
        }
        assert!(!b.overflow, "two names fit");
        b.add(root, Ok(notify::Event::new(EventKind::Create(notify::event::CreateKind::File)).add_path(PathBuf::from("/c/x"))));
        assert!(b.overflow && b.changes.is_empty(), "a third overflows, and no half of the burst is sent");
    }
}
