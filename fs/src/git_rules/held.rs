//! Locks seamfs itself holds on the lower (the shared `index.lock`: the sealed heal's, and the
//! ones taken for a box process's ref transaction or rewrite, ADR 0054 and 0032), recorded
//! durably beside them, so a seamfs that died holding one does not block host git for good.
//!
//! Right after it takes `<gitdir>/index.lock`, seamfs writes `<gitdir>/index.seam-held`
//! (hidden from the box like every `index.seam-*` name): this machine, this boot, this box's id,
//! its pid and start time, and the lock file's inode number; it removes the record right after
//! releasing the lock. On start, seamfs looks for records in the git dirs near the lower's root;
//! one this box on this machine wrote whose owner is gone (another boot, or a pid that no longer
//! runs with that start time) has its lock removed, only while the name still holds that very
//! inode. A record from another box (another id, or another machine) is left alone: that box's
//! lock is a foreign lock, waited for and never reaped (ADR 0028), even when cloned VMs share
//! a machine id.

use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use tracing::{info, warn};

use crate::gitdata::{cpath, read_lower};
use crate::judge::procs::{start_time, Proc};
use crate::layer::Layer;
use crate::lower::{fstat, Lower};

use crate::core::Core;

/// The record's name in a git dir.
pub const HELD: &str = "index.seam-held";

/// The lock it records, in the same git dir.
const LOCK: &str = "index.lock";

/// Who wrote a record, and the lock's inode number.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    machine: String,
    boot: String,
    /// The box id; None in a record of a seamfs before box ids (format 1).
    box_id: Option<String>,
    pid: u32,
    start: u64,
    ino: u64,
    /// The lock's birth time in ns (0 when the lower does not tell): an inode number alone can
    /// be reused by a later lock of someone else.
    born: u128,
}

fn first_line(path: &str) -> String {
    std::fs::read_to_string(path).map(|s| s.trim().to_string()).unwrap_or_default()
}

/// This machine: `/etc/machine-id`, else the host name (a busybox box has no machine id).
pub(crate) fn machine() -> String {
    let id = first_line("/etc/machine-id");
    if id.is_empty() {
        first_line("/proc/sys/kernel/hostname")
    } else {
        id
    }
}

/// This machine and boot (the kernel's boot id), and this process's start time: read once, as
/// none changes while seamfs runs and every heal's record names them.
fn here() -> &'static (String, String, u64) {
    static HERE: std::sync::OnceLock<(String, String, u64)> = std::sync::OnceLock::new();
    HERE.get_or_init(|| (machine(), first_line("/proc/sys/kernel/random/boot_id"), start_time(std::process::id()).unwrap_or(0)))
}

impl Record {
    fn mine(box_id: &str, ino: u64, born: u128) -> Record {
        let (machine, boot, start) = here().clone();
        Record { machine, boot, box_id: Some(box_id.into()), pid: std::process::id(), start, ino, born }
    }

    fn text(&self) -> String {
        let (m, b, id) = (&self.machine, &self.boot, self.box_id.as_deref().unwrap_or(""));
        format!("seamfs-held 2\nmachine {m}\nboot {b}\nbox {id}\nowner {} {}\nlock {LOCK} {} {}\n", self.pid, self.start, self.ino, self.born)
    }

    fn parse(text: &str) -> Option<Record> {
        let mut lines = text.lines();
        let format = lines.next()?.strip_prefix("seamfs-held ")?;
        let machine = lines.next()?.strip_prefix("machine ")?.to_string();
        let boot = lines.next()?.strip_prefix("boot ")?.to_string();
        let box_id = match format {
            "1" => None,
            "2" => Some(lines.next()?.strip_prefix("box ")?.to_string()),
            _ => return None,
        };
        let (pid, start) = lines.next()?.strip_prefix("owner ")?.split_once(' ')?;
        let (ino, born) = lines.next()?.strip_prefix(&format!("lock {LOCK} "))?.split_once(' ')?;
        Some(Record { machine, boot, box_id, pid: pid.parse().ok()?, start: start.parse().ok()?, ino: ino.parse().ok()?, born: born.parse().ok()? })
    }

    /// Whether its writer is certainly gone: this box on this machine, and another boot or a
    /// dead process. Unknown machine ids never match, so nothing is released on a guess.
    fn owner_dead(&self, box_id: &str) -> bool {
        let (machine, boot, _) = here();
        if machine.is_empty() || self.machine != *machine || self.box_id.as_deref().is_some_and(|b| b != box_id) {
            return false;
        }
        self.boot != *boot || !(Proc { pid: self.pid, start: self.start }).alive()
    }
}

impl<L: Layer> Core<L> {
    /// Records that seamfs holds `<gitdir>/index.lock` (open as `lock`), durably.
    pub(crate) fn note_held(&self, gitdir: &Path, lock: &OwnedFd) {
        let Ok(st) = fstat(lock.as_raw_fd()) else { return };
        let born = birth(lock.as_raw_fd(), c"", libc::AT_EMPTY_PATH);
        // Written in place, not renamed in: a rename is what a crash may be stuck in, and a torn
        // record parses as nothing, which releases nothing.
        let rec = cpath(&gitdir.join(HELD));
        let written = self.lower.open_at(&rec, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC, 0o644).and_then(|fd| {
            let mut f = std::fs::File::from(fd);
            f.write_all(Record::mine(self.layer.names().id().as_str(), st.st_ino, born).text().as_bytes())?;
            f.sync_all()
        });
        if let Err(e) = written {
            warn!(gitdir = %gitdir.display(), error = %e, "could not record the index.lock seamfs holds; if seamfs dies now, remove it by hand");
        }
    }

