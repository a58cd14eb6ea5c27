//! `race ide`: the host is an IDE on the checkout while the box's agent commits.
//!
//! The host (git in the backing dir), every [`POLL`]: `git add -A -- . :!box`, then `git status`
//! (the IDE's staging and polling; both rewrite the shared index). Every [`HOST_COMMIT_EVERY`]th
//! poll it first appends a line to `host.txt`, and after the poll commits what it staged
//! (`git commit -m host-N`). The box (git in the mount) makes N commits, each creating a file
//! under `box/`, appending to another and, every [`DELETE_EVERY`]th, removing one, then
//! [`EDIT_PAUSE`] later `git add -A -- box` and `git commit`.
//!
//! The host's add leaves `box/` out: the work tree is one for both sides, so an add of the whole
//! tree would stage the box's uncommitted edits (on any target), and its reading of the work tree
//! would mend every stale index entry, hiding the failure the scenario is after: a commit built
//! from an index that is behind HEAD. That is the DESIGN's "no commit from either side silently
//! reverts the other side's work": a host commit from a shared index the box's commit left stale
//! (seamfs must heal it inside the box's ref move), or a box commit from an index read stale
//! through the share (the control's one index).
//!
//! Every file only grows (its revision is its line count) and a removed name is never used
//! again, so each move of the branch reads, on every path the other side owns, as forward (a
//! newer revision; a file its owner had removed by then, gone) or back (an older revision; a file
//! gone that its owner had not removed; one back after its owner removed it). A move is judged
//! against the value it really replaced, the previous entry of the branch's reflog: a git that
//! read the branch stale commits on an older parent, and its move undoes the commits between
//! (the control's box does that to the host's commits). The figures come from the reflog, `git
//! diff-tree` and `git cat-file` in the backing dir.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::actor::{commit_id, draw, Cadence, Ran, Tally};
use super::boxshell::BoxShell;
use super::check::{blob_texts, changes, parents, reachable, reflog, tree_blobs, PathChange};
use super::figures::Figures;
use super::repo::Seed;
use super::rig::Rig;
use super::Params;
use crate::lab::git::append;
use crate::lab::LabError;

/// Default box commits.
pub const DEFAULT_COMMITS: usize = 200;
/// The IDE's poll period.
pub const POLL: Duration = Duration::from_millis(200);
/// The IDE edits `host.txt` and commits every this-many polls.
pub const HOST_COMMIT_EVERY: u64 = 5;
/// The box's edit time before each commit (an agent writes, then commits; without it the box
/// commits every few ms and a short run sees too few host commits).
pub const EDIT_PAUSE: Duration = Duration::from_millis(100);
/// The box removes one of its committed files every this-many commits.
pub const DELETE_EVERY: usize = 5;
/// The box's directory; every other path is the host's.
pub const BOX_DIR: &str = "box";
/// The file the IDE edits.
pub const HOST_FILE: &str = "host.txt";

fn is_box(path: &str) -> bool {
    path.strip_prefix(BOX_DIR).is_some_and(|r| r.starts_with('/'))
}

/// A commit one side made, and when its `git commit` started.
#[derive(Debug, Clone)]
struct Made {
    id: String,
    at: Instant,
}

/// Runs `git -c core.abbrev=no commit -m MSG` and returns it with the new commit's id (`None`
/// when it did not land).
fn commit(sh: &BoxShell, msg: &str) -> Result<(Ran, Option<Made>), LabError> {
    let at = Instant::now();
    let dir = sh.dir();
    let r = sh.git(&["-c", "core.abbrev=no", "commit", "-m", msg])?;
    if !r.ok {
        return Ok((r, None));
    }
    let id = commit_id(&r.stdout).ok_or_else(|| LabError::new("parse commit id", dir, format!("no id in {:?}", r.stdout)))?;
    Ok((r, Some(Made { id, at })))
}

#[derive(Debug, Default)]
struct Ide {
    adds: Tally,
    statuses: Tally,
    commits: Tally,
    made: Vec<Made>,
}

