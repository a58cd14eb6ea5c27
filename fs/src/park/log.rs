//! The park log: a chain of commits on `refs/seam/parked`, one per burst, each a tree of the
//! parked blobs and a `manifest`. Written through a `Lower`; read with gix from the object
//! store, trusting nothing in it (a malformed commit is skipped with its reason).

use std::path::Path;
use std::time::{Duration, SystemTime};

use gix::hash::ObjectId;
use gix::objs::{Find, FindExt, Kind};

use super::manifest::{self, Kept, Record};
use super::objects::{commit_bytes, tree_bytes, GitWriter, WriteError};
use crate::lower::Lower;

/// Most commits a reader walks (a chain longer than this is cut, with a note).
pub const MAX_COMMITS: usize = 100_000;

fn secs_now() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

fn message(records: &[Record], asked: usize) -> String {
    let parked = records.iter().filter(|r| r.kept == Kept::Parked).count();
    let mut m = format!("seamfs: parked {parked} file(s) a box process destroyed\n\n");
    for k in [Kept::TooBig, Kept::OverCap, Kept::Failed] {
        let n = records.iter().filter(|r| r.kept == k).count();
        if n > 0 {
            m.push_str(&format!("{}: {n} logged, not parked\n", k.as_str()));
        }
    }
    if asked > records.len() {
        m.push_str(&format!("over-cap: {} more not logged\n", asked - records.len()));
    }
    m.push_str("List: `seamfs parked` (box) or `seamd parked CHECKOUT` (host).");
    m
}

