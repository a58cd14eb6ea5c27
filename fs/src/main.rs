//! The `seamfs` binary: mount, unmount, doctor. Also the mount(8) helper when run as
//! `mount.fuse.seamfs` or `mount.seamfs`. All logic lives in the library.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand};
use seamfs::box_id::{BoxId, Source};
use seamfs::config::{self, FileConfig};
use seamfs::index::names::BoxNames;
use seamfs::core::{Core, CoreOptions};
use seamfs::layer::{GitLayer, STALE_LOWER_WORK_TREE_TTL};
use seamfs::lower::Lower;
use seamfs::mount::{self, exit, MountError, MountOptions, Unmounted};
use seamfs::policy::{Class, Ttls};

/// seamfs: share a git checkout between a host and a VM without losing anything.
///
/// Exit codes: 0 success; 2 bad arguments or bad input (missing lower, lower not a directory,
/// mountpoint not empty, inside the lower or already a seamfs mount, not root, not a seamfs
/// mount to unmount); 3 the mount failed; 4 the unmount failed. As `mount.fuse.seamfs`, the
/// mount(8) helper: `mount -t fuse.seamfs LOWER MNT -o ttl=1,...`.
#[derive(Parser, Debug)]
#[command(version = env!("SEAM_VERSION"))]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Mount LOWER on MOUNTPOINT, or over DIR itself with --over.
    #[command(after_help = "Exit codes: 0 mounted (the daemon answers); 2 bad arguments or bad input (the message \
                            names the path and what to do); 3 the mount failed.")]
    Mount(Box<MountArgs>),
    /// Unmount a seamfs mount (only seamfs; also clears one whose daemon died).
    #[command(after_help = "Exit codes: 0 unmounted (or a dead mount cleared); 2 not a seamfs mount; 4 the \
                            unmount failed.")]
    Umount {
        /// The mountpoint.
        mountpoint: PathBuf,
    },
    /// Check a seamfs mount from inside the box: up and answering, data path, the share,
    /// seam-git as core.hooksPath, git's version, the index split. Exit 1 when a check fails.
    #[command(after_help = "Exit codes: 0 no check failed (warnings allowed); 1 a check failed; 2 bad arguments.")]
    Doctor(seamfs::doctor::DoctorArgs),
    /// What seamfs parked before box processes destroyed it: list (newest first), restore, prune.
    #[command(after_help = "Exit codes: 0 done; 1 refused or failed (the message names the path and the next step); 2 bad arguments.")]
    Parked(seamfs::park::cli::ParkedArgs),
}

#[derive(clap::Args, Debug)]
struct MountArgs {
    /// Mount on top of DIR itself, reaching DIR's contents through a directory fd opened first.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["lower", "mountpoint"])]
    over: Option<PathBuf>,
    /// The directory to serve (the share as the box sees it).
    #[arg(required_unless_present = "over")]
    lower: Option<PathBuf>,
    /// Where to mount it (an empty directory outside the lower).
    #[arg(required_unless_present = "over")]
    mountpoint: Option<PathBuf>,
    /// Stay in the foreground and log to stderr.
    #[arg(long)]
    foreground: bool,
    /// Never use FUSE passthrough for file data (what a kernel before 6.9 gets anyway).
    #[arg(long)]
    no_passthrough: bool,
    /// Kernel cache TTL for the work tree, in seconds (0-3600): no longer than the share's own [default: 1; work-tree entries 60 over 9p cache=loose, whose own never expires].
    #[arg(long, value_name = "S")]
    ttl: Option<f64>,
    /// FUSE worker threads (1-256) [default: 4].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=256))]
    threads: Option<u64>,
    /// Log file for the daemon (default: no log once daemonised).
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Do not park what box processes destroy (uncommitted bytes kept on refs/seam/parked).
    #[arg(long)]
    no_park: bool,
    /// Let the box use the shared index instead of its own `index-box.ID`.
    #[arg(long)]
    no_index_split: bool,
    /// How long a box lock create waits behind a host-held lock before EEXIST, in ms [default: 1000].
    #[arg(long, value_name = "MS")]
    lock_wait_ms: Option<u64>,
    /// How long a first touch of `index` retries a shared index that reads missing, in ms [default: 2000].
    #[arg(long, value_name = "MS")]
    shared_index_wait_ms: Option<u64>,
    /// Settings file (default /etc/seamfs.toml when it exists); flags override it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The host change feed (seamd run --feed): unix:PATH, vsock:CID:PORT, or a character
    /// device such as /dev/virtio-ports/seam.feed. While it is live the work tree stays cached
    /// until the host changes it, and box watchers see host edits.
    #[arg(long, value_name = "ADDR")]
    feed: Option<seamfs::feed::FeedAddr>,
    /// This box's id (1-32 of a-z 0-9 _ -): its index on the share is `index-box.ID`, and every
    /// other box is another side, as the host is [default: from /etc/machine-id].
    #[arg(long, value_name = "ID")]
    box_id: Option<String>,
}

