//! `race host-commits`: the host commits every 100 ms while the box loops `commit`,
//! `reset --hard HEAD` and `reset --soft HEAD~` (undoing its own commit).
//!
//! Every host commit id is recorded from git's own summary line; at the end each must be
//! reachable from the branch. A box `reset --soft HEAD~` that read the host's commit as HEAD
//! (fresh) and reset it did what its user asked, as it would on one kernel: such commits are
//! counted apart ("rewound by a box reset that saw them", read from ORIG_HEAD right after the
//! reset). Only the rest, lost because the box acted on a stale view, break the invariant. To
//! keep deliberate rewinds rare the box resets only when HEAD still reads as its own commit.
//!
//! Both sides' `git commit` write and read back `.git/COMMIT_EDITMSG`, one file for both: commits
//! that landed with a message other than their own are counted (reported, not judged). A host
//! `commit -a` that finds nothing to commit right after its own change is traced: the change is
//! in HEAD already (a box commit took it), gone (a box `reset --hard` wrote over the shared work
//! tree), or still in the file yet invisible to git (an index claiming the file clean).
//!
//! With `--boxes N` every box runs the loop on its own files (`box-<i>/`) at once. Each box then
//! also looks at its status after its `git add`: a staged change to another box's file is a
//! foreign view (the first few are shown). Those are reported, not judged: `git status` reads
//! the index and HEAD at two moments, and another box's commit and soft reset a few ms apart
//! fall between them (its file then reads as staged here for that one status), as a host commit
//! does (the single-box run shows the host's `host.txt` staged in the box the same way). What is judged is what lands: a box commit that carries
//! another box's file took that box's staging (or re-added what it reset away), unless that
//! change is one a commit this box's own soft reset took off had made (its check of HEAD and its
//! reset are two commands; git keeps what a soft reset takes off staged): counted apart. A box
//! commit is lost when it is on no branch and no box's soft reset took it off. What soft resets
//! took off is read from the branch's reflog (each box resets under its own committer name) as
//! well as from `ORIG_HEAD`, which every side writes.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::{Duration, Instant};

use super::actor::{commit_id, commit_subject, git_run, Cadence, Ran, Tally};
use super::boxshell::BoxShell;
use super::check::{changes, extra_roots, parents, reachable, soft_reset_away, PathChange};
use super::figures::Figures;
use super::index_poller::{box_dirs, foreign_staged, leak};
use super::repo::Seed;
use super::rig::Rig;
use super::Params;
use crate::lab::git::append;
use crate::lab::LabError;

/// Default run time, seconds.
pub const DEFAULT_SECS: u64 = 60;
/// The host's commit period.
pub const HOST_PERIOD: Duration = Duration::from_millis(100);

#[derive(Debug, Default)]
struct HostSide {
    commits: Tally,
    ids: Vec<String>,
    /// When each landed commit's `git commit` returned (the branch had moved by then).
    landed_at: HashMap<String, Instant>,
    wrong_subject: u64,
    /// `nothing to commit` after the host's own change: where that change went.
    nothing: NothingToCommit,
}

/// Why a host `commit -a` found nothing to commit right after appending a line to `host.txt`.
#[derive(Debug, Default)]
struct NothingToCommit {
    /// The line is already in HEAD: a box commit took the host's work-tree change.
    in_head: u64,
    /// The line is gone from the work tree: a box `reset --hard` wrote over it.
    wiped: u64,
    /// The line is in the work tree and not in HEAD, yet git saw no change. Seen so far: a host
    /// `commit -a` that ran inside a box `reset --hard`'s unlink-then-create of `host.txt`
    /// committed its deletion, so the file is untracked since (docs/lab.md, bug 5).
    hidden: u64,
    /// What the first few hidden cases looked like (index entry, file, HEAD's moves).
    samples: Vec<String>,
}

/// Hidden cases described in the report.
const HIDDEN_SAMPLES: usize = 3;

