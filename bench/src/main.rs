//! The `seam-lab` binary: the share emulator, unmounting, and the demo. Logic lives in the library.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use seam_lab::share::fault::{FaultConfig, FaultKind};
use seam_lab::share::layer::ShareTtls;
use seam_lab::share::{self, ShareConfig};
use seamfs::mount::{self, exit, MountError};

/// seam-lab: the share emulator and the lab that measures seamfs against it.
///
/// Exit codes: 0 success; 1 the demo failed; 2 bad arguments or bad input; 3 the mount failed;
/// 4 the unmount failed.
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
    /// Time git through native disk, the raw share, seamfs and peer FUSE layers; write a report.
    Bench(seam_lab::bench::BenchArgs),
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
    /// Fault to inject after a git-dir name is replaced: stale-old or stale-missing.
    #[arg(long, requires = "window")]
    fault: Option<FaultKind>,
    /// Longest fault window in milliseconds (each event draws one in [window/2, window]).
    #[arg(long, requires = "fault")]
    window: Option<u64>,
    /// Seed of the fault windows.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stay in the foreground and log to stderr.
    #[arg(long)]
    foreground: bool,
    /// Log file for the daemon (default: no log once daemonised).
    #[arg(long)]
    log: Option<PathBuf>,
    /// Never use FUSE passthrough for file data.
    #[arg(long)]
    no_passthrough: bool,
    /// Worker threads.
    #[arg(long, default_value_t = 4)]
    threads: usize,
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

fn main() {
    let cli = Cli::parse();
    let code = match cli.cmd {
        Cmd::Bench(a) => Ok(seam_lab::bench::main(a)),
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
    let ttls = ShareTtls {
        entry: share::ttl_arg("parse --entry-ttl", a.entry_ttl, &mnt)?,
        attr: share::ttl_arg("parse --attr-ttl", a.attr_ttl, &mnt)?,
        negative: share::ttl_arg("parse --negative-ttl", a.negative_ttl, &mnt)?,
    };
    let fault = match (a.fault, a.window) {
        (Some(kind), Some(ms)) => {
            Some(FaultConfig { kind, window: std::time::Duration::from_millis(ms), seed: a.seed })
        }
        _ => None,
    };
    share::run(ShareConfig {
        backing: a.backing,
        mountpoint: a.mountpoint,
        ttls,
        fault,
        foreground: a.foreground,
        log: a.log,
        no_passthrough: a.no_passthrough,
        threads: a.threads,
    })
}
