//! Unique temporary directories under /tmp, one per use, so parallel tests share no path.
//!
//! A directory is removed on drop, except when the test is failing (it is kept, and its path
//! printed, for inspection) or when something is still mounted below it (removing through a
//! live or dead mount would delete the lower's files or fail half-way).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::procfs;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A temporary directory `/tmp/seam-e2e-<pid>-<n>-<label>`.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates a fresh directory (mode 0755, so a test's other uid can traverse it).
    pub fn new(label: &str) -> TempDir {
        let label: String =
            label.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = PathBuf::from(format!("/tmp/seam-e2e-{}-{}-{}", std::process::id(), n, label));
            match std::fs::create_dir(&path) {
                Ok(()) => {
                    use std::os::unix::fs::PermissionsExt;
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                        .expect("chmod a fresh temp dir");
                    return TempDir { path };
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => panic!("create temp dir {}: {e}", path.display()),
            }
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A path inside it.
    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.path.join(rel)
    }

    /// Creates (with parents) and returns a subdirectory.
    pub fn subdir(&self, rel: impl AsRef<Path>) -> PathBuf {
        let p = self.path.join(rel);
        std::fs::create_dir_all(&p).unwrap_or_else(|e| panic!("create {}: {e}", p.display()));
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("[seam-tests] test failed: kept {} for inspection", self.path.display());
            return;
        }
        let below: Vec<PathBuf> =
            procfs::mounts().into_iter().map(|m| m.target).filter(|t| t.starts_with(&self.path)).collect();
        if !below.is_empty() {
            eprintln!("[seam-tests] not removing {}: still mounted below it: {below:?}", self.path.display());
            return;
        }
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            eprintln!("[seam-tests] could not remove {}: {e}", self.path.display());
        }
    }
}
