//! Box names ↔ lower names. With the index split on, a git dir's `index` and `index.lock` live
//! on the lower as `index-box.<id>` and `index-box.<id>.lock`, and some lower names are never
//! shown (the mapping itself: `index::names::BoxNames`).

use std::borrow::Cow;
use std::ffi::OsStr;

use fuser::Errno;

use super::Core;
use crate::index::names::ToLower;
use crate::layer::Layer;
use crate::policy::Class;

/// A child of a directory, resolved for the lower.
#[derive(Debug)]
pub(crate) struct Child<'a> {
    /// Lower path relative to the root.
    pub path: crate::lower_path::LowerPath,
    /// The name on the lower (the node remembers this one).
    pub lower: Cow<'a, OsStr>,
}

impl<L: Layer> Core<L> {
    fn splits(&self, parent_class: Class) -> bool {
        parent_class == Class::GitDir && self.layer.index_split()
    }

    /// Resolves a box name in `parent`; a name the box may not address is ENOENT.
    pub(crate) fn child<'a>(&self, parent: u64, name: &'a OsStr) -> Result<Child<'a>, Errno> {
        let lower = if self.splits(self.class_of(parent)?) {
            match self.layer.names().to_lower(name) {
                ToLower::Same => Cow::Borrowed(name),
                ToLower::Renamed(l) => Cow::Owned(l.into()),
                ToLower::Hidden => return Err(Errno::ENOENT),
            }
        } else {
            Cow::Borrowed(name)
        };
        let path = self.inodes.child_path(parent, &lower)?;
        Ok(Child { path, lower })
    }

    /// As `child`, for a name about to be created: a hidden name is EPERM.
    pub(crate) fn new_child<'a>(&self, parent: u64, name: &'a OsStr) -> Result<Child<'a>, Errno> {
        self.child(parent, name).map_err(|e| if e == Errno::ENOENT { Errno::EPERM } else { e })
    }

    /// The name the box sees for a lower entry of directory `dir`; None when hidden.
    pub(crate) fn box_name<'a>(&self, dir_class: Class, lower: &'a OsStr) -> Option<&'a OsStr> {
        if self.splits(dir_class) {
            self.layer.names().to_box(lower)
        } else {
            Some(lower)
        }
    }
}
