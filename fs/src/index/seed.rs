//! Seeding `index-box` on the box's first touch, and publishing a shared index the host lacks.
//!
//! Order (each step only if the one before gave nothing):
//! 1. a whole copy of the shared `index` (retried within a bound: a host mid-rename, a stale
//!    share, a torn read);
//! 2. HEAD's tree, through gix;
//! 3. nothing at all when HEAD's branch is truly unborn (no loose ref, no packed ref, empty
//!    reflog): git then reads "no index" as the empty index it is.
//!
//! A branch that reads as absent but has a reflog is never treated as unborn: the seed fails
//! (EIO in the box) rather than hand git an empty index that shows every file deleted.
//! Everything is published under a fresh temporary name and then `link`ed into place, so an
//! existing file is never replaced: two racing first touches keep the first one's staging.

use std::ffi::CString;
use std::fmt;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tracing::{info, warn};

use super::names::{BoxNames, SHARED_INDEX};
use super::validate::{check, BadIndex};
use crate::gitdata::{cpath, read_lower, GitDirRef, HeadOid, RefError};
use crate::lower::Lower;

/// How seeding behaves.
#[derive(Debug, Clone, Copy)]
pub struct SeedOptions {
    /// How long to keep retrying a missing or torn shared index while HEAD has a commit.
    /// Default 2 s.
    pub shared_wait: Duration,
    /// Whether a missing shared index may be a stale read that a stand-in (the retried shared
    /// index, then HEAD's tree) covers; false in a git dir the box made, where it is the truth.
    pub stand_in: bool,
}

impl Default for SeedOptions {
    fn default() -> Self {
        SeedOptions { shared_wait: Duration::from_secs(2), stand_in: true }
    }
}

/// What the first touch found or did.
#[derive(Debug, PartialEq, Eq)]
pub enum Seeded {
    /// `index-box` was already there (or a racing touch published it first).
    Present,
    /// Copied from the shared index.
    FromShared,
    /// Built from HEAD's tree.
    FromHead,
    /// HEAD's branch is unborn and there is no shared index: nothing to seed.
    Unborn,
    /// No index in a git dir the box made (`SeedOptions::stand_in` off): nothing to seed.
    Absent,
}

/// Why seeding failed; nothing was written.
#[derive(Debug)]
pub enum SeedError {
    /// HEAD's branch reads as absent but has history: refusing to seed an empty index.
    BranchHidden {
        /// The git dir (lower-relative).
        gitdir: PathBuf,
        /// HEAD's branch.
        branch: String,
    },
    /// HEAD or a ref could not be read.
    Ref {
        /// The git dir (lower-relative).
        gitdir: PathBuf,
        /// What went wrong.
        source: RefError,
    },
    /// Building the index from HEAD's tree failed.
    Tree {
        /// The git dir (lower-relative).
        gitdir: PathBuf,
        /// What went wrong.
        cause: String,
    },
    /// Writing on the lower failed.
    Io {
        /// The operation.
        op: &'static str,
        /// The lower-relative path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl fmt::Display for SeedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SeedError::BranchHidden { gitdir, branch } => write!(
                f,
                "seed the box index in {}: branch {branch} reads as absent but has a reflog; not seeding an empty index (retry once the share settles)",
                gitdir.display()
            ),
            SeedError::Ref { gitdir, source } => write!(f, "seed the box index in {}: {source}", gitdir.display()),
            SeedError::Tree { gitdir, cause } => write!(f, "seed the box index in {} from HEAD's tree: {cause}", gitdir.display()),
            SeedError::Io { op, path, source } => write!(f, "{op} {}: {source}", path.display()),
        }
    }
}

impl std::error::Error for SeedError {}

/// Owner and mode for files seamfs creates in a git dir.
#[derive(Debug, Clone, Copy)]
pub struct NewFile {
    /// uid (u32::MAX: leave as created).
    pub uid: u32,
    /// gid (u32::MAX: leave as created).
    pub gid: u32,
    /// Permission bits.
    pub mode: u32,
}