/// The host's IDE until `stop`.
fn host_ide(host: &Path, stop: &AtomicBool) -> Result<Ide, LabError> {
    let mut ide = Ide::default();
    let mut tick = Cadence::new(POLL);
    let mut polls = 0u64;
    let hs = BoxShell::Local(host.to_path_buf());
    while !stop.load(Ordering::SeqCst) {
        tick.wait();
        polls += 1;
        let edit = polls % HOST_COMMIT_EVERY == 0;
        let n = polls / HOST_COMMIT_EVERY;
        if edit {
            append(&host.join(HOST_FILE), &format!("host line {n}\n"))?;
        }
        let add = hs.git(&["add", "-A", "--", ".", &format!(":!{BOX_DIR}")])?;
        ide.adds.record_ran(&add);
        let status = hs.git(&["status", "--porcelain"])?;
        ide.statuses.record_ran(&status);
        if edit {
            let (r, made) = commit(&hs, &format!("host-{n}"))?;
            ide.commits.record_ran(&r);
            ide.made.extend(made);
        }
    }
    Ok(ide)
}

/// What the box did: its commits (a refused add counts as a commit not landed), and its files as
/// it last wrote them in the work tree.
#[derive(Debug, Default)]
struct Agent {
    commits: Tally,
    made: Vec<Made>,
    /// Lines in each live file.
    lines: BTreeMap<String, usize>,
    /// When each removed file was removed.
    removed: HashMap<String, Instant>,
    /// `lines` when the last landed commit started.
    committed: BTreeMap<String, usize>,
}

impl Agent {
    /// Appends line `k + 1` to `rel` (creating it).
    fn grow(&mut self, sh: &BoxShell, rel: &str) -> Result<(), LabError> {
        let k = self.lines.get(rel).copied().unwrap_or(0) + 1;
        if k == 1 {
            sh.write(rel, &format!("{rel} line 1\n"))?;
        } else {
            sh.append(rel, &format!("{rel} line {k}\n"))?;
        }
        self.lines.insert(rel.to_string(), k);
        Ok(())
    }

    /// A random live file other than `except` (`committed_only`: one the last commit holds).
    fn pick(&self, rng: &mut u64, except: &str, committed_only: bool) -> Option<String> {
        let live: Vec<&String> =
            self.lines.keys().filter(|p| *p != except && (!committed_only || self.committed.contains_key(*p))).collect();
        (!live.is_empty()).then(|| live[draw(rng, live.len() as u64) as usize].clone())
    }
}

fn box_agent(dir: &BoxShell, n: usize, seed: u64) -> Result<Agent, LabError> {
    let mut a = Agent::default();
    let mut rng = seed;
    for i in 0..n {
        let new = format!("{BOX_DIR}/n{i:04}.txt");
        a.grow(dir, &new)?;
        if let Some(old) = a.pick(&mut rng, &new, false) {
            a.grow(dir, &old)?;
        }
        if i % DELETE_EVERY == DELETE_EVERY - 1 {
            if let Some(gone) = a.pick(&mut rng, &new, true) {
                dir.remove(&gone)?;
                a.lines.remove(&gone);
                a.removed.insert(gone, Instant::now());
            }
        }
        std::thread::sleep(EDIT_PAUSE);
        let snapshot = a.lines.clone();
        let add = dir.git(&["add", "-A", "--", BOX_DIR])?;
        a.commits.note_crash(&add);
        if !add.ok {
            a.commits.record(false, add.elapsed, || add.why());
            continue;
        }
        let (r, made) = commit(dir, &format!("box commit {i}"))?;
        a.commits.record(r.ok, add.elapsed + r.elapsed, || r.why());
        a.commits.note_crash(&r);
        if let Some(m) = made {
            a.made.push(m);
            a.committed = snapshot;
        }
    }
    Ok(a)
}

/// Which way a commit moved a path the other side owns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// To the owner's newer revision (or the owner's removal).
    Forward,
    /// Back to an older revision, or undoing a removal, or removing what the owner still had.
    Back,
}

