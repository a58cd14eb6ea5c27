//! Object-database work that never walks seamfs's own mount (ADR 0022).
//!
//! Under `--over` the lower's path is seamfs's mountpoint. gix takes the real path of every
//! object directory it opens (for alternates), and the real path of `/proc/self/fd/<lower>/…`
//! names the mountpoint: the daemon would look itself up, from inside a FUSE request whose
//! caller may hold the very directory lock that lookup needs (a box `git commit` creating
//! `index.lock` while the reverse heal runs). So the heal and the index seed run on a thread of
//! their own mount namespace, in which seamfs's mount is detached and the path is the lower.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// The mountpoint that covers the lower's own path, when mounted with `--over`.
static COVERED: OnceLock<PathBuf> = OnceLock::new();
static SAID: AtomicBool = AtomicBool::new(false);

/// Records that seamfs's mount at `mnt` covers the lower's own path.
pub fn covered(mnt: &Path) {
    let _ = COVERED.set(mnt.to_path_buf());
}

/// Runs `f` where the lower's path reaches the lower, not seamfs: on a thread of its own mount
/// namespace under `--over`, else right here. If the namespace cannot be made, `f` runs anyway
/// (as before this existed), with one warning.
pub fn with_lower_view<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    let Some(mnt) = COVERED.get() else { return f() };
    std::thread::scope(|s| {
        let t = std::thread::Builder::new().name("seam-lower-view".into()).spawn_scoped(s, || {
            if let Err(e) = enter(mnt) {
                if !SAID.swap(true, Ordering::Relaxed) {
                    tracing::warn!(mountpoint = %mnt.display(), error = %e, "could not detach seamfs's own mount for the object database (a heal may walk the mount)");
                }
            }
            f()
        });
        match t {
            Ok(t) => t.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
            Err(e) => panic!("spawn the lower-view thread: {e}"),
        }
    })
}

/// This thread gets its own mount namespace, with seamfs's mount at `mnt` detached from it.
#[cfg(target_os = "linux")]
fn enter(mnt: &Path) -> std::io::Result<()> {
    let c = crate::gitdata::cpath(mnt);
    // SAFETY: plain syscalls on this thread only (CLONE_FS: its own cwd and root; CLONE_NEWNS:
    // its own mount table, private so nothing propagates back).
    unsafe {
        if libc::unshare(libc::CLONE_FS | libc::CLONE_NEWNS) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::mount(std::ptr::null(), c"/".as_ptr(), std::ptr::null(), libc::MS_REC | libc::MS_PRIVATE, std::ptr::null()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::umount2(c.as_ptr(), libc::MNT_DETACH) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// No mount namespaces off Linux (nor a seamfs mount to cover the lower: `covered` is the
/// mount's call), so this is only said, never pretended.
#[cfg(not(target_os = "linux"))]
fn enter(mnt: &Path) -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        format!("detach the mount at {}: mount namespaces are not available on this host", mnt.display()),
    ))
}
