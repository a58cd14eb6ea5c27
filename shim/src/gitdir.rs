//! The git dir a hook runs for: `GIT_DIR` when git set it (it does for hooks it runs after
//! setting up a repository), else the nearest `.git` above the working directory — a
//! directory, or a file `gitdir: <path>` (a linked worktree or a submodule). A linked
//! worktree's git dir names the repository's common dir in its `commondir` file; shared refs
//! and the hooks live there.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// A git dir and its common dir (the same dir outside linked worktrees).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitDir {
    /// The worktree's own git dir (HEAD, pseudorefs, per-worktree refs).
    pub dir: PathBuf,
    /// The common dir (shared refs, hooks, config).
    pub common: PathBuf,
}

/// Why no git dir was found.
#[derive(Debug)]
pub enum FindError {
    /// No `.git` in the directory or any above it.
    NotFound {
        /// Where the walk started.
        from: PathBuf,
    },
    /// A file could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A `.git` or `commondir` file does not say what it should.
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl std::fmt::Display for FindError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FindError::NotFound { from } => {
                write!(f, "no git dir: GIT_DIR is not set and there is no .git in {} or above it", from.display())
            }
            FindError::Read { path, source } => write!(f, "could not read {}: {source}", path.display()),
            FindError::Malformed { path, reason } => write!(f, "{} is not usable: {reason}", path.display()),
        }
    }
}

impl std::error::Error for FindError {}

/// The path a `.git` file points to: its one line `gitdir: <path>`, relative paths taken
/// relative to `base` (the directory holding the file).
pub fn parse_gitdir_file(content: &[u8], base: &Path) -> Result<PathBuf, &'static str> {
    let rest = content.strip_prefix(b"gitdir:").ok_or("it does not start with `gitdir:`")?;
    Ok(base.join(path_of(trim_line(rest).trim_ascii_start())?))
}

/// The common dir a `commondir` file in git dir `dir` names (relative to `dir`).
pub fn parse_commondir(content: &[u8], dir: &Path) -> Result<PathBuf, &'static str> {
    Ok(dir.join(path_of(trim_line(content))?))
}

/// The content without its line end (git writes one `\n`; tolerate `\r\n`).
fn trim_line(b: &[u8]) -> &[u8] {
    let b = b.strip_suffix(b"\n").unwrap_or(b);
    b.strip_suffix(b"\r").unwrap_or(b)
}

fn path_of(b: &[u8]) -> Result<&Path, &'static str> {
    use std::os::unix::ffi::OsStrExt;
    if b.is_empty() {
        return Err("the path is empty");
    }
    if b.contains(&b'\n') || b.contains(&0) {
        return Err("the path spans lines or holds a NUL byte");
    }
    Ok(Path::new(OsStr::from_bytes(b)))
}

fn read(path: &Path) -> Result<Vec<u8>, FindError> {
    std::fs::read(path).map_err(|source| FindError::Read { path: path.to_path_buf(), source })
}

/// The git dir for `git_dir` (the value of `GIT_DIR`, relative to `cwd`) or, without it, the
/// nearest `.git` at or above `cwd`. `common_dir` is `GIT_COMMON_DIR`, which overrides the
/// `commondir` file as it does for git.
pub fn find(git_dir: Option<&OsStr>, common_dir: Option<&OsStr>, cwd: &Path) -> Result<GitDir, FindError> {
    let dir = match git_dir.filter(|d| !d.is_empty()) {
        Some(d) => cwd.join(d),
        None => walk_up(cwd)?,
    };
    let common = match common_dir.filter(|d| !d.is_empty()) {
        Some(c) => cwd.join(c),
        None => common_of(&dir)?,
    };
    Ok(GitDir { dir, common })
}

/// The nearest `.git` at or above `cwd`, a `gitdir:` file followed.
fn walk_up(cwd: &Path) -> Result<PathBuf, FindError> {
    for d in cwd.ancestors() {
        let dotgit = d.join(".git");
        match std::fs::metadata(&dotgit) {
            Ok(m) if m.is_dir() => return Ok(dotgit),
            Ok(m) if m.is_file() => {
                return parse_gitdir_file(&read(&dotgit)?, d).map_err(|reason| FindError::Malformed { path: dotgit, reason })
            }
            _ => continue,
        }
    }
    Err(FindError::NotFound { from: cwd.to_path_buf() })
}