/// How a commit that started at `at` moved a path from `old` to `new` lines; `removed` is when
/// the path's owner removed it, if it did.
fn step(old: Option<usize>, new: Option<usize>, removed: Option<Instant>, at: Instant) -> Step {
    let removed_before = removed.is_some_and(|t| t < at);
    match (old, new) {
        (Some(a), Some(b)) if b > a => Step::Forward,
        (Some(_), Some(_)) => Step::Back,
        (Some(_), None) if removed_before => Step::Forward,
        (None, Some(_)) if !removed_before => Step::Forward,
        _ => Step::Back,
    }
}

/// One move of the branch, as its reflog records it: the commit it moved to, who made it, and
/// the value it really replaced (the branch's value before it, from the entries before: a git
/// that read the branch stale names an older one, and its move undoes what lay between).
struct Move<'a> {
    made: &'a Made,
    host: bool,
    replaced: String,
    /// The commit's first parent: the replaced value, unless the mover read the branch stale.
    parent: Option<String>,
}

impl Move<'_> {
    /// A move from a stale read of the branch: it undoes the commits between.
    fn rewinds(&self) -> bool {
        self.parent.as_deref() != Some(self.replaced.as_str())
    }
}

/// The branch's moves to a commit either side made, in order, and how many reflog entries name
/// a commit neither side made: git logs a move before it renames the ref's lock into place, so a
/// rename that fails (seamfs refusing a box move) leaves an entry for a move that never was.
fn moves<'a>(host_dir: &Path, seed: &Seed, host: &'a [Made], agent: &'a [Made]) -> Result<(Vec<Move<'a>>, u64), LabError> {
    let by_id: HashMap<&str, (&Made, bool)> = host
        .iter()
        .map(|m| (m.id.as_str(), (m, true)))
        .chain(agent.iter().map(|m| (m.id.as_str(), (m, false))))
        .collect();
    let log = reflog(&host_dir.join(".git"), "refs/heads/main")?;
    let ids: Vec<String> = log.iter().map(|(_, new)| new.clone()).collect();
    let parents = parents(host_dir, &ids)?;
    let (mut out, mut phantom) = (Vec::new(), 0);
    let mut branch: Option<&str> = None;
    for (_, new) in &log {
        match by_id.get(new.as_str()).copied() {
            Some((made, host)) => {
                if let Some(replaced) = branch {
                    let parent = parents.get(new).and_then(|p| p.first().cloned());
                    out.push(Move { made, host, replaced: replaced.to_string(), parent });
                }
                branch = Some(new);
            }
            None if *new == seed.initial => branch = Some(new),
            None => phantom += 1,
        }
    }
    Ok((out, phantom))
}

/// What one side's moves of the branch did to the other side's files.
#[derive(Debug, Default)]
struct Crossings {
    /// Moves changing any of the other side's paths.
    touching: u64,
    /// Moves taking one of them back.
    reverting: u64,
    /// Paths taken back, over all moves.
    paths_back: u64,
    /// The first few reverting moves, described.
    samples: Vec<String>,
}

impl Crossings {
    /// Judges one move on the paths the other side owns, removed at `removed`.
    fn judge(&mut self, m: &Move, theirs: &[&PathChange], lines: &HashMap<String, usize>, removed: &HashMap<String, Instant>) {
        if theirs.is_empty() {
            return;
        }
        self.touching += 1;
        let count = |b: &Option<String>| b.as_ref().map(|b| lines.get(b).copied().unwrap_or(0));
        let show = |n: Option<usize>| n.map_or("absent".to_string(), |n| format!("{n} lines"));
        let back: Vec<String> = theirs
            .iter()
            .filter_map(|ch| {
                let (old, new) = (count(&ch.old), count(&ch.new));
                let s = step(old, new, removed.get(&ch.path).copied(), m.made.at);
                (s == Step::Back).then(|| format!("{} {} -> {}", ch.path, show(old), show(new)))
            })
            .collect();
        if back.is_empty() {
            return;
        }
        self.reverting += 1;
        self.paths_back += back.len() as u64;
        if self.samples.len() < 3 {
            let side = if m.host { "host" } else { "box" };
            let more = if back.len() > 4 { format!(" (+{} more)", back.len() - 4) } else { String::new() };
            let shown = back[..back.len().min(4)].join(", ");
            let on = if m.rewinds() {
                format!("on {} while the branch was at {}", m.parent.as_deref().unwrap_or("no parent"), m.replaced)
            } else {
                format!("on the branch's {}", m.replaced)
            };
            self.samples.push(format!("{side} commit {} ({on}) took back {shown}{more}", m.made.id));
        }
    }
}

