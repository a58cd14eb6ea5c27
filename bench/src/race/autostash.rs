//! `race autostash`: the host keeps uncommitted work and runs `git pull --rebase --autostash` from
//! an upstream clone that keeps getting commits, while the box commits.
//!
//! Work lost: a landed box commit whose subject is not in the branch's history at the end (a
//! rebase rewrites ids, not subjects), or a line of the host's uncommitted work that is neither in
//! its file nor in any stash entry. A line found only in a stash entry is "displaced" (git kept it,
//! the person must recover it). A pull that fails and leaves a rebase in progress is aborted by the
//! host, as a person would; one left holding only `autostash` (git's leftover, which `rebase
//! --abort` cannot clear) is recovered as seamfs's refusal message says and counted. Leftover
//! dirs are git's own failure on the host, so they are reported, not judged; lost work is judged.
//! A box commit that a host `rebase --abort` rewound to the branch value the rebase had read
//! before the commit landed (git's own window, bug 8 in docs/lab.md) is counted apart and shown.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::actor::{commit_id, git_run, write_file, Cadence, Tally};
use super::check::{rebase_dirs, subjects};
use super::figures::Figures;
use super::repo::{seed_repo, Seed};
use super::rig::Rig;
use super::Params;
use crate::lab::git::{append, git};
use crate::lab::LabError;

/// Default run time, seconds.
pub const DEFAULT_SECS: u64 = 60;
/// Upstream's commit period.
const UPSTREAM_PERIOD: Duration = Duration::from_millis(300);
/// Pause between the host's pulls.
const HOST_PAUSE: Duration = Duration::from_millis(150);
/// Pause between the box's commits: an agent's pace, not a fuzzer's. Back to back (every
/// ~100 ms) the host's index never catches up with the box's commits (each heal is overtaken
/// by the next move) and nearly every pull stops before its rebase, so the race is never run.
const BOX_PAUSE: Duration = Duration::from_millis(400);

/// The upstream clone and what the host started from.
#[derive(Debug)]
pub struct Upstream {
    /// The upstream repository (a second host checkout).
    pub dir: PathBuf,
    /// Its first commit.
    pub seed: Seed,
}

/// Builds the upstream repository in `scratch` and clones it as the host's checkout.
pub fn prepare(host: &Path, scratch: &Path) -> Result<Upstream, LabError> {
    let up = scratch.join("upstream");
    std::fs::create_dir(&up).map_err(|e| LabError::new("create dir", &up, e))?;
    let seed = seed_repo(&up)?;
    let (up_s, host_s) = (up.display().to_string(), host.display().to_string());
    git(scratch, &["clone", "-q", &up_s, &host_s])?;
    Ok(Upstream { dir: up, seed })
}

fn upstream_committer(up: &Path, until: Instant) -> Result<u64, LabError> {
    let mut tick = Cadence::new(UPSTREAM_PERIOD);
    let mut n = 0u64;
    while Instant::now() < until {
        tick.wait();
        n += 1;
        let rel = format!("upstream/{n:04}.txt");
        write_file(up, &rel, &format!("upstream change {n}\n"))?;
        git(up, &["add", &rel])?;
        git(up, &["commit", "-q", "-m", &format!("upstream commit {n}")])?;
    }
    Ok(n)
}

#[derive(Debug, Default)]
struct HostSide {
    pulls: Tally,
    aborts: Tally,
    leftovers_recovered: u64,
    wip_lines: Vec<String>,
}

fn host_puller(host: &Path, until: Instant) -> Result<HostSide, LabError> {
    let mut h = HostSide::default();
    let wip = host.join("host-wip.txt");
    let mut n = 0usize;
    while Instant::now() < until {
        n += 1;
        let line = format!("host wip {n}");
        append(&wip, &format!("{line}\n"))?;
        h.wip_lines.push(line);
        let r = git_run(host, &["pull", "-q", "--rebase", "--autostash"])?;
        h.pulls.record_ran(&r);
        if !r.ok && !rebase_dirs(&host.join(".git")).is_empty() {
            // A stopped rebase blocks every later pull: abort it (it re-applies the autostash).
            let a = git_run(host, &["rebase", "--abort"])?;
            h.aborts.record_ran(&a);
            if !a.ok && recover_leftover_autostash(host)? {
                h.leftovers_recovered += 1;
            }
        }
        std::thread::sleep(HOST_PAUSE);
    }
    Ok(h)
}

