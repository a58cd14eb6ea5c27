//! `race kill9`: the box's `git add` / `git commit` killed with SIGKILL at random points, chosen
//! from the seed, over N commit attempts. Kill points are drawn over 1.25x the add + commit time,
//! measured again by every tenth attempt, which runs unkilled (a probe), so the window follows
//! the load and the growing repository, and some commits land to be checked.
//!
//! After each kill the lab waits 1 s and counts lock files (`*.lock`, anywhere in the host's git
//! dir); if any are there it looks again 2 s later, to tell a late release from none. On the
//! control nobody ever removes them, so the lab removes those still there, as a person would, and
//! each kill is measured on its own. At the end every commit that landed (as
//! `git rev-parse HEAD` reported right after a successful commit) must be reachable, and `git
//! fsck` clean.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::actor::{draw, percentile_ms, Tally};
use super::boxshell::BoxShell;
use super::check::{lock_files, reachable};
use super::figures::Figures;
use super::repo::Seed;
use super::rig::Rig;
use super::Params;
use crate::lab::LabError;

/// Default commit attempts.
pub const DEFAULT_ATTEMPTS: usize = 200;
/// How long a dead process's lock may stay.
pub const GRACE: Duration = Duration::from_secs(1);
/// After a lock outlived GRACE: how much longer the lab waits to tell a late release from none.
pub const LATE: Duration = Duration::from_secs(2);
/// Uninterrupted commits that measure how long add and commit take.
const CALIBRATION: usize = 3;
/// Every this many attempts, one runs unkilled to measure the add + commit time again.
const PROBE_EVERY: usize = 10;
/// Probes (and calibration attempts) the kill window is the median of.
const PROBES_KEPT: usize = 5;
/// Floor of the typical add + commit time the kill window is drawn over, in ms.
const MIN_TYPICAL_MS: f64 = 5.0;

#[derive(Debug, Default)]
struct Tallies {
    attempts: Tally,
    kills_add: u64,
    kills_commit: u64,
    kills_leaving_locks: u64,
    kills_holding_locks: u64,
    locks_left: u64,
    locks_stuck: u64,
    lock_names: Vec<String>,
    landed: Vec<String>,
}

/// One add + commit; `kill_at` (from the start of the add) kills whichever runs then. Returns
/// how long the attempt took.
fn attempt(sh: &BoxShell, gitdir: &Path, rel: &str, msg: &str, kill_at: Option<Duration>, t: &mut Tallies) -> Result<Duration, LabError> {
    let never = Duration::from_secs(3600);
    let started = Instant::now();
    let add = sh.git_killed_at(&["add", rel], kill_at.unwrap_or(never))?;
    // SIGKILL is the lab's own signal: only another one counts as a crash.
    t.attempts.note_crash(&add.ran);
    let mut killed = add.killed;
    let mut ok = false;
    if add.killed {
        t.kills_add += 1;
    } else if add.ran.ok {
        let left = kill_at.map(|k| k.saturating_sub(started.elapsed())).unwrap_or(never);
        let commit = sh.git_killed_at(&["commit", "-q", "-m", msg], left)?;
        t.attempts.note_crash(&commit.ran);
        if commit.killed {
            t.kills_commit += 1;
            killed = true;
        } else if commit.ran.ok {
            ok = true;
            let head = sh.git(&["rev-parse", "HEAD"])?;
            if head.ok {
                t.landed.push(head.stdout.trim().to_string());
            }
        }
    }
    let took = started.elapsed();
    t.attempts.record(ok, took, || if killed { "killed".into() } else { "failed (not killed)".into() });
    if killed {
        // Did the kill land while git held a lock? The case the reaper exists for.
        if !lock_files(gitdir).is_empty() {
            t.kills_holding_locks += 1;
        }
        std::thread::sleep(GRACE);
        let locks = lock_files(gitdir);
        if !locks.is_empty() {
            t.kills_leaving_locks += 1;
            t.locks_left += locks.len() as u64;
            // Late or never? Give the owner-reaper another LATE before the lab steps in.
            std::thread::sleep(LATE);
            let stuck: Vec<PathBuf> = lock_files(gitdir).into_iter().filter(|l| locks.contains(l)).collect();
            t.locks_stuck += stuck.len() as u64;
            for l in &locks {
                let name = l.strip_prefix(gitdir).unwrap_or(l).display().to_string();
                let tag = if stuck.contains(l) { format!("{name} (still there after 1 s + {LATE:?})") } else { format!("{name} (gone within 1 s + {LATE:?})") };
                if !t.lock_names.contains(&tag) {
                    t.lock_names.push(tag);
                }
            }
            for l in &stuck {
                // Counted: now clear it, so the next kill is measured on its own.
                std::fs::remove_file(l).map_err(|e| LabError::new("remove leftover lock", l, e))?;
            }
        }
    }
    Ok(took)
}

