//! `seam-lab vm counts`: where a box git command's time goes in the guest, by counting.
//!
//! The guest mounts seamfs with `SEAMFS_LOG=debug`, which logs the creation of every FUSE
//! operation's span: the requests the guest kernel sent seamfs for one command are the span
//! lines its run added to the log. Each command also runs on the raw share, timed by the guest's
//! clock beside seamfs's, so a count can be weighed against the time it costs.

use std::collections::BTreeMap;
use std::path::Path;

use super::guest::{BootSpec, Guest, GUEST_ENV};
use super::{initramfs, static_dir, Cache, ShareMode};
use crate::lab::cleanup::{on_signal_cleanup, temp_dir, CleanupGuard};
use crate::lab::git::init_repo;
use crate::lab::LabError;
use crate::race::boxshell::guest_git_ms;

/// seamfs's log in the guest.
const LOG: &str = "/tmp/seamfs-counts.log";

/// The commands counted, each after the step before (a box's add and commit, then reads).
const COMMANDS: [&[&str]; 6] = [
    &["add", "box.txt"],
    &["commit", "-q", "-m", "box commit"],
    &["rev-parse", "HEAD"],
    &["status", "--porcelain"],
    &["log", "-n", "100", "--oneline"],
    &["reset", "-q", "--hard", "HEAD~"],
];

/// One command's figures.
#[derive(Debug)]
pub struct Counted {
    /// The git arguments.
    pub command: String,
    /// Guest time on the raw share, ms.
    pub raw_ms: f64,
    /// Guest time through seamfs, ms.
    pub seamfs_ms: f64,
    /// FUSE requests seamfs got, by operation.
    pub requests: BTreeMap<String, u64>,
    /// CPU time seamfs's threads spent on the command, ms (from their schedstat).
    pub seamfs_cpu_ms: f64,
}

/// Boots a guest over `mode`, counts, and returns the table as markdown.
pub fn run(cache: &Cache, mode: ShareMode, cpus: u32, repeat: usize) -> Result<String, LabError> {
    on_signal_cleanup();
    let _cleanup = CleanupGuard;
    let root = temp_dir(&format!("seam-lab-vm-counts-{}", mode.name()))?;
    let share = root.join("share");
    for d in ["raw", "seam"] {
        let p = share.join(d);
        std::fs::create_dir_all(&p).map_err(|e| LabError::new("create dir", &p, e))?;
        init_repo(&p)?;
    }
    let initrd = root.join("initramfs.cpio");
    initramfs::build(&cache.kernel()?, &static_dir()?, &initrd)?;
    let g = Guest::boot(cache, &BootSpec { mode, share_root: share, run_dir: root.clone(), initramfs: initrd, cpus })?;
    let up = g.sh(&format!("SEAMFS_LOG=debug seamfs-bootstrap up /share/seam --log {LOG}"))?;
    if up.code != 0 {
        return Err(LabError::new("mount seamfs in the guest", Path::new("/share/seam"), String::from_utf8_lossy(&up.stderr)));
    }
    let mut rows: Vec<Counted> = Vec::new();
    for round in 0..repeat {
        for dir in ["/share/raw", "/share/seam"] {
            g.write(&Path::new(dir).join("box.txt"), format!("box change {round}\n").as_bytes(), false)?;
        }
        for (i, args) in COMMANDS.iter().enumerate() {
            let raw_ms = guest_git_ms(&g, Path::new("/share/raw"), args)?;
            let before = log_lines(&g)?;
            let cpu_before = seamfs_cpu_ns(&g)?;
            let seamfs_ms = guest_git_ms(&g, Path::new("/share/seam"), args)?;
            let seamfs_cpu_ms = (seamfs_cpu_ns(&g)? - cpu_before) as f64 / 1e6;
            let requests = spans_since(&g, before)?;
            if round == 0 {
                rows.push(Counted { command: args.join(" "), raw_ms, seamfs_ms, requests, seamfs_cpu_ms });
            } else {
                // Later rounds add their times (averaged below); the counts are the last round's.
                let r = &mut rows[i];
                r.raw_ms += raw_ms;
                r.seamfs_ms += seamfs_ms;
                r.seamfs_cpu_ms += seamfs_cpu_ms;
                r.requests = requests;
            }
        }
    }
    for r in &mut rows {
        r.raw_ms /= repeat as f64;
        r.seamfs_ms /= repeat as f64;
        r.seamfs_cpu_ms /= repeat as f64;
    }
    let down = g.sh("seamfs-bootstrap down /share/seam")?;
    if down.code != 0 {
        return Err(LabError::new("unmount seamfs in the guest", Path::new("/share/seam"), String::from_utf8_lossy(&down.stderr)));
    }
    g.shutdown()?;
    Ok(markdown(mode, repeat, &rows))
}