/// Writes one burst as a commit on top of the park ref and moves the ref (objects made
/// durable first). Retries a few times while another writer holds the ref's lock.
pub fn commit_burst(lower: &Lower, common: &Path, records: &[Record], blobs: &[ObjectId], asked: usize) -> Result<ObjectId, WriteError> {
    let w = GitWriter::new(lower, common).map_err(|source| WriteError { path: common.into(), op: "open git dir", source })?;
    w.sync_objects(blobs)?;
    let manifest = w.write(Kind::Blob, &manifest::encode(records))?;
    let tree = w.write(Kind::Tree, &tree_bytes(blobs, manifest))?;
    let msg = message(records, asked);
    let mut tries = 0;
    loop {
        let tip = w.park_tip()?;
        let commit = w.write(Kind::Commit, &commit_bytes(tree, tip, secs_now(), &msg))?;
        match w.move_ref(tip, commit) {
            Ok(()) => return Ok(commit),
            Err(e) if tries < 20 => {
                tries += 1;
                tracing::debug!(error = %e, "park ref busy; again");
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(e),
        }
    }
}

/// One commit of the log as read.
#[derive(Debug)]
pub struct ParkCommit {
    /// Its id.
    pub id: ObjectId,
    /// Committer time, seconds since the epoch.
    pub secs: u64,
    /// Its tree.
    pub tree: ObjectId,
    /// Its message, as written.
    pub message: String,
    /// The manifest's records, or why they could not be read.
    pub records: Result<Vec<Record>, String>,
}

/// Reads the chain from `tip` down its first parents, newest first (at most `MAX_COMMITS`).
pub fn history(odb: &gix::odb::Handle, tip: ObjectId) -> Result<Vec<ParkCommit>, String> {
    let mut out = Vec::new();
    let mut next = Some(tip);
    let mut buf = Vec::new();
    while let Some(id) = next {
        if out.len() >= MAX_COMMITS {
            break;
        }
        let c = odb.find_commit(&id, &mut buf).map_err(|e| format!("park commit {id} cannot be read: {e}"))?;
        let tree = c.tree();
        let secs = c.committer().ok().map(|s| s.seconds().max(0) as u64).unwrap_or(0);
        let message = String::from_utf8_lossy(c.message).into_owned();
        next = c.parents().next();
        let records = manifest_of(odb, tree);
        out.push(ParkCommit { id, secs, tree, message, records });
    }
    Ok(out)
}

/// A commit's manifest, checked against its tree: every parked blob must be an entry of it.
fn manifest_of(odb: &gix::odb::Handle, tree: ObjectId) -> Result<Vec<Record>, String> {
    let mut buf = Vec::new();
    let t = odb.find_tree(&tree, &mut buf).map_err(|e| format!("tree {tree}: {e}"))?;
    let entries: Vec<(Vec<u8>, ObjectId)> = t.entries.iter().map(|e| (e.filename.to_vec(), e.oid.to_owned())).collect();
    let m = entries.iter().find(|(n, _)| n == b"manifest").ok_or("no manifest in its tree")?.1;
    let mut mbuf = Vec::new();
    let data = odb.try_find(&m, &mut mbuf).map_err(|e| format!("manifest {m}: {e}"))?.ok_or("manifest blob missing")?;
    if data.kind != Kind::Blob {
        return Err("manifest is not a blob".into());
    }
    let records = manifest::parse(data.data).map_err(|e| e.to_string())?;
    for r in records.iter().filter(|r| r.kept == Kept::Parked) {
        if !entries.iter().any(|(n, id)| n.starts_with(b"f") && id.to_hex() == r.blob.as_str()) {
            return Err(format!("manifest names blob {} that is not in its tree", r.blob));
        }
    }
    Ok(records)
}

/// Rewrites the chain keeping only commits newer than `cutoff` secs: the kept commits get
/// new parents (the oldest kept one none). Returns (kept, dropped). Nothing to drop: no write.
pub fn prune(lower: &Lower, common: &Path, odb: &gix::odb::Handle, cutoff: u64) -> Result<(usize, usize), String> {
    let w = GitWriter::new(lower, common).map_err(|e| format!("open {}: {e}", common.display()))?;
    let Some(tip) = w.park_tip().map_err(|e| e.to_string())? else { return Ok((0, 0)) };
    let chain = history(odb, tip)?;
    let keep = chain.iter().take_while(|c| c.secs >= cutoff).count();
    let dropped = chain.len() - keep;
    if dropped == 0 {
        return Ok((keep, 0));
    }
    if keep == 0 {
        return remove_ref(lower, common, tip).map(|()| (0, dropped));
    }
    let mut parent = None;
    for c in chain[..keep].iter().rev() {
        let bytes = commit_bytes(c.tree, parent, c.secs, c.message.trim_end_matches('\n'));
        parent = Some(w.write(Kind::Commit, &bytes).map_err(|e| e.to_string())?);
    }
    w.move_ref(Some(tip), parent.expect("kept at least one")).map_err(|e| e.to_string())?;
    Ok((keep, dropped))
}

/// Deletes the loose park ref (under its lock, only while it still holds `tip`).
fn remove_ref(lower: &Lower, common: &Path, tip: ObjectId) -> Result<(), String> {
    let w = GitWriter::new(lower, common).map_err(|e| e.to_string())?;
    let lock = common.join(format!("{}.lock", super::objects::PARK_REF));
    let clock = crate::gitdata::cpath(&lock);
    let _fd = lower.open_at(&clock, libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY, 0o644).map_err(|e| format!("take lock {}: {e}", lock.display()))?;
    let result = match w.park_tip() {
        Ok(Some(t)) if t == tip => lower
            .unlink(&crate::gitdata::cpath(&common.join(super::objects::PARK_REF)), false)
            .map_err(|e| format!("remove {}: {e}", super::objects::PARK_REF)),
        _ => Err("the park ref moved meanwhile; run again".into()),
    };
    let _ = lower.unlink(&clock, false);
    result?;
    if w.park_tip().map_err(|e| e.to_string())?.is_some() {
        return Err(format!("{} is also in packed-refs: on the host run `git update-ref -d {0}` to drop the rest", super::objects::PARK_REF));
    }
    Ok(())
}
