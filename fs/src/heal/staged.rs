//! Does the index stage anything off the move? Only the heal's kind (ff or carry) depends on it.
//!
//! A merge walk of the old tree (depth first, in git's tree order, which is index order) against
//! the index's sorted entries. Subtrees the index's own tree cache vouches for (same tree id, a
//! matching run of entries, no intent-to-add among them) are skipped unread, so an index git just
//! committed from costs almost nothing.

use std::collections::HashSet;

use gix::bstr::{BStr, BString, ByteSlice};
use gix::index::entry::Flags;
use gix::index::extension::Tree;
use gix::index::State;
use gix::ObjectId;

use super::lookup::leaf_of;
use super::memtrees::Items;
use super::outcome::HealError;
use super::trees::{Item, Objects};

struct Frame<'c> {
    items: Items,
    pos: usize,
    prefix_len: usize,
    cache: Option<&'c Tree>,
}

/// The number of entries from `i` on that the cache node `c` vouches equal tree `id` under
/// `dir` (`""` for the root, else ending in `/`); None when it cannot be trusted.
fn vouched(c: &Tree, id: &ObjectId, state: &State, i: usize, dir: &[u8]) -> Option<usize> {
    let n = c.num_entries? as usize;
    let entries = state.entries();
    if c.id != *id || n == 0 || i + n > entries.len() {
        return None;
    }
    let under = |k: usize| entries.get(k).is_some_and(|e| e.path(state).starts_with(dir));
    let run_ok = under(i) && under(i + n - 1) && !under(i + n);
    let no_ita = entries[i..i + n].iter().all(|e| !e.flags.contains(Flags::INTENT_TO_ADD));
    (run_ok && no_ita).then_some(n)
}

/// Whether `state` (no unmerged entries) differs from `old_tree` at a path not in `moved`.
pub(crate) fn off_the_move(objects: &Objects, old_tree: &ObjectId, state: &State, moved: &HashSet<&BStr>) -> Result<bool, HealError> {
    let entries = state.entries();
    if let Some(root) = state.tree() {
        if vouched(root, old_tree, state, 0, b"") == Some(entries.len()) {
            return Ok(false);
        }
    }
    let staged = |p: &BStr| !moved.contains(p);
    let mut i = 0usize;
    let mut path = BString::default();
    let mut stack = vec![Frame { items: objects.items(old_tree, b"".as_bstr())?, pos: 0, prefix_len: 0, cache: state.tree() }];
    while let Some(f) = stack.last_mut() {
        let Some((name, item)) = f.items.get(f.pos) else {
            stack.pop();
            continue;
        };
        f.pos += 1;
        path.truncate(f.prefix_len);
        path.extend_from_slice(name);
        let sub = match item {
            Item::Tree(id) => {
                path.push(b'/');
                let cache = f.cache.and_then(|c| c.children.iter().find(|ch| ch.name.as_slice() == name.as_bytes()));
                Some((id, cache))
            }
            Item::Leaf(l) => {
                // Index entries before this path exist only in the index: additions.
                while i < entries.len() && entries[i].path(state) < path.as_bstr() {
                    if staged(entries[i].path(state)) {
                        return Ok(true);
                    }
                    i += 1;
                }
                if i < entries.len() && entries[i].path(state) == path.as_bstr() {
                    if leaf_of(&entries[i]) != l && staged(path.as_bstr()) {
                        return Ok(true);
                    }
                    i += 1;
                } else if staged(path.as_bstr()) {
                    return Ok(true); // a deletion
                }
                None
            }
        };
        if let Some((id, cache)) = sub {
            while i < entries.len() && entries[i].path(state) < path.as_bstr() {
                if staged(entries[i].path(state)) {
                    return Ok(true);
                }
                i += 1;
            }
            if let Some(n) = cache.and_then(|c| vouched(c, &id, state, i, &path)) {
                i += n;
                continue;
            }
            let items = objects.items(&id, path.as_bstr())?;
            stack.push(Frame { items, pos: 0, prefix_len: path.len(), cache });
        }
    }
    Ok(entries[i..].iter().any(|e| staged(e.path(state))))
}
