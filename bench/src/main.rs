//! The `seam-lab` binary: the share emulator, unmounting, and the demo. Logic lives in the library.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use seam_lab::race::{RaceOptions, Target};
use seam_lab::share::fault::{FaultConfig, FaultKind};
use seam_lab::share::layer::ShareTtls;
use seam_lab::share::{self, ShareConfig};
use seamfs::mount::{self, exit, MountError};

mod vm_cli;

/// seam-lab: the share emulator and the lab that measures seamfs against it.
///
/// Exit codes: 0 success; 1 the demo or a race could not run; 2 bad arguments or bad input; 3 the
/// mount failed; 4 the unmount failed; 5 a race ran and seamfs broke an invariant; 6 `vm race
/// --expect-control-failure` and the control broke none.
#[derive(Parser, Debug)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Mount BACKING on MOUNTPOINT as a guest's virtiofs/9p share would show it.
    Share(ShareArgs),
    /// Unmount a lab mount (also clears one whose daemon died).
    Umount {
        /// The mountpoint.
        mountpoint: PathBuf,
    },
    /// Show host commits read stale through the raw share and fresh through seamfs.
    Demo(DemoArgs),
    /// Race host and box actors on one checkout, through the share alone and through seamfs.
    Race(RaceArgs),
    /// (internal) A box tool: with libgit2 or gitoxide, write and stage FILE in REPO, or commit
    /// REPO's index.
    #[command(hide = true)]
    BoxClient {
        /// git2 or gix.
        client: seam_lab::race::box_clients::Client,
        /// stage or commit.
        step: String,
        /// The repository's work tree (in the box: the mount).
        repo: PathBuf,
        /// The file to write and stage, relative to REPO (stage only).
        file: Option<String>,
    },
    /// Time git through native disk, the raw share, seamfs and peer FUSE layers; write a report.
    Bench(seam_lab::bench::BenchArgs),
    /// Everyday git commands in fresh repositories, per command, through each layer.
    Small(seam_lab::bench::small::SmallArgs),
    /// What parking costs: `git checkout -- .` over modified files and `rm -rf` of an ignored
    /// tree, on seamfs with and without `--no-park`.
    Park(seam_lab::bench::park::ParkArgs),
    /// Measure the host change feed: host edit to box `stat`, to box inotify event, and `git
    /// status` after an idle, on the raw share, seamfs, and seamfs with the feed.
    Feed(seam_lab::feed::FeedArgs),
    /// The real box: races and benchmarks in a qemu guest over real virtiofs and 9p.
    Vm(vm_cli::VmArgs),
}

/// The share's fault injection, as `share` and `race` take it.
#[derive(clap::Args, Debug)]
struct FaultArgs {
    /// Fault the share injects after a git-dir name is replaced: stale-old or stale-missing.
    #[arg(long, requires = "window")]
    fault: Option<FaultKind>,
    /// Longest fault window in milliseconds (each event draws one in [window/2, window]).
    #[arg(long, requires = "fault")]
    window: Option<u64>,
    /// Seed of the fault windows.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

impl FaultArgs {
    /// The fault and its window in ms, when one was asked for (clap requires both or neither).
    fn fault_window(&self) -> Option<(FaultKind, u64)> {
        self.fault.zip(self.window)
    }
}

#[derive(clap::Args, Debug)]
struct ShareArgs {
    /// The backing directory (the host's checkout).
    backing: PathBuf,
    /// Where to mount it (an empty directory).
    mountpoint: PathBuf,
    /// Entry TTL in seconds (Lima vz: 1; libkrun: 5).
    #[arg(long, default_value_t = 1.0)]
    entry_ttl: f64,
    /// Attribute TTL in seconds.
    #[arg(long, default_value_t = 1.0)]
    attr_ttl: f64,
    /// Negative entry TTL in seconds.
    #[arg(long, default_value_t = 1.0)]
    negative_ttl: f64,
    #[command(flatten)]
    faults: FaultArgs,
    /// Stay in the foreground and log to stderr.
    #[arg(long)]
    foreground: bool,
    /// Log file for the daemon (default: no log once daemonised).
    #[arg(long)]
    log: Option<PathBuf>,
    /// Never use FUSE passthrough for file data.
    #[arg(long)]
    no_passthrough: bool,
    /// Cache writes in the guest kernel (FUSE writeback cache, no passthrough), as a 9p
    /// `cache=loose` share does: data reaches the backing dir at close or writeback, not at write
    #[arg(long)]
    writeback_cache: bool,
    /// Worker threads.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Serve as virtiofsd does (cache=auto) instead of the emulator: an O_PATH fd per inode
    /// under --fd-budget, entry/attr TTL --entry-ttl (1 s), no negative entries, no faults. The
    /// fair baseline (ADR 0024).
    #[arg(long, conflicts_with_all = ["fault", "writeback_cache", "negative_ttl"])]
    fast: bool,
    /// With --fast: most O_PATH fds held for inodes at once; past it the least recently used
    /// are closed and reopened by name when next needed.
    #[arg(long, requires = "fast", default_value_t = seam_lab::fastshare::DEFAULT_BUDGET)]
    fd_budget: usize,
    /// With --fast: plain READDIR, no READDIRPLUS (virtiofsd's --no-readdirplus).
    #[arg(long, requires = "fast")]
    no_readdirplus: bool,
}

#[derive(clap::Args, Debug)]
struct DemoArgs {
    /// Print machine-readable results (JSON) instead of tables.
    #[arg(long)]
    json: bool,
    /// The share's TTLs in seconds (Lima vz: 1; libkrun: 5).
    #[arg(long, default_value_t = 1.0)]
    ttl: f64,
    /// Host commits to read through each side.
    #[arg(long, default_value_t = 5)]
    commits: usize,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum TargetArg {
    Control,
    Seamfs,
    Both,
}

/// What `race` and `vm race` both take: targets, and how long or how much each scenario runs.
#[derive(clap::Args, Debug)]
struct RunArgs {
    /// Which box to run the actors through.
    #[arg(long, value_enum, default_value_t = TargetArg::Both)]
    target: TargetArg,
    /// Run time in seconds of duration-bound scenarios (host-commits 60, autostash 60).
    #[arg(long)]
    duration: Option<f64>,
    /// Operation count of count-bound scenarios (index-poller 500 commits, kill9 200 attempts,
    /// config 1000 keys per side, ide 200 box commits, packed-refs 60 host repacks).
    #[arg(long)]
    ops: Option<usize>,
    /// How often the host commits in host-commits, in ms (default 100; the anchor measured its
    /// land rate at one host commit a second).
    #[arg(long, value_parser = clap::value_parser!(u64).range(10..=60_000))]
    host_period_ms: Option<u64>,
}

impl RunArgs {
    fn targets(&self) -> Vec<Target> {
        match self.target {
            TargetArg::Control => vec![Target::Control],
            TargetArg::Seamfs => vec![Target::Seamfs],
            TargetArg::Both => vec![Target::Control, Target::Seamfs],
        }
    }

