//! The git dirs seamd serves: the main one, `<checkout>/.git`, and each registered linked
//! worktree's, reached by NAME as `<checkout>/.git/worktrees/<name>`.
//!
//! A worktree's own `.git` file (`gitdir: <path>`) is never read: its path is the box's to
//! write. Only real directories count; a symlink anywhere on the way is refused.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use seamfs::gitdata::{GitDirRef, HeadOid, RefError};
use seamfs::lower::Lower;

use crate::error::CheckoutError;
use crate::fsx::{self, Kind};

/// The checkout, opened once; every path below is relative to it.
pub struct Checkout {
    /// The checkout as given on the command line (for messages).
    pub path: PathBuf,
    /// The checkout's directory fd.
    pub root: Lower,
    /// The main git dir's fd (`.git`, checked a real directory at open): shared refs.
    pub main: Lower,
}

/// One git dir.
pub struct GitDir {
    /// Relative to the checkout: `.git` or `.git/worktrees/<name>`.
    pub rel: PathBuf,
    /// The git dir's own fd: changes inside it address single names.
    pub dir: Lower,
}

/// A worktree entry that is not used, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Relative to the checkout.
    pub rel: PathBuf,
    /// What it is (`a symlink`, `a regular file`) or what failed.
    pub why: String,
}

/// The main git dir, relative to the checkout.
pub const MAIN: &str = ".git";

impl Checkout {
    /// Opens `path` and checks that its `.git` is a real directory.
    pub fn open(path: &Path) -> Result<Checkout, CheckoutError> {
        let root = Lower::open(path).map_err(|source| CheckoutError::Open { path: path.into(), source })?;
        match fsx::lstat(&root, Path::new(MAIN)) {
            Ok(Some((Kind::Dir, _))) => {
                let main = fsx::open_dir(&root, Path::new(MAIN)).map_err(|source| CheckoutError::Open { path: path.join(MAIN), source })?;
                Ok(Checkout { path: path.into(), root, main })
            }
            Ok(Some((k, _))) => Err(CheckoutError::NotMain { path: path.into(), what: k.describe() }),
            Ok(None) => Err(CheckoutError::NotMain { path: path.into(), what: "missing" }),
            Err(source) => Err(CheckoutError::Open { path: path.join(MAIN), source }),
        }
    }

    /// The main git dir, then every registered worktree's, with the entries of `.git/worktrees`
    /// that were skipped.
    pub fn git_dirs(&self) -> (Vec<GitDir>, Vec<Skipped>) {
        let mut dirs = Vec::new();
        let mut skipped = Vec::new();
        match fsx::open_dir(&self.root, Path::new(MAIN)) {
            Ok(dir) => dirs.push(GitDir { rel: MAIN.into(), dir }),
            Err(e) => skipped.push(Skipped { rel: MAIN.into(), why: format!("open: {e}") }),
        }
        let wt = Path::new(MAIN).join("worktrees");
        let names: Vec<OsString> = match fsx::lstat(&self.root, &wt) {
            Ok(None) => Vec::new(),
            Ok(Some((Kind::Dir, _))) => match fsx::list(&self.root, &wt) {
                Ok(n) => n,
                Err(e) => {
                    skipped.push(Skipped { rel: wt.clone(), why: format!("list: {e}") });
                    Vec::new()
                }
            },
            Ok(Some((k, _))) => {
                skipped.push(Skipped { rel: wt.clone(), why: k.describe().into() });
                Vec::new()
            }
            Err(e) => {
                skipped.push(Skipped { rel: wt.clone(), why: format!("lstat: {e}") });
                Vec::new()
            }
        };
        for name in names {
            let rel = wt.join(&name);
            match fsx::lstat(&self.root, &rel) {
                Ok(Some((Kind::Dir, _))) => match fsx::open_dir(&self.root, &rel) {
                    Ok(dir) => dirs.push(GitDir { rel, dir }),
                    Err(e) => skipped.push(Skipped { rel, why: format!("open: {e}") }),
                },
                Ok(Some((k, _))) => skipped.push(Skipped { rel, why: k.describe().into() }),
                Ok(None) => {}
                Err(e) => skipped.push(Skipped { rel, why: format!("lstat: {e}") }),
            }
        }
        (dirs, skipped)
    }

    /// What HEAD of `g` resolves to, read as data (loose ref or packed-refs). Branch refs are
    /// looked up in the main git dir, never in a `commondir` the box could point elsewhere.
    /// HEAD is read through `g`'s own fd, the one its index is installed through, so a rename
    /// of the git dir mid-pass cannot check one worktree's HEAD and install into another's
    /// index; shared refs through the main git dir's fd.
    pub fn head(&self, g: &GitDir) -> Result<HeadOid, RefError> {
        GitDirRef { lower: &g.dir, dir: PathBuf::new(), common: PathBuf::new(), verified: false, common_at: Some(&self.main) }.head_oid()
    }
}

/// Names of a host operation in progress in a git dir; seamd does not install meanwhile.
/// The same list seamfs judges box HEAD moves by, so both sides agree on "in progress".
pub const OPERATIONS: &[&str] = seamfs::judge::verdict::OP_STATE;

/// The first operation in progress in `g`, if any.
pub fn operation_in_progress(g: &GitDir) -> Option<&'static str> {
    OPERATIONS.iter().copied().find(|n| matches!(fsx::lstat(&g.dir, Path::new(n)), Ok(Some(_))))
}