/// Nanoseconds on CPU of all of seamfs's threads so far (`/proc/PID/task/*/schedstat`).
fn seamfs_cpu_ns(g: &Guest) -> Result<i64, LabError> {
    let r = g.sh("cat /proc/$(pidof seamfs)/task/*/schedstat | awk '{ s += $1 } END { printf \"%d\", s }'")?;
    let text = String::from_utf8_lossy(&r.stdout);
    text.trim().parse().map_err(|_| LabError::new("read seamfs's schedstat in the guest", Path::new("/proc"), format!("{text:?}")))
}

fn log_text(g: &Guest) -> Result<String, LabError> {
    let r = g.run(Path::new("/"), &[b"/bin/cat", LOG.as_bytes()], &GUEST_ENV, None)?;
    Ok(String::from_utf8_lossy(&r.stdout).into_owned())
}

fn log_lines(g: &Guest) -> Result<usize, LabError> {
    Ok(log_text(g)?.lines().count())
}

/// FUSE operations whose spans were created after line `from` of the log, by name.
fn spans_since(g: &Guest, from: usize) -> Result<BTreeMap<String, u64>, LabError> {
    let mut out = BTreeMap::new();
    for line in log_text(g)?.lines().skip(from) {
        if let Some(op) = span_name(line) {
            *out.entry(op.to_string()).or_insert(0) += 1;
        }
    }
    Ok(out)
}

/// The span name of a `FmtSpan::NEW` line (`… DEBUG lookup{parent=1 name="x"}: seamfs::filesystem: new`).
fn span_name(line: &str) -> Option<&str> {
    if !line.ends_with(": new") {
        return None;
    }
    let rest = line.split(" DEBUG ").nth(1)?;
    let name = &rest[..rest.find(['{', ':'])?];
    (!name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_')).then_some(name)
}

fn markdown(mode: ShareMode, repeat: usize, rows: &[Counted]) -> String {
    let mut s = format!("## {} (mean of {repeat} rounds; requests of the last)\n\n| command | raw ms | seamfs ms | ratio | seamfs CPU ms | requests to seamfs | by op |\n|---|---|---|---|---|---|---|\n", mode.name());
    for r in rows {
        let total: u64 = r.requests.values().sum();
        let mut ops: Vec<(&String, &u64)> = r.requests.iter().collect();
        ops.sort_by_key(|(_, n)| std::cmp::Reverse(**n));
        let by: Vec<String> = ops.iter().take(8).map(|(o, n)| format!("{o} {n}")).collect();
        s.push_str(&format!(
            "| `git {}` | {:.1} | {:.1} | {:.2} | {:.1} | {total} | {} |\n",
            r.command,
            r.raw_ms,
            r.seamfs_ms,
            r.seamfs_ms / r.raw_ms,
            r.seamfs_cpu_ms,
            by.join(", ")
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn span_lines_are_recognised() {
        let l = "2026-12-01T13:00:00.1Z DEBUG lookup{parent=1 name=\"HEAD\"}: seamfs::filesystem: new";
        assert_eq!(super::span_name(l), Some("lookup"));
        assert_eq!(super::span_name("2026 DEBUG release{ino=3}: seamfs::filesystem: new"), Some("release"));
        assert_eq!(super::span_name("2026 INFO seamfs::mount: serving"), None);
        assert_eq!(super::span_name("2026 DEBUG getattr{ino=1}: seamfs::core: refreshed"), None);
    }
}
