//! Is a file's content already in an object? Asked of the box's index (`index-box.<id>`) and the
//! shared one (`index`), read through the lower and cached briefly: a tracked file whose stat
//! matches an entry's (and is not racily clean) holds that entry's blob, so nothing is read.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use gix::bstr::ByteSlice;
use gix::hash::ObjectId;

use super::cache::TtlCache;
use super::repo::Repo;
use crate::gitdata::{cpath, read_lower};
use crate::lower::Lower;

/// What the indexes say of a path.
#[derive(Debug, PartialEq, Eq)]
pub enum Known {
    /// Tracked and unchanged (stat matches): its bytes are an object already.
    Clean,
    /// Tracked, changed or not provably unchanged: these are the entries' blob ids.
    Tracked(Vec<ObjectId>),
    /// In no index.
    Untracked,
}

#[derive(Debug)]
struct View {
    /// The file's identity, size and mtime when parsed: unchanged, it is not parsed again.
    stamp: (u64, i64, i64, i64),
    /// The index file's mtime: entries as new as it are racily clean (git checks their bytes).
    mtime: (i64, i64),
    state: gix::index::State,
}

/// The parsed indexes, by lower path, looked at again after 200 ms (and parsed again only if
/// the file changed: a 100,000-entry index takes tens of milliseconds to parse).
#[derive(Debug)]
pub struct Indexes {
    /// The box's own index file (`index-box.<id>`); the shared one is `index`.
    box_index: String,
    cache: TtlCache<PathBuf, Option<Arc<View>>>,
    parsed: parking_lot::Mutex<std::collections::HashMap<PathBuf, Arc<View>>>,
}

impl Indexes {
    /// Nothing parsed yet; `box_index` is this box's index file name.
    pub fn new(box_index: &str) -> Self {
        Indexes { box_index: box_index.to_string(), cache: TtlCache::new(Duration::from_millis(200), 256), parsed: Default::default() }
    }

    fn names(&self) -> [&str; 2] {
        [self.box_index.as_str(), "index"]
    }
}

impl Indexes {
    /// Drops every parsed index; true when there was one.
    pub fn forget(&self) -> bool {
        self.cache.clear();
        let mut parsed = self.parsed.lock();
        let had = !parsed.is_empty();
        parsed.clear();
        had
    }

    /// True when either index has an entry for `rel` (no stat needed).
    pub fn has(&self, lower: &Lower, repo: &Repo, rel: &[u8]) -> bool {
        self.names().iter().any(|name| {
            let path = repo.git_dir.join(name);
            self.cache.get_or(path.clone(), || self.load(lower, &path, repo)).is_some_and(|v| v.state.entry_by_path(rel.as_bstr()).is_some())
        })
    }

    /// What the git dir's indexes say of `rel` (work-tree relative), found on the lower as `st`.
    pub fn known(&self, lower: &Lower, repo: &Repo, rel: &[u8], st: &libc::stat) -> Known {
        let mut ids = Vec::new();
        for name in self.names() {
            let path = repo.git_dir.join(name);
            let Some(view) = self.cache.get_or(path.clone(), || self.load(lower, &path, repo)) else { continue };
            let Some(e) = view.state.entry_by_path(rel.as_bstr()) else { continue };
            let s = &e.stat;
            let racy = (s.mtime.secs as i64, s.mtime.nsecs as i64) >= view.mtime;
            let same = s.size == st.st_size as u32
                && s.mtime.secs == st.st_mtime as u32
                && s.mtime.nsecs == st.st_mtime_nsec as u32
                && s.ino == st.st_ino as u32;
            if same && !racy {
                return Known::Clean;
            }
            ids.push(e.id);
        }
        if ids.is_empty() {
            Known::Untracked
        } else {
            Known::Tracked(ids)
        }
    }
}

impl Indexes {
    fn load(&self, lower: &Lower, path: &std::path::Path, repo: &Repo) -> Option<Arc<View>> {
        let Ok(st) = lower.stat(&cpath(path)) else {
            self.parsed.lock().remove(path);
            return None;
        };
        let stamp = (st.st_ino, st.st_size, st.st_mtime, st.st_mtime_nsec);
        if let Some(v) = self.parsed.lock().get(path).filter(|v| v.stamp == stamp) {
            return Some(v.clone());
        }
        let bytes = read_lower(lower, path).ok().flatten()?;
        let kind = super::objects::object_format(lower, &repo.common);
        let (state, _) = gix::index::State::from_bytes(&bytes, filetime::FileTime::now(), kind, Default::default()).ok()?;
        let v = Arc::new(View { stamp, mtime: (st.st_mtime, st.st_mtime_nsec), state });
        let mut parsed = self.parsed.lock();
        if parsed.len() >= 256 {
            parsed.clear();
        }
        parsed.insert(path.to_path_buf(), v.clone());
        Some(v)
    }
}
