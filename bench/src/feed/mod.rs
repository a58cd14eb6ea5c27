//! `seam-lab feed`: what the host change feed (issue #11, ADR 0021) gives a box, measured on
//! three targets in one run: the raw share (the emulator alone), seamfs without the feed, and
//! seamfs with it (`seamd run --feed unix:…`, seamfs `--feed`). Each target has its own backing
//! dir (the host) and its own emulator mount, so no target's lookups freshen another's cache.
//!
//! - [`latency`]: host edits, a box reader polling `stat`; how long until each shows.
//! - [`watch`]: host changes under a box inotify watch; which arrive, and how fast.
//! - [`idle`]: `git status` of a generated tree, warm and after a long idle.
//! - [`report`]: percentiles, the table and JSON.
//!
//! Everything is against the share emulator (`seam-lab share`, TTL 1 s), not a real share.

pub mod idle;
pub mod latency;
pub mod plan;
pub mod report;
pub mod watch;

use std::path::Path;
use std::time::Duration;

use crate::lab::cleanup::{on_signal_cleanup, temp_dir, CleanupGuard};
use crate::lab::LabError;
use crate::race::rig::{Rig, ShareSetup};
use crate::race::Target;
use report::FeedReport;

/// The share emulator's entry/attr/negative TTL, and seamfs's `--ttl` (its default).
pub const SHARE_TTL: f64 = 1.0;

/// The three targets of every measurement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeedTarget {
    /// The share emulator alone: what a box has today.
    Share,
    /// seamfs over it, no feed: the share's TTL, and seamfs's own on top.
    Seamfs,
    /// seamfs over it with seamd's feed.
    SeamfsFeed,
}

impl FeedTarget {
    /// Report order.
    pub const ALL: [FeedTarget; 3] = [FeedTarget::Share, FeedTarget::Seamfs, FeedTarget::SeamfsFeed];

    /// JSON key and dir name.
    pub fn key(self) -> &'static str {
        match self {
            FeedTarget::Share => "share",
            FeedTarget::Seamfs => "seamfs",
            FeedTarget::SeamfsFeed => "seamfs-feed",
        }
    }
}

/// Which measurement to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Measure {
    /// Host edit to box `stat`.
    Latency,
    /// Host change to box inotify event.
    Watch,
    /// `git status` warm and after an idle.
    IdleStatus,
    /// All three.
    All,
}

/// `seam-lab feed` options.
#[derive(clap::Args, Debug, Clone)]
pub struct FeedArgs {
    /// What to measure.
    #[arg(value_enum, default_value = "all")]
    pub measure: Measure,
    /// Host edits in the latency run (create, modify by rename, modify in place, delete in turn).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(4..=100_000))]
    pub edits: u64,
    /// Host changes of each kind in the watch run (create, write, delete, rename).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub changes: u64,
    /// Milliseconds between two host edits (the edits are independent: each names its own file).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub gap_ms: u64,
    /// Files in the generated repository of the idle-status run (cached under /tmp/seam-bench-cache).
    #[arg(long, default_value_t = 20_000)]
    pub files: usize,
    /// Seconds every target sits idle before the idle `git status`.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub idle_secs: u64,
    /// Print the JSON report instead of the tables.
    #[arg(long)]
    pub json: bool,
}

/// Runs the measurements; the process exit code (0, or 1 when a run could not be made).
/// Targets met or missed are figures in the report, not the exit code.
pub fn main(args: FeedArgs) -> i32 {
    seamfs::init_logging("warn");
    on_signal_cleanup();
    let _cleanup = CleanupGuard;
    match run(&args) {
        Ok(r) => {
            if args.json {
                println!("{}", serde_json::to_string_pretty(&r.to_json()).expect("a JSON value serialises"));
            } else {
                print!("{}", r.to_table());
            }
            0
        }
        Err(e) => {
            eprintln!("seam-lab feed: {e}");
            1
        }
    }
}

fn run(args: &FeedArgs) -> Result<FeedReport, LabError> {
    let root = temp_dir("seam-lab-feed")?;
    let gap = Duration::from_millis(args.gap_ms);
    let all = args.measure == Measure::All;
    let mut r = FeedReport::default();
    if all || args.measure == Measure::Latency {
        let n = args.edits as usize;
        r.latency = per_target(&root, "latency", |h| latency::prepare(h, n), |rig, plan| latency::run(rig, plan, gap))?;
        r.latency_gap = Some(gap);
    }
    if all || args.measure == Measure::Watch {
        let n = args.changes as usize;
        r.watch = per_target(&root, "watch", |h| watch::prepare(h, n), |rig, plan| watch::run(rig, plan, gap))?;
        r.watch_gap = Some(gap);
    }
    if all || args.measure == Measure::IdleStatus {
        r.idle = Some(idle::run(&root, args.files, Duration::from_secs(args.idle_secs))?);
    }
    Ok(r)
}

/// One measurement on every target in turn, each on a fresh stage torn down before the next.
fn per_target<P, R>(
    root: &Path,
    what: &str,
    prepare: impl Fn(&Path) -> Result<P, LabError>,
    measure: impl Fn(&Rig, &P) -> Result<R, LabError>,
) -> Result<Vec<(FeedTarget, R)>, LabError> {
    let mut out = Vec::new();
    for t in FeedTarget::ALL {
        eprintln!("[feed] {what} on {}", t.key());
        let (rig, plan) = stage(&root.join(format!("{what}-{}", t.key())), t, |h, _| prepare(h))?;
        let got = measure(&rig, &plan);
        rig.teardown()?;
        out.push((t, got?));
    }
    Ok(out)
}

/// A target's stage under `dir` (created): `prepare` builds the host's checkout before anything
/// is mounted. seamd runs for both seamfs targets (with `--feed` for the feed's), as a box
/// would have it.
pub(crate) fn stage<S>(dir: &Path, t: FeedTarget, prepare: impl FnOnce(&Path, &Path) -> Result<S, LabError>) -> Result<(Rig, S), LabError> {
    std::fs::create_dir(dir).map_err(|e| LabError::new("create dir", dir, e))?;
    let share = ShareSetup { ttl: SHARE_TTL, fault: None, seed: 1, seamd: t != FeedTarget::Share, feed: t == FeedTarget::SeamfsFeed, boxes: 1, same_box_id: false, fast: false };
    let target = if t == FeedTarget::Share { Target::Control } else { Target::Seamfs };
    Rig::new(dir, dir, target, &share, prepare)
}