fn main() {
    // Before any thread exists: every thread then starts with them blocked (one handles them).
    seamfs::signals::block();
    let args: Vec<OsString> = std::env::args_os().collect();
    let code = match run(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("seamfs: {e}");
            e.code
        }
    };
    std::process::exit(code);
}

fn run(args: Vec<OsString>) -> Result<i32, MountError> {
    let argv0 = args.first().map(|a| Path::new(a).file_name().unwrap_or_default().to_os_string()).unwrap_or_default();
    let args = if argv0 == "mount.fuse.seamfs" || argv0 == "mount.seamfs" {
        match seamfs::options::helper_argv(&args[1..])? {
            Some(rest) => std::iter::once(OsString::from("seamfs")).chain(rest).collect(),
            None => return Ok(exit::OK),
        }
    } else if let Some(code) = seam_clidoc::intercept(&args, Cli::command) {
        return Ok(code);
    } else {
        expand_dash_o(args)?
    };
    let cli = Cli::parse_from(args);
    match cli.cmd {
        Cmd::Mount(a) => run_mount(*a),
        Cmd::Umount { mountpoint } => run_umount(&mountpoint),
        Cmd::Doctor(a) => Ok(seamfs::doctor::main(&a)),
        Cmd::Parked(a) => Ok(seamfs::park::cli::main(&a)),
    }
}

/// `seamfs mount ... -o a,b=c ...`: the options as the flags they name (`options::OPTIONS`).
fn expand_dash_o(args: Vec<OsString>) -> Result<Vec<OsString>, MountError> {
    if args.get(1).is_none_or(|a| a != "mount") {
        return Ok(args);
    }
    let mut out = Vec::with_capacity(args.len());
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let opts = match a.to_str() {
            Some("-o") => it.next().map(|v| v.to_string_lossy().into_owned()).unwrap_or_default(),
            Some(s) if s.starts_with("-o") => s[2..].to_string(),
            _ => {
                out.push(a);
                continue;
            }
        };
        let (flags, over) = seamfs::options::expand(&opts, false, Path::new("-o"))?;
        if over {
            return Err(MountError::usage("parse -o", Path::new("over"), "on the command line, say `--over DIR`"));
        }
        out.extend(flags);
    }
    Ok(out)
}

fn run_umount(mnt: &Path) -> Result<i32, MountError> {
    match mount::unmount_seamfs(mnt)? {
        Unmounted::Clean => {}
        Unmounted::Dead => eprintln!("seamfs: {}: its daemon had died; cleared the dead mount", mnt.display()),
        Unmounted::Lazily(users) => eprintln!(
            "seamfs: {} was busy: detached it lazily; it is gone from the directory tree, and its daemon \
             serves the processes still inside until they let go{}",
            mnt.display(),
            if users.is_empty() { String::new() } else { format!(": {}", seamfs::users::describe(&users, 8)) }
        ),
    }
    Ok(exit::OK)
}

/// Parking's bounds: the defaults, or `park_max_bytes` / `park_burst_cap` from the file.
fn park_config(file: &FileConfig) -> seamfs::park::ParkConfig {
    let d = seamfs::park::ParkConfig::default();
    seamfs::park::ParkConfig {
        max_size: file.park_max_bytes.unwrap_or(d.max_size),
        burst_cap: file.park_burst_cap.map_or(d.burst_cap, |c| c as usize),
        ..d
    }
}

/// The settings file: `--config`, else /etc/seamfs.toml when present, else defaults.
fn load_config(path: Option<&Path>) -> Result<FileConfig, MountError> {
    let default = Path::new("/etc/seamfs.toml");
    let path = match path {
        Some(p) => p,
        None if default.exists() => default,
        None => return Ok(FileConfig::default()),
    };
    config::load(path).map_err(|e| MountError::usage("read config", path, e.to_string()))
}

