//! Checks of the host's repository after (or during) a race, read in the backing dir: the truth,
//! never the box's cached view.

use std::collections::{HashMap, HashSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use super::actor::git_run;
use crate::lab::git::{git, git_cmd};
use crate::lab::LabError;

/// `git fsck --strict --no-dangling`: the lines that report a problem (a non-zero exit with no
/// such line counts as one problem).
pub fn fsck_problems(host: &Path) -> Result<Vec<String>, LabError> {
    let r = git_run(host, &["fsck", "--strict", "--no-dangling", "--no-progress"])?;
    let bad = ["error", "missing", "broken", "corrupt", "bad ", "fatal", "warning", "invalid"];
    let mut problems: Vec<String> = format!("{}\n{}", r.stdout, r.stderr)
        .lines()
        .filter(|l| {
            let l = l.to_lowercase();
            bad.iter().any(|b| l.contains(b))
        })
        .map(|l| l.trim().to_string())
        .collect();
    if !r.ok && problems.is_empty() {
        problems.push(format!("git fsck {}", r.status));
    }
    Ok(problems)
}

/// Every commit reachable from `rev`.
pub fn reachable(host: &Path, rev: &str) -> Result<Reachable, LabError> {
    let r = git_run(host, &["rev-list", rev])?;
    if r.ok {
        return Ok(Reachable { ids: r.stdout.lines().map(str::to_string).collect(), broken: None });
    }
    // A ref left empty or naming a missing object (what a share that loses the box's writes
    // leaves) is a finding, not a failure of the lab.
    let err = r.stderr.to_lowercase();
    if ["broken ref", "unknown revision", "bad object", "bad revision", "could not read"].iter().any(|w| err.contains(w)) {
        return Ok(Reachable { ids: HashSet::new(), broken: Some(r.why()) });
    }
    Err(LabError::new(format!("git rev-list {rev}"), host, format!("{}: {}", r.status, r.stderr.trim())))
}

/// The commits a branch reaches, or why it reaches none (its ref is broken).
#[derive(Debug, Clone, Default)]
pub struct Reachable {
    /// The reachable commit ids.
    pub ids: HashSet<String>,
    /// git's reason when the ref could not be read.
    pub broken: Option<String>,
}

impl Reachable {
    /// Whether `id` is reachable.
    pub fn contains(&self, id: &str) -> bool {
        self.ids.contains(id)
    }

    /// Adds the `branch_broken` figure (and git's reason as a note).
    pub fn judge(&self, f: &mut super::figures::Figures) {
        f.zero("branch_broken", "host branch unreadable (broken ref)", u64::from(self.broken.is_some()));
        if let Some(why) = &self.broken {
            f.note(format!("refs/heads/main is broken: {why}"));
        }
    }
}

/// Runs git with `input` on stdin; its stdout (whatever the exit status: batch commands report
/// per line).
fn git_stdin(dir: &Path, args: &[&str], input: &str) -> Result<String, LabError> {
    let op = format!("git {}", args.join(" "));
    let mut child = git_cmd(dir)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| LabError::new(format!("start {op}"), dir, e))?;
    let mut stdin = child.stdin.take().ok_or_else(|| LabError::new(&op, dir, "no stdin pipe"))?;
    let text = input.to_string();
    // A writer thread: a large input must not deadlock against a full stdout pipe.
    let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
    let out = child.wait_with_output().map_err(|e| LabError::new(&op, dir, e))?;
    writer
        .join()
        .map_err(|_| LabError::new(&op, dir, "stdin writer panicked"))?
        .map_err(|e| LabError::new(format!("{op}: write stdin"), dir, e))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Parents of each commit in `ids` that exists in the object store (missing ones are left out).
pub fn parents(host: &Path, ids: &[String]) -> Result<HashMap<String, Vec<String>>, LabError> {
    let mut out = HashMap::new();
    if ids.is_empty() {
        return Ok(out);
    }
    // `%(objecttype)` first, so a missing or non-commit id is skipped rather than failing all.
    let types = git_stdin(host, &["cat-file", "--batch-check=%(objectname) %(objecttype)"], &(ids.join("\n") + "\n"))?;
    let commits: Vec<&str> =
        types.lines().filter_map(|l| l.strip_suffix(" commit")).filter(|id| id.len() >= 40).collect();
    for chunk in commits.chunks(200) {
        let mut args = vec!["log", "--no-walk=unsorted", "--format=%H %P"];
        args.extend(chunk.iter().copied());
        for line in git(host, &args)?.lines() {
            let mut it = line.split_whitespace();
            if let Some(id) = it.next() {
                out.insert(id.to_string(), it.map(str::to_string).collect());
            }
        }
    }
    Ok(out)
}

/// Root commits (no parents) among `ids`, plus those reachable from `rev`, other than `initial`.
pub fn extra_roots(host: &Path, rev: &str, ids: &[String], initial: &str) -> Result<Vec<String>, LabError> {
    let mut roots: HashSet<String> =
        parents(host, ids)?.into_iter().filter(|(_, p)| p.is_empty()).map(|(id, _)| id).collect();
    // A broken ref reaches no root (reachable() reports it).
    for r in git_run(host, &["rev-list", "--max-parents=0", rev])?.stdout.lines() {
        roots.insert(r.to_string());
    }
    roots.remove(initial);
    let mut v: Vec<String> = roots.into_iter().collect();
    v.sort();
    Ok(v)
}

/// Lock files (`*.lock`) anywhere below `dir`, not following symlinks.
pub fn lock_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(p),
                Ok(_) if p.extension().is_some_and(|x| x == "lock") => out.push(p),
                _ => {}
            }
        }
    }
    out.sort();
    out
}

