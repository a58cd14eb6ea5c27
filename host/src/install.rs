//! Installing one proposal into the shared index of one git dir.
//!
//! Rule (a compare-and-swap on data): under `index.lock`, only if the shared index's blob id is
//! still `<base>` and HEAD still resolves to `<head>`, the proposal's bytes (read once, checked:
//! a regular file, bounded, `DIRC`, whole) replace the index; then HEAD is read again, and if it
//! moved meanwhile (`index.lock` does not guard refs: a soft reset moves HEAD without it) the old
//! index is put back byte-exact, unless someone wrote the index since.
//!
//! What happens to the proposal's name:
//! - installed, stale (base or head no longer match, or HEAD moved after the write) or
//!   malformed (bad name or content): removed, if it is a regular file;
//! - not a regular file (a symlink, FIFO, directory): refused and left where it is: seamd never
//!   follows a link and deletes nothing but regular files it names itself;
//! - index.lock held, an operation in progress, HEAD unreadable for now: left for the next pass.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use seamfs::gitdata::HeadOid;
use seamfs::heal::{blob_id, same_entries};
use seamfs::heal::proposal::{ProposalName, BASE_PREFIX};
use seamfs::heal::HealKind;

use crate::error::IoError;
use crate::fsx::{self, LockFile, ReadError};
use crate::gitdirs::{operation_in_progress, Checkout, GitDir};

/// The shared index's name in a git dir.
pub const INDEX: &str = "index";

/// How long a restore waits for a host git holding `index.lock`.
pub const RESTORE_WAIT: Duration = Duration::from_secs(2);

/// A hook called with the git dir (relative to the checkout).
pub type Hook = Box<dyn Fn(&Path)>;

/// Test hooks; all `None` in seamd itself.
#[derive(Default)]
pub struct Hooks {
    /// Called right after a proposal was renamed onto the index and before HEAD is read again
    /// (tests move HEAD here to exercise the restore).
    pub after_write: Option<Hook>,
    /// Called before anything of a proposal is read (tests swap worktree git dirs here).
    pub before_check: Option<Hook>,
}

/// What became of one proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Installed; the proposal was removed.
    Installed(HealKind),
    /// Base or head no longer match (`why`); the proposal was removed.
    Stale(String),
    /// Name or content is not a proposal (`why`); removed if it was a regular file.
    Malformed(String),
    /// Not a regular file; refused and left in place.
    NotRegular(String),
    /// Not now (`why`: lock held, operation in progress, HEAD unreadable); left for later.
    Later(String),
    /// Installed, then HEAD moved: the old index was put back; the proposal was removed.
    Restored(String),
    /// Installed, then HEAD moved, but the old index could not be put back (`why`).
    RestoreFailed(String),
}

impl Verdict {
    /// Whether a later pass may see the same name again (and should not log it again).
    pub fn repeats(&self) -> bool {
        matches!(self, Verdict::NotRegular(_) | Verdict::Later(_))
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Installed(k) => write!(f, "installed ({k})"),
            Verdict::Stale(w) => write!(f, "stale, pruned: {w}"),
            Verdict::Malformed(w) => write!(f, "malformed, pruned: {w}"),
            Verdict::NotRegular(w) => write!(f, "refused, left in place: {w}; remove it by hand (rm removes a link, never its target)"),
            Verdict::Later(w) => write!(f, "left for later: {w}"),
            Verdict::Restored(w) => write!(f, "installed, then HEAD moved ({w}): the old index was restored byte-exact; the box proposes again"),
            Verdict::RestoreFailed(w) => write!(
                f,
                "installed, then HEAD moved, and the old index could NOT be restored: {w}. Next: `git status` on the host; if it shows changes nobody made, `git reset -q` makes the index match HEAD (the work tree is kept, staging is lost)"
            ),
        }
    }
}

/// One proposal's install.
pub struct Install<'a> {
    /// The checkout.
    pub checkout: &'a Checkout,
    /// The git dir holding the proposal and the index.
    pub git: &'a GitDir,
    /// Test hooks.
    pub hooks: &'a Hooks,
}

fn shown(g: &GitDir, name: &OsStr) -> PathBuf {
    g.rel.join(name)
}

/// Whether HEAD of `g` still resolves to `head`; Err for "cannot tell now".
fn head_is(c: &Checkout, g: &GitDir, head: &str) -> Result<bool, String> {
    match c.head(g) {
        Ok(HeadOid::At(oid)) => Ok(oid == head),
        // An unborn branch matches no commit: the proposal is stale.
        Ok(HeadOid::Unborn(_)) => Ok(false),
        Ok(HeadOid::Hidden(b)) => Err(format!("HEAD's branch {b} reads as absent but has a reflog")),
        Err(e) => Err(format!("HEAD: {e}")),
    }
}

