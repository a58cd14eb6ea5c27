//! One process-wide list of what a lab run must undo: mounts (unmounted newest first, so seamfs
//! goes before the share under it) and temp dirs (removed only once nothing is mounted below).
//!
//! A signal thread empties the same list on SIGINT/SIGTERM/SIGHUP, so Ctrl-C leaves nothing behind.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Once;

use parking_lot::Mutex;
use tracing::warn;

use super::LabError;

#[derive(Debug)]
enum Undo {
    Mount(PathBuf),
    Dir(PathBuf),
}

static UNDO: Mutex<Vec<Undo>> = Mutex::new(Vec::new());
/// Held for a whole cleanup, so the signal thread waits for one in progress before exiting.
static CLEANING: Mutex<()> = Mutex::new(());
/// Held while a mount command runs, so cleanup never races a mount that is still coming up.
static MOUNTING: Mutex<()> = Mutex::new(());
/// Set once a signal came: no new temp dirs or mounts.
static STOPPING: AtomicBool = AtomicBool::new(false);

/// Whether a signal came and the signal thread is undoing everything: long-running callers stop
/// quietly instead of reporting the failures the removal causes.
pub fn is_stopping() -> bool {
    STOPPING.load(Ordering::SeqCst)
}

fn refuse_if_stopping(op: &str, path: &Path) -> Result<(), LabError> {
    if STOPPING.load(Ordering::SeqCst) {
        return Err(LabError::new(op, path, "interrupted: the lab is cleaning up"));
    }
    Ok(())
}

/// Runs a mount command for `mnt`, registered for cleanup first; cleanup waits for it to end.
pub fn mounting<T>(mnt: &Path, run: impl FnOnce() -> Result<T, LabError>) -> Result<T, LabError> {
    let _mounting = MOUNTING.lock();
    refuse_if_stopping("mount", mnt)?;
    will_mount(mnt);
    run()
}
static SIGNALS: Once = Once::new();

/// Registers a mountpoint to unmount at cleanup (before mounting, so a signal during the mount
/// still finds it).
fn will_mount(mnt: &Path) {
    UNDO.lock().push(Undo::Mount(mnt.to_path_buf()));
}

/// Unmounts one registered mount now and forgets it.
pub fn unmount_now(mnt: &Path) -> Result<(), LabError> {
    UNDO.lock().retain(|u| !matches!(u, Undo::Mount(m) if m == mnt));
    unmount(mnt)
}

fn unmount(mnt: &Path) -> Result<(), LabError> {
    match seamfs::mount::unmount(mnt) {
        Ok(()) => Ok(()),
        // Registered but never mounted (the mount failed, or a signal came first).
        Err(e) if !is_mounted(mnt) => {
            tracing::debug!(error = %e, "not mounted");
            Ok(())
        }
        Err(e) => Err(LabError::new("unmount", mnt, e.cause)),
    }
}

/// Whether `path` is a mount point now (per /proc/self/mounts).
pub fn is_mounted(path: &Path) -> bool {
    mounts_under(path).iter().any(|m| m == path)
}

/// Mount points at or below `dir`.
pub fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string("/proc/self/mounts") else { return Vec::new() };
    text.lines()
        .filter_map(|l| l.split(' ').nth(1))
        .map(unescape_mount_path)
        .filter(|m| m.starts_with(dir))
        .collect()
}

/// /proc/mounts escapes space, tab, newline and backslash as octal.
fn unescape_mount_path(s: &str) -> PathBuf {
    s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\").into()
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh directory under /tmp, removed at cleanup.
pub fn temp_dir(prefix: &str) -> Result<PathBuf, LabError> {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("{prefix}-{}-{nanos}-{n}", std::process::id()));
    let mut undo = UNDO.lock();
    refuse_if_stopping("create temp dir", &dir)?;
    std::fs::create_dir(&dir).map_err(|e| LabError::new("create temp dir", &dir, e))?;
    undo.push(Undo::Dir(dir.clone()));
    Ok(dir)
}

/// Undoes everything registered, newest first. Errors are logged, not returned: cleanup goes on.
pub fn cleanup_all() {
    let _mounting = MOUNTING.lock();
    let _cleaning = CLEANING.lock();
    loop {
        // Pop one at a time so a concurrent caller (the signal thread) never undoes twice.
        let Some(u) = UNDO.lock().pop() else { break };
        match u {
            Undo::Mount(m) => {
                if let Err(e) = unmount(&m) {
                    warn!(error = %e, "cleanup: unmount failed");
                }
            }
            Undo::Dir(d) => remove_dir(&d),
        }
    }
}

/// Removes a temp dir, never while something is mounted below it (that would delete through the
/// mount).
fn remove_dir(dir: &Path) {
    let left = mounts_under(dir);
    if !left.is_empty() {
        warn!(dir = %dir.display(), mounts = ?left, "cleanup: mounts remain below; leaving the dir");
        return;
    }
    // A child still writing below (a git the signal did not reach) can make one pass fail.
    for attempt in 0..5 {
        match std::fs::remove_dir_all(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) if attempt == 4 => warn!(dir = %dir.display(), error = %e, "cleanup: remove failed"),
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(50)),
        }
    }
}

/// Blocks SIGINT/SIGTERM/SIGHUP in this thread (call before starting any other) and starts a
/// thread that, on one of them, undoes everything and exits 130. Children get a clean mask
/// (std resets it at exec).
pub fn on_signal_cleanup() {
    SIGNALS.call_once(|| {
        seamfs::mount::block_signals();
        std::thread::Builder::new()
            .name("seam-lab-signals".into())
            .spawn(|| {
                let sig = seamfs::mount::wait_signal();
                STOPPING.store(true, Ordering::SeqCst);
                eprintln!("seam-lab: signal {sig}: unmounting and removing temp dirs");
                cleanup_all();
                std::process::exit(130);
            })
            .expect("spawn the signal thread: without it Ctrl-C would leave mounts behind");
    });
}

/// Undoes everything when dropped (normal return, error or panic).
#[derive(Debug)]
pub struct CleanupGuard;

impl Drop for CleanupGuard {
    fn drop(&mut self) {
        cleanup_all();
    }
}