impl NothingToCommit {
    fn classify(&mut self, host: &Path, line: &str) -> Result<(), LabError> {
        let wt = std::fs::read_to_string(host.join("host.txt")).unwrap_or_default();
        let head = git_run(host, &["show", "HEAD:host.txt"])?;
        if head.ok && head.stdout.lines().any(|l| l == line) {
            self.in_head += 1;
        } else if !wt.lines().any(|l| l == line) {
            self.wiped += 1;
        } else {
            self.hidden += 1;
            if self.samples.len() < HIDDEN_SAMPLES {
                self.samples.push(hidden_sample(host, line, &wt)?);
            }
        }
        Ok(())
    }
}

/// The evidence of one hidden change, right after git missed it: the index's entry for
/// `host.txt` (blob and stat), the file's stat and blob, and HEAD's recent moves.
fn hidden_sample(host: &Path, line: &str, wt: &str) -> Result<String, LabError> {
    use std::os::unix::fs::MetadataExt;
    let out = |args: &[&str]| -> Result<String, LabError> {
        Ok(git_run(host, args)?.stdout.split_whitespace().collect::<Vec<_>>().join(" "))
    };
    let entry = out(&["ls-files", "-s", "--debug", "host.txt"])?;
    let file_blob = out(&["hash-object", "host.txt"])?;
    let head_blob = out(&["rev-parse", "HEAD:host.txt"])?;
    let moves = out(&["reflog", "-4", "--format=%h %gs"])?;
    let deleted_by = out(&["log", "-2", "--diff-filter=D", "--format=%h %s (parent %p)", "--", "host.txt"])?;
    // A box `reset --hard` may have the file (or the index) unlinked right now: say so.
    let (meta, index) = match (std::fs::metadata(host.join("host.txt")), std::fs::metadata(host.join(".git/index"))) {
        (Ok(m), Ok(i)) => (m, i),
        (m, i) => return Ok(format!("hidden {line:?}: index entry [{entry}]; host.txt {:?}, index {:?} (unlinked by a box reset?)", m.err(), i.err())),
    };
    Ok(format!(
        "hidden {line:?}: index entry [{entry}]; file size {} mtime {}.{:09} ino {} ({} lines) blob {file_blob}; HEAD blob {head_blob}; index file mtime {}.{:09}; HEAD moves [{moves}]; host.txt deleted by [{deleted_by}]",
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ino(),
        wt.lines().count(),
        index.mtime(),
        index.mtime_nsec()
    ))
}

fn host_committer(host: &Path, until: Instant, period: Duration) -> Result<HostSide, LabError> {
    let mut h = HostSide::default();
    let mut tick = Cadence::new(period);
    let mut n = 0usize;
    while Instant::now() < until {
        tick.wait();
        n += 1;
        let line = format!("host change {n}");
        append(&host.join("host.txt"), &format!("{line}\n"))?;
        let subject = format!("host commit {n}");
        let r = git_run(host, &["-c", "core.abbrev=no", "commit", "-a", "-m", &subject])?;
        h.commits.record_ran(&r);
        if r.ok && commit_subject(&r.stdout) != Some(subject.as_str()) {
            h.wrong_subject += 1;
        }
        if !r.ok && (r.stdout.contains("nothing") || r.stdout.contains("no changes added")) {
            h.nothing.classify(host, &line)?;
        }
        if r.ok {
            match commit_id(&r.stdout) {
                Some(id) => {
                    h.landed_at.insert(id.clone(), Instant::now());
                    h.ids.push(id);
                }
                None => return Err(LabError::new("parse host commit id", host, format!("no id in {:?}", r.stdout))),
            }
        }
    }
    Ok(h)
}

