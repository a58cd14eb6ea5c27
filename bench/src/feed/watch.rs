//! Host change to box inotify event: the host makes changes of four kinds on the backing dir
//! (create, write in place, delete, rename; each on a file of its own, one every gap), while a
//! box process has an inotify watch on the directory through the mount. A change has arrived
//! when an event names its file (a rename: both its old and its new name; ADR 0021 lists which
//! events the feed raises); one that never does within the wait is missed.

use std::collections::HashMap;
use std::ffi::CString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

use super::plan::{make_edits, Stamps};
use crate::lab::git::git;
use crate::lab::LabError;
use crate::race::rig::Rig;

/// The watched directory, in the checkout.
const DIR: &str = "watch";
/// How long the watcher keeps reading after the last change.
const TIMEOUT: Duration = Duration::from_secs(3);
/// The events that are news of a change (not the watcher's own opens and reads).
const NEWS: u32 = libc::IN_ATTRIB
    | libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MODIFY
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_CLOSE_WRITE;

/// One kind of host change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// A new file.
    Create,
    /// Appended to in place.
    Write,
    /// Removed.
    Delete,
    /// Renamed to a new name in the same directory.
    Rename,
}

impl Change {
    /// Report order; change `i` is `ALL[i % 4]`.
    pub const ALL: [Change; 4] = [Change::Create, Change::Write, Change::Delete, Change::Rename];

    /// Report key.
    pub fn key(self) -> &'static str {
        match self {
            Change::Create => "create",
            Change::Write => "write",
            Change::Delete => "delete",
            Change::Rename => "rename",
        }
    }
}

/// The changes, by index: file name and kind.
#[derive(Debug)]
pub struct Plan {
    /// (file name in [`DIR`], kind).
    pub changes: Vec<(String, Change)>,
}

/// One change's outcome.
#[derive(Debug, Clone)]
pub struct Arrival {
    /// Its kind.
    pub change: Change,
    /// From the host's syscall returning to the (last needed) event being read.
    pub latency: Option<Duration>,
}

/// What the watcher read besides the changes' own events.
#[derive(Debug, Clone, Default)]
pub struct Extra {
    /// Events with no name (on the directory itself).
    pub on_dir: usize,
    /// Queue overflows.
    pub overflows: usize,
}

/// The host's checkout with the files to write, delete and rename.
pub fn prepare(host: &Path, per_kind: usize) -> Result<Plan, LabError> {
    git(host, &["init", "-q", "-b", "main"])?;
    let dir = host.join(DIR);
    std::fs::create_dir(&dir).map_err(|e| LabError::new("create dir", &dir, e))?;
    let changes: Vec<(String, Change)> = (0..per_kind * 4).map(|i| (format!("n{i:05}"), Change::ALL[i % 4])).collect();
    for (name, kind) in &changes {
        if *kind != Change::Create {
            let p = dir.join(name);
            std::fs::write(&p, "before\n").map_err(|e| LabError::new("write", &p, e))?;
        }
    }
    Ok(Plan { changes })
}

fn moved(name: &str) -> String {
    format!("{name}.moved")
}

fn host_change(dir: &Path, name: &str, kind: Change) -> std::io::Result<()> {
    let p = dir.join(name);
    match kind {
        Change::Create => std::fs::write(&p, "created\n"),
        Change::Write => std::fs::OpenOptions::new().append(true).open(&p)?.write_all(b"written\n"),
        Change::Delete => std::fs::remove_file(&p),
        Change::Rename => std::fs::rename(&p, dir.join(moved(name))),
    }
}

/// An inotify fd, closed on drop.
struct Inotify(i32);

