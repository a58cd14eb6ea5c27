//! What each box process saw: the baseline its ref moves are judged against.
//!
//! Keyed by pid; a record whose process start time differs belongs to a reused pid and is
//! dropped. Inside, per git-dir-relative directory (the dir holding the files): refs as first
//! seen (then advanced by the process's own moves), whole files as last read, and the
//! operation state present when the process started.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use dashmap::DashMap;

use super::procs::Proc;

#[derive(Debug, Default)]
struct DirSeen {
    refs: HashMap<String, Option<String>>,
    files: HashMap<String, Option<u64>>,
    /// Refs whose reflog the process itself renamed into place (`branch -m/-c` carry it over).
    reflogs: HashSet<String>,
}

/// Where a process started: the git dir whose HEAD it first read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start {
    /// The git dir (a linked worktree's own, or the main one).
    pub gitdir: PathBuf,
    /// Its common dir (where branches live).
    pub common: PathBuf,
    /// HEAD's branch then (None: detached).
    pub branch: Option<String>,
}

#[derive(Debug)]
struct ProcSeen {
    start: u64,
    head: Option<Start>,
    dirs: HashMap<PathBuf, DirSeen>,
}

/// All box processes' baselines.
#[derive(Debug, Default)]
pub struct Tracker {
    procs: DashMap<u32, ProcSeen>,
    own_ops: DashMap<PathBuf, HashSet<String>>,
    /// Per box process: the sync point of `index-box` when it first read its index since its
    /// last write of it, per git dir (see `git_rules::heal_seal::index_written`).
    index_reads: DashMap<(u32, u64), HashMap<PathBuf, String>>,
    /// Per box process: the sync point the index it last wrote derives from (the read's, taken
    /// at the write): `git commit` writes its index before it moves the branch.
    index_writes: DashMap<(u32, u64), HashMap<PathBuf, String>>,
}

impl Tracker {
    fn with_proc<T>(&self, p: Proc, f: impl FnOnce(&mut ProcSeen) -> T) -> T {
        let mut e = self.procs.entry(p.pid).or_insert_with(|| ProcSeen { start: p.start, head: None, dirs: HashMap::new() });
        if e.start != p.start {
            *e = ProcSeen { start: p.start, head: None, dirs: HashMap::new() };
        }
        f(&mut e)
    }

    fn with<T>(&self, p: Proc, dir: &Path, f: impl FnOnce(&mut DirSeen) -> T) -> T {
        self.with_proc(p, |e| f(e.dirs.entry(dir.to_path_buf()).or_default()))
    }

    fn peek<T>(&self, p: Proc, dir: &Path, f: impl FnOnce(&DirSeen) -> T) -> Option<T> {
        let e = self.procs.get(&p.pid)?;
        if e.start != p.start {
            return None;
        }
        e.dirs.get(dir).map(f)
    }

    /// True once the process's start was recorded.
    pub fn started(&self, p: Proc) -> bool {
        self.start_of(p).is_some()
    }

    /// Records where the process started (only the first time).
    pub fn start(&self, p: Proc, start: Start) {
        self.with_proc(p, |e| {
            if e.head.is_none() {
                e.head = Some(start);
            }
        });
    }

    /// Where the process started.
    pub fn start_of(&self, p: Proc) -> Option<Start> {
        let e = self.procs.get(&p.pid)?;
        if e.start != p.start {
            return None;
        }
        e.head.clone()
    }

    /// Notes a ref's value the first time the process touches it (`dir` holds the ref file).
    pub fn note_ref(&self, p: Proc, dir: &Path, name: &str, value: Option<String>) {
        self.with(p, dir, |d| {
            d.refs.entry(name.to_string()).or_insert(value);
        });
    }

    /// True when the process has a value for the ref.
    pub fn has_ref(&self, p: Proc, dir: &Path, name: &str) -> bool {
        self.peek(p, dir, |d| d.refs.contains_key(name)).unwrap_or(false)
    }

    /// What the process saw of a ref (None: never touched it).
    pub fn seen_ref(&self, p: Proc, dir: &Path, name: &str) -> Option<Option<String>> {
        self.peek(p, dir, |d| d.refs.get(name).cloned()).flatten()
    }