#[derive(Debug, Default)]
struct BoxSide {
    commit: Tally,
    hard: Tally,
    soft: Tally,
    soft_skipped: u64,
    wrong_subject: u64,
    ids: Vec<String>,
    /// ORIG_HEAD after each landed soft reset: the commit that reset took off the branch (unless
    /// another box's reset wrote ORIG_HEAD first; the reflog is read too).
    reset_away: HashSet<String>,
    /// Looks after `git add` that staged another box's files (several boxes only).
    foreign: u64,
    /// The first few foreign views' status lines.
    foreign_samples: Vec<String>,
    /// Box commits and `reset --hard` git refused because the branch had moved.
    moved: Vec<Moved>,
    /// Box git commands that read an object as garbage (what git said).
    corrupt: Vec<String>,
}

/// Git read an object's bytes as garbage: a file served under another file's name (ADR 0057),
/// or a torn write.
fn reads_corrupt(stderr: &str) -> bool {
    ["inflate: data stream error", "unable to unpack", "is corrupt", "hash mismatch", "is not a valid object"].iter().any(|m| stderr.contains(m))
}

/// A box command git's own check refused ("cannot lock ref 'HEAD': is at X but expected Y"):
/// when it was started, and X, the branch's tip at its lock.
#[derive(Debug, Clone)]
struct Moved {
    started: Instant,
    tip: String,
}

impl Moved {
    fn of(started: Instant, stderr: &str) -> Option<Moved> {
        let rest = stderr.split("is at ").nth(1)?;
        let tip: String = rest.chars().take_while(|c| c.is_ascii_hexdigit()).collect();
        (tip.len() >= 40).then_some(Moved { started, tip })
    }
}

/// Foreign views shown per box.
const FOREIGN_SAMPLES: usize = 2;

fn box_looper(sh: &BoxShell, until: Instant, (prefix, others): &(String, Vec<String>)) -> Result<BoxSide, LabError> {
    let dir = sh.dir();
    let mut b = BoxSide::default();
    let mut n = 0usize;
    let mut corrupt = Vec::new();
    // Every box git command, with what it said when it read an object as garbage.
    let mut git = |args: &[&str]| -> Result<Ran, LabError> {
        let r = sh.git(args)?;
        if reads_corrupt(&r.stderr) {
            corrupt.push(format!("git {}: {}", args.join(" "), r.stderr.lines().take(3).collect::<Vec<_>>().join(" | ")));
        }
        Ok(r)
    };
    while Instant::now() < until {
        n += 1;
        let rel = format!("{prefix}{n:05}.txt");
        sh.write(&rel, &format!("box change {n}\n"))?;
        let add = git(&["add", &rel])?;
        if add.ok && !others.is_empty() {
            let st = git(&["status", "--porcelain=v1", "--untracked-files=no", "--no-renames"])?;
            if st.ok && foreign_staged(&st.stdout, others) {
                b.foreign += 1;
                if b.foreign_samples.len() < FOREIGN_SAMPLES {
                    let lines: Vec<&str> = st.stdout.lines().take(4).collect();
                    b.foreign_samples.push(format!("{prefix} after adding {rel}: {}", lines.join(" | ")));
                }
            }
        }
        b.commit.note_crash(&add);
        let own = if add.ok {
            let subject = format!("box commit {n}");
            let started = Instant::now();
            let c = git(&["-c", "core.abbrev=no", "commit", "-m", &subject])?;
            b.moved.extend(Moved::of(started, &c.stderr));
            b.commit.record(c.ok, add.elapsed + c.elapsed, || c.why());
            b.commit.note_crash(&c);
            if c.ok && commit_subject(&c.stdout) != Some(subject.as_str()) {
                b.wrong_subject += 1;
            }

            if c.ok {
                let id = commit_id(&c.stdout)
                    .ok_or_else(|| LabError::new("parse box commit id", dir, format!("no id in {:?}", c.stdout)))?;
                b.ids.push(id.clone());
                Some(id)
            } else {
                None
            }
        } else {
            b.commit.record(false, add.elapsed, || add.why());
            None
        };
        let started = Instant::now();
        let hard = git(&["reset", "-q", "--hard", "HEAD"])?;
        b.moved.extend(Moved::of(started, &hard.stderr));
        b.hard.record_ran(&hard);
        let Some(own) = own else { continue };
        // Undo our own commit only: if HEAD reads as something else, the host committed on top.
        let head = git(&["rev-parse", "HEAD"])?;
        if head.stdout.trim() != own {
            b.soft_skipped += 1;
            continue;
        }
        // Under the box's own name, so the branch's reflog says which box took what off.
        let soft = git(&["-c", &format!("user.name={}", reset_ident(prefix)), "reset", "-q", "--soft", "HEAD~"])?;
        b.soft.record_ran(&soft);
        if soft.ok {
            let orig = git(&["rev-parse", "ORIG_HEAD"])?;
            if orig.ok {
                b.reset_away.insert(orig.stdout.trim().to_string());
            }
        }
    }
    b.corrupt = corrupt;
    Ok(b)
}

