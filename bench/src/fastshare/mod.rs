//! `seam-lab share --fast`: a share as quick as virtiofsd's, the fair baseline (issue 16, ADR 0024).
//!
//! The share emulator ([`crate::share`]) is the seamfs core with a layer, built for fault
//! injection; its per-request cost is seamfs's own, so ratios against it flatter whatever sits on
//! top. This one is modelled on virtiofsd's passthrough (cache=auto): inodes keyed by
//! `(st_dev, st_ino)` holding an O_PATH fd ([`inodes`], under an fd budget), entry and attribute
//! TTL 1 s, a missing name answered as an error (no negative entry), readdirplus, and every call
//! made on the parent's or the inode's fd. It injects no faults.

pub mod fs;
pub mod inodes;
pub mod io;
pub mod ops;
pub mod sys;

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use seamfs::handles::Handles;
use seamfs::mount::{MountError, MountOptions};

use inodes::Inodes;

/// O_PATH fds the share holds by default: room below the 20,000 open-file limit for open files,
/// directory handles and the FUSE channel's fds (one per thread).
pub const DEFAULT_BUDGET: usize = 16_384;

/// Everything `seam-lab share --fast` needs.
#[derive(Debug, Clone)]
pub struct FastConfig {
    /// The backing directory (the host's checkout).
    pub backing: PathBuf,
    /// Where the box sees it.
    pub mountpoint: PathBuf,
    /// Entry and attribute TTL (virtiofsd's cache=auto: 1 s).
    pub ttl: Duration,
    /// Most O_PATH fds held for inodes at once.
    pub budget: usize,
    /// Stay in the foreground, logging to stderr.
    pub foreground: bool,
    /// Log file once daemonised.
    pub log: Option<PathBuf>,
    /// Never use FUSE passthrough.
    pub no_passthrough: bool,
    /// Plain READDIR only (virtiofsd's `--no-readdirplus`).
    pub no_readdirplus: bool,
    /// Worker threads.
    pub threads: usize,
}

/// The filesystem.
#[derive(Debug)]
pub struct FastShare {
    /// The backing directory (for messages).
    backing: PathBuf,
    inodes: Inodes,
    handles: Handles,
    ttl: Duration,
    budget: usize,
    want_passthrough: bool,
    /// Offer READDIRPLUS at init (virtiofsd's default).
    readdirplus: bool,
    /// Passthrough taken at init.
    passthrough: bool,
}

impl FastShare {
    /// A share of `backing` (its root fd opened here).
    pub fn new(backing: &Path, ttl: Duration, budget: usize, passthrough: bool, readdirplus: bool) -> std::io::Result<FastShare> {
        let c = sys::cname(backing.as_os_str())?;
        let root: OwnedFd = sys::openat(libc::AT_FDCWD, &c, libc::O_PATH | libc::O_DIRECTORY, 0)?;
        Ok(FastShare {
            backing: backing.to_path_buf(),
            inodes: Inodes::new(root, budget)?,
            handles: Handles::default(),
            ttl,
            budget,
            want_passthrough: passthrough,
            readdirplus,
            passthrough: false,
        })
    }
}

/// Mounts the fast share and serves until unmounted (returns in the parent once the mount
/// answers unless `foreground`).
pub fn run(mut cfg: FastConfig) -> Result<(), MountError> {
    crate::share::prepare(&mut cfg.backing, &mut cfg.mountpoint)?;
    if cfg.budget == 0 {
        return Err(MountError::usage("check --fd-budget", &cfg.mountpoint, "must be at least 1"));
    }
    let fs = FastShare::new(&cfg.backing, cfg.ttl, cfg.budget, !cfg.no_passthrough, !cfg.no_readdirplus)
        .map_err(|e| MountError::usage("open backing", &cfg.backing, e.to_string()))?;
    let mopts = MountOptions {
        mountpoint: cfg.mountpoint.clone(),
        fsname: format!("seam-fast:{}", cfg.backing.display()),
        subtype: "seam-fast".into(),
        threads: cfg.threads,
    };
    crate::share::daemon_serve(fs, &mopts, cfg.foreground, cfg.log.as_deref(), || {
        tracing::info!(backing = %cfg.backing.display(), ttl = ?cfg.ttl, budget = cfg.budget, "fast share starting");
    })
}
