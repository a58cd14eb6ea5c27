//! Loose objects and the park ref, written through a `Lower` (never through seamfs's mount):
//! a temporary name, then a rename into place, as git does. New files and directories get the
//! git dir's owner, so the host user's git can still prune and repack them.

use std::ffi::CString;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use gix::hash::{Kind as HashKind, ObjectId};
use gix::objs::Kind;

use crate::gitdata::cpath;
use crate::lower::Lower;

/// The ref that keeps parked bytes reachable.
pub const PARK_REF: &str = "refs/seam/parked";

static SEQ: AtomicU64 = AtomicU64::new(0);

/// An error writing into a git dir, with the path and the operation.
#[derive(Debug)]
pub struct WriteError {
    /// The lower-relative path.
    pub path: PathBuf,
    /// What was being done.
    pub op: &'static str,
    /// The cause.
    pub source: std::io::Error,
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.op, self.path.display(), self.source)
    }
}

impl std::error::Error for WriteError {}

fn werr<'p>(path: &'p Path, op: &'static str) -> impl FnOnce(std::io::Error) -> WriteError + 'p {
    move |source| WriteError { path: path.to_path_buf(), op, source }
}

/// What a writer needs to know of its git dir: the object format and the owner new files get.
pub type Facts = (HashKind, Option<(u32, u32)>);

/// Writes objects and the park ref of one git common dir (`common`, relative to `lower`).
pub struct GitWriter<'a> {
    lower: &'a Lower,
    common: PathBuf,
    /// The repository's object format.
    pub hash: HashKind,
    owner: Option<(u32, u32)>,
    /// fsync each object (the CLIs); the daemon syncs a burst's objects at once instead.
    pub fsync_each: bool,
}

