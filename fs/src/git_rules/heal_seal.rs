//! The heal, sealed to the move: when a box transaction moves a checked-out branch (or a
//! HEAD), the shared index of every work tree on it is healed under its `index.lock`, taken
//! before the ref rename and renamed in right after it; the box's own `index-box.<id>` records
//! the move as its sync point. When the lock is not had in time, or an operation is in
//! progress, a proposal file is left for `seamd`. After a move by the host or another box, the
//! box's next touch of its index heals `index-box.<id>` the same way (`reverse_heal`).

use std::ffi::{CStr, CString, OsStr, OsString};
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};

use crate::core::Core;
use crate::gitdata::{cpath, read_lower, read_verified_in, GitDirRef, Head, HeadOid, RefState};
use crate::heal::proposal::{ProposalName, BASE_PREFIX};
use crate::heal::{blob_id, entries_digest, heal_owned, trim_heap_after, HealOptions, HealOutcome, Hint, HintData};
use crate::index::names::SHARED_INDEX;
use crate::index::seed::{publish, NewFile};
use crate::judge::procs::Proc;
use crate::layer::Layer;
use crate::lower::Lower;

/// The most other boxes' indexes a reverse heal reads as hints (newest first).
const OTHER_BOX_HINTS: usize = 3;

/// A healed shared index waiting, under its lock, for the ref rename to go through.
#[derive(Debug)]
pub(crate) struct PendingHeal {
    gitdir: PathBuf,
    lock: CString,
    new_commit: String,
    /// The healed index's size: whether its memory is worth giving back (`trim_heap_after`).
    index_len: usize,
    /// What the installed heal is watched with (`heal_watch`): the move's old commit, the
    /// objects directory, and the entries of the shared index the heal was made from.
    old_commit: String,
    objects: PathBuf,
    pre: Option<gix::ObjectId>,
}


/// An index copy named by its size and trailing checksum (the heal verified the checksum); an
/// index written with index.skipHash (checksum zero) by its blob id as well.
struct CopyId {
    len: u64,
    tail: Vec<u8>,
    unsummed: Option<String>,
}

impl CopyId {
    fn of(bytes: &[u8], kind: gix::hash::Kind) -> CopyId {
        let n = kind.len_in_bytes().min(bytes.len());
        let tail = bytes[bytes.len() - n..].to_vec();
        let unsummed = tail.iter().all(|&b| b == 0).then(|| blob_id(bytes, kind));
        CopyId { len: bytes.len() as u64, tail, unsummed }
    }

    /// Whether `bytes` are the copy.
    fn is(&self, bytes: &[u8], kind: gix::hash::Kind) -> bool {
        bytes.len() as u64 == self.len
            && bytes.ends_with(&self.tail)
            && self.unsummed.as_ref().is_none_or(|id| *id == blob_id(bytes, kind))
    }
}

/// Leaves `healed` for `seamd` as a proposal on `base` (the index bytes it was healed from) at
/// HEAD `head`, with the base's bytes beside it; true when the proposal was written.
pub(super) fn propose_on(lower: &Lower, gitdir: &Path, base: &[u8], head: &str, healed: &[u8], kind: crate::heal::HealKind) -> bool {
    let name = ProposalName { head: head.to_string(), base: blob_id(base, hash_kind(head)), kind };
    let dest = gitdir.join(name.file_name());
    let owner = NewFile { uid: u32::MAX, gid: u32::MAX, mode: 0o644 };
    // The base's bytes, named by their blob id: seamd can then tell a poller's stat-only
    // rewrite (same entries) from real host staging, and cannot be fooled (it re-hashes).
    let base_file = gitdir.join(format!("{BASE_PREFIX}{}", name.base));
    if let Err(e) = publish(lower, &base_file, base, owner) {
        warn!(gitdir = %gitdir.display(), error = %e, "could not leave the proposal's base index");
    }
    match publish(lower, &dest, healed, owner) {
        Ok(_) => {
            debug!(gitdir = %gitdir.display(), proposal = %name.file_name(), "heal proposal left for seamd");
            true
        }
        Err(e) => {
            warn!(gitdir = %gitdir.display(), error = %e, "could not leave a heal proposal");
            false
        }
    }
}

pub(super) fn hash_kind(oid: &str) -> gix::hash::Kind {
    if oid.len() == 64 {
        gix::hash::Kind::Sha256
    } else {
        gix::hash::Kind::Sha1
    }
}

