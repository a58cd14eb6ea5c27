//! Name mapping inside a git dir when the index split is on.
//!
//! The box addresses `index` and `index.lock`; the lower holds them as `index-box` and
//! `index-box.lock`. The host's own `index`, `index.lock`, and seamfs's working files
//! (`index-box.*`, `index.seam-*`) are never visible to the box. `COMMIT_EDITMSG` is per side
//! too (`COMMIT_EDITMSG-box`): git writes it in place, so a commit on each side at once would
//! otherwise take the other's message.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

/// The lower name of the box's index.
pub const INDEX_BOX: &str = "index-box";
/// The lower name of the box's index lock.
pub const INDEX_BOX_LOCK: &str = "index-box.lock";
/// The shared (host) index.
pub const SHARED_INDEX: &str = "index";
/// The lower name of the box's commit message file.
pub const EDITMSG_BOX: &str = "COMMIT_EDITMSG-box";

/// What a box name becomes on the lower.
#[derive(Debug, PartialEq, Eq)]
pub enum ToLower {
    /// The same name.
    Same,
    /// Another name.
    Renamed(&'static str),
    /// A name the box may not address.
    Hidden,
}

fn is_private(n: &[u8]) -> bool {
    n == INDEX_BOX.as_bytes() || n.starts_with(b"index-box.") || n.starts_with(b"index.seam-") || n == EDITMSG_BOX.as_bytes()
}

/// The lower name for a box name directly inside a git dir.
pub fn to_lower(name: &OsStr) -> ToLower {
    let n = name.as_bytes();
    match n {
        b"index" => ToLower::Renamed(INDEX_BOX),
        b"index.lock" => ToLower::Renamed(INDEX_BOX_LOCK),
        b"COMMIT_EDITMSG" => ToLower::Renamed(EDITMSG_BOX),
        _ if is_private(n) => ToLower::Hidden,
        _ => ToLower::Same,
    }
}

/// The box name for a lower name directly inside a git dir; None when hidden.
pub fn to_box(lower: &OsStr) -> Option<&OsStr> {
    let n = lower.as_bytes();
    match n {
        b"index-box" => Some(OsStr::new("index")),
        b"index-box.lock" => Some(OsStr::new("index.lock")),
        b"COMMIT_EDITMSG-box" => Some(OsStr::new("COMMIT_EDITMSG")),
        b"index" | b"index.lock" | b"COMMIT_EDITMSG" => None,
        _ if is_private(n) => None,
        _ => Some(lower),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_round_trips_and_hides() {
        for name in ["index", "index.lock", "COMMIT_EDITMSG", "HEAD", "config", "index.stash.123", "next-index-1.lock"] {
            let lower = match to_lower(OsStr::new(name)) {
                ToLower::Same => name,
                ToLower::Renamed(l) => l,
                ToLower::Hidden => panic!("{name} hidden"),
            };
            assert_eq!(to_box(OsStr::new(lower)), Some(OsStr::new(name)), "{name}");
        }
        for hidden in ["index-box", "index-box.lock", "index-box.seam-seed.1", "index.seam-proposed.a.b.ff", "COMMIT_EDITMSG-box"] {
            assert_eq!(to_lower(OsStr::new(hidden)), ToLower::Hidden, "the box cannot address {hidden}");
        }
        for private in ["index-box.seam-seed.1", "index.seam-tmp.1.2", "index.seam-proposed.a.b.ff"] {
            assert_eq!(to_box(OsStr::new(private)), None, "{private} is never listed");
        }
        assert_eq!(to_box(OsStr::new("index")), None, "the host's index is never shown");
        assert_eq!(to_box(OsStr::new("index.lock")), None, "nor its lock");
        assert_eq!(to_box(OsStr::new("COMMIT_EDITMSG")), None, "nor the host's commit message");
    }
}
