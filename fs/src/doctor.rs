//! `seamfs doctor [PATH]`: is the box's checkout served by a healthy seamfs, and is git set up
//! to work with it. Reads only; runs `git --version` and `git config` (box-side git, as the
//! box's own tools would).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::mountinfo;
use crate::report::{self, Finding, Severity};
use crate::status::{self, Probe};

/// `seamfs doctor` arguments.
#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// A path in the checkout (default: the current directory).
    pub path: Option<PathBuf>,
    /// One JSON document instead of text (fields: docs/box-setup.md, "seamfs doctor").
    #[arg(long)]
    pub json: bool,
}

/// reference-transaction hooks need git 2.31 (`prepared` with the refs locked).
const GIT_MIN: (u32, u32) = (2, 31);

fn row(kind: &'static str, severity: Severity, at: &Path, found: String, recovery: impl Into<String>) -> Finding {
    Finding { kind, severity, at: at.display().to_string(), found, recovery: recovery.into() }
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).current_dir(dir).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// `git version 2.39.5` → (2, 39).
fn parse_git_version(s: &str) -> Option<(u32, u32)> {
    let v = s.split_whitespace().nth(2)?;
    let mut it = v.split('.').map(|p| p.parse::<u32>().ok());
    Some((it.next()??, it.next()??))
}

/// The mount row and, when alive, what the daemon said.
fn mount_row(path: &Path) -> (Finding, Option<std::collections::BTreeMap<String, String>>) {
    let Some(m) = mountinfo::containing(path).filter(|m| m.is_seamfs()) else {
        let on = mountinfo::containing(path).map(|m| format!("{} at {}", m.fstype, m.target.display())).unwrap_or_default();
        let f = format!("not on seamfs (on {on})");
        let fix = "mount it: `seamfs-bootstrap up CHECKOUT` or `seamfs mount --over CHECKOUT`";
        return (row("mount", Severity::Error, path, f, fix), None);
    };
    let at = &m.target;
    match status::probe(at, Duration::from_secs(3)) {
        Probe::Alive(facts) => {
            let who = facts.get("pid").map(|p| format!("pid {p}")).unwrap_or_else(|| "a seamfs daemon".into());
            let version = facts.get("version").cloned().unwrap_or_default();
            (row("mount", Severity::Ok, at, format!("seamfs is up and answering ({who}, {version})"), ""), Some(facts))
        }
        Probe::Dead => {
            let fix = format!("`seamfs umount {0}`, then mount again (`seamfs-bootstrap up {0}`)", at.display());
            (row("mount", Severity::Error, at, "a dead seamfs mount: its daemon died".into(), fix), None)
        }
        p => {
            let fix = format!("look at the daemon's log; `seamfs umount {}` detaches it", at.display());
            (row("mount", Severity::Error, at, format!("seamfs mount, but {}", p.who()), fix), None)
        }
    }
}

