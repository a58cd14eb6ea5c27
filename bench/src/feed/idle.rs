//! `git status` of a generated tree (the bench's generator, `bench::gen`) through each target,
//! warm (right after a run) and after a long idle, as a box user who comes back to the terminal.
//! The three stages are mounted side by side and idle together, so one idle costs the run once;
//! each is then timed in turn (the later ones idle a little longer: the report says how long).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use super::{stage, FeedTarget};
use crate::bench::gen;
use crate::bench::layers::copy_tree;
use crate::lab::git::{git, git_cmd};
use crate::lab::LabError;
use crate::race::rig::Rig;

/// Warm runs per target (their median is reported), after one untimed run.
const WARM_RUNS: usize = 3;

/// One target's figures.
#[derive(Debug, Clone)]
pub struct IdleRun {
    /// The target.
    pub target: FeedTarget,
    /// The first `git status` through the mount (cold caches), seconds.
    pub first_s: f64,
    /// Median of the warm runs, seconds.
    pub warm_s: f64,
    /// The run after the idle, seconds.
    pub idle_s: f64,
    /// How long it was idle (from the end of its last run), seconds.
    pub idled_s: f64,
    /// `git status --porcelain` lines after the idle (0: clean, as on the host).
    pub changes_shown: usize,
}

/// The whole run.
#[derive(Debug, Clone)]
pub struct IdleReport {
    /// Files in the tree.
    pub files: usize,
    /// The idle asked for.
    pub idle: Duration,
    /// One per target, in order.
    pub runs: Vec<IdleRun>,
}

/// The host's checkout: a copy of the generated repository, its index refreshed on the host (a
/// copy has new inode numbers), so every target starts from a clean `git status`.
fn prepare(host: &Path, repo: &Path) -> Result<(), LabError> {
    copy_tree(repo, host)?;
    git(host, &["status", "--porcelain"]).map(drop)
}

/// One timed `git status --porcelain` in `dir`: seconds and the lines it printed.
fn status(dir: &Path) -> Result<(f64, usize), LabError> {
    let t = Instant::now();
    let out: std::process::Output = {
        let mut c: Command = git_cmd(dir);
        c.args(["status", "--porcelain"]).output().map_err(|e| LabError::new("run git status", dir, e))?
    };
    let s = t.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(LabError::new("git status", dir, String::from_utf8_lossy(&out.stderr).trim().to_string()));
    }
    Ok((s, String::from_utf8_lossy(&out.stdout).lines().count()))
}

/// Stages every target, times them warm, lets them idle, times them again; unmounts all.
pub fn run(root: &Path, files: usize, idle: Duration) -> Result<IdleReport, LabError> {
    let repo = gen::repo(files, 1)?;
    let mut rigs: Vec<(FeedTarget, Rig)> = Vec::new();
    let result = (|| {
        for t in FeedTarget::ALL {
            eprintln!("[feed] idle-status: staging a {files}-file checkout on {}", t.key());
            let (rig, ()) = stage(&root.join(format!("idle-{}", t.key())), t, |h, _| prepare(h, &repo.dir))?;
            rigs.push((t, rig));
        }
        let mut runs = Vec::new();
        for (t, rig) in &rigs {
            let (first_s, _) = status(&rig.box_dir)?;
            let mut warm: Vec<f64> = (0..WARM_RUNS).map(|_| status(&rig.box_dir).map(|x| x.0)).collect::<Result<_, _>>()?;
            warm.sort_by(f64::total_cmp);
            runs.push((IdleRun { target: *t, first_s, warm_s: warm[warm.len() / 2], idle_s: 0.0, idled_s: 0.0, changes_shown: 0 }, Instant::now()));
        }
        eprintln!("[feed] idle-status: idle for {} s", idle.as_secs());
        std::thread::sleep(idle);
        for ((r, last), (_, rig)) in runs.iter_mut().zip(&rigs) {
            r.idled_s = last.elapsed().as_secs_f64();
            (r.idle_s, r.changes_shown) = status(&rig.box_dir)?;
        }
        Ok(IdleReport { files, idle, runs: runs.into_iter().map(|x| x.0).collect() })
    })();
    for (_, rig) in rigs {
        rig.teardown()?;
    }
    result
}
