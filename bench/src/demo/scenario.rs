//! The demo's two parts: reads of HEAD after host commits, and a box commit right after a host
//! commit, each through the raw share and through seamfs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::report::{BoxCommitRow, DemoReport, Read, ReadRow};
use super::DemoOptions;
use crate::lab::cleanup::{temp_dir, unmount_now};
use crate::lab::git::{git, git_cmd, host_commit, init_repo, write};
use crate::lab::mounts::{mount_seamfs, mount_share, seamfs_bin, ShareArgs};
use crate::lab::LabError;

/// Which side the box looks through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Through {
    /// The share emulator alone (the control).
    RawShare,
    /// seamfs over the share emulator.
    Seamfs,
}

impl Through {
    /// Label for tables and JSON.
    pub fn label(self) -> &'static str {
        match self {
            Through::RawShare => "raw share",
            Through::Seamfs => "seamfs",
        }
    }
}

/// Runs both parts.
pub fn run_all(opts: &DemoOptions) -> Result<DemoReport, LabError> {
    seamfs_bin()?;
    let root = temp_dir("seam-lab-demo")?;
    let reads = reads(&root, opts)?;
    let mut box_commits = Vec::new();
    for through in [Through::RawShare, Through::Seamfs] {
        box_commits.push(box_commit(&root, through, opts.ttl)?);
    }
    Ok(DemoReport { ttl: opts.ttl, reads, box_commits })
}

fn subdir(root: &Path, name: &str) -> Result<PathBuf, LabError> {
    let d = root.join(name);
    std::fs::create_dir(&d).map_err(|e| LabError::new("create dir", &d, e))?;
    Ok(d)
}

/// The box's view of a backing dir: the mountpoint the box works in, and the mounts under it
/// (newest first, the order to unmount them).
struct BoxView {
    dir: PathBuf,
    mounts: Vec<PathBuf>,
}

impl BoxView {
    fn new(root: &Path, tag: &str, backing: &Path, through: Through, ttl: f64) -> Result<BoxView, LabError> {
        let share = subdir(root, &format!("{tag}-share"))?;
        mount_share(backing, &share, &ShareArgs { ttl: Some(ttl), extra: Vec::new() })?;
        if through == Through::RawShare {
            return Ok(BoxView { dir: share.clone(), mounts: vec![share] });
        }
        let top = subdir(root, &format!("{tag}-seamfs"))?;
        mount_seamfs(&share, &top)?;
        Ok(BoxView { dir: top.clone(), mounts: vec![top, share] })
    }

    fn unmount(self) -> Result<(), LabError> {
        for m in &self.mounts {
            unmount_now(m)?;
        }
        Ok(())
    }
}

fn read_head(dir: &Path) -> Read {
    match git(dir, &["rev-parse", "HEAD"]) {
        Ok(v) => Read::Value(v),
        Err(e) => Read::Error(e.cause),
    }
}

/// Part 1: host commits spaced by a third of the TTL; after each, HEAD as the host, the raw
/// share and seamfs read it.
fn reads(root: &Path, opts: &DemoOptions) -> Result<Vec<ReadRow>, LabError> {
    let host = subdir(root, "reads-host")?;
    init_repo(&host)?;
    let raw = BoxView::new(root, "reads-raw", &host, Through::RawShare, opts.ttl)?;
    let sfs = BoxView::new(root, "reads", &host, Through::Seamfs, opts.ttl)?;
    // The box has just looked at the repository, as a shell prompt or an IDE does.
    read_head(&raw.dir);
    read_head(&sfs.dir);
    let spacing = Duration::from_secs_f64(opts.ttl * 0.3);
    let mut rows = Vec::new();
    for n in 1..=opts.commits {
        let truth = host_commit(&host, n)?;
        let at = Instant::now();
        let raw_read = read_head(&raw.dir);
        let sfs_read = read_head(&sfs.dir);
        rows.push(ReadRow { n, truth, raw: raw_read, seamfs: sfs_read, after_ms: at.elapsed().as_millis() as u64 });
        std::thread::sleep(spacing);
    }
    sfs.unmount()?;
    raw.unmount()?;
    Ok(rows)
}

/// Part 2: the box reads HEAD, the host commits, the box commits at once. Each side starts from
/// its own fresh repository so both start from the same state.
fn box_commit(root: &Path, through: Through, ttl: f64) -> Result<BoxCommitRow, LabError> {
    let tag = match through {
        Through::RawShare => "commit-raw",
        Through::Seamfs => "commit-seamfs",
    };
    let host = subdir(root, &format!("{tag}-host"))?;
    let base = init_repo(&host)?;
    let view = BoxView::new(root, tag, &host, through, ttl)?;
    read_head(&view.dir);
    let host_c = host_commit(&host, 1)?;
    let outcome = commit_in_box(&view.dir);
    let branch = git(&host, &["rev-parse", "refs/heads/main"])?;
    let parent = git(&host, &["rev-parse", "refs/heads/main^"]).ok();
    let kept = git_cmd(&host)
        .args(["merge-base", "--is-ancestor", &host_c, &branch])
        .status()
        .map_err(|e| LabError::new("run git merge-base", &host, e))?
        .success();
    view.unmount()?;
    Ok(BoxCommitRow {
        through: through.label(),
        base,
        host_commit: host_c,
        box_commit: outcome.as_ref().ok().cloned(),
        box_error: outcome.err().map(|e| e.to_string()),
        branch_parent: parent,
        branch,
        host_commit_kept: kept,
    })
}

fn commit_in_box(dir: &Path) -> Result<String, LabError> {
    write(&dir.join("box.txt"), "written in the box\n")?;
    git(dir, &["add", "box.txt"])?;
    git(dir, &["commit", "-q", "-m", "box commit"])?;
    git(dir, &["rev-parse", "HEAD"])
}