/// A pull that fails early can leave `rebase-merge/` holding only `autostash` (git's own bug):
/// `rebase --abort` cannot clear it. Recovers as seamfs's refusal message says: store the
/// autostash as a stash entry, remove the dir. True when it did.
fn recover_leftover_autostash(host: &Path) -> Result<bool, LabError> {
    let dir = host.join(".git/rebase-merge");
    let names: Vec<String> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect(),
        Err(_) => return Ok(false),
    };
    if names != ["autostash"] {
        return Ok(false);
    }
    let file = dir.join("autostash");
    let id = std::fs::read_to_string(&file).map_err(|e| LabError::new("read", &file, e))?;
    git(host, &["stash", "store", "-m", "autostash", id.trim()])?;
    std::fs::remove_dir_all(&dir).map_err(|e| LabError::new("remove leftover rebase dir", &dir, e))?;
    Ok(true)
}

#[derive(Debug, Default)]
struct BoxSide {
    commits: Tally,
    /// Landed commits: subject, id, and whether git made it on a detached HEAD (the host's
    /// rebase in progress).
    landed: Vec<(String, String, bool)>,
}

fn box_committer(dir: &Path, until: Instant) -> Result<BoxSide, LabError> {
    let mut b = BoxSide::default();
    let mut n = 0usize;
    while Instant::now() < until {
        n += 1;
        let rel = format!("box/{n:04}.txt");
        write_file(dir, &rel, &format!("box change {n}\n"))?;
        let subject = format!("box commit {n}");
        let add = git_run(dir, &["add", &rel])?;
        if !add.ok {
            b.commits.record_ran(&add);
            continue;
        }
        let c = git_run(dir, &["-c", "core.abbrev=no", "commit", "-m", &subject])?;
        b.commits.record(c.ok, add.elapsed + c.elapsed, || c.why());
        if c.ok {
            let id = commit_id(&c.stdout).unwrap_or_default();
            b.landed.push((subject, id, c.stdout.starts_with("[detached HEAD")));
        }
        std::thread::sleep(BOX_PAUSE);
    }
    Ok(b)
}