impl Inotify {
    fn watch(dir: &Path) -> Result<Inotify, LabError> {
        // SAFETY: plain syscall; the fd is owned by the returned value.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(LabError::new("inotify_init1", dir, std::io::Error::last_os_error()));
        }
        let me = Inotify(fd);
        let c = CString::new(dir.as_os_str().as_bytes()).map_err(|e| LabError::new("watch", dir, e))?;
        // SAFETY: valid fd and C string.
        if unsafe { libc::inotify_add_watch(fd, c.as_ptr(), NEWS) } < 0 {
            return Err(LabError::new("inotify_add_watch", dir, std::io::Error::last_os_error()));
        }
        Ok(me)
    }

    /// Events (mask, name) that came within `wait`.
    fn read(&self, wait: Duration) -> Vec<(u32, String)> {
        let mut p = libc::pollfd { fd: self.0, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut p, 1, wait.as_millis() as i32) } <= 0 {
            return Vec::new();
        }
        let mut buf = [0u8; 16384];
        // SAFETY: valid fd and buffer.
        let n = unsafe { libc::read(self.0, buf.as_mut_ptr().cast(), buf.len()) };
        let mut out = Vec::new();
        let mut i = 0;
        // struct inotify_event: wd, mask, cookie, len (4 bytes each), then the NUL-padded name.
        while n > 0 && i + 16 <= n as usize {
            let mask = u32::from_ne_bytes(buf[i + 4..i + 8].try_into().expect("4 bytes"));
            let len = u32::from_ne_bytes(buf[i + 12..i + 16].try_into().expect("4 bytes")) as usize;
            let name = String::from_utf8_lossy(&buf[i + 16..(i + 16 + len).min(n as usize)]).trim_end_matches('\0').to_string();
            out.push((mask, name));
            i += 16 + len;
        }
        out
    }
}

impl Drop for Inotify {
    fn drop(&mut self) {
        // SAFETY: our fd, closed once.
        unsafe { libc::close(self.0) };
    }
}

/// Runs the changes on `rig`'s host under a watch in its box.
pub fn run(rig: &Rig, plan: &Plan, gap: Duration) -> Result<(Vec<Arrival>, Extra), LabError> {
    let host_dir = rig.host.join(DIR);
    let box_dir = rig.box_dir.join(DIR);
    // As an IDE's tree view: the directory listed and every file in it looked at, so the box
    // kernel holds their entries (a host delete then reaches the watcher as IN_DELETE).
    std::fs::read_dir(&box_dir).map_err(|e| LabError::new("list", &box_dir, e))?.for_each(drop);
    for (name, kind) in &plan.changes {
        if *kind != Change::Create {
            let _ = std::fs::symlink_metadata(box_dir.join(name));
        }
    }
    let w = Inotify::watch(&box_dir)?;
    // Which change (and which of a rename's two names: 0 old, 1 new) an event's name is news of.
    let mut by_name: HashMap<String, (usize, usize)> = HashMap::new();
    for (i, (name, kind)) in plan.changes.iter().enumerate() {
        by_name.insert(name.clone(), (i, 0));
        if *kind == Change::Rename {
            by_name.insert(moved(name), (i, 1));
        }
    }
    let stamps = Stamps::new(plan.changes.len());
    // When news of each change (and of a rename's second name) first came, on the stamps' clock.
    let mut got: Vec<[Option<Duration>; 2]> = vec![[None; 2]; plan.changes.len()];
    let mut extra = Extra::default();
    let host = std::thread::scope(|s| {
        let host = s.spawn(|| make_edits(&stamps, gap, |i| host_change(&host_dir, &plan.changes[i].0, plan.changes[i].1)));
        let mut give_up = None;
        loop {
            for (mask, name) in w.read(Duration::from_millis(10)) {
                if mask & libc::IN_Q_OVERFLOW != 0 {
                    extra.overflows += 1;
                }
                if mask & NEWS == 0 {
                    continue;
                }
                let Some(&(i, part)) = by_name.get(&name) else {
                    extra.on_dir += usize::from(name.is_empty());
                    continue;
                };
                // An event before the change was begun is not news of it; one that comes while
                // the host's syscall has not yet returned (and been stamped) is, at latency 0.
                if stamps.begun(i) && got[i][part].is_none() {
                    got[i][part] = Some(stamps.now());
                }
            }
            if host.is_finished() && *give_up.get_or_insert_with(|| stamps.now() + TIMEOUT) < stamps.now() {
                break;
            }
        }
        host.join()
    });
    match host {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(LabError::new("make host changes", &rig.host, e)),
        Err(_) => return Err(LabError::new("make host changes", &rig.host, "the host thread panicked")),
    }
    let arrivals = plan
        .changes
        .iter()
        .zip(&got)
        .enumerate()
        .map(|(i, ((_, kind), g))| {
            let made = stamps.made(i).unwrap_or_default();
            let g = g.map(|at| at.map(|at| at.saturating_sub(made)));
            let latency = match kind {
                Change::Rename => g[0].zip(g[1]).map(|(a, b)| a.max(b)),
                _ => g[0],
            };
            Arrival { change: *kind, latency }
        })
        .collect();
    Ok((arrivals, extra))
}
