//! The carry rule, as a pure function of the index (looked up by path) and the leaves the move
//! changed (old tree vs new tree).
//!
//! For each moved path the index is compared with both trees:
//! - index = old tree there: pure staleness, take the new tree's leaf;
//! - index = new tree there: the staging already agrees with the move (a host `git add -A` of
//!   the box's files before its commit), nothing to do;
//! - anything else: overlap, refused.
//!
//! Everything else in the index stays as it is (that is the carry). One exception refuses: an
//! index entry off the move that is a file where the move has a directory, or lies below a path
//! the move made a file (one path a prefix of the other). Such an entry is always staging: the
//! trees themselves never hold a file and a directory of one name.

use std::collections::{BTreeSet, HashSet};

use gix::bstr::{BStr, BString, ByteSlice};

use super::outcome::Refusal;
use super::trees::{Change, Leaf};

/// What the rule asks of the index.
pub(crate) trait IndexLookup {
    /// The stage-0 leaf at `path` (an intent-to-add entry reads as the null id).
    fn leaf(&self, path: &BStr) -> Option<Leaf>;
    /// Paths with unmerged (stage 1–3) entries, sorted.
    fn unmerged(&self) -> Vec<BString>;
    /// Paths of entries that are a proper ancestor of `path`, or lie below `path/`.
    fn related(&self, path: &BStr) -> Vec<BString>;
}

/// What to do with the index.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// It already reflects the move.
    Unchanged,
    /// Take the new tree's leaf at these paths (the index holds the old tree's there).
    Apply(Vec<Change>),
    /// Not healed.
    Refuse(Refusal),
}

/// Every proper ancestor directory of `path` (`a/b/c` → `a`, `a/b`).
pub(crate) fn ancestors(path: &BStr) -> impl Iterator<Item = &BStr> {
    path.iter().enumerate().filter(|(_, &b)| b == b'/').map(move |(i, _)| path[..i].as_bstr())
}