/// The committer name a box's soft resets move the branch under (`box-<i>/` → `seam-lab box-<i>`).
fn reset_ident(prefix: &str) -> String {
    format!("seam-lab {}", prefix.trim_end_matches('/'))
}

/// What each commit in `ids` changed against its first parent, in the order given (root
/// commits and missing ones left out).
fn changes_of(host: &Path, ids: &[String]) -> Result<Vec<(String, Vec<PathChange>)>, LabError> {
    let parents = parents(host, ids)?;
    let pairs: Vec<(String, String)> = ids.iter().filter_map(|id| Some((id.clone(), parents.get(id)?.first()?.clone()))).collect();
    let diffs = changes(host, &pairs)?;
    Ok(pairs.into_iter().map(|(id, _)| id).zip(diffs).collect())
}

/// A box's landed commits that change a file under `others` (other boxes' dirs): how many, how
/// many of those only re-commit what this box's own soft resets took off the branch (git keeps
/// a soft reset's commit staged, so a box that reset another's commit on top of its own commits
/// it again, as on one kernel), and the first few of the rest (`A path`: re-added, `D path`:
/// reverted, `M path`: changed). `taken`: what the commits this box's soft resets took off
/// changed.
fn carrying_others(host: &Path, b: &BoxSide, others: &[String], taken: &Taken) -> Result<Carried, LabError> {
    let mut c = Carried::default();
    for (id, changed) in changes_of(host, &b.ids)? {
        let theirs: Vec<&PathChange> = changed.iter().filter(|ch| others.iter().any(|o| ch.path.starts_with(o.as_str()))).collect();
        if theirs.is_empty() {
            continue;
        }
        if theirs.iter().all(|ch| taken.get(&ch.path).is_some_and(|t| t.contains(&ch.new))) {
            c.own_reset += 1;
            continue;
        }
        c.foreign += 1;
        if c.samples.len() < FOREIGN_SAMPLES {
            let status = |ch: &PathChange| match (&ch.old, &ch.new) {
                (None, _) => 'A',
                (_, None) => 'D',
                _ => 'M',
            };
            let listed: Vec<String> = theirs.iter().map(|ch| format!("{} {}", status(ch), ch.path)).collect();
            c.samples.push(format!("{id}: {}", listed.join(", ")));
        }
    }
    Ok(c)
}

/// What the commits one box's soft resets took off changed: path → the blobs they left there
/// (`None`: removed).
type Taken = HashMap<String, HashSet<Option<String>>>;

/// One box's commits that touch other boxes' files.
#[derive(Debug, Default)]
struct Carried {
    foreign: u64,
    own_reset: u64,
    samples: Vec<String>,
}

/// What the commits each box's soft resets took off changed (see [`carrying_others`]), per box.
fn taken_by_box(host: &Path, away: &HashMap<String, String>, nb: usize) -> Result<Vec<Taken>, LabError> {
    (0..nb)
        .map(|i| {
            let me = reset_ident(&box_dirs(i, nb).0);
            let ids: Vec<String> = away.iter().filter(|(_, who)| **who == me).map(|(id, _)| id.clone()).collect();
            let mut taken = Taken::new();
            for ch in changes_of(host, &ids)?.into_iter().flat_map(|(_, changed)| changed) {
                taken.entry(ch.path).or_default().insert(ch.new);
            }
            Ok(taken)
        })
        .collect()
}

