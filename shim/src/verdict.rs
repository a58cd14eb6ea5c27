//! Asking seamfs what it would answer to committing a lock: `getxattr("user.seamfs.verdict")`
//! on the lock file, which seamfs computes per call for the caller's parent (the git holding
//! the lock). Anywhere else the attribute does not exist.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The attribute seamfs answers on a lock in a git dir.
pub const XATTR: &str = "user.seamfs.verdict";

/// What seamfs says about one lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opinion {
    /// Not on seamfs, not a lock seamfs judges, or no such lock: nothing to say.
    None,
    /// The commit would go through (as things stand now).
    Ok,
    /// The commit would be refused; seamfs's reason.
    Refused(String),
}

/// The attribute could not be read, or said something unexpected.
#[derive(Debug)]
pub struct AskError {
    /// The lock file asked about.
    pub path: PathBuf,
    /// What went wrong.
    pub what: String,
}

impl std::fmt::Display for AskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "could not ask seamfs about {}: {}", self.path.display(), self.what)
    }
}

impl std::error::Error for AskError {}

/// The value as seamfs writes it: `ok` or `refused: <reason>`.
pub fn parse(value: &[u8]) -> Option<Opinion> {
    let v = std::str::from_utf8(value).ok()?;
    if v == "ok" {
        return Some(Opinion::Ok);
    }
    v.strip_prefix("refused: ").map(|m| Opinion::Refused(m.to_string()))
}

/// One getxattr call with room for any reason seamfs writes: two calls (size, then value)
/// could meet two different verdicts.
const ROOM: usize = 64 * 1024;

/// Asks seamfs about `lock`.
pub fn ask(lock: &Path) -> Result<Opinion, AskError> {
    let err = |what: String| AskError { path: lock.to_path_buf(), what };
    let path = CString::new(lock.as_os_str().as_bytes()).map_err(|_| err("the path holds a NUL byte".into()))?;
    let name = CString::new(XATTR).expect("the attribute name has no NUL byte");
    let mut buf = vec![0u8; ROOM];
    // SAFETY: valid C strings and a buffer of ROOM bytes.
    let n = unsafe { libc::getxattr(path.as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            // No such attribute, no xattrs on this filesystem, or the lock is gone (git locks
            // some names only for their reflog, and commits nothing there).
            Some(libc::ENODATA | libc::ENOTSUP | libc::ENOENT) => Ok(Opinion::None),
            _ => Err(err(e.to_string())),
        };
    }
    buf.truncate(n as usize);
    parse(&buf).ok_or_else(|| err(format!("unexpected answer {:?}", String::from_utf8_lossy(&buf))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_seamfs_writes() {
        assert_eq!(parse(b"ok"), Some(Opinion::Ok));
        assert_eq!(parse(b"refused: refused to move HEAD: x"), Some(Opinion::Refused("refused to move HEAD: x".into())));
        assert_eq!(parse(b"maybe"), None);
        assert_eq!(parse(b"ok\n"), None, "nothing but the exact words");
    }

    #[test]
    fn a_plain_file_has_no_opinion() {
        let p = std::env::temp_dir().join(format!("seam-git-ask-{}.lock", std::process::id()));
        std::fs::write(&p, "x").expect("write");
        assert_eq!(ask(&p).expect("asked"), Opinion::None);
        std::fs::remove_file(&p).expect("rm");
        assert_eq!(ask(&p).expect("asked"), Opinion::None, "no such lock");
    }
}
