//! `seam-lab vm …`: the real-box lab's command line.

use std::path::PathBuf;
use seam_lab::race::{Params, Scenario};
use seam_lab::vm::race::VmRaceOptions;
use seam_lab::vm::{Cache, ShareMode, DEFAULT_CACHE};

/// The real box: a qemu guest (Debian 6.1 kernel) over real virtiofs and 9p.
#[derive(clap::Args, Debug)]
pub struct VmArgs {
    #[command(subcommand)]
    cmd: VmCmd,
    /// Cache directory of the kernel, virtiofsd and downloads.
    #[arg(long, global = true, default_value = DEFAULT_CACHE)]
    cache: PathBuf,
}

#[derive(clap::Subcommand, Debug)]
enum VmCmd {
    /// Prepare, once: qemu and busybox (Debian), a Debian 6.1 kernel, virtiofsd (crates.io).
    Setup,
    /// Race host actors against box actors in the guest, on the raw share and through seamfs.
    Race(VmRaceArgs),
    /// Time git in the guest on the raw share and through seamfs over it; write a report.
    Bench(VmBenchArgs),
    /// Count the FUSE requests seamfs gets for a box's everyday git commands in the guest.
    Counts(VmCountsArgs),
    /// The change feed's latency in the guest: host creates and deletes seen by a guest `stat`
    /// loop, on the raw share and through seamfs with the feed over the virtio-serial port.
    Feed(VmFeedArgs),
}

#[derive(clap::Args, Debug)]
struct VmFeedArgs {
    /// Edits per layer (creates and deletes in turn).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(2..=10_000))]
    edits: u64,
    /// The share mode.
    #[arg(long, default_value = "virtiofs")]
    share: ShareMode,
    /// The guest's virtual CPUs.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=16))]
    cpus: u32,
}

#[derive(clap::Args, Debug)]
struct VmCountsArgs {
    /// The share mode.
    #[arg(long, default_value = "virtiofs")]
    share: ShareMode,
    /// Rounds of the commands (times are their mean).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=100))]
    repeat: u64,
    /// The guest's virtual CPUs.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=16))]
    cpus: u32,
    /// Another static seamfs binary, mounted beside the one under test and timed in the same
    /// boot (an A/B under the same noise).
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// Time only: seamfs runs without its debug log (which inflates its CPU); no request counts.
    #[arg(long)]
    timing_only: bool,
    /// Also count seamfs's own syscalls per command (`strace -c` from the host, attached in the
    /// guest during the last round; it slows seamfs, so that round's times are not figures).
    #[arg(long)]
    syscalls: bool,
    /// Also profile seamfs per command in the last round (`perf record` from the host,
    /// attached in the guest); the hottest symbols follow the table.
    #[arg(long)]
    perf: bool,
    /// Keep, per command of the last round, seamfs's log lines (`NNN-seamfs.log`) and, with
    /// `--syscalls`, strace's full trace (`NNN-seamfs.strace`) in this directory (created).
    #[arg(long, value_name = "DIR")]
    keep: Option<PathBuf>,
    /// Tags made in each repository before counting, packed with the branch into `packed-refs`
    /// (`git pack-refs --all`) as a clone has them; 0 leaves every ref loose.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    packed_tags: u32,
}

#[derive(clap::Args, Debug)]
struct VmBenchArgs {
    /// Files in the generated repository (cached under /tmp/seam-bench-cache).
    #[arg(long, default_value_t = 20_000)]
    files: usize,
    /// Interleaved runs (medians are reported).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=100))]
    runs: u64,
    /// Share modes (comma-separated, or `all`).
    #[arg(long, default_value = "virtiofs")]
    share: String,
    /// Where report.md and report.json go.
    #[arg(long, default_value = "seam-vm-bench")]
    out: PathBuf,
    /// The guest's virtual CPUs.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=16))]
    cpus: u32,
    /// Run seamd's change feed to the guest's seamfs over a virtio-serial port
    /// (`seamd run --feed`, `seamfs --feed /dev/virtio-ports/seam.feed`).
    #[arg(long)]
    feed: bool,
}