/// Rows from the daemon's own facts: data path, share, index split.
fn facts_rows(at: &Path, f: &std::collections::BTreeMap<String, String>, rows: &mut Vec<Finding>) {
    let get = |k: &str| f.get(k).cloned().unwrap_or_else(|| "?".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string();
    let data = match get("data_path").as_str() {
        "passthrough" => "FUSE passthrough (file data at the share's speed)".to_string(),
        _ => format!("reads and writes through seamfs (no FUSE passthrough: kernel {kernel} before 6.9, or turned off)"),
    };
    rows.push(row("data-path", Severity::Info, at, data, ""));
    // Entries may be kept longer than the TTL over a lower that never revalidates (ADR 0049).
    let kept = f.get("work_tree_ttl").filter(|k| **k != get("ttl")).map(|k| format!(", entries kept {k} s")).unwrap_or_default();
    let share = format!("lower {} on {} ({}); seamfs work-tree TTL {} s{kept}", get("lower"), get("share_type"), get("share_options"), get("ttl"));
    rows.push(row("share", Severity::Info, at, share, ""));
    if get("index_split") == "true" {
        let found = format!("the box has its own index (index-box.{} on the share)", get("box_id"));
        rows.push(row("index-split", Severity::Ok, at, found, ""));
        rows.push(box_id_row(at, &get("box_id"), &get("box_id_from")));
    } else {
        let fix = "remount without no_index_split (or index_split = false in seamfs.toml)";
        rows.push(row("index-split", Severity::Warn, at, "index split off: both kernels write one .git/index".into(), fix));
    }
}

/// The box id and where it came from: a fallback is a warning (two boxes may share it).
fn box_id_row(at: &Path, id: &str, from: &str) -> Finding {
    let found = format!("box id {id} (from {from})");
    match from {
        "given" | "machine-id" => row("box-id", Severity::Info, at, found, ""),
        _ => row("box-id", Severity::Warn, at, found, "give each box its own id: --box-id ID, box_id in seamfs.toml or -o box_id=ID"),
    }
}

/// Is seam-git the hooks dir git uses here, named by an absolute path?
fn hooks_row(dir: &Path) -> Finding {
    let fix = "seam-git install-hooks /etc/seam-git/hooks && git config --system core.hooksPath /etc/seam-git/hooks";
    let Some(hp) = git(dir, &["config", "--get", "core.hooksPath"]).filter(|s| !s.is_empty()) else {
        let found = "core.hooksPath is not set: a refused ref move reads as git's \"Device or resource busy\"".into();
        return row("hooks", Severity::Warn, dir, found, fix);
    };
    let p = Path::new(&hp);
    let hook = p.join("reference-transaction");
    let is_shim = std::fs::read_link(&hook).is_ok_and(|t| t.file_name().is_some_and(|n| n == "seam-git"));
    match (p.is_absolute(), is_shim) {
        (true, true) => row("hooks", Severity::Ok, dir, format!("core.hooksPath {hp} runs seam-git"), ""),
        (false, _) => row("hooks", Severity::Warn, dir, format!("core.hooksPath {hp} is relative: git resolves it per repository"), fix),
        (true, false) => row("hooks", Severity::Warn, dir, format!("core.hooksPath {hp} has no seam-git reference-transaction hook"), fix),
    }
}

fn git_row(dir: &Path) -> Finding {
    let v = git(dir, &["--version"]).unwrap_or_default();
    match parse_git_version(&v) {
        Some(got) if got >= GIT_MIN => row("git-version", Severity::Ok, dir, v, ""),
        Some(_) => row("git-version", Severity::Warn, dir, format!("{v}: seam-git's reference-transaction hook needs 2.31"), "install git 2.31 or later in the box"),
        None => row("git-version", Severity::Error, dir, format!("no usable git on PATH ({v:?})"), "install git in the box"),
    }
}

/// Every check for `path`.
pub fn check(path: &Path) -> Vec<Finding> {
    let (mount, facts) = mount_row(path);
    let at = PathBuf::from(&mount.at);
    let mut rows = vec![mount];
    if let Some(f) = &facts {
        facts_rows(&at, f, &mut rows);
    }
    rows.push(hooks_row(path));
    rows.push(git_row(path));
    rows
}

/// Runs the doctor; exit 0 when nothing is at error, else 1.
pub fn main(a: &DoctorArgs) -> i32 {
    let path = a.path.clone().unwrap_or_else(|| PathBuf::from("."));
    let path = std::fs::canonicalize(&path).unwrap_or_else(|_| mountinfo::absolute(&path));
    let rows = check(&path);
    if a.json {
        println!("{}", report::json("seamfs doctor", &path.display().to_string(), &rows));
    } else {
        print!("{}", report::human(&rows));
    }
    i32::from(report::worst(&rows) == Severity::Error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_git_versions() {
        assert_eq!(parse_git_version("git version 2.39.5"), Some((2, 39)));
        assert_eq!(parse_git_version("git version 2.30.0.windows.1"), Some((2, 30)));
        assert!(parse_git_version("nope").is_none());
    }
}
