//! Where the core calls the judging (`crate::judge`): lookups note what a box process saw,
//! lock creates record their owner, and a rename of `<name>.lock` onto `<name>` is judged under
//! that lock before it reaches the lower.

use std::ffi::{CStr, OsStr};
use std::hash::{Hash, Hasher};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use fuser::Errno;
use tracing::warn;

use crate::core::names::Child;
use crate::core::Core;
use crate::gitdata::{cpath, read_lower, GitDirRef, Head, RefState};
use crate::judge::locks::LockRecord;
use crate::judge::procs::Proc;
use crate::judge::tracker::Start;
use crate::judge::verdict::{self, judge_file, judge_ops, judge_ref, Target, Verdict, OP_STATE};
use crate::layer::Layer;
use crate::lower::Seen;
use crate::policy::Class;

/// What to record once a judged rename has gone through.
#[derive(Debug)]
pub(crate) struct AfterRename {
    proc_: Proc,
    dir: PathBuf,
    target: Target,
    old_value: Option<String>,
    new_value: Option<Vec<u8>>,
    lock: std::ffi::CString,
    heals: Vec<super::heal_seal::PendingHeal>,
}

/// A commit of a lock judged (`Core::commit_verdict`): where, what, and the answer.
#[derive(Debug)]
pub(crate) struct Judged {
    /// The git dir holding the name.
    pub gitdir: PathBuf,
    /// What the commit replaces.
    pub target: Target,
    /// The ref's value now, as the judging compares it (refs only).
    pub old_value: Option<String>,
    /// Allow, or refuse with the reason.
    pub verdict: Verdict,
}

fn hash(bytes: &Option<Vec<u8>>) -> Option<u64> {
    bytes.as_ref().map(|b| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        b.hash(&mut h);
        h.finish()
    })
}

fn trimmed(b: &[u8]) -> String {
    String::from_utf8_lossy(b).trim().to_string()
}

/// What a name inside a git dir is judged as.
fn target_of(rel: &str) -> Target {
    if rel.ends_with(".lock") {
        Target::Other
    } else if rel == "HEAD" || rel.starts_with("refs/") || (rel.ends_with("_HEAD") && !rel.contains('/')) {
        Target::Ref(rel.to_string())
    } else if rel == "config" || rel == "packed-refs" {
        Target::File(rel.to_string())
    } else {
        Target::Other
    }
}

