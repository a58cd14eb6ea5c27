//! The daemon's side: decide, read and keep a file's bytes before a box op destroys them, and
//! commit each burst to `refs/seam/parked` from a background thread.
//!
//! A park never fails or blocks the box's op for long: every failure is a `failed` record and a
//! warning; files over the size cap and parks over a burst's count cap are logged, not read.

use std::collections::HashMap;
use std::ffi::CStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use gix::hash::ObjectId;
use parking_lot::{Condvar, Mutex};

use super::cache::TtlCache;
use super::ignore::Ignores;
use super::manifest::{Kept, Op, Record};
use super::objects::GitWriter;
use super::repo::{repo_of, Repo};
use super::tracked::{Indexes, Known};
use super::ParkConfig;
use crate::lower::Lower;

/// What parking did, for `user.seamfs.status`.
#[derive(Debug, Default)]
pub struct Stats {
    /// Files whose bytes were read to park them.
    pub reads: AtomicU64,
    /// Files parked.
    pub parked: AtomicU64,
    /// Skipped: ignored by the repo's rules (nothing read).
    pub ignored: AtomicU64,
    /// Skipped: tracked and unchanged (nothing read).
    pub clean: AtomicU64,
    /// Logged only: over the size or count cap, or failed.
    pub not_parked: AtomicU64,
    /// Park commits written.
    pub commits: AtomicU64,
}

#[derive(Debug)]
struct Burst {
    started: Instant,
    last: Instant,
    records: Vec<Record>,
    blobs: Vec<ObjectId>,
    /// Parks asked in this burst, logged or not (the count cap's counter).
    asked: usize,
    /// Bytes kept in this burst (the byte cap's counter).
    bytes: u64,
}

#[derive(Debug)]
struct Inner {
    lower: Lower,
    mountpoint: Option<PathBuf>,
    cfg: ParkConfig,
    repos: TtlCache<PathBuf, Option<Repo>>,
    /// Work trees whose `.git` was just removed (see `Parker::work_tree_going`).
    going: TtlCache<PathBuf, Option<Repo>>,
    /// Each repository's object format and owner (`GitWriter::facts`).
    writers: TtlCache<PathBuf, Option<super::objects::Facts>>,
    ignores: Ignores,
    indexes: Indexes,
    bursts: Mutex<HashMap<PathBuf, Burst>>,
    /// Parks taken out of `bursts` whose commit is being written: still pending, so `seamfs
    /// parked` does not list before the log has them.
    committing: AtomicU64,
    /// When each repository's log was last pruned to the retention.
    pruned: Mutex<HashMap<PathBuf, Instant>>,
    wake: Condvar,
    stats: Stats,
}

/// How long parking keeps the indexes it parsed once nothing is destroyed.
const IDLE: Duration = Duration::from_secs(2);

/// Keeps what box ops would destroy (see the module doc).
#[derive(Debug)]
pub struct Parker {
    inner: Arc<Inner>,
}

impl Parker {
    /// A parker over `lower` with its committing thread.
    /// `box_index`: this box's own index file name (`index-box.<id>`, ADR 0028).
    pub fn start(lower: Lower, mountpoint: Option<PathBuf>, cfg: ParkConfig, box_index: &str) -> std::io::Result<Parker> {
        let inner = Arc::new(Inner {
            lower,
            ignores: Ignores::new(mountpoint.clone()),
            mountpoint,
            cfg,
            repos: TtlCache::new(Duration::from_secs(2), 65536),
            going: TtlCache::new(Duration::from_secs(60), 1024),
            writers: TtlCache::new(Duration::from_secs(5), 1024),
            indexes: Indexes::new(box_index),
            bursts: Mutex::new(HashMap::new()),
            pruned: Mutex::new(HashMap::new()),
            wake: Condvar::new(),
            stats: Stats::default(),
            committing: AtomicU64::new(0),
        });
        let bg = inner.clone();
        crate::signals::spawn_blocked("seam-park", move || bg.commit_loop())?;
        Ok(Parker { inner })
    }

    /// The counters.
    pub fn stats(&self) -> &Stats {
        &self.inner.stats
    }

    /// Parks the file at lower path `path` if its bytes are in no object; `pid` destroys it by `op`.
    pub fn park(&self, path: &CStr, op: Op, pid: u32) {
        self.inner.park(path, op, pid)
    }

    /// The `.git` at lower path `dotgit` is about to go: its repository is remembered for a
    /// minute, so the rest of that work tree still parks into it.
    pub fn work_tree_going(&self, dotgit: &CStr) {
        let dir = Path::new(std::ffi::OsStr::from_bytes(dotgit.to_bytes())).parent().unwrap_or(Path::new(""));
        if let Some(r) = super::repo::repo_at(&self.inner.lower, dir, self.inner.mountpoint.as_deref()) {
            self.inner.going.get_or(dir.to_path_buf(), || Some(r));
        }
    }

