//! One target's stage: a fresh backing dir (the host), the share emulator over it, and for the
//! seamfs target seamfs over its own emulator instance, so nothing seamfs does (its forced
//! lookups) freshens another run's cache. Host actors work in `host`, box actors in `box_dir`.
//! The seamfs target also runs `seamd run` on the backing dir, the host half of the system
//! (it installs the heals seamfs could not seal in), unless asked not to.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::boxshell::BoxShell;
use super::Target;
use crate::lab::cleanup::unmount_now;
use crate::lab::mounts::{mount_fast_share, mount_seamfs_with, mount_share, ShareArgs};
use crate::lab::{bin_dir, LabError};
use crate::share::fault::FaultKind;
use crate::vm::guest::Guest;

/// How the share emulator misbehaves in a run.
#[derive(Debug, Clone)]
pub struct ShareSetup {
    /// Entry/attr/negative TTL in seconds.
    pub ttl: f64,
    /// Fault injected after a git-dir name is replaced, and its window in ms.
    pub fault: Option<(FaultKind, u64)>,
    /// Seed of the fault windows.
    pub seed: u64,
    /// Run seamd on the host side of the seamfs target.
    pub seamd: bool,
    /// Run the host change feed for the seamfs target: seamd with `--feed unix:…` (so seamd
    /// runs whatever `seamd` says) and seamfs mounted with `--feed` (ADR 0021).
    pub feed: bool,
    /// How many boxes: each its own emulator mount of the one backing dir and, for the seamfs
    /// target, its own seamfs with its own box id (ADR 0028). 1: one box, seamfs's default id.
    pub boxes: usize,
    /// Every box's seamfs gets one id (one shared `index-box`, as before box ids): the control
    /// of `--boxes`.
    pub same_box_id: bool,
    /// The share is the fast share (`seam-lab share --fast`, ADR 0024: virtiofsd's caching, the
    /// bench's baseline) with `ttl` as its entry and attribute TTL, not the emulator; no fault.
    pub fast: bool,
}

impl ShareSetup {
    /// Mounts this share of `backing` on `mnt`, its log (the emulator's) at `log`.
    fn mount(&self, backing: &Path, mnt: &Path, log: &Path) -> Result<(), LabError> {
        if self.fast {
            return mount_fast_share(backing, mnt, self.ttl, None);
        }
        mount_share(backing, mnt, &self.args(log))
    }

    fn args(&self, log: &Path) -> ShareArgs {
        let mut extra = vec!["--seed".to_string(), self.seed.to_string(), "--log".into(), log.display().to_string()];
        if let Some((kind, ms)) = self.fault {
            let k = match kind {
                FaultKind::StaleOld => "stale-old",
                FaultKind::StaleMissing => "stale-missing",
            };
            extra.extend(["--fault".to_string(), k.to_string(), "--window".into(), ms.to_string()]);
        }
        ShareArgs { ttl: Some(self.ttl), extra }
    }
}

/// A mounted stage for one target.
#[derive(Debug)]
pub struct Rig {
    /// Control or seamfs.
    pub target: Target,
    /// The backing dir: the host's checkout, where host actors run git.
    pub host: PathBuf,
    /// Where box actors run git: the emulator (control) or seamfs over it (for a guest: the
    /// guest's path).
    pub box_dir: PathBuf,
    /// How box actors act there.
    pub boxed: BoxShell,
    /// Every box (the first is `boxed`); more than one with `ShareSetup::boxes`.
    pub boxes: Vec<BoxShell>,
    /// A scratch dir beside the host's checkout (upstream clones, client files), never mounted.
    pub scratch: PathBuf,
    /// seamfs's log file (seamfs target only).
    pub seamfs_log: Option<PathBuf>,
    /// Mounts, newest first (the order to unmount them).
    mounts: Vec<PathBuf>,
    /// `seamd run` on the host's checkout (seamfs target).
    seamd: Option<Child>,
    /// In a guest with seamfs mounted by the box bootstrap: the guest, its checkout path and
    /// seamfs's log there (fetched into `seamfs_log` at teardown).
    guest_seamfs: Option<(Arc<Guest>, PathBuf, PathBuf)>,
}

