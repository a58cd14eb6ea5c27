//! Trees rebuilt in memory from index entries, so a heal reads few tree objects.
//!
//! A tree object is named by the hash of its bytes. The entries of an index, grouped by
//! directory, are serialised exactly as git serialises a tree (`<mode> <name>\0<id>`, in tree
//! order, which sorted index entries already are) and hashed: when a hash equals the id of a tree
//! the heal asks for, these items *are* that object's content (a hash collision aside, the same
//! trust git itself places in ids). Nothing about the index is trusted: an index that does not
//! match a tree (staging, conflicts, a torn or crafted file) only yields ids nobody asks for, and
//! the object database answers as before.
//!
//! The shared index is usually the old commit's tree exactly, and the box's own index (or the
//! `index.lock` its commit is renamed from) the new one: a heal then reads two commits and no
//! tree from the share, instead of every tree along the move.

use std::collections::HashMap;
use std::sync::Arc;

use gix::bstr::{BStr, BString, ByteSlice};
use gix::index::entry::Mode;
use gix::index::State;
use gix::ObjectId;

use super::trees::{Item, Leaf};

/// A tree's entries in the object's order: names in one buffer (two allocations a tree, not
/// one a name).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct TreeItems {
    names: Vec<u8>,
    items: Vec<(u32, u32, Item)>,
}

impl TreeItems {
    /// Room for `n` entries.
    pub fn with_capacity(n: usize) -> TreeItems {
        TreeItems { names: Vec::with_capacity(n * 16), items: Vec::with_capacity(n) }
    }

    /// Appends an entry.
    pub fn push(&mut self, name: &[u8], item: Item) {
        let start = self.names.len() as u32;
        self.names.extend_from_slice(name);
        self.items.push((start, self.names.len() as u32, item));
    }

    /// The `i`th entry.
    pub fn get(&self, i: usize) -> Option<(&BStr, Item)> {
        self.items.get(i).map(|&(a, b, item)| (self.names[a as usize..b as usize].as_bstr(), item))
    }

    /// The entries in order.
    pub fn iter(&self) -> impl Iterator<Item = (&BStr, Item)> + '_ {
        self.items.iter().map(|&(a, b, item)| (self.names[a as usize..b as usize].as_bstr(), item))
    }
}

/// A tree's entries, shared.
pub(crate) type Items = Arc<TreeItems>;

/// Tree ids → items, from the indexes added.
#[derive(Default)]
pub(crate) struct MemTrees {
    map: HashMap<ObjectId, Items>,
}

/// A directory being gathered: its path length (with the trailing `/`, 0 at the root), its
/// entries, and whether one of them cannot be written as a tree entry.
struct Dir {
    prefix_len: usize,
    name: BString,
    items: TreeItems,
    bad: bool,
}

fn tree_mode(mode: Mode) -> Option<&'static [u8]> {
    Some(match mode {
        Mode::FILE => b"100644",
        Mode::FILE_EXECUTABLE => b"100755",
        Mode::SYMLINK => b"120000",
        Mode::COMMIT => b"160000",
        _ => return None,
    })
}

/// Index entries in order, gathered into directories; each closed directory is hashed into the
/// [`MemTrees`] given.
struct Builder {
    kind: gix::hash::Kind,
    stack: Vec<Dir>,
    /// The open directories' path, each ending in '/'.
    cur: Vec<u8>,
}

impl Builder {
    fn new(kind: gix::hash::Kind) -> Builder {
        Builder { kind, stack: vec![Dir { prefix_len: 0, name: BString::default(), items: TreeItems::default(), bad: false }], cur: Vec::new() }
    }

