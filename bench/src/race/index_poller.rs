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
//!
//! With `--boxes N` every box commits its own files (`box-<i>/`) at once, and each look also
//! counts a *foreign view*: the box's status staging another box's file as added or modified,
//! which only another box's staging in its index can show. A staged deletion of another box's
//! file is not one: `git status` reads the index, then HEAD, and another box's commit between
//! the two reads shows its files as deleted for that one status, as on one kernel.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::actor::{Cadence, Ran, Tally};
use super::boxshell::BoxShell;
use super::check::branch_tree_paths;
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
pub(crate) struct Views {
    looks: u64,
    /// Looks whose status staged a change to another box's file (several boxes only).
    pub(crate) foreign: u64,
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

fn look(sh: &BoxShell, views: &mut Views, seed: &[String], others: &[String], errors: &mut Vec<String>) -> Result<(), LabError> {
    let status = sh.git(&["status", "--porcelain=v1", "--untracked-files=no", "--no-renames"])?;
    let ls = sh.git(&["ls-files"])?;
    views.judge(&status, &ls, seed);
    if status.ok && foreign_staged(&status.stdout, others) {
        views.foreign += 1;
    }
    for r in [&status, &ls] {
        if !r.ok && errors.len() < 3 {
            errors.push(r.why());
        }
    }
    Ok(())
}

/// True when `git status --porcelain --no-renames` output stages a file under one of `others`
/// (other boxes' directories, `box-<j>/`) as added or modified: in the index, not in HEAD.
pub(crate) fn foreign_staged(porcelain: &str, others: &[String]) -> bool {
    porcelain.lines().any(|l| {
        let staged = l.as_bytes().first().is_some_and(|&c| c == b'A' || c == b'M');
        staged && l.get(3..).is_some_and(|path| others.iter().any(|o| path.starts_with(o.as_str())))
    })
}

/// Where box `i` of `n` writes its files, and the other boxes' places (`box/` for one box).
pub(crate) fn box_dirs(i: usize, n: usize) -> (String, Vec<String>) {
    if n <= 1 {
        return ("box/".into(), Vec::new());
    }
    let others = (0..n).filter(|&j| j != i).map(|j| format!("box-{j}/")).collect();
    (format!("box-{i}/"), others)
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
        look(&sh, &mut views, seed, &[], &mut errors)?;
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

fn box_committer(sh: &BoxShell, seed: &[String], n: usize, think: Duration, (dir, others): &(String, Vec<String>)) -> Result<BoxSide, LabError> {
    let mut b = BoxSide::default();
    look(sh, &mut b.views, seed, others, &mut b.errors)?;
    for i in 0..n {
        if i % THINK_EVERY == THINK_EVERY - 1 {
            std::thread::sleep(think);
        }
        let rel = format!("{dir}{i:04}.txt");
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
        look(sh, &mut b.views, seed, others, &mut b.errors)?;
    }
    Ok(b)
}

/// Every box's side as one.
fn merged(per_box: &[BoxSide]) -> BoxSide {
    let mut all = BoxSide::default();
    for b in per_box {
        let v = &mut all.views;
        (v.looks, v.foreign, v.emptied) = (v.looks + b.views.looks, v.foreign + b.views.foreign, v.emptied + b.views.emptied);
        (v.all_deleted, v.seed_damaged) = (v.all_deleted + b.views.all_deleted, v.seed_damaged + b.views.seed_damaged);
        v.read_errors += b.views.read_errors;
        all.errors.extend(b.errors.iter().cloned());
        all.adds.merge(&b.adds);
        all.commits.merge(&b.commits);
        all.landed_files.extend(b.landed_files.iter().cloned());
    }
    all
}

/// One row per box: its commits landed and lost, its foreign views.
fn per_box_figures(f: &mut Figures, per_box: &[BoxSide], head: &HashSet<String>) {
    for (i, b) in per_box.iter().enumerate() {
        let lost = b.landed_files.iter().filter(|p| !head.contains(*p)).count() as u64;
        f.share(leak(format!("box{i}_commits")), leak(format!("box {i}: commits landed")), b.commits.landed, b.commits.attempted);
        f.zero(leak(format!("box{i}_commits_lost")), leak(format!("box {i}: landed commits' files missing from HEAD")), lost);
        f.zero(leak(format!("box{i}_foreign_views")), leak(format!("box {i}: looks staging another box's files")), b.views.foreign);
    }
}

/// A figure's name made at run time (a handful per run, for the life of the lab's process).
pub(crate) fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// Runs the scenario on a mounted rig.
pub fn run(rig: &Rig, seed: &Seed, p: &Params) -> Result<Figures, LabError> {
    let n = p.ops_or(DEFAULT_COMMITS);
    // Longer than the kernel's entry TTL, so the next lookup of `index` is not served from cache.
    let think = Duration::from_secs_f64(p.ttl * 1.2) + Duration::from_millis(50);
    let stop = AtomicBool::new(false);
    let nb = rig.boxes.len();
    let (host, boxed) = std::thread::scope(|s| {
        let poller = s.spawn(|| host_poller(&rig.host, &seed.files, &stop));
        let workers: Vec<_> = rig
            .boxes
            .iter()
            .enumerate()
            .map(|(i, sh)| s.spawn(move || box_committer(sh, &seed.files, n, think, &box_dirs(i, nb))))
            .collect();
        let boxed: Vec<_> = workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|_| Err(LabError::new("join box committer", &rig.host, "panicked"))))
            .collect();
        stop.store(true, Ordering::SeqCst);
        let host = poller.join().unwrap_or_else(|_| Err(LabError::new("join host poller", &rig.host, "panicked")));
        (host, boxed)
    });
    let (hv, host_errors) = host?;
    let per_box = boxed.into_iter().collect::<Result<Vec<BoxSide>, LabError>>()?;
    let b = merged(&per_box);

    let (head, branch) = branch_tree_paths(&rig.host, "refs/heads/main")?;
    let missing_seed = seed.files.iter().filter(|f| !head.contains(*f)).count() as u64;
    let missing_box = b.landed_files.iter().filter(|f| !head.contains(*f)).count() as u64;
    let fsck = rig.fsck_problems()?;

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
    f.zero("box_git_crashed", "box git killed by a signal (SIGBUS…)", b.adds.crashed + b.commits.crashed);
    f.zero("foreign_index_views", "box looks staging another box's files", b.views.foreign);
    f.share("box_commits", "box commits landed", b.commits.landed, (n * nb) as u64);
    if nb > 1 {
        per_box_figures(&mut f, &per_box, &head);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foreign_views_are_other_boxes_files_staged_as_added_or_modified() {
        let (mine, others) = box_dirs(0, 3);
        assert_eq!((mine.as_str(), others.clone()), ("box-0/", vec!["box-1/".to_string(), "box-2/".to_string()]));
        assert_eq!(box_dirs(0, 1), ("box/".to_string(), Vec::new()), "one box keeps the single-box layout");
        assert!(foreign_staged("A  box-1/0001.txt\n", &others));
        assert!(foreign_staged("M  box-2/0001.txt\n", &others));
        assert!(!foreign_staged("D  box-1/0001.txt\n", &others), "a deletion is status reading index before HEAD");
        assert!(!foreign_staged("A  box-0/0001.txt\n M box-1/0001.txt\n", &others), "own staging, another's unstaged edit");
        assert!(!foreign_staged("?? box-1/0001.txt\n", &others));
    }
}
