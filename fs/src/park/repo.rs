//! Which repository a work-tree path belongs to: the nearest ancestor holding `.git` (a
//! directory, or a file naming the git dir: linked worktrees and submodules), found on the
//! lower without running git. A pointer that leaves the lower is no repository of ours.

use std::path::{Path, PathBuf};

use crate::gitdata::{cpath, join_beneath, parse_gitdir_file, read_lower, GitDirRef};
use crate::lower::Lower;

type Cache = super::cache::TtlCache<PathBuf, Option<Repo>>;

/// A repository as parking needs it, every path relative to the lower root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    /// The work tree's top directory.
    pub work_tree: PathBuf,
    /// Its git dir (`worktrees/<n>` for a linked worktree).
    pub git_dir: PathBuf,
    /// The common dir (objects, refs, `info/exclude`).
    pub common: PathBuf,
    /// "." for the main work tree, else the linked worktree's name.
    pub tree: String,
}

/// The repository directory `dir` (lower-relative) is the top of, if any. `mountpoint` is
/// where box processes see the lower, for absolute `gitdir:` lines the box's git wrote.
pub fn repo_at(lower: &Lower, dir: &Path, mountpoint: Option<&Path>) -> Option<Repo> {
    let dotgit = dir.join(".git");
    let st = lower.stat(&cpath(&dotgit)).ok()?;
    let git_dir = match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR => dotgit,
        libc::S_IFREG => {
            let bytes = read_lower(lower, &dotgit).ok().flatten()?;
            let target = parse_gitdir_file(&bytes).ok()?;
            if target.is_absolute() {
                let rest = target.strip_prefix(mountpoint?).ok()?;
                join_beneath(Path::new(""), rest)?
            } else {
                join_beneath(dir, &target)?
            }
        }
        _ => return None,
    };
    if lower.stat(&cpath(&git_dir.join("HEAD"))).is_err() {
        return None;
    }
    let g = GitDirRef::open(lower, git_dir.clone());
    let linked = git_dir.parent().and_then(|p| p.file_name()).is_some_and(|n| n == "worktrees");
    let tree = if linked { git_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default() } else { ".".into() };
    Some(Repo { work_tree: dir.to_path_buf(), git_dir, common: g.common, tree })
}

/// The nearest repository holding `path` (a lower-relative file path), walking up.
/// `going`: work trees whose `.git` was removed a moment ago (they still count).
pub fn repo_of(lower: &Lower, path: &Path, mountpoint: Option<&Path>, cache: &Cache, going: &Cache) -> Option<Repo> {
    let mut dir = path.parent();
    while let Some(d) = dir {
        let hit = going.peek(d).flatten().or_else(|| cache.get_or(d.to_path_buf(), || repo_at(lower, d, mountpoint)));
        if let Some(r) = hit {
            return Some(r);
        }
        if d.as_os_str().is_empty() {
            break;
        }
        dir = d.parent();
    }
    None
}
