//! Mounting the lab's layers by running their binaries, as a user would: `seam-lab share` for the
//! share emulator and `seamfs mount` over it. Both daemonise and return once the mount answers.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::cleanup::mounting;
use super::{bin_dir, LabError};

/// The share emulator's settings as command-line arguments.
#[derive(Debug, Clone, Default)]
pub struct ShareArgs {
    /// Entry, attribute and negative TTL in seconds (None: the emulator's default, 1 s).
    pub ttl: Option<f64>,
    /// Extra arguments (`--fault stale-old --window 1000 --seed 3`...).
    pub extra: Vec<String>,
}

/// Mounts the share emulator over `backing` on `mnt`.
pub fn mount_share(backing: &Path, mnt: &Path, args: &ShareArgs) -> Result<(), LabError> {
    let exe = std::env::current_exe().map_err(|e| LabError::new("locate current exe", mnt, e))?;
    let mut cmd = Command::new(exe);
    cmd.arg("share").arg(backing).arg(mnt);
    if let Some(t) = args.ttl {
        let t = t.to_string();
        cmd.args(["--entry-ttl", &t, "--attr-ttl", &t, "--negative-ttl", &t]);
    }
    cmd.args(&args.extra);
    run_mount(cmd, "mount share emulator", mnt)
}

/// Mounts the fast share (`seam-lab share --fast`, ADR 0024) over `backing` on `mnt`, with entry
/// and attribute TTL `ttl` and an fd budget (None: its default).
pub fn mount_fast_share(backing: &Path, mnt: &Path, ttl: f64, budget: Option<usize>) -> Result<(), LabError> {
    let exe = std::env::current_exe().map_err(|e| LabError::new("locate current exe", mnt, e))?;
    let mut cmd = Command::new(exe);
    let t = ttl.to_string();
    cmd.arg("share").arg("--fast").arg(backing).arg(mnt).args(["--entry-ttl", &t, "--attr-ttl", &t]);
    if let Some(b) = budget {
        cmd.args(["--fd-budget", &b.to_string()]);
    }
    run_mount(cmd, "mount fast share", mnt)
}

/// Mounts seamfs over `lower` on `mnt`.
pub fn mount_seamfs(lower: &Path, mnt: &Path) -> Result<(), LabError> {
    mount_seamfs_with(lower, mnt, &[])
}

/// Mounts seamfs over `lower` on `mnt` with extra arguments (`--log FILE`...).
pub fn mount_seamfs_with(lower: &Path, mnt: &Path, extra: &[String]) -> Result<(), LabError> {
    let exe = seamfs_bin()?;
    let mut cmd = Command::new(&exe);
    cmd.arg("mount").arg(lower).arg(mnt).args(extra);
    run_mount(cmd, "mount seamfs", mnt)
}

/// The `seamfs` binary next to this one.
pub fn seamfs_bin() -> Result<PathBuf, LabError> {
    let p = bin_dir()?.join("seamfs");
    if !p.is_file() {
        return Err(LabError::new("find seamfs", &p, "not built (cargo build -p seamfs)"));
    }
    Ok(p)
}

/// Runs a mount command that daemonises once the mount is up, registered for cleanup first.
pub fn run_mount(mut cmd: Command, op: &str, mnt: &Path) -> Result<(), LabError> {
    mounting(mnt, || {
        let out = cmd.output().map_err(|e| LabError::new(op, mnt, e))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(LabError::new(op, mnt, format!("{}: {}", out.status, err.trim())));
        }
        Ok(())
    })
}
