//! The `Mount` guard: a seamfs (or share emulator) mount that is unmounted on drop, even when
//! the test panics, and that prints its log, its directories and a listing when it does.
//!
//! The binaries daemonise: the command returns once the mount answers, so `Mount::*` returns
//! a usable mount. Every mount gets its own `--log` file in its own temp dir (never inside
//! the lower, where it would show up in listings), and that unique path also finds the
//! daemon's pid. Unmounting uses umount2(2) directly, so cleanup does not depend on the code
//! under test.

use std::ffi::{CString, OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::bins;
use crate::listing;
use crate::procfs;
use crate::run::{run, Ran};
use crate::tmp::TempDir;

/// A live FUSE mount started by a test.
#[derive(Debug)]
pub struct Mount {
    what: String,
    mnt: PathBuf,
    lower: PathBuf,
    log: PathBuf,
    // Dropped after `drop` ran (fields drop after the Drop impl), so the log outlives the report.
    _log_dir: TempDir,
}

impl Mount {
    /// `seamfs mount LOWER MNT --log LOG EXTRA...`.
    #[track_caller]
    pub fn seamfs(lower: &Path, mnt: &Path, extra: &[&str]) -> Mount {
        let mut args: Vec<OsString> = vec!["mount".into(), lower.into(), mnt.into()];
        args.extend(extra.iter().map(OsString::from));
        Mount::start("seamfs", &bins::seamfs(), args, lower, mnt)
    }

    /// `seamfs mount --over DIR --log LOG EXTRA...`: DIR's own contents, seen through seamfs.
    #[track_caller]
    pub fn seamfs_over(dir: &Path, extra: &[&str]) -> Mount {
        let mut args: Vec<OsString> = vec!["mount".into(), "--over".into(), dir.into()];
        args.extend(extra.iter().map(OsString::from));
        Mount::start("seamfs --over", &bins::seamfs(), args, dir, dir)
    }

    /// The share emulator: `seam-lab share BACKING MNT --log LOG EXTRA...`.
    #[track_caller]
    pub fn share(backing: &Path, mnt: &Path, extra: &[&str]) -> Mount {
        let mut args: Vec<OsString> = vec!["share".into(), backing.into(), mnt.into()];
        args.extend(extra.iter().map(OsString::from));
        Mount::start("seam-lab share", &bins::seam_lab(), args, backing, mnt)
    }

    /// The fast share: `seam-lab share --fast BACKING MNT --log LOG EXTRA...`.
    #[track_caller]
    pub fn fast_share(backing: &Path, mnt: &Path, extra: &[&str]) -> Mount {
        let mut args: Vec<OsString> = vec!["share".into(), "--fast".into(), backing.into(), mnt.into()];
        args.extend(extra.iter().map(OsString::from));
        Mount::start("seam-lab share --fast", &bins::seam_lab(), args, backing, mnt)
    }

    /// `seamfs mount --over DIR --log LOG EXTRA...`, with what the command printed (its
    /// warnings), for tests of the command itself.
    #[track_caller]
    pub fn seamfs_over_reporting(dir: &Path, extra: &[&str]) -> (Mount, Ran) {
        let mut args: Vec<OsString> = vec!["mount".into(), "--over".into(), dir.into()];
        args.extend(extra.iter().map(OsString::from));
        Mount::start_reporting("seamfs --over", &bins::seamfs(), args, dir, dir)
    }

    /// Runs `program ARGS --log LOG`, which must exit 0 once `mnt` is mounted.
    #[track_caller]
    pub fn start(what: &str, program: &Path, args: Vec<OsString>, lower: &Path, mnt: &Path) -> Mount {
        Mount::start_reporting(what, program, args, lower, mnt).0
    }

    /// [`Mount::start`], also returning the command's report.
    #[track_caller]
    pub fn start_reporting(what: &str, program: &Path, mut args: Vec<OsString>, lower: &Path, mnt: &Path) -> (Mount, Ran) {
        let log_dir = TempDir::new("log");
        let log = log_dir.join("daemon.log");
        args.push("--log".into());
        args.push(log.clone().into());
        let r = run(Command::new(program).args(&args));
        let guard =
            Mount { what: what.into(), mnt: mnt.to_path_buf(), lower: lower.to_path_buf(), log, _log_dir: log_dir };
        if !r.success() {
            panic!("{what}: mounting {} failed:\n{r}\n  log:\n{}", mnt.display(), guard.log_indented());
        }
        match procfs::mount_at(mnt) {
            Some(m) if m.fstype.starts_with("fuse") => {}
            other => panic!("{what}: exited 0 but {} is not a FUSE mount (found {other:?}):\n{r}", mnt.display()),
        }
        (guard, r)
    }

    /// The mountpoint.
    pub fn path(&self) -> &Path {
        &self.mnt
    }

    /// A path inside the mount.
    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.mnt.join(rel)
    }

    /// The lower directory it serves.
    pub fn lower(&self) -> &Path {
        &self.lower
    }

    /// The daemon's log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_else(|e| format!("(no log at {}: {e})", self.log.display()))
    }

    fn log_indented(&self) -> String {
        self.log().lines().map(|l| format!("    | {l}")).collect::<Vec<_>>().join("\n")
    }

    /// The facts a seamfs daemon reports in its root's `user.seamfs.status` (`key=value` lines).
    #[track_caller]
    pub fn status(&self) -> std::collections::BTreeMap<String, String> {
        let raw = crate::sys::getxattr(&self.mnt, "user.seamfs.status", 4096, false)
            .unwrap_or_else(|e| panic!("{}: getxattr user.seamfs.status of {}: {e}", self.what, self.mnt.display()));
        let text = String::from_utf8_lossy(&raw).into_owned();
        text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// The box id this seamfs mount serves as (`--box-id`, or this machine's default).
    #[track_caller]
    pub fn box_id(&self) -> String {
        self.status().remove("box_id").unwrap_or_else(|| panic!("{}: no box_id in user.seamfs.status", self.what))
    }

    /// This box's index on the lower, as a name in a git dir: `index-box.<id>`.
    #[track_caller]
    pub fn index_box(&self) -> String {
        format!("index-box.{}", self.box_id())
    }

    /// The daemon's pid, found by its unique `--log` argument.
    pub fn find_daemon(&self) -> Option<u32> {
        let pids = procfs::pids_with_arg(&self.log.to_string_lossy());
        assert!(pids.len() <= 1, "more than one process serves {}: {pids:?}", self.mnt.display());
        pids.first().copied()
    }

    /// The daemon's pid; panics when it is not running.
    #[track_caller]
    pub fn daemon_pid(&self) -> u32 {
        self.find_daemon()
            .unwrap_or_else(|| panic!("no daemon serves {} (log {})", self.mnt.display(), self.log.display()))
    }

    /// True while the mountpoint is in /proc/mounts.
    pub fn is_mounted(&self) -> bool {
        procfs::is_mounted(&self.mnt)
    }

    /// Unmounts (if still mounted) and waits for the daemon to exit. Idempotent.
    fn teardown(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let daemon = self.find_daemon();
        if self.is_mounted() {
            if let Err(e) = umount(&self.mnt) {
                problems.push(format!("unmount {}: {e}", self.mnt.display()));
            }
        }
        if let Some(pid) = daemon {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !procfs::fully_exited(pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if !procfs::fully_exited(pid) {
                problems.push(format!("daemon {pid} still running 10 s after the unmount: killed; its threads:\n{}", procfs::threads_report(pid)));
                // SAFETY: plain kill(2) of the daemon this guard started.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
        problems
    }

    /// Unmounts now, asserting the unmount worked and the daemon exited.
    #[track_caller]
    pub fn unmount(self) {
        let problems = self.teardown();
        assert!(problems.is_empty(), "{}: {}\n  log:\n{}", self.what, problems.join("; "), self.log_indented());
        assert!(!self.is_mounted(), "{} still mounted after unmount", self.mnt.display());
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let problems = self.teardown();
        for p in &problems {
            eprintln!("[seam-tests] {}: {p}", self.what);
        }
        if std::thread::panicking() {
            let cwd = std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_default();
            eprintln!(
                "==== test failed with {} mounted at {} (lower {})\n  test cwd: {cwd}\n  log {}:\n{}\n  listing of the lower:\n{}====",
                self.what,
                self.mnt.display(),
                self.lower.display(),
                self.log.display(),
                self.log_indented(),
                listing::dump(&self.lower, 300),
            );
        }
    }
}

/// umount2(2), retried while busy (a process of the test may still be leaving), then lazy.
fn umount(mnt: &Path) -> std::io::Result<()> {
    let c = CString::new(mnt.as_os_str().as_encoded_bytes()).expect("no NUL in a mount path");
    for _ in 0..50 {
        // SAFETY: valid C string.
        if unsafe { libc::umount2(c.as_ptr(), 0) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EBUSY) => std::thread::sleep(Duration::from_millis(100)),
            Some(libc::EINVAL) if !procfs::is_mounted(mnt) => return Ok(()),
            _ => break,
        }
    }
    // SAFETY: valid C string.
    if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Detaches every mount of type `fstype` stacked at `path` (a guard's cleanup of a mount the
/// test made by other means than [`Mount`]).
pub fn detach_all(path: &Path, fstype: &str) {
    while procfs::mount_at(path).is_some_and(|m| m.fstype == fstype) {
        let c = CString::new(path.as_os_str().as_encoded_bytes()).expect("no NUL in a mount path");
        // SAFETY: valid C string.
        if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
            break;
        }
    }
}

/// The passthrough mode that mount options `extra` ask for, as test reports name it.
pub fn mode_name(extra: &[&str]) -> &'static str {
    if extra.contains(&"--no-passthrough") {
        "--no-passthrough"
    } else {
        "passthrough"
    }
}

/// Runs `seamfs ARGS` without expecting a mount (for bad input), with the full report.
pub fn seamfs_cmd<S: AsRef<OsStr>>(args: &[S]) -> Ran {
    run(Command::new(bins::seamfs()).args(args))
}
