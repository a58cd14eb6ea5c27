//! What both CLIs (`seamfs parked` in the box, `seamd parked` on the host) do with the park
//! log: list it, restore an entry byte-exact with its mode, prune it. No git is run; objects
//! are read with gix, files are written through a `Lower` rooted at the work tree (beneath it,
//! no link followed), and nothing the log says is trusted (`manifest::safe_path`).

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use gix::hash::ObjectId;
use gix::objs::{Exists, Find, Kind};

use super::log::{history, ParkCommit};
use super::manifest::{safe_path, Kept, Record};
use super::objects::read_ref;
use crate::gitdata::cpath;
use crate::lower::Lower;

/// An error of a park CLI: the path, what failed, and what to do next.
#[derive(Debug)]
pub struct ParkError {
    /// The path concerned.
    pub path: PathBuf,
    /// What happened and the next step.
    pub what: String,
}

impl std::fmt::Display for ParkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.what)
    }
}

impl std::error::Error for ParkError {}

fn perr(path: &Path, what: impl Into<String>) -> ParkError {
    ParkError { path: path.to_path_buf(), what: what.into() }
}

/// A checkout the CLI works on: its main work tree (as a `Lower`) and where it was asked from.
pub struct Checkout {
    /// The main work tree's directory.
    pub main: PathBuf,
    lower: Lower,
    /// The work tree the command runs in ("." the main one, else the linked worktree's name).
    pub tree: String,
    /// That work tree's directory.
    pub here: PathBuf,
    odb: gix::odb::Handle,
}

/// One listed entry.
#[derive(Debug)]
pub struct Row {
    /// `<commit8>.<n>`: what `restore` takes.
    pub id: String,
    /// Its record.
    pub rec: Record,
    /// Why the entry cannot be restored, if it cannot.
    pub refused: Option<String>,
}

/// A walk of the chain that met a commit it could not read.
#[derive(Debug)]
pub struct Skipped {
    /// The commit.
    pub commit: ObjectId,
    /// Why.
    pub why: String,
}

