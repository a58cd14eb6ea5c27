//! The path-policy table: which class a name belongs to, and how each class is cached.
//!
//! This is the one place that decides what seamfs does differently for git metadata. A node's
//! class is derived from its parent's class and its own name only (no allocation, no syscall),
//! so classification costs nothing on the hot path.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

/// What a name on the mount is, as far as git is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    /// Anything outside a git dir.
    WorkTree,
    /// A git dir itself (`.git`, `.git/worktrees/<n>`, `.git/modules/<n>`).
    GitDir,
    /// `<gitdir>/objects` and everything below it that is content-addressed.
    Objects,
    /// Refs, HEAD, config, logs, operation state: must always read fresh.
    LiveRef,
    /// An operation-state directory and what is below it (`rebase-merge/`, `rebase-apply/`,
    /// `sequencer/`): its very existence is state, so it is never cached.
    LiveRefDir,
    /// A directory of the ref store (`refs/`, `logs/`, `reftable/` and below): its descendant
    /// files are live refs, but the directory itself is cached for [`REF_DIR_TTL`] (positive
    /// only), so git's walks of `refs/` do not cost the share a lookup per path component.
    RefDir,
    /// `<gitdir>/index`: the shared index (redirected to `index-box` by the index issue).
    Index,
    /// `*.lock` inside a git dir.
    Lock,
    /// `<gitdir>/worktrees`: its children are linked-worktree git dirs.
    WorktreesDir,
    /// `<gitdir>/modules` (and nested levels): children are submodule git dirs or more levels.
    ModulesDir,
    /// Other git-dir content (hooks, info, description): rarely changes, cached like the work tree.
    GitOther,
}

/// How the kernel may cache a class, and what seamfs does on lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CachePolicy {
    /// How long the kernel may keep a name → inode mapping.
    pub entry_ttl: Duration,
    /// How long the kernel may keep attributes.
    pub attr_ttl: Duration,
    /// How long the kernel may remember that a name does not exist (zero: not at all).
    pub negative_ttl: Duration,
    /// Force the lower to look the name up again before answering (see `refresh`).
    pub refresh: bool,
    /// Bypass the page cache (reads and writes go to seamfs every time).
    pub direct_io: bool,
    /// File data may go through FUSE passthrough.
    pub passthrough: bool,
}

/// How long the kernel may keep a ref-store directory's entry. Git walks `.git/refs` a hundred
/// times in one command; a branch directory replaced by a file of the same name (`foo/` → `foo`)
/// may read as the directory for this long, never a ref's value.
pub const REF_DIR_TTL: Duration = Duration::from_millis(100);

/// How long the kernel may keep the attributes of the index, a lock or a ref-store directory.
/// Their entry TTL stays zero, so every path walk still asks seamfs and replaces them; this
/// only spares the GETATTR the kernel sends right after that LOOKUP (ADR 0020). (Live refs keep
/// theirs for the share's TTL: ADR 0036, 0038.)
pub const LIVE_ATTR_TTL: Duration = Duration::from_millis(50);

/// Files from this size on get FUSE passthrough; smaller ones are read through seamfs and the
/// kernel's page cache. Over a share, the kernel opens its own backing file for every
/// passthrough open, which costs the share an open, a flush and a release: more than the one
/// or two reads a small file takes through seamfs.
pub const PASSTHROUGH_MIN: u64 = 1 << 20;

/// The TTLs the table is built from.
#[derive(Clone, Copy, Debug)]
pub struct Ttls {
    /// Work tree and other cached classes; no longer than the share's own cache. Default 1 s.
    pub work_tree: Duration,
    /// Content-addressed objects. Default 60 s.
    pub objects: Duration,
}

impl Default for Ttls {
    fn default() -> Self {
        Ttls { work_tree: Duration::from_secs(1), objects: Duration::from_secs(60) }
    }
}

impl Class {
    /// True for classes that must never be served from a cache.
    pub fn is_live(self) -> bool {
        matches!(self, Class::LiveRef | Class::LiveRefDir | Class::RefDir | Class::Index | Class::Lock)
    }