impl<'a> GitWriter<'a> {
    /// A writer for the common dir `common`; its owner is taken for new files when run as root.
    pub fn new(lower: &'a Lower, common: &Path) -> std::io::Result<GitWriter<'a>> {
        let st = lower.stat(&cpath(common))?;
        // SAFETY: geteuid has no failure mode.
        let root = unsafe { libc::geteuid() } == 0;
        let owner = (root && (st.st_uid, st.st_gid) != (0, 0)).then_some((st.st_uid, st.st_gid));
        Ok(GitWriter { lower, common: common.to_path_buf(), hash: object_format(lower, common), owner, fsync_each: true })
    }

    /// This writer's facts about its git dir (object format, owner), to make the next one
    /// without reading them again ([`GitWriter::known`]).
    pub fn facts(&self) -> Facts {
        (self.hash, self.owner)
    }

    /// A writer from facts an earlier one found (the daemon's per-file parks).
    pub fn known(lower: &'a Lower, common: &Path, facts: Facts, fsync_each: bool) -> GitWriter<'a> {
        GitWriter { lower, common: common.to_path_buf(), hash: facts.0, owner: facts.1, fsync_each }
    }

    /// The common dir.
    pub fn common(&self) -> &Path {
        &self.common
    }

    fn give(&self, rel: &Path) {
        if let Some((u, g)) = self.owner {
            let _ = self.lower.chown(&cpath(rel), u, g);
        }
    }

    fn mkdir(&self, rel: &Path) -> Result<(), WriteError> {
        match self.lower.mkdir(&cpath(rel), 0o755) {
            Ok(()) => {
                self.give(rel);
                Ok(())
            }
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Ok(()),
            Err(e) => Err(werr(rel, "make directory")(e)),
        }
    }

    /// Writes one object (if not already loose) and returns its id.
    pub fn write(&self, kind: Kind, data: &[u8]) -> Result<ObjectId, WriteError> {
        let objects = self.common.join("objects");
        let id = gix::objs::compute_hash(self.hash, kind, data)
            .map_err(|e| werr(&objects, "hash object")(std::io::Error::other(e.to_string())))?;
        let hex = id.to_hex().to_string();
        let dir = objects.join(&hex[..2]);
        let path = dir.join(&hex[2..]);
        if self.lower.stat(&cpath(&path)).is_ok() {
            return Ok(id);
        }
        self.mkdir(&dir)?;
        let mut z = gix::zlib::stream::deflate::Write::new(Vec::with_capacity(data.len() / 2 + 64), gix::zlib::Compression::new(1).unwrap_or_default());
        let header = gix::objs::encode::loose_header(kind, data.len() as u64);
        z.write_all(&header).and_then(|()| z.write_all(data)).and_then(|()| z.flush()).map_err(werr(&path, "compress object"))?;
        self.publish(&dir, &path, &z.into_inner(), self.fsync_each, 0o444)?;
        Ok(id)
    }

    /// Writes `bytes` to a fresh temporary name in `dir` and renames it onto `dest`. The name
    /// starts `tmp_obj_` as git's own do: one left by a daemon stopped mid-write is what `git
    /// fsck` passes over and `git prune` removes, not a "bad sha1 file".
    fn publish(&self, dir: &Path, dest: &Path, bytes: &[u8], fsync: bool, mode: u32) -> Result<(), WriteError> {
        let tmp = dir.join(format!("tmp_obj_seam_{}_{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed)));
        let ctmp = cpath(&tmp);
        let fd = self.lower.open_at(&ctmp, libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY, mode).map_err(werr(&tmp, "create"))?;
        let mut f = std::fs::File::from(fd);
        // Written back before the rename even when not fsynced: over 9p `cache=loose` the host
        // would otherwise read the published object empty (the real-box CI check found it).
        let written = f.write_all(bytes).and_then(|()| {
            if fsync {
                f.sync_all()
            } else {
                crate::lower::write_back(std::os::fd::AsRawFd::as_raw_fd(&f));
                Ok(())
            }
        });
        drop(f);
        self.give(&tmp);
        let renamed = written.and_then(|()| self.lower.rename(&ctmp, &cpath(dest), 0));
        if let Err(e) = renamed {
            let _ = self.lower.unlink(&ctmp, false);
            return Err(werr(dest, "write")(e));
        }
        Ok(())
    }

    /// Makes the loose objects `ids` durable (written earlier without fsync, off the box's op):
    /// each file, then each fan-out directory once. Not `syncfs`: over a share that syncs the
    /// host's whole filesystem, everyone's dirty data with ours.
    pub fn sync_objects(&self, ids: &[ObjectId]) -> Result<(), WriteError> {
        let mut dirs = std::collections::BTreeSet::new();
        for id in ids {
            let hex = id.to_hex().to_string();
            let dir = self.common.join("objects").join(&hex[..2]);
            let path = dir.join(&hex[2..]);
            let fd = self.lower.open_at(&cpath(&path), libc::O_RDONLY, 0).map_err(werr(&path, "open object"))?;
            std::fs::File::from(fd).sync_all().map_err(werr(&path, "fsync object"))?;
            dirs.insert(dir);
        }
        for dir in dirs {
            sync_dir(self.lower, &dir.join("x"));
        }
        Ok(())
    }

    /// The park ref's current value (loose, else packed), if any.
    pub fn park_tip(&self) -> Result<Option<ObjectId>, WriteError> {
        read_ref(self.lower, &self.common, PARK_REF)
    }

    /// Moves the park ref from `old` to `new` under `<ref>.lock`, as git does: fails (nothing
    /// changed) if the lock is held or the ref moved since `old` was read.
    pub fn move_ref(&self, old: Option<ObjectId>, new: ObjectId) -> Result<(), WriteError> {
        let refs = self.common.join("refs");
        self.mkdir(&refs.join("seam"))?;
        let dest = self.common.join(PARK_REF);
        let lock = self.common.join(format!("{PARK_REF}.lock"));
        let clock = cpath(&lock);
        let fd = self.lower.open_at(&clock, libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY, 0o644).map_err(werr(&lock, "take lock"))?;
        let mut f = std::fs::File::from(fd);
        let result = (|| {
            let now = self.park_tip()?;
            if now != old {
                return Err(werr(&dest, "move ref")(std::io::Error::other("the park ref moved meanwhile; run again")));
            }
            f.write_all(format!("{new}\n").as_bytes()).and_then(|()| f.sync_all()).map_err(werr(&lock, "write lock"))?;
            self.give(&lock);
            self.lower.rename(&clock, &cpath(&dest), 0).map_err(werr(&dest, "rename lock onto"))?;
            sync_dir(self.lower, &dest);
            Ok(())
        })();
        drop(f);
        if result.is_err() {
            let _ = self.lower.unlink(&clock, false);
        }
        result
    }
}

/// fsyncs the directory holding `path`, so a rename into it is durable.
fn sync_dir(lower: &Lower, path: &Path) {
    let dir = path.parent().unwrap_or(Path::new(""));
    if let Ok(fd) = lower.open_at(&cpath(dir), libc::O_RDONLY | libc::O_DIRECTORY, 0) {
        // SAFETY: a valid fd.
        unsafe { libc::fsync(fd.as_raw_fd()) };
    }
}

/// The object format of the repository at `common`: SHA-256 when its config says so.
pub fn object_format(lower: &Lower, common: &Path) -> HashKind {
    let config = crate::gitdata::read_lower(lower, &common.join("config")).ok().flatten().unwrap_or_default();
    let text = String::from_utf8_lossy(&config).to_ascii_lowercase();
    let sha256 = text.lines().any(|l| {
        let l: String = l.chars().filter(|c| !c.is_whitespace()).collect();
        l.starts_with("objectformat=sha256")
    });
    if sha256 {
        HashKind::Sha256
    } else {
        HashKind::Sha1
    }
}

/// Reads a ref's value from its loose file, else `packed-refs`. A malformed value is an error.
pub fn read_ref(lower: &Lower, common: &Path, name: &str) -> Result<Option<ObjectId>, WriteError> {
    let loose = common.join(name);
    let bytes = crate::gitdata::read_lower(lower, &loose).map_err(werr(&loose, "read ref"))?;
    let text = match bytes {
        Some(b) => String::from_utf8_lossy(&b).trim().to_string(),
        None => {
            let packed = common.join("packed-refs");
            let p = crate::gitdata::read_lower(lower, &packed).map_err(werr(&packed, "read"))?;
            match p.and_then(|p| crate::gitdata::find_packed(&p, name)) {
                Some(v) => v,
                None => return Ok(None),
            }
        }
    };
    ObjectId::from_hex(text.as_bytes())
        .map(Some)
        .map_err(|e| werr(&loose, "parse ref")(std::io::Error::other(format!("not an object id: {e}"))))
}

/// A tree of parked blobs (`f000000`...) and the manifest, in git's entry order.
pub fn tree_bytes(blobs: &[ObjectId], manifest: ObjectId) -> Vec<u8> {
    let mut entries: Vec<(String, ObjectId)> = blobs.iter().enumerate().map(|(i, id)| (entry_name(i), *id)).collect();
    entries.push(("manifest".into(), manifest));
    // All plain files: git's order is byte order of the names.
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = Vec::new();
    for (name, id) in entries {
        out.extend_from_slice(format!("100644 {name}\0").as_bytes());
        out.extend_from_slice(id.as_bytes());
    }
    out
}

/// The tree entry name of the `i`th parked blob of a commit.
pub fn entry_name(i: usize) -> String {
    format!("f{i:06}")
}

/// A park commit's bytes.
pub fn commit_bytes(tree: ObjectId, parent: Option<ObjectId>, secs: u64, message: &str) -> Vec<u8> {
    let mut out = format!("tree {tree}\n");
    if let Some(p) = parent {
        out.push_str(&format!("parent {p}\n"));
    }
    let who = format!("seamfs <seamfs@localhost> {secs} +0000");
    out.push_str(&format!("author {who}\ncommitter {who}\n\n{message}\n"));
    out.into_bytes()
}

/// A C path, for callers building lower paths from bytes.
pub fn cpath_bytes(b: &[u8]) -> CString {
    cpath(Path::new(std::ffi::OsStr::from_bytes(b)))
}