/// The checked, absolute `(lower, mountpoint, over)`.
fn resolve(a: &MountArgs) -> Result<(PathBuf, PathBuf, bool), MountError> {
    let (lower, mnt, over) = match &a.over {
        Some(d) => (d.clone(), d.clone(), true),
        None => (a.lower.clone().expect("clap requires it"), a.mountpoint.clone().expect("clap requires it"), false),
    };
    mount::check_privilege(&mnt)?;
    mount::check_mountpoint(&mnt, over)?;
    mount::check_lower(&lower)?;
    // The daemon leaves the caller's directory: keep absolute paths.
    let lower = std::fs::canonicalize(&lower).map_err(|e| MountError::usage("resolve lower", &lower, e.to_string()))?;
    let mnt = std::fs::canonicalize(&mnt).map_err(|e| MountError::usage("resolve mountpoint", &mnt, e.to_string()))?;
    if !over {
        mount::check_not_inside(&lower, &mnt)?;
    }
    Ok((lower, mnt, over))
}

/// The box id: `--box-id`, else `box_id` in the file, else this machine's (`box_id::default_id`).
fn box_id(a: &MountArgs, file: &FileConfig, mnt: &Path) -> Result<(BoxId, Source), MountError> {
    match (&a.box_id, &file.box_id) {
        (Some(s), _) => BoxId::parse(s).map(|id| (id, Source::Given)).map_err(|e| MountError::usage("parse --box-id", mnt, e)),
        (None, Some(id)) => Ok((id.clone(), Source::Given)),
        (None, None) => Ok(seamfs::box_id::default_id()),
    }
}

/// Says in the log where a default box id came from, and what to do when it is a fallback.
fn log_box_id(id: &BoxId, source: Source) {
    if !source.is_fallback() {
        tracing::info!(box_id = %id, from = source.as_str(), "box id");
    } else {
        tracing::warn!(
            box_id = %id,
            from = source.as_str(),
            "/etc/machine-id is missing or malformed: box id taken from a fallback; give each box its own with --box-id (two boxes with one id share one index)"
        );
    }
}