/// Files in the final HEAD behind the last commit their owner made: the box's files at the
/// revision of its last landed commit (or removed by it), `host.txt` at the host's newest
/// committed revision, the seed files.
fn behind_in_head(host: &Path, a: &Agent, host_lines: usize, seed: &Seed) -> Result<(u64, Vec<String>), LabError> {
    let head = tree_blobs(host, "HEAD")?;
    let blobs: Vec<String> = head.values().cloned().collect();
    let texts = blob_texts(host, &blobs)?;
    let lines = |p: &str| head.get(p).map(|b| texts.get(b).map_or(0, |t| t.lines().count()));
    let last_commit = a.made.last().map(|m| m.at);
    let mut behind = Vec::new();
    for (p, &k) in &a.committed {
        let ok = match lines(p) {
            Some(h) => h >= k,
            None => a.removed.contains_key(p),
        };
        if !ok {
            behind.push(p.clone());
        }
    }
    for (p, t) in &a.removed {
        if last_commit.is_some_and(|c| *t < c) && head.contains_key(p) {
            behind.push(format!("{p} (removed by a landed commit)"));
        }
    }
    if lines(HOST_FILE).unwrap_or(0) < host_lines {
        behind.push(HOST_FILE.to_string());
    }
    behind.extend(seed.files.iter().filter(|f| lines(f) != Some(1)).cloned());
    Ok((behind.len() as u64, behind))
}

