//! `seamd doctor`: what a human should know about the checkout's cross-kernel state.
//!
//! Reads only, through the same no-link rules as `run`; changes nothing.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use seamfs::heal::proposal::ProposalName;

use crate::fsx::{self, Kind, ReadError};
use crate::gitdirs::{operation_in_progress, Checkout, GitDir};
use crate::install::{proposals, INDEX};
use crate::quote;

/// How `doctor` works.
#[derive(Debug, Clone, Copy)]
pub struct DoctorOptions {
    /// A `*.lock` older than this is reported (default 60 s).
    pub lock_age: Duration,
}

impl Default for DoctorOptions {
    fn default() -> Self {
        DoctorOptions { lock_age: Duration::from_secs(60) }
    }
}

/// How much a row matters (`seamd doctor` uses info and warn).
pub use seamfs::report::Severity as Level;

/// One finding: a stable kind, a severity, what was found and the recovery as text.
pub use seamfs::report::Finding as Row;

/// How a path is shown in a row and in the commands a recovery gives: every row goes through
/// here, so the quoting of names is one function.
pub fn shown(p: &Path) -> String {
    quote::shell(p)
}

fn row(kind: &'static str, level: Level, at: &Path, found: impl Into<String>, recovery: impl Into<String>) -> Row {
    Row { kind, severity: level, at: quote::shown(at), found: found.into(), recovery: recovery.into() }
}

/// The report as text: one line per row, its recovery below, and a count.
pub fn human(rows: &[Row]) -> String {
    let warns = rows.iter().filter(|r| r.severity >= Level::Warn).count();
    format!("{}seamd doctor: {} finding(s), {warns} to look at\n", seamfs::report::human(rows), rows.len())
}

/// The report as one JSON document (field names: docs/box-setup.md, "Doctor output").
pub fn json(checkout: &Path, rows: &[Row]) -> String {
    seamfs::report::json("seamd doctor", &checkout.display().to_string(), rows)
}

/// All findings for the checkout.
pub fn doctor(c: &Checkout, opts: DoctorOptions) -> Vec<Row> {
    let mut rows = Vec::new();
    let (dirs, skipped) = c.git_dirs();
    for s in skipped {
        let found = format!("{}: not used as a worktree git dir (seamd follows no link)", s.why);
        rows.push(row("skipped-gitdir", Level::Warn, &s.rel, found, "check what put it there"));
    }
    for g in &dirs {
        proposal_rows(c, g, &mut rows);
        let autostash_only = autostash_rows(c, g, &mut rows);
        lock_rows(c, g, opts.lock_age, &mut rows);
        hooks_rows(c, g, &mut rows);
        match operation_in_progress(g) {
            // The autostash row already says what blocks seamd and how to clear it.
            Some(_) if autostash_only => {}
            Some(op) => rows.push(row(
                "operation-in-progress",
                Level::Info,
                &g.rel,
                format!("a git operation is in progress ({op}); seamd installs nothing here meanwhile"),
                "finish or abort it on the host",
            )),
            None => {}
        }
        box_index_rows(g, &mut rows);
    }
    rows
}

/// One row per box index in the git dir: `index-box.<id>` (ADR 0028), or an older seamfs's
/// `index-box` (the first box that comes takes it over).
fn box_index_rows(g: &GitDir, rows: &mut Vec<Row>) {
    let mut names: Vec<_> = fsx::list(&g.dir, Path::new(".")).unwrap_or_default();
    names.retain(|n| seamfs::index::names::is_box_index(n));
    names.sort();
    for n in names {
        let Ok(Some((k, _))) = fsx::lstat(&g.dir, Path::new(&n)) else { continue };
        let level = if k == Kind::File { Level::Info } else { Level::Warn };
        let name = n.to_string_lossy();
        let whose = match name.strip_prefix("index-box.") {
            Some(id) => format!("box {id}'s own index"),
            None => "an older seamfs's box index, taken over by the next box that touches it".to_string(),
        };
        let found = format!("{name} present ({}): {whose}, derived state", k.describe());
        rows.push(row("index-box", level, &g.rel, found, "safe to delete when no box git runs"));
    }
}