/// Rebase state dirs present in the git dir (`rebase-merge`, `rebase-apply`).
pub fn rebase_dirs(gitdir: &Path) -> Vec<String> {
    ["rebase-merge", "rebase-apply"].iter().filter(|d| gitdir.join(d).is_dir()).map(|d| d.to_string()).collect()
}

/// Subjects of every commit reachable from `rev`.
pub fn subjects(host: &Path, rev: &str) -> Result<HashSet<String>, LabError> {
    Ok(git(host, &["log", "--format=%s", rev])?.lines().map(str::to_string).collect())
}

/// Paths in `rev`'s tree.
pub fn tree_paths(host: &Path, rev: &str) -> Result<HashSet<String>, LabError> {
    Ok(git(host, &["ls-tree", "-r", "--name-only", rev])?.lines().map(str::to_string).collect())
}

/// [`tree_paths`] of the host's branch, with the branch reported as broken (and no paths) when
/// its ref or commit cannot be read, as [`reachable`] does.
pub fn branch_tree_paths(host: &Path, rev: &str) -> Result<(HashSet<String>, Reachable), LabError> {
    let r = reachable(host, rev)?;
    if r.broken.is_some() {
        return Ok((HashSet::new(), r));
    }
    Ok((tree_paths(host, rev)?, r))
}

/// One path a move of a ref changed: the blob ids before and after (`None` where the path is
/// absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathChange {
    /// The path.
    pub path: String,
    /// The blob before the move.
    pub old: Option<String>,
    /// The blob after it.
    pub new: Option<String>,
}

/// What each move changed: `(new, old)` pairs of commits, diffed old to new (`git diff-tree
/// --stdin -r`, no rename detection); one list per pair, in order.
pub fn changes(host: &Path, moves: &[(String, String)]) -> Result<Vec<Vec<PathChange>>, LabError> {
    if moves.is_empty() {
        return Ok(Vec::new());
    }
    let input: String = moves.iter().map(|(new, old)| format!("{new} {old}\n")).collect();
    let args = ["diff-tree", "--stdin", "--always", "-r", "--no-renames", "--no-abbrev", "--raw"];
    let raw = git_stdin(host, &args, &input)?;
    let mut out: Vec<Vec<PathChange>> = Vec::with_capacity(moves.len());
    for line in raw.lines() {
        // `--always`: a line naming the commit starts each pair's answer, then
        // `:100644 100644 <old> <new> M\t<path>` per path.
        let Some(meta) = line.strip_prefix(':') else {
            out.push(Vec::new());
            continue;
        };
        let (Some(list), Some((fields, path))) = (out.last_mut(), meta.split_once('\t')) else { continue };
        let f: Vec<&str> = fields.split(' ').collect();
        if f.len() < 4 {
            continue;
        }
        let blob = |s: &str| (!s.chars().all(|c| c == '0')).then(|| s.to_string());
        list.push(PathChange { path: path.to_string(), old: blob(f[2]), new: blob(f[3]) });
    }
    if out.len() != moves.len() {
        return Err(LabError::new("parse git diff-tree --stdin", host, format!("{} answers to {} pairs", out.len(), moves.len())));
    }
    Ok(out)
}

/// The moves a ref's reflog (`<gitdir>/logs/<refname>`) records, oldest first, as (old, new).
/// The old value is what the mover's git read, which a stale view gets wrong: the previous
/// entry's new value is what it really replaced.
pub fn reflog(gitdir: &Path, refname: &str) -> Result<Vec<(String, String)>, LabError> {
    let path = gitdir.join("logs").join(refname);
    let text = std::fs::read_to_string(&path).map_err(|e| LabError::new("read reflog", &path, e))?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let mut it = l.split(' ');
            Some((it.next()?.to_string(), it.next()?.to_string()))
        })
        .collect())
}