    /// `--duration`, checked; the message for a bad one.
    fn duration(&self) -> Result<Option<std::time::Duration>, &'static str> {
        match self.duration {
            Some(d) if !(0.0..=86_400.0).contains(&d) => Err("--duration must be between 0 and 86400 seconds"),
            d => Ok(d.map(std::time::Duration::from_secs_f64)),
        }
    }

    fn host_period(&self) -> Option<std::time::Duration> {
        self.host_period_ms.map(std::time::Duration::from_millis)
    }
}

#[derive(clap::Args, Debug)]
// The race's seed also drives the scenario.
#[command(mut_arg("seed", |a| a.help("Seed of the fault windows and of the scenario's random choices (kill points)")))]
struct RaceArgs {
    /// index-poller, host-commits, kill9, config, autostash, clients, ide or packed-refs.
    scenario: seam_lab::race::Scenario,
    #[command(flatten)]
    run: RunArgs,
    /// The share's entry/attr/negative TTL in seconds (Lima vz: 1; libkrun: 5).
    #[arg(long, default_value_t = 1.0)]
    ttl: f64,
    #[command(flatten)]
    faults: FaultArgs,
    /// Print machine-readable results (JSON) instead of a table.
    #[arg(long)]
    json: bool,
    /// Keep the share's, seamfs's and seamd's logs in this directory (and a copy of the backing
    /// repository of a run that broke an invariant).
    #[arg(long)]
    log_dir: Option<PathBuf>,
    /// Do not run seamd (the host daemon that installs deferred heals) for the seamfs target.
    #[arg(long, conflicts_with = "feed")]
    no_seamd: bool,
    /// Run the host change feed for the seamfs target: `seamd run --feed unix:…` and seamfs
    /// mounted with `--feed` (the control, a share alone, has no feed to take).
    #[arg(long)]
    feed: bool,
    /// Box mounts for index-poller and host-commits (1-8): each its own emulator mount of the one
    /// backing dir and its own seamfs with its own box id, every box committing.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=8))]
    boxes: u64,
    /// Give every box's seamfs the same box id (one shared index-box, as before box ids): the
    /// control for --boxes.
    #[arg(long)]
    same_box_id: bool,
    /// The share is the fast share (`seam-lab share --fast`: virtiofsd's caching, the bench's
    /// baseline, ADR 0024; --ttl is its entry and attribute TTL) instead of the emulator.
    #[arg(long, conflicts_with = "fault")]
    fast_share: bool,
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.cmd {
        Cmd::Race(a) => Ok(run_race(a)),
        Cmd::BoxClient { client, step, repo, file } => Ok(run_box_client(client, &step, &repo, file.as_deref())),
        Cmd::Bench(a) => Ok(seam_lab::bench::main(a)),
        Cmd::Small(a) => Ok(seam_lab::bench::small::main(a)),
        Cmd::Park(a) => Ok(seam_lab::bench::park::main(a)),
        Cmd::Feed(a) => Ok(seam_lab::feed::main(a)),
        Cmd::Vm(a) => Ok(vm_cli::main(a)),
        Cmd::Share(a) => run_share(a).map(|()| exit::OK),
        Cmd::Umount { mountpoint } => mount::unmount(&mountpoint).map(|()| exit::OK),
        Cmd::Demo(a) => {
            seamfs::init_logging("warn");
            let opts = seam_lab::demo::DemoOptions { json: a.json, ttl: a.ttl, commits: a.commits };
            match seam_lab::demo::run(&opts) {
                Ok(()) => Ok(exit::OK),
                Err(e) => {
                    eprintln!("seam-lab demo: {e}");
                    Ok(1)
                }
            }
        }
    };
    match code {
        Ok(c) => std::process::exit(c),
        Err(e) => {
            eprintln!("seam-lab: {e}");
            std::process::exit(e.code);
        }
    }
}

fn run_share(a: ShareArgs) -> Result<(), MountError> {
    let mnt = a.mountpoint.clone();
    if a.fast {
        return run_fast_share(a);
    }
    let ttls = ShareTtls {
        entry: share::ttl_arg("parse --entry-ttl", a.entry_ttl, &mnt)?,
        attr: share::ttl_arg("parse --attr-ttl", a.attr_ttl, &mnt)?,
        negative: share::ttl_arg("parse --negative-ttl", a.negative_ttl, &mnt)?,
    };
    let fault = a.faults.fault_window().map(|(kind, ms)| FaultConfig {
        kind,
        window: std::time::Duration::from_millis(ms),
        seed: a.faults.seed,
    });
    share::run(ShareConfig {
        backing: a.backing,
        mountpoint: a.mountpoint,
        ttls,
        fault,
        foreground: a.foreground,
        log: a.log,
        no_passthrough: a.no_passthrough,
        writeback_cache: a.writeback_cache,
        threads: a.threads,
    })
}

/// `seam-lab share --fast`: one TTL for entries and attributes, as virtiofsd has.
fn run_fast_share(a: ShareArgs) -> Result<(), MountError> {
    let mnt = a.mountpoint.clone();
    let ttl = share::ttl_arg("parse --entry-ttl", a.entry_ttl, &mnt)?;
    if share::ttl_arg("parse --attr-ttl", a.attr_ttl, &mnt)? != ttl {
        return Err(MountError::usage("parse --attr-ttl", &mnt, "with --fast, give --entry-ttl alone (one TTL for both)"));
    }
    seam_lab::fastshare::run(seam_lab::fastshare::FastConfig {
        backing: a.backing,
        mountpoint: a.mountpoint,
        ttl,
        budget: a.fd_budget,
        foreground: a.foreground,
        log: a.log,
        no_passthrough: a.no_passthrough,
        no_readdirplus: a.no_readdirplus,
        threads: a.threads,
    })
}

/// `seam-lab box-client`: one step of a box tool; prints the commit id after a commit.
fn run_box_client(client: seam_lab::race::box_clients::Client, step: &str, repo: &std::path::Path, file: Option<&str>) -> i32 {
    use seam_lab::race::box_clients;
    let done = match (step, file) {
        ("stage", Some(f)) => box_clients::stage(client, repo, f).map(|()| String::new()),
        ("commit", None) => box_clients::commit(client, repo, &format!("box commit by {}", client.name())),
        _ => {
            eprintln!("seam-lab box-client: expected `stage REPO FILE` or `commit REPO`");
            return 2;
        }
    };
    match done {
        Ok(out) => {
            if !out.is_empty() {
                println!("{out}");
            }
            exit::OK
        }
        Err(e) => {
            eprintln!("seam-lab box-client {} {step}: {e}", client.name());
            1
        }
    }
}
/// `seam-lab race`: exit 0 when seamfs held every invariant, 5 when it broke one, 1 when the race
/// could not run, 2 for a bad argument.
fn run_race(a: RaceArgs) -> i32 {
    seamfs::init_logging("warn");
    let duration = match a.run.duration() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("seam-lab race: {e}");
            return 2;
        }
    };
    let opts = RaceOptions {
        scenario: a.scenario,
        targets: a.run.targets(),
        duration,
        ops: a.run.ops,
        host_period: a.run.host_period(),
        ttl: a.ttl,
        fault: a.faults.fault_window(),
        seed: a.faults.seed,
        json: a.json,
        log_dir: a.log_dir,
        seamd: !a.no_seamd,
        feed: a.feed,
        boxes: a.boxes as usize,
        same_box_id: a.same_box_id,
        fast_share: a.fast_share,
    };
    match seam_lab::race::run(&opts) {
        Ok(true) => exit::OK,
        Ok(false) => 5,
        Err(e) => {
            eprintln!("seam-lab race {}: {e}", a.scenario.name());
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// The CLI is well formed (the race's `mut_arg("seed")` names an argument that exists).
    #[test]
    fn cli_is_well_formed() {
        super::Cli::command().debug_assert();
    }
}
