//! Git metadata read as data from the lower: HEAD, refs, packed-refs, reflogs, `.git` files.
//!
//! Never runs git and never follows a link: every read goes through `Lower::open_regular`
//! (beneath the root, no symlink, no FIFO or device opened), after a refresh of the name, and is
//! size-bounded.

mod dotgit;
mod refs;

pub use dotgit::{parse_gitdir_file, DotGitError};
pub use refs::{find_packed, Head, HeadOid, RefError, RefState};

use std::ffi::{CStr, CString, OsStr, OsString};
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
    let dir = rel.parent().unwrap_or(Path::new(""));
    let name = rel.file_name().unwrap_or_default();
    let (mut read, _) = read_verified_in(lower, dir, &[name])?;
    Ok(read.pop().flatten())
}

/// A directory's listing: names and inode numbers.
pub type Listing = Vec<(OsString, u64)>;

/// Files of one lower directory read as [`read_lower_verified`] reads one, all checked against
/// one listing of it, which is returned too (names and inode numbers): a heal acting on several
/// names of a git dir (HEAD, its sync point, the box's index) pays one listing, not one each.
/// Every name is opened before the listing, so each is checked exactly as it was alone.
pub fn read_verified_in(lower: &Lower, dir: &Path, names: &[&OsStr]) -> std::io::Result<(Vec<Option<Vec<u8>>>, Listing)> {
    let cdir = cpath(dir);
    let paths: Vec<CString> = names.iter().map(|n| cpath(&dir.join(n))).collect();
    for _ in 0..VERIFY_TRIES {
        let mut opened = Vec::with_capacity(paths.len());
        for c in &paths {
            lower.refresh_again(c);
            opened.push(match lower.open_regular(c) {
                Ok(x) => Some(x),
                Err(ReadError::Io(e)) if e.raw_os_error() == Some(libc::ENOENT) => None,
                Err(e) => return Err(e.into()),
            });
        }
        let listing = lower.list(&cdir)?;
        let fresh = names.iter().zip(&opened).all(|(name, o)| {
            let listed = listing.iter().find(|(n, _)| n == name).map(|(_, ino)| *ino);
            match (o, listed) {
                (None, None) => true,
                (Some((_, st)), Some(ino)) if st.st_ino == ino => true,
                // A lower that never revalidates keeps the first inode number under the name, but
                // its O_DIRECT open read the server's current file (`crate::lower_cache`).
                (Some(_), Some(_)) => lower.stale_pages().is_some(),
                _ => false,
            }
        });
        if fresh {
            let read = opened.into_iter().map(|o| o.map(|(fd, st)| read_meta(fd, &st)).transpose()).collect::<std::io::Result<_>>()?;
            return Ok((read, listing));
        }
        // Stale: the refresh on the next try is a forced revalidation.
        crate::refresh_scope::pause(std::time::Duration::from_millis(5));
    }
    let what: Vec<_> = names.iter().map(|n| dir.join(n).display().to_string()).collect();
    Err(std::io::Error::new(std::io::ErrorKind::WouldBlock, format!("{} reads stale on the share", what.join(", "))))
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

    /// A scratch git dir (removed on drop) and a lower on its parent.
    struct Scratch(PathBuf);
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn scratch(tag: &str) -> (Scratch, Lower) {
        let dir = std::env::temp_dir().join(format!("seamfs-verified-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        std::fs::write(dir.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(dir.join(".git/index-box.b.seam-base"), "1111111111111111111111111111111111111111\n").unwrap();
        let lower = Lower::open(&dir).unwrap();
        (Scratch(dir), lower)
    }

    #[test]
    fn names_of_one_dir_are_read_against_one_listing() {
        let (_s, lower) = scratch("many");
        let names = [OsStr::new("HEAD"), OsStr::new("index-box.b.seam-base"), OsStr::new("index-box.b")];
        let (read, listing) = read_verified_in(&lower, Path::new(".git"), &names).unwrap();
        assert_eq!(read[0].as_deref(), Some(&b"ref: refs/heads/main\n"[..]));
        assert_eq!(read[1].as_deref(), Some(&b"1111111111111111111111111111111111111111\n"[..]));
        assert_eq!(read[2], None, "a name the listing lacks reads as absent");
        let mut listed: Vec<_> = listing.into_iter().map(|(n, _)| n).collect();
        listed.sort();
        assert_eq!(listed, ["HEAD", "index-box.b.seam-base"]);
        // One name alone reads as the batch does.
        assert_eq!(read_lower_verified(&lower, Path::new(".git/HEAD")).unwrap().as_deref(), Some(&b"ref: refs/heads/main\n"[..]));
    }

    #[test]
    fn a_fifo_among_the_names_fails_the_read_and_opens_nothing() {
        let (s, lower) = scratch("fifo");
        let fifo = CString::new(s.0.join(".git/index-box.b").as_os_str().as_bytes()).unwrap();
        // SAFETY: valid C string.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        let names = [OsStr::new("HEAD"), OsStr::new("index-box.b")];
        // Opening a FIFO for reading would block without a writer: it must be refused instead.
        let err = read_verified_in(&lower, Path::new(".git"), &names).unwrap_err();
        assert_ne!(err.kind(), std::io::ErrorKind::WouldBlock, "{err}");
    }
}