    /// Parks not yet committed.
    pub fn pending(&self) -> usize {
        let bursts = self.inner.bursts.lock();
        bursts.values().map(|b| b.asked).sum::<usize>() + self.inner.committing.load(Ordering::Acquire) as usize
    }

    /// Commits every pending burst now (at unmount, and for tests through the status attribute).
    pub fn flush(&self) {
        self.inner.flush(true)
    }
}

impl Drop for Parker {
    fn drop(&mut self) {
        self.inner.flush(true);
    }
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// The box process's command line, arguments joined by spaces (empty if it is gone).
fn cmdline(pid: u32) -> Vec<u8> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let mut out: Vec<u8> = raw.split(|&b| b == 0).filter(|a| !a.is_empty()).collect::<Vec<_>>().join(&b' ');
    out.truncate(4096);
    out
}

impl Inner {
    fn park(&self, path: &CStr, op: Op, pid: u32) {
        let lower_path = Path::new(std::ffi::OsStr::from_bytes(path.to_bytes()));
        let Some(repo) = repo_of(&self.lower, lower_path, self.mountpoint.as_deref(), &self.repos, &self.going) else { return };
        let Ok(rel) = lower_path.strip_prefix(&repo.work_tree) else { return };
        let rel = rel.as_os_str().as_bytes();
        if let Some(dir) = rel.strip_suffix(b".gitignore").filter(|d| d.is_empty() || d.ends_with(b"/")) {
            self.ignores.going(&self.lower, &repo, dir.strip_suffix(b"/").unwrap_or(dir));
        }
        // Ignored (and untracked: git's rules do not apply to tracked files): not even a stat.
        if !self.indexes.has(&self.lower, &repo, rel) && self.ignores.is_ignored(&self.lower, &repo, rel) {
            return bump(&self.stats.ignored);
        }
        let Ok(st) = self.lower.stat(path) else { return };
        let kind = st.st_mode & libc::S_IFMT;
        // Nothing to lose in an empty file; directories, devices and fifos hold no bytes here.
        if st.st_size == 0 || (kind != libc::S_IFREG && kind != libc::S_IFLNK) {
            return;
        }
        let known = self.indexes.known(&self.lower, &repo, rel, &st);
        if known == Known::Clean {
            return bump(&self.stats.clean);
        }
        let mut rec = Record {
            kept: Kept::Failed,
            blob: String::new(),
            mode: st.st_mode,
            size: st.st_size as u64,
            time_ms: now_ms(),
            op,
            pid,
            tree: repo.tree.clone(),
            path: rel.to_vec(),
            cmd: cmdline(pid),
        };
        let size = st.st_size as u64;
        let over_cap = self.bursts.lock().get(&repo.common).is_some_and(|b| b.asked >= self.cfg.burst_cap || b.bytes + size > self.cfg.burst_bytes);
        let blob = if over_cap {
            rec.kept = Kept::OverCap;
            None
        } else if st.st_size as u64 > self.cfg.max_size {
            rec.kept = Kept::TooBig;
            None
        } else {
            match self.keep_bytes(&repo, path, kind, &known) {
                Ok(None) => return bump(&self.stats.clean),
                Ok(Some(id)) => {
                    rec.kept = Kept::Parked;
                    rec.blob = id.to_string();
                    Some(id)
                }
                Err(e) => {
                    tracing::warn!(path = %lower_path.display(), op = op.as_str(), error = %e, "could not park a file's bytes before a box op destroyed them");
                    None
                }
            }
        };
        self.record(&repo, rec, blob);
    }

    /// Reads the bytes and writes them as a blob; None when they are an index entry's blob.
    fn keep_bytes(&self, repo: &Repo, path: &CStr, kind: u32, known: &Known) -> Result<Option<ObjectId>, String> {
        self.stats.reads.fetch_add(1, Ordering::Relaxed);
        let bytes = if kind == libc::S_IFLNK {
            self.lower.readlink(path).map_err(|e| e.to_string())?
        } else {
            match self.lower.read_regular(path, self.cfg.max_size).map_err(|e| e.to_string())? {
                Some((b, _)) => b,
                None => return Ok(None),
            }
        };
        // The object format and owner, found once per repository a few seconds.
        let facts = self.writers.get_or(repo.common.clone(), || GitWriter::new(&self.lower, &repo.common).ok().map(|w| w.facts()));
        let facts = facts.ok_or_else(|| format!("cannot stat the git dir {}", repo.common.display()))?;
        // Made durable for the whole burst at once, before the ref names them (`commit`).
        let w = GitWriter::known(&self.lower, &repo.common, facts, false);
        if let Known::Tracked(ids) = known {
            let id = gix::objs::compute_hash(w.hash, gix::objs::Kind::Blob, &bytes).map_err(|e| e.to_string())?;
            if ids.contains(&id) {
                return Ok(None);
            }
        }
        w.write(gix::objs::Kind::Blob, &bytes).map(Some).map_err(|e| e.to_string())
    }