/// Every box's side as one.
fn merged(per_box: &[BoxSide]) -> BoxSide {
    let mut all = BoxSide::default();
    for b in per_box {
        for (to, from) in [(&mut all.commit, &b.commit), (&mut all.hard, &b.hard), (&mut all.soft, &b.soft)] {
            to.merge(from);
        }
        all.soft_skipped += b.soft_skipped;
        all.wrong_subject += b.wrong_subject;
        all.foreign += b.foreign;
        all.foreign_samples.extend(b.foreign_samples.iter().cloned());
        all.ids.extend(b.ids.iter().cloned());
        all.reset_away.extend(b.reset_away.iter().cloned());
        all.moved.extend(b.moved.iter().cloned());
        all.corrupt.extend(b.corrupt.iter().cloned());
    }
    all
}

/// Runs the scenario on a mounted rig.
pub fn run(rig: &Rig, seed: &Seed, p: &Params) -> Result<Figures, LabError> {
    let until = Instant::now() + p.duration_or(DEFAULT_SECS);
    let nb = rig.boxes.len();
    let (host, boxed) = std::thread::scope(|s| {
        let host = s.spawn(|| host_committer(&rig.host, until, p.host_period.unwrap_or(HOST_PERIOD)));
        let workers: Vec<_> = rig.boxes.iter().enumerate().map(|(i, sh)| s.spawn(move || box_looper(sh, until, &box_dirs(i, nb)))).collect();
        let boxed: Vec<_> = workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|_| Err(LabError::new("join box looper", &rig.host, "panicked"))))
            .collect();
        let host = host.join().unwrap_or_else(|_| Err(LabError::new("join host committer", &rig.host, "panicked")));
        (host, boxed)
    });
    let h = host?;
    let per_box = boxed.into_iter().collect::<Result<Vec<BoxSide>, LabError>>()?;
    let b = merged(&per_box);

    let on_branch = reachable(&rig.host, "refs/heads/main")?;
    // What soft resets took off: ORIG_HEAD as each box read it, and (several boxes overwrite
    // the one ORIG_HEAD) the branch's reflog.
    let away = soft_reset_away(&rig.host.join(".git"), "refs/heads/main")?;
    let mut reset_away: HashSet<String> = away.keys().cloned().collect();
    reset_away.extend(b.reset_away.iter().cloned());
    let lost: Vec<&String> = h.ids.iter().filter(|id| !on_branch.contains(id)).collect();
    let seen_and_reset = lost.iter().filter(|id| reset_away.contains(**id)).count() as u64;
    let stale_lost = lost.len() as u64 - seen_and_reset;
    let roots = extra_roots(&rig.host, "refs/heads/main", &b.ids, &seed.initial)?;
    let fsck = rig.fsck_problems()?;
    let mut all = Tally::default();
    for t in [&b.commit, &b.hard, &b.soft] {
        all.merge(t);
    }

    let mut f = Figures::default();
    on_branch.judge(&mut f);
    f.zero("host_commits_lost", "host commits lost (stale view)", stale_lost);
    f.count("host_commits_reset_seen", "host commits reset by a box reset that read them", seen_and_reset);
    f.zero("box_root_commits", "box root commits", roots.len() as u64);
    f.zero("box_git_crashed", "box git killed by a signal (SIGBUS…)", all.crashed);
    f.zero("box_corrupt_reads", "box git read an object as garbage", b.corrupt.len() as u64);
    let box_lost = |b: &BoxSide| b.ids.iter().filter(|id| !on_branch.contains(id) && !reset_away.contains(*id)).count() as u64;
    if nb > 1 {
        f.zero("box_commits_lost", "box commits lost (on no branch, no box reset them)", box_lost(&b));
        f.count("foreign_index_views", "box looks staging another box's files (transient)", b.foreign);
        let taken = taken_by_box(&rig.host, &away, nb)?;
        let carried: Vec<Carried> = per_box
            .iter()
            .enumerate()
            .map(|(i, one)| carrying_others(&rig.host, one, &box_dirs(i, nb).1, &taken[i]))
            .collect::<Result<_, _>>()?;
        f.zero("box_commits_carrying_others", "box commits carrying another box's files", carried.iter().map(|c| c.foreign).sum());
        f.count(
            "box_commits_recommitting_own_reset",
            "box commits re-committing what its own reset took off",
            carried.iter().map(|c| c.own_reset).sum(),
        );
        for (i, c) in carried.iter().enumerate() {
            for s in &c.samples {
                f.note(format!("box {i} commit carrying another box's file: {s}"));
            }
        }
        for (i, one) in per_box.iter().enumerate() {
            f.share(leak(format!("box{i}_commit")), leak(format!("box {i}: commit landed")), one.commit.landed, one.commit.attempted);
            f.zero(leak(format!("box{i}_commits_lost")), leak(format!("box {i}: commits lost")), box_lost(one));
            f.zero(leak(format!("box{i}_carrying_others")), leak(format!("box {i}: commits carrying another box's files")), carried[i].foreign);
        }
    }
    f.zero("fsck_problems", "git fsck problems", fsck.len() as u64);
    f.share("host_commits", "host commits landed", h.commits.landed, h.commits.attempted);
    f.share("box_ops", "box ops landed (all)", all.landed, all.attempted);
    f.share("box_commit", "box commit landed", b.commit.landed, b.commit.attempted);
    f.share("box_reset_hard", "box reset --hard HEAD landed", b.hard.landed, b.hard.attempted);
    f.share("box_reset_soft", "box reset --soft HEAD~ landed", b.soft.landed, b.soft.attempted);
    f.count("box_reset_soft_skipped", "soft resets skipped (host on top)", b.soft_skipped);
    f.count("box_ops_refused", "box ops refused", all.refused());
    // Which host commit each refusal met, and whether it had landed before the box command was
    // even started (the box began from a view older than the branch) or landed while it ran.
    let met = |before: bool| b.moved.iter().filter(|m| h.landed_at.get(&m.tip).is_some_and(|t| (*t < m.started) == before)).count() as u64;
    f.count("box_refused_host_before", "box commits/resets git refused: host commit landed before they began", met(true));
    f.count("box_refused_host_during", "box commits/resets git refused: host commit landed while they ran", met(false));
    f.count("wrong_subjects", "commits landed with another message", h.wrong_subject + b.wrong_subject);
    f.count("host_change_in_box_commit", "host change already in a box commit", h.nothing.in_head);
    f.count("host_change_wiped", "host change wiped by a box reset --hard", h.nothing.wiped);
    f.count("host_change_hidden", "host change invisible to git (index)", h.nothing.hidden);
    f.ms("box_op_p50_ms", "box op latency p50", all.percentile_ms(50.0));
    f.ms("box_op_p99_ms", "box op latency p99", all.percentile_ms(99.0));
    for (t, what) in [(&b.commit, "box commit"), (&b.hard, "box reset --hard"), (&b.soft, "box reset --soft")] {
        if let Some(n) = t.reasons_note(what, 3) {
            f.note(n);
        }
    }
    if let Some(n) = h.commits.reasons_note("host commit", 3) {
        f.note(n);
    }
    for sample in b.corrupt.iter().take(2) {
        f.note(format!("object read as garbage: {sample}"));
    }
    for sample in &b.foreign_samples {
        f.note(format!("foreign view: {sample}"));
    }
    for sample in &h.nothing.samples {
        f.note(sample.clone());
    }
    if let Some(r) = roots.first() {
        f.note(format!("root commit {r} (of {})", roots.len()));
    }
    for p in fsck.iter().take(5) {
        f.note(format!("fsck: {p}"));
    }
    Ok(f)
}
