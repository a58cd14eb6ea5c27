//! Mounting, serving until unmounted or signalled, and unmounting.
//!
//! seamfs calls mount(2) itself (type `fuse.<subtype>`, so `findmnt -t fuse.seamfs` and fstab
//! work) and hands the fd to a fuser `Session`, which then never unmounts on its own: one
//! place here does, on a signal or when `seamfs umount` asks. Used by `seamfs` and by the
//! share emulator of `seam-lab`.

use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fuser::{Config, Session, SessionACL};
use tracing::{error, info, warn};

use crate::mountinfo::{self, MountEntry};
use crate::signals;
use crate::status::{self, Probe};
use crate::users::{self, User};

/// Exit codes of the binaries.
pub mod exit {
    /// Mounted and served, or unmounted, as asked.
    pub const OK: i32 = 0;
    /// Bad arguments or bad input (lower missing or not a directory, mountpoint not empty or
    /// already a seamfs mount, not root, not a seamfs mount to unmount).
    pub const USAGE: i32 = 2;
    /// The mount itself failed (no /dev/fuse, kernel refused).
    pub const MOUNT: i32 = 3;
    /// Unmounting failed.
    pub const UNMOUNT: i32 = 4;
}

/// How long a mount is given to say who serves it.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// A mount or unmount error, with the path and the operation.
#[derive(Debug)]
pub struct MountError {
    /// What was being done.
    pub op: &'static str,
    /// On what.
    pub path: PathBuf,
    /// Why it failed, and what to do.
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
        MountError { op, path: path.to_path_buf(), cause: with_hint(path, &e), code }
    }
}

/// An error's text, with what to do when the path is a dead FUSE mount.
pub fn with_hint(path: &Path, e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOTCONN) => format!(
            "{e}: a FUSE mount whose daemon died is there; clear it with `seamfs umount {}` \
             (or `umount -l` for another filesystem)",
            path.display()
        ),
        _ => e.to_string(),
    }
}

/// How to mount.
#[derive(Debug, Clone)]
pub struct MountOptions {
    /// Where.
    pub mountpoint: PathBuf,
    /// The source shown in /proc/mounts.
    pub fsname: String,
    /// The type is `fuse.<subtype>`.
    pub subtype: String,
    /// Worker threads. Default 4.
    pub threads: usize,
}

/// Refuses a path that is a seamfs mount already (alive or dead), naming who serves it.
fn refuse_seamfs(op: &'static str, path: &Path, next: &str) -> Result<(), MountError> {
    let abs = mountinfo::absolute(path);
    match mountinfo::mount_at(&abs) {
        Some(m) if m.is_seamfs() => {
            let p = status::probe(&abs, PROBE_TIMEOUT);
            let todo = match p {
                Probe::Dead => format!("clear it with `seamfs umount {}`, then mount again", abs.display()),
                _ => next.replace("{}", &abs.display().to_string()),
            };
            Err(MountError::usage(op, path, format!("already a seamfs mount ({}): {todo}", p.who())))
        }
        _ => Ok(()),
    }
}

/// Checks a lower directory: it must exist, be a directory, and not be seamfs itself.
pub fn check_lower(lower: &Path) -> Result<(), MountError> {
    refuse_seamfs("open lower", lower, "serve the share beneath it, or `seamfs umount {}` first")?;
    match std::fs::metadata(lower) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(MountError::usage("open lower", lower, "not a directory")),
        Err(e) => Err(MountError::usage("open lower", lower, with_hint(lower, &e))),
    }
}

/// Checks a mountpoint: a directory, not already seamfs, empty unless mounting over the
/// lower itself.
pub fn check_mountpoint(mnt: &Path, over: bool) -> Result<(), MountError> {
    refuse_seamfs("check mountpoint", mnt, "it already serves this directory; `seamfs umount {}` first to remount")?;
    let m = std::fs::metadata(mnt).map_err(|e| MountError::usage("check mountpoint", mnt, with_hint(mnt, &e)))?;
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
    Ok(())
}

/// Refuses a mountpoint inside the lower (both canonical): seamfs would serve its own mount
/// to itself, and every walk into it recurses without end.
pub fn check_not_inside(lower: &Path, mnt: &Path) -> Result<(), MountError> {
    if mnt.starts_with(lower) {
        return Err(MountError::usage(
            "check mountpoint",
            mnt,
            format!(
                "inside the lower {}: seamfs would serve itself; choose a mountpoint outside it, \
                 or mount over the lower itself with `seamfs mount --over {}`",
                lower.display(),
                lower.display()
            ),
        ));
    }
    Ok(())
}

