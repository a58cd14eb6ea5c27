//! Running the repository's own hook: `<common dir>/hooks/<name>`, with the same arguments,
//! stdin, environment and working directory, its exit status passed on.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The repository's hook `name`, when it exists, is executable, and is not this binary (a
/// hooks dir linked to seam-git would otherwise run it forever).
pub fn repo_hook(common: &Path, name: &str, me: &Path) -> Option<PathBuf> {
    let hook = common.join("hooks").join(name);
    let m = std::fs::metadata(&hook).ok()?;
    if !m.is_file() || !executable(&hook) {
        return None;
    }
    let same_as_me = std::fs::metadata(me).is_ok_and(|me| me.dev() == m.dev() && me.ino() == m.ino());
    (!same_as_me).then_some(hook)
}

/// As git decides: access(2) with X_OK.
fn executable(p: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_bytes()) else { return false };
    // SAFETY: a valid C string.
    unsafe { libc::access(c.as_ptr(), libc::X_OK) == 0 }
}

/// The hook could not be started or waited for.
#[derive(Debug)]
pub struct RunError {
    /// The hook.
    pub path: PathBuf,
    /// The error.
    pub source: std::io::Error,
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "could not run the repository's hook {}: {}", self.path.display(), self.source)
    }
}

impl std::error::Error for RunError {}

/// Runs `hook` with `args`; its exit code, or 128 + the signal that ended it (as a shell
/// reports it). With `input`, its stdin is those bytes (already read from git); without, it
/// inherits this process's stdin, so it talks to git directly.
pub fn run(hook: &Path, args: &[OsString], input: Option<&[u8]>) -> Result<i32, RunError> {
    let err = |source| RunError { path: hook.to_path_buf(), source };
    let stdin = if input.is_some() { Stdio::piped() } else { Stdio::inherit() };
    let mut child = Command::new(hook).args(args).stdin(stdin).spawn().map_err(err)?;
    if let Some(bytes) = input {
        let mut pipe = child.stdin.take().expect("stdin was piped");
        // A hook that exits without reading its input is fine (git does not mind either).
        match pipe.write_all(bytes) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(err(e));
            }
            _ => {}
        }
    }
    let status = child.wait().map_err(err)?;
    Ok(status.code().or_else(|| status.signal().map(|s| 128 + s)).unwrap_or(1))
}