    fn push(&mut self, trees: &mut MemTrees, path: &[u8], mode: Mode, id: ObjectId) {
        // Close the directories this path is not under.
        while self.stack.len() > 1 && !(path.len() > self.cur.len() && path.starts_with(&self.cur)) {
            trees.close(&mut self.stack, self.kind);
            self.cur.truncate(self.stack.last().expect("the root stays").prefix_len);
        }
        // Open the ones it is in.
        let rest = &path[self.cur.len()..];
        let mut start = 0;
        for (i, _) in rest.iter().enumerate().filter(|(_, &b)| b == b'/') {
            let name = rest[start..i].as_bstr().to_owned();
            self.cur.extend_from_slice(&rest[start..=i]);
            self.stack.push(Dir { prefix_len: self.cur.len(), name, items: TreeItems::default(), bad: false });
            start = i + 1;
        }
        let top = self.stack.last_mut().expect("the root stays");
        match tree_mode(mode) {
            Some(_) => top.items.push(&rest[start..], Item::Leaf(Leaf { mode, id })),
            None => top.bad = true,
        }
    }

    fn finish(mut self, trees: &mut MemTrees) -> Option<ObjectId> {
        while self.stack.len() > 1 {
            trees.close(&mut self.stack, self.kind);
        }
        let root = self.stack.pop().expect("the root");
        trees.finish(root.items, root.bad, self.kind)
    }
}

impl MemTrees {
    /// The items of tree `id`, when an added index holds it.
    pub fn get(&self, id: &ObjectId) -> Option<Items> {
        self.map.get(id).cloned()
    }

    /// Whether tree `id` is known here.
    pub fn contains(&self, id: &ObjectId) -> bool {
        self.map.contains_key(id)
    }

    /// Hashes every directory of `state` (entries sorted, as decoded indexes are checked to be)
    /// as a tree; returns the root tree's id (None when the index cannot be one tree: an entry
    /// whose mode no tree holds).
    pub fn add(&mut self, state: &State) -> Option<ObjectId> {
        let mut b = Builder::new(state.object_hash());
        for e in state.entries() {
            b.push(self, e.path(state), e.mode, e.id);
        }
        b.finish(self)
    }

    /// [`add`](Self::add) for a hint's index file, read without decoding it (`rawindex`). A
    /// malformed file adds what it yielded, which only names trees nobody asks for.
    pub fn add_hint(&mut self, hint: super::HintData, kind: gix::hash::Kind) -> Option<ObjectId> {
        use std::io::Read;
        let mut b = Builder::new(kind);
        let mut push = |path: &[u8], mode, id| b.push(self, path, mode, id);
        let whole = match hint {
            super::HintData::Bytes(bytes) => super::rawindex::for_each_entry(&bytes[..], kind, &mut push),
            super::HintData::File(f) => {
                let r = std::io::BufReader::with_capacity(64 << 10, f.take(crate::gitdata::MAX_META));
                super::rawindex::for_each_entry(r, kind, &mut push)
            }
        };
        let root = b.finish(self);
        whole.and(root)
    }
    /// Closes the innermost directory into its parent.
    fn close(&mut self, stack: &mut Vec<Dir>, kind: gix::hash::Kind) {
        let d = stack.pop().expect("a directory to close");
        let id = self.finish(d.items, d.bad, kind);
        let parent = stack.last_mut().expect("a parent");
        match id {
            Some(id) => parent.items.push(&d.name, Item::Tree(id)),
            None => parent.bad = true,
        }
    }

    /// Serialises and hashes one tree; remembers its items under its id.
    fn finish(&mut self, items: TreeItems, bad: bool, kind: gix::hash::Kind) -> Option<ObjectId> {
        if bad {
            return None;
        }
        let mut body = Vec::with_capacity(items.names.len() + items.items.len() * 40);
        for (name, item) in items.iter() {
            let (mode, id): (&[u8], ObjectId) = match item {
                Item::Tree(id) => (b"40000", id),
                Item::Leaf(l) => (tree_mode(l.mode).expect("checked when gathered"), l.id),
            };
            body.extend_from_slice(mode);
            body.push(b' ');
            body.extend_from_slice(name);
            body.push(0);
            body.extend_from_slice(id.as_bytes());
        }
        let mut h = gix::hash::hasher(kind);
        h.update(format!("tree {}\0", body.len()).as_bytes());
        h.update(&body);
        let id = h.try_finalize().ok()?;
        self.map.entry(id).or_insert_with(|| {
            // Kept for the whole heal: without the slack of growing by doubling.
            let mut items = items;
            items.names.shrink_to_fit();
            items.items.shrink_to_fit();
            Arc::new(items)
        });
        Some(id)
    }
}
