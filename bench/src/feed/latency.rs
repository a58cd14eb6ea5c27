//! Host edit to box `stat`: the host makes one edit every gap on the backing dir (create, modify
//! by rename, modify in place, delete, in turn, each on a file of its own), while a box reader
//! sweeps `lstat` over every file not yet seen changed, as a tool polling its tree would (so the
//! kernel's cached entries are of every age when an edit lands, as in real use). An edit is seen
//! when `stat` shows its new size (or the name gone); a modified file is then read whole, and a
//! read that disagrees with the size is counted as torn.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::plan::{make_edits, Stamps};
use crate::lab::git::git;
use crate::lab::LabError;
use crate::race::rig::Rig;

/// The directory of the edited files, in the checkout.
const DIR: &str = "lat";
/// What a file holds before it is modified or deleted.
const BEFORE: &[u8] = b"before\n";
/// How long the reader keeps looking after the last edit: past every TTL on the way.
const TIMEOUT: Duration = Duration::from_secs(5);
/// Pause between two sweeps, so the reader does not spin a core of a shared machine.
const SWEEP_PAUSE: Duration = Duration::from_millis(1);

/// One kind of host edit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edit {
    /// A new file.
    Create,
    /// A new version written beside it and renamed over it (editors, git checkout).
    Rename,
    /// Appended to in place.
    InPlace,
    /// Removed.
    Delete,
}

impl Edit {
    /// Report order; edit `i` is `ALL[i % 4]`.
    pub const ALL: [Edit; 4] = [Edit::Create, Edit::Rename, Edit::InPlace, Edit::Delete];

    /// Report key.
    pub fn key(self) -> &'static str {
        match self {
            Edit::Create => "create",
            Edit::Rename => "modify-rename",
            Edit::InPlace => "modify-in-place",
            Edit::Delete => "delete",
        }
    }

    /// The file's content once the edit shows (None: gone).
    fn after(self) -> Option<Vec<u8>> {
        match self {
            Edit::Create => Some(b"created by the host\n".to_vec()),
            Edit::Rename => Some(b"replaced by a rename\n".to_vec()),
            Edit::InPlace => Some([BEFORE, b"appended\n"].concat()),
            Edit::Delete => None,
        }
    }
}

/// The edits: file name and kind, by index.
#[derive(Debug)]
pub struct Plan {
    /// (file name in [`DIR`], kind).
    pub edits: Vec<(String, Edit)>,
}

/// One edit's outcome.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Its kind.
    pub edit: Edit,
    /// From the host's syscall returning to the box's `stat` showing it (None: never, in time).
    pub latency: Option<Duration>,
    /// `stat` showed the new size but a read right after gave other bytes.
    pub torn: bool,
}

/// The host's checkout: a git repository (seamd watches only checkouts) with the files the
/// edits modify or delete.
pub fn prepare(host: &Path, n: usize) -> Result<Plan, LabError> {
    git(host, &["init", "-q", "-b", "main"])?;
    let dir = host.join(DIR);
    std::fs::create_dir(&dir).map_err(|e| LabError::new("create dir", &dir, e))?;
    let edits: Vec<(String, Edit)> = (0..n).map(|i| (format!("f{i:05}"), Edit::ALL[i % 4])).collect();
    for (name, kind) in &edits {
        if *kind != Edit::Create {
            let p = dir.join(name);
            std::fs::write(&p, BEFORE).map_err(|e| LabError::new("write", &p, e))?;
        }
    }
    Ok(Plan { edits })
}

fn host_edit(dir: &Path, name: &str, kind: Edit) -> std::io::Result<()> {
    let p = dir.join(name);
    match kind {
        Edit::Create => std::fs::write(&p, kind.after().unwrap_or_default()),
        Edit::Rename => {
            let tmp = dir.join(format!(".{name}.tmp"));
            std::fs::write(&tmp, kind.after().unwrap_or_default())?;
            std::fs::rename(&tmp, &p)
        }
        Edit::InPlace => std::fs::OpenOptions::new().append(true).open(&p)?.write_all(b"appended\n"),
        Edit::Delete => std::fs::remove_file(&p),
    }
}

/// Runs the edits on `rig`'s host and watches them arrive in its box.
pub fn run(rig: &Rig, plan: &Plan, gap: Duration) -> Result<Vec<Sample>, LabError> {
    let host_dir = rig.host.join(DIR);
    let box_paths: Vec<PathBuf> = plan.edits.iter().map(|(n, _)| rig.box_dir.join(DIR).join(n)).collect();
    let wanted: Vec<Option<Vec<u8>>> = plan.edits.iter().map(|(_, k)| k.after()).collect();
    // The box has looked at every name first: its kernel holds entries (negative ones for the
    // names the host will create) and attributes, as a tool that has the tree open would.
    for p in &box_paths {
        let _ = std::fs::symlink_metadata(p);
    }
    let stamps = Stamps::new(plan.edits.len());
    let mut out: Vec<Sample> = plan.edits.iter().map(|(_, k)| Sample { edit: *k, latency: None, torn: false }).collect();
    let host = std::thread::scope(|s| {
        let host = s.spawn(|| make_edits(&stamps, gap, |i| host_edit(&host_dir, &plan.edits[i].0, plan.edits[i].1)));
        let mut pending: Vec<usize> = (0..plan.edits.len()).collect();
        let mut give_up = None;
        while !pending.is_empty() {
            pending.retain(|&i| {
                let want = &wanted[i];
                let size = std::fs::symlink_metadata(&box_paths[i]).ok().map(|m| m.len());
                if size != want.as_ref().map(|w| w.len() as u64) {
                    return true;
                }
                let now = stamps.now();
                // Before and after differ in size, so a match is the edit unless it is not made.
                let Some(made) = stamps.made(i) else { return true };
                out[i].latency = Some(now.saturating_sub(made));
                if let Some(w) = want {
                    out[i].torn = std::fs::read(&box_paths[i]).ok().as_ref() != Some(w);
                }
                false
            });
            if host.is_finished() && *give_up.get_or_insert_with(|| stamps.now() + TIMEOUT) < stamps.now() {
                break;
            }
            std::thread::sleep(SWEEP_PAUSE);
        }
        host.join()
    });
    match host {
        Ok(Ok(())) => Ok(out),
        Ok(Err(e)) => Err(LabError::new("make host edits", &rig.host, e)),
        Err(_) => Err(LabError::new("make host edits", &rig.host, "the host thread panicked")),
    }
}
