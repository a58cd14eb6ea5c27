//! `seam-lab vm race SCENARIO --share MODE`: the race scenarios with the box in a real guest.
//!
//! One boot per share mode serves every target: the host side prepares one fresh repository per
//! target under the shared directory before the guest boots (a checkout exists before the box),
//! the guest sees them at `/share/<target>/host`, and the targets run one after the other,
//! control first. The control's box actors work on the raw share; the seamfs target's work in
//! seamfs, which the guest mounts over the share's own path with the box bootstrap script, with
//! seamd on the host. The scenarios and their judging are `seam-lab race`'s own.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;

use super::guest::{BootSpec, Guest};
use super::{initramfs, static_dir, Cache, ShareMode};
use crate::lab::cleanup::{on_signal_cleanup, temp_dir, CleanupGuard};
use crate::lab::LabError;
use crate::race::figures::{Figures, RaceReport, TargetRun};
use crate::race::rig::Rig;
use crate::race::{config, host_commits, ide, index_poller, kill9, packed_refs, repo, Params, Scenario, Target};

/// What `vm race` was asked.
#[derive(Debug, Clone)]
pub struct VmRaceOptions {
    /// The scenario.
    pub scenario: Scenario,
    /// Share modes, one boot each.
    pub shares: Vec<ShareMode>,
    /// Targets, in order.
    pub targets: Vec<Target>,
    /// The scenario's parameters (`ttl` is unused: the share's own caching applies).
    pub params: Params,
    /// Print JSON.
    pub json: bool,
    /// Keep logs (console, virtiofsd, seamfs, seamd) here.
    pub log_dir: Option<PathBuf>,
    /// The cache `vm setup` filled.
    pub cache: Cache,
    /// The guest's virtual CPUs.
    pub cpus: u32,
    /// Run seamd on the host for the seamfs target.
    pub seamd: bool,
}

/// One share mode's report, and what the guest said of itself.
#[derive(Debug)]
pub struct ModeReport {
    /// The share mode.
    pub mode: ShareMode,
    /// The race report (the share mode, kernel and data path among its parameters).
    pub report: RaceReport,
}

/// The scenarios a guest can run (those that start from the lab's seed repository and drive the
/// box only through git and file writes).
pub const GUEST_SCENARIOS: [Scenario; 6] =
    [Scenario::HostCommits, Scenario::IndexPoller, Scenario::Ide, Scenario::Kill9, Scenario::Config, Scenario::PackedRefs];

/// Runs every share mode, prints each report; the reports.
pub fn run(opts: &VmRaceOptions) -> Result<Vec<ModeReport>, LabError> {
    if !GUEST_SCENARIOS.contains(&opts.scenario) {
        let names: Vec<&str> = GUEST_SCENARIOS.iter().map(|s| s.name()).collect();
        return Err(LabError::new("vm race", Path::new(opts.scenario.name()), format!("not run in a guest yet; these are: {}", names.join(", "))));
    }
    on_signal_cleanup();
    let _cleanup = CleanupGuard;
    let mut out = Vec::new();
    for &mode in &opts.shares {
        let report = run_mode(opts, mode)?;
        if !opts.json {
            print!("{}", report.to_table());
        }
        out.push(ModeReport { mode, report });
    }
    if opts.json {
        let all: Vec<serde_json::Value> = out.iter().map(|m| json!({ "share": m.mode.name(), "report": m.report.to_json() })).collect();
        println!("{}", serde_json::Value::Array(all));
    }
    Ok(out)
}

