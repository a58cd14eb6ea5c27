//! Git metadata read as data from the lower: HEAD, refs, packed-refs, reflogs, `.git` files.
//!
//! Never runs git and never follows a link: every read goes through `Lower::open_regular`
//! (beneath the root, no symlink, no FIFO or device opened), after a refresh of the name, and is
//! size-bounded.

mod dotgit;
mod refs;

pub use dotgit::{parse_gitdir_file, DotGitError};
pub use refs::{find_packed, Head, HeadOid, RefError, RefState};

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::lower::Lower;
use crate::lower_read::{read_bounded, ReadError};

/// Files larger than this are not git metadata seamfs reads (packed-refs of huge repos excepted).
pub const MAX_META: u64 = 64 << 20;

/// A git dir on the lower, by its path relative to the lower root.
#[derive(Debug, Clone)]
pub struct GitDirRef<'a> {
    /// The lower.
    pub lower: &'a Lower,
    /// The git dir, relative to the lower root (no leading slash).
    pub dir: PathBuf,
    /// The common dir (`commondir`), relative to the lower root; the git dir itself when absent.
    pub common: PathBuf,
    /// Every read checked against the lower's listing (`read_lower_verified`).
    pub verified: bool,
    /// The common dir's own fd, when it is reached apart from `lower` (seamd: a worktree's git
    /// dir and the main one, each through the fd it was checked by); `common` is then relative
    /// to it.
    pub common_at: Option<&'a Lower>,
}

/// Joins `rel` under `base` lexically, refusing to climb above the lower root.
pub fn join_beneath(base: &Path, rel: &Path) -> Option<PathBuf> {
    let mut out: Vec<&std::ffi::OsStr> = base.components().filter_map(|c| match c {
        Component::Normal(n) => Some(n),
        _ => None,
    }).collect();
    for c in rel.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out.iter().collect())
}

/// A C path for a lower-relative path ("." for the root).
pub fn cpath(p: &Path) -> CString {
    let b = p.as_os_str().as_bytes();
    CString::new(if b.is_empty() { b".".to_vec() } else { b.to_vec() }).unwrap_or_else(|_| CString::from(c"."))
}

/// A lower-relative path from a C path, the inverse of [`cpath`] ("." is the root).
pub fn rel_path(c: &CStr) -> PathBuf {
    if c.to_bytes() == b"." {
        PathBuf::new()
    } else {
        PathBuf::from(std::ffi::OsStr::from_bytes(c.to_bytes()))
    }
}

