//! The workloads, and the steps that run them on one layer: each step prepares untimed, times
//! what was asked, and puts the repo back as it found it, through the same layer (so that
//! layer's own cache stays coherent with what it wrote).

use std::io::Read;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::gen::BIG_NAME;
use crate::lab::git::{git, git_cmd};
use crate::lab::LabError;

/// A timed workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum)]
pub enum Workload {
    /// `git status`, caches warm (right after another one).
    GitStatusWarm,
    /// `git status` after sleeping past the share's TTL.
    GitStatusExpired,
    /// `git add -A` of 1,000 changed files.
    GitAdd,
    /// `git commit` of those.
    GitCommit,
    /// `git log -n 1000`.
    GitLog,
    /// `git checkout` of the other branch and back.
    GitCheckout,
    /// Walk the work tree and read every byte of every file.
    ReadAll,
    /// Sequential read of the big file.
    #[value(name = "read-1g")]
    Read1g,
}

impl Workload {
    /// Every workload, in run and report order.
    pub const ALL: [Workload; 8] = [
        Workload::GitStatusWarm,
        Workload::GitStatusExpired,
        Workload::GitAdd,
        Workload::GitCommit,
        Workload::GitLog,
        Workload::GitCheckout,
        Workload::ReadAll,
        Workload::Read1g,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Workload::GitStatusWarm => "git-status-warm",
            Workload::GitStatusExpired => "git-status-expired",
            Workload::GitAdd => "git-add",
            Workload::GitCommit => "git-commit",
            Workload::GitLog => "git-log",
            Workload::GitCheckout => "git-checkout",
            Workload::ReadAll => "read-all",
            Workload::Read1g => "read-1g",
        }
    }

    /// One line saying what is timed.
    pub fn describe(self) -> &'static str {
        match self {
            Workload::GitStatusWarm => "`git status` right after an untimed one (caches warm)",
            Workload::GitStatusExpired => "`git status` after sleeping TTL + 0.2 s",
            Workload::GitAdd => "`git add -A` of 1,000 files just appended to (through the layer)",
            Workload::GitCommit => "`git commit` of those 1,000 files",
            Workload::GitLog => "`git log -n 1000` (default format, to /dev/null)",
            Workload::GitCheckout => "`git checkout other` and back to `main` (350 files differ)",
            Workload::ReadAll => "walk the work tree (not .git) and read every file, 256 KiB reads",
            Workload::Read1g => "sequential read of the big file outside git, 4 MiB reads",
        }
    }
}

/// A unit of scheduling: one or more workloads that must run together on a layer (a commit needs
/// the add before it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// [`Workload::GitStatusWarm`].
    StatusWarm,
    /// [`Workload::GitStatusExpired`].
    StatusExpired,
    /// [`Workload::GitAdd`] then [`Workload::GitCommit`], then a reset.
    AddCommit,
    /// [`Workload::GitLog`].
    Log,
    /// [`Workload::GitCheckout`].
    Checkout,
    /// [`Workload::ReadAll`].
    ReadAll,
    /// [`Workload::Read1g`].
    ReadBig,
}

/// The steps covering `selected`, in run order.
pub fn steps(selected: &[Workload]) -> Vec<Step> {
    let has = |w| selected.contains(&w);
    let mut s = Vec::new();
    let table = [
        (Step::StatusWarm, has(Workload::GitStatusWarm)),
        (Step::StatusExpired, has(Workload::GitStatusExpired)),
        (Step::AddCommit, has(Workload::GitAdd) || has(Workload::GitCommit)),
        (Step::Log, has(Workload::GitLog)),
        (Step::Checkout, has(Workload::GitCheckout)),
        (Step::ReadAll, has(Workload::ReadAll)),
        (Step::ReadBig, has(Workload::Read1g)),
    ];
    for (step, wanted) in table {
        if wanted {
            s.push(step);
        }
    }
    s
}

/// What the steps need to know about the repo and the run.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// The share's TTL (for the expired status).
    pub ttl: Duration,
    /// Work-tree paths the add step changes.
    pub changed: Vec<String>,
    /// `main`'s commit id: every step leaves HEAD there.
    pub base: String,
    /// Bytes a read-all must return (the work tree's files, measured on the cached repo).
    pub tree_bytes: u64,
    /// Bytes of the big file.
    pub big_bytes: u64,
    /// Drop the page cache before each read step.
    pub drop_caches: bool,
    /// Workloads to time.
    pub selected: Vec<Workload>,
}