/// Decides the heal of `index` across `moved`.
pub(crate) fn decide(index: &dyn IndexLookup, moved: &[Change]) -> Decision {
    if moved.is_empty() {
        return Decision::Unchanged;
    }
    let unmerged = index.unmerged();
    if !unmerged.is_empty() {
        return Decision::Refuse(Refusal::Conflicted(unmerged));
    }
    let mut stale = Vec::new();
    let mut overlap = Vec::new();
    for c in moved {
        let cur = index.leaf(c.path.as_bstr());
        if cur == c.old {
            stale.push(c.clone());
        } else if cur != c.new {
            overlap.push(c.path.clone());
        }
    }
    if !overlap.is_empty() {
        overlap.sort();
        return Decision::Refuse(Refusal::Overlap(overlap));
    }
    let moved_paths: HashSet<&BStr> = moved.iter().map(|c| c.path.as_bstr()).collect();
    let mut clash = BTreeSet::new();
    for c in moved {
        for r in index.related(c.path.as_bstr()) {
            if !moved_paths.contains(r.as_bstr()) {
                clash.insert(c.path.clone());
                clash.insert(r);
            }
        }
    }
    if !clash.is_empty() {
        return Decision::Refuse(Refusal::DirFileClash(clash.into_iter().collect()));
    }
    if stale.is_empty() {
        Decision::Unchanged
    } else {
        stale.sort_by(|a, b| a.path.cmp(&b.path));
        Decision::Apply(stale)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gix::index::entry::Mode;
    use gix::ObjectId;
    use std::collections::BTreeMap;

    fn leaf(n: u8) -> Leaf {
        Leaf { mode: Mode::FILE, id: ObjectId::from_bytes_or_panic(&[n; 20]) }
    }

    #[derive(Default)]
    struct Fake {
        stage0: BTreeMap<BString, Leaf>,
        unmerged: Vec<BString>,
    }

    impl IndexLookup for Fake {
        fn leaf(&self, path: &BStr) -> Option<Leaf> {
            self.stage0.get(path).copied()
        }
        fn unmerged(&self) -> Vec<BString> {
            self.unmerged.clone()
        }
        fn related(&self, path: &BStr) -> Vec<BString> {
            let mut below = path.to_owned();
            below.push(b'/');
            let mut out: Vec<BString> = ancestors(path).filter(|a| self.stage0.contains_key(*a)).map(|a| a.to_owned()).collect();
            out.extend(self.stage0.keys().filter(|k| k.starts_with(below.as_slice())).cloned());
            out
        }
    }

    fn index(entries: &[(&str, Leaf)]) -> Fake {
        Fake { stage0: entries.iter().map(|(p, l)| (BString::from(*p), *l)).collect(), unmerged: Vec::new() }
    }

    fn change(p: &str, old: Option<Leaf>, new: Option<Leaf>) -> Change {
        Change { path: p.into(), old, new }
    }

    #[test]
    fn ancestors_are_proper_prefixes() {
        let got: Vec<&BStr> = ancestors(BStr::new("a/b/c")).collect();
        assert_eq!(got, vec![BStr::new("a"), BStr::new("a/b")]);
        assert_eq!(ancestors(BStr::new("top")).count(), 0);
    }

    #[test]
    fn pure_staleness_applies() {
        let idx = index(&[("a", leaf(1)), ("b", leaf(2))]);
        let d = decide(&idx, &[change("a", Some(leaf(1)), Some(leaf(3)))]);
        assert_eq!(d, Decision::Apply(vec![change("a", Some(leaf(1)), Some(leaf(3)))]));
    }

    #[test]
    fn agreeing_staging_is_not_an_overlap() {
        let idx = index(&[("a", leaf(3)), ("n", leaf(4))]);
        let moved = vec![change("a", Some(leaf(1)), Some(leaf(3))), change("n", None, Some(leaf(4)))];
        assert_eq!(decide(&idx, &moved), Decision::Unchanged);
        let idx = index(&[("keep", leaf(3))]);
        assert_eq!(decide(&idx, &[change("gone", Some(leaf(1)), None)]), Decision::Unchanged, "both deleted it");
    }

    #[test]
    fn differing_staging_overlaps() {
        let idx = index(&[("a", leaf(9))]);
        let d = decide(&idx, &[change("a", Some(leaf(1)), Some(leaf(3)))]);
        assert_eq!(d, Decision::Refuse(Refusal::Overlap(vec!["a".into()])));
        let idx = index(&[]);
        let d = decide(&idx, &[change("a", Some(leaf(1)), Some(leaf(3)))]);
        assert_eq!(d, Decision::Refuse(Refusal::Overlap(vec!["a".into()])), "a staged deletion of a moved path");
    }

    #[test]
    fn file_where_the_move_made_a_directory_clashes() {
        let idx = index(&[("a", leaf(1)), ("x", leaf(5))]);
        let d = decide(&idx, &[change("x/inner", None, Some(leaf(6)))]);
        assert_eq!(d, Decision::Refuse(Refusal::DirFileClash(vec!["x".into(), "x/inner".into()])));
        let idx = index(&[("a", leaf(1)), ("y/deep/f", leaf(5))]);
        let d = decide(&idx, &[change("y", None, Some(leaf(6)))]);
        assert_eq!(d, Decision::Refuse(Refusal::DirFileClash(vec!["y".into(), "y/deep/f".into()])));
    }

    #[test]
    fn a_directory_replaced_on_both_sides_alike_is_no_clash() {
        // The box replaced file `d` by `d/x`; the host's index still has `d` (stale): the move
        // covers both paths, so `d` is simply stale.
        let idx = index(&[("d", leaf(1))]);
        let moved = vec![change("d", Some(leaf(1)), None), change("d/x", None, Some(leaf(2)))];
        assert_eq!(decide(&idx, &moved), Decision::Apply(moved));
    }

    #[test]
    fn conflicts_refuse_first() {
        let mut idx = index(&[("a", leaf(1))]);
        idx.unmerged.push("c".into());
        let d = decide(&idx, &[change("a", Some(leaf(1)), Some(leaf(3)))]);
        assert_eq!(d, Decision::Refuse(Refusal::Conflicted(vec!["c".into()])));
        assert_eq!(decide(&idx, &[]), Decision::Unchanged, "no move, nothing to heal");
    }
}
