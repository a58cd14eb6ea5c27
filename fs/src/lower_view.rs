//! Object-database work that never walks seamfs's own mount (ADR 0022).
//!
//! Under `--over` the lower's path is seamfs's mountpoint. gix takes the real path of every
//! object directory it opens (for alternates), and the real path of `/proc/self/fd/<lower>/…`
//! names the mountpoint: the daemon would look itself up, from inside a FUSE request whose
//! caller may hold the very directory lock that lookup needs (a box `git commit` creating
//! `index.lock` while the reverse heal runs). So the heal and the index seed run on a thread of
//! their own mount namespace, in which seamfs's mount is detached and the path is the lower.
//! Those threads are kept between jobs (ADR 0050).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, OnceLock};

use parking_lot::Mutex;

/// The mountpoint that covers the lower's own path, when mounted with `--over`.
static COVERED: OnceLock<PathBuf> = OnceLock::new();
static SAID: AtomicBool = AtomicBool::new(false);

/// Records that seamfs's mount at `mnt` covers the lower's own path.
pub fn covered(mnt: &Path) {
    let _ = COVERED.set(mnt.to_path_buf());
}

/// Threads already in the lower's view, waiting for work. Entering the view (a thread, a new
/// mount namespace, a detach) cost a box commit's heal about 4 ms of its rename in a TCG guest,
/// and a fresh thread also dropped the object databases kept per thread ([`crate::object_db`]).
static IDLE: Mutex<Vec<Worker>> = Mutex::new(Vec::new());
/// Idle threads kept; more at once are made as needed and end when done.
const MAX_IDLE: usize = 4;

thread_local! {
    /// Set on a lower-view thread: work asked for there runs in place.
    static IN_VIEW: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A job with its borrows' lifetime erased (see [`with_lower_view`]).
type Job = Box<dyn FnOnce() + Send + 'static>;

struct Worker {
    jobs: mpsc::Sender<Job>,
}

/// Runs `f` where the lower's path reaches the lower, not seamfs: on a thread of its own mount
/// namespace under `--over`, else right here. If the namespace cannot be made, `f` runs anyway
/// (as before this existed), with one warning. A panic in `f` is raised again here.
pub fn with_lower_view<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    let Some(mnt) = COVERED.get() else { return f() };
    if IN_VIEW.with(|v| v.get()) {
        return f();
    }
    // Popped first: the lock is not held while a new thread is made.
    let idle = IDLE.lock().pop();
    let worker = idle.unwrap_or_else(|| spawn(mnt));
    let (done, result) = mpsc::sync_channel(1);
    let job: Box<dyn FnOnce() + Send + '_> = Box::new(move || {
        let _ = done.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    // SAFETY: only the lifetime is changed. This call does not return before the job is gone:
    // `recv` below returns when the job has sent its result (after which it touches nothing it
    // borrowed) or when `done`, which the job owns, was dropped with it; a send that fails hands
    // the job back here, where it is dropped.
    let job: Job = unsafe { std::mem::transmute::<Box<dyn FnOnce() + Send + '_>, Job>(job) };
    if let Err(mpsc::SendError(job)) = worker.jobs.send(job) {
        drop(job);
        panic!("the lower-view thread is gone");
    }
    let r = result.recv();
    {
        let mut idle = IDLE.lock();
        if idle.len() < MAX_IDLE {
            idle.push(worker);
        }
    }
    match r {
        Ok(Ok(v)) => v,
        Ok(Err(p)) => std::panic::resume_unwind(p),
        Err(_) => panic!("the lower-view thread dropped its work"),
    }
}

/// A thread in the lower's view, running jobs until its sender is dropped.
fn spawn(mnt: &'static Path) -> Worker {
    let (jobs, rx) = mpsc::channel::<Job>();
    let t = std::thread::Builder::new().name("seam-lower-view".into()).spawn(move || {
        if let Err(e) = enter(mnt) {
            if !SAID.swap(true, Ordering::Relaxed) {
                tracing::warn!(mountpoint = %mnt.display(), error = %e, "could not detach seamfs's own mount for the object database (a heal may walk the mount)");
            }
        }
        IN_VIEW.with(|v| v.set(true));
        for job in rx {
            job();
        }
    });
    if let Err(e) = t {
        panic!("spawn the lower-view thread: {e}");
    }
    Worker { jobs }
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
