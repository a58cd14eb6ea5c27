//! Name mapping inside a git dir when the index split is on: the one place that says which
//! lower name a box name is, and which lower names a box never sees.
//!
//! The box addresses `index`, `index.lock` and `COMMIT_EDITMSG`; the lower holds them as
//! `index-box.<id>`, `index-box.<id>.lock` and `COMMIT_EDITMSG-box.<id>`, where `<id>` is this
//! mount's box id (`crate::box_id`). seamfs's own per-box files are `index-box.<id>.seam-*`.
//! Hidden from the box: the host's `index`, `index.lock` and `COMMIT_EDITMSG`, every other
//! box's files (`index-box.*`, `COMMIT_EDITMSG-box*`), the unmigrated `index-box` of an older
//! seamfs, and seamfs's shared working files (`index.seam-*`). `COMMIT_EDITMSG` is per side
//! because git writes it in place: two commits at once would take each other's message.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use crate::box_id::BoxId;

/// The shared (host) index.
pub const SHARED_INDEX: &str = "index";
/// The box index of a seamfs before box ids (ADR 0028): migrated to this box's on first touch.
pub const LEGACY_INDEX_BOX: &str = "index-box";
/// The sync point of a seamfs before box ids.
pub const LEGACY_BASE: &str = "index-box.seam-base";
/// The commit message file of a seamfs before box ids.
pub const LEGACY_EDITMSG: &str = "COMMIT_EDITMSG-box";
/// The box's own operation-state record of a seamfs before box ids (one per machine).
pub const LEGACY_OWN_OPS: &str = "index.seam-ops";

const INDEX_BOX_PREFIX: &[u8] = b"index-box.";
const EDITMSG_PREFIX: &[u8] = b"COMMIT_EDITMSG-box";

/// One box's lower names, built once per mount.
#[derive(Debug, Clone)]
pub struct BoxNames {
    id: BoxId,
    index: String,
    lock: String,
    editmsg: String,
    base: String,
    own_ops: String,
}

/// What a box name becomes on the lower.
#[derive(Debug, PartialEq, Eq)]
pub enum ToLower<'a> {
    /// The same name.
    Same,
    /// Another name.
    Renamed(&'a str),
    /// A name the box may not address.
    Hidden,
}

/// Lower names no box ever addresses or sees directly (each box reaches its own through the
/// mapping): every box's index files, every side's commit message stand-in, seamfs's files.
fn is_private(n: &[u8]) -> bool {
    n == LEGACY_INDEX_BOX.as_bytes() || n.starts_with(INDEX_BOX_PREFIX) || n.starts_with(b"index.seam-") || n.starts_with(EDITMSG_PREFIX)
}

impl BoxNames {
    /// The names of box `id`.
    pub fn new(id: BoxId) -> BoxNames {
        let index = format!("index-box.{id}");
        BoxNames {
            lock: format!("{index}.lock"),
            base: format!("{index}.seam-base"),
            own_ops: format!("{index}.seam-ops"),
            editmsg: format!("COMMIT_EDITMSG-box.{id}"),
            index,
            id,
        }
    }

    /// The box id.
    pub fn id(&self) -> &BoxId {
        &self.id
    }

    /// `index-box.<id>`: the box's index.
    pub fn index(&self) -> &str {
        &self.index
    }

    /// `index-box.<id>.lock`: git's lock on it.
    pub fn index_lock(&self) -> &str {
        &self.lock
    }

    /// `COMMIT_EDITMSG-box.<id>`.
    pub fn editmsg(&self) -> &str {
        &self.editmsg
    }

    /// `index-box.<id>.seam-base`: the commit the box's index was last in step with.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// `index-box.<id>.seam-ops`: the operation state this box made.
    pub fn own_ops(&self) -> &str {
        &self.own_ops
    }

    /// The legacy names this box takes over when it migrates, as (old, new) pairs; the index
    /// first, so that only the box that won it takes the rest.
    pub fn legacy_pairs(&self) -> [(&'static str, &str); 3] {
        [(LEGACY_INDEX_BOX, self.index()), (LEGACY_BASE, self.base()), (LEGACY_EDITMSG, self.editmsg())]
    }

    /// The lower name for a box name directly inside a git dir.
    pub fn to_lower(&self, name: &OsStr) -> ToLower<'_> {
        let n = name.as_bytes();
        match n {
            b"index" => ToLower::Renamed(&self.index),
            b"index.lock" => ToLower::Renamed(&self.lock),
            b"COMMIT_EDITMSG" => ToLower::Renamed(&self.editmsg),
            _ if is_private(n) => ToLower::Hidden,
            _ => ToLower::Same,
        }
    }

