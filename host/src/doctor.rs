//! `seamd doctor`: what a human should know about the checkout's cross-kernel state.
//!
//! Reads only, through the same no-link rules as `run`; changes nothing.

use std::fmt;
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

/// How much a row matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// For information.
    Info,
    /// Needs a look; the row says what to do.
    Warn,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// How much it matters.
    pub level: Level,
    /// The git dir (or path) it is about, relative to the checkout.
    pub at: PathBuf,
    /// What was found and what to do.
    pub what: String,
}

impl fmt::Display for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = match self.level {
            Level::Info => "info",
            Level::Warn => "warn",
        };
        write!(f, "{level}  {}: {}", quote::shown(&self.at), self.what)
    }
}

/// All findings for the checkout.
pub fn doctor(c: &Checkout, opts: DoctorOptions) -> Vec<Row> {
    let mut rows = Vec::new();
    let (dirs, skipped) = c.git_dirs();
    for s in skipped {
        rows.push(Row {
            level: Level::Warn,
            at: s.rel,
            what: format!("{}: not used as a worktree git dir (seamd follows no link); check what put it there", s.why),
        });
    }
    for g in &dirs {
        proposal_rows(c, g, &mut rows);
        autostash_rows(c, g, &mut rows);
        lock_rows(c, g, opts.lock_age, &mut rows);
        if let Some(op) = operation_in_progress(g) {
            rows.push(Row { level: Level::Info, at: g.rel.clone(), what: format!("a git operation is in progress ({op}); seamd installs nothing here meanwhile") });
        }
        if let Ok(Some((k, _))) = fsx::lstat(&g.dir, Path::new("index-box")) {
            rows.push(Row {
                level: if k == Kind::File { Level::Info } else { Level::Warn },
                at: g.rel.clone(),
                what: format!("index-box present ({}): the box's own index, derived state; safe to delete when no box git runs", k.describe()),
            });
        }
    }
    rows
}

fn proposal_rows(c: &Checkout, g: &GitDir, rows: &mut Vec<Row>) {
    let names = match proposals(g) {
        Ok(n) => n,
        Err(e) => {
            rows.push(Row { level: Level::Warn, at: g.rel.clone(), what: e.to_string() });
            return;
        }
    };
    let rm = |name: &std::ffi::OsStr| format!("rm -- {}", quote::shell(&c.path.join(&g.rel).join(name)));
    for name in names {
        let shown = quote::shown(Path::new(&name));
        let row = |level, what: String| Row { level, at: g.rel.clone(), what: format!("{shown}: {what}") };
        let parsed = match ProposalName::parse(name.as_bytes()) {
            Ok(p) => p,
            Err(e) => {
                rows.push(row(Level::Warn, format!("{e}; ignored; seamd run prunes it, or remove it: {}", rm(&name))));
                continue;
            }
        };
        let bytes = match fsx::read_regular(&g.dir, Path::new(&name)) {
            Ok(Some((b, _))) => b,
            Ok(None) => continue,
            Err(ReadError::NotRegular(k)) => {
                rows.push(row(Level::Warn, format!("{}: refused, never followed; remove it by hand (rm removes a link, never its target): {}", k.describe(), rm(&name))));
                continue;
            }
            Err(e) => {
                rows.push(row(Level::Warn, format!("unreadable ({e}); seamd run prunes it")));
                continue;
            }
        };
        if let Err(bad) = seamfs::index::validate::check(&bytes) {
            rows.push(row(Level::Warn, format!("content is not a whole index ({bad}); seamd run prunes it")));
            continue;
        }
        let head_ok = matches!(c.head(g), Ok(seamfs::gitdata::HeadOid::At(h)) if h == parsed.head);
        let base_ok = matches!(fsx::read_regular(&g.dir, Path::new(INDEX)), Ok(Some((b, _))) if crate::install::base_holds(g, &parsed, &b));
        let what = match (head_ok, base_ok) {
            (true, true) => (Level::Info, "pending: `seamd run` installs it".to_string()),
            (false, _) => (Level::Warn, "stale: HEAD no longer resolves to its head; `seamd run` prunes it".to_string()),
            (true, false) => (Level::Warn, "stale: the shared index changed since; `seamd run` prunes it".to_string()),
        };
        rows.push(row(what.0, what.1));
    }
}

fn autostash_rows(c: &Checkout, g: &GitDir, rows: &mut Vec<Row>) {
    for dir in ["rebase-merge", "rebase-apply"] {
        let rel = Path::new(dir).join("autostash");
        match fsx::read_regular(&g.dir, &rel) {
            Ok(Some((b, _))) => {
                let oid = String::from_utf8_lossy(&b).trim().to_string();
                let valid = (oid.len() == 40 || oid.len() == 64) && oid.bytes().all(|b| b.is_ascii_hexdigit());
                let what = if valid {
                    format!(
                        "holds autostash {oid}: a `rebase --autostash` did not finish. `git rebase --continue` or `git rebase --abort` re-applies it; to keep it as a stash instead: cd {} && git stash store -m autostash {oid}",
                        quote::shell(&c.path)
                    )
                } else {
                    "holds an autostash that is not an object id; inspect it before removing the directory".to_string()
                };
                rows.push(Row { level: Level::Warn, at: g.rel.join(&rel), what });
            }
            Ok(None) => {}
            Err(e) => rows.push(Row { level: Level::Warn, at: g.rel.join(&rel), what: format!("not read: {e}") }),
        }
    }
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
                rows.push(Row {
                    level: Level::Warn,
                    at: g.rel.join(&rel),
                    what: format!(
                        "lock is {} s old: if no git process (host or box) is running, remove it: rm -- {}",
                        old.as_secs(),
                        quote::shell(&c.path.join(&g.rel).join(&rel))
                    ),
                });
            }
        }
    }
}
