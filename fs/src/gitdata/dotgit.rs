//! `.git` files: `gitdir: <path>` pointers of linked worktrees, submodules and separate git dirs.

use std::fmt;
use std::path::PathBuf;

/// Why a `.git` file is not a usable pointer.
#[derive(Debug, PartialEq, Eq)]
pub enum DotGitError {
    /// Larger than any pointer git writes.
    TooLarge,
    /// No `gitdir: ` prefix, or an empty path.
    NoGitdirLine,
    /// Not UTF-8 or contains NUL.
    BadBytes,
}

impl fmt::Display for DotGitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DotGitError::TooLarge => "larger than a gitdir pointer (4 KiB)",
            DotGitError::NoGitdirLine => "no `gitdir: <path>` line",
            DotGitError::BadBytes => "not valid text",
        })
    }
}

impl std::error::Error for DotGitError {}

/// Parses a `.git` file's content into the path it names (as written: absolute or relative).
pub fn parse_gitdir_file(bytes: &[u8]) -> Result<PathBuf, DotGitError> {
    if bytes.len() > 4096 {
        return Err(DotGitError::TooLarge);
    }
    let text = std::str::from_utf8(bytes).map_err(|_| DotGitError::BadBytes)?;
    if text.contains('\0') {
        return Err(DotGitError::BadBytes);
    }
    let line = text.lines().next().unwrap_or("");
    let path = line.strip_prefix("gitdir:").ok_or(DotGitError::NoGitdirLine)?.trim();
    if path.is_empty() {
        return Err(DotGitError::NoGitdirLine);
    }
    Ok(PathBuf::from(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_refuses() {
        assert_eq!(parse_gitdir_file(b"gitdir: /w/.git/worktrees/a\n"), Ok(PathBuf::from("/w/.git/worktrees/a")));
        assert_eq!(parse_gitdir_file(b"gitdir: ../.git/modules/s"), Ok(PathBuf::from("../.git/modules/s")));
        assert_eq!(parse_gitdir_file(b"garbage"), Err(DotGitError::NoGitdirLine));
        assert_eq!(parse_gitdir_file(b"gitdir:   \n"), Err(DotGitError::NoGitdirLine));
        assert_eq!(parse_gitdir_file(&[0xff, 0xfe]), Err(DotGitError::BadBytes));
        assert_eq!(parse_gitdir_file(&vec![b'a'; 5000]), Err(DotGitError::TooLarge));
    }
}
