//! `seam-lab race SCENARIO`: host and box actors race on one checkout, through the share
//! emulator alone (the control) and through seamfs over it, with the same parameters; both runs'
//! figures are printed side by side.
//!
//! Each target gets a fresh backing repository (the host) and its own emulator instance; box
//! actors run git in the mount, host actors in the backing dir. Every mount and temp dir is
//! removed on return, on error and on Ctrl-C (`crate::lab::cleanup`).
//!
//! - [`rig`]: the mounted stage (and seamd for the seamfs target); [`repo`]: the repository it
//!   starts from.
//! - [`actor`]: timed git runs, kills, tallies; [`check`]: what the backing dir says afterwards.
//! - [`figures`]: the figures, their rules, the table and JSON.
//! - one module per scenario.

pub mod actor;
pub mod autostash;
pub mod box_clients;
pub mod boxshell;
pub mod check;
pub mod clients;
pub mod config;
pub mod figures;
pub mod host_commits;
pub mod ide;
pub mod index_poller;
pub mod kill9;
pub mod packed_refs;
pub mod repo;
pub mod rig;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use figures::{Figures, RaceReport, TargetRun};
use rig::{Rig, ShareSetup};

use crate::lab::cleanup::{on_signal_cleanup, temp_dir, CleanupGuard};
use crate::lab::mounts::seamfs_bin;
use crate::lab::LabError;
use crate::share::fault::FaultKind;

/// Which box the actors use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The share emulator alone.
    Control,
    /// seamfs over the share emulator.
    Seamfs,
}

impl Target {
    /// JSON key and file tag.
    pub fn key(self) -> &'static str {
        match self {
            Target::Control => "control",
            Target::Seamfs => "seamfs",
        }
    }

    /// Column heading.
    pub fn label(self) -> &'static str {
        match self {
            Target::Control => "control (share alone)",
            Target::Seamfs => "seamfs",
        }
    }
}

/// The scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// Host `git status` every 50 ms while the box commits.
    IndexPoller,
    /// Host commits every 100 ms while the box commits and resets.
    HostCommits,
    /// The box's git killed with SIGKILL at random points.
    Kill9,
    /// Both sides write distinct `git config` keys.
    Config,
    /// Host `pull --rebase --autostash` while the box commits.
    Autostash,
    /// libgit2 and gitoxide stage and commit in the box.
    Clients,
    /// The host as an IDE (`git add -A`, `git status` every 200 ms, a commit every second) while
    /// the box commits.
    Ide,
    /// The host tags and repacks its refs while the box lists them.
    PackedRefs,
}

impl Scenario {
    /// Every scenario, in the order `race all` would run them.
    pub const ALL: [Scenario; 8] = [
        Scenario::IndexPoller,
        Scenario::HostCommits,
        Scenario::Kill9,
        Scenario::Config,
        Scenario::Autostash,
        Scenario::Clients,
        Scenario::Ide,
        Scenario::PackedRefs,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::IndexPoller => "index-poller",
            Scenario::HostCommits => "host-commits",
            Scenario::Kill9 => "kill9",
            Scenario::Config => "config",
            Scenario::Autostash => "autostash",
            Scenario::Clients => "clients",
            Scenario::Ide => "ide",
            Scenario::PackedRefs => "packed-refs",
        }
    }
}

impl std::str::FromStr for Scenario {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Scenario::ALL
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| format!("unknown scenario {s:?}: expected one of index-poller, host-commits, kill9, config, autostash, clients, ide, packed-refs"))
    }
}