/// Runs the scenario on a mounted rig.
pub fn run(rig: &Rig, _seed: &Seed, p: &Params) -> Result<Figures, LabError> {
    let n = p.ops_or(DEFAULT_ATTEMPTS);
    let dir = &rig.boxed;
    let gitdir = rig.gitdir();
    let mut t = Tallies::default();
    let mut recent = Vec::new();
    for i in 0..CALIBRATION {
        let rel = format!("box/calibrate-{i}.txt");
        dir.write(&rel, "calibration\n")?;
        recent.push(attempt(dir, &gitdir, &rel, &format!("box calibration {i}"), None, &mut t)?);
    }
    // Calibration attempts are not figures, but a crash in them still is one.
    t.attempts = Tally { crashed: t.attempts.crashed, ..Tally::default() };
    let mut rng = p.seed ^ 0x6b69_6c6c_3921;
    let mut typical = percentile_ms(&recent, 50.0).max(MIN_TYPICAL_MS);
    for i in 0..n {
        let rel = format!("box/{i:04}.txt");
        dir.write(&rel, &format!("box change {i}\n"))?;
        let msg = format!("box commit {i}");
        if i % PROBE_EVERY == PROBE_EVERY - 1 {
            // A probe: never killed, so the kill window follows how long an attempt takes now
            // (load and a growing repository stretch it) and some commits always land.
            recent.push(attempt(dir, &gitdir, &rel, &msg, None, &mut t)?);
            let keep = recent.len().saturating_sub(PROBES_KEPT);
            recent.drain(..keep);
            typical = percentile_ms(&recent, 50.0).max(MIN_TYPICAL_MS);
            continue;
        }
        // Kill points spread over the whole add + commit, and a little past it.
        let span_us = (typical * 1.25 * 1000.0) as u64;
        let kill_at = Duration::from_micros(draw(&mut rng, span_us));
        attempt(dir, &gitdir, &rel, &msg, Some(kill_at), &mut t)?;
    }
    let at_end = lock_files(&gitdir);
    let left_at_end = at_end.len() as u64;
    let on_branch = reachable(&rig.host, "refs/heads/main")?;
    let unreachable = t.landed.iter().filter(|id| !on_branch.contains(id)).count() as u64;
    let fsck = rig.fsck_problems()?;

    let mut f = Figures::default();
    on_branch.judge(&mut f);
    f.zero("kills_leaving_locks", "kills leaving a lock after 1 s", t.kills_leaving_locks);
    f.count("locks_left", "lock files counted after 1 s", t.locks_left);
    f.count("locks_stuck", "of those, still there 2 s later", t.locks_stuck);
    f.zero("locks_at_end", "lock files at the end", left_at_end);
    f.zero("landed_unreachable", "landed commits unreachable", unreachable);
    f.zero("fsck_problems", "git fsck problems", fsck.len() as u64);
    f.zero("box_git_crashed", "box git killed by a signal it was not sent (SIGBUS…)", t.attempts.crashed);
    f.count("kills", "kills (add + commit)", t.kills_add + t.kills_commit);
    f.count("kills_holding_locks", "kills with a lock on the lower right after", t.kills_holding_locks);
    f.count("kills_add", "kills during git add", t.kills_add);
    f.count("kills_commit", "kills during git commit", t.kills_commit);
    f.share("attempts", "commit attempts landed", t.attempts.landed, t.attempts.attempted);
    f.ms("typical_ms", "add+commit time (last probes)", typical);
    if !at_end.is_empty() {
        let names: Vec<String> = at_end.iter().map(|l| l.strip_prefix(&gitdir).unwrap_or(l).display().to_string()).collect();
        f.note(format!("lock files at the end: {}", names.join(", ")));
    }
    if !t.lock_names.is_empty() {
        f.note(format!("locks left after 1 s (the lab removes those still there 2 s later): {}", t.lock_names.join(", ")));
    }
    if let Some(n) = t.attempts.reasons_note("attempts", 3) {
        f.note(n);
    }
    for p in fsck.iter().take(5) {
        f.note(format!("fsck: {p}"));
    }
    Ok(f)
}