    /// True when the name lies inside a git dir.
    pub fn in_git_dir(self) -> bool {
        !matches!(self, Class::WorkTree)
    }
}

/// The policy table: one row per class.
pub fn cache_policy(class: Class, ttls: &Ttls) -> CachePolicy {
    let zero = Duration::ZERO;
    let live = CachePolicy {
        entry_ttl: zero,
        attr_ttl: LIVE_ATTR_TTL,
        negative_ttl: zero,
        refresh: true,
        direct_io: true,
        passthrough: false,
    };
    match class {
        Class::WorkTree | Class::GitOther | Class::GitDir | Class::WorktreesDir | Class::ModulesDir => {
            CachePolicy {
                entry_ttl: ttls.work_tree,
                attr_ttl: ttls.work_tree,
                negative_ttl: ttls.work_tree,
                refresh: false,
                direct_io: false,
                passthrough: true,
            }
        }
        // Objects never change once renamed into place; a missing one may appear any moment.
        Class::Objects => CachePolicy {
            entry_ttl: ttls.objects,
            attr_ttl: ttls.objects,
            negative_ttl: zero,
            refresh: false,
            direct_io: false,
            passthrough: true,
        },
        // The box's index and git's lock files are only ever replaced by rename (a new inode),
        // never changed in place by the host: names and attributes must be fresh, but their
        // data may go through the page cache and passthrough (git reads a large index whole).
        Class::Index | Class::Lock => CachePolicy { direct_io: false, passthrough: true, ..live },
        // A live ref's attributes are kept too (the GETATTR after its LOOKUP spared): its node
        // serves its name, so `Core::open` drops them when it opens another file (ADR 0036).
        // Their entries and attributes are kept for the share's own TTL: OPEN checks the name
        // on the share, GETATTR too once the attributes expire, and a box lock drops the
        // kernel's attributes of every one (ADR 0038).
        Class::LiveRef => CachePolicy { entry_ttl: ttls.work_tree, attr_ttl: ttls.work_tree, ..live },
        Class::LiveRefDir => CachePolicy { attr_ttl: zero, ..live },
        Class::RefDir => CachePolicy { entry_ttl: REF_DIR_TTL, ..live },
    }
}

/// Names directly in a git dir whose whole subtree is live.
const LIVE_DIRS: &[&str] = &["rebase-merge", "rebase-apply", "sequencer"];

/// Ref-store directories directly in a git dir.
const REF_DIRS: &[&str] = &["refs", "logs", "reftable"];

/// Subdirectories of `refs/` that git makes as directories (a ref file of one of these names
/// cannot coexist with git's own refs under it).
const REF_NAMESPACES: &[&str] = &["heads", "tags", "remotes", "notes", "replace", "bisect", "worktree", "rewritten", "prefetch"];

/// True for a ref-store directory git never removes once made (`names`: its path components
/// below its git dir): `refs`, `logs`, `reftable`, `refs/heads` and the other namespaces,
/// `logs/refs` and `logs/refs/<namespace>`. Git's files backend prunes empty ref directories but
/// spares `[logs/]refs/` and its immediate subdirectories, so a lock taken since it was looked
/// up cannot have replaced one (ADR 0052). Deeper directories (`refs/heads/feature/`) can go.
pub fn ref_dir_never_removed(names: &[&[u8]]) -> bool {
    let namespace = |n: &[u8]| REF_NAMESPACES.iter().any(|d| d.as_bytes() == n);
    match names {
        [d] => REF_DIRS.iter().any(|r| r.as_bytes() == *d),
        [b"refs", n] => namespace(n),
        [b"logs", b"refs"] => true,
        [b"logs", b"refs", n] => namespace(n),
        _ => false,
    }
}

/// Names directly in a git dir that are live files. (`commondir` and `gitdir` are not: written
/// once when a linked worktree is made, never replaced in place; git stats `commondir` a few
/// times per command in every git dir, where it is absent.)
const LIVE_FILES: &[&str] = &[
    "HEAD",
    "packed-refs",
    "config",
    "config.worktree",
    "shallow",
    "BISECT_LOG",
    "BISECT_START",
    "BISECT_TERMS",
    "MERGE_MSG",
    "MERGE_MODE",
    "MERGE_RR",
    "AUTO_MERGE",
    "REBASE_HEAD",
    "SQUASH_MSG",
];