impl<'a> GitDirRef<'a> {
    /// A git dir at `dir`; a linked worktree's reads `commondir` to find the common dir.
    pub fn open(lower: &'a Lower, dir: PathBuf) -> GitDirRef<'a> {
        let mut g = GitDirRef { lower, common: dir.clone(), dir, verified: false, common_at: None };
        // Only a linked worktree's git dir (`<common>/worktrees/<id>`) has a `commondir`: not
        // asking the share for it elsewhere saves a round trip per judged read.
        let linked = g.dir.parent().and_then(|p| p.file_name()).is_some_and(|n| n == "worktrees");
        if !linked {
            return g;
        }
        if let Ok(Some(c)) = g.read_file(Path::new("commondir"), false) {
            let text = String::from_utf8_lossy(&c);
            let rel = Path::new(text.trim_end_matches(['\n', '\r']));
            if let Some(common) = join_beneath(&g.dir, rel) {
                g.common = common;
            }
        }
        g
    }

    /// The same git dir, read with `read_lower_verified` from now on: for what a heal acts on.
    pub fn verified(mut self) -> Self {
        self.verified = true;
        self
    }

    /// True for a repository with the reftable ref backend (`reftable/` in the common dir):
    /// its refs are not files seamfs reads, and HEAD is a placeholder (`refs/heads/.invalid`).
    pub fn is_reftable(&self) -> bool {
        self.lower.stat(&cpath(&self.common.join("reftable"))).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
    }

    /// Reads a file below the git dir (`common`: below the common dir); None when absent.
    pub fn read_file(&self, name: &Path, common: bool) -> std::io::Result<Option<Vec<u8>>> {
        let (lower, base) = match (common, self.common_at) {
            (true, Some(at)) => (at, &self.common),
            (true, None) => (self.lower, &self.common),
            (false, _) => (self.lower, &self.dir),
        };
        if self.verified {
            read_lower_verified(lower, &base.join(name))
        } else {
            read_lower(lower, &base.join(name))
        }
    }
}

/// Reads a lower file after refreshing its name; None when absent. Size-bounded.
pub fn read_lower(lower: &Lower, rel: &Path) -> std::io::Result<Option<Vec<u8>>> {
    let c = cpath(rel);
    if lower.refresh(&c) == crate::lower::Seen::Missing {
        return Ok(None);
    }
    read_lower_c(lower, &c)
}

/// How often `read_lower_verified` looks again before it gives up.
const VERIFY_TRIES: usize = 5;

/// Reads a lower file like [`read_lower`], checked against the listing of its directory.
///
/// A share may answer a lookup of a name replaced moments ago with the file it replaced, or with
/// nothing, for seconds; its directory listing is never cached. A read whose inode the listing
/// does not show under the name (or an absence the listing contradicts) is refreshed and read
/// again, so a stale read is never taken for the truth. Costs one listing per read: for what a
/// heal acts on, not the hot path. Errors with EAGAIN if the share stays stale.
pub fn read_lower_verified(lower: &Lower, rel: &Path) -> std::io::Result<Option<Vec<u8>>> {
    let c = cpath(rel);
    let dir = cpath(rel.parent().unwrap_or(Path::new("")));
    let name = rel.file_name().unwrap_or_default();
    for _ in 0..VERIFY_TRIES {
        lower.refresh_again(&c);
        let opened = match lower.open_regular(&c) {
            Ok(x) => Some(x),
            Err(ReadError::Io(e)) if e.raw_os_error() == Some(libc::ENOENT) => None,
            Err(e) => return Err(e.into()),
        };
        let listed = lower.list(&dir)?.into_iter().find(|(n, _)| n == name).map(|(_, ino)| ino);
        match (opened, listed) {
            (None, None) => return Ok(None),
            (Some((fd, st)), Some(ino)) if st.st_ino == ino => return read_meta(fd, &st).map(Some),
            // A lower that never revalidates keeps the first inode number under the name, but
            // its O_DIRECT open read the server's current file (`crate::lower_cache`).
            (Some((fd, st)), Some(_)) if lower.stale_pages().is_some() => return read_meta(fd, &st).map(Some),
            // Stale: the refresh on the next try is a forced revalidation.
            _ => crate::refresh_scope::pause(std::time::Duration::from_millis(5)),
        }
    }
    Err(std::io::Error::new(std::io::ErrorKind::WouldBlock, format!("{} reads stale on the share", rel.display())))
}

fn read_lower_c(lower: &Lower, c: &CStr) -> std::io::Result<Option<Vec<u8>>> {
    Ok(lower.read_regular(c, MAX_META)?.map(|(bytes, _)| bytes))
}

/// Reads an open metadata file (a regular file, [`Lower::open_regular`]) of bounded size.
fn read_meta(fd: std::os::fd::OwnedFd, st: &libc::stat) -> std::io::Result<Vec<u8>> {
    Ok(read_bounded(fd, st, MAX_META)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_stays_beneath() {
        assert_eq!(join_beneath(Path::new("a/.git/worktrees/w"), Path::new("../..")), Some(PathBuf::from("a/.git")));
        assert_eq!(join_beneath(Path::new("a"), Path::new("../..")), None);
        assert_eq!(join_beneath(Path::new("a"), Path::new("/etc")), None);
        assert_eq!(join_beneath(Path::new(""), Path::new("./x/y")), Some(PathBuf::from("x/y")));
    }
}