/// What `seam-lab race` was asked.
#[derive(Debug, Clone)]
pub struct RaceOptions {
    /// The scenario.
    pub scenario: Scenario,
    /// The targets, run one after the other (control first).
    pub targets: Vec<Target>,
    /// Run time of duration-bound scenarios (None: the scenario's default).
    pub duration: Option<Duration>,
    /// Operation count of count-bound scenarios (None: the scenario's default).
    pub ops: Option<usize>,
    /// The host's commit period in host-commits (None: the scenario's default).
    pub host_period: Option<Duration>,
    /// The share's TTLs, seconds.
    pub ttl: f64,
    /// Fault and window (ms).
    pub fault: Option<(FaultKind, u64)>,
    /// Seed of the fault windows and of the scenario's own random choices.
    pub seed: u64,
    /// Print JSON.
    pub json: bool,
    /// Keep the daemons' logs in this directory (default: in the run's temp dir, removed).
    pub log_dir: Option<PathBuf>,
    /// Run seamd on the host side of the seamfs target.
    pub seamd: bool,
    /// Run the change feed for the seamfs target (seamd `--feed`, seamfs `--feed`).
    pub feed: bool,
    /// Box mounts, each its own emulator mount and seamfs with its own box id (default 1);
    /// index-poller and host-commits run a box actor in every one.
    pub boxes: usize,
    /// Give every box's seamfs the same id (one shared `index-box`): the control of `boxes`.
    pub same_box_id: bool,
    /// The share is the fast share (`seam-lab share --fast`, ADR 0024), not the emulator.
    pub fast_share: bool,
}

/// What a scenario's run function gets.
#[derive(Debug, Clone)]
pub struct Params {
    /// `--duration`, if given.
    pub duration: Option<Duration>,
    /// `--ops`, if given.
    pub ops: Option<usize>,
    /// `--host-period-ms`, if given.
    pub host_period: Option<Duration>,
    /// `--seed`.
    pub seed: u64,
    /// The share's TTL, seconds (actors that must outwait the kernel's cache need it).
    pub ttl: f64,
}

impl Params {
    /// The duration, or the scenario's default.
    pub fn duration_or(&self, secs: u64) -> Duration {
        self.duration.unwrap_or(Duration::from_secs(secs))
    }

    /// The op count, or the scenario's default.
    pub fn ops_or(&self, n: usize) -> usize {
        self.ops.unwrap_or(n)
    }
}

/// Runs the scenario on every target and prints the report. `Ok(true)` when seamfs (if it ran)
/// held every invariant.
pub fn run(opts: &RaceOptions) -> Result<bool, LabError> {
    if !(0.0..=60.0).contains(&opts.ttl) {
        return Err(LabError::new("parse --ttl", Path::new("-"), "must be between 0 and 60 seconds"));
    }
    on_signal_cleanup();
    let _cleanup = CleanupGuard;
    let report = run_report(opts)?;
    if opts.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_table());
    }
    Ok(report.seamfs_violations().is_empty())
}

/// Runs the scenario on every target and returns the report (the caller owns cleanup).
pub fn run_report(opts: &RaceOptions) -> Result<RaceReport, LabError> {
    if opts.targets.contains(&Target::Seamfs) {
        seamfs_bin()?;
    }
    if opts.boxes > 1 && !matches!(opts.scenario, Scenario::IndexPoller | Scenario::HostCommits) {
        return Err(LabError::new("parse --boxes", Path::new(opts.scenario.name()), "several boxes run in index-poller and host-commits only"));
    }
    let (boxes, same_box_id) = (opts.boxes.max(1), opts.same_box_id);
    if opts.fast_share && opts.fault.is_some() {
        return Err(LabError::new("parse --fast-share", Path::new("-"), "the fast share injects no faults: give --fault to the emulator only"));
    }
    let share =
        ShareSetup { ttl: opts.ttl, fault: opts.fault, seed: opts.seed, seamd: opts.seamd, feed: opts.feed, boxes, same_box_id, fast: opts.fast_share };
    let params = Params { duration: opts.duration, ops: opts.ops, host_period: opts.host_period, seed: opts.seed, ttl: opts.ttl };
    let mut runs = Vec::new();
    for &target in &opts.targets {
        let root = temp_dir(&format!("seam-lab-race-{}", target.key()))?;
        let logs = match &opts.log_dir {
            Some(d) => {
                let d = d.join(format!("{}-{}", opts.scenario.name(), target.key()));
                std::fs::create_dir_all(&d).map_err(|e| LabError::new("create log dir", &d, e))?;
                d
            }
            None => root.clone(),
        };
        let started = Instant::now();
        let figures = run_target(opts.scenario, &root, &logs, target, &share, &params)?;
        runs.push(TargetRun { target, figures, seconds: started.elapsed().as_secs_f64() });
    }
    Ok(RaceReport { scenario: opts.scenario.name(), params: describe(opts), runs })
}