/// The pid-0 lock creator is logged once per daemon.
static PID0_LOGGED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl<L: Layer> Core<L> {
    /// The git dir above `parent` and the path of `lower_name` relative to it.
    fn in_git_dir(&self, parent: u64, lower_name: &OsStr) -> Option<(PathBuf, String)> {
        let mut parts = vec![lower_name.to_string_lossy().into_owned()];
        let mut cur = parent;
        loop {
            let (class, name, up) = self.inodes.with(cur, |n| (n.class, n.name.clone(), n.parent)).ok()?;
            if class == Class::GitDir {
                let path = self.inodes.path(cur).ok()?;
                parts.reverse();
                return Some((crate::gitdata::rel_path(&path), parts.join("/")));
            }
            if class == Class::WorkTree || cur == up {
                return None;
            }
            parts.push(name.to_string_lossy().into_owned());
            cur = up;
        }
    }

    /// The value of a ref as the judging compares it: HEAD's raw content, a ref's object id.
    fn ref_value(&self, gitdir: &Path, rel: &str) -> Option<String> {
        if !rel.starts_with("refs/") {
            return read_lower(&self.lower, &gitdir.join(rel)).ok().flatten().map(|b| trimmed(&b));
        }
        GitDirRef::open(&self.lower, gitdir.to_path_buf()).value(rel).ok().flatten()
    }

    /// Operation state present in a git dir now, from one listing (fresh on any share, where
    /// a lookup per name could meet a stale entry, and cheaper than one per name).
    /// Asked again in the same request (the sealed heal after the judge), the first listing
    /// stands (`refresh_scope::ops_listed`).
    pub(super) fn ops_present(&self, gitdir: &Path) -> Vec<String> {
        crate::refresh_scope::ops_listed(gitdir, || {
            let names = self.lower.list(&cpath(gitdir)).unwrap_or_default();
            OP_STATE.iter().filter(|n| names.iter().any(|(x, _)| x == OsStr::new(n))).map(|n| n.to_string()).collect()
        })
    }

    /// A branch hides history from process `p` when it reads absent while its reflog has
    /// entries that `p` did not move there itself: `branch -m` and `branch -c` rename the
    /// reflog to the new name before they create the ref, and history carried over is not lost.
    fn hidden_from(&self, p: Proc, g: &GitDirRef<'_>, name: &str) -> bool {
        !self.judge.tracker.carries_reflog(p, &g.dir, name) && matches!(g.resolve(name), Ok(RefState::Hidden))
    }

    /// True when a branch's reflog holds more than the one entry git appends while creating it
    /// and process `p` did not carry it there: the branch had commits, so creating it from
    /// nothing would make a root commit over them.
    fn reflog_has_history(&self, p: Proc, gitdir: &Path, name: &str) -> bool {
        if self.judge.tracker.carries_reflog(p, gitdir, name) {
            return false;
        }
        match read_lower(&self.lower, &gitdir.join("logs").join(name)) {
            Ok(Some(log)) => log.split(|&b| b == b'\n').filter(|l| !l.is_empty()).count() >= 2,
            _ => false,
        }
    }

    /// A process's first look at a git dir's HEAD: record where it started.
    fn note_start(&self, pid: u32, gitdir: &Path) {
        let p = Proc::of(pid);
        if self.judge.tracker.started(p) {
            return;
        }
        // A new command sees a host's packed refs at once (ADR 0060).
        drop(self.wait_out_missing_packed_refs());
        let g = GitDirRef::open(&self.lower, gitdir.to_path_buf());
        let raw = read_lower(&self.lower, &gitdir.join("HEAD")).ok().flatten();
        let head = raw.as_deref().and_then(|b| Head::parse(b).ok());
        self.judge.tracker.note_ref(p, gitdir, "HEAD", raw.map(|b| trimmed(&b)));
        let branch = match head {
            Some(Head::Symbolic(b)) => {
                // Refreshed in this process's name: its own lookup of the branch a moment
                // later is answered from the same look (ADR 0020), so it sees what is noted.
                // Its loose file is read as the process's own too (ADR 0046), so that lookup is
                // served these bytes instead of reading the server again. Only the loose file:
                // a refresh of `packed-refs` made in there would stand for the process as its
                // own look while git lists the loose refs afresh (`races::packed_refs_…`).
                if b.starts_with("refs/") {
                    let loose = g.common.join(&b);
                    self.refresh_for(pid, &cpath(&loose));
                    let _ = crate::refresh_scope::as_process(pid, &self.recent_refresh, || read_lower(&self.lower, &loose));
                }
                let v = self.value_as_the_kernel_may_show(&g.common, &b, g.value(&b).ok().flatten());
                self.heal_due_if_moved(gitdir, v.as_deref(), pid);
                self.judge.tracker.note_ref(p, &g.common, &b, v);
                Some(b)
            }
            Some(Head::Detached(oid)) => {
                self.heal_due_if_moved(gitdir, Some(&oid), pid);
                None
            }
            None => None,
        };
        self.judge.tracker.start(p, Start { gitdir: gitdir.into(), common: g.common.clone(), branch });
    }

    /// LOOKUP inside a git dir: note HEAD and refs as first seen; wait out a host-held lock.
    /// `seen`: what the lookup's own refresh of the name found.
    pub(crate) fn guard_lookup(&self, parent: u64, class: Class, child: &Child<'_>, pid: u32, seen: Seen) {
        if !self.layer.guards() || !class.in_git_dir() {
            return;
        }
        let Some((gitdir, rel)) = self.in_git_dir(parent, &child.lower) else { return };
        match class {
            Class::LiveRef => self.note_ref_look(pid, &gitdir, &rel),
            // No lock on the server a moment ago: nobody's to wait for.
            Class::Lock if seen == Seen::Missing => {}
            Class::Lock => self.wait_host_lock(&child.path),
            _ => {}
        }
    }

    /// A process's look at a live ref (its LOOKUP, or its OPEN through an entry the kernel
    /// kept, ADR 0038): HEAD notes where it started, a ref its value as first seen.
    fn note_ref_look(&self, pid: u32, gitdir: &Path, rel: &str) {
        if rel == "HEAD" {
            self.note_start(pid, gitdir);
        } else if rel.starts_with("refs/") {
            let p = Proc::of(pid);
            if !self.judge.tracker.has_ref(p, gitdir, rel) {
                // The value as this process sees it: `packed-refs` as its own last look left it.
                self.refresh_for(pid, &cpath(&gitdir.join("packed-refs")));
                let v = self.value_as_the_kernel_may_show(gitdir, rel, self.ref_value(gitdir, rel));
                self.judge.tracker.note_ref(p, gitdir, rel, v);
            }
        }
    }

    /// A lock that exists on the lower and that no box process holds is the host's: wait for
    /// it (bounded) so short host operations serialise instead of failing the box command.
    pub(crate) fn wait_host_lock(&self, path: &CStr) {
        // A lock a box process holds is not the host's: nothing to wait for, and no need to ask
        // the share (over a lower that never revalidates that is a listing of the git dir,
        // made at each of git's lookups of its own lock before the rename).
        if self.judge.locks.holder(&path.to_owned()).is_some() {
            return;
        }
        let deadline = Instant::now() + self.opts.lock_wait;
        // The lookup that brought us here may have refreshed the name already; every later look
        // must reach the share's server again.
        self.lower.refresh(path);
        loop {
            let held_by_host = self.lower.server_has(path) && self.judge.locks.holder(&path.to_owned()).is_none();
            if !held_by_host || Instant::now() >= deadline {
                return;
            }
            crate::refresh_scope::pause(Duration::from_millis(5));
            self.lower.refresh_again(path);
        }
    }

    /// An exclusive create met EEXIST: on a lower that never revalidates, when the server's
    /// listing no longer has the name (the host removed it), drop the guest's dentry cache so
    /// the next create reaches the server. True when it did (worth one more try).
    pub(crate) fn forget_stale_name(&self, parent: u64, name: &OsStr) -> bool {
        self.child(parent, name).is_ok_and(|c| self.lower.forget_stale_name(&c.path))
    }

    /// A branch that reads as absent while its reflog has entries is looked up again (bounded)
    /// before it is ever served as unborn; None when it stays hidden (the box gets EIO).
    pub(crate) fn guard_missing(&self, parent: u64, class: Class, child: &Child<'_>, pid: u32) -> Result<Option<libc::stat>, Errno> {
        if !self.layer.guards() || class != Class::LiveRef {
            return Ok(None);
        }
        let Some((gitdir, rel)) = self.in_git_dir(parent, &child.lower) else { return Ok(None) };
        if !rel.starts_with("refs/heads/") {
            return Ok(None);
        }
        // Most absent names (git's dwim probes `refs/heads/HEAD` and the like) never had a
        // reflog: one stat answers them. A reflog is appended to, never replaced, so the
        // share's cached entry for it is not stale.
        if self.lower.stat(&cpath(&gitdir.join("logs").join(&rel))).is_err() {
            return Ok(None);
        }
        // A transaction in flight (git writes the reflog before renaming `<ref>.lock`, so a
        // new branch reads as absent with a reflog until then): absent is the truth.
        let lock = gitdir.join(format!("{rel}.lock"));
        if self.lower.stat(&cpath(&lock)).is_ok() {
            return Ok(None);
        }
        let g = GitDirRef::open(&self.lower, gitdir.clone());
        let p = Proc::of(pid);
        if !self.hidden_from(p, &g, &rel) {
            return Ok(None);
        }
        let deadline = Instant::now() + self.opts.lock_wait;
        while Instant::now() < deadline {
            crate::refresh_scope::pause(Duration::from_millis(10));
            self.lower.refresh_again(&child.path);
            if let Ok(st) = self.lower.stat(&child.path) {
                return Ok(Some(st));
            }
            if !self.hidden_from(p, &g, &rel) {
                return Ok(None);
            }
        }
        warn!(gitdir = %gitdir.display(), branch = %rel, "branch reads as absent but has a reflog; refusing to serve it as unborn");
        Err(Errno::EIO)
    }

    /// Before the box creates its index lock: the reverse heal. Before it creates
    /// `refs/heads/<b>.lock`: a branch that reads absent while its
    /// reflog holds history is looked up again (bounded); if it stays hidden the lock is refused,
    /// so git stops before it appends a root commit to that reflog.
    pub(crate) fn guard_lock_create(&self, parent: u64, child: &Child<'_>, pid: u32) -> Result<(), Errno> {
        if !self.layer.guards() {
            return Ok(());
        }
        if self.layer.index_split() && *child.lower == *self.layer.names().index_lock() {
            // Git takes the index lock before it reads the index: a reverse heal put off until
            // the read would meet the lock and skip, and the box would commit its stale index
            // over a host move (reverting the host's files). Heal first. Its refreshes come
            // after this create's barrier and stand for the process, as its first lookups under
            // the lock would: its lookup of `index` after the rename recalls them (ADR 0033).
            return crate::refresh_scope::as_process(pid, &self.recent_refresh, || self.seed_index(parent));
        }
        let Some((gitdir, rel)) = self.in_git_dir(parent, &child.lower) else { return Ok(()) };
        if rel == "HEAD.lock" {
            self.take_heal_lock_before(&gitdir, &rel, child, pid);
            return Ok(());
        }
        let Some(name) = rel.strip_suffix(".lock").filter(|n| n.starts_with("refs/heads/")) else { return Ok(()) };
        let g = GitDirRef::open(&self.lower, gitdir.clone());
        let deadline = Instant::now() + self.opts.lock_wait;
        while self.hidden_from(Proc::of(pid), &g, name) {
            if Instant::now() >= deadline {
                warn!(gitdir = %gitdir.display(), branch = %name, "refused to lock a branch that reads as absent but has a reflog (it has commits); nothing was changed, run the command again");
                return Err(Errno::EBUSY);
            }
            crate::refresh_scope::pause(Duration::from_millis(10));
        }
        self.take_heal_lock_before(&gitdir, &rel, child, pid);
        Ok(())
    }

    /// OPEN of a live ref: note what the process read (`config`, `packed-refs`), and HEAD and
    /// refs as a lookup would when the kernel kept their entries.
    pub(crate) fn guard_open(&self, id: u64, flags: i32, pid: u32) {
        if !self.layer.guards() {
            return;
        }
        let Ok((class, parent, name)) = self.inodes.with(id, |n| (n.class, n.parent, n.name.clone())) else { return };
        if class == Class::LiveRef && flags & libc::O_ACCMODE != libc::O_RDONLY {
            let old = self.ref_before_change(parent, &name).flatten();
            self.guard_written(parent, &name, pid, old);
        }
        if class != Class::LiveRef {
            return;
        }
        let Some((gitdir, rel)) = self.in_git_dir(parent, &name) else { return };
        if self.live_entries_kept() {
            // The kernel may have opened it through a kept entry, with no LOOKUP before.
            self.note_ref_look(pid, &gitdir, &rel);
        }
        if &*name != "config" && &*name != "packed-refs" {
            return;
        }
        if let Target::File(_) = target_of(&rel) {
            // What the open below reaches: the name as this process's last refresh left it, and
            // the bytes read under that refresh (ADR 0046): what the open's snapshot serves.
            let path = gitdir.join(&rel);
            self.refresh_for(pid, &cpath(&path));
            let content = crate::refresh_scope::as_process(pid, &self.recent_refresh, || read_lower(&self.lower, &path)).ok().flatten();
            self.judge.tracker.read_file(Proc::of(pid), &gitdir, &rel, hash(&content));
        }
    }

    /// A box process writes a ref file in place (create, or open for writing): its content is
    /// not known yet, so no box process that saw the old value is judged on it.
    pub(crate) fn guard_written(&self, parent: u64, lower_name: &OsStr, pid: u32, old: Option<String>) {
        let Some((gitdir, rel)) = self.in_git_dir(parent, lower_name) else { return };
        if let Target::Ref(name) = target_of(&rel) {
            self.judge.tracker.box_moved(Proc::of(pid), &gitdir, &name, &old, None);
        }
    }

    /// The value a ref file has before the box removes or rewrites it (None when not a ref).
    pub(crate) fn ref_before_change(&self, parent: u64, lower_name: &OsStr) -> Option<Option<String>> {
        if !self.layer.guards() {
            return None;
        }
        let (gitdir, rel) = self.in_git_dir(parent, lower_name)?;
        match target_of(&rel) {
            Target::Ref(name) => Some(self.ref_value(&gitdir, &name)),
            _ => None,
        }
    }

    /// After the box removed a ref file: box processes that saw its last value follow.
    pub(crate) fn guard_ref_removed(&self, parent: u64, lower_name: &OsStr, pid: u32, old: Option<String>) {
        let Some((gitdir, rel)) = self.in_git_dir(parent, lower_name) else { return };
        if let Target::Ref(name) = target_of(&rel) {
            let now = self.ref_value(&gitdir, &name);
            self.judge.tracker.box_moved(Proc::of(pid), &gitdir, &name, &old, Some(now));
        }
    }

    /// After a create or mkdir: record box locks and box-made operation state, only when this
    /// call `made` the name. `created` is the file's stat taken from its own fd (a path stat
    /// could meet a stale entry of the share for a name just replaced).
    pub(crate) fn guard_created(&self, parent: u64, child: &Child<'_>, class: Class, pid: u32, made: bool, created: Option<&libc::stat>) {
        if !self.layer.guards() {
            return;
        }
        if class == Class::LiveRef {
            self.guard_written(parent, &child.lower, pid, None);
        }
        if !made {
            // Opened, not made: whoever made it owns it (a lock, an operation's state).
            return;
        }
        if class == Class::Lock && pid == 0 {
            // FUSE says pid 0 for a caller outside seamfs's pid namespace: it cannot be told
            // alive or dead, so its lock is left to it, never reaped.
            if !PID0_LOGGED.swap(true, std::sync::atomic::Ordering::Relaxed) {
                warn!(lock = %child.path.to_string_lossy(), "a process outside seamfs's pid namespace (pid 0) created a lock: its locks are never released for it");
            }
        } else if class == Class::Lock {
            let st = match created {
                Some(st) => Some(*st),
                None => self.lower.stat(&child.path).ok(),
            };
            if let Some(st) = st {
                let rec = LockRecord { owner: Proc::of(pid), dev: st.st_dev, ino: st.st_ino };
                self.judge.locks.created(child.path.to_c_string(), rec);
            }
        } else if OP_STATE.iter().any(|n| OsStr::new(n) == &*child.lower) {
            if let Some((gitdir, _)) = self.in_git_dir(parent, &child.lower) {
                self.set_own_op(&gitdir, &child.lower.to_string_lossy(), true);
            }
        } else if let Some((gitdir, rel)) = self.in_git_dir(parent, &child.lower) {
            // A reflog this process made itself hides nothing from it: `cp -R` of a repository
            // may write `logs/refs/heads/main` before `refs/heads/main`, and the branch's
            // lookup then must not wait for history and answer EIO.
            if let Some(name) = rel.strip_prefix("logs/").filter(|n| n.starts_with("refs/")) {
                self.judge.tracker.carried_reflog(Proc::of(pid), &gitdir, name);
            }
        }
    }

    /// After an unlink or rmdir: forget the lock or the box's operation state.
    pub(crate) fn guard_removed(&self, parent: u64, child: &Child<'_>) {
        if !self.layer.guards() {
            return;
        }
        self.release_shared_index(&child.path);
        self.release_heal_locks(&child.path, None);
        self.judge.locks.released(&child.path);
        if OP_STATE.iter().any(|n| OsStr::new(n) == &*child.lower) {
            if let Some((gitdir, _)) = self.in_git_dir(parent, &child.lower) {
                self.set_own_op(&gitdir, &child.lower.to_string_lossy(), false);
            }
        }
    }

    /// A box process is about to unlink a work-tree file: while it holds its index lock, the
    /// shared `index.lock` is held with it, so a host commit does not scan the work tree between
    /// this unlink and the re-create that follows (ADR 0032).
    pub(crate) fn guard_work_tree_unlink(&self, parent: u64, pid: u32) {
        // No box lock at all (most unlinks, `rm -rf` of a tree): not even the caller's /proc.
        if !self.layer.guards() || !self.layer.index_split() || pid == 0 || self.judge.locks.is_empty() {
            return;
        }
        if self.class_of(parent).map_or(true, |c| c.in_git_dir()) {
            return;
        }
        let name = self.layer.names().index_lock().as_bytes();
        let taken = self.judge.index_exclusion.before_work_tree_change(&self.lower, &self.judge.locks, Proc::of(pid), name, self.opts.lock_wait);
        self.record_shared_index(taken);
    }

    /// A box lock create that made nothing (the name exists, or the create failed): the shared
    /// index lock this process took for it goes (ADR 0054).
    pub(crate) fn guard_lock_not_made(&self, child: &Child<'_>, pid: u32) {
        if self.layer.guards() {
            self.release_heal_locks(&child.path, Some(Proc::of(pid)));
        }
    }

    /// A shared `index.lock` taken for a box process's rewrite is recorded durably
    /// (`index.seam-held`), as the heal's is, so a seamfs that dies holding it has it removed at
    /// its next start.
    fn record_shared_index(&self, taken: Option<crate::judge::index_exclusion::Taken>) {
        if let Some(t) = taken {
            self.note_held(&t.gitdir, &t.fd);
        }
    }

    /// The box index lock at `box_lock` went: so does the shared lock held with it, and its record.
    fn release_shared_index(&self, box_lock: &CStr) {
        if let Some(gitdir) = self.judge.index_exclusion.released(&self.lower, &self.judge.locks, box_lock) {
            self.drop_held(&gitdir);
        }
    }

    /// A rename committed or moved a box lock away: the shared index lock taken with it goes.
    pub(crate) fn guard_lock_moved(&self, old: &Child<'_>) {
        if self.layer.guards() {
            self.release_shared_index(&old.path);
            self.release_heal_locks(&old.path, None);
        }
    }

    /// RENAME inside a git dir: make the source durable first; judge `<name>.lock` → `<name>`.
    pub(crate) fn guard_rename(
        &self,
        parent: u64,
        old: &Child<'_>,
        newparent: u64,
        new: &Child<'_>,
        pid: u32,
    ) -> Result<Option<AfterRename>, Errno> {
        if !self.layer.guards() {
            return Ok(None);
        }
        let in_git = self.class_of(newparent).map(|c| c.in_git_dir()).unwrap_or(false);
        if !in_git {
            return Ok(None);
        }
        self.make_durable(&old.path);
        let is_commit = parent == newparent
            && old.lower.as_bytes().strip_suffix(b".lock") == Some(new.lower.as_bytes());
        if !is_commit {
            return Ok(None);
        }
        let p = Proc::of(pid);
        let Some(Judged { gitdir, target, old_value, verdict }) = self.commit_verdict(newparent, &new.lower, p) else {
            return Ok(None);
        };
        if let Verdict::Refuse(msg) = verdict {
            warn!(pid, gitdir = %gitdir.display(), "{msg}");
            return Err(Errno::EBUSY);
        }
        // What the lock holds matters only for a judged name (a ref, `config`, `packed-refs`):
        // the index's lock is not read (over 9p `cache=loose` each read is a server round trip).
        let new_value = match &target {
            Target::Ref(_) | Target::File(_) => read_lower(&self.lower, &crate::gitdata::rel_path(&old.path)).ok().flatten(),
            Target::Other => None,
        };
        let heals = match &target {
            Target::Ref(name) => self.seal_heal(p, &gitdir, name, old_value.clone(), new_value.as_deref()),
            _ => Vec::new(),
        };
        Ok(Some(AfterRename { proc_: p, dir: gitdir, target, old_value, new_value, lock: old.path.to_c_string(), heals }))
    }

    /// The verdict on committing `<name>.lock` onto `<name>` in directory `dir` (a lower name),
    /// for process `p`, as things stand now; None outside a git dir. It only reads (the lower and
    /// the tracker), so the rename and the `user.seamfs.verdict` attribute ask the same question
    /// and get the same answer without one disturbing the other.
    pub(crate) fn commit_verdict(&self, dir: u64, name: &OsStr, p: Proc) -> Option<Judged> {
        let (gitdir, rel) = self.in_git_dir(dir, name)?;
        let target = target_of(&rel);
        let mut old_value = None;
        let verdict = match &target {
            Target::Ref(name) => {
                let now = self.ref_value(&gitdir, name);
                old_value = now.clone();
                // Only HEAD and the branch the command started on are held to what it saw then:
                // other refs are left to git's own compare-and-swap, sound now that reads are
                // fresh (`branch -f side`, `tag`, `branch -D` are not second-guessed).
                let held = name == "HEAD"
                    || self.judge.tracker.start_of(p).is_some_and(|s| s.common == gitdir && s.branch.as_deref() == Some(name.as_str()));
                if now.is_none() && name.starts_with("refs/heads/") && self.reflog_has_history(p, &gitdir, name) {
                    Verdict::Refuse(format!(
                        "refused to create {name}: it reads as absent but its reflog holds history (a stale read of a branch with commits); nothing was changed, run the command again"
                    ))
                } else if !held {
                    Verdict::Allow
                } else {
                    match judge_ref(name, self.judge.tracker.seen_ref(p, &gitdir, name).as_ref(), &now) {
                        Verdict::Allow => match self.judge_head_ops(p, &gitdir, name) {
                            Verdict::Allow => self.judge_index(p, &gitdir, name, &now),
                            refuse => refuse,
                        },
                        refuse => refuse,
                    }
                }
            }
            Target::File(name) => {
                let now = hash(&read_lower(&self.lower, &gitdir.join(name)).ok().flatten());
                judge_file(name, self.judge.tracker.last_read(p, &gitdir, name).as_ref(), &now)
            }
            Target::Other => Verdict::Allow,
        };
        Some(Judged { gitdir, target, old_value, verdict })
    }

    /// Moves of HEAD or of the branch the command started on: refused while the other side has
    /// an operation in progress, with its own message for a leftover autostash dir.
    fn judge_head_ops(&self, p: Proc, dir: &Path, name: &str) -> Verdict {
        let Some(start) = self.judge.tracker.start_of(p) else { return Verdict::Allow };
        let moves_head = (name == "HEAD" && dir == start.gitdir) || (dir == start.common && start.branch.as_deref() == Some(name));
        if !moves_head {
            return Verdict::Allow;
        }
        for d in ["rebase-merge", "rebase-apply"] {
            if self.is_leftover_autostash(&start.gitdir.join(d)) {
                return verdict::leftover_autostash(d);
            }
        }
        let now = self.ops_present(&start.gitdir);
        judge_ops(&now, &self.own_ops(&start.gitdir))
    }

    /// A move of HEAD or the command's branch from an index in sync with another commit: see
    /// `verdict::judge_index_base`. The index is the work tree's (the command's git dir).
    fn judge_index(&self, p: Proc, dir: &Path, name: &str, now: &Option<String>) -> Verdict {
        let Some(start) = self.judge.tracker.start_of(p) else { return Verdict::Allow };
        let moves_head = (name == "HEAD" && dir == start.gitdir) || (dir == start.common && start.branch.as_deref() == Some(name));
        if !moves_head {
            return Verdict::Allow;
        }
        let read_at = self.judge.tracker.index_base_of(p, &start.gitdir);
        tracing::debug!(pid = p.pid, ?read_at, ?now, %name, "index judged for a move");
        // The new value is what the lock holds; its parents are read only when the index is off.
        let on_now = || {
            let lock = read_lower(&self.lower, &dir.join(format!("{name}.lock"))).ok().flatten()?;
            let new = String::from_utf8_lossy(&lock).trim().to_string();
            let common = GitDirRef::open(&self.lower, dir.to_path_buf()).common;
            let parents = crate::heal::commit_parents(&self.objects_dir(&common), &new)?;
            Some(now.as_ref().is_some_and(|n| parents.iter().any(|p| p == n)))
        };
        verdict::judge_index_base(name, read_at.as_deref(), now, on_now)
    }

    fn is_leftover_autostash(&self, dir: &Path) -> bool {
        let c = cpath(dir);
        let Ok(st) = self.lower.stat(&c) else { return false };
        let age = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs().saturating_sub(st.st_mtime.max(0) as u64))
            .unwrap_or(0);
        if age < verdict::LEFTOVER_AGE_SECS {
            return false;
        }
        let Ok(names) = self.lower.list(&c) else { return false };
        names.len() == 1 && names[0].0 == "autostash"
    }

    /// After any rename in a git dir: operation state the box renamed into place is the box's
    /// own (git writes `CHERRY_PICK_HEAD` and friends through a lock).
    /// A reflog the box renamed into place is recorded as carried by the renaming process.
    pub(crate) fn guard_moved_names(&self, parent: u64, old: &Child<'_>, newparent: u64, new: &Child<'_>, pid: u32) {
        if !self.layer.guards() {
            return;
        }
        if let Some((gitdir, rel)) = self.in_git_dir(newparent, &new.lower) {
            if let Some(name) = rel.strip_prefix("logs/").filter(|n| n.starts_with("refs/")) {
                self.judge.tracker.carried_reflog(Proc::of(pid), &gitdir, name);
            }
        }
        for (dir, child, present) in [(parent, old, false), (newparent, new, true)] {
            if OP_STATE.iter().any(|n| OsStr::new(n) == &*child.lower) {
                if let Some((gitdir, _)) = self.in_git_dir(dir, &child.lower) {
                    self.set_own_op(&gitdir, &child.lower.to_string_lossy(), present);
                }
            }
        }
    }

    /// After a judged rename went through: the process's baseline advances; the lock is gone.
    pub(crate) fn guard_renamed(&self, mut after: AfterRename) {
        self.finish_heals(std::mem::take(&mut after.heals), true);
        self.judge.locks.released(&after.lock);
        let lock_name = Path::new(OsStr::from_bytes(after.lock.to_bytes())).file_name();
        if self.layer.index_split() && lock_name == Some(OsStr::new(self.layer.names().index_lock())) {
            self.index_written(after.proc_, &after.dir);
        }
        if matches!(after.target, Target::Ref(_)) {
            self.index_reads_follow_move(after.proc_);
        }
        match after.target {
            Target::Ref(name) => {
                let v = if name.starts_with("refs/") {
                    after.new_value.as_deref().map(trimmed).filter(|v| !v.starts_with("ref:"))
                } else {
                    after.new_value.as_deref().map(trimmed)
                };
                self.judge.tracker.box_moved(after.proc_, &after.dir, &name, &after.old_value, Some(v));
            }
            Target::File(name) => self.judge.tracker.read_file(after.proc_, &after.dir, &name, hash(&after.new_value)),
            Target::Other => {}
        }
    }

    /// The judged rename failed on the lower: drop the heals prepared for it.
    pub(crate) fn guard_rename_failed(&self, after: AfterRename) {
        self.finish_heals(after.heals, false);
    }

    /// What the box wrote has reached the lower's server before the rename that publishes it.
    ///
    /// A share that caches writes in the guest (9p `cache=loose`) sends the rename at once and
    /// the data later: the host then reads the new name as empty. A file closed since it was
    /// written was written back at its FLUSH (`Core::flush`); one still open (gitoxide persists
    /// its tempfiles while they are open) is written back here through its own fd. Nothing is
    /// opened on the lower: an open by path cost a FUSE share an open, a flush and a release.
    pub(crate) fn make_durable(&self, path: &CStr) {
        let Ok((dev, ino)) = self.lower.identity_at(path) else { return };
        let Some(node) = self.inodes.known_id(dev, ino) else { return };
        if let Some(fd) = self.handles.writer_of(node).as_deref().and_then(|h| h.opened()) {
            crate::lower::write_back(fd.as_raw_fd());
        }
    }
}

