//! Mounting, serving until unmounted or signalled, and unmounting.
//!
//! One place builds the fuser `Config` (options, ACL, threads). Used by `seamfs` and by the
//! share emulator of `seam-lab`.

use std::fmt;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use fuser::{Config, MountOption, Session, SessionACL};
use tracing::{error, info};

use crate::core::Core;
use crate::layer::Layer;

/// Exit codes of the binaries.
pub mod exit {
    /// Mounted and served, or unmounted, as asked.
    pub const OK: i32 = 0;
    /// Bad arguments or bad input (lower missing or not a directory, mountpoint not empty).
    pub const USAGE: i32 = 2;
    /// The mount itself failed (no /dev/fuse, no permission, kernel refused).
    pub const MOUNT: i32 = 3;
    /// Unmounting failed.
    pub const UNMOUNT: i32 = 4;
}

/// A mount or unmount error, with the path and the operation.
#[derive(Debug)]
pub struct MountError {
    /// What was being done.
    pub op: &'static str,
    /// On what.
    pub path: PathBuf,
    /// Why it failed.
    pub cause: String,
    /// The exit code it maps to.
    pub code: i32,
}

impl fmt::Display for MountError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.op, self.path.display(), self.cause)
    }
}

impl std::error::Error for MountError {}

impl MountError {
    /// A usage-class error.
    pub fn usage(op: &'static str, path: &Path, cause: impl Into<String>) -> Self {
        MountError { op, path: path.to_path_buf(), cause: cause.into(), code: exit::USAGE }
    }

    fn io(op: &'static str, path: &Path, e: io::Error, code: i32) -> Self {
        MountError { op, path: path.to_path_buf(), cause: e.to_string(), code }
    }
}

/// How to mount.
#[derive(Debug, Clone)]
pub struct MountOptions {
    /// Where.
    pub mountpoint: PathBuf,
    /// `fsname=` shown in /proc/mounts.
    pub fsname: String,
    /// `subtype=` shown in /proc/mounts (fuse.<subtype>).
    pub subtype: String,
    /// Worker threads. Default 4.
    pub threads: usize,
}

/// Checks a lower directory: it must exist and be a directory.
pub fn check_lower(lower: &Path) -> Result<(), MountError> {
    match std::fs::metadata(lower) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(MountError::usage("open lower", lower, "not a directory")),
        Err(e) => Err(MountError::usage("open lower", lower, e.to_string())),
    }
}

/// Checks a mountpoint: a directory, empty unless mounting over the lower itself.
pub fn check_mountpoint(mnt: &Path, over: bool) -> Result<(), MountError> {
    let m = std::fs::metadata(mnt).map_err(|e| MountError::usage("check mountpoint", mnt, e.to_string()))?;
    if !m.is_dir() {
        return Err(MountError::usage("check mountpoint", mnt, "not a directory"));
    }
    if !over {
        let mut it = std::fs::read_dir(mnt).map_err(|e| MountError::usage("check mountpoint", mnt, e.to_string()))?;
        if it.next().is_some() {
            return Err(MountError::usage(
                "check mountpoint",
                mnt,
                "not empty (use `seamfs mount --over DIR` to mount over a directory's own contents)",
            ));
        }
    }
    let _ = m.dev();
    Ok(())
}

fn config(opts: &MountOptions) -> Config {
    let mut c = Config::default();
    c.mount_options = vec![
        MountOption::FSName(opts.fsname.clone()),
        MountOption::Subtype(opts.subtype.clone()),
        MountOption::DefaultPermissions,
        MountOption::Dev,
        MountOption::Suid,
        MountOption::RW,
    ];
    c.acl = SessionACL::All;
    c.n_threads = Some(opts.threads.max(1));
    c.clone_fd = true;
    c
}

