//! `race index-poller`: the host runs `git status` (which rewrites its index) every 50 ms, as an
//! IDE does, while the box makes N commits with `git add` + `git commit`.
//!
//! The box pauses longer than the share's TTL before every tenth commit, as an agent thinking
//! between edits does: only then does its kernel look `index` up again and meet the host's
//! rewrite (a box that never pauses keeps reading its own last write, which is harmless here).
//!
//! Both sides look at their index after every step: `git ls-files` listing none of the seed files
//! is an emptied index; `git status` showing every seed file as a staged deletion is the "missing
//! index read as empty" failure; a read that fails is an index read error. At the end the host's
//! HEAD must still hold every seed file and every file a landed box commit added (a commit made
//! from an emptied index silently deletes them), and `git fsck` must be clean.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::actor::{Cadence, Ran, Tally};
use super::boxshell::BoxShell;
use super::check::{branch_tree_paths, fsck_problems};
use super::figures::Figures;
use super::repo::Seed;
use super::rig::Rig;
use super::Params;
use crate::lab::git::write;
use crate::lab::LabError;

/// Default box commits.
pub const DEFAULT_COMMITS: usize = 500;
/// The host poller's period.
pub const POLL: Duration = Duration::from_millis(50);
/// The box pauses before every this-many commits.
pub const THINK_EVERY: usize = 10;

/// What one look at the index showed.
#[derive(Debug, Default, Clone, Copy)]
struct Views {
    looks: u64,
    emptied: u64,
    all_deleted: u64,
    seed_damaged: u64,
    read_errors: u64,
}

impl Views {
    /// Judges `git status --porcelain` and `git ls-files` run one after the other.
    fn judge(&mut self, status: &Ran, ls: &Ran, seed: &[String]) {
        self.looks += 1;
        if !status.ok || !ls.ok {
            self.read_errors += 1;
            return;
        }
        let listed: HashSet<&str> = ls.stdout.lines().collect();
        let listed_seed = seed.iter().filter(|f| listed.contains(f.as_str())).count();
        let staged_deleted: HashSet<&str> = status.stdout.lines().filter_map(|l| l.strip_prefix("D  ")).collect();
        let deleted_seed = seed.iter().filter(|f| staged_deleted.contains(f.as_str())).count();
        if listed_seed == 0 {
            self.emptied += 1;
        }
        if deleted_seed == seed.len() {
            self.all_deleted += 1;
        }
        if listed_seed != seed.len() || deleted_seed != 0 {
            self.seed_damaged += 1;
        }
    }
}

fn look(sh: &BoxShell, views: &mut Views, seed: &[String], errors: &mut Vec<String>) -> Result<(), LabError> {
    let status = sh.git(&["status", "--porcelain=v1", "--untracked-files=no"])?;
    let ls = sh.git(&["ls-files"])?;
    views.judge(&status, &ls, seed);
    for r in [&status, &ls] {
        if !r.ok && errors.len() < 3 {
            errors.push(r.why());
        }
    }
    Ok(())
}

/// The host's poller: `git status` then `git ls-files` every [`POLL`] until `stop`. Before each
/// status it saves `host.txt` unchanged (a new mtime, as an editor's save does), so every status
/// refresh really rewrites the shared index: git skips the write when no stat data changed.
fn host_poller(host: &Path, seed: &[String], stop: &AtomicBool) -> Result<(Views, Vec<String>), LabError> {
    let mut views = Views::default();
    let mut errors = Vec::new();
    let mut tick = Cadence::new(POLL);
    let touched = host.join("host.txt");
    let sh = BoxShell::Local(host.to_path_buf());
    while !stop.load(Ordering::SeqCst) {
        tick.wait();
        write(&touched, "host\n")?;
        look(&sh, &mut views, seed, &mut errors)?;
    }
    Ok((views, errors))
}

/// What the box did.
#[derive(Debug, Default)]
struct BoxSide {
    views: Views,
    errors: Vec<String>,
    adds: Tally,
    commits: Tally,
    landed_files: Vec<String>,
}

