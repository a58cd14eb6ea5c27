//! Commits and trees read through gix: a tree's entries, and the leaves two trees differ in
//! (equal subtrees are skipped by id, so a small move reads few trees).
//!
//! Walks use an explicit stack, not recursion: a tree's depth is the committer's choice.

use std::collections::BTreeMap;
use std::path::Path;

use gix::bstr::{BStr, BString, ByteSlice, ByteVec};
use gix::index::entry::Mode;
use gix::objs::tree::EntryKind;
use gix::objs::FindExt;
use gix::ObjectId;

use super::memtrees::{Items, MemTrees, TreeItems};
use super::outcome::HealError;

/// A non-tree entry: what the index records for a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Leaf {
    /// File, executable, symlink or gitlink.
    pub mode: Mode,
    /// Blob (or commit, for a gitlink) id.
    pub id: ObjectId,
}

/// A path whose leaf differs between two trees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change {
    /// Full path, `/`-separated.
    pub path: BString,
    /// The old tree's leaf (None: added).
    pub old: Option<Leaf>,
    /// The new tree's leaf (None: deleted).
    pub new: Option<Leaf>,
}

/// One entry of a tree, owned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Item {
    /// A subtree.
    Tree(ObjectId),
    /// Anything else.
    Leaf(Leaf),
}

/// The object database of one repository, and trees known from indexes ([`MemTrees`]).
pub(crate) struct Objects {
    odb: gix::odb::Handle,
    kind: gix::hash::Kind,
    mem: MemTrees,
}

/// git's own path checks on Linux with core.protectNTFS/protectHFS on (their defaults on a
/// macOS host): no `.`, `..`, `.git` in any spelling. Characters like `*` stay legal.
const GIT_RULES: gix::validate::path::component::Options =
    gix::validate::path::component::Options { protect_windows: false, protect_hfs: true, protect_ntfs: true };

fn join(prefix: &BStr, name: &BStr) -> BString {
    let mut p = BString::from(prefix.to_vec());
    if !p.is_empty() {
        p.push(b'/');
    }
    p.push_str(name);
    p
}

impl Objects {
    /// Opens `objects_dir` (packs, loose objects, alternates) for ids of `kind`: the handle this
    /// thread keeps for it, if any (`object_db`).
    pub fn open(objects_dir: &Path, kind: gix::hash::Kind) -> Result<Objects, HealError> {
        let odb = crate::object_db::open(objects_dir, kind)
            .map_err(|e| HealError::Objects { dir: objects_dir.to_path_buf(), cause: e.to_string() })?;
        Ok(Objects { odb, kind, mem: MemTrees::default() })
    }

    /// The trees known without reading the object database.
    pub fn mem(&mut self) -> &mut MemTrees {
        &mut self.mem
    }

    /// The tree of `commit`.
    pub fn commit_tree(&self, commit: &ObjectId) -> Result<ObjectId, HealError> {
        let mut buf = Vec::new();
        let c = self
            .odb
            .find_commit(commit, &mut buf)
            .map_err(|e| HealError::Object { what: format!("commit {commit}"), cause: e.to_string() })?;
        Ok(c.tree())
    }

    /// The empty tree's id (an unborn branch's "tree").
    pub fn empty_tree(&self) -> ObjectId {
        ObjectId::empty_tree(self.kind)
    }

    /// The entries of `tree` in the object's own order (git's tree order, which a depth-first
    /// walk turns into index order). `at` names the tree's path for messages.
    pub fn items(&self, tree: &ObjectId, at: &BStr) -> Result<Items, HealError> {
        if let Some(items) = self.mem.get(tree) {
            return Ok(items);
        }
        let mut buf = Vec::new();
        let t = self.odb.find_tree(tree, &mut buf).map_err(|e| HealError::Object {
            what: format!("tree {tree} at {:?}", at.to_str_lossy()),
            cause: e.to_string(),
        })?;
        let mut out = TreeItems::with_capacity(t.entries.len());
        for e in &t.entries {
            let mode = match e.mode.kind() {
                EntryKind::Tree => {
                    out.push(e.filename, Item::Tree(e.oid.to_owned()));
                    continue;
                }
                EntryKind::Blob => Mode::FILE,
                EntryKind::BlobExecutable => Mode::FILE_EXECUTABLE,
                EntryKind::Link => Mode::SYMLINK,
                EntryKind::Commit => Mode::COMMIT,
            };
            out.push(e.filename, Item::Leaf(Leaf { mode, id: e.oid.to_owned() }));
        }
        Ok(Items::new(out))
    }

    fn items_opt(&self, tree: Option<ObjectId>, at: &BStr) -> Result<Items, HealError> {
        match tree {
            Some(id) => self.items(&id, at),
            None => Ok(Items::default()),
        }
    }

    /// The leaves `old` and `new` differ in. Names on the new side are checked with git's own
    /// path rules: a tree git would refuse to check out is not healed onto.
    pub fn diff(&self, old: &ObjectId, new: &ObjectId) -> Result<Vec<Change>, HealError> {
        let mut out = Vec::new();
        let mut stack: Vec<(BString, Option<ObjectId>, Option<ObjectId>)> = vec![(BString::default(), Some(*old), Some(*new))];
        while let Some((prefix, a, b)) = stack.pop() {
            if a == b {
                continue;
            }
            let (left_items, right_items) = (self.items_opt(a, prefix.as_ref())?, self.items_opt(b, prefix.as_ref())?);
            let mut left: BTreeMap<&BStr, Item> = left_items.iter().collect();
            let right: BTreeMap<&BStr, Item> = right_items.iter().collect();
            for (name, r) in right {
                let path = join(prefix.as_ref(), name);
                let mode = match &r {
                    Item::Leaf(l) if l.mode == Mode::SYMLINK => Some(gix::validate::path::component::Mode::Symlink),
                    _ => None,
                };
                if gix::validate::path::component(name, mode, GIT_RULES).is_err() {
                    return Err(HealError::UnsafePath { path });
                }
                match (left.remove(name), r) {
                    (Some(Item::Tree(x)), Item::Tree(y)) => stack.push((path, Some(x), Some(y))),
                    (Some(Item::Tree(x)), Item::Leaf(l)) => {
                        stack.push((path.clone(), Some(x), None));
                        out.push(Change { path, old: None, new: Some(l) });
                    }
                    (Some(Item::Leaf(o)), Item::Tree(y)) => {
                        out.push(Change { path: path.clone(), old: Some(o), new: None });
                        stack.push((path, None, Some(y)));
                    }
                    (Some(Item::Leaf(o)), Item::Leaf(l)) => {
                        if o != l {
                            out.push(Change { path, old: Some(o), new: Some(l) });
                        }
                    }
                    (None, Item::Tree(y)) => stack.push((path, None, Some(y))),
                    (None, Item::Leaf(l)) => out.push(Change { path, old: None, new: Some(l) }),
                }
            }
            for (name, l) in left {
                let path = join(prefix.as_ref(), name);
                match l {
                    Item::Tree(x) => stack.push((path, Some(x), None)),
                    Item::Leaf(o) => out.push(Change { path, old: Some(o), new: None }),
                }
            }
        }
        Ok(out)
    }
}
