//! Healing: an index that went stale when the other side moved HEAD follows the move.
//!
//! A box commit leaves the host's shared index describing the old HEAD (and a host commit leaves
//! the box's index-box so); a commit from it would revert the other side's work. [`heal`] takes
//! the index bytes, the commit they were in sync with and the commit the branch moved to, and
//! decides, without running git:
//! - entries equal to the old commit's tree there: pure staleness, replaced by the new tree;
//! - staging on paths the move did not touch (additions, modifications, deletions, mode
//!   changes): carried onto the new tree;
//! - staging on moved paths that equals the new tree there: already healed;
//! - staging on moved paths that differs: [`Refusal::Overlap`];
//! - unmerged entries: [`Refusal::Conflicted`] (never carried as a deletion);
//! - a staged path and a moved path that are a file and a directory of one name:
//!   [`Refusal::DirFileClash`].
//!
//! Modules: [`outcome`] (the answer's types), `trees` (commits and trees through gix, or from
//! `memtrees`: trees hashed from index entries, so few are read from the share; `rawindex`: a
//! hint's entries read as the file streams in, never decoded whole), `plan`
//! (the rule, pure), `lookup` (the decoded index, looked up by path), `staged` (is anything
//! staged off the move: ff or carry), `build` (apply and encode), [`proposal`] (the fallback's
//! file names).
//!
//! # Limitations
//! - Split indexes (`link` extension) and sparse indexes are not rewritten
//!   ([`HealError::Unsupported`]).
//! - A healed index is written as version 2 or 3 with no extensions, whatever it was before; git
//!   rebuilds the caches it wants on its next write.
//! - New entries of a sparse checkout get no skip-worktree bit (the patterns are not evaluated).

mod build;
mod lookup;
mod memtrees;
pub mod outcome;
mod plan;
pub mod proposal;
mod rawindex;
mod staged;
mod trees;

#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::collections::HashSet;
use std::path::Path;
use std::time::SystemTime;

use gix::bstr::{BStr, ByteSlice};
use gix::ObjectId;

pub use outcome::{HealError, HealKind, HealOutcome, Refusal};

use lookup::StateLookup;
use plan::Decision;
use trees::Objects;

/// What a hint gives: an index file's bytes, or the open file, read as it is hashed so that it
/// is never held whole (at 100,000 files an index is ~9 MiB).
#[derive(Debug)]
pub enum HintData {
    /// The bytes.
    Bytes(Vec<u8>),
    /// The open file, read front to back at most [`crate::gitdata::MAX_META`] bytes.
    File(std::fs::File),
}

/// Reads one hint index file when the heal needs it (None: absent or unreadable).
pub type Hint<'a> = &'a (dyn Fn() -> Option<HintData> + Sync);

/// How [`heal_with`] works; [`heal`] uses the defaults.
#[derive(Clone, Copy, Default)]
pub struct HealOptions<'a> {
    /// The mtime of the index file the bytes were read from, when known (default: unknown).
    /// Kept entries modified at or after it get size 0 so git checks their content once (git's
    /// racy-clean "smudge"); unknown means every kept entry keeps its stat data as is.
    pub index_mtime: Option<SystemTime>,
    /// Other index files likely to hold the old or the new commit's tree (the other side's
    /// index, the `index.lock` a commit is renamed from), read in order until both trees are
    /// known. They are trusted for nothing: their directories are hashed as trees, and a tree
    /// the heal needs whose id matches is not read from the object database (see `memtrees`).
    /// Unreadable ones are ignored.
    pub hints: &'a [Hint<'a>],
}

impl std::fmt::Debug for HealOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealOptions").field("index_mtime", &self.index_mtime).field("hints", &self.hints.len()).finish()
    }
}

/// Heals `index` (the bytes of an index file) from `old_commit`, the commit it was in sync with,
/// onto `new_commit`, the branch after the move. Objects are read from `objects_dir`.
///
/// `old_commit` may be empty: the branch was unborn (its tree is the empty tree).
/// Commit ids are hex, 40 (SHA-1) or 64 (SHA-256) digits.
pub fn heal(objects_dir: &Path, index: &[u8], old_commit: &str, new_commit: &str) -> Result<HealOutcome, HealError> {
    heal_with(objects_dir, index, old_commit, new_commit, HealOptions::default())
}

/// [`heal`] with options.
pub fn heal_with(
    objects_dir: &Path,
    index: &[u8],
    old_commit: &str,
    new_commit: &str,
    opts: HealOptions<'_>,
) -> Result<HealOutcome, HealError> {
    crate::lower_view::with_lower_view(|| forget_on_error(objects_dir, heal_here(objects_dir, Cow::Borrowed(index), old_commit, new_commit, opts)))
}