fn proposal_rows(c: &Checkout, g: &GitDir, rows: &mut Vec<Row>) {
    let names = match proposals(g) {
        Ok(n) => n,
        Err(e) => {
            rows.push(row("proposal", Level::Warn, &g.rel, e.to_string(), "check the git dir's permissions"));
            return;
        }
    };
    let rm = |name: &std::ffi::OsStr| format!("rm -- {}", shown(&c.path.join(&g.rel).join(name)));
    for name in names {
        let shown_name = quote::shown(Path::new(&name));
        let mut add = |kind, level, found: &str, recovery: String| {
            rows.push(row(kind, level, &g.rel, format!("{shown_name}: {found}"), recovery));
        };
        let parsed = match ProposalName::parse(name.as_bytes()) {
            Ok(p) => p,
            Err(e) => {
                add("malformed-proposal", Level::Warn, &format!("{e}; ignored"), format!("`seamd run` prunes it; or remove it: {}", rm(&name)));
                continue;
            }
        };
        let bytes = match fsx::read_regular(&g.dir, Path::new(&name)) {
            Ok(Some((b, _))) => b,
            Ok(None) => continue,
            Err(ReadError::NotRegular(k)) => {
                let fix = format!("remove it by hand ({}, which removes the link only)", rm(&name));
                add("malformed-proposal", Level::Warn, &format!("{}: refused, never followed", k.describe()), fix);
                continue;
            }
            Err(e) => {
                add("malformed-proposal", Level::Warn, &format!("unreadable ({e})"), "`seamd run` prunes it".into());
                continue;
            }
        };
        if let Err(bad) = seamfs::index::validate::check(&bytes) {
            add("malformed-proposal", Level::Warn, &format!("content is not a whole index ({bad})"), "`seamd run` prunes it".into());
            continue;
        }
        let head_ok = matches!(c.head(g), Ok(seamfs::gitdata::HeadOid::At(h)) if h == parsed.head);
        let base_ok = matches!(fsx::read_regular(&g.dir, Path::new(INDEX)), Ok(Some((b, _))) if crate::install::base_holds(g, &parsed, &b));
        match (head_ok, base_ok) {
            (true, true) => add("pending-proposal", Level::Info, "pending", "`seamd run` installs it".into()),
            (false, _) => add("stale-proposal", Level::Warn, "stale: HEAD no longer resolves to its head", "`seamd run` prunes it".into()),
            (true, false) => add("stale-proposal", Level::Warn, "stale: the shared index changed since", "`seamd run` prunes it".into()),
        }
    }
}

/// True when `dir` in the git dir holds `autostash` and nothing else: what an interrupted
/// `pull --rebase --autostash` leaves when the rebase itself is gone.
fn only_autostash(g: &GitDir, dir: &str) -> bool {
    fsx::list(&g.dir, Path::new(dir)).is_ok_and(|names| names.iter().all(|n| n == "autostash"))
}

/// Rows for `rebase-*/autostash`; true when a directory holds only it (then it is also what
/// keeps seamd waiting).
fn autostash_rows(c: &Checkout, g: &GitDir, rows: &mut Vec<Row>) -> bool {
    let mut only = false;
    for dir in ["rebase-merge", "rebase-apply"] {
        let rel = Path::new(dir).join("autostash");
        let at = g.rel.join(&rel);
        let b = match fsx::read_regular(&g.dir, &rel) {
            Ok(Some((b, _))) => b,
            Ok(None) => continue,
            Err(e) => {
                rows.push(row("autostash", Level::Warn, &at, format!("not read: {e}"), "inspect it by hand"));
                continue;
            }
        };
        let oid = String::from_utf8_lossy(&b).trim().to_string();
        let valid = (oid.len() == 40 || oid.len() == 64) && oid.bytes().all(|b| b.is_ascii_hexdigit());
        let dir_path = c.path.join(&g.rel).join(dir);
        if !valid {
            let found = "holds an autostash that is not an object id";
            rows.push(row("autostash", Level::Warn, &at, found, format!("inspect it, then remove {}", shown(&dir_path))));
        } else if only_autostash(g, dir) {
            only = true;
            let found = format!(
                "{dir}/ holds only autostash {oid}: a `rebase --autostash` stopped after the rebase was gone; \
                 git sees a rebase in progress (`git rebase --continue` and `--abort` both fail here) and seamd \
                 installs nothing meanwhile. The recovery keeps the stash (`git stash pop` re-applies it later)"
            );
            let fix = format!(
                "cd {} && git stash store -m autostash {oid} && rm -r {}",
                shown(&c.path),
                shown(&dir_path)
            );
            rows.push(row("autostash-only", Level::Warn, &at, found, fix));
        } else {
            let found = format!("a `rebase --autostash` is in progress and holds autostash {oid}");
            let fix = "`git rebase --continue` or `git rebase --abort` finishes it and re-applies the autostash";
            rows.push(row("autostash", Level::Warn, &at, found, fix));
        }
    }
    only
}

