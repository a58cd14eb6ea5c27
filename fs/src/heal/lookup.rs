//! The decoded index as the rule looks it up: by path, binary search (entries are sorted).

use gix::bstr::{BStr, BString, ByteSlice, ByteVec};
use gix::index::entry::{Flags, Stage};
use gix::index::{Entry, State};
use gix::ObjectId;

use super::plan::{ancestors, IndexLookup};
use super::trees::Leaf;

/// An entry's leaf. An intent-to-add entry reads as the null id, which equals no tree's leaf:
/// it is always staging, never "already healed".
pub(crate) fn leaf_of(e: &Entry) -> Leaf {
    let id = if e.flags.contains(Flags::INTENT_TO_ADD) { ObjectId::null(e.id.kind()) } else { e.id };
    Leaf { mode: e.mode, id }
}

/// A decoded index, looked up.
pub(crate) struct StateLookup<'a>(pub &'a State);

impl IndexLookup for StateLookup<'_> {
    fn leaf(&self, path: &BStr) -> Option<Leaf> {
        self.0.entry_by_path_and_stage(path, Stage::Unconflicted).map(leaf_of)
    }

    fn unmerged(&self) -> Vec<BString> {
        let mut out: Vec<BString> =
            self.0.entries().iter().filter(|e| e.stage() != Stage::Unconflicted).map(|e| e.path(self.0).to_owned()).collect();
        out.dedup();
        out
    }

    fn related(&self, path: &BStr) -> Vec<BString> {
        let mut out: Vec<BString> = ancestors(path)
            .filter(|a| self.0.entry_by_path_and_stage(a, Stage::Unconflicted).is_some())
            .map(|a| a.to_owned())
            .collect();
        let mut below = path.to_owned();
        below.push_byte(b'/');
        if let Some(entries) = self.0.prefixed_entries(below.as_bstr()) {
            out.extend(entries.iter().map(|e| e.path(self.0).to_owned()));
        }
        out
    }
}

/// Whether the entries are in git's order (path, then stage), each (path, stage) once: lookups
/// by binary search rely on it.
pub(crate) fn is_sorted(state: &State) -> bool {
    state.entries().windows(2).all(|w| {
        let (a, b) = (w[0].path(state), w[1].path(state));
        a < b || (a == b && w[0].stage_raw() < w[1].stage_raw())
    })
}