/// [`heal_with`] taking the index bytes: they are freed once decoded, so a large index is not
/// held twice while the heal runs.
pub fn heal_owned(
    objects_dir: &Path,
    index: Vec<u8>,
    old_commit: &str,
    new_commit: &str,
    opts: HealOptions<'_>,
) -> Result<HealOutcome, HealError> {
    crate::lower_view::with_lower_view(|| forget_on_error(objects_dir, heal_here(objects_dir, Cow::Owned(index), old_commit, new_commit, opts)))
}

/// A heal that could not read the object database drops the handle this thread keeps for it,
/// so the next heal opens the repository afresh rather than trusting a handle that failed.
fn forget_on_error(objects_dir: &Path, r: Result<HealOutcome, HealError>) -> Result<HealOutcome, HealError> {
    if matches!(r, Err(HealError::Objects { .. } | HealError::Object { .. })) {
        crate::object_db::forget(objects_dir);
    }
    r
}

/// [`heal_with`] on this thread.
///
/// The order keeps the peak low (issue #16: within 32 MiB at 100,000 files): the index is
/// decoded and its bytes freed (when owned) before anything else is held, and hints are hashed
/// into trees as they are read, never decoded or held whole.
fn heal_here(objects_dir: &Path, index: Cow<'_, [u8]>, old_commit: &str, new_commit: &str, opts: HealOptions<'_>) -> Result<HealOutcome, HealError> {
    let new_id = parse_id(new_commit)?;
    let kind = new_id.kind();
    let old_id = match old_commit {
        "" => None,
        s => Some(parse_id(s)?),
    };
    if old_id.is_some_and(|o| o.kind() != kind) {
        return Err(HealError::BadCommitId { id: old_commit.to_string() });
    }
    crate::index::validate::check(&index).map_err(|e| HealError::Index { cause: e.to_string() })?;
    let state = decode(&index, kind)?;
    let index_len = index.len();
    drop(index);
    trim_heap_after(index_len);
    let mut objects = Objects::open(objects_dir, kind)?;
    let old_tree = match old_id {
        Some(id) => objects.commit_tree(&id)?,
        None => objects.empty_tree(),
    };
    let new_tree = objects.commit_tree(&new_id)?;
    let index_root = objects.mem().add(&state);
    // Hints until both commits' trees are known.
    for hint in opts.hints {
        let m = objects.mem();
        if m.contains(&old_tree) && m.contains(&new_tree) {
            break;
        }
        if let Some(h) = hint() {
            m.add_hint(h, kind);
        }
    }
    let moved = objects.diff(&old_tree, &new_tree)?;
    let d = plan::decide(&StateLookup(&state), &moved);
    match d {
        Decision::Unchanged => Ok(HealOutcome::Unchanged),
        Decision::Refuse(r) => Ok(HealOutcome::Refused(r)),
        Decision::Apply(stale) => {
            let moved_paths: HashSet<&BStr> = moved.iter().map(|c| c.path.as_bstr()).collect();
            // An index that hashes to the old tree, with no intent-to-add entry (which reads as
            // staging but hashes as the empty blob), stages nothing.
            let exact = index_root == Some(old_tree)
                && !state.entries().iter().any(|e| e.flags.contains(gix::index::entry::Flags::INTENT_TO_ADD));
            let carried = !exact && staged::off_the_move(&objects, &old_tree, &state, &moved_paths)?;
            // The trees are done with: free them before the healed copy is encoded.
            drop(moved_paths);
            drop(objects);
            trim_heap_after(index_len);
            let mut state = state;
            if let Err(r) = build::apply(&mut state, &stale, opts.index_mtime) {
                return Ok(HealOutcome::Refused(r));
            }
            let bytes = build::encode(&state)?;
            Ok(HealOutcome::Healed { bytes, kind: if carried { HealKind::Carry } else { HealKind::Ff } })
        }
    }
}

/// True when two index files hold the same entries (path, stage, mode, object id, and the
/// flags git keeps in the file), whatever their stat data: a poller's `git status` rewrites only
/// stat data, which changes the bytes but not what would be committed.
pub fn same_entries(a: &[u8], b: &[u8], kind: gix::hash::Kind) -> bool {
    let (Ok(a), Ok(b)) = (decode(a, kind), decode(b, kind)) else { return false };
    let key = |s: &gix::index::State| -> Vec<(Vec<u8>, u32, u32, ObjectId, u32)> {
        s.entries()
            .iter()
            .map(|e| {
                let path = e.path(s).to_vec();
                let stage = e.stage_raw();
                use gix::index::entry::Flags as F;
                let flags = (e.flags & (F::INTENT_TO_ADD | F::SKIP_WORKTREE | F::ASSUME_VALID)).bits();
                (path, stage, e.mode.bits(), e.id, flags)
            })
            .collect()
    };
    key(&a) == key(&b)
}