#[derive(clap::Args, Debug)]
struct VmRaceArgs {
    /// host-commits, index-poller, ide, kill9, config or packed-refs.
    scenario: Scenario,
    /// How the guest sees the host's directory (comma-separated, or `all`): virtiofs,
    /// virtiofs-nofh (no file handles, as a macOS host), 9p-loose, 9p-mmap.
    #[arg(long, default_value = "virtiofs")]
    share: String,
    #[command(flatten)]
    run: super::RunArgs,
    /// Seed of the scenario's random choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The guest's virtual CPUs.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=16))]
    cpus: u32,
    /// Print machine-readable results (JSON) instead of tables.
    #[arg(long)]
    json: bool,
    /// Keep the guest's console, virtiofsd's, seamfs's and seamd's logs here.
    #[arg(long)]
    log_dir: Option<PathBuf>,
    /// Do not run seamd on the host for the seamfs target.
    #[arg(long)]
    no_seamd: bool,
    /// Exit 6 unless the control broke an invariant in every share mode (a check that the
    /// harness still sees the failure seamfs guards against).
    #[arg(long)]
    expect_control_failure: bool,
}

fn shares(s: &str) -> Result<Vec<ShareMode>, String> {
    if s == "all" {
        return Ok(ShareMode::ALL.to_vec());
    }
    s.split(',').map(str::parse).collect()
}

/// Runs `seam-lab vm`; the exit code: 0 ok, 1 could not run, 2 bad arguments, 5 seamfs broke an
/// invariant, 6 the control held every invariant where `--expect-control-failure` asked.
pub fn main(a: VmArgs) -> i32 {
    seamfs::init_logging("warn");
    let cache = Cache::new(&a.cache);
    match a.cmd {
        VmCmd::Setup => match seam_lab::vm::setup::setup(&cache) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("seam-lab vm setup: {e}");
                1
            }
        },
        VmCmd::Race(r) => race(r, cache),
        VmCmd::Bench(b) => bench(b, cache),
        VmCmd::Feed(f) => {
            let opts = seam_lab::vm::feed::VmFeedOptions { edits: f.edits as usize, mode: f.share, cache, cpus: f.cpus };
            printed("vm feed", seam_lab::vm::feed::run(&opts))
        }
        VmCmd::Counts(c) => {
            let opts = seam_lab::vm::counts::CountsOptions { repeat: c.repeat as usize, cpus: c.cpus, baseline: c.baseline, timing_only: c.timing_only, syscalls: c.syscalls, perf: c.perf, keep: c.keep, packed_tags: c.packed_tags };
            counts(c.share, &opts, &cache)
        }
    }
}

fn counts(share: ShareMode, opts: &seam_lab::vm::counts::CountsOptions, cache: &Cache) -> i32 {
    printed("vm counts", seam_lab::vm::counts::run(cache, share, opts))
}

/// A report printed (exit 0), or the error said (exit 1).
fn printed(what: &str, r: Result<String, seam_lab::lab::LabError>) -> i32 {
    match r {
        Ok(md) => {
            print!("{md}");
            0
        }
        Err(e) => {
            eprintln!("seam-lab {what}: {e}");
            1
        }
    }
}

fn bench(b: VmBenchArgs, cache: Cache) -> i32 {
    let shares = match shares(&b.share) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("seam-lab vm bench: --share: {e}");
            return 2;
        }
    };
    let opts = seam_lab::vm::bench::VmBenchOptions { files: b.files, runs: b.runs as usize, shares, out: b.out, cache, cpus: b.cpus, feed: b.feed };
    printed("vm bench", seam_lab::vm::bench::run(&opts))
}

fn race(r: VmRaceArgs, cache: Cache) -> i32 {
    let shares = match shares(&r.share) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("seam-lab vm race: --share: {e}");
            return 2;
        }
    };
    let duration = match r.run.duration() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("seam-lab vm race: {e}");
            return 2;
        }
    };
    let params = Params { duration, ops: r.run.ops, host_period: r.run.host_period(), seed: r.seed, ttl: 1.0 };
    let opts = VmRaceOptions {
        scenario: r.scenario,
        shares,
        targets: r.run.targets(),
        params,
        json: r.json,
        log_dir: r.log_dir,
        cache,
        cpus: r.cpus,
        seamd: !r.no_seamd,
    };
    let reports = match seam_lab::vm::race::run(&opts) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("seam-lab vm race {}: {e}", r.scenario.name());
            return 1;
        }
    };
    let broke: Vec<&str> = reports.iter().filter(|m| !m.report.seamfs_violations().is_empty()).map(|m| m.mode.name()).collect();
    if !broke.is_empty() {
        eprintln!("seam-lab vm race {}: seamfs broke an invariant over {}", r.scenario.name(), broke.join(", "));
        return 5;
    }
    if r.expect_control_failure {
        let held: Vec<&str> = reports.iter().filter(|m| m.report.control_violations().is_empty()).map(|m| m.mode.name()).collect();
        if !held.is_empty() {
            eprintln!("seam-lab vm race {}: the control broke no invariant over {}: the harness no longer sees the failure", r.scenario.name(), held.join(", "));
            return 6;
        }
    }
    0
}