fn subdir(root: &Path, name: &str) -> Result<PathBuf, LabError> {
    let d = root.join(name);
    std::fs::create_dir(&d).map_err(|e| LabError::new("create dir", &d, e))?;
    Ok(d)
}

impl Rig {
    /// `git fsck` problems in the host's checkout, once every box's seamfs has committed its
    /// background work (see [`BoxShell::settle`]).
    pub fn fsck_problems(&self) -> Result<Vec<String>, LabError> {
        for b in &self.boxes {
            b.settle();
        }
        super::check::fsck_problems(&self.host)
    }

    /// Creates `root/host`, lets `prepare` build the host's repository there (before anything is
    /// mounted, as a checkout exists before the box boots), then mounts. Daemon logs go to
    /// `logs` (kept by the caller when it asks).
    pub fn new<S>(
        root: &Path,
        logs: &Path,
        target: Target,
        share: &ShareSetup,
        prepare: impl FnOnce(&Path, &Path) -> Result<S, LabError>,
    ) -> Result<(Rig, S), LabError> {
        let host = subdir(root, "host")?;
        let scratch = subdir(root, "scratch")?;
        let setup = prepare(&host, &scratch)?;
        let tag = target.key();
        let share_mnt = subdir(root, "share")?;
        share.mount(&host, &share_mnt, &logs.join(format!("{tag}-share.log")))?;
        let mut rig = Rig {
            target,
            host,
            box_dir: share_mnt.clone(),
            boxed: BoxShell::Local(share_mnt.clone()),
            boxes: vec![BoxShell::Local(share_mnt.clone())],
            scratch,
            seamfs_log: None,
            mounts: vec![share_mnt.clone()],
            seamd: None,
            guest_seamfs: None,
        };
        if target == Target::Seamfs {
            let top = subdir(root, "seamfs")?;
            let log = logs.join("seamfs.log");
            let feed = feed_addr(root);
            let mut args = vec!["--log".to_string(), log.display().to_string()];
            if share.feed {
                args.extend(["--feed".to_string(), feed.clone()]);
            }
            args.extend(box_id_args(share, 0));
            // seamfs first: it connects to the feed (again every second) once seamd listens.
            mount_seamfs_with(&share_mnt, &top, &args)?;
            rig.mounts.insert(0, top.clone());
            rig.boxed = BoxShell::Local(top.clone());
            rig.boxes = vec![BoxShell::Local(top.clone())];
            rig.box_dir = top;
            rig.seamfs_log = Some(log.clone());
        }
        for i in 1..share.boxes {
            if let Err(e) = rig.add_box(root, logs, share, i, &feed_addr(root)) {
                return Err(rig.abandon(e));
            }
        }
        if target == Target::Seamfs {
            let (log, feed) = (logs.join("seamfs.log"), feed_addr(root));
            if share.seamd || share.feed {
                let extra = if share.feed { vec!["--feed".to_string(), feed] } else { Vec::new() };
                match start_seamd(&rig.host, &logs.join("seamd.log"), &extra) {
                    Ok(c) => rig.seamd = Some(c),
                    Err(e) => return Err(rig.abandon(e)),
                }
            }
            if share.feed {
                if let Err(e) = wait_for_log(&log, "change feed live", FEED_UP) {
                    return Err(rig.abandon(e));
                }
            }
        }
        Ok((rig, setup))
    }