    /// Forgets the record once seamfs released `<gitdir>/index.lock`.
    pub(crate) fn drop_held(&self, gitdir: &Path) {
        let _ = self.lower.unlink(&cpath(&gitdir.join(HELD)), false);
    }
}

/// The birth time of `rel` under `dirfd` in ns, 0 when unknown (`statx` STATX_BTIME).
fn birth(dirfd: std::os::fd::RawFd, rel: &std::ffi::CStr, flags: i32) -> u128 {
    // SAFETY: an all-zero statx is a valid out-buffer.
    let mut x: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd, C string and out-pointer.
    let r = unsafe { libc::statx(dirfd, rel.as_ptr(), flags | libc::AT_SYMLINK_NOFOLLOW, libc::STATX_BTIME, &mut x) };
    if r != 0 || x.stx_mask & libc::STATX_BTIME == 0 {
        return 0;
    }
    x.stx_btime.tv_sec.max(0) as u128 * 1_000_000_000 + x.stx_btime.tv_nsec as u128
}

/// Releases `<gitdir>/index.lock` if a record says a seamfs of box `box_id` that is gone held
/// it, and the name still holds that file. Returns whether a lock was removed.
pub fn release_dead(lower: &Lower, gitdir: &Path, box_id: &str) -> bool {
    let rec_path = gitdir.join(HELD);
    let Some(rec) = read_lower(lower, &rec_path).ok().flatten().and_then(|b| Record::parse(&String::from_utf8_lossy(&b))) else {
        return false;
    };
    if !rec.owner_dead(box_id) {
        return false;
    }
    let lock = cpath(&gitdir.join(LOCK));
    // Through an O_PATH fd opened beneath the root: no link followed on the way.
    let same = lower.open_at(&lock, libc::O_PATH, 0).is_ok_and(|fd| {
        fstat(fd.as_raw_fd()).is_ok_and(|st| st.st_ino == rec.ino) && (rec.born == 0 || birth(fd.as_raw_fd(), c"", libc::AT_EMPTY_PATH) == rec.born)
    });
    let removed = same && lower.unlink(&lock, false).is_ok();
    if removed {
        warn!(gitdir = %gitdir.display(), pid = rec.pid, "removed the index.lock a seamfs that died left (its record index.seam-held)");
    } else {
        info!(gitdir = %gitdir.display(), "a dead seamfs's record of index.lock, whose lock is gone or replaced: record removed");
    }
    let _ = lower.unlink(&cpath(&rec_path), false);
    removed
}

/// The most root entries looked at for git dirs at start.
const SCAN_ENTRIES: usize = 10_000;

/// Git dirs where a record may be: the root's `.git` and each root entry's, with their
/// linked worktrees' (`.git/worktrees/*`). Bounded; deeper repositories are not scanned.
fn candidates(lower: &Lower) -> Vec<PathBuf> {
    let mut dirs = vec![PathBuf::from(".git")];
    if let Ok(names) = lower.list(c".") {
        dirs.extend(names.into_iter().take(SCAN_ENTRIES).filter(|(n, _)| n != ".git").map(|(n, _)| Path::new(&n).join(".git")));
    }
    let mut all = Vec::new();
    for d in dirs {
        let is_dir = lower.stat(&cpath(&d)).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR);
        if !is_dir {
            continue;
        }
        if let Ok(wts) = lower.list(&cpath(&d.join("worktrees"))) {
            all.extend(wts.into_iter().take(SCAN_ENTRIES).map(|(n, _)| d.join("worktrees").join(n)));
        }
        all.push(d);
    }
    all
}

/// At start: releases every lock a dead seamfs of this box left in the git dirs [`candidates`]
/// names.
pub fn release_all_dead(lower: &Lower, box_id: &str) -> usize {
    candidates(lower).iter().filter(|d| release_dead(lower, d, box_id)).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_judge_their_owner() {
        let me = Record::mine("b1", 42, 7);
        assert_eq!(Record::parse(&me.text()), Some(me.clone()));
        assert!(!me.owner_dead("b1"), "this process is alive");
        assert!(Record { boot: "another boot".into(), ..me.clone() }.owner_dead("b1"));
        assert!(!Record { boot: "another boot".into(), ..me.clone() }.owner_dead("b2"), "another box's lock is never reaped");
        assert!(!Record { machine: "another machine".into(), boot: "x".into(), ..me.clone() }.owner_dead("b1"));
        assert_eq!(Record::parse("seamfs-held 1\nmachine m\n"), None);
        let v1 = "seamfs-held 1\nmachine m\nboot b\nowner 1 2\nlock index.lock 3 4\n";
        assert_eq!(Record::parse(v1).map(|r| r.box_id), Some(None), "an older seamfs's record still parses");
    }
}