fn run_mount(a: MountArgs) -> Result<i32, MountError> {
    let (lower_path, mnt, over) = resolve(&a)?;
    let file = load_config(a.config.as_deref())?;
    let (box_id, box_id_source) = box_id(&a, &file, &mnt)?;
    let given_ttl = a.ttl.or(file.ttl);
    let ttl = given_ttl.unwrap_or(1.0);
    if !(0.0..=3600.0).contains(&ttl) {
        return Err(MountError::usage("parse --ttl", &mnt, "must be between 0 and 3600 seconds"));
    }
    let log = a.log.clone().or(file.log.clone());
    // Opened before the fork: a bad path is this command's error, named as such.
    let log_file = log.as_deref().map(seamfs::daemon::open_log).transpose()?;
    if over {
        mount::warn_users_of(&mnt);
        // The lower's own path is about to be seamfs: object-database work must not walk it.
        seamfs::lower_view::covered(&mnt);
    }
    // The share beneath, as the box sees it, for `seamfs doctor`.
    let share = seamfs::mountinfo::containing(&lower_path);
    // Few malloc arenas: worker threads then share freed memory instead of each keeping its own
    // (the heal's transient index copies would otherwise stay resident per thread).
    // SAFETY: mallopt only tunes the allocator.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, 2) };
    // The caller's umask is applied by the kernel and seamfs; the daemon must not add its own.
    // SAFETY: umask has no failure mode.
    unsafe { libc::umask(0) };
    let lower = Lower::open(&lower_path).map_err(|e| MountError::usage("open lower", &lower_path, e.to_string()))?.keeping_parent_dirs();
    let notify = if a.foreground {
        seamfs::init_logging("info");
        None
    } else {
        let n = seamfs::daemon::daemonize(log_file).map_err(|e| MountError::usage("daemonise", &mnt, e.to_string()))?;
        seamfs::init_logging("info");
        n
    };
    log_box_id(&box_id, box_id_source);
    // Over a lower that never revalidates, a work-tree TTL buys no freshness (ADR 0049).
    let stale_lower_ttl = lower.stale_pages().is_some().then_some(STALE_LOWER_WORK_TREE_TTL).filter(|_| given_ttl.is_none());
    if let Some(why) = lower.stale_pages() {
        tracing::info!(lower = %lower_path.display(), cache = why, "the lower never revalidates what it cached: git-dir files are read with O_DIRECT");
    }
    if let Some(t) = stale_lower_ttl {
        tracing::info!(
            ttl_s = t.as_secs(),
            "work-tree names and attributes are kept this long: the lower shows no change to a file it has seen (give --ttl to choose)"
        );
    }
    let refresh = if lower.link_alone() {
        "the link's forced lookup alone (virtiofs, 9p or a local filesystem)"
    } else {
        "a stat, then the link's forced lookup (a FUSE, NFS or unknown lower)"
    };
    tracing::info!(lower = %lower_path.display(), refresh, "live names are refreshed on the lower by");
    let index_split = !a.no_index_split && file.index_split.unwrap_or(true);
    let feed_addr = a.feed.clone().or(file.feed.clone());
    // One mount per process: the feed's state lives as long as the process.
    let feed_live: Option<&'static seamfs::feed::FeedLive> = feed_addr.as_ref().map(|_| &*Box::leak(Box::default()));
    let mut layer = GitLayer {
        ttls: Ttls { work_tree: Duration::from_secs_f64(ttl), ..Ttls::default() },
        index_split,
        feed: feed_live,
        names: Box::leak(Box::new(BoxNames::new(box_id.clone()))),
        stale_lower_ttl,
        ..GitLayer::default()
    };
    if let Some(ms) = a.shared_index_wait_ms.or(file.shared_index_wait_ms) {
        layer.seed.shared_wait = Duration::from_millis(ms);
    }
    let lock_wait_ms = a.lock_wait_ms.or(file.lock_wait_ms).unwrap_or(1000);
    let status = vec![
        ("version".to_string(), env!("SEAM_VERSION").to_string()),
        ("lower".into(), lower_path.display().to_string()),
        ("mountpoint".into(), mnt.display().to_string()),
        ("share_type".into(), share.as_ref().map(|m| m.fstype.clone()).unwrap_or_default()),
        ("share_options".into(), share.as_ref().map(|m| m.options.clone()).unwrap_or_default()),
        ("ttl".into(), ttl.to_string()),
        ("work_tree_ttl".into(), stale_lower_ttl.map_or(ttl, |t| t.as_secs_f64()).to_string()),
        ("index_split".into(), index_split.to_string()),
        ("box_id".into(), box_id.to_string()),
        ("box_id_from".into(), box_id_source.as_str().into()),
        ("lock_wait_ms".into(), lock_wait_ms.to_string()),
    ];
    let opts = CoreOptions {
        passthrough: !a.no_passthrough && file.passthrough.unwrap_or(true),
        lock_wait: Duration::from_millis(lock_wait_ms),
        mountpoint: Some(mnt.clone()),
        status,
        park: (!a.no_park && file.park.unwrap_or(true)).then(|| park_config(&file)),
        ..CoreOptions::default()
    };
    let core = Core::new(lower, layer, Class::WorkTree, opts)
        .map_err(|e| MountError::usage("stat lower root", &lower_path, e.to_string()))?;
    let shared = core.shared().map_err(|e| MountError::usage("open lower", &lower_path, e.to_string()))?;
    let threads = a.threads.map(|t| t as usize).or(file.threads).unwrap_or(4);
    let mopts = MountOptions { mountpoint: mnt.clone(), fsname: format!("seamfs:{}", lower_path.display()), subtype: "seamfs".into(), threads };
    let ready = move |r: Result<(), &MountError>| {
        if let Some(n) = notify {
            match r {
                Ok(()) => n.ok(),
                Err(e) => n.fail(e.code, &e.to_string()),
            }
        }
    };
    let notifier_slot = core.notifier_slot();
    let result = mount::serve_with(core, &mopts, ready, move |notifier| {
        let _ = notifier_slot.set(notifier.clone());
        if let (Some(addr), Some(live)) = (feed_addr, feed_live) {
            let c = seamfs::feed::consume::Consumer { addr, shared, notifier, mountpoint: mnt, live };
            if let Err(e) = c.spawn() {
                tracing::error!(error = %e, "could not start the change-feed thread; the work tree stays on the share's TTLs");
            }
        }
    });
    result.map(|()| exit::OK)
}
