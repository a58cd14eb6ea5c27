//! `seam-lab vm setup`: everything a guest run needs, prepared once under the cache directory:
//! qemu and busybox from Debian's packages, a stock Debian 6.1 kernel unpacked (with the
//! modules the guest loads), and virtiofsd built from crates.io. Idempotent: a step whose
//! result is already there says so and is skipped. Each step says what it did and how long it
//! took.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use super::Cache;
use crate::lab::LabError;

/// Debian packages the lab needs on the host: (a file that shows it is installed, package).
const PACKAGES: [(&str, &str); 4] = [
    ("/usr/bin/qemu-system-x86_64", "qemu-system-x86"),
    ("/bin/busybox", "busybox-static"),
    ("/usr/include/seccomp.h", "libseccomp-dev"),
    ("/usr/include/cap-ng.h", "libcap-ng-dev"),
];

/// The guest's kernel series: Debian 12's, which has no FUSE passthrough (6.9+).
const KERNEL_SERIES: &str = "6.1.0";
/// virtiofsd's version requirement for `cargo install`.
const VIRTIOFSD_VERSION: &str = "~1.14";

/// Runs every step; prints one line per step.
pub fn setup(cache: &Cache) -> Result<(), LabError> {
    std::fs::create_dir_all(&cache.root).map_err(|e| LabError::new("create cache dir", &cache.root, e))?;
    step("host packages (qemu-system-x86, busybox-static, libseccomp-dev, libcap-ng-dev)", packages)?;
    step(&format!("guest kernel (linux-image-{KERNEL_SERIES}-*-amd64, unpacked)"), || kernel(cache))?;
    step(&format!("virtiofsd {VIRTIOFSD_VERSION} from crates.io"), || virtiofsd(cache))?;
    println!("vm setup: done; cache {}", cache.root.display());
    Ok(())
}

fn step(what: &str, f: impl FnOnce() -> Result<String, LabError>) -> Result<(), LabError> {
    let t = Instant::now();
    let said = f()?;
    println!("vm setup: {what}: {said} ({:.1} s)", t.elapsed().as_secs_f64());
    Ok(())
}

fn run(cmd: &mut Command, op: &str, at: &Path) -> Result<String, LabError> {
    let out = cmd.output().map_err(|e| LabError::new(op, at, e))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(8).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(LabError::new(op, at, format!("{}: {}", out.status, tail.join("\n"))));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn packages() -> Result<String, LabError> {
    let missing: Vec<&str> = PACKAGES.iter().filter(|(f, _)| !Path::new(f).exists()).map(|(_, p)| *p).collect();
    if missing.is_empty() {
        return Ok("already installed".into());
    }
    let apt = Path::new("/usr/bin/apt-get");
    run(Command::new(apt).args(["update", "-qq"]), "apt-get update", apt)?;
    run(
        Command::new(apt).args(["install", "-y", "-qq", "--no-install-recommends"]).args(&missing).env("DEBIAN_FRONTEND", "noninteractive"),
        "apt-get install",
        apt,
    )?;
    Ok(format!("installed {}", missing.join(", ")))
}

fn kernel(cache: &Cache) -> Result<String, LabError> {
    if let Ok(k) = cache.kernel() {
        return Ok(format!("already unpacked: {}", k.release));
    }
    let list = run(
        Command::new("apt-cache").args(["search", "--names-only", &format!("^linux-image-{}-[0-9]+-amd64$", KERNEL_SERIES.replace('.', "\\."))]),
        "apt-cache search",
        &cache.root,
    )?;
    let newest = list
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|p| Some((p.strip_prefix(&format!("linux-image-{KERNEL_SERIES}-"))?.strip_suffix("-amd64")?.parse::<u32>().ok()?, p)))
        .max()
        .map(|(_, p)| p.to_string())
        .ok_or_else(|| LabError::new("find a Debian kernel package", &cache.root, format!("no linux-image-{KERNEL_SERIES}-N-amd64 in apt's lists (run apt-get update)")))?;
    let dl = cache.root.join("dl");
    std::fs::create_dir_all(&dl).map_err(|e| LabError::new("create dir", &dl, e))?;
    run(Command::new("apt-get").args(["download", "-qq", &newest]).current_dir(&dl), "apt-get download", &dl)?;
    let deb = std::fs::read_dir(&dl)
        .map_err(|e| LabError::new("list", &dl, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(&format!("{newest}_")) && n.ends_with(".deb")))
        .ok_or_else(|| LabError::new("find the downloaded package", &dl, format!("no {newest}_*.deb")))?;
    let tmp = cache.root.join("kernel.partial");
    let _ = std::fs::remove_dir_all(&tmp);
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&tmp), "dpkg-deb -x", &deb)?;
    let dest = cache.root.join("kernel");
    let _ = std::fs::remove_dir_all(&dest);
    std::fs::rename(&tmp, &dest).map_err(|e| LabError::new("rename into place", &dest, e))?;
    let _ = std::fs::remove_file(&deb);
    let k = cache.kernel()?;
    Ok(format!("{newest} ({})", k.release))
}

fn virtiofsd(cache: &Cache) -> Result<String, LabError> {
    let bin = cache.virtiofsd();
    if bin.is_file() {
        return Ok(format!("already built: {}", bin.display()));
    }
    let root: PathBuf = cache.root.join("virtiofsd");
    run(
        Command::new("cargo").args(["install", "--locked", "--quiet", "virtiofsd", "--version", VIRTIOFSD_VERSION, "--root"]).arg(&root),
        "cargo install virtiofsd",
        &root,
    )?;
    Ok(format!("built {}", bin.display()))
}