/// Runs `step` on the repo at `dir`; the timed workloads in milliseconds.
pub fn run_step(step: Step, dir: &Path, ctx: &Ctx) -> Result<Vec<(Workload, f64)>, LabError> {
    match step {
        Step::StatusWarm => {
            // Other layers ran since this one was last used, longer than the TTL: one untimed
            // status first makes the timed one warm.
            timed_git(dir, &["status"])?;
            Ok(vec![(Workload::GitStatusWarm, timed_git(dir, &["status"])?)])
        }
        Step::StatusExpired => {
            std::thread::sleep(ctx.ttl + Duration::from_millis(200));
            Ok(vec![(Workload::GitStatusExpired, timed_git(dir, &["status"])?)])
        }
        Step::AddCommit => add_commit(dir, ctx),
        Step::Log => Ok(vec![(Workload::GitLog, timed_git(dir, &["log", "-n", "1000"])?)]),
        Step::Checkout => {
            let t = Instant::now();
            git(dir, &["checkout", "-q", "other"])?;
            git(dir, &["checkout", "-q", "main"])?;
            let ms = ms(t);
            check_head(dir, ctx)?;
            Ok(vec![(Workload::GitCheckout, ms)])
        }
        Step::ReadAll => {
            drop_caches(ctx)?;
            let t = Instant::now();
            let bytes = read_all(dir)?;
            let ms = ms(t);
            if bytes != ctx.tree_bytes {
                return Err(LabError::new(
                    "read all",
                    dir,
                    format!("read {bytes} bytes, the work tree has {}", ctx.tree_bytes),
                ));
            }
            Ok(vec![(Workload::ReadAll, ms)])
        }
        Step::ReadBig => {
            drop_caches(ctx)?;
            let path = dir.join(BIG_NAME);
            let t = Instant::now();
            let bytes = read_file(&path, &mut vec![0u8; 4 << 20])?;
            let ms = ms(t);
            if bytes != ctx.big_bytes {
                return Err(LabError::new("read", &path, format!("read {bytes} bytes of {}", ctx.big_bytes)));
            }
            Ok(vec![(Workload::Read1g, ms)])
        }
    }
}

/// Appends to the changed files (untimed), `git add -A`, `git commit`, then `reset --hard` to
/// the base, which also restores the files.
fn add_commit(dir: &Path, ctx: &Ctx) -> Result<Vec<(Workload, f64)>, LabError> {
    use std::io::Write;
    for rel in &ctx.changed {
        let p = dir.join(rel);
        let mut f =
            std::fs::OpenOptions::new().append(true).open(&p).map_err(|e| LabError::new("open for append", &p, e))?;
        f.write_all(b"bench change\n").map_err(|e| LabError::new("append", &p, e))?;
    }
    let mut out = Vec::new();
    let add = timed_git(dir, &["add", "-A"])?;
    let commit = timed_git(dir, &["commit", "-q", "--no-verify", "-m", "bench commit"])?;
    if ctx.selected.contains(&Workload::GitAdd) {
        out.push((Workload::GitAdd, add));
    }
    if ctx.selected.contains(&Workload::GitCommit) {
        out.push((Workload::GitCommit, commit));
    }
    git(dir, &["reset", "-q", "--hard", &ctx.base])?;
    check_head(dir, ctx)?;
    Ok(out)
}

/// A step that leaves HEAD elsewhere would skew every later one: stop instead.
fn check_head(dir: &Path, ctx: &Ctx) -> Result<(), LabError> {
    let head = git(dir, &["rev-parse", "HEAD"])?;
    let branch = git(dir, &["symbolic-ref", "--short", "HEAD"])?;
    if head != ctx.base || branch != "main" {
        return Err(LabError::new("check HEAD", dir, format!("{branch} at {head}, expected main at {}", ctx.base)));
    }
    Ok(())
}

/// Runs git with stdout discarded; wall time from spawn to exit, in ms.
pub fn timed_git(dir: &Path, args: &[&str]) -> Result<f64, LabError> {
    let mut cmd = git_cmd(dir);
    cmd.args(args).stdout(Stdio::null()).stderr(Stdio::piped());
    let t = Instant::now();
    let out = cmd.output().map_err(|e| LabError::new(format!("run git {}", args.join(" ")), dir, e))?;
    let ms = ms(t);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(LabError::new(format!("git {}", args.join(" ")), dir, format!("{}: {}", out.status, err.trim())));
    }
    Ok(ms)
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

/// Every byte of every file below `root`, except `.git` and the big file at the root, as an
/// indexer or `grep -r` reads a checkout. Returns the bytes read.
pub fn read_all(root: &Path) -> Result<u64, LabError> {
    let mut buf = vec![0u8; 256 << 10];
    let mut total = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| LabError::new("read dir", &dir, e))?;
        for e in entries {
            let e = e.map_err(|e| LabError::new("read dir entry", &dir, e))?;
            let path = e.path();
            if dir == root && (e.file_name() == ".git" || e.file_name() == BIG_NAME) {
                continue;
            }
            let ft = e.file_type().map_err(|e| LabError::new("file type", &path, e))?;
            if ft.is_dir() {
                stack.push(path);
            } else if ft.is_file() {
                total += read_file(&path, &mut buf)?;
            }
        }
    }
    Ok(total)
}

/// Reads a whole file with `buf`-sized reads; the bytes read.
fn read_file(path: &Path, buf: &mut [u8]) -> Result<u64, LabError> {
    let mut f = std::fs::File::open(path).map_err(|e| LabError::new("open", path, e))?;
    let mut total = 0u64;
    loop {
        match f.read(buf) {
            Ok(0) => return Ok(total),
            Ok(n) => total += n as u64,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(LabError::new("read", path, e)),
        }
    }
}

/// With `--drop-caches`: the page cache (every FUSE layer's too) is emptied, so the read measures
/// the disk and the layer rather than memory. Global to the machine: off by default.
fn drop_caches(ctx: &Ctx) -> Result<(), LabError> {
    if !ctx.drop_caches {
        return Ok(());
    }
    let p = Path::new("/proc/sys/vm/drop_caches");
    // SAFETY: sync has no failure mode.
    unsafe { libc::sync() };
    std::fs::write(p, "3\n").map_err(|e| LabError::new("write", p, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_alone_still_runs_the_add_step() {
        assert_eq!(steps(&[Workload::GitCommit]), vec![Step::AddCommit]);
        assert_eq!(steps(&Workload::ALL).len(), 7);
    }
}
