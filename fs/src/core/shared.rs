//! What a thread outside the FUSE session may touch of a mounted core: the change feed drops
//! cached listings and finds the node ids the kernel knows, to invalidate them.

use std::ffi::{CStr, OsStr};
use std::path::Path;
use std::sync::Arc;

use super::listing::Listings;
use super::Core;
use crate::inode::{InodeTable, ROOT};
use crate::layer::Layer;
use crate::lower::Lower;
use crate::gitdata::cpath;
use crate::policy::Class;

/// Shared parts of a core (its lower, a second handle on the same directory).
#[derive(Debug)]
pub struct Shared {
    lower: Lower,
    inodes: Arc<InodeTable>,
    listings: Arc<Listings>,
}

impl<L: Layer> Core<L> {
    /// The parts the change feed needs, shared with the session.
    pub fn shared(&self) -> std::io::Result<Shared> {
        Ok(Shared { lower: self.lower.try_clone()?, inodes: self.inodes.clone(), listings: self.listings.clone() })
    }
}

impl Shared {
    /// The lower.
    pub fn lower(&self) -> &Lower {
        &self.lower
    }

    /// The node id the kernel knows for the lower file at `rel` (`""` is the root).
    pub fn node_of(&self, rel: &Path) -> Option<u64> {
        if rel.as_os_str().is_empty() {
            return Some(ROOT);
        }
        let (dev, ino) = self.lower.identity_at(&cpath(rel)).ok()?;
        self.inodes.known_id(dev, ino)
    }

    /// True when node `id` is a directory and the lower, asked again, still holds that very
    /// directory at the node's name: the kernel's entry for it is right, and dropping it would
    /// unhash the cwd of every process inside (`getcwd` then fails with ENOENT).
    pub fn dir_still_at_its_name(&self, id: u64) -> bool {
        if !self.is_dir_node(id) {
            return false;
        }
        let Ok((parent, name)) = self.inodes.with(id, |n| (n.parent, n.name.clone())) else { return false };
        let Ok(path) = self.inodes.path(id) else { return false };
        self.dir_known_at(parent, &name, path.as_c_str()) == Some(id)
    }

    /// True when node `id` is a directory.
    pub fn is_dir_node(&self, id: u64) -> bool {
        self.inodes.with(id, |n| n.kind == libc::S_IFDIR).unwrap_or(false)
    }

    /// The node the lower, asked again, holds at `path` (name `name` in directory node
    /// `parent`), when it is a directory the kernel knows by that very name: the node seamfs
    /// last answered a lookup of `name` in `parent` with. A directory the host moved there from
    /// another name, or made anew, is not it.
    pub fn dir_known_at(&self, parent: u64, name: &OsStr, path: &CStr) -> Option<u64> {
        self.lower.refresh(path);
        let st = self.lower.stat(path).ok()?;
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
            return None;
        }
        let id = self.inodes.known_id(st.st_dev, st.st_ino)?;
        self.inodes.with(id, |n| n.parent == parent && *n.name == *name).unwrap_or(false).then_some(id)
    }

    /// Forgets the cached listing of directory node `dir`.
    pub fn forget_listing(&self, dir: u64) {
        self.listings.forget(dir);
    }

    /// The lower paths (relative to its root) of every work-tree directory node, parents first.
    pub fn work_tree_dirs(&self) -> Vec<std::path::PathBuf> {
        use std::os::unix::ffi::OsStrExt;
        let mut dirs: Vec<std::path::PathBuf> = self
            .inodes
            .nodes_of(Class::WorkTree)
            .into_iter()
            .filter(|(id, _, _)| self.is_dir_node(*id))
            .filter_map(|(id, _, _)| self.inodes.path(id).ok())
            .map(|p| std::path::PathBuf::from(OsStr::from_bytes(p.as_c_str().to_bytes())))
            .collect();
        dirs.sort_by_key(|p| p.components().count());
        dirs
    }

    /// Every work-tree node the kernel may cache: (id, parent, name).
    pub fn work_tree_nodes(&self) -> Vec<(u64, u64, Arc<OsStr>)> {
        self.inodes.nodes_of(Class::WorkTree)
    }
}