/// Runs the scenario on a mounted rig.
pub fn run(rig: &Rig, seed: &Seed, p: &Params) -> Result<Figures, LabError> {
    let n = p.ops_or(DEFAULT_COMMITS);
    let stop = AtomicBool::new(false);
    let (host, boxed) = std::thread::scope(|s| {
        let ide = s.spawn(|| host_ide(&rig.host, &stop));
        let boxed = box_agent(&rig.boxed, n, p.seed);
        stop.store(true, Ordering::SeqCst);
        let host = ide.join().unwrap_or_else(|_| Err(LabError::new("join host IDE", &rig.host, "panicked")));
        (host, boxed)
    });
    let h = host?;
    let a = boxed?;

    // A broken branch or corrupt objects (a share that lost the box's writes) leave no history
    // to judge moves by: that is reported (branch_broken, fsck_problems), the move figures stay 0.
    let on_branch = reachable(&rig.host, "refs/heads/main")?;
    let fsck = rig.fsck_problems()?;
    let intact = on_branch.broken.is_none() && fsck.is_empty();
    let (moves, phantom) = if intact { moves(&rig.host, seed, &h.made, &a.made)? } else { (Vec::new(), 0) };
    let pairs: Vec<(String, String)> = moves.iter().map(|m| (m.made.id.clone(), m.replaced.clone())).collect();
    let changes = changes(&rig.host, &pairs)?;
    let blobs: Vec<String> =
        changes.iter().flatten().flat_map(|c| [c.old.clone(), c.new.clone()]).flatten().collect();
    let lines: HashMap<String, usize> =
        blob_texts(&rig.host, &blobs)?.into_iter().map(|(b, t)| (b, t.lines().count())).collect();
    let (mut host_x, mut box_x) = (Crossings::default(), Crossings::default());
    let mut host_lines = 0;
    for (m, ch) in moves.iter().zip(&changes) {
        if m.host {
            let theirs: Vec<&PathChange> = ch.iter().filter(|c| is_box(&c.path)).collect();
            host_x.judge(m, &theirs, &lines, &a.removed);
            // The host's newest committed revision of its file (the final HEAD must hold it).
            let own = ch.iter().find(|c| c.path == HOST_FILE).and_then(|c| c.new.as_ref());
            host_lines = host_lines.max(own.and_then(|b| lines.get(b).copied()).unwrap_or(0));
        } else {
            let theirs: Vec<&PathChange> = ch.iter().filter(|c| !is_box(&c.path)).collect();
            box_x.judge(m, &theirs, &lines, &HashMap::new());
        }
    }
    let rewinds = |host: bool| moves.iter().filter(|m| m.host == host && m.rewinds()).count() as u64;
    let (behind, behind_paths) = if intact { behind_in_head(&rig.host, &a, host_lines, seed)? } else { (0, Vec::new()) };
    let host_lost = h.made.iter().filter(|m| !on_branch.contains(&m.id)).count() as u64;

    let mut f = Figures::default();
    on_branch.judge(&mut f);
    f.zero("reverting_commits", "commits reverting the other side's files", host_x.reverting + box_x.reverting);
    f.count("host_reverting_box", "host commits reverting box files", host_x.reverting);
    f.count("box_reverting_host", "box commits reverting host files", box_x.reverting);
    f.count("paths_reverted", "paths taken back (all commits)", host_x.paths_back + box_x.paths_back);
    f.count("box_rewinds", "box moves from a stale branch (rewinds)", rewinds(false));
    f.count("host_rewinds", "host moves from a stale branch (rewinds)", rewinds(true));
    f.zero("host_commits_with_box_changes", "host commits holding box changes", host_x.touching);
    f.zero("box_commits_with_host_changes", "box commits holding host changes", box_x.touching);
    f.zero("files_behind_head", "files behind their last commit in HEAD", behind);
    f.zero("host_commits_lost", "host commits unreachable at the end", host_lost);
    f.zero("fsck_problems", "git fsck problems", fsck.len() as u64);
    f.zero("box_git_crashed", "box git killed by a signal (SIGBUS…)", a.commits.crashed);
    f.share("box_commits", "box commits landed", a.commits.landed, n as u64);
    f.share("host_commits", "host commits landed", h.commits.landed, h.commits.attempted);
    f.share("host_adds", "host add -A polls landed", h.adds.landed, h.adds.attempted);
    f.share("host_statuses", "host status polls landed", h.statuses.landed, h.statuses.attempted);
    f.ms("box_commit_p50_ms", "box add+commit p50", a.commits.percentile_ms(50.0));
    f.ms("host_poll_p50_ms", "host add+status p50", h.adds.percentile_ms(50.0) + h.statuses.percentile_ms(50.0));
    f.ms("host_commit_p50_ms", "host commit p50", h.commits.percentile_ms(50.0));
    for s in host_x.samples.iter().chain(&box_x.samples) {
        f.note(s.clone());
    }
    if !intact {
        f.note("the repository is corrupt or its branch broken: moves were not judged".to_string());
    }
    if phantom > 0 {
        f.note(format!("{phantom} reflog entries name a commit neither side made (a move git logged, then failed to make)"));
    }
    if !behind_paths.is_empty() {
        let more = if behind_paths.len() > 5 { format!(" (+{} more)", behind_paths.len() - 5) } else { String::new() };
        f.note(format!("behind in HEAD: {}{more}", behind_paths[..behind_paths.len().min(5)].join(", ")));
    }
    for (t, what) in [(&a.commits, "box add+commit"), (&h.adds, "host add"), (&h.statuses, "host status"), (&h.commits, "host commit")] {
        if let Some(n) = t.reasons_note(what, 3) {
            f.note(n);
        }
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
    fn steps_read_forward_or_back() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(step(Some(2), Some(3), None, t1), Step::Forward);
        assert_eq!(step(Some(3), Some(2), None, t1), Step::Back);
        // Gone: the owner's removal if it came first, else a stale index dropping the file.
        assert_eq!(step(Some(1), None, Some(t0), t1), Step::Forward);
        assert_eq!(step(Some(1), None, None, t1), Step::Back);
        assert_eq!(step(Some(1), None, Some(t1), t0), Step::Back);
        // New: the owner's file, unless the owner had removed it (a stale index bringing it back).
        assert_eq!(step(None, Some(1), None, t1), Step::Forward);
        assert_eq!(step(None, Some(1), Some(t0), t1), Step::Back);
        assert!(is_box("box/n0001.txt") && !is_box("boxer.txt") && !is_box("host.txt"));
    }
}