/// Makes sure the git dir at `gitdir` (lower-relative) has this box's index (`names`): there
/// already, taken over from an older seamfs's `index-box`, or seeded.
pub fn ensure_index_box(lower: &Lower, gitdir: &Path, names: &BoxNames, owner: NewFile, opts: SeedOptions) -> Result<Seeded, SeedError> {
    let box_path = gitdir.join(names.index());
    let c = cpath(&box_path);
    lower.refresh(&c);
    if lower.stat(&c).is_ok() || super::migrate::migrate(lower, gitdir, names) {
        return Ok(Seeded::Present);
    }
    let g = GitDirRef::open(lower, gitdir.to_path_buf());
    // HEAD's commit of a reftable repository is not read as data: no stand-in from it.
    let reftable = opts.stand_in && g.is_reftable();
    let deadline = Instant::now() + opts.shared_wait;
    let mut last_bad: Option<BadIndex> = None;
    loop {
        match read_lower(lower, &gitdir.join(SHARED_INDEX)) {
            Ok(Some(bytes)) => match check(&bytes) {
                Ok(_) => return publish(lower, &box_path, &bytes, owner).map(|won| won_or(won, Seeded::FromShared)),
                Err(bad) => last_bad = Some(bad),
            },
            Ok(None) => {
                // No shared index: an unborn branch seeds nothing and does not wait.
                if reftable {
                    warn!(gitdir = %gitdir.display(), "a reftable repository without an index: HEAD's tree is not read (refs are in reftable), so no index is seeded");
                }
                if !opts.stand_in || reftable {
                    return Ok(Seeded::Absent);
                }
                if let HeadOid::Unborn(_) = head(&g, gitdir)? {
                    return Ok(Seeded::Unborn);
                }
            }
            Err(e) => warn!(gitdir = %gitdir.display(), error = %e, "reading the shared index failed; retrying"),
        }
        if Instant::now() >= deadline {
            break;
        }
        crate::refresh_scope::pause(Duration::from_millis(20));
    }
    if let Some(bad) = last_bad {
        warn!(gitdir = %gitdir.display(), problem = %bad, "shared index unusable; seeding index-box from HEAD's tree");
    }
    match head(&g, gitdir)? {
        HeadOid::At(oid) => {
            let bytes = index_from_commit(lower, &g.common, &oid).map_err(|cause| SeedError::Tree { gitdir: gitdir.into(), cause })?;
            publish(lower, &box_path, &bytes, owner).map(|won| won_or(won, Seeded::FromHead))
        }
        HeadOid::Unborn(_) => Ok(Seeded::Unborn),
        HeadOid::Hidden(branch) => Err(SeedError::BranchHidden { gitdir: gitdir.into(), branch }),
    }
}

fn won_or(won: bool, s: Seeded) -> Seeded {
    if won {
        info!(how = ?s, "index-box seeded");
        s
    } else {
        Seeded::Present
    }
}

fn head(g: &GitDirRef<'_>, gitdir: &Path) -> Result<HeadOid, SeedError> {
    g.head_oid().map_err(|source| SeedError::Ref { gitdir: gitdir.into(), source })
}

/// Builds index bytes from a commit's tree through gix, reading objects via the lower fd.
fn index_from_commit(lower: &Lower, common: &Path, oid: &str) -> Result<Vec<u8>, String> {
    crate::lower_view::with_lower_view(|| index_from_commit_here(lower, common, oid))
}

fn index_from_commit_here(lower: &Lower, common: &Path, oid: &str) -> Result<Vec<u8>, String> {
    let objects = PathBuf::from(format!("/proc/self/fd/{}", lower.root_fd())).join(common).join("objects");
    let kind = if oid.len() == 64 { gix::hash::Kind::Sha256 } else { gix::hash::Kind::Sha1 };
    let odb = gix::odb::at(&objects, kind).map_err(|e| format!("open {}: {e}", objects.display()))?;
    let id = gix::ObjectId::from_hex(oid.as_bytes()).map_err(|e| format!("parse {oid}: {e}"))?;
    let mut buf = Vec::new();
    use gix::objs::FindExt;
    let commit = odb.find_commit(&id, &mut buf).map_err(|e| format!("read commit {oid}: {e}"))?;
    let tree = commit.tree();
    // Git's own rules on Linux: HFS and NTFS protections on, Windows-only characters allowed.
    let rules = gix::validate::path::component::Options { protect_windows: false, protect_hfs: true, protect_ntfs: true };
    let state = gix::index::State::from_tree(&tree, &odb, rules).map_err(|e| format!("walk tree {tree}: {e}"))?;
    let file = gix::index::File::from_state(state, PathBuf::new());
    let mut out = Vec::new();
    file.write_to(&mut out, gix::index::write::Options::default()).map_err(|e| format!("encode index: {e}"))?;
    Ok(out)
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// This process's part of a temporary name: its pid alone can be another box's pid (each box
/// has its own kernel), and two boxes' creates of one name would meet on the share.
static TMP_TAG: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let uuid = std::fs::read_to_string("/proc/sys/kernel/random/uuid").unwrap_or_default();
    let nonce: String = uuid.chars().filter(char::is_ascii_hexdigit).take(8).collect();
    format!("{}-{nonce}", std::process::id())
});

/// Writes `bytes` to a fresh temporary name and links it to `dest` only if `dest` is absent.
/// Returns false when `dest` already existed (nothing replaced).
pub fn publish(lower: &Lower, dest: &Path, bytes: &[u8], owner: NewFile) -> Result<bool, SeedError> {
    let tmp = dest.with_file_name(format!(
        "index.seam-tmp.{}.{}",
        *TMP_TAG,
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let ctmp = cpath(&tmp);
    let io = |op: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| SeedError::Io { op, path, source }
    };
    let fd = lower
        .open_at(&ctmp, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, owner.mode)
        .map_err(io("create", &tmp))?;
    let mut f = std::fs::File::from(fd);
    let written = f.write_all(bytes).and_then(|()| f.sync_all());
    crate::lower::own_like(f.as_raw_fd(), owner.uid, owner.gid, None);
    drop(f);
    let result = written.map_err(io("write", &tmp)).and_then(|()| {
        let cdest: CString = cpath(dest);
        match lower.link(&ctmp, &cdest) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Ok(false),
            Err(e) => Err(SeedError::Io { op: "link", path: dest.to_path_buf(), source: e }),
        }
    });
    let _ = lower.unlink(&ctmp, false);
    result
}