/// Files below `objects/` that are replaced in place by rename and so must read fresh.
const LIVE_OBJECT_FILES: &[&str] = &["commit-graph", "multi-pack-index", "packs", "alternates"];

/// Live files git sizes its read of by `fstat` (or maps whole): their size must be the one of
/// the file the OPEN reads, so it is never taken from a moment ago (ADR 0039).
const SIZED_BY_FSTAT: &[&str] = &["packed-refs", "config", "config.worktree", "commit-graph", "multi-pack-index"];

/// True for a live file git reads to its end whatever its size said: a ref, a reflog, `HEAD`
/// or `*_HEAD` (`path` relative to the lower). A size a moment old is harmless for these.
pub fn read_to_end(path: &std::ffi::CStr) -> bool {
    let b = path.to_bytes();
    let mut parts = b.split(|c| *c == b'/');
    let name = b.rsplit(|c| *c == b'/').next().unwrap_or(b);
    if SIZED_BY_FSTAT.iter().any(|f| f.as_bytes() == name) {
        return false;
    }
    name.ends_with(b"HEAD") || parts.any(|p| p == b"refs" || p == b"logs")
}

/// True for a live file whose read-only opens may go through the kernel's page cache while its
/// node is the file at its name (ADR 0040): what git reads to its end, and `config` and
/// `config.worktree` (git sizes its read of them by `fstat` only after taking their lock,
/// when the open checks the name on the share). Not `packed-refs`: git checks its snapshot by
/// the `stat` of the name, which must never show an older file.
pub fn read_through_page_cache(path: &std::ffi::CStr) -> bool {
    size_a_moment_old_is_harmless(path)
}

/// True for a live file whose size may come from a moment ago outside a box lock: what git reads
/// to its end, and `config` and `config.worktree`, which git sizes by `fstat` only under their
/// lock (a barrier: every look after it reaches the server). ADR 0039, 0040, 0046.
pub fn size_a_moment_old_is_harmless(path: &std::ffi::CStr) -> bool {
    let b = path.to_bytes();
    let name = b.rsplit(|c| *c == b'/').next().unwrap_or(b);
    read_to_end(path) || name == b"config" || name == b"config.worktree"
}

/// False for a live file git checks by its `stat` against what it read, and pairs with names it
/// lists afresh (`packed-refs` with the loose refs, the commit-graph and multi-pack-index with
/// the packs): bytes from a moment ago never stand for a process's later read of it (ADR 0046
/// amended; `races::packed_refs_repacked_by_the_host_read_whole_and_fresh`).
pub fn bytes_stand_for_a_process(path: &std::ffi::CStr) -> bool {
    let b = path.to_bytes();
    let name = b.rsplit(|c| *c == b'/').next().unwrap_or(b);
    size_a_moment_old_is_harmless(path) || !SIZED_BY_FSTAT.iter().any(|f| f.as_bytes() == name)
}

/// Class of `name` inside a directory of class `parent`.
///
/// `.git` directories are recognised by name; linked-worktree and submodule git dirs by their
/// place under `worktrees/` and `modules/`. A `.git` *file* (a gitdir pointer) is live, since a
/// stale one would send git to the wrong repository.
pub fn classify(parent: Class, name: &OsStr, is_dir: bool) -> Class {
    let n = name.as_bytes();
    match parent {
        Class::WorkTree => {
            if n == b".git" {
                if is_dir {
                    Class::GitDir
                } else {
                    Class::LiveRef
                }
            } else {
                Class::WorkTree
            }
        }
        Class::GitDir => classify_in_git_dir(n, is_dir),
        Class::WorktreesDir => {
            if is_dir {
                Class::GitDir
            } else {
                Class::GitOther
            }
        }
        Class::ModulesDir => {
            // A submodule's git dir; nested submodule names (a/b) are refined when HEAD is seen.
            if is_dir {
                Class::GitDir
            } else {
                Class::GitOther
            }
        }
        Class::Objects => {
            if n.ends_with(b".lock") {
                Class::Lock
            } else if LIVE_OBJECT_FILES.iter().any(|f| f.as_bytes() == n) || n == b"commit-graphs" {
                Class::LiveRef
            } else {
                Class::Objects
            }
        }
        Class::LiveRef | Class::LiveRefDir | Class::RefDir => {
            if n.ends_with(b".lock") {
                Class::Lock
            } else if is_dir && parent == Class::RefDir {
                Class::RefDir
            } else if is_dir {
                Class::LiveRefDir
            } else {
                Class::LiveRef
            }
        }
        Class::Index | Class::Lock => Class::Lock,
        Class::GitOther => {
            if n.ends_with(b".lock") {
                Class::Lock
            } else {
                Class::GitOther
            }
        }
    }
}