impl<L: Layer> Core<L> {
    pub(crate) fn objects_dir(&self, common: &Path) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.lower.root_fd())).join(common).join("objects")
    }

    /// The commit a git dir's HEAD resolves to, read as data.
    pub(crate) fn head_commit(&self, gitdir: &Path) -> Option<String> {
        match GitDirRef::open(&self.lower, gitdir.to_path_buf()).head_oid() {
            Ok(HeadOid::At(oid)) => Some(oid),
            _ => None,
        }
    }

    /// The work trees whose HEAD is on `refname` in common dir `common` (main and linked).
    pub(super) fn gitdirs_on(&self, common: &Path, refname: &str) -> Vec<PathBuf> {
        let mut dirs = vec![common.to_path_buf()];
        if let Ok(listed) = self.lower.list(&cpath(&common.join("worktrees"))) {
            dirs.extend(listed.into_iter().map(|(n, _)| common.join("worktrees").join(n)));
        }
        dirs.retain(|g| {
            matches!(GitDirRef::open(&self.lower, g.clone()).head(), Ok(Some(Head::Symbolic(b))) if b == refname)
        });
        dirs
    }

    /// Before a box rename of `<R>.lock` onto `<R>` (already judged): heal the shared index of
    /// every work tree the move changes. Returns the heals to finish after the rename.
    pub(crate) fn seal_heal(&self, p: Proc, dir: &Path, name: &str, old: Option<String>, new_content: Option<&[u8]>) -> Vec<PendingHeal> {
        if !self.layer.index_split() {
            return Vec::new();
        }
        let new_text = new_content.map(|b| String::from_utf8_lossy(b).trim().to_string());
        let moves: Vec<(PathBuf, Option<String>, Option<String>)> = if name == "HEAD" {
            // A HEAD rewrite: detached to a commit, or onto another branch.
            let old_commit = self.head_commit(dir);
            let new_commit = match new_text.as_deref() {
                Some(t) if t.starts_with("ref:") => {
                    let b = t.trim_start_matches("ref:").trim();
                    match GitDirRef::open(&self.lower, dir.to_path_buf()).resolve(b) {
                        Ok(RefState::At(oid)) => Some(oid),
                        _ => None,
                    }
                }
                Some(t) => Some(t.to_string()),
                None => None,
            };
            vec![(dir.to_path_buf(), old_commit, new_commit)]
        } else if name.starts_with("refs/heads/") {
            let new_commit = new_text.filter(|t| !t.starts_with("ref:"));
            self.gitdirs_on(dir, name).into_iter().map(|g| (g, old.clone(), new_commit.clone())).collect()
        } else {
            Vec::new()
        };
        let mut pending = Vec::new();
        for (gitdir, old_commit, new_commit) in moves {
            let Some(new_commit) = new_commit else { continue };
            if old_commit.as_deref() == Some(new_commit.as_str()) {
                continue;
            }
            if let Some(h) = self.heal_shared(p, &gitdir, old_commit.as_deref().unwrap_or(""), &new_commit) {
                pending.push(h);
            } else {
                // Nothing held: the box's own index still follows its own move.
                self.set_base(&gitdir, &new_commit);
            }
        }
        pending
    }

    /// Heals one work tree's shared index onto `new` for box process `p`; Some when a lock is
    /// held for the rename.
    fn heal_shared(&self, p: Proc, gitdir: &Path, old: &str, new: &str) -> Option<PendingHeal> {
        let index = gitdir.join(SHARED_INDEX);
        let t0 = Instant::now();
        let bytes = read_lower(&self.lower, &index).ok().flatten()?;
        let common = GitDirRef::open(&self.lower, gitdir.to_path_buf()).common;
        let objects = self.objects_dir(&common);
        // The box's index holds the new tree when the box committed from it: its commit's
        // `index.lock` (renamed in after the ref), else the index itself.
        let names = self.layer.names();
        let (lock_path, index_path) = (gitdir.join(names.index_lock()), gitdir.join(names.index()));
        let from_lock = || self.open_hint(&lock_path);
        let from_index = || self.open_hint(&index_path);
        let hints: [Hint; 2] = [&from_lock, &from_index];
        let opts = HealOptions { index_mtime: self.index_mtime(&index), hints: &hints };
        // Only the copy's size and checksum are kept through the heal (`same_index`): the heal
        // frees the bytes once decoded, and a proposal reads them again.
        let copy = CopyId::of(&bytes, hash_kind(new));
        // What the install is watched for: a host git may write these entries back (ADR 0051).
        let pre = entries_digest(&bytes, hash_kind(new));
        let healed = match heal_owned(&objects, bytes, old, new, opts) {
            Ok(HealOutcome::Healed { bytes, kind }) => (bytes, kind),
            Ok(HealOutcome::Unchanged) => return None,
            Ok(HealOutcome::Refused(r)) => {
                if self.judge.first_time(format!("shared {} {new}", gitdir.display())) {
                    warn!(gitdir = %gitdir.display(), "shared index not healed: {r}");
                }
                return None;
            }
            Err(e) => {
                warn!(gitdir = %gitdir.display(), error = %e, "shared index not healed");
                return None;
            }
        };
        // Only the host's operations defer the heal: the box's own rebase or cherry-pick moves
        // its branch step by step, and each step is healed like a commit.
        let op_in_progress = self.host_op_in_progress(gitdir);
        let lock = cpath(&gitdir.join("index.lock"));
        // The lock the process took before its ref locks (ADR 0054), else one taken now.
        let held = if op_in_progress {
            None
        } else {
            self.own_heal_lock(p, &lock).or_else(|| self.take_lock(gitdir, &lock, self.judge.heal_locks.heal_wait(p, gitdir, self.opts.lock_wait)))
        };
        let Some(fd) = held else {
            // The base read again: proposed only while it is still the copy healed.
            match read_lower(&self.lower, &index).ok().flatten() {
                Some(base) if copy.is(&base, hash_kind(new)) => self.propose(gitdir, &base, new, &healed.0, healed.1),
                _ => debug!(gitdir = %gitdir.display(), "shared index changed during the heal: no proposal"),
            }
            return None;
        };
        // Under the lock: the index may have changed since the copy (host staging): heal again.
        // The copy's trailing checksum was verified by the heal, so the same size and checksum
        // mean the same bytes (an index written with index.skipHash, whose checksum is zero,
        // is healed again).
        let final_bytes = if self.same_index(&index, &copy) {
            Some(healed.0)
        } else {
            drop(healed);
            let opts = HealOptions { index_mtime: self.index_mtime(&index), hints: &hints };
            read_lower(&self.lower, &index).ok().flatten().and_then(|b| match heal_owned(&objects, b, old, new, opts) {
                Ok(HealOutcome::Healed { bytes, .. }) => Some(bytes),
                _ => None,
            })
        };
        self.same_owner_and_mode(&fd, &index);
        // On the server before the rename publishes it (ADR 0055): written back, not fsynced.
        let written = final_bytes.map(|b| crate::lower::write_whole(fd, &b).map(|()| b.len()));
        match written {
            Some(Ok(index_len)) => {
                let ms = t0.elapsed().as_secs_f64() * 1e3;
                debug!(gitdir = %gitdir.display(), ms, "healed shared index written under index.lock");
                Some(PendingHeal { gitdir: gitdir.to_path_buf(), lock, new_commit: new.to_string(), index_len, old_commit: old.to_string(), objects, pre })
            }
            other => {
                if let Some(Err(e)) = other {
                    warn!(gitdir = %gitdir.display(), error = %e, "writing the healed index failed");
                }
                let _ = self.lower.unlink(&lock, false);
                self.judge.locks.released(&lock);
                self.drop_held(gitdir);
                None
            }
        }
    }

    /// Whether an operation of the host's is in progress in `gitdir` (a rebase, a merge, a
    /// cherry-pick…): its index must not be healed under it, nor its lock taken from it. Read
    /// from the git dir's listing, as the guard reads it: a stat of each name could meet the
    /// negative entry of a moment before the host started (9p never revalidates one).
    pub(super) fn host_op_in_progress(&self, gitdir: &Path) -> bool {
        let own = self.own_ops(gitdir);
        self.ops_present(gitdir).iter().any(|n| !own.contains(n))
    }

    /// Whether the index file still holds `copy` (whose trailing checksum is verified and not
    /// zero), judged by its size and trailing checksum, read without reading the rest.
    fn same_index(&self, index: &Path, copy: &CopyId) -> bool {
        use std::os::unix::fs::FileExt;
        if copy.tail.is_empty() || copy.unsummed.is_some() {
            return false;
        }
        let c = cpath(index);
        self.lower.refresh(&c);
        let Ok((fd, st)) = self.lower.open_regular(&c) else { return false };
        let f = std::fs::File::from(fd);
        let mut tail = vec![0u8; copy.tail.len()];
        st.st_size as u64 == copy.len
            && f.read_exact_at(&mut tail, copy.len - copy.tail.len() as u64).is_ok()
            && tail == copy.tail
    }

    /// A hint index opened on the lower (refreshed first), read by the heal as it hashes it.
    fn open_hint(&self, rel: &Path) -> Option<HintData> {
        let c = cpath(rel);
        self.lower.refresh(&c);
        self.lower.open_regular(&c).ok().map(|(fd, _)| HintData::File(std::fs::File::from(fd)))
    }

    /// The index file's mtime: kept entries changed at or after it are smudged (racily clean).
    fn index_mtime(&self, index: &Path) -> Option<std::time::SystemTime> {
        self.lower.stat(&cpath(index)).ok().map(|st| {
            std::time::UNIX_EPOCH + Duration::new(st.st_mtime.max(0) as u64, st.st_mtime_nsec.clamp(0, 999_999_999) as u32)
        })
    }

    /// A replacement keeps the owner and mode of the file it replaces.
    fn same_owner_and_mode(&self, fd: &OwnedFd, like: &Path) {
        if let Ok(st) = self.lower.stat(&cpath(like)) {
            #[allow(clippy::unnecessary_cast)] // mode_t is u16 on macOS
            crate::lower::own_like(fd.as_raw_fd(), st.st_uid, st.st_gid, Some(st.st_mode as u32));
        }
    }

    /// Takes `index.lock` for seamfs, waiting (at most `wait`) behind a host git.
    /// Recorded durably while held (`held`), so a crash does not leave it for good.
    pub(super) fn take_lock(&self, gitdir: &Path, lock: &CStr, wait: Duration) -> Option<OwnedFd> {
        let deadline = Instant::now() + wait;
        loop {
            match self.lower.open_at(lock, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o644) {
                Ok(fd) => {
                    self.note_held(gitdir, &fd);
                    return Some(fd);
                }
                // Over 9p cache=loose the name may be one the host removed long ago, which the
                // guest never looks at again: the server's listing says (ADR 0032, amended).
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) && Instant::now() < deadline => {
                    if !self.lower.forget_stale_name(lock) {
                        crate::refresh_scope::pause(Duration::from_millis(10));
                    }
                }
                Err(_) => return None,
            }
        }
    }

    /// The fallback: leave the healed index for `seamd` under a proposal name.
    fn propose(&self, gitdir: &Path, base: &[u8], head: &str, healed: &[u8], kind: crate::heal::HealKind) {
        if propose_on(&self.lower, gitdir, base, head, healed, kind) {
            info!(gitdir = %gitdir.display(), "index.lock busy or an operation in progress: left a heal proposal for seamd");
        }
    }

    /// After the ref rename: install the healed shared indexes; the box's index follows its move.
    pub(crate) fn finish_heals(&self, pending: Vec<PendingHeal>, renamed: bool) {
        // Every judged rename comes here; only one that healed has a heal's memory to give back.
        trim_heap_after(pending.iter().map(|p| p.index_len).max().unwrap_or(0));
        for p in pending {
            if renamed {
                let index = cpath(&p.gitdir.join(SHARED_INDEX));
                if let Err(e) = self.lower.rename(&p.lock, &index, 0) {
                    warn!(gitdir = %p.gitdir.display(), error = %e, "installing the healed index failed");
                    let _ = self.lower.unlink(&p.lock, false);
                } else {
                    self.watch_install(&p, &index);
                }
                self.set_base(&p.gitdir, &p.new_commit);
            } else {
                let _ = self.lower.unlink(&p.lock, false);
            }
            // A lock the box process took before its ref locks is gone with the heal.
            self.judge.locks.released(&p.lock);
            self.drop_held(&p.gitdir);
        }
    }

    /// Hands an installed heal to the watcher, which catches a host git writing back the index
    /// it read before the install (ADR 0051).
    fn watch_install(&self, p: &PendingHeal, index: &CString) {
        let Some(pre) = p.pre else { return };
        let (Ok(st), Ok(lower)) = (self.lower.stat(index), self.lower.try_clone()) else { return };
        super::heal_watch::watch(super::heal_watch::Watch {
            lower,
            gitdir: p.gitdir.clone(),
            objects: p.objects.clone(),
            old: p.old_commit.clone(),
            new: p.new_commit.clone(),
            pre,
            seen: super::heal_watch::identity(&st),
        });
    }

    #[track_caller]
    pub(crate) fn set_base(&self, gitdir: &Path, commit: &str) {
        tracing::debug!(gitdir = %gitdir.display(), sync_point = %commit, at = %std::panic::Location::caller(), "sync point set");
        let base = self.layer.names().base();
        let tmp = gitdir.join(format!("{base}.tmp.{}", std::process::id()));
        let ctmp = cpath(&tmp);
        let create = || self.lower.open_at(&ctmp, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o644);
        // A temporary left by a seamfs that died mid-write is removed only when met: an unlink
        // before every create cost the share a round trip per ref move.
        let created = match create() {
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                let _ = self.lower.unlink(&ctmp, false);
                create()
            }
            other => other,
        };
        if let Ok(fd) = created {
            // Owned like the git dir, so its owner can remove the repository.
            if let Ok(st) = self.lower.stat(&cpath(gitdir)) {
                crate::lower::own_like(fd.as_raw_fd(), st.st_uid, st.st_gid, None);
            }
            let mut f = std::fs::File::from(fd);
            if f.write_all(commit.as_bytes()).is_ok() {
                // On the server before the rename publishes it: a share that caches writes (9p
                // cache=loose) would otherwise let the next fresh read find it empty.
                crate::lower::write_back(f.as_raw_fd());
                let cbase = cpath(&gitdir.join(base));
                if self.lower.rename(&ctmp, &cbase, 0).is_ok() {
                    // What was just written is what the next read finds (`Lower::read_own`).
                    if let Ok(st) = self.lower.stat(&cbase) {
                        crate::lower_recent_read::remember(&st, commit.as_bytes());
                    }
                }
                return;
            }
        }
        let _ = self.lower.unlink(&ctmp, false);
    }

    /// The sync point as this seamfs last wrote it. Read without a forced refresh, and recalled
    /// while its stamps stand even where the lower's never revalidate: only this box's seamfs
    /// writes the file, by rename through this lower, which replaces the lower's entry itself
    /// (ADR 0046; the reverse heal's decision reads it verified, as before).
    pub(super) fn base(&self, gitdir: &Path) -> Option<String> {
        let c = cpath(&gitdir.join(self.layer.names().base()));
        let bytes = self.lower.read_own(&c, 1024).ok().flatten()?.0;
        Some(String::from_utf8_lossy(&bytes).trim().to_string())
    }

    /// The box touches its index: if HEAD moved since its sync point (a move by the host or
    /// another box: this box's moves advance the sync point), heal `index-box.<id>` onto it.
    pub(crate) fn reverse_heal(&self, gitdir: &Path) {
        let _one_at_a_time = self.reverse_heals.lock();
        trim_heap_after(self.reverse_heal_copies(gitdir));
    }

    /// The reverse heal; the size of the index it copied (0: none), whose memory may be worth
    /// giving back.
    fn reverse_heal_copies(&self, gitdir: &Path) -> usize {
        let Some(head) = self.head_commit(gitdir) else { return 0 };
        let Some(base) = self.base(gitdir) else {
            self.set_base(gitdir, &head);
            return 0;
        };
        if base == head {
            return 0;
        }
        // A heal rewrites the box's staging: what it acts on is read again, checked against
        // the share's listings, so a stale HEAD, branch or box index never drives it (a branch
        // reading missing falls back to packed-refs and would heal the box back in time).
        // HEAD, the sync point and the box's index are read against one listing of the git
        // dir, which also names the other boxes' indexes.
        let names = self.layer.names();
        let wanted = [OsStr::new("HEAD"), OsStr::new(names.base()), OsStr::new(names.index())];
        let Ok((read, listing)) = read_verified_in(&self.lower, gitdir, &wanted) else { return 0 };
        let [head_bytes, Some(base), Some(bytes)] = <[_; 3]>::try_from(read).unwrap_or_default() else { return 0 };
        let verified = GitDirRef::open(&self.lower, gitdir.to_path_buf()).verified();
        let head = head_bytes.map(|b| Head::parse(&b)).transpose();
        let Ok(HeadOid::At(head)) = head.and_then(|h| verified.oid_of_head(h)) else { return 0 };
        let base = String::from_utf8_lossy(&base).trim().to_string();
        if base == head {
            return 0;
        }
        let index = gitdir.join(names.index());
        let copied = bytes.len();
        let common = verified.common.clone();
        // The mover's index usually holds the tree it moved HEAD to: the host's shared index
        // (a box's sealed heal writes it too), else the other box that committed.
        let shared = || self.open_hint(&gitdir.join(SHARED_INDEX));
        let others: Vec<_> = self.other_box_indexes(gitdir, &listing).into_iter().map(|p| move || self.open_hint(&p)).collect();
        let mut hints: Vec<Hint> = vec![&shared];
        hints.extend(others.iter().map(|f| f as Hint));
        let opts = HealOptions { index_mtime: self.index_mtime(&index), hints: &hints };
        let outcome = heal_owned(&self.objects_dir(&common), bytes, &base, &head, opts);
        match outcome {
            Ok(HealOutcome::Healed { bytes: healed, .. }) => {
                let lock = cpath(&gitdir.join(names.index_lock()));
                // A box git holding its own index lock is mid-write: heal on the next touch.
                let Ok(fd) = self.lower.open_at(&lock, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o644) else { return copied };
                self.same_owner_and_mode(&fd, &index);
                // On the server before the rename (ADR 0055): written back, not fsynced.
                if crate::lower::write_whole(fd, &healed).is_ok() && self.lower.rename(&lock, &cpath(&index), 0).is_ok()
                {
                    info!(gitdir = %gitdir.display(), from = %base, to = %head, "box index healed after a move by the host or another box");
                    self.set_base(gitdir, &head);
                } else {
                    let _ = self.lower.unlink(&lock, false);
                }
            }
            Ok(HealOutcome::Unchanged) => self.set_base(gitdir, &head),
            Ok(HealOutcome::Refused(r)) => {
                // Reported once per move; the staging stays as it is.
                if self.judge.first_time(format!("box {} {head}", gitdir.display())) {
                    warn!(gitdir = %gitdir.display(), "box index not healed after a move by the host or another box: {r}");
                }
            }
            Err(e) => warn!(gitdir = %gitdir.display(), error = %e, "box index not healed after a move by the host or another box"),
        }
        copied
    }

    /// Other boxes' indexes in `gitdir` (lower-relative) by its `listing`, most recently
    /// written first, at most [`OTHER_BOX_HINTS`]: hints for a heal after one of them committed.
    fn other_box_indexes(&self, gitdir: &Path, listing: &[(OsString, u64)]) -> Vec<PathBuf> {
        let names = self.layer.names();
        let mut found: Vec<(i64, PathBuf)> = listing
            .iter()
            .filter(|(n, _)| names.is_other_box_index(n))
            .filter_map(|(n, _)| {
                let p = gitdir.join(n);
                self.lower.stat(&cpath(&p)).ok().map(|st| (st.st_mtime, p))
            })
            .collect();
        found.sort_by_key(|f| std::cmp::Reverse(f.0));
        found.into_iter().take(OTHER_BOX_HINTS).map(|(_, p)| p).collect()
    }

    /// A box process looks up its index: note the sync point it reads it at (its first read
    /// since it last wrote its index).
    pub(crate) fn note_index_read(&self, gitdir_node: u64, pid: u32) {
        let Ok(c) = self.inodes.path(gitdir_node) else { return };
        let gitdir = crate::gitdata::rel_path(&c);
        let p = Proc::of(pid);
        if self.judge.tracker.has_index_read(p, &gitdir) {
            return;
        }
        if let Some(base) = self.base(&gitdir) {
            debug!(pid, gitdir = %gitdir.display(), sync_point = %base, "box index read");
            self.judge.tracker.note_index_read(p, &gitdir, base);
        }
    }

    /// A box process opens its index (node `index`): what it reads derives from the sync point
    /// now. A heal at a lookup or lock create after the process's first lookup (noted by
    /// [`Self::note_index_read`]) moved it since, and a write of what the process read must not
    /// take it back (`index_written`).
    pub(crate) fn note_index_open(&self, index_node: u64, pid: u32) {
        let Ok(gitdir_node) = self.inodes.with(index_node, |n| n.parent) else { return };
        let Ok(c) = self.inodes.path(gitdir_node) else { return };
        let gitdir = crate::gitdata::rel_path(&c);
        if let Some(base) = self.base(&gitdir) {
            debug!(pid, gitdir = %gitdir.display(), sync_point = %base, "box index opened");
            self.judge.tracker.note_index_open(Proc::of(pid), &gitdir, base);
        }
    }

    /// A box process renamed its lock onto `index-box.<id>`: what it wrote derives from what it
    /// read. `git commit` reads the index, then takes the lock (the reverse heal runs there),
    /// then writes what it read: if the sync point moved in between, the written index is
    /// still at the old one, so the sync point goes back and the next touch heals again.
    pub(crate) fn index_written(&self, p: Proc, gitdir: &Path) {
        let Some(read_at) = self.judge.tracker.take_index_read(p, gitdir) else { return };
        debug!(pid = p.pid, gitdir = %gitdir.display(), read_at = %read_at, "box index written");
        if self.base(gitdir).is_some_and(|now| now != read_at) {
            info!(gitdir = %gitdir.display(), sync_point = %read_at, "box index rewritten from a read before a heal: healing it again on the next touch");
            self.set_base(gitdir, &read_at);
        }
        self.index_rewritten_from_head(p, gitdir, &read_at);
    }

    /// The index a box process wrote may be a commit's tree (`reset`, `checkout`, `read-tree`),
    /// not derived from the one it read: when it is exactly the tree of the commit the process
    /// saw as HEAD, or of HEAD now, and the sync point is elsewhere, the sync point is that
    /// commit. Without the first, a `reset --hard HEAD` that read another side's commit, which
    /// was then taken back before the write (`reset --soft HEAD~`), left that commit's files in
    /// the index at a sync point without them, and the next commit re-added them; without the
    /// second, a box whose heal was refused stayed refused after `git reset` (ADR 0030). Only
    /// checked when the process did not see HEAD at the sync point (no read of HEAD then).
    fn index_rewritten_from_head(&self, p: Proc, gitdir: &Path, read_at: &str) {
        let seen = self.seen_head(p, gitdir);
        if seen.as_deref() == Some(read_at) {
            return;
        }
        let mut commits: Vec<String> = seen.into_iter().collect();
        if let Some(head) = self.head_commit(gitdir).filter(|h| h != read_at && !commits.contains(h)) {
            commits.push(head);
        }
        let common = GitDirRef::open(&self.lower, gitdir.to_path_buf()).common;
        for commit in commits {
            let Some(HintData::File(f)) = self.open_hint(&gitdir.join(self.layer.names().index())) else { return };
            if crate::heal::index_is_tree_of(&self.objects_dir(&common), f, &commit) {
                info!(gitdir = %gitdir.display(), sync_point = %commit, "box index rewritten as a commit's tree: in sync with it");
                self.set_base(gitdir, &commit);
                self.judge.tracker.set_index_read(p, gitdir, commit);
                return;
            }
        }
    }

    /// The commit process `p` sees as HEAD of `gitdir`: HEAD as it read it or last moved it
    /// itself (a rebase detaches HEAD and moves it commit by commit), resolved through the
    /// branch's value as it saw or moved that.
    fn seen_head(&self, p: Proc, gitdir: &Path) -> Option<String> {
        let start = self.judge.tracker.start_of(p).filter(|s| s.gitdir == gitdir)?;
        let head = self.judge.tracker.seen_ref(p, gitdir, "HEAD").flatten()?;
        match head.strip_prefix("ref:").map(str::trim) {
            Some(branch) => self.judge.tracker.seen_ref(p, &start.common, branch).flatten(),
            None => Some(head),
        }
    }

    /// A box process moved a branch: its index reads now count from the sync point that move
    /// left (its commit index is the new commit's tree).
    pub(crate) fn index_reads_follow_move(&self, p: Proc) {
        for gitdir in self.judge.tracker.index_reads_of(p) {
            if let Some(base) = self.base(&gitdir) {
                self.judge.tracker.set_index_read(p, &gitdir, base);
            }
        }
    }
}