    fn record(&self, repo: &Repo, rec: Record, blob: Option<ObjectId>) {
        let counter = if blob.is_some() { &self.stats.parked } else { &self.stats.not_parked };
        counter.fetch_add(1, Ordering::Relaxed);
        let mut bursts = self.bursts.lock();
        let now = Instant::now();
        let b = bursts.entry(repo.common.clone()).or_insert_with(|| Burst { started: now, last: now, records: Vec::new(), blobs: Vec::new(), asked: 0, bytes: 0 });
        b.last = now;
        b.asked += 1;
        if rec.kept == Kept::Parked {
            b.bytes += rec.size;
        }
        // Beyond twice the cap even the log lines stop; the commit message counts the rest.
        if b.records.len() < 2 * self.cfg.burst_cap {
            b.records.push(rec);
            b.blobs.extend(blob);
        }
        self.wake.notify_one();
    }

    fn commit_loop(&self) {
        loop {
            {
                let mut bursts = self.bursts.lock();
                if bursts.is_empty() && self.wake.wait_for(&mut bursts, IDLE).timed_out() && bursts.is_empty() {
                    // Nothing parked for a while: the parsed indexes (~12 MiB each at 100,000
                    // files) go, so parking costs no memory between bursts.
                    drop(bursts);
                    if self.indexes.forget() {
                        crate::heal::trim_heap();
                    }
                    continue;
                }
            }
            std::thread::sleep(self.cfg.quiet / 4);
            self.flush(false);
        }
    }

    /// Drops park commits past the retention, at most once an hour per repository.
    fn retain(&self, common: &Path) {
        {
            let mut pruned = self.pruned.lock();
            if pruned.get(common).is_some_and(|t| t.elapsed() < Duration::from_secs(3600)) {
                return;
            }
            pruned.insert(common.to_path_buf(), Instant::now());
        }
        let cutoff = SystemTime::now().checked_sub(self.cfg.retention).and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok());
        let Some(cutoff) = cutoff.map(|d| d.as_secs()) else { return };
        let objects = PathBuf::from(format!("/proc/self/fd/{}", self.lower.root_fd())).join(common).join("objects");
        let kind = super::objects::object_format(&self.lower, common);
        // gix walks real paths: under `--over` only on a thread that does not see seamfs (ADR 0022).
        let r = crate::lower_view::with_lower_view(|| {
            let odb = gix::odb::at(&objects, kind).map_err(|e| e.to_string())?;
            super::log::prune(&self.lower, common, &odb, cutoff)
        });
        match r {
            Ok((_, 0)) => {}
            Ok((kept, dropped)) => tracing::info!(repo = %common.display(), kept, dropped, "pruned park commits past the retention"),
            Err(e) => tracing::warn!(repo = %common.display(), error = %e, "could not prune refs/seam/parked to the retention"),
        }
    }

    /// Commits the bursts that are quiet for `cfg.quiet` or older than `cfg.max_burst` (all: `all`).
    fn flush(&self, all: bool) {
        let due: Vec<(PathBuf, Burst)> = {
            let mut bursts = self.bursts.lock();
            let keys: Vec<PathBuf> = bursts
                .iter()
                .filter(|(_, b)| all || b.last.elapsed() >= self.cfg.quiet || b.started.elapsed() >= self.cfg.max_burst)
                .map(|(k, _)| k.clone())
                .collect();
            let due: Vec<(PathBuf, Burst)> = keys.into_iter().filter_map(|k| bursts.remove(&k).map(|b| (k, b))).collect();
            // Counted before the map lets go of them (the lock is still held).
            self.committing.fetch_add(due.iter().map(|(_, b)| b.asked as u64).sum(), Ordering::AcqRel);
            due
        };
        for (common, b) in due {
            let committed = super::log::commit_burst(&self.lower, &common, &b.records, &b.blobs, b.asked);
            self.committing.fetch_sub(b.asked as u64, Ordering::AcqRel);
            match committed {
                Ok(id) => {
                    self.stats.commits.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(repo = %common.display(), commit = %id, files = b.blobs.len(), logged = b.records.len(), "parked what box ops destroyed on refs/seam/parked");
                    self.retain(&common);
                }
                Err(e) => tracing::warn!(repo = %common.display(), error = %e, "could not commit parked files to refs/seam/parked; their blobs stay unreferenced"),
            }
        }
    }
}