/// A digest of an index file's entries (path, mode, object id, in file order), whatever their
/// stat data, read front to back without decoding the index; None when it is not an index of
/// `kind`. Two indexes with equal digests would commit the same tree (stages and flags aside).
pub fn entries_digest(bytes: &[u8], kind: gix::hash::Kind) -> Option<ObjectId> {
    let mut h = gix::hash::hasher(kind);
    rawindex::for_each_entry(bytes, kind, |path, mode, id| {
        h.update(path);
        h.update(&[0]);
        h.update(&mode.bits().to_be_bytes());
        h.update(id.as_bytes());
    })?;
    h.try_finalize().ok()
}

/// The git blob id of `bytes` (what `git hash-object` prints for a file with these bytes), hex.
/// Proposals name their base index by it.
pub fn blob_id(bytes: &[u8], kind: gix::hash::Kind) -> String {
    let mut h = gix::hash::hasher(kind);
    h.update(format!("blob {}\0", bytes.len()).as_bytes());
    h.update(bytes);
    h.try_finalize().expect("hashing in memory cannot fail (collision detection aside)").to_hex().to_string()
}

/// Whether the index file `index` holds exactly the tree of commit `commit` (hex) in
/// `objects_dir`: its entries hash to that tree (read as the file streams in, never decoded).
pub fn index_is_tree_of(objects_dir: &Path, index: std::fs::File, commit: &str) -> bool {
    let Ok(id) = parse_id(commit) else { return false };
    crate::lower_view::with_lower_view(|| {
        let Ok(objects) = Objects::open(objects_dir, id.kind()) else { return false };
        let Ok(tree) = objects.commit_tree(&id) else { return false };
        let mut m = memtrees::MemTrees::default();
        m.add_hint(HintData::File(index), id.kind()) == Some(tree)
    })
}

/// The parents of commit `commit` (hex) in `objects_dir`; None when it cannot be read as one.
pub fn commit_parents(objects_dir: &Path, commit: &str) -> Option<Vec<String>> {
    use gix::objs::FindExt;
    let id = parse_id(commit).ok()?;
    crate::lower_view::with_lower_view(|| {
        let odb = crate::object_db::open(objects_dir, id.kind()).ok()?;
        let mut buf = Vec::new();
        let c = odb.find_commit(&id, &mut buf).ok()?;
        Some(c.parents().map(|p| p.to_string()).collect())
    })
}

/// Index size from which a heal returns freed memory between its stages ([`trim_heap`]). Below
/// it the stages are small, and a trim costs more than it gives back: `malloc_trim` walks every
/// arena and gives each free page range back by `madvise` (about 16 calls per git command when it
/// ran after every ref move), and the pages fault back in at the next allocation.
pub const TRIM_FROM_INDEX_BYTES: usize = 1 << 20;

/// [`trim_heap`] when a heal handled an index of `index_len` bytes at least
/// [`TRIM_FROM_INDEX_BYTES`] (the 100,000-file heal within 32 MiB, issue #16).
pub fn trim_heap_after(index_len: usize) {
    if index_len >= TRIM_FROM_INDEX_BYTES {
        trim_heap();
    }
}

/// Returns freed memory to the system between the heal's stages: glibc keeps freed chunks of
/// the heap, and the next stage's large allocations would otherwise add to the peak, not reuse it.
pub fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn parse_id(hex: &str) -> Result<ObjectId, HealError> {
    let ok = (hex.len() == 40 || hex.len() == 64) && hex.bytes().all(|b| b.is_ascii_hexdigit());
    let id = ok.then(|| ObjectId::from_hex(hex.as_bytes()).ok()).flatten();
    id.ok_or_else(|| HealError::BadCommitId { id: hex.to_string() })
}

fn decode(index: &[u8], kind: gix::hash::Kind) -> Result<gix::index::State, HealError> {
    let opts = gix::index::decode::Options { thread_limit: Some(1), ..Default::default() };
    let (state, _) = gix::index::State::from_bytes(index, filetime::FileTime::now(), kind, opts)
        .map_err(|e| HealError::Index { cause: e.to_string() })?;
    if state.link().is_some() {
        return Err(HealError::Unsupported { what: "split index" });
    }
    if state.is_sparse() {
        return Err(HealError::Unsupported { what: "sparse index" });
    }
    if !lookup::is_sorted(&state) {
        return Err(HealError::Index { cause: "entries out of order (git writes them sorted)".into() });
    }
    Ok(state)
}