/// Refuses to start without the right to mount (mount(2) needs CAP_SYS_ADMIN).
pub fn check_privilege(mnt: &Path) -> Result<(), MountError> {
    const CAP_SYS_ADMIN: u32 = 21;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let eff = status.lines().find_map(|l| l.strip_prefix("CapEff:")).and_then(|h| u64::from_str_radix(h.trim(), 16).ok());
    match eff {
        Some(caps) if caps & (1 << CAP_SYS_ADMIN) == 0 => Err(MountError::usage(
            "mount",
            mnt,
            "seamfs mounts with mount(2), which needs root (CAP_SYS_ADMIN): run it as root (sudo seamfs mount ...)",
        )),
        _ => Ok(()),
    }
}

/// Warns about processes already using `dir` (canonical): a mount over it does not move them.
pub fn warn_users_of(dir: &Path) -> Vec<User> {
    let found = users::users_of(dir);
    if !found.is_empty() {
        eprintln!(
            "seamfs: warning: {} process(es) already use {} and stay on the directory beneath the mount, \
             not seamfs, until they cd into it again or reopen their files (restart them): {}",
            found.len(),
            dir.display(),
            users::describe(&found, 8)
        );
    }
    found
}

fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_encoded_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// mount(2) of a FUSE filesystem of type `fuse.<subtype>` on the mountpoint; returns the
/// /dev/fuse fd that serves it.
fn fuse_mount(opts: &MountOptions) -> io::Result<OwnedFd> {
    let mode = std::fs::metadata(&opts.mountpoint)?.mode() & libc::S_IFMT;
    // SAFETY: a constant C string; the fd is checked and owned at once.
    let fd = unsafe { libc::open(c"/dev/fuse".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd of ours.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let data = format!(
        "fd={},rootmode={mode:o},user_id={uid},group_id={gid},default_permissions,allow_other",
        fd.as_raw_fd()
    );
    let (src, dst, ty, data) = (
        CString::new(opts.fsname.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?,
        cstr(&opts.mountpoint)?,
        CString::new(format!("fuse.{}", opts.subtype)).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?,
        CString::new(data).expect("no NUL in the options"),
    );
    // SAFETY: valid C strings; flags 0 keeps suid and dev (set-ID files work as on the share).
    if unsafe { libc::mount(src.as_ptr(), dst.as_ptr(), ty.as_ptr(), 0, data.as_ptr().cast()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

fn config(opts: &MountOptions) -> Config {
    let mut c = Config::default();
    c.acl = SessionACL::All;
    c.n_threads = Some(opts.threads.max(1));
    c.clone_fd = true;
    c
}

fn mount_error(mnt: &Path, e: io::Error) -> MountError {
    let next = match e.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => ": seamfs mounts with mount(2), which needs root (CAP_SYS_ADMIN)",
        Some(libc::ENOENT | libc::ENODEV) => ": is /dev/fuse there? Load the module with `modprobe fuse`",
        _ => "",
    };
    let mut err = MountError::io("mount", mnt, e, exit::MOUNT);
    err.cause.push_str(next);
    err
}

/// Mounts `core` (seamfs's core, or any FUSE filesystem: the lab's fast share), calls `ready` once the mount answers, and serves until unmounted or until
/// SIGTERM/SIGINT/SIGHUP (which unmount cleanly).
pub fn serve<F: fuser::Filesystem>(
    core: F,
    opts: &MountOptions,
    ready: impl FnOnce(Result<(), &MountError>) + Send + 'static,
) -> Result<(), MountError> {
    serve_with(core, opts, ready, |_| {})
}

/// `serve`, handing the session's notifier to `mounted` once the mount exists (the change feed
/// invalidates the kernel's cache through it). Threads `mounted` starts inherit the blocked signals.
pub fn serve_with<F: fuser::Filesystem>(
    core: F,
    opts: &MountOptions,
    ready: impl FnOnce(Result<(), &MountError>) + Send + 'static,
    mounted: impl FnOnce(fuser::Notifier),
) -> Result<(), MountError> {
    signals::block();
    let session = match fuse_mount(opts).and_then(|fd| {
        Session::from_fd(core, fd, SessionACL::All, config(opts)).inspect_err(|_| unmount_once(&opts.mountpoint))
    }) {
        Ok(s) => s,
        Err(e) => {
            let err = mount_error(&opts.mountpoint, e);
            ready(Err(&err));
            return Err(err);
        }
    };
    info!(mountpoint = %opts.mountpoint.display(), source = %opts.fsname, fstype = %format!("fuse.{}", opts.subtype), "mounted");
    mounted(session.notifier());
    let mnt = opts.mountpoint.clone();
    signals::spawn_blocked("seam-signals", move || {
        let sig = signals::wait();
        info!(signal = sig, mountpoint = %mnt.display(), "signal received, unmounting");
        unmount_once(&mnt);
    })
    .expect("spawn the signal thread: without it a signal would leave a dead mount");
    let probe = opts.mountpoint.clone();
    signals::spawn_blocked("seam-ready", move || {
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

/// umount2(2) with flags; the errno on failure.
fn umount2(mnt: &Path, flags: libc::c_int) -> Result<(), io::Error> {
    let c = cstr(mnt)?;
    // SAFETY: valid C string.
    if unsafe { libc::umount2(c.as_ptr(), flags) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The daemon's own unmount (on a signal, or when the handshake failed): detached lazily when
/// busy, so it keeps serving the processes still inside until they let go, then exits.
fn unmount_once(mnt: &Path) {
    match umount2(mnt, 0) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => match umount2(mnt, libc::MNT_DETACH) {
            Ok(()) => warn!(mountpoint = %mnt.display(), "busy: detached lazily; serving the processes still inside until they let go"),
            Err(e) => error!(mountpoint = %mnt.display(), error = %e, "lazy unmount failed"),
        },
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => info!(mountpoint = %mnt.display(), "already unmounted"),
        Err(e) => error!(mountpoint = %mnt.display(), error = %e, "unmount failed"),
    }
}

/// Unmounts `mnt` whatever it is; a busy or dead mount is detached lazily (the lab's
/// cleanup of its own mounts).
pub fn unmount(mnt: &Path) -> Result<(), MountError> {
    match umount2(mnt, 0) {
        Ok(()) => Ok(()),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::ENOTCONN | libc::EIO)) => {
            umount2(mnt, libc::MNT_DETACH).map_err(|e| MountError::io("unmount", mnt, e, exit::UNMOUNT))
        }
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Err(MountError {
            op: "unmount",
            path: mnt.to_path_buf(),
            cause: "not a mount point".into(),
            code: exit::UNMOUNT,
        }),
        Err(e) => Err(MountError::io("unmount", mnt, e, exit::UNMOUNT)),
    }
}

/// How `seamfs umount` went.
#[derive(Debug)]
pub enum Unmounted {
    /// Unmounted, and its daemon (when known) has exited.
    Clean,
    /// Busy: detached lazily; these processes were still inside.
    Lazily(Vec<User>),
    /// Its daemon had died; the dead mount is cleared.
    Dead,
}

/// The seamfs mount at `path`, or why there is none (exit 2).
fn seamfs_mount_at(path: &Path) -> Result<(PathBuf, MountEntry), MountError> {
    let abs = mountinfo::absolute(path);
    match mountinfo::mount_at(&abs) {
        Some(m) if m.is_seamfs() => Ok((abs, m)),
        Some(m) => Err(MountError::usage(
            "unmount",
            path,
            format!(
                "a {} mount (source {}), not seamfs: seamfs umount only unmounts seamfs; use umount(8) for other filesystems",
                m.fstype, m.source
            ),
        )),
        None => Err(MountError::usage("unmount", path, "nothing is mounted there (see `findmnt -t fuse.seamfs`)")),
    }
}

/// True once every thread of `pid` has exited (a killed or exiting process's leader turns
/// zombie before its other threads are done, and the mount's fds go with the last one).
fn gone(pid: u32) -> bool {
    let threads = std::fs::read_dir(format!("/proc/{pid}/task")).map(|d| d.count()).unwrap_or(0);
    let zombie = crate::judge::procs::read_proc(&format!("/proc/{pid}/stat"))
        .map(|s| s.rsplit_once(')').is_some_and(|(_, r)| r.trim_start().starts_with('Z')))
        .unwrap_or(true);
    threads == 0 || (threads == 1 && zombie)
}

/// Waits up to 10 s for `pid` to be gone, so a caller that unmounts and then mounts again, or
/// a service manager, does not find the old daemon still finishing.
fn wait_gone(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !gone(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `seamfs umount PATH`: only a seamfs mount; a dead one is cleared; a busy one detached
/// lazily, and said so.
pub fn unmount_seamfs(path: &Path) -> Result<Unmounted, MountError> {
    let (abs, _) = seamfs_mount_at(path)?;
    let probe = status::probe(&abs, PROBE_TIMEOUT);
    match umount2(&abs, 0) {
        Ok(()) if probe == Probe::Dead => Ok(Unmounted::Dead),
        Ok(()) => {
            if let Some(pid) = probe.pid() {
                wait_gone(pid);
            }
            Ok(Unmounted::Clean)
        }
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
            // The daemon holds the lower open (under --over at this very path): not a user.
            let inside: Vec<User> = users::users_of(&abs).into_iter().filter(|u| Some(u.pid) != probe.pid()).collect();
            umount2(&abs, libc::MNT_DETACH).map_err(|e| MountError::io("unmount", &abs, e, exit::UNMOUNT))?;
            Ok(Unmounted::Lazily(inside))
        }
        Err(e) => Err(MountError::io("unmount", &abs, e, exit::UNMOUNT)),
    }
}

/// Blocks the termination signals in this thread and every thread it starts after.
pub fn block_signals() {
    signals::block();
}

/// Waits for SIGTERM, SIGINT or SIGHUP (blocked beforehand by [`block_signals`]); returns it.
pub fn wait_signal() -> i32 {
    signals::wait()
}