    /// The box name for a lower name directly inside a git dir; None when hidden.
    pub fn to_box<'a>(&self, lower: &'a OsStr) -> Option<&'a OsStr> {
        let n = lower.as_bytes();
        match n {
            _ if n == self.index.as_bytes() => Some(OsStr::new("index")),
            _ if n == self.lock.as_bytes() => Some(OsStr::new("index.lock")),
            _ if n == self.editmsg.as_bytes() => Some(OsStr::new("COMMIT_EDITMSG")),
            b"index" | b"index.lock" | b"COMMIT_EDITMSG" => None,
            _ if is_private(n) => None,
            _ => Some(lower),
        }
    }

    /// True when `lower` is another box's index (`index-box.<other>`, or an unmigrated
    /// `index-box`): a hint for a heal after that box's commit, never served to this box.
    pub fn is_other_box_index(&self, lower: &OsStr) -> bool {
        lower.as_bytes() != self.index.as_bytes() && is_box_index(lower)
    }
}

/// True when `lower` is some box's index: `index-box.<id>`, or an older seamfs's `index-box`
/// (not a lock, not seamfs's working files). seamd's doctor lists them.
pub fn is_box_index(lower: &OsStr) -> bool {
    let n = lower.as_bytes();
    if n == LEGACY_INDEX_BOX.as_bytes() {
        return true;
    }
    let Some(id) = n.strip_prefix(INDEX_BOX_PREFIX) else { return false };
    std::str::from_utf8(id).is_ok_and(|id| BoxId::parse(id).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(id: &str) -> BoxNames {
        BoxNames::new(BoxId::parse(id).unwrap())
    }

    #[test]
    fn mapping_round_trips_and_hides() {
        let b = names("b1");
        for name in ["index", "index.lock", "COMMIT_EDITMSG", "HEAD", "config", "index.stash.123", "next-index-1.lock"] {
            let lower = match b.to_lower(OsStr::new(name)) {
                ToLower::Same => name,
                ToLower::Renamed(l) => l,
                ToLower::Hidden => panic!("{name} hidden"),
            };
            assert_eq!(b.to_box(OsStr::new(lower)), Some(OsStr::new(name)), "{name}");
        }
        assert_eq!(b.to_lower(OsStr::new("index")), ToLower::Renamed("index-box.b1"));
        assert_eq!(b.to_lower(OsStr::new("COMMIT_EDITMSG")), ToLower::Renamed("COMMIT_EDITMSG-box.b1"));
        let hidden = [
            "index-box",
            "index-box.lock",
            "index-box.b1",
            "index-box.b2",
            "index-box.b2.lock",
            "index-box.b1.seam-base",
            "index-box.seam-seed.1",
            "index.seam-proposed.a.b.ff",
            "COMMIT_EDITMSG-box",
            "COMMIT_EDITMSG-box.b2",
        ];
        for h in hidden {
            assert_eq!(b.to_lower(OsStr::new(h)), ToLower::Hidden, "the box cannot address {h}");
        }
        for private in ["index-box", "index-box.b2", "index-box.b2.lock", "COMMIT_EDITMSG-box.b2", "index.seam-tmp.1.2", "index-box.b1.seam-ops"] {
            assert_eq!(b.to_box(OsStr::new(private)), None, "{private} is never listed");
        }
        assert_eq!(b.to_box(OsStr::new("index")), None, "the host's index is never shown");
        assert_eq!(b.to_box(OsStr::new("index.lock")), None, "nor its lock");
        assert_eq!(b.to_box(OsStr::new("COMMIT_EDITMSG")), None, "nor the host's commit message");
    }

    #[test]
    fn other_boxes_indexes_are_known_as_such() {
        let b = names("b1");
        assert!(b.is_other_box_index(OsStr::new("index-box.b2")));
        assert!(b.is_other_box_index(OsStr::new("index-box")));
        for not in ["index-box.b1", "index-box.b2.lock", "index-box.seam-base", "index-box.lock", "index"] {
            assert!(!b.is_other_box_index(OsStr::new(not)), "{not}");
        }
    }
}