    /// After the process's own move: its baseline advances.
    pub fn moved_ref(&self, p: Proc, dir: &Path, name: &str, value: Option<String>) {
        self.with(p, dir, |d| {
            d.refs.insert(name.to_string(), value);
        });
    }

    /// A box process changed a ref from `old` to `new` (`None`: to content not known yet, as
    /// when a file is written in place). The mover's baseline follows; so does every other box
    /// process's that saw exactly `old`: a box move is never "the other side". A process that
    /// saw something else keeps its baseline, so a host move in between still stops it.
    pub fn box_moved(&self, by: Proc, dir: &Path, name: &str, old: &Option<String>, new: Option<Option<String>>) {
        self.with(by, dir, |_| ());
        for mut e in self.procs.iter_mut() {
            let mover = *e.key() == by.pid && e.start == by.start;
            let Some(d) = e.dirs.get_mut(dir) else { continue };
            let follows = mover || d.refs.get(name) == Some(old);
            if follows {
                match &new {
                    Some(v) => {
                        d.refs.insert(name.to_string(), v.clone());
                    }
                    None => {
                        d.refs.remove(name);
                    }
                }
            }
        }
    }

    /// Notes a whole file's content (hash) as last read by the process.
    pub fn read_file(&self, p: Proc, dir: &Path, name: &str, content: Option<u64>) {
        self.with(p, dir, |d| {
            d.files.insert(name.to_string(), content);
        });
    }

    /// What the process last read of a whole file (None: never).
    pub fn last_read(&self, p: Proc, dir: &Path, name: &str) -> Option<Option<u64>> {
        self.peek(p, dir, |d| d.files.get(name).cloned()).flatten()
    }

    /// The process renamed a reflog into place for ref `name` (git moves a branch's reflog to
    /// the new name before it creates the new ref).
    pub fn carried_reflog(&self, p: Proc, dir: &Path, name: &str) {
        self.with(p, dir, |d| {
            d.reflogs.insert(name.to_string());
        });
    }

    /// True when the process itself put the reflog of `name` where it is.
    pub fn carries_reflog(&self, p: Proc, dir: &Path, name: &str) -> bool {
        self.peek(p, dir, |d| d.reflogs.contains(name)).unwrap_or(false)
    }

    /// Records operation state a box process created.
    pub fn own_op(&self, gitdir: &Path, name: &str, present: bool) {
        let mut e = self.own_ops.entry(gitdir.to_path_buf()).or_default();
        if present {
            e.insert(name.to_string());
        } else {
            e.remove(name);
        }
    }

    /// Whether `gitdir`'s own operation state is known in memory (set or loaded since start).
    pub fn knows_own_ops(&self, gitdir: &Path) -> bool {
        self.own_ops.contains_key(gitdir)
    }

    /// Marks `gitdir`'s own operation state known (loaded, even if empty).
    pub fn know_own_ops(&self, gitdir: &Path) {
        self.own_ops.entry(gitdir.to_path_buf()).or_default();
    }

    /// Operation state the box created in `gitdir`.
    pub fn own_ops(&self, gitdir: &Path) -> Vec<String> {
        self.own_ops.get(gitdir).map(|s| s.iter().cloned().collect()).unwrap_or_default()
    }

    /// True when the process has read its index in `gitdir` since it last wrote it.
    pub fn has_index_read(&self, p: Proc, gitdir: &Path) -> bool {
        self.index_reads.get(&(p.pid, p.start)).is_some_and(|m| m.contains_key(gitdir))
    }

    /// The sync point the process's view of its index derives from: its read since its last
    /// write, else the one its last write derived from (None: neither).
    pub fn index_base_of(&self, p: Proc, gitdir: &Path) -> Option<String> {
        let of = |m: &DashMap<(u32, u64), HashMap<PathBuf, String>>| m.get(&(p.pid, p.start)).and_then(|m| m.get(gitdir).cloned());
        of(&self.index_reads).or_else(|| of(&self.index_writes))
    }

    /// Records the sync point at the process's first read of its index (kept until it writes).
    pub fn note_index_read(&self, p: Proc, gitdir: &Path, base: String) {
        self.index_reads.entry((p.pid, p.start)).or_default().entry(gitdir.to_path_buf()).or_insert(base);
    }

