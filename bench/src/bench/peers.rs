//! The peer FUSE layers (bindfs, fuse-overlayfs) come from Debian's packages: installed here when
//! missing, or skipped with a note saying why.

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The program on PATH, if any.
pub fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(program)).find(|p| p.is_file())
}

/// Makes sure `program` (from Debian package `package`) is installed: `apt-get install` when it
/// is missing, after an `apt-get update` if the first try fails (a fresh machine has no lists).
/// Err is the note to print when the layer must be skipped.
pub fn ensure(program: &str, package: &str) -> Result<(), String> {
    if which(program).is_some() {
        return Ok(());
    }
    eprintln!("[bench] {program} missing: apt-get install -y {package}");
    if apt(&["install", "-y", package]).is_err() {
        apt(&["update"]).map_err(|e| format!("{program} skipped: apt-get update failed: {e}"))?;
        apt(&["install", "-y", package])
            .map_err(|e| format!("{program} skipped: apt-get install {package} failed: {e}"))?;
    }
    match which(program) {
        Some(_) => Ok(()),
        None => Err(format!("{program} skipped: package {package} installed but {program} is not on PATH")),
    }
}

fn apt(args: &[&str]) -> Result<(), String> {
    let out = Command::new("apt-get")
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("run apt-get: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    Err(format!("{}: {}", out.status, err.trim().lines().last().unwrap_or("")))
}