/// `dir`'s common dir: what its `commondir` file names, else `dir` itself.
fn common_of(dir: &Path) -> Result<PathBuf, FindError> {
    let file = dir.join("commondir");
    match std::fs::read(&file) {
        Ok(c) => parse_commondir(&c, dir).map_err(|reason| FindError::Malformed { path: file, reason }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(dir.to_path_buf()),
        Err(source) => Err(FindError::Read { path: file, source }),
    }
}

impl GitDir {
    /// The lock git holds while it updates `refname`: per-worktree names (HEAD, pseudorefs,
    /// `refs/bisect/`, `refs/worktree/`, `refs/rewritten/`) in the worktree's git dir, other
    /// `refs/` in the common dir. None for a name that is not a plain relative path (never
    /// turned into a path outside the git dirs).
    pub fn lock_of(&self, refname: &str) -> Option<PathBuf> {
        let safe = !refname.is_empty()
            && refname.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
            && !refname.contains('\0');
        if !safe {
            return None;
        }
        let per_worktree = ["refs/bisect/", "refs/worktree/", "refs/rewritten/"];
        let base = if refname.starts_with("refs/") && !per_worktree.iter().any(|p| refname.starts_with(p)) {
            &self.common
        } else if let Some(rest) = refname.strip_prefix("main-worktree/") {
            return Some(self.common.join(format!("{rest}.lock")));
        } else if refname.starts_with("worktrees/") {
            &self.common
        } else {
            &self.dir
        };
        Some(base.join(format!("{refname}.lock")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gitdir_files_relative_and_absolute() {
        let base = Path::new("/w/sub");
        assert_eq!(parse_gitdir_file(b"gitdir: /r/.git/worktrees/x\n", base), Ok(PathBuf::from("/r/.git/worktrees/x")));
        assert_eq!(parse_gitdir_file(b"gitdir: ../.git/modules/sub\n", base), Ok(PathBuf::from("/w/sub/../.git/modules/sub")));
        assert_eq!(parse_gitdir_file(b"gitdir:/r/.git\r\n", base), Ok(PathBuf::from("/r/.git")), "no space, CRLF");
        assert!(parse_gitdir_file(b"/r/.git\n", base).is_err(), "no `gitdir:` prefix");
        assert!(parse_gitdir_file(b"gitdir: \n", base).is_err(), "empty path");
        assert!(parse_gitdir_file(b"gitdir: /a\n/b\n", base).is_err(), "two lines");
    }

    #[test]
    fn commondir_is_relative_to_the_git_dir() {
        let dir = Path::new("/r/.git/worktrees/x");
        assert_eq!(parse_commondir(b"../..\n", dir), Ok(PathBuf::from("/r/.git/worktrees/x/../..")));
        assert_eq!(parse_commondir(b"/r/.git\n", dir), Ok(PathBuf::from("/r/.git")));
        assert!(parse_commondir(b"\n", dir).is_err());
    }

    #[test]
    fn locks_of_shared_and_per_worktree_refs() {
        let g = GitDir { dir: "/r/.git/worktrees/x".into(), common: "/r/.git".into() };
        let lock = |n: &str| g.lock_of(n).map(|p| p.display().to_string());
        assert_eq!(lock("HEAD").as_deref(), Some("/r/.git/worktrees/x/HEAD.lock"));
        assert_eq!(lock("ORIG_HEAD").as_deref(), Some("/r/.git/worktrees/x/ORIG_HEAD.lock"));
        assert_eq!(lock("refs/heads/main").as_deref(), Some("/r/.git/refs/heads/main.lock"));
        assert_eq!(lock("refs/bisect/bad").as_deref(), Some("/r/.git/worktrees/x/refs/bisect/bad.lock"));
        assert_eq!(lock("main-worktree/HEAD").as_deref(), Some("/r/.git/HEAD.lock"));
        assert_eq!(lock("worktrees/y/HEAD").as_deref(), Some("/r/.git/worktrees/y/HEAD.lock"));
        assert_eq!(lock("refs/../../etc/passwd"), None, "never a path out of the git dirs");
        assert_eq!(lock("/etc/passwd"), None);
    }

    #[test]
    fn find_walks_up_to_a_dotgit_file_and_follows_commondir() {
        let tmp = std::env::temp_dir().join(format!("seam-git-find-{}", std::process::id()));
        let wt = tmp.join("wt");
        let gd = tmp.join("main/.git/worktrees/wt");
        std::fs::create_dir_all(wt.join("a/b")).expect("mkdir wt");
        std::fs::create_dir_all(&gd).expect("mkdir git dir");
        std::fs::write(wt.join(".git"), format!("gitdir: {}\n", gd.display())).expect("write .git");
        std::fs::write(gd.join("commondir"), "../..\n").expect("write commondir");
        let found = find(None, None, &wt.join("a/b")).expect("found from below");
        assert_eq!(found.dir, gd);
        assert_eq!(found.common.canonicalize().expect("common exists"), tmp.join("main/.git").canonicalize().expect("exists"));
        std::fs::write(gd.join("commondir"), "").expect("empty commondir");
        let err = find(None, None, &wt).expect_err("an empty commondir is an error");
        assert!(err.to_string().contains("commondir"), "the error names the file: {err}");
        let found = find(Some(OsStr::new("../main/.git")), None, &wt).expect("GIT_DIR wins");
        assert_eq!(found.common, found.dir, "no commondir: the git dir is its own common dir");
        std::fs::remove_dir_all(&tmp).expect("clean up");
    }
}