fn box_committer(sh: &BoxShell, seed: &[String], n: usize, think: Duration) -> Result<BoxSide, LabError> {
    let mut b = BoxSide::default();
    look(sh, &mut b.views, seed, &mut b.errors)?;
    for i in 0..n {
        if i % THINK_EVERY == THINK_EVERY - 1 {
            std::thread::sleep(think);
        }
        let rel = format!("box/{i:04}.txt");
        sh.write(&rel, &format!("box change {i}\n"))?;
        let add = sh.git(&["add", &rel])?;
        b.adds.record_ran(&add);
        if add.ok {
            let commit = sh.git(&["commit", "-q", "-m", &format!("box commit {i}")])?;
            b.commits.record_ran(&commit);
            if commit.ok {
                b.landed_files.push(rel);
            }
        }
        look(sh, &mut b.views, seed, &mut b.errors)?;
    }
    Ok(b)
}

/// Runs the scenario on a mounted rig.
pub fn run(rig: &Rig, seed: &Seed, p: &Params) -> Result<Figures, LabError> {
    let n = p.ops_or(DEFAULT_COMMITS);
    // Longer than the kernel's entry TTL, so the next lookup of `index` is not served from cache.
    let think = Duration::from_secs_f64(p.ttl * 1.2) + Duration::from_millis(50);
    let stop = AtomicBool::new(false);
    let (host, boxed) = std::thread::scope(|s| {
        let poller = s.spawn(|| host_poller(&rig.host, &seed.files, &stop));
        let boxed = box_committer(&rig.boxed, &seed.files, n, think);
        stop.store(true, Ordering::SeqCst);
        let host = poller.join().unwrap_or_else(|_| Err(LabError::new("join host poller", &rig.host, "panicked")));
        (host, boxed)
    });
    let (hv, host_errors) = host?;
    let b = boxed?;

    let (head, branch) = branch_tree_paths(&rig.host, "refs/heads/main")?;
    let missing_seed = seed.files.iter().filter(|f| !head.contains(*f)).count() as u64;
    let missing_box = b.landed_files.iter().filter(|f| !head.contains(*f)).count() as u64;
    let fsck = fsck_problems(&rig.host)?;

    let mut f = Figures::default();
    branch.judge(&mut f);
    f.zero("emptied_index_host", "host saw an emptied index", hv.emptied);
    f.zero("emptied_index_box", "box saw an emptied index", b.views.emptied);
    f.zero("all_deleted_host", "host saw every file staged deleted", hv.all_deleted);
    f.zero("all_deleted_box", "box saw every file staged deleted", b.views.all_deleted);
    f.zero("seed_damaged_views", "looks with seed files gone/deleted", hv.seed_damaged + b.views.seed_damaged);
    f.zero("index_read_errors", "index read errors (either side)", hv.read_errors + b.views.read_errors);
    f.zero("files_lost_from_head", "files missing from final HEAD", missing_seed + missing_box);
    f.zero("fsck_problems", "git fsck problems", fsck.len() as u64);
    f.share("box_commits", "box commits landed", b.commits.landed, n as u64);
    f.count("box_adds_refused", "box adds refused", b.adds.refused());
    f.count("host_looks", "host status polls", hv.looks);
    f.count("box_looks", "box index looks", b.views.looks);
    f.ms("box_commit_p50_ms", "box add+commit p50", b.commits.percentile_ms(50.0) + b.adds.percentile_ms(50.0));
    for e in host_errors.iter().chain(&b.errors) {
        f.note(format!("index read error: {e}"));
    }
    if let Some(n) = b.adds.reasons_note("box git add", 3) {
        f.note(n);
    }
    if let Some(n) = b.commits.reasons_note("box git commit", 3) {
        f.note(n);
    }
    for p in fsck.iter().take(5) {
        f.note(format!("fsck: {p}"));
    }
    Ok(f)
}