    /// Box `i` (from 1): its own emulator mount of the backing dir and, for the seamfs target,
    /// its own seamfs over that, as a second VM over the same share would be.
    fn add_box(&mut self, root: &Path, logs: &Path, share: &ShareSetup, i: usize, feed: &str) -> Result<(), LabError> {
        let tag = self.target.key();
        let share_mnt = subdir(root, &format!("share-{i}"))?;
        share.mount(&self.host, &share_mnt, &logs.join(format!("{tag}-share-{i}.log")))?;
        self.mounts.insert(0, share_mnt.clone());
        let mut dir = share_mnt.clone();
        if self.target == Target::Seamfs {
            let top = subdir(root, &format!("seamfs-{i}"))?;
            let mut args = vec!["--log".to_string(), logs.join(format!("seamfs-{i}.log")).display().to_string()];
            if share.feed {
                args.extend(["--feed".to_string(), feed.to_string()]);
            }
            args.extend(box_id_args(share, i));
            mount_seamfs_with(&share_mnt, &top, &args)?;
            self.mounts.insert(0, top.clone());
            dir = top;
        }
        self.boxes.push(BoxShell::Local(dir));
        Ok(())
    }

    /// Tears a half-built stage down and hands back the error that stopped it.
    fn abandon(self, e: LabError) -> LabError {
        if let Err(t) = self.teardown() {
            eprintln!("seam-lab: tearing down after `{e}` also failed: {t}");
        }
        e
    }

    /// A stage in a booted guest: `host` is the backing checkout on this machine, `guest_dir` the
    /// same checkout as the guest sees it on its share. For the seamfs target the guest mounts
    /// seamfs over `guest_dir` with the box bootstrap script, as a box image would, and seamd
    /// runs on `host`.
    pub fn in_guest(host: PathBuf, scratch: PathBuf, logs: &Path, target: Target, guest: Arc<Guest>, guest_dir: PathBuf, seamd: bool) -> Result<Rig, LabError> {
        let mut rig = Rig {
            target,
            host,
            box_dir: guest_dir.clone(),
            boxed: BoxShell::Guest(Arc::clone(&guest), guest_dir.clone()),
            boxes: vec![BoxShell::Guest(Arc::clone(&guest), guest_dir.clone())],
            scratch,
            seamfs_log: None,
            mounts: Vec::new(),
            seamd: None,
            guest_seamfs: None,
        };
        if target == Target::Seamfs {
            let glog = PathBuf::from(format!("/tmp/seamfs-{}.log", guest.mode.name()));
            // The host's SEAMFS_LOG (a filter such as `debug`) and SEAMFS_LOG_SPANS (`close`:
            // each request's busy time) reach the guest's seamfs, so a race can be replayed with
            // every request logged (`--log-dir` keeps the log).
            let env = crate::vm::guest::forwarded_env(&["SEAMFS_LOG", "SEAMFS_LOG_SPANS"]);
            let up = guest.sh(&format!("{env}seamfs-bootstrap up '{}' --log '{}'", guest_dir.display(), glog.display()))?;
            if up.code != 0 {
                return Err(LabError::new(
                    "mount seamfs in the guest (seamfs-bootstrap up)",
                    &guest_dir,
                    format!("exit {}: {}", up.code, String::from_utf8_lossy(&up.stderr).trim()),
                ));
            }
            rig.seamfs_log = Some(logs.join(format!("seamfs-{}.log", guest.mode.name())));
            rig.guest_seamfs = Some((guest, guest_dir, glog));
            if seamd {
                rig.seamd = Some(start_seamd(&rig.host, &logs.join("seamd.log"), &[])?);
            }
        }
        Ok(rig)
    }

    /// Copies seamfs's guest log to `seamfs_log` (a guest stage only).
    pub fn fetch_guest_log(&self) -> Result<(), LabError> {
        let (Some((g, _, glog)), Some(to)) = (&self.guest_seamfs, &self.seamfs_log) else { return Ok(()) };
        let r = g.run(Path::new("/"), &[b"/bin/cat", glog.as_os_str().as_encoded_bytes()], &crate::vm::guest::GUEST_ENV, None)?;
        std::fs::write(to, &r.stdout).map_err(|e| LabError::new("write guest seamfs log", to, e))
    }

    /// The host's git dir.
    pub fn gitdir(&self) -> PathBuf {
        self.host.join(".git")
    }

