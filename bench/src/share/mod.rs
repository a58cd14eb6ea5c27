//! `seam-lab share`: the share emulator, the seamfs passthrough core with [`layer::ShareLayer`].
//!
//! It mounts and daemonises exactly as `seamfs mount` does, so the two differ only in their layer.

pub mod fault;
pub mod layer;
pub mod rng;

use std::path::PathBuf;
use std::time::Duration;

use seamfs::core::{Core, CoreOptions};
use seamfs::lower::Lower;
use seamfs::mount::{self, MountError, MountOptions};
use seamfs::policy::Class;

use fault::FaultConfig;
use layer::{ShareLayer, ShareTtls};

/// Everything `seam-lab share` needs.
#[derive(Debug, Clone)]
pub struct ShareConfig {
    /// The backing directory (the host's checkout).
    pub backing: PathBuf,
    /// Where the box sees it.
    pub mountpoint: PathBuf,
    /// Cache lifetimes.
    pub ttls: ShareTtls,
    /// Fault injection, if any.
    pub fault: Option<FaultConfig>,
    /// Stay in the foreground, logging to stderr.
    pub foreground: bool,
    /// Log file once daemonised.
    pub log: Option<PathBuf>,
    /// Never use FUSE passthrough.
    pub no_passthrough: bool,
    /// Cache writes in the kernel (FUSE writeback cache; implies no passthrough).
    pub writeback_cache: bool,
    /// Worker threads.
    pub threads: usize,
}

/// Checks a TTL argument: finite, between 0 and an hour.
pub fn ttl_arg(what: &'static str, secs: f64, mnt: &std::path::Path) -> Result<Duration, MountError> {
    if !(0.0..=3600.0).contains(&secs) {
        return Err(MountError::usage(what, mnt, "must be between 0 and 3600 seconds"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Checks BACKING and MOUNTPOINT and makes both absolute (the daemon moves to /); clears the
/// umask, since the kernel applies the caller's before it sends a mode. Both shares start so.
pub(crate) fn prepare(backing: &mut PathBuf, mountpoint: &mut PathBuf) -> Result<(), MountError> {
    mount::check_lower(backing)?;
    mount::check_mountpoint(mountpoint, false)?;
    *backing = std::fs::canonicalize(&*backing).map_err(|e| MountError::usage("resolve backing", backing, e.to_string()))?;
    *mountpoint =
        std::fs::canonicalize(&*mountpoint).map_err(|e| MountError::usage("resolve mountpoint", mountpoint, e.to_string()))?;
    // SAFETY: umask has no failure mode.
    unsafe { libc::umask(0) };
    Ok(())
}

/// Daemonises unless `foreground` (logging to `log`), calls `started` once logging is set up,
/// then mounts `fs` and serves until unmounted; the parent returns once the mount answers.
pub(crate) fn daemon_serve<F: fuser::Filesystem>(
    fs: F,
    mopts: &MountOptions,
    foreground: bool,
    log: Option<&std::path::Path>,
    started: impl FnOnce(),
) -> Result<(), MountError> {
    let notify = if foreground {
        None
    } else {
        let log = log.map(seamfs::daemon::open_log).transpose()?;
        seamfs::daemon::daemonize(log).map_err(|e| MountError::usage("daemonise", &mopts.mountpoint, e.to_string()))?
    };
    seamfs::init_logging("info");
    started();
    mount::serve(fs, mopts, move |r| {
        if let Some(n) = notify {
            match r {
                Ok(()) => n.ok(),
                Err(e) => n.fail(e.code, &e.to_string()),
            }
        }
    })
}

/// Mounts the emulator and serves until unmounted (returns in the parent once the mount answers
/// unless `foreground`).
pub fn run(mut cfg: ShareConfig) -> Result<(), MountError> {
    prepare(&mut cfg.backing, &mut cfg.mountpoint)?;
    let lower =
        Lower::open(&cfg.backing).map_err(|e| MountError::usage("open backing", &cfg.backing, e.to_string()))?;
    let layer = ShareLayer::new(cfg.ttls, cfg.fault);
    // A plain filesystem below: passthrough stacks one level; seamfs on top takes the second.
    let opts = CoreOptions {
        passthrough: !cfg.no_passthrough && !cfg.writeback_cache,
        max_stack_depth: 1,
        writeback_cache: cfg.writeback_cache,
        // A share as virtiofsd serves it by default: the kernel checks capabilities itself.
        kill_privs: false,
        ..CoreOptions::default()
    };
    let core = Core::new(lower, layer, Class::WorkTree, opts)
        .map_err(|e| MountError::usage("stat backing root", &cfg.backing, e.to_string()))?;
    let mopts = MountOptions {
        mountpoint: cfg.mountpoint.clone(),
        fsname: format!("seam-share:{}", cfg.backing.display()),
        subtype: "seam-share".into(),
        threads: cfg.threads,
    };
    daemon_serve(core, &mopts, cfg.foreground, cfg.log.as_deref(), || {
        tracing::info!(
            backing = %cfg.backing.display(),
            entry_ttl = ?cfg.ttls.entry,
            attr_ttl = ?cfg.ttls.attr,
            negative_ttl = ?cfg.ttls.negative,
            fault = ?cfg.fault,
            "share emulator starting"
        );
    })
}