/// `core.hooksPath` in the git dir's own config naming a directory the host does not have: a
/// box path (seam-git's dir) set with `git config` instead of `--system`, so host git runs no
/// hook at all, not even the repository's own.
fn hooks_rows(c: &Checkout, g: &GitDir, rows: &mut Vec<Row>) {
    let Ok(Some((b, _))) = fsx::read_regular(&g.dir, Path::new("config")) else { return };
    let Some(hp) = hooks_path(&String::from_utf8_lossy(&b)) else { return };
    let p = Path::new(&hp);
    if !p.is_absolute() || std::fs::metadata(p).is_ok_and(|m| m.is_dir()) {
        return;
    }
    let found = format!("core.hooksPath {hp} does not exist on the host: host git runs no hooks in this repository");
    let fix = format!(
        "set seam-git's hooks dir in the box's system config instead: cd {} && git config --unset core.hooksPath; in the box: git config --system core.hooksPath {hp}",
        shown(&c.path)
    );
    rows.push(row("missing-hooks", Level::Warn, &g.rel.join("config"), found, fix));
}

/// The `hooksPath` key of the `[core]` section (the last one wins, as in git).
fn hooks_path(config: &str) -> Option<String> {
    let mut in_core = false;
    let mut found = None;
    for line in config.lines().map(str::trim) {
        if line.starts_with('[') {
            in_core = line.trim_start_matches('[').trim_end_matches(']').trim().eq_ignore_ascii_case("core");
        } else if let Some((k, v)) = line.split_once('=').filter(|_| in_core) {
            if k.trim().eq_ignore_ascii_case("hookspath") {
                found = Some(v.trim().trim_matches('"').to_string());
            }
        }
    }
    found
}

/// `*.lock` files at the top of the git dir and below its `refs/`, older than `age`.
fn lock_rows(c: &Checkout, g: &GitDir, age: Duration, rows: &mut Vec<Row>) {
    const MAX_DEPTH: usize = 16;
    const MAX_ENTRIES: usize = 200_000;
    let now = SystemTime::now();
    let mut seen = 0usize;
    let mut stack: Vec<(PathBuf, usize)> = vec![(PathBuf::new(), 0)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(names) = fsx::list(&g.dir, &dir) else { continue };
        for name in names {
            seen += 1;
            if seen > MAX_ENTRIES {
                return;
            }
            let rel = dir.join(&name);
            let Ok(Some((kind, st))) = fsx::lstat(&g.dir, &rel) else { continue };
            let top_refs = depth == 0 && name == "refs";
            if kind == Kind::Dir && (top_refs || depth > 0) && depth < MAX_DEPTH {
                stack.push((rel, depth + 1));
                continue;
            }
            if kind != Kind::File || !name.as_bytes().ends_with(b".lock") {
                continue;
            }
            let mtime = SystemTime::UNIX_EPOCH + Duration::new(st.st_mtime.max(0) as u64, st.st_mtime_nsec.clamp(0, 999_999_999) as u32);
            let old = now.duration_since(mtime).unwrap_or_default();
            if old >= age {
                let found = format!("lock is {} s old", old.as_secs());
                let fix = format!("if no git process (host or box) is running, remove it: rm -- {}", shown(&c.path.join(&g.rel).join(&rel)));
                rows.push(row("old-lock", Level::Warn, &g.rel.join(&rel), found, fix));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_core_hooks_path() {
        assert_eq!(hooks_path("[core]\n\thooksPath = /etc/seam-git/hooks\n"), Some("/etc/seam-git/hooks".into()));
        assert_eq!(hooks_path("[user]\nhooksPath = x\n[Core]\nHooksPath=\"/a b\"\n"), Some("/a b".into()));
        assert_eq!(hooks_path("[core]\nbare = false\n"), None);
    }
}
