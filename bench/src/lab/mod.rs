//! What every lab run needs: errors that name the path and the operation, temp dirs and mounts
//! that are removed on exit and on SIGINT/SIGTERM, and git run on either side.

pub mod cleanup;
pub mod git;
pub mod mounts;

use std::fmt;
use std::path::{Path, PathBuf};

/// A lab step that failed: what was done, on what, and why.
#[derive(Debug)]
pub struct LabError {
    /// The operation.
    pub op: String,
    /// The path it was done on.
    pub path: PathBuf,
    /// Why it failed.
    pub cause: String,
}

impl LabError {
    /// An error of `op` on `path`.
    pub fn new(op: impl Into<String>, path: &Path, cause: impl fmt::Display) -> Self {
        LabError { op: op.into(), path: path.to_path_buf(), cause: cause.to_string() }
    }
}

impl fmt::Display for LabError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.op, self.path.display(), self.cause)
    }
}

impl std::error::Error for LabError {}

/// The directory the running binary lives in: `seamfs` and `seam-lab` are built side by side.
pub fn bin_dir() -> Result<PathBuf, LabError> {
    let exe = std::env::current_exe().map_err(|e| LabError::new("locate current exe", Path::new("/proc/self/exe"), e))?;
    exe.parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| LabError::new("locate bin dir", &exe, "executable has no parent directory"))
}