fn classify_in_git_dir(n: &[u8], is_dir: bool) -> Class {
    if n.ends_with(b".lock") {
        return Class::Lock;
    }
    match n {
        b"objects" => Class::Objects,
        b"index" => Class::Index,
        b"worktrees" => Class::WorktreesDir,
        b"modules" => Class::ModulesDir,
        _ if REF_DIRS.iter().any(|d| d.as_bytes() == n) => Class::RefDir,
        _ if LIVE_DIRS.iter().any(|d| d.as_bytes() == n) => Class::LiveRefDir,
        _ if LIVE_FILES.iter().any(|f| f.as_bytes() == n) => Class::LiveRef,
        // FETCH_HEAD, ORIG_HEAD, CHERRY_PICK_HEAD, MERGE_HEAD, REVERT_HEAD, ...
        _ if n.ends_with(b"_HEAD") => Class::LiveRef,
        _ if is_dir => Class::GitOther,
        _ => Class::GitOther,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(parent: Class, name: &str, dir: bool) -> Class {
        classify(parent, OsStr::new(name), dir)
    }

    #[test]
    fn only_the_ref_directories_git_spares_are_never_removed() {
        let never = |p: &str| ref_dir_never_removed(&p.split('/').map(str::as_bytes).collect::<Vec<_>>());
        for p in ["refs", "logs", "reftable", "refs/heads", "refs/tags", "refs/remotes", "logs/refs", "logs/refs/heads"] {
            assert!(never(p), "{p}");
        }
        // A branch directory git prunes when empty; refs/stash is a ref file; HEAD is no directory.
        for p in ["refs/heads/feature", "refs/remotes/origin", "refs/stash", "logs/refs/heads/feature", "logs/HEAD", "HEAD", "objects", "refs/heads/main"] {
            assert!(!never(p), "{p}");
        }
    }

    #[test]
    fn refs_and_config_go_through_the_page_cache_not_packed_refs() {
        for p in [c"r/.git/HEAD", c".git/refs/heads/main", c".git/config", c".git/worktrees/w/config.worktree"] {
            assert!(read_through_page_cache(p), "{p:?}");
        }
        for p in [c"r/.git/packed-refs", c".git/objects/info/commit-graph", c".git/objects/pack/multi-pack-index", c".git/shallow"] {
            assert!(!read_through_page_cache(p), "{p:?}");
        }
    }

    #[test]
    fn packed_refs_bytes_never_stand_for_a_process() {
        for p in [c"r/.git/HEAD", c".git/refs/heads/main", c".git/config", c".git/index-box.x.seam-base", c".git/index"] {
            assert!(bytes_stand_for_a_process(p), "{p:?}");
        }
        for p in [c"r/.git/packed-refs", c".git/objects/info/commit-graph", c".git/objects/pack/multi-pack-index"] {
            assert!(!bytes_stand_for_a_process(p), "{p:?}");
        }
    }

    #[test]
    fn refs_logs_and_heads_are_read_to_their_end() {
        for p in [c"r/.git/HEAD", c"r/.git/ORIG_HEAD", c".git/refs/heads/main", c".git/logs/refs/heads/main", c".git/worktrees/w/HEAD"] {
            assert!(read_to_end(p), "{p:?}");
        }
        for p in [c"r/.git/packed-refs", c".git/config", c".git/worktrees/refs/config", c".git/objects/info/commit-graph", c".git/shallow"] {
            assert!(!read_to_end(p), "{p:?}");
        }
    }

    #[test]
    fn git_dir_names() {
        assert_eq!(c(Class::WorkTree, ".git", true), Class::GitDir);
        assert_eq!(c(Class::WorkTree, ".git", false), Class::LiveRef);
        assert_eq!(c(Class::WorkTree, "src", true), Class::WorkTree);
        assert_eq!(c(Class::GitDir, "HEAD", false), Class::LiveRef);
        assert_eq!(c(Class::GitDir, "ORIG_HEAD", false), Class::LiveRef);
        assert_eq!(c(Class::GitDir, "packed-refs", false), Class::LiveRef);
        assert_eq!(c(Class::GitDir, "config", false), Class::LiveRef);
        assert_eq!(c(Class::GitDir, "index", false), Class::Index);
        assert_eq!(c(Class::GitDir, "index.lock", false), Class::Lock);
        assert_eq!(c(Class::GitDir, "refs", true), Class::RefDir);
        assert_eq!(c(Class::RefDir, "heads", true), Class::RefDir);
        assert_eq!(c(Class::RefDir, "main", false), Class::LiveRef);
        assert_eq!(c(Class::RefDir, "main.lock", false), Class::Lock);
        assert_eq!(c(Class::GitDir, "rebase-merge", true), Class::LiveRefDir);
        assert_eq!(c(Class::LiveRefDir, "sub", true), Class::LiveRefDir);
        assert_eq!(c(Class::LiveRefDir, "head-name", false), Class::LiveRef);
        assert_eq!(c(Class::GitDir, "objects", true), Class::Objects);
        assert_eq!(c(Class::Objects, "ab", true), Class::Objects);
        assert_eq!(c(Class::Objects, "info", true), Class::Objects);
        assert_eq!(c(Class::Objects, "commit-graph", false), Class::LiveRef);
        assert_eq!(c(Class::GitDir, "hooks", true), Class::GitOther);
        assert_eq!(c(Class::GitDir, "worktrees", true), Class::WorktreesDir);
        assert_eq!(c(Class::WorktreesDir, "wt1", true), Class::GitDir);
        assert_eq!(c(Class::GitDir, "modules", true), Class::ModulesDir);
        assert_eq!(c(Class::ModulesDir, "sub", true), Class::GitDir);
    }

    #[test]
    fn missing_live_names_are_looked_up_every_time() {
        let t = Ttls::default();
        for class in [Class::LiveRef, Class::LiveRefDir, Class::RefDir, Class::Index, Class::Lock] {
            let p = cache_policy(class, &t);
            // A live ref's positive entry is kept: its GETATTR and OPEN check the name (ADR 0038).
            let entry = match class {
                Class::RefDir => REF_DIR_TTL,
                Class::LiveRef => t.work_tree,
                _ => Duration::ZERO,
            };
            assert_eq!(p.entry_ttl, entry, "{class:?}");
            // Only the GETATTR right after a LOOKUP is spared (ADR 0020): every walk still asks.
            // Live refs too: their open drops a copy that is another file's (ADR 0036).
            let attr = match class {
                Class::LiveRefDir => Duration::ZERO,
                Class::LiveRef => t.work_tree,
                _ => LIVE_ATTR_TTL,
            };
            assert_eq!(p.attr_ttl, attr, "{class:?}");
            assert_eq!(p.negative_ttl, Duration::ZERO);
            assert!(p.refresh);
        }
        for class in [Class::LiveRef, Class::LiveRefDir] {
            let p = cache_policy(class, &t);
            assert!(p.direct_io && !p.passthrough, "refs change in place (reflogs): no page cache");
        }
        assert_eq!(cache_policy(Class::Objects, &t).negative_ttl, Duration::ZERO);
        assert_eq!(cache_policy(Class::WorkTree, &t).entry_ttl, t.work_tree);
    }
}