/// Lines of the host's work found in no stash entry, and those found only there.
fn wip_accounting(host: &Path, lines: &[String]) -> Result<(u64, u64), LabError> {
    let path = host.join("host-wip.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let stashes = git(host, &["stash", "list", "--format=%gd"])?;
    let mut stashed = String::new();
    for s in stashes.lines() {
        if let Ok(t) = git(host, &["show", &format!("{s}:host-wip.txt")]) {
            stashed.push_str(&t);
            stashed.push('\n');
        }
    }
    let (mut lost, mut displaced) = (0, 0);
    for l in lines {
        let here = text.lines().any(|x| x == l);
        if !here && stashed.lines().any(|x| x == l) {
            displaced += 1;
        } else if !here {
            lost += 1;
        }
    }
    Ok((lost, displaced))
}

/// Runs the scenario on a mounted rig.
pub fn run(rig: &Rig, up: &Upstream, p: &Params) -> Result<Figures, LabError> {
    let until = Instant::now() + p.duration_or(DEFAULT_SECS);
    let (upstream, host, boxed) = std::thread::scope(|s| {
        let upstream = s.spawn(|| upstream_committer(&up.dir, until));
        let host = s.spawn(|| host_puller(&rig.host, until));
        let boxed = box_committer(&rig.box_dir, until);
        let join_err = |what: &str| LabError::new(format!("join {what}"), &rig.host, "panicked");
        let upstream = upstream.join().unwrap_or_else(|_| Err(join_err("upstream committer")));
        let host = host.join().unwrap_or_else(|_| Err(join_err("host puller")));
        (upstream, host, boxed)
    });
    let upstream_commits = upstream?;
    let h = host?;
    let b = boxed?;

    let leftovers = rebase_dirs(&rig.gitdir());
    let history = subjects(&rig.host, "refs/heads/main")?;
    let lost: Vec<&(String, String, bool)> = b.landed.iter().filter(|(s, _, _)| !history.contains(s)).collect();
    let mut rewound = 0u64;
    for (_, id, _) in &lost {
        rewound += u64::from(rewound_by_host_abort(&rig.host, id)?);
    }
    let box_lost = lost.len() as u64 - rewound;
    let detached = b.landed.iter().filter(|(_, _, d)| *d).count() as u64;
    let (wip_lost, wip_displaced) = wip_accounting(&rig.host, &h.wip_lines)?;
    let fsck = rig.fsck_problems()?;

    let mut f = Figures::default();
    f.zero("work_lost", "work lost (box commits + host lines)", box_lost + wip_lost);
    f.count("box_commits_lost", "box commits missing from the branch", box_lost);
    f.count("box_commits_rewound_by_host_abort", "box commits a host rebase --abort rewound (git's window)", rewound);
    f.count("box_commits_detached", "box commits made on a detached HEAD", detached);
    f.count("host_wip_lost", "host uncommitted lines lost", wip_lost);
    f.count("host_wip_displaced", "host lines only in a stash entry", wip_displaced);
    f.count("leftover_autostash", "pulls leaving rebase-merge/autostash", h.leftovers_recovered);
    f.count("leftover_rebase_dirs", "rebase dirs left at the end", leftovers.len() as u64);
    f.zero("fsck_problems", "git fsck problems", fsck.len() as u64);
    f.share("host_pulls", "host pulls landed", h.pulls.landed, h.pulls.attempted);
    f.share("host_rebase_aborts", "host `rebase --abort` after a failed pull", h.aborts.landed, h.aborts.attempted);
    f.share("box_commits", "box commits landed", b.commits.landed, b.commits.attempted);
    f.count("box_refusals", "box commits refused", b.commits.refused());
    f.count("upstream_commits", "upstream commits made", upstream_commits);
    f.ms("box_commit_p50_ms", "box add+commit p50", b.commits.percentile_ms(50.0));
    for (subject, id, detached) in lost.iter().take(5) {
        let on = if *detached { "on a detached HEAD (a rebase in progress)" } else { "on the branch" };
        let how = if rewound_by_host_abort(&rig.host, id)? {
            " (rewound by a host `rebase --abort` to the branch it read before this commit landed: git's own window, bug 8 in docs/lab.md)"
        } else {
            ""
        };
        f.note(format!("lost: {subject} {id}, made {on}{how}"));
    }
    if let Some(n) = b.commits.reasons_note("box commit", 3) {
        f.note(n);
    }
    if let Some(n) = h.pulls.reasons_note("host pull", 3) {
        f.note(n);
    }
    if let Some(n) = h.aborts.reasons_note("host rebase --abort", 2) {
        f.note(n);
    }
    for d in &leftovers {
        let dir = rig.gitdir().join(d);
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        names.sort();
        f.note(format!("left at the end: .git/{d} holding {}", names.join(" ")));
    }
    for p in fsck.iter().take(5) {
        f.note(format!("fsck: {p}"));
    }
    Ok(f)
}

/// True when a host `rebase --abort` took the branch from box commit `id` back to one of its
/// ancestors (bug 8 in docs/lab.md). The host's rebase read the branch before the box commit
/// landed, and its abort put that value back without a compare-and-swap; no operation state
/// existed yet when the box moved the branch, so no judge could see it. Two git processes on one
/// kernel race the same way. Counted apart from `work_lost`, and shown.
fn rewound_by_host_abort(host: &Path, id: &str) -> Result<bool, LabError> {
    let log = host.join(".git/logs/refs/heads/main");
    let text = std::fs::read_to_string(&log).map_err(|e| LabError::new("read reflog", &log, e))?;
    for line in text.lines() {
        let Some((ids, msg)) = line.split_once('\t') else { continue };
        let mut f = ids.split(' ');
        let (Some(old), Some(new)) = (f.next(), f.next()) else { continue };
        if old != id || !msg.starts_with("rebase (abort)") {
            continue;
        }
        let st = crate::lab::git::git_cmd(host)
            .args(["merge-base", "--is-ancestor", new, id])
            .status()
            .map_err(|e| LabError::new("run git merge-base", host, e))?;
        if st.success() {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real repository whose branch a `rebase (abort)` reflog entry took back from a commit
    /// to its parent: that commit is rewound, a commit only reset past by another message is not.
    #[test]
    fn a_rebase_abort_back_to_an_ancestor_is_told_apart() {
        let dir = std::env::temp_dir().join(format!("seam-autostash-rewound-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        git(&dir, &["init", "-q", "-b", "main"]).expect("init");
        let commit = |n: &str| {
            std::fs::write(dir.join(n), n).expect("write");
            git(&dir, &["add", n]).expect("add");
            git(&dir, &["commit", "-q", "-m", n]).expect("commit");
            git(&dir, &["rev-parse", "HEAD"]).expect("rev-parse")
        };
        let (a, b) = (commit("a"), commit("b"));
        git(&dir, &["update-ref", "-m", "rebase (abort): returning to refs/heads/main", "refs/heads/main", &a, &b]).expect("abort");
        let c = commit("c");
        git(&dir, &["update-ref", "-m", "reset: moving to HEAD~", "refs/heads/main", &a, &c]).expect("reset");
        assert!(rewound_by_host_abort(&dir, &b).expect("judge b"), "b was rewound by the abort");
        assert!(!rewound_by_host_abort(&dir, &c).expect("judge c"), "c was reset past, not by an abort");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