    /// The last `n` lines of seamfs's log (empty for the control).
    pub fn seamfs_log_tail(&self, n: usize) -> String {
        let Some(p) = &self.seamfs_log else { return String::new() };
        if let Err(e) = self.fetch_guest_log() {
            return format!("(could not fetch the guest's seamfs log: {e})");
        }
        let text = std::fs::read_to_string(p).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// Stops seamd, then unmounts, newest first.
    pub fn teardown(mut self) -> Result<(), LabError> {
        if let Some(child) = self.seamd.take() {
            stop(child, &self.host)?;
        }
        for m in &self.mounts {
            unmount_now(m)?;
        }
        if let Some((g, dir, _)) = &self.guest_seamfs {
            self.fetch_guest_log()?;
            let down = g.sh(&format!("seamfs-bootstrap down '{}'", dir.display()))?;
            if down.code != 0 {
                return Err(LabError::new(
                    "unmount seamfs in the guest (seamfs-bootstrap down)",
                    dir,
                    format!("exit {}: {}", down.code, String::from_utf8_lossy(&down.stderr).trim()),
                ));
            }
        }
        Ok(())
    }
}

/// The change feed's address for a stage under `root`.
fn feed_addr(root: &Path) -> String {
    format!("unix:{}", root.join("feed.sock").display())
}

/// `--box-id` for box `i`'s seamfs: none for a single box (seamfs's default), `b<i>` for each
/// of several, one id for all under `same_box_id`.
fn box_id_args(share: &ShareSetup, i: usize) -> Vec<String> {
    match (share.boxes, share.same_box_id) {
        (0 | 1, _) => Vec::new(),
        (_, true) => vec!["--box-id".into(), "same".into()],
        (_, false) => vec!["--box-id".into(), format!("b{i}")],
    }
}

/// How long seamfs may take to connect to seamd's feed (it retries every second).
const FEED_UP: Duration = Duration::from_secs(15);

/// Waits until `log` contains `what`.
pub(crate) fn wait_for_log(log: &Path, what: &str, within: Duration) -> Result<(), LabError> {
    let deadline = Instant::now() + within;
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains(what) {
            return Ok(());
        }
        if Instant::now() > deadline {
            let tail: Vec<&str> = text.lines().rev().take(10).collect();
            return Err(LabError::new(format!("wait for `{what}` in seamfs's log"), log, format!("not there after {} s; it ends: {}", within.as_secs(), tail.join(" | "))));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts `seamd run HOST`, its output to `log`. It gets SIGKILL if the lab dies first (Ctrl-C
/// or a crash), so it never outlives the checkout it watches: SIGTERM was seen to stay pending
/// in a seamd whose checkout was already gone.
/// `seamd run HOST EXTRA...`, logging to `log`, killed if the lab dies.
pub(crate) fn start_seamd(host: &Path, log: &Path, extra: &[String]) -> Result<Child, LabError> {
    let exe = bin_dir()?.join("seamd");
    if !exe.is_file() {
        return Err(LabError::new("find seamd", &exe, "not built (cargo build -p seamd), or run with --no-seamd"));
    }
    let out = std::fs::File::create(log).map_err(|e| LabError::new("create seamd log", log, e))?;
    let err = out.try_clone().map_err(|e| LabError::new("clone seamd log handle", log, e))?;
    let mut cmd = Command::new(&exe);
    cmd.arg("run").arg(host).args(extra).stdin(Stdio::null()).stdout(out).stderr(err);
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().map_err(|e| LabError::new("start seamd run", host, e))
}

/// SIGTERM, then SIGKILL if it has not exited within 3 s; reaps it.
pub(crate) fn stop(mut child: Child, host: &Path) -> Result<(), LabError> {
    // SAFETY: kill(2) of our own child, which has not been reaped (so the pid is still its).
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return Ok(()),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                child.wait().map_err(|e| LabError::new("reap seamd", host, e))?;
                return Ok(());
            }
            Err(e) => return Err(LabError::new("wait for seamd", host, e)),
        }
    }
}