fn run_mode(opts: &VmRaceOptions, mode: ShareMode) -> Result<RaceReport, LabError> {
    let root = temp_dir(&format!("seam-lab-vm-{}", mode.name()))?;
    let logs = match &opts.log_dir {
        Some(d) => {
            let d = d.join(format!("{}-{}", opts.scenario.name(), mode.name()));
            std::fs::create_dir_all(&d).map_err(|e| LabError::new("create log dir", &d, e))?;
            d
        }
        None => root.clone(),
    };
    let share_root = root.join("share");
    let mut stages = Vec::new();
    for &t in &opts.targets {
        let host = share_root.join(t.key()).join("host");
        std::fs::create_dir_all(&host).map_err(|e| LabError::new("create dir", &host, e))?;
        let scratch = root.join(format!("{}-scratch", t.key()));
        std::fs::create_dir_all(&scratch).map_err(|e| LabError::new("create dir", &scratch, e))?;
        let seed = repo::seed_repo(&host)?;
        stages.push((t, host, scratch, seed));
    }
    let kernel = opts.cache.kernel()?;
    let initrd = root.join("initramfs.cpio");
    initramfs::build(&kernel, &static_dir()?, &initrd)?;
    let spec = BootSpec { mode, share_root, run_dir: logs.clone(), initramfs: initrd, cpus: opts.cpus, share_requests_logged: false };
    let booted = Instant::now();
    let guest = Arc::new(Guest::boot(&opts.cache, &spec)?);
    let boot_s = booted.elapsed().as_secs_f64();
    let mut runs = Vec::new();
    let mut data_path = None;
    for (t, host, scratch, seed) in stages {
        let started = Instant::now();
        let guest_dir = Path::new("/share").join(t.key()).join("host");
        let rig = Rig::in_guest(host, scratch, &logs, t, Arc::clone(&guest), guest_dir, opts.seamd)?;
        let result = body(opts.scenario, &rig, &seed, &opts.params);
        let result = result.map(|mut f| {
            if let Some(log) = &rig.seamfs_log {
                match rig.fetch_guest_log().and_then(|()| std::fs::read_to_string(log).map_err(|e| LabError::new("read seamfs's guest log", log, e))) {
                    Ok(text) => f.zero(UNEXCLUDED_KEY, UNEXCLUDED_LABEL, text.lines().filter(|l| l.contains(UNEXCLUDED_LINE)).count() as u64),
                    Err(e) => {
                        f.holds("seamfs_log_read", "seamfs's guest log read", false);
                        f.note(format!("seamfs's guest log: {e}"));
                    }
                }
            }
            if f.violations().is_empty() {
                return f;
            }
            if rig.seamfs_log.is_some() {
                f.note(format!("seamfs log ends:\n{}", rig.seamfs_log_tail(30)));
            }
            if opts.log_dir.is_some() {
                f.note(crate::race::keep_repo(&rig.host, &logs.join(format!("repo-{}", t.key()))));
            }
            f
        });
        let log = rig.seamfs_log.clone();
        let down = rig.teardown();
        let figures = result?;
        down?;
        if let Some(l) = log {
            data_path = Some(read_data_path(&l));
        }
        runs.push(TargetRun { target: t, figures, seconds: started.elapsed().as_secs_f64() });
    }
    let console = guest.console.clone();
    let info = guest.info.clone();
    let guest = Arc::try_unwrap(guest).map_err(|_| LabError::new("power off guest", &console, "still in use"))?;
    guest.shutdown()?;
    let mut params = vec![
        ("share".to_string(), mode.name().to_string()),
        ("guest".to_string(), format!("{info}, {} vCPU, TCG, booted in {boot_s:.1} s", opts.cpus)),
    ];
    if let Some(d) = data_path {
        params.push(("seamfs data path".into(), d));
    }
    if let Some(d) = opts.params.host_period {
        params.push(("host period".into(), format!("{} ms", d.as_millis())));
    }
    if let Some(d) = opts.params.duration {
        params.push(("duration".into(), format!("{} s", d.as_secs_f64())));
    }
    if let Some(n) = opts.params.ops {
        params.push(("ops".into(), n.to_string()));
    }
    params.push(("seed".into(), opts.params.seed.to_string()));
    Ok(RaceReport { scenario: opts.scenario.name(), params, runs })
}

fn body(s: Scenario, rig: &Rig, seed: &repo::Seed, p: &Params) -> Result<Figures, LabError> {
    match s {
        Scenario::HostCommits => host_commits::run(rig, seed, p),
        Scenario::IndexPoller => index_poller::run(rig, seed, p),
        Scenario::Ide => ide::run(rig, seed, p),
        Scenario::Kill9 => kill9::run(rig, seed, p),
        Scenario::Config => config::run(rig, p),
        Scenario::PackedRefs => packed_refs::run(rig, p),
        other => Err(LabError::new("vm race", &rig.host, format!("{} is not run in a guest", other.name()))),
    }
}

/// seamfs's warning when a box process rewrote the work tree without the shared `index.lock`
/// (ADR 0032): a host commit could then record a file it rewrites as deleted. Over 9p
/// `cache=loose` a stale `index.lock` the host had removed made every box `reset --hard` wait
/// a second for it and go on without it.
const UNEXCLUDED_LINE: &str = "could not take the shared index lock";
const UNEXCLUDED_KEY: &str = "box_rewrites_unexcluded";
const UNEXCLUDED_LABEL: &str = "box rewrites without the shared index lock";

/// The data path seamfs's log says it runs (its `kernel connection initialised` line).
fn read_data_path(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let line = text.lines().find(|l| l.contains("kernel connection initialised"));
    match line.and_then(|l| l.split("data_path=").nth(1)) {
        Some(rest) => {
            let rest = rest.trim_start_matches('"');
            rest.split('"').next().unwrap_or(rest).to_string()
        }
        None => format!("not in the log ({})", log.display()),
    }
}