fn real_dir(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

impl Checkout {
    /// The checkout holding `path`: the nearest ancestor with `.git`. With `contained`, the host's
    /// rule: the git dir must be a directory inside it (no `.git` file pointing elsewhere).
    pub fn find(path: &Path, contained: bool) -> Result<Checkout, ParkError> {
        let start = std::fs::canonicalize(path).map_err(|e| perr(path, format!("cannot resolve it ({e}); give a directory in the checkout")))?;
        let mut dir = start.as_path();
        let top = loop {
            if std::fs::symlink_metadata(dir.join(".git")).is_ok() {
                break dir.to_path_buf();
            }
            dir = dir.parent().ok_or_else(|| perr(&start, "not in a git checkout (no .git above it); give the checkout's directory"))?;
        };
        let dotgit = top.join(".git");
        let (main, tree) = if real_dir(&dotgit) {
            (top.clone(), ".".to_string())
        } else if contained {
            return Err(perr(&dotgit, "is not a directory: give the main checkout (its .git directory holds the park log)"));
        } else {
            let bytes = std::fs::read(&dotgit).map_err(|e| perr(&dotgit, format!("cannot read it: {e}")))?;
            let gitdir = crate::gitdata::parse_gitdir_file(&bytes).map_err(|e| perr(&dotgit, e.to_string()))?;
            let gitdir = top.join(gitdir);
            let common = std::fs::read_to_string(gitdir.join("commondir")).map(|c| gitdir.join(c.trim())).unwrap_or(gitdir.clone());
            let common = std::fs::canonicalize(&common).map_err(|e| perr(&common, format!("cannot resolve the common git dir: {e}")))?;
            let main = common.parent().ok_or_else(|| perr(&common, "has no work tree"))?.to_path_buf();
            let name = gitdir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            (main, name)
        };
        let objects = main.join(".git/objects");
        if !real_dir(&objects) {
            return Err(perr(&objects, "is not a directory: not a checkout seamfs parks into"));
        }
        let lower = Lower::open(&main).map_err(|e| perr(&main, format!("cannot open it: {e}")))?;
        let kind = super::objects::object_format(&lower, Path::new(".git"));
        let odb = gix::odb::at(&objects, kind).map_err(|e| perr(&objects, format!("cannot open the object store: {e}")))?;
        Ok(Checkout { main, lower, tree, here: top, odb })
    }

    fn chain(&self) -> Result<Vec<ParkCommit>, ParkError> {
        let common = Path::new(".git");
        let tip = read_ref(&self.lower, common, super::objects::PARK_REF).map_err(|e| perr(&self.main, e.to_string()))?;
        match tip {
            None => Ok(Vec::new()),
            Some(t) => history(&self.odb, t).map_err(|e| perr(&self.main, format!("{e}; the log is damaged: `prune` cannot walk it either, remove refs/seam/parked by hand"))),
        }
    }

    /// Every entry, newest first, and the commits that could not be read.
    pub fn list(&self) -> Result<(Vec<Row>, Vec<Skipped>), ParkError> {
        let mut rows = Vec::new();
        let mut skipped = Vec::new();
        for c in self.chain()? {
            let short = c.id.to_hex_with_len(8).to_string();
            match c.records {
                Err(why) => skipped.push(Skipped { commit: c.id, why }),
                Ok(recs) => {
                    for (i, rec) in recs.into_iter().enumerate().rev() {
                        let refused = safe_path(&rec.path).err().or_else(|| safe_tree(&rec.tree).err());
                        rows.push(Row { id: format!("{short}.{i}"), rec, refused });
                    }
                }
            }
        }
        rows.sort_by_key(|r| std::cmp::Reverse(r.rec.time_ms));
        Ok((rows, skipped))
    }

    /// The entry `what` names: an id from `list`, else the newest parked entry of that path
    /// (relative to the work tree, or to the current directory inside it).
    pub fn find_entry(&self, what: &str) -> Result<Row, ParkError> {
        let (rows, _) = self.list()?;
        if let Some(r) = rows.iter().position(|r| r.id == what) {
            return Ok(rows.into_iter().nth(r).expect("found"));
        }
        let rel = self.rel_path(Path::new(what));
        let named = |r: &Row| r.rec.kept == Kept::Parked && r.rec.path == rel.as_os_str().as_bytes();
        // This work tree's newest entry of that path, else any work tree's (which needs --to).
        let pick = rows.iter().position(|r| named(r) && r.rec.tree == self.tree).or_else(|| rows.iter().position(named));
        pick.map(|i| rows.into_iter().nth(i).expect("found"))
            .ok_or_else(|| perr(Path::new(what), "no parked entry has this id or path; list them with `parked`"))
    }

    /// `p` relative to the work tree the command runs in.
    pub fn rel_path(&self, p: &Path) -> PathBuf {
        let abs = std::env::current_dir().map(|c| normalize(&c.join(p))).unwrap_or_else(|_| p.to_path_buf());
        let here = std::fs::canonicalize(&self.here).unwrap_or(self.here.clone());
        abs.strip_prefix(&here).map(Path::to_path_buf).unwrap_or_else(|_| p.to_path_buf())
    }

    /// Writes the entry back. `to`: the work tree to write into, for an entry from another
    /// (removed) linked worktree. Refuses to replace a file whose bytes are in no object.
    pub fn restore(&self, row: &Row, force: bool, to: Option<&Path>) -> Result<PathBuf, ParkError> {
        let rec = &row.rec;
        let shown = PathBuf::from(OsStr::from_bytes(&rec.path));
        if let Some(why) = &row.refused {
            return Err(perr(&shown, format!("refused: the park log names {why}; nothing was written (the entry is the box's word only)")));
        }
        if rec.kept != Kept::Parked {
            return Err(perr(&shown, format!("was not parked ({}): nothing to restore", rec.kept.as_str())));
        }
        let rel = safe_path(&rec.path).map_err(|why| perr(&shown, why))?;
        let dir = match (to, rec.tree == self.tree) {
            (Some(d), _) => d.to_path_buf(),
            (None, true) => self.here.clone(),
            (None, false) => {
                return Err(perr(&shown, format!("was parked from linked worktree `{}`: give `--to DIR` (that worktree, or any directory to write it under)", rec.tree)))
            }
        };
        let blob = self.blob(&rec.blob).map_err(|e| perr(&shown, e))?;
        let target = Lower::open(&dir).map_err(|e| perr(&dir, format!("cannot open it: {e}")))?;
        self.check_replace(&target, &rel, &blob, force)?;
        make_parents(&target, &rel).map_err(|e| perr(&dir.join(&rel), e))?;
        write_file(&target, &rel, &blob, rec.mode).map_err(|e| perr(&dir.join(&rel), e))?;
        Ok(dir.join(rel))
    }

    fn blob(&self, hex: &str) -> Result<Vec<u8>, String> {
        let id = ObjectId::from_hex(hex.as_bytes()).map_err(|e| format!("bad blob id {hex}: {e}"))?;
        let mut buf = Vec::new();
        match self.odb.try_find(&id, &mut buf) {
            Ok(Some(d)) if d.kind == Kind::Blob => Ok(d.data.to_vec()),
            Ok(_) => Err(format!("blob {hex} is missing from the object store (pruned?)")),
            Err(e) => Err(format!("blob {hex} cannot be read: {e}")),
        }
    }

    /// Replacing `rel` is fine when it is absent, holds these very bytes, or holds bytes that
    /// are an object already (what `git checkout` put there); else only with `force`.
    fn check_replace(&self, target: &Lower, rel: &Path, blob: &[u8], force: bool) -> Result<(), ParkError> {
        let c = cpath(rel);
        let Ok(st) = target.stat(&c) else { return Ok(()) };
        if force {
            return Ok(());
        }
        let changed = || perr(rel, "changed since it was parked and its bytes are in no object: not replaced; move it aside, or restore with --force");
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(changed());
        }
        let now = target.read_regular(&c, 1 << 30).map_err(|e| perr(rel, e.to_string()))?.map(|(b, _)| b).unwrap_or_default();
        if now == blob {
            return Ok(());
        }
        let id = gix::objs::compute_hash(self.odb.store_ref().object_hash(), Kind::Blob, &now).map_err(|e| perr(rel, e.to_string()))?;
        if self.odb.exists(&id) {
            return Ok(());
        }
        Err(changed())
    }

    /// Drops commits older than `older_than`; (kept, dropped).
    pub fn prune(&self, older_than: std::time::Duration) -> Result<(usize, usize), ParkError> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let cutoff = now.saturating_sub(older_than.as_secs());
        super::log::prune(&self.lower, Path::new(".git"), &self.odb, cutoff).map_err(|e| perr(&self.main, e))
    }
}