/// The shared index's bytes and stat; None when there is none.
fn read_index(g: &GitDir) -> Result<Option<(Vec<u8>, libc::stat)>, IoError> {
    fsx::read_regular(&g.dir, Path::new(INDEX))
        .map_err(|e| IoError::new("read", g.rel.join(INDEX), std::io::Error::other(e.to_string())))
}

impl Install<'_> {
    /// Decides and carries out the install of the proposal named `name` in the git dir.
    pub fn run(&self, name: &OsStr) -> Result<Verdict, IoError> {
        let g = self.git;
        if let Some(hook) = &self.hooks.before_check {
            hook(&g.rel);
        }
        let parsed = match ProposalName::parse(name.as_bytes()) {
            Ok(p) => p,
            Err(e) => return self.prune(name, Verdict::Malformed(e.0.to_string())),
        };
        // Cheap checks first: this runs every pass while a host rebase or bisect goes on, and a
        // proposal may be 256 MiB.
        if let Some(op) = operation_in_progress(g) {
            return Ok(Verdict::Later(format!("an operation is in progress ({op})")));
        }
        match fsx::lstat(&g.dir, Path::new(name)) {
            Ok(Some((fsx::Kind::File, st))) if st.st_size as u64 > fsx::MAX_FILE => {
                return self.prune(name, Verdict::Malformed(format!("{} bytes, over the bound", st.st_size)))
            }
            Ok(Some((fsx::Kind::File, _))) => {}
            Ok(Some((k, _))) => return Ok(Verdict::NotRegular(format!("{}, not a regular file", k.describe()))),
            Ok(None) => return Ok(Verdict::Later("gone before it was read".into())),
            Err(e) => return Err(IoError::new("lstat", shown(g, name), e)),
        }
        // A first look without the lock: most stale proposals go here, unread.
        if let Some(v) = self.mismatch(&parsed)? {
            return self.prune(name, v);
        }
        let bytes = match fsx::read_regular(&g.dir, Path::new(name)) {
            Ok(Some((b, _))) => b,
            Ok(None) => return Ok(Verdict::Later("gone before it was read".into())),
            Err(ReadError::NotRegular(k)) => return Ok(Verdict::NotRegular(format!("{}, not a regular file", k.describe()))),
            Err(ReadError::TooLarge(n)) => return self.prune(name, Verdict::Malformed(format!("{n} bytes, over the bound"))),
            Err(ReadError::Io(e)) => return Err(IoError::new("read", shown(g, name), e)),
        };
        if !bytes.starts_with(b"DIRC") {
            return self.prune(name, Verdict::Malformed("not an index (no DIRC signature)".into()));
        }
        if let Err(bad) = seamfs::index::validate::check(&bytes) {
            return self.prune(name, Verdict::Malformed(format!("not a whole index: {bad}")));
        }
        let Some((_, st)) = read_index(g)? else {
            return self.prune(name, Verdict::Stale("no shared index".into()));
        };
        let owner = (unsafe { libc::geteuid() } == 0).then_some((st.st_uid, st.st_gid));
        // The cast is for macOS, whose st_mode is a u16.
        #[allow(clippy::unnecessary_cast)]
        let mode = (st.st_mode & 0o777) as u32;
        let Some(lock) = LockFile::take(&g.dir, &g.rel, INDEX, mode, owner)? else {
            return Ok(Verdict::Later(format!(
                "index.lock is held: by a host git (seamd waits), or left by a crash, which blocks host git too: if no git runs, remove it: rm -- {}",
                crate::quote::shell(&self.checkout.path.join(&g.rel).join("index.lock"))
            )));
        };
        // Again under the lock: this is the check that counts.
        let old = match read_index(g)? {
            Some((b, _)) if self.base_holds(&parsed, &b) => b,
            _ => {
                drop(lock);
                return self.prune(name, Verdict::Stale("the shared index changed since the proposal was made".into()));
            }
        };
        match head_is(self.checkout, g, &parsed.head) {
            Ok(true) => {}
            Ok(false) => {
                drop(lock);
                return self.prune(name, Verdict::Stale(format!("HEAD no longer resolves to {}", parsed.head)));
            }
            Err(why) => return Ok(Verdict::Later(why)),
        }
        lock.commit(&bytes)?;
        if let Some(hook) = &self.hooks.after_write {
            hook(&g.rel);
        }
        let verdict = match head_is(self.checkout, g, &parsed.head) {
            Ok(true) => Verdict::Installed(parsed.kind),
            moved => {
                let why = moved.err().unwrap_or_else(|| format!("HEAD no longer resolves to {}", parsed.head));
                self.restore(&old, &bytes, mode, owner, why)?
            }
        };
        self.prune(name, verdict)
    }

    /// A reason the proposal no longer applies, checked without the lock.
    fn mismatch(&self, p: &ProposalName) -> Result<Option<Verdict>, IoError> {
        match head_is(self.checkout, self.git, &p.head) {
            Ok(true) => {}
            Ok(false) => return Ok(Some(Verdict::Stale(format!("HEAD no longer resolves to {}", p.head)))),
            Err(why) => return Ok(Some(Verdict::Later(why))),
        }
        match read_index(self.git)? {
            Some((b, _)) if self.base_holds(p, &b) => Ok(None),
            Some(_) => Ok(Some(Verdict::Stale("the shared index changed since the proposal was made".into()))),
            None => Ok(Some(Verdict::Stale("no shared index".into()))),
        }
    }

    fn base_holds(&self, p: &ProposalName, current: &[u8]) -> bool {
        base_holds(self.git, p, current)
    }

    /// Puts `old` back, under the lock, if the index still holds what seamd installed.
    fn restore(&self, old: &[u8], installed: &[u8], mode: u32, owner: Option<(u32, u32)>, why: String) -> Result<Verdict, IoError> {
        let g = self.git;
        let deadline = Instant::now() + RESTORE_WAIT;
        let lock = loop {
            if let Some(l) = LockFile::take(&g.dir, &g.rel, INDEX, mode, owner)? {
                break l;
            }
            if Instant::now() >= deadline {
                return Ok(Verdict::RestoreFailed(format!(
                    "{why}; {} stayed held for {} s; the healed index stays in place",
                    crate::quote::shown(&g.rel.join("index.lock")),
                    RESTORE_WAIT.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        match read_index(g)? {
            Some((now, _)) if now == installed => {
                lock.commit(old)?;
                Ok(Verdict::Restored(why))
            }
            _ => Ok(Verdict::RestoreFailed(format!("{why}; a host git wrote the index since, and its write is kept"))),
        }
    }

    /// Removes the proposal's name when the verdict says so and it is a regular file. Its base
    /// file goes in [`prune_bases`], once per pass.
    fn prune(&self, name: &OsStr, v: Verdict) -> Result<Verdict, IoError> {
        if !v.repeats() {
            fsx::remove_if_regular(&self.git.dir, name).map_err(|e| IoError::new("remove", shown(self.git, name), e))?;
        }
        Ok(v)
    }
}

/// Removes the base files (`index.seam-base.<base>`) of the proposals `pruned` once no
/// proposal left in `g` names that base: one listing for the whole pass, not one per name.
pub fn prune_bases(g: &GitDir, pruned: &[OsString]) -> Result<(), IoError> {
    let bases: std::collections::BTreeSet<String> = pruned.iter().filter_map(|n| ProposalName::parse(n.as_bytes()).ok()).map(|p| p.base).collect();
    if bases.is_empty() {
        return Ok(());
    }
    let used: std::collections::BTreeSet<String> = proposals(g)?.iter().filter_map(|n| ProposalName::parse(n.as_bytes()).ok()).map(|p| p.base).collect();
    for base in bases.difference(&used) {
        let name = OsString::from(format!("{BASE_PREFIX}{base}"));
        fsx::remove_if_regular(&g.dir, &name).map_err(|e| IoError::new("remove", shown(g, &name), e))?;
    }
    Ok(())
}

/// True when the shared index `current` is still the proposal's base: the same bytes, or — a
/// poller's stat-only rewrite — the same entries as the base bytes seamfs left beside the
/// proposal (`index.seam-base.<base>`, trusted only if its blob id is its name). `doctor`
/// judges by the same rule as `run`.
pub fn base_holds(g: &GitDir, p: &ProposalName, current: &[u8]) -> bool {
    if blob_id(current, p.hash_kind()) == p.base {
        return true;
    }
    let name = format!("{BASE_PREFIX}{}", p.base);
    match fsx::read_regular(&g.dir, Path::new(&name)) {
        Ok(Some((base, _))) => blob_id(&base, p.hash_kind()) == p.base && same_entries(&base, current, p.hash_kind()),
        _ => false,
    }
}

/// The names in `g` that claim to be proposals, sorted.
pub fn proposals(g: &GitDir) -> Result<Vec<OsString>, IoError> {
    let names = fsx::list(&g.dir, Path::new("")).map_err(|e| IoError::new("list", &g.rel, e))?;
    Ok(names.into_iter().filter(|n| seamfs::heal::proposal::looks_like_proposal(n.as_bytes())).collect())
}
