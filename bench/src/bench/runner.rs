//! One repo size, start to finish: generate (or reuse) the repo, set every layer up, warm it,
//! then the runs — each step on every layer in turn, the layer order rotated each run so no
//! layer always goes first (or last, after the others have heated the machine).

use std::collections::BTreeMap;
use std::time::Duration;

use super::gen::{self, layout::Layout};
use super::layers::{self, Layer, LayerKind};
use super::procfs::vm_rss_kib;
use super::results::{Cell, SizeResult};
use super::workloads::{self, Ctx, Step, Workload};
use super::BenchArgs;
use crate::lab::cleanup::{is_stopping, temp_dir};
use crate::lab::git::git;
use crate::lab::LabError;

/// Files the add/commit workload changes.
const CHANGED: usize = 1000;
/// Failed steps after which a layer is dropped from the rest of the run.
const MAX_FAILURES: usize = 3;

/// Measures `layers` × `selected` on an `files`-file repo.
pub fn bench_size(
    args: &BenchArgs,
    files: usize,
    layers: &[LayerKind],
    selected: &[Workload],
) -> Result<SizeResult, LabError> {
    let repo = gen::repo(files, args.seed)?;
    let big = gen::big_file(args.big_mib)?;
    let ctx = Ctx {
        ttl: Duration::from_secs_f64(args.ttl),
        changed: changed_files(&repo.layout, CHANGED),
        base: git(&repo.dir, &["rev-parse", "main"])?,
        tree_bytes: workloads::read_all(&repo.dir)?,
        big_bytes: (args.big_mib as u64) << 20,
        drop_caches: args.drop_caches,
        selected: selected.to_vec(),
    };
    let root = temp_dir("seam-bench")?;
    let mut notes = Vec::new();
    let mut up: Vec<Layer> = Vec::new();
    for &kind in layers {
        eprintln!("[bench] {files} files: setting up {}", kind.name());
        let dir = root.join(kind.name());
        std::fs::create_dir(&dir).map_err(|e| LabError::new("create dir", &dir, e))?;
        match layers::setup(kind, &dir, &repo.dir, &big, args.ttl).and_then(|l| warm_up(l, &ctx)) {
            Ok(l) => up.push(l),
            // A peer that will not mount is reported, not fatal; seamfs and the share are.
            Err(e) if kind.package().is_some() => skip(&mut notes, kind, &e),
            Err(e) => return Err(e),
        }
    }
    let layer_notes: Vec<(LayerKind, String)> = up.iter().map(|l| (l.kind, l.note.clone())).collect();
    let mut cells: BTreeMap<(Workload, LayerKind), Cell> = BTreeMap::new();
    let mut failures: BTreeMap<LayerKind, usize> = BTreeMap::new();
    let steps = workloads::steps(selected);
    for run in 0..args.runs {
        for &step in &steps {
            let order: Vec<Layer> = (0..up.len()).map(|i| up[(i + run) % up.len()].clone()).collect();
            for l in order {
                if is_stopping() {
                    return Err(LabError::new("run workloads", &root, "interrupted"));
                }
                if !up.iter().any(|u| u.kind == l.kind) {
                    continue;
                }
                eprint!(
                    "[bench] {files} files run {}/{} {} {} ...",
                    run + 1,
                    args.runs,
                    l.kind.name(),
                    step_name(step)
                );
                let timed = match workloads::run_step(step, &l.dir, &ctx) {
                    Ok(t) => t,
                    // Native failing is the harness's fault: stop. A layer failing is a finding:
                    // note it, leave the sample out, and drop the layer once it keeps failing.
                    Err(e) if l.kind == LayerKind::Native || is_stopping() => {
                        eprintln!(" failed");
                        return Err(e);
                    }
                    Err(e) => {
                        eprintln!(" FAILED: {e}");
                        notes.push(format!("run {}: {} {} failed: {e}", run + 1, l.kind.name(), step_name(step)));
                        let n = failures.entry(l.kind).or_insert(0);
                        *n += 1;
                        if *n >= MAX_FAILURES {
                            skip(&mut notes, l.kind, &LabError::new("run workloads", &l.dir, format!("{n} failures")));
                            up.retain(|u| u.kind != l.kind);
                        }
                        continue;
                    }
                };
                let rss = l.daemon.and_then(vm_rss_kib);
                let shown: Vec<String> = timed.iter().map(|(w, ms)| format!("{} {ms:.1} ms", w.name())).collect();
                let rss_shown = rss.map(|k| format!(", RSS {:.1} MiB", k as f64 / 1024.0)).unwrap_or_default();
                eprintln!(" {}{rss_shown}", shown.join(", "));
                for (w, ms) in timed {
                    let cell = cells.entry((w, l.kind)).or_default();
                    cell.samples_ms.push(ms);
                    cell.rss_kib.extend(rss);
                }
            }
        }
    }
    let measured: Vec<LayerKind> = layers.iter().copied().filter(|k| cells.keys().any(|(_, l)| l == k)).collect();
    Ok(SizeResult {
        files,
        repo: repo.dir.display().to_string(),
        layer_notes,
        layers: measured,
        workloads: selected.to_vec(),
        cells,
        notes,
    })
}

fn skip(notes: &mut Vec<String>, kind: LayerKind, e: &LabError) {
    let note = format!("{} skipped: {e}", kind.name());
    eprintln!("[bench] {note}");
    notes.push(note);
}

/// Before run 1: the first `git status` through a layer re-hashes what its inode numbers make
/// look changed and rewrites the index; the reads fill the page cache (warm runs measure the
/// layer, not the disk).
fn warm_up(l: Layer, ctx: &Ctx) -> Result<Layer, LabError> {
    if l.kind != LayerKind::Native && l.daemon.is_none() {
        eprintln!("[bench]   {}: daemon process not found; no RSS for it", l.kind.name());
    }
    eprintln!("[bench]   warming {} (git status ×2, read-all, big file)", l.kind.name());
    workloads::timed_git(&l.dir, &["status"])?;
    workloads::timed_git(&l.dir, &["status"])?;
    let warm = Ctx { drop_caches: false, ..ctx.clone() };
    workloads::run_step(Step::ReadAll, &l.dir, &warm)?;
    if ctx.selected.contains(&Workload::Read1g) {
        workloads::run_step(Step::ReadBig, &l.dir, &warm)?;
    }
    Ok(l)
}

/// `n` text files spread evenly over the tree (offset from the `other` branch's picks).
fn changed_files(layout: &Layout, n: usize) -> Vec<String> {
    let small: Vec<&str> = layout.small_files().map(|f| f.path.as_str()).collect();
    let stride = (small.len() / n).max(1);
    small.iter().skip(stride / 2).step_by(stride).take(n).map(|s| (*s).to_string()).collect()
}

fn step_name(s: Step) -> &'static str {
    match s {
        Step::StatusWarm => "git-status-warm",
        Step::StatusExpired => "git-status-expired",
        Step::AddCommit => "git-add+commit",
        Step::Log => "git-log",
        Step::Checkout => "git-checkout",
        Step::ReadAll => "read-all",
        Step::ReadBig => "read-1g",
    }
}