fn safe_tree(t: &str) -> Result<(), String> {
    if t == "." || (!t.is_empty() && !t.contains('/') && t != ".." && !t.contains('\0')) {
        Ok(())
    } else {
        Err(format!("a bad worktree name {t:?}"))
    }
}

fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// Makes the missing directories above `rel` (beneath the root only).
fn make_parents(target: &Lower, rel: &Path) -> Result<(), String> {
    let mut at = PathBuf::new();
    for c in rel.parent().into_iter().flat_map(Path::components) {
        at.push(c);
        match target.mkdir(&cpath(&at), 0o755) {
            Ok(()) => give_to_dir_owner(target, &at),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                let st = target.stat(&cpath(&at)).map_err(|e| format!("{}: {e}", at.display()))?;
                if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
                    return Err(format!("{} is not a directory; move it aside first", at.display()));
                }
            }
            Err(e) => return Err(format!("make {}: {e}", at.display())),
        }
    }
    Ok(())
}

/// The file-type bits of a recorded mode, and a symlink's (the same on Linux and macOS, where
/// `libc`'s `mode_t` is 16 bits).
const FILE_TYPE: u32 = 0o170000;
const SYMLINK: u32 = 0o120000;

/// Writes the bytes (a symlink's target for a link) under a temporary name, then renames.
fn write_file(target: &Lower, rel: &Path, bytes: &[u8], mode: u32) -> Result<(), String> {
    let name = rel.file_name().ok_or("no file name")?;
    let tmp = rel.with_file_name(format!(".{}.seam-restore.{}", name.to_string_lossy(), std::process::id()));
    let ctmp = cpath(&tmp);
    if mode & FILE_TYPE == SYMLINK {
        target.symlink(&super::objects::cpath_bytes(bytes), &ctmp).map_err(|e| format!("make link: {e}"))?;
    } else {
        let fd = target.open_at(&ctmp, libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY, 0o600).map_err(|e| format!("create {}: {e}", tmp.display()))?;
        let mut f = std::fs::File::from(fd);
        let ok = f.write_all(bytes).and_then(|()| {
            use std::os::unix::fs::PermissionsExt;
            // Never set-ID or sticky: the mode is the box's word.
            f.set_permissions(std::fs::Permissions::from_mode(mode & 0o777))
        });
        let ok = ok.and_then(|()| f.sync_all());
        if let Err(e) = ok {
            let _ = target.unlink(&ctmp, false);
            return Err(format!("write: {e}"));
        }
    }
    give_to_dir_owner(target, &tmp);
    target.rename(&ctmp, &cpath(rel), 0).map_err(|e| {
        let _ = target.unlink(&ctmp, false);
        format!("rename into place: {e}")
    })
}

/// Run as root (seamd's unit may be), a restored file gets its directory's owner, not root.
fn give_to_dir_owner(target: &Lower, rel: &Path) {
    // SAFETY: geteuid has no failure mode.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    let dir = rel.parent().unwrap_or(Path::new(""));
    if let Ok(st) = target.stat(&cpath(dir)) {
        let _ = target.chown(&cpath(rel), st.st_uid, st.st_gid);
    }
}

/// Parses `14d`, `12h`, `30m`, `45s` (or plain seconds).
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num.parse().map_err(|_| format!("`{s}` is not a duration like 14d, 12h, 30m or 45s"))?;
    let mult = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86400,
        "w" => 7 * 86400,
        _ => return Err(format!("`{s}`: unknown unit `{unit}` (use s, m, h, d or w)")),
    };
    Ok(std::time::Duration::from_secs(n.saturating_mul(mult)))
}

/// The default retention: 14 days.
pub const RETENTION: std::time::Duration = std::time::Duration::from_secs(14 * 86400);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("14d").unwrap().as_secs(), 14 * 86400);
        assert_eq!(parse_duration("90").unwrap().as_secs(), 90);
        assert_eq!(parse_duration("2h").unwrap().as_secs(), 7200);
        assert!(parse_duration("soon").is_err() && parse_duration("3y").is_err());
    }

    #[test]
    fn worktree_names() {
        assert!(safe_tree(".").is_ok() && safe_tree("wt-1").is_ok());
        assert!(safe_tree("..").is_err() && safe_tree("a/b").is_err() && safe_tree("").is_err());
    }
}