/// Mounts `core`, calls `ready` once the mount answers, and serves until unmounted or until
/// SIGTERM/SIGINT (which unmount cleanly).
pub fn serve<L: Layer>(
    core: Core<L>,
    opts: &MountOptions,
    ready: impl FnOnce(Result<(), &MountError>) + Send + 'static,
) -> Result<(), MountError> {
    serve_with(core, opts, ready, |_| {})
}

/// `serve`, handing the session's notifier to `mounted` once the mount exists (the change feed
/// invalidates the kernel's cache through it).
pub fn serve_with<L: Layer>(
    core: Core<L>,
    opts: &MountOptions,
    ready: impl FnOnce(Result<(), &MountError>) + Send + 'static,
    mounted: impl FnOnce(fuser::Notifier),
) -> Result<(), MountError> {
    block_signals();
    let mut session = match Session::new(core, &opts.mountpoint, &config(opts)) {
        Ok(s) => s,
        Err(e) => {
            let err = MountError::io("mount", &opts.mountpoint, e, exit::MOUNT);
            ready(Err(&err));
            return Err(err);
        }
    };
    mounted(session.notifier());
    let mut unmounter = session.unmount_callable();
    let mnt = opts.mountpoint.clone();
    std::thread::Builder::new()
        .name("seam-signals".into())
        .spawn(move || {
            let sig = wait_signal();
            info!(signal = sig, mountpoint = %mnt.display(), "signal received, unmounting");
            if let Err(e) = unmounter.unmount() {
                error!(error = %e, "unmount on signal failed; trying a lazy unmount");
                let _ = unmount(&mnt);
            }
        })
        .expect("spawn the signal thread");
    let probe = opts.mountpoint.clone();
    std::thread::Builder::new()
        .name("seam-ready".into())
        .spawn(move || {
            // The first stat is served by the session loop: when it returns, the mount answers.
            match std::fs::metadata(&probe) {
                Ok(_) => ready(Ok(())),
                Err(e) => ready(Err(&MountError::io("probe mount", &probe, e, exit::MOUNT))),
            }
        })
        .expect("spawn the readiness probe");
    info!(mountpoint = %opts.mountpoint.display(), "serving");
    session.run().map_err(|e| MountError::io("serve", &opts.mountpoint, e, exit::MOUNT))?;
    info!(mountpoint = %opts.mountpoint.display(), "unmounted, exiting");
    Ok(())
}

fn sigset() -> libc::sigset_t {
    // SAFETY: sigset manipulation on a local value.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGHUP);
        set
    }
}

/// Blocks the termination signals in this thread and every thread it starts after.
pub fn block_signals() {
    let set = sigset();
    // SAFETY: valid sigset.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
}

/// Waits for SIGTERM, SIGINT or SIGHUP (blocked beforehand by [`block_signals`]); returns it.
pub fn wait_signal() -> i32 {
    let set = sigset();
    let mut sig = 0;
    // SAFETY: valid sigset and out-pointer; the signals are blocked in every thread.
    unsafe { libc::sigwait(&set, &mut sig) };
    sig
}

/// Unmounts `mnt`; a busy or dead mount is detached lazily.
pub fn unmount(mnt: &Path) -> Result<(), MountError> {
    let c = std::ffi::CString::new(mnt.as_os_str().as_encoded_bytes())
        .map_err(|_| MountError::usage("unmount", mnt, "path contains NUL"))?;
    // SAFETY: valid C string.
    if unsafe { libc::umount2(c.as_ptr(), 0) } == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EBUSY) | Some(libc::ENOTCONN) | Some(libc::EIO) => {
            // SAFETY: valid C string.
            if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } == 0 {
                Ok(())
            } else {
                Err(MountError::io("unmount", mnt, io::Error::last_os_error(), exit::UNMOUNT))
            }
        }
        Some(libc::EINVAL) => Err(MountError {
            op: "unmount",
            path: mnt.to_path_buf(),
            cause: "not a mount point".into(),
            code: exit::UNMOUNT,
        }),
        _ => Err(MountError::io("unmount", mnt, e, exit::UNMOUNT)),
    }
}
