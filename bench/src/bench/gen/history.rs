//! A generated repo's history, written as one `git fast-import` stream: an initial commit with
//! every file, then `history` small commits on `main` (so `git log -n 1000` has 1000 commits to
//! walk), then a branch `other` that differs from `main` in a few hundred files (for checkout).
//!
//! fast-import writes one pack without running a git command per commit, so even 100,000 files
//! and a thousand commits take seconds.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::Stdio;

use super::content::{self, Rng};
use super::layout::Layout;
use crate::lab::git::git_cmd;
use crate::lab::LabError;

/// What the `other` branch changes relative to `main`.
pub const OTHER_MODIFIED: usize = 300;
/// Files `other` deletes.
pub const OTHER_DELETED: usize = 20;
/// Files `other` adds.
pub const OTHER_ADDED: usize = 30;

/// Fixed commit times, so the same parameters give the same commit ids.
const EPOCH: u64 = 1_700_000_000;

/// Streams the layout and its history into the (empty, initialised) repo at `dir`.
pub fn import(dir: &Path, layout: &Layout, history: usize, seed: u64) -> Result<(), LabError> {
    let mut child = git_cmd(dir)
        .args(["fast-import", "--quiet", "--done"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| LabError::new("run git fast-import", dir, e))?;
    let stdin = child.stdin.take().expect("stdin was piped just above");
    let written = write_stream(&mut BufWriter::with_capacity(1 << 20, stdin), layout, history, seed);
    // Wait even when writing failed: git's stderr says why the pipe broke.
    let out = child.wait_with_output().map_err(|e| LabError::new("wait for git fast-import", dir, e))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(LabError::new("git fast-import", dir, format!("{}: {}", out.status, err.trim())));
    }
    written.map_err(|e| LabError::new("write fast-import stream", dir, e))
}

fn write_stream(w: &mut impl Write, layout: &Layout, history: usize, seed: u64) -> std::io::Result<()> {
    let mut rng = Rng::new(seed ^ 0x6869_7374);
    // Blobs first, marked 1..=n, then the initial commit naming them.
    for (i, f) in layout.files.iter().enumerate() {
        let mut frng = Rng::new(seed ^ (i as u64).wrapping_mul(0x9e37_79b9));
        let bytes = if f.binary { content::binary(&mut frng, f.size) } else { content::text(&mut frng, f.size) };
        write!(w, "blob\nmark :{}\ndata {}\n", i + 1, bytes.len())?;
        w.write_all(&bytes)?;
        w.write_all(b"\n")?;
    }
    let mut t = EPOCH;
    commit_header(w, "refs/heads/main", t, "initial import")?;
    for (i, f) in layout.files.iter().enumerate() {
        writeln!(w, "M 100644 :{} {}", i + 1, f.path)?;
    }
    w.write_all(b"\n")?;
    let small: Vec<&str> = layout.small_files().map(|f| f.path.as_str()).collect();
    for n in 1..=history {
        t += 60;
        commit_header(w, "refs/heads/main", t, &format!("change {n}"))?;
        for _ in 0..1 + rng.below(3) {
            let path = rng_pick(&mut rng, &small);
            inline_modify(w, &mut rng, path)?;
        }
        w.write_all(b"\n")?;
    }
    t += 60;
    commit_header(w, "refs/heads/other", t, "the other branch")?;
    // A branch fast-import itself made in this stream is named without ^0.
    w.write_all(b"from refs/heads/main\n")?;
    // Evenly spread over the tree, so checkout touches many directories.
    let stride = (small.len() / (OTHER_MODIFIED + OTHER_DELETED + 1)).max(1);
    let mut picks = small.iter().step_by(stride);
    for path in picks.by_ref().take(OTHER_MODIFIED) {
        inline_modify(w, &mut rng, path)?;
    }
    for path in picks.take(OTHER_DELETED) {
        writeln!(w, "D {path}")?;
    }
    for i in 0..OTHER_ADDED {
        inline_modify(w, &mut rng, &format!("other-only/added_{i}.rs"))?;
    }
    w.write_all(b"\ndone\n")?;
    w.flush()
}

fn rng_pick<'a>(rng: &mut Rng, items: &[&'a str]) -> &'a str {
    items[rng.below(items.len())]
}

fn commit_header(w: &mut impl Write, branch: &str, t: u64, msg: &str) -> std::io::Result<()> {
    write!(
        w,
        "commit {branch}\nauthor seam-lab <lab@seamfs.invalid> {t} +0000\ncommitter seam-lab <lab@seamfs.invalid> {t} +0000\ndata {}\n{msg}\n",
        msg.len() + 1
    )
}

fn inline_modify(w: &mut impl Write, rng: &mut Rng, path: &str) -> std::io::Result<()> {
    let size = content::file_size(rng);
    let bytes = content::text(rng, size);
    write!(w, "M 100644 inline {path}\ndata {}\n", bytes.len())?;
    w.write_all(&bytes)?;
    w.write_all(b"\n")
}
