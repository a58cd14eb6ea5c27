//! `seam-git install-hooks <dir>`: the dir `core.hooksPath` names, one link per hook name to
//! this binary. Anything already there that is not such a link is left alone and reported.

use std::path::{Path, PathBuf};

/// What stopped the install.
#[derive(Debug)]
pub enum InstallError {
    /// A name in the dir is something else than a link to this binary.
    InTheWay {
        /// The name.
        path: PathBuf,
        /// What it is.
        what: String,
    },
    /// A filesystem call failed.
    Io {
        /// What was being done.
        op: &'static str,
        /// On what.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl std::fmt::Display for InstallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InstallError::InTheWay { path, what } => {
                write!(f, "{} is {what}, not a link to seam-git; left as it is (move it away and run install-hooks again)", path.display())
            }
            InstallError::Io { op, path, source } => write!(f, "could not {op} {}: {source}", path.display()),
        }
    }
}

impl std::error::Error for InstallError {}

fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> InstallError {
    let path = path.to_path_buf();
    move |source| InstallError::Io { op, path, source }
}

/// Creates `dir` (and parents) with a link to `exe` for each of `hooks`; names already linked
/// to `exe` are kept. Returns how many links were made.
pub fn install_hooks(dir: &Path, exe: &Path, hooks: &[&str]) -> Result<usize, InstallError> {
    std::fs::create_dir_all(dir).map_err(io("create", dir))?;
    let mut made = 0;
    for name in hooks {
        let link = dir.join(name);
        match std::fs::symlink_metadata(&link) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::os::unix::fs::symlink(exe, &link).map_err(io("create the link", &link))?;
                made += 1;
            }
            Err(e) => return Err(io("inspect", &link)(e)),
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&link).map_err(io("read the link", &link))?;
                if target != exe {
                    return Err(InstallError::InTheWay { path: link, what: format!("a link to {}", target.display()) });
                }
            }
            Ok(m) => {
                let what = if m.is_dir() { "a directory" } else { "a file" };
                return Err(InstallError::InTheWay { path: link, what: what.into() });
            }
        }
    }
    Ok(made)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_made_once_and_nothing_else_is_replaced() {
        let dir = std::env::temp_dir().join(format!("seam-git-install-{}", std::process::id()));
        let exe = Path::new("/usr/bin/seam-git-test");
        assert_eq!(install_hooks(&dir, exe, &["a", "b"]).expect("installed"), 2);
        assert_eq!(std::fs::read_link(dir.join("a")).expect("a link"), exe);
        assert_eq!(install_hooks(&dir, exe, &["a", "b"]).expect("again"), 0, "already there");
        let err = install_hooks(&dir, Path::new("/other"), &["a"]).expect_err("another binary's link");
        assert!(err.to_string().contains("a link to /usr/bin/seam-git-test"), "{err}");
        std::fs::write(dir.join("c"), "#!/bin/sh\n").expect("a user's hook");
        let err = install_hooks(&dir, exe, &["c"]).expect_err("a file in the way");
        assert!(err.to_string().contains("is a file"), "{err}");
        assert_eq!(std::fs::read(dir.join("c")).expect("kept"), b"#!/bin/sh\n");
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}