    /// Records the sync point at the process's open of its index: what it reads now, whatever
    /// its first read noted.
    pub fn note_index_open(&self, p: Proc, gitdir: &Path, base: String) {
        self.index_reads.entry((p.pid, p.start)).or_default().insert(gitdir.to_path_buf(), base);
    }

    /// The sync point the process read its index at, forgotten (it just wrote its index, which
    /// now derives from it).
    pub fn take_index_read(&self, p: Proc, gitdir: &Path) -> Option<String> {
        let read = self.index_reads.get_mut(&(p.pid, p.start))?.remove(gitdir)?;
        self.index_writes.entry((p.pid, p.start)).or_default().insert(gitdir.to_path_buf(), read.clone());
        Some(read)
    }

    /// The git dirs whose index the process has read since it last wrote it, or wrote.
    pub fn index_reads_of(&self, p: Proc) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = Vec::new();
        for m in [&self.index_reads, &self.index_writes] {
            if let Some(m) = m.get(&(p.pid, p.start)) {
                dirs.extend(m.keys().filter(|k| !dirs.contains(k)).cloned().collect::<Vec<_>>());
            }
        }
        dirs
    }

    /// Moves the process's recorded sync points (its own move of the branch advanced them).
    pub fn set_index_read(&self, p: Proc, gitdir: &Path, base: String) {
        for m in [&self.index_reads, &self.index_writes] {
            if let Some(mut m) = m.get_mut(&(p.pid, p.start)) {
                if let Some(v) = m.get_mut(gitdir) {
                    *v = base.clone();
                }
            }
        }
    }

    /// Drops the records of processes that are gone.
    pub fn prune(&self) {
        self.procs.retain(|pid, seen| Proc { pid: *pid, start: seen.start }.alive());
        self.index_reads.retain(|(pid, start), _| Proc { pid: *pid, start: *start }.alive());
        self.index_writes.retain(|(pid, start), _| Proc { pid: *pid, start: *start }.alive());
    }

    /// Number of processes tracked.
    pub fn len(&self) -> usize {
        self.procs.len()
    }

    /// True when no process is tracked.
    pub fn is_empty(&self) -> bool {
        self.procs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_seen_then_own_moves_and_pid_reuse() {
        let t = Tracker::default();
        let p = Proc { pid: 42, start: 1 };
        let d = Path::new(".git");
        t.note_ref(p, d, "refs/heads/main", Some("a".into()));
        t.note_ref(p, d, "refs/heads/main", Some("b".into()));
        assert_eq!(t.seen_ref(p, d, "refs/heads/main"), Some(Some("a".into())), "first seen wins");
        t.moved_ref(p, d, "refs/heads/main", Some("c".into()));
        assert_eq!(t.seen_ref(p, d, "refs/heads/main"), Some(Some("c".into())), "own move advances");
        let reused = Proc { pid: 42, start: 2 };
        assert_eq!(t.seen_ref(reused, d, "refs/heads/main"), None, "a reused pid starts clean");
        let q = Proc { pid: 43, start: 1 };
        let r = Proc { pid: 44, start: 1 };
        t.note_ref(q, d, "refs/heads/main", Some("c".into()));
        t.note_ref(r, d, "refs/heads/main", Some("host-moved".into()));
        t.box_moved(p, d, "refs/heads/main", &Some("c".into()), Some(Some("e".into())));
        assert_eq!(t.seen_ref(q, d, "refs/heads/main"), Some(Some("e".into())), "a box move carries along who saw its old value");
        assert_eq!(t.seen_ref(r, d, "refs/heads/main"), Some(Some("host-moved".into())), "not who saw another value");
        t.box_moved(p, d, "HEAD", &None, None);
        assert_eq!(t.seen_ref(p, d, "HEAD"), None, "a ref written in place is not judged for its writer");
        let s = Start { gitdir: d.into(), common: d.into(), branch: Some("refs/heads/main".into()) };
        t.start(p, s.clone());
        t.start(p, Start { branch: None, ..s.clone() });
        assert_eq!(t.start_of(p), Some(s), "the first start stays");
        t.carried_reflog(p, d, "refs/heads/new");
        assert!(t.carries_reflog(p, d, "refs/heads/new"));
        assert!(!t.carries_reflog(q, d, "refs/heads/new"), "only for the process that moved it");
    }
}
