//! The `seamfs` binary: mount and unmount. All logic lives in the library.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use seamfs::config::{self, FileConfig};
use seamfs::core::{Core, CoreOptions};
use seamfs::layer::GitLayer;
use seamfs::lower::Lower;
use seamfs::mount::{self, exit, MountError, MountOptions};
use seamfs::policy::{Class, Ttls};

/// seamfs: share a git checkout between a host and a VM without losing anything.
///
/// Exit codes: 0 success; 2 bad arguments or bad input (missing lower, lower not a directory,
/// mountpoint not empty); 3 the mount failed; 4 the unmount failed.
#[derive(Parser, Debug)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Mount LOWER on MOUNTPOINT, or over DIR itself with --over.
    Mount(MountArgs),
    /// Unmount a seamfs mount (also clears one whose daemon died).
    Umount {
        /// The mountpoint.
        mountpoint: PathBuf,
    },
}

#[derive(clap::Args, Debug)]
struct MountArgs {
    /// Mount on top of DIR itself, reaching DIR's contents through a directory fd opened first.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["lower", "mountpoint"])]
    over: Option<PathBuf>,
    /// The directory to serve (the share as the box sees it).
    #[arg(required_unless_present = "over")]
    lower: Option<PathBuf>,
    /// Where to mount it (an empty directory).
    #[arg(required_unless_present = "over")]
    mountpoint: Option<PathBuf>,
    /// Stay in the foreground and log to stderr.
    #[arg(long)]
    foreground: bool,
    /// Never use FUSE passthrough for file data (what a kernel before 6.9 gets anyway).
    #[arg(long)]
    no_passthrough: bool,
    /// Kernel cache TTL for the work tree, in seconds: no longer than the share's own.
    #[arg(long)]
    ttl: Option<f64>,
    /// Worker threads.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Log file for the daemon (default: no log once daemonised).
    #[arg(long)]
    log: Option<PathBuf>,
    /// Let the box use the shared index instead of its own `index-box`.
    #[arg(long)]
    no_index_split: bool,
    /// How long a box lock create waits behind a host-held lock before EEXIST, in ms.
    #[arg(long, default_value_t = 1000)]
    lock_wait_ms: u64,
    /// Settings file (default /etc/seamfs.toml when it exists); flags override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// The host change feed (seamd run --feed): unix:PATH, vsock:CID:PORT, or a character
    /// device such as /dev/virtio-ports/seam.feed. While it is live the work tree stays cached
    /// until the host changes it, and box watchers see host edits.
    #[arg(long, value_name = "ADDR")]
    feed: Option<seamfs::feed::FeedAddr>,
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.cmd {
        Cmd::Mount(a) => run_mount(a),
        Cmd::Umount { mountpoint } => mount::unmount(&mountpoint).map(|()| exit::OK),
    };
    match code {
        Ok(c) => std::process::exit(c),
        Err(e) => {
            eprintln!("seamfs: {e}");
            std::process::exit(e.code);
        }
    }
}

/// The settings file: `--config`, else /etc/seamfs.toml when present, else defaults.
fn load_config(path: Option<&std::path::Path>) -> Result<FileConfig, MountError> {
    let default = std::path::Path::new("/etc/seamfs.toml");
    let path = match path {
        Some(p) => p,
        None if default.exists() => default,
        None => return Ok(FileConfig::default()),
    };
    config::load(path).map_err(|e| MountError::usage("read config", path, e.to_string()))
}

fn run_mount(a: MountArgs) -> Result<i32, MountError> {
    let (lower_path, mnt, over) = match a.over {
        Some(d) => (d.clone(), d, true),
        None => (a.lower.expect("clap requires it"), a.mountpoint.expect("clap requires it"), false),
    };
    mount::check_lower(&lower_path)?;
    mount::check_mountpoint(&mnt, over)?;
    // The daemon leaves the caller's directory: keep absolute paths.
    let lower_path = std::fs::canonicalize(&lower_path).map_err(|e| MountError::usage("resolve lower", &lower_path, e.to_string()))?;
    let mnt = std::fs::canonicalize(&mnt).map_err(|e| MountError::usage("resolve mountpoint", &mnt, e.to_string()))?;
    let file = load_config(a.config.as_deref())?;
    let ttl = a.ttl.or(file.ttl).unwrap_or(1.0);
    if !(0.0..=3600.0).contains(&ttl) {
        return Err(MountError::usage("parse --ttl", &mnt, "must be between 0 and 3600 seconds"));
    }
    // Few malloc arenas: worker threads then share freed memory instead of each keeping its own
    // (the heal's transient index copies would otherwise stay resident per thread).
    // SAFETY: mallopt only tunes the allocator.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, 2) };
    // The caller's umask is applied by the kernel and seamfs; the daemon must not add its own.
    // SAFETY: umask has no failure mode.
    unsafe { libc::umask(0) };
    let lower = Lower::open(&lower_path).map_err(|e| MountError::usage("open lower", &lower_path, e.to_string()))?;
    let notify = if a.foreground {
        seamfs::init_logging("info");
        None
    } else {
        let n = seamfs::daemon::daemonize(a.log.as_deref())
            .map_err(|e| MountError::usage("daemonise", &mnt, e.to_string()))?;
        seamfs::init_logging("info");
        n
    };
    if let Some(why) = lower.stale_pages() {
        tracing::info!(lower = %lower_path.display(), cache = why, "the lower never revalidates what it cached: git-dir files are read with O_DIRECT");
    }
    let feed_addr = a.feed.or(file.feed);
    // One mount per process: the feed's state lives as long as the process.
    let feed_live: Option<&'static seamfs::feed::FeedLive> = feed_addr.as_ref().map(|_| &*Box::leak(Box::default()));
    let mut layer = GitLayer {
        ttls: Ttls { work_tree: Duration::from_secs_f64(ttl), ..Ttls::default() },
        index_split: !a.no_index_split && file.index_split.unwrap_or(true),
        feed: feed_live,
        ..GitLayer::default()
    };
    if let Some(ms) = file.shared_index_wait_ms {
        layer.seed.shared_wait = Duration::from_millis(ms);
    }
    let opts = CoreOptions {
        passthrough: !a.no_passthrough,
        lock_wait: Duration::from_millis(a.lock_wait_ms),
        mountpoint: Some(mnt.clone()),
        ..CoreOptions::default()
    };
    let core = Core::new(lower, layer, Class::WorkTree, opts)
        .map_err(|e| MountError::usage("stat lower root", &lower_path, e.to_string()))?;
    let shared = core.shared().map_err(|e| MountError::usage("open lower", &lower_path, e.to_string()))?;
    let mopts = MountOptions { mountpoint: mnt.clone(), fsname: format!("seamfs:{}", lower_path.display()), subtype: "seamfs".into(), threads: a.threads };
    let ready = move |r: Result<(), &MountError>| {
        if let Some(n) = notify {
            match r {
                Ok(()) => n.ok(),
                Err(e) => n.fail(e.code, &e.to_string()),
            }
        }
    };
    let result = mount::serve_with(core, &mopts, ready, move |notifier| {
        if let (Some(addr), Some(live)) = (feed_addr, feed_live) {
            let c = seamfs::feed::consume::Consumer { addr, shared, notifier, mountpoint: mnt, live };
            if let Err(e) = c.spawn() {
                tracing::error!(error = %e, "could not start the change-feed thread; the work tree stays on the share's TTLs");
            }
        }
    });
    result.map(|()| exit::OK)
}