/// The commits a `git reset --soft HEAD~` (reflog message `reset: moving to HEAD~`) really took
/// off the branch, from its reflog in `gitdir`, each with the name of the committer identity
/// that moved it (the lab gives each box its own). Git appends the reflog line before it renames
/// the ref's lock, so a refused move leaves a line too: a move took effect when the next line
/// starts at its new value (the last: when the branch holds it now), and it took off its old
/// value only when the branch really held that (a stale reader's old value is wrong).
/// `ORIG_HEAD`, which a box reads after its reset, is one file for every side, so another box's
/// reset can overwrite it first; the reflog cannot lose that.
pub fn soft_reset_away(gitdir: &Path, refname: &str) -> Result<HashMap<String, String>, LabError> {
    let path = gitdir.join("logs").join(refname);
    let text = std::fs::read_to_string(&path).map_err(|e| LabError::new("read reflog", &path, e))?;
    let tip = std::fs::read_to_string(gitdir.join(refname)).ok();
    Ok(soft_resets_in(&text, tip.as_deref().map(str::trim)))
}

/// One reflog line: old value, new value, the mover's name, the message.
fn reflog_line(l: &str) -> Option<(&str, &str, &str, &str)> {
    let (head, msg) = l.split_once('\t')?;
    let (old, rest) = head.split_once(' ')?;
    let (new, ident) = rest.split_once(' ')?;
    let name = ident.split_once(" <").map_or(ident, |(n, _)| n);
    Some((old, new, name, msg))
}

fn soft_resets_in(reflog: &str, tip: Option<&str>) -> HashMap<String, String> {
    let lines: Vec<_> = reflog.lines().filter_map(reflog_line).collect();
    let mut away = HashMap::new();
    let mut actual = lines.first().map(|l| l.0);
    for (i, &(old, new, name, msg)) in lines.iter().enumerate() {
        let took_effect = lines.get(i + 1).map_or(tip == Some(new), |next| next.0 == new);
        if !took_effect {
            continue;
        }
        if msg == "reset: moving to HEAD~" && actual == Some(old) {
            away.insert(old.to_string(), name.to_string());
        }
        actual = Some(new);
    }
    away
}

/// The text of each blob in `blobs` (`git cat-file --batch`); missing ones are left out. Meant
/// for the lab's small text files.
pub fn blob_texts(host: &Path, blobs: &[String]) -> Result<HashMap<String, String>, LabError> {
    let mut out = HashMap::new();
    if blobs.is_empty() {
        return Ok(out);
    }
    let raw = git_stdin(host, &["cat-file", "--batch"], &(blobs.join("\n") + "\n"))?;
    let mut rest = raw.as_str();
    // Each answer: `<oid> blob <size>\n<size bytes>\n`, or `<oid> missing\n`.
    while let Some((header, after)) = rest.split_once('\n') {
        let h: Vec<&str> = header.split(' ').collect();
        match h.as_slice() {
            [oid, _, size] => {
                let n: usize = size.parse().map_err(|e| LabError::new("parse git cat-file --batch", host, e))?;
                let text = after.get(..n).ok_or_else(|| LabError::new("parse git cat-file --batch", host, "short blob"))?;
                out.insert(oid.to_string(), text.to_string());
                rest = after.get(n + 1..).unwrap_or("");
            }
            _ => rest = after,
        }
    }
    Ok(out)
}

/// Every path in `rev`'s tree with its blob id.
pub fn tree_blobs(host: &Path, rev: &str) -> Result<HashMap<String, String>, LabError> {
    let listing = git(host, &["ls-tree", "-r", "--full-tree", rev])?;
    Ok(listing
        .lines()
        .filter_map(|l| {
            // `<mode> blob <oid>\t<path>`
            let (meta, path) = l.split_once('\t')?;
            Some((path.to_string(), meta.split(' ').nth(2)?.to_string()))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::soft_resets_in;

    fn line(old: &str, new: &str, msg: &str) -> String {
        format!("{old} {new} seam-lab box-1 <lab@lab> 1796178646 +0000\t{msg}\n")
    }

    #[test]
    fn soft_resets_count_only_moves_that_took_effect() {
        let log = [
            line("a", "b", "commit: box commit 1"),
            // Refused (the branch stayed at b: the next line starts at b).
            line("b", "a", "reset: moving to HEAD"),
            line("b", "a", "reset: moving to HEAD~"),
            line("a", "c", "commit: host commit 1"),
            // Refused: the next line starts at c, not a.
            line("c", "a", "reset: moving to HEAD~"),
            // A stale reader's move: it took effect, but the branch was at c, not d.
            line("d", "c2", "reset: moving to HEAD~"),
            line("c2", "e", "commit: box commit 2"),
            line("e", "c2", "reset: moving to HEAD~"),
            line("c2", "f", "commit: box commit 3"),
            // The last line: refused unless the branch holds its new value.
            line("f", "c2", "reset: moving to HEAD~"),
        ]
        .concat();
        let keys = |m: std::collections::HashMap<String, String>| {
            assert!(m.values().all(|n| n == "seam-lab box-1"), "{m:?}");
            let mut k: Vec<String> = m.into_keys().collect();
            k.sort();
            k
        };
        assert_eq!(keys(soft_resets_in(&log, Some("f"))), ["b", "e"]);
        assert_eq!(keys(soft_resets_in(&log, Some("c2"))), ["b", "e", "f"]);
    }
}
