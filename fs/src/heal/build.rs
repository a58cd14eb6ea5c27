//! Applies a decided heal to the decoded index and encodes it.
//!
//! Entries the heal does not touch keep their stat data, so git does not re-hash the work tree;
//! replaced and new entries get zeroed stat data (size 0), which git reads as "check the file's
//! content", exactly as after `git read-tree`. No extension is written: the tree cache, the
//! untracked cache, fsmonitor and resolve-undo data all describe the old entries.

use std::time::SystemTime;

use gix::bstr::{BString, ByteSlice, ByteVec};
use gix::index::entry::{Flags, Stage, Stat};
use gix::index::State;

use super::outcome::{HealError, Refusal};
use super::trees::Change;

/// Rewrites `state` with the new tree's leaf at every stale path.
///
/// `racy_since`: the old index file's mtime, when known. A kept entry whose mtime is not older
/// than it may have changed unseen within the same timestamp tick; its size is set to 0 (git's
/// own "smudge"), so git compares its content once.
pub(crate) fn apply(state: &mut State, stale: &[Change], racy_since: Option<SystemTime>) -> Result<(), Refusal> {
    state.remove_tree();
    state.remove_resolve_undo();
    let mut added = Vec::new();
    let mut removed = false;
    for c in stale {
        match (state.entry_index_by_path_and_stage(c.path.as_bstr(), Stage::Unconflicted), c.new) {
            (Some(i), Some(new)) => {
                let e = &mut state.entries_mut()[i];
                e.id = new.id;
                e.mode = new.mode;
                e.stat = Stat::default();
                e.flags = replaced_flags(e.flags);
            }
            (Some(i), None) => {
                state.entries_mut()[i].flags.insert(Flags::REMOVE);
                removed = true;
            }
            (None, Some(new)) => added.push((c.path.as_bstr(), new)),
            (None, None) => {}
        }
    }
    if let Some((secs, nsecs)) = racy_since.map(stat_time) {
        for e in state.entries_mut() {
            if (e.stat.mtime.secs, e.stat.mtime.nsecs) >= (secs, nsecs) {
                e.stat.size = 0;
            }
        }
    }
    if removed {
        state.remove_entries(|_, _, e| e.flags.contains(Flags::REMOVE));
    }
    if !added.is_empty() {
        for (path, new) in added {
            state.dangerously_push_entry(Stat::default(), new.id, Flags::empty(), new.mode, path);
        }
        state.sort_entries();
    }
    no_dir_file_clash(state, stale)
}

/// Flags of an entry whose content the heal replaced: only skip-worktree survives (a sparse
/// checkout's choice); assume-valid would hide the new content from git.
fn replaced_flags(old: Flags) -> Flags {
    if old.contains(Flags::SKIP_WORKTREE) {
        Flags::SKIP_WORKTREE | Flags::EXTENDED
    } else {
        Flags::empty()
    }
}

fn stat_time(t: SystemTime) -> (u32, u32) {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    (u32::try_from(d.as_secs()).unwrap_or(u32::MAX), d.subsec_nanos())
}

/// A last check on the result: no new leaf sits below a file or above other entries.
fn no_dir_file_clash(state: &State, stale: &[Change]) -> Result<(), Refusal> {
    let mut bad: Vec<BString> = Vec::new();
    for c in stale.iter().filter(|c| c.new.is_some()) {
        let p = c.path.as_bstr();
        for (i, _) in p.iter().enumerate().filter(|(_, &b)| b == b'/') {
            if state.entry_by_path(p[..i].as_bstr()).is_some() {
                bad.push(p[..i].to_owned());
                bad.push(c.path.clone());
            }
        }
        let mut dir: BString = c.path.clone();
        dir.push_byte(b'/');
        if state.prefixed_entries(dir.as_bstr()).is_some_and(|e| !e.is_empty()) {
            bad.push(c.path.clone());
        }
    }
    if bad.is_empty() {
        Ok(())
    } else {
        bad.sort();
        bad.dedup();
        Err(Refusal::DirFileClash(bad))
    }
}

/// The index file: entries, no optional extension, trailing checksum (hashed in one go: gix's
/// hashing writer is slow with one small write per field).
/// An upper bound of `state`'s encoded size as version 2 or 3 without extensions: the header,
/// each entry's fixed part, path and padding (at most 8), the checksum.
fn encoded_len(state: &State) -> usize {
    let hash = state.object_hash().len_in_bytes();
    let fixed = 40 + hash + 4; // stat, id, flags and extended flags
    12 + state.entries().len() * (fixed + 8) + state.path_backing().len() + hash
}

pub(crate) fn encode(state: &State) -> Result<Vec<u8>, HealError> {
    // Sized up front: grown by doubling, a 9 MiB index would pass through 16 MiB and a copy.
    let mut out = Vec::with_capacity(encoded_len(state));
    let opts = gix::index::write::Options { extensions: gix::index::write::Extensions::None, skip_hash: true };
    state.write_to(&mut out, opts).map_err(|e| HealError::Encode { cause: e.to_string() })?;
    let mut h = gix::hash::hasher(state.object_hash());
    h.update(&out);
    let sum = h.try_finalize().map_err(|e| HealError::Encode { cause: e.to_string() })?;
    out.extend_from_slice(sum.as_bytes());
    Ok(out)
}