fn describe(opts: &RaceOptions) -> Vec<(String, String)> {
    let mut p = vec![("ttl".to_string(), format!("{} s", opts.ttl))];
    if opts.fast_share {
        p.push(("share".into(), "fast (virtiofsd-style, ADR 0024)".into()));
    }
    let fault = match opts.fault {
        Some((FaultKind::StaleOld, ms)) => format!("stale-old {ms} ms"),
        Some((FaultKind::StaleMissing, ms)) => format!("stale-missing {ms} ms"),
        None => "none".into(),
    };
    p.push(("fault".into(), fault));
    if let Some(d) = opts.host_period {
        p.push(("host period".into(), format!("{} ms", d.as_millis())));
    }
    if let Some(d) = opts.duration {
        p.push(("duration".into(), format!("{} s", d.as_secs_f64())));
    }
    if let Some(n) = opts.ops {
        p.push(("ops".into(), n.to_string()));
    }
    p.push(("seed".into(), opts.seed.to_string()));
    if opts.boxes > 1 {
        let ids = if opts.same_box_id { "one id for all (shared index-box)" } else { "one id each" };
        p.push(("boxes".into(), format!("{} ({ids})", opts.boxes)));
    }
    if opts.targets.contains(&Target::Seamfs) {
        p.push(("seamd".into(), if opts.seamd || opts.feed { "on" } else { "off" }.into()));
        p.push(("feed".into(), if opts.feed { "on" } else { "off" }.into()));
    }
    p
}

/// One target: stage, scenario, teardown (also on error, so the next target starts clean).
fn run_target(
    scenario: Scenario,
    root: &Path,
    logs: &Path,
    target: Target,
    share: &ShareSetup,
    p: &Params,
) -> Result<Figures, LabError> {
    match scenario {
        Scenario::IndexPoller => staged(root, logs, target, share, |h, _| repo::seed_repo(h), |r, s| index_poller::run(r, s, p)),
        Scenario::HostCommits => staged(root, logs, target, share, |h, _| repo::seed_repo(h), |r, s| host_commits::run(r, s, p)),
        Scenario::Kill9 => staged(root, logs, target, share, |h, _| repo::seed_repo(h), |r, s| kill9::run(r, s, p)),
        Scenario::Config => staged(root, logs, target, share, |h, _| repo::seed_repo(h), |r, _| config::run(r, p)),
        Scenario::PackedRefs => staged(root, logs, target, share, |h, _| repo::seed_repo(h), |r, _| packed_refs::run(r, p)),
        Scenario::Autostash => staged(root, logs, target, share, autostash::prepare, |r, s| autostash::run(r, s, p)),
        Scenario::Clients => staged(root, logs, target, share, |h, _| clients::prepare(h), clients::run),
        Scenario::Ide => staged(root, logs, target, share, |h, _| repo::seed_repo(h), |r, s| ide::run(r, s, p)),
    }
}

fn staged<S>(
    root: &Path,
    logs: &Path,
    target: Target,
    share: &ShareSetup,
    prepare: impl FnOnce(&Path, &Path) -> Result<S, LabError>,
    body: impl FnOnce(&Rig, &S) -> Result<Figures, LabError>,
) -> Result<Figures, LabError> {
    let (rig, setup) = Rig::new(root, logs, target, share, prepare)?;
    let result = body(&rig, &setup);
    let result = result.map(|mut f| {
        if f.violations().is_empty() {
            return f;
        }
        if let Some(log) = &rig.seamfs_log {
            f.note(format!("seamfs log {} ends:\n{}", log.display(), rig.seamfs_log_tail(30)));
        }
        if logs != root {
            f.note(keep_repo(&rig.host, &logs.join("repo")));
        }
        f
    });
    let down = rig.teardown();
    let figures = result?;
    down?;
    Ok(figures)
}

/// Copies the backing repository of a run that broke an invariant beside its logs (`--log-dir`),
/// so what went wrong can be read after the run's temp dir is gone; says where, or why not.
pub(crate) fn keep_repo(host: &Path, to: &Path) -> String {
    let copied = std::process::Command::new("cp").arg("-a").arg(host).arg(to).status();
    match copied {
        Ok(s) if s.success() => format!("backing repository kept in {}", to.display()),
        Ok(s) => format!("could not keep the backing repository in {}: cp {s}", to.display()),
        Err(e) => format!("could not keep the backing repository in {}: {e}", to.display()),
    }
}
