//! The layers a workload runs through, each over its own identical copy of the generated repo.
//!
//! Why copies: the workloads write (add, commit, checkout, and their resets). On one shared
//! backing dir, one layer's writes would leave every other layer's kernel cache stale, and the
//! next layer's `git status` would pay for re-hashing files it had no part in changing.
//!
//! Every FUSE layer sits on its own share-emulator mount of its copy, as seamfs does: the fair
//! comparison is each layer over the same kind of lower, not a peer over the faster native disk.
//! `fast` and `seamfs-fast` do the same over the fast share (ADR 0024), the baseline as quick as
//! virtiofsd.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::gen::BIG_NAME;
use super::peers::which;
use super::procfs::find_pid;
use crate::lab::mounts::{mount_fast_share, mount_share, seamfs_bin, ShareArgs};
use crate::lab::LabError;

/// A layer under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum)]
pub enum LayerKind {
    /// The backing directory itself.
    Native,
    /// The share emulator over it (the raw share).
    Share,
    /// seamfs over a share-emulator mount.
    Seamfs,
    /// seamfs with `--no-index-split` over a share-emulator mount.
    SeamfsNosplit,
    /// bindfs over a share-emulator mount.
    Bindfs,
    /// fuse-overlayfs over a share-emulator mount.
    FuseOverlayfs,
    /// The fast share alone (`seam-lab share --fast`, virtiofsd's speed: ADR 0024).
    Fast,
    /// seamfs over a fast-share mount.
    SeamfsFast,
    /// seamfs over a fast-share mount with the host change feed live (`seamd run --feed` on the
    /// backing dir, `seamfs --feed`): what a box that runs the feed gets (ADR 0021).
    SeamfsFastFeed,
    /// Another seamfs binary over a fast-share mount (`seam-lab small --baseline`): an A/B of two
    /// builds in one run, under the same noise.
    #[value(skip)]
    SeamfsFastBaseline,
}

impl LayerKind {
    /// Every layer, in report order.
    pub const ALL: [LayerKind; 9] = [
        LayerKind::Native,
        LayerKind::Share,
        LayerKind::Seamfs,
        LayerKind::SeamfsNosplit,
        LayerKind::Bindfs,
        LayerKind::FuseOverlayfs,
        LayerKind::Fast,
        LayerKind::SeamfsFast,
        LayerKind::SeamfsFastFeed,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            LayerKind::Native => "native",
            LayerKind::Share => "share",
            LayerKind::Seamfs => "seamfs",
            LayerKind::SeamfsNosplit => "seamfs-nosplit",
            LayerKind::Bindfs => "bindfs",
            LayerKind::FuseOverlayfs => "fuse-overlayfs",
            LayerKind::Fast => "fast",
            LayerKind::SeamfsFast => "seamfs-fast",
            LayerKind::SeamfsFastFeed => "seamfs-fast-feed",
            LayerKind::SeamfsFastBaseline => "seamfs-fast-baseline",
        }
    }

    /// Peers come from Debian packages: (program, package).
    pub fn package(self) -> Option<(&'static str, &'static str)> {
        match self {
            LayerKind::Bindfs => Some(("bindfs", "bindfs")),
            LayerKind::FuseOverlayfs => Some(("fuse-overlayfs", "fuse-overlayfs")),
            _ => None,
        }
    }
}

/// A mounted (or native) layer ready for workloads.
#[derive(Debug, Clone)]
pub struct Layer {
    /// Which layer.
    pub kind: LayerKind,
    /// Where git runs: the repo's work tree as this layer shows it.
    pub dir: PathBuf,
    /// The pid of the layer's own FUSE daemon (not the share under it), for its RSS.
    pub daemon: Option<i32>,
    /// How it was set up, for the report.
    pub note: String,
    /// seamd serving the layer's change feed (`seamfs-fast-feed`), ended with the last clone.
    pub seamd: Option<std::sync::Arc<Seamd>>,
}

/// A `seamd run --feed` the bench started on `host`; stopped by its pid and reaped when
/// dropped, as the race rig stops its own (`rig::stop`; it also gets SIGKILL if the bench dies
/// first: `start_seamd`).
#[derive(Debug)]
pub struct Seamd {
    child: Option<std::process::Child>,
    host: PathBuf,
}

impl Drop for Seamd {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            if let Err(e) = crate::race::rig::stop(child, &self.host) {
                eprintln!("[bench] {e}");
            }
        }
    }
}

/// Sets up `kind` under `base` (a fresh dir): copies `repo`, links the big file in, mounts.
pub fn setup(kind: LayerKind, base: &Path, repo: &Path, big: &Path, ttl: f64) -> Result<Layer, LabError> {
    setup_with(kind, base, repo, big, ttl, None)
}

/// `setup`, with the seamfs binary to mount given (`seamfs-fast-baseline` needs one; the other
/// seamfs layers default to the lab's own).
pub fn setup_with(kind: LayerKind, base: &Path, repo: &Path, big: &Path, ttl: f64, bin: Option<&Path>) -> Result<Layer, LabError> {
    let backing = base.join("backing");
    // fuse-overlayfs needs its lower, upper and work dirs side by side on one share mount.
    let copy = if kind == LayerKind::FuseOverlayfs { backing.join("lower") } else { backing.clone() };
    std::fs::create_dir_all(copy.parent().expect("copy has a parent: base/backing[/lower]"))
        .map_err(|e| LabError::new("create dir", &backing, e))?;
    copy_tree(repo, &copy)?;
    let link = copy.join(BIG_NAME);
    std::fs::hard_link(big, &link).map_err(|e| LabError::new(format!("hard link {} to", big.display()), &link, e))?;
    if kind == LayerKind::Native {
        return Ok(Layer { kind, dir: copy, daemon: None, note: "the backing dir itself, on the native disk".into(), seamd: None });
    }
    let share = mkdir(base, "share")?;
    let fast = matches!(kind, LayerKind::Fast | LayerKind::SeamfsFast | LayerKind::SeamfsFastFeed | LayerKind::SeamfsFastBaseline);
    if fast {
        mount_fast_share(&backing, &share, ttl, None)?;
    } else {
        mount_share(&backing, &share, &ShareArgs { ttl: Some(ttl), extra: Vec::new() })?;
    }
    match kind {
        LayerKind::Share => {
            let note = format!("seam-lab share, entry/attr/negative TTL {ttl} s, passthrough, 4 threads");
            return Ok(Layer { kind, dir: share.clone(), daemon: find_pid("seam-lab", &share), note, seamd: None });
        }
        LayerKind::Fast => {
            let note = format!(
                "seam-lab share --fast (virtiofsd-style: O_PATH fd per inode under a budget), entry/attr TTL {ttl} s, no negative entries, passthrough, 4 threads"
            );
            return Ok(Layer { kind, dir: share.clone(), daemon: find_pid("seam-lab", &share), note, seamd: None });
        }
        _ => {}
    }
    let top = mkdir(base, "top")?;
    let t = ttl.to_string();
    match kind {
        LayerKind::Seamfs | LayerKind::SeamfsNosplit | LayerKind::SeamfsFast => seamfs(kind, base, &share, &top, &t, bin),
        LayerKind::SeamfsFastFeed => seamfs_with_feed(base, &backing, &share, &top, &t),
        LayerKind::SeamfsFastBaseline => match bin {
            Some(b) => seamfs(kind, base, &share, &top, &t, Some(b)),
            None => Err(LabError::new("set up the baseline layer", base, "it needs a seamfs binary (seam-lab small --baseline PATH)")),
        },
        LayerKind::Bindfs => bindfs(&share, &top, &t),
        LayerKind::FuseOverlayfs => overlay(base, &share, &top, &t),
        LayerKind::Native | LayerKind::Share | LayerKind::Fast => unreachable!("returned above"),
    }
}

/// seamfs over the share mount; its log path is unique to this layer, which finds its pid.
fn seamfs(kind: LayerKind, base: &Path, share: &Path, top: &Path, t: &str, bin: Option<&Path>) -> Result<Layer, LabError> {
    let log = base.join("seamfs.log");
    let program = match bin {
        Some(b) => b.to_path_buf(),
        None => seamfs_bin()?,
    };
    let mut cmd = Command::new(&program);
    cmd.arg("mount").arg(share).arg(top).args(["--ttl", t]).arg("--log").arg(&log);
    if kind == LayerKind::SeamfsNosplit {
        cmd.arg("--no-index-split");
    }
    if kind == LayerKind::SeamfsFastFeed {
        cmd.arg("--feed").arg(feed_addr(base));
    }
    crate::lab::mounts::run_mount(cmd, "mount seamfs", top)?;
    let split = if kind == LayerKind::SeamfsNosplit { "--no-index-split" } else { "index split on" };
    let under = if kind == LayerKind::Seamfs || kind == LayerKind::SeamfsNosplit { "share" } else { "fast-share" };
    let note = format!("{} --ttl {t} ({split}, default threads) over its own {under} mount", program.display());
    let name = program.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    Ok(Layer { kind, dir: top.to_path_buf(), daemon: find_pid(&name, &log), note, seamd: None })
}

/// The change feed's socket for a layer set up under `base`.
fn feed_addr(base: &Path) -> String {
    format!("unix:{}", base.join("feed.sock").display())
}

/// seamfs with `--feed` over the fast share, and seamd serving the feed from the backing dir
/// (the host's checkout); ready once seamfs logs the feed live.
fn seamfs_with_feed(base: &Path, backing: &Path, share: &Path, top: &Path, t: &str) -> Result<Layer, LabError> {
    let mut layer = seamfs(LayerKind::SeamfsFastFeed, base, share, top, t, None)?;
    let child = crate::race::rig::start_seamd(backing, &base.join("seamd.log"), &["--feed".to_string(), feed_addr(base)])?;
    let seamd = std::sync::Arc::new(Seamd { child: Some(child), host: backing.to_path_buf() });
    crate::race::rig::wait_for_log(&base.join("seamfs.log"), "change feed live", std::time::Duration::from_secs(15))?;
    layer.note = format!("{}, the change feed live (seamd run --feed on the backing dir)", layer.note);
    layer.seamd = Some(seamd);
    Ok(layer)
}

/// bindfs over the share mount, with the same kernel cache lifetimes as the share.
fn bindfs(share: &Path, top: &Path, t: &str) -> Result<Layer, LabError> {
    let mut cmd = Command::new(peer("bindfs", top)?);
    // Single-threaded by default; seamfs and the share serve with several threads.
    cmd.arg("--multithreaded")
        .args(["-o", &format!("entry_timeout={t},attr_timeout={t},negative_timeout={t}")])
        .arg(share)
        .arg(top);
    crate::lab::mounts::run_mount(cmd, "mount bindfs", top)?;
    let note = format!("bindfs --multithreaded, entry/attr/negative timeout {t} s, over its own share mount");
    Ok(Layer { kind: LayerKind::Bindfs, dir: top.to_path_buf(), daemon: find_pid("bindfs", top), note, seamd: None })
}

/// fuse-overlayfs with its upper and work dirs on the same share mount as its lower, so its
/// writes cost what seamfs's do; if it refuses an upper on FUSE, an upper on the native disk
/// (cheaper writes: said in the note).
fn overlay(base: &Path, share: &Path, top: &Path, t: &str) -> Result<Layer, LabError> {
    let exe = peer("fuse-overlayfs", top)?;
    let attempt = |upper: &Path, work: &Path| -> Result<(), LabError> {
        for d in [upper, work] {
            std::fs::create_dir_all(d).map_err(|e| LabError::new("create dir", d, e))?;
        }
        let mut cmd = Command::new(&exe);
        let o = format!(
            "lowerdir={},upperdir={},workdir={},timeout={t},threaded=1",
            share.join("lower").display(),
            upper.display(),
            work.display()
        );
        cmd.args(["-o", &o]).arg(top);
        crate::lab::mounts::run_mount(cmd, "mount fuse-overlayfs", top)
    };
    let dir = top.to_path_buf();
    match attempt(&share.join("upper"), &share.join("work")) {
        Ok(()) => {
            let note =
                format!("fuse-overlayfs threaded=1 timeout={t}: lower, upper and work all on its own share mount");
            Ok(Layer { kind: LayerKind::FuseOverlayfs, daemon: find_pid("fuse-overlayfs", top), dir, note, seamd: None })
        }
        Err(e) => {
            eprintln!("[bench] fuse-overlayfs with its upper on the share failed ({e}); upper on native disk");
            attempt(&base.join("upper-native"), &base.join("work-native"))?;
            let note = format!(
                "fuse-overlayfs threaded=1 timeout={t}: lower on its own share mount, upper and work on the native disk (an upper on the share was refused)"
            );
            Ok(Layer { kind: LayerKind::FuseOverlayfs, daemon: find_pid("fuse-overlayfs", top), dir, note, seamd: None })
        }
    }
}

fn peer(program: &str, mnt: &Path) -> Result<PathBuf, LabError> {
    which(program).ok_or_else(|| LabError::new(format!("find {program}"), mnt, "not installed"))
}

fn mkdir(base: &Path, name: &str) -> Result<PathBuf, LabError> {
    let d = base.join(name);
    std::fs::create_dir(&d).map_err(|e| LabError::new("create dir", &d, e))?;
    Ok(d)
}

/// A copy of the repo: `cp -a` for the work tree and `.git` (keeps modes and nanosecond mtimes,
/// so the index stays valid apart from inode numbers), but hard links for `.git/objects`: object
/// files are immutable (git writes new ones by rename and never edits one), and linking them
/// halves the time to make and to delete each copy.
pub(crate) fn copy_tree(from: &Path, to: &Path) -> Result<(), LabError> {
    let git_from = from.join(".git");
    let git_to = to.join(".git");
    // `to` may exist (empty): the feed bench copies into a stage's own host dir.
    std::fs::create_dir_all(to).map_err(|e| LabError::new("create dir", to, e))?;
    std::fs::create_dir(&git_to).map_err(|e| LabError::new("create dir", &git_to, e))?;
    cp(&["-a"], &children(from, ".git")?, to)?;
    cp(&["-a"], &children(&git_from, "objects")?, &git_to)?;
    cp(&["-al"], &[git_from.join("objects")], &git_to)
}

/// Entries of `dir` except `skip`.
fn children(dir: &Path, skip: &str) -> Result<Vec<PathBuf>, LabError> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| LabError::new("read dir", dir, e))? {
        let e = e.map_err(|e| LabError::new("read dir entry", dir, e))?;
        if e.file_name() != skip {
            out.push(e.path());
        }
    }
    Ok(out)
}

/// `cp FLAGS SOURCES... DIR`.
fn cp(flags: &[&str], sources: &[PathBuf], dir: &Path) -> Result<(), LabError> {
    if sources.is_empty() {
        return Ok(());
    }
    let op = format!("cp {} into", flags.join(" "));
    let out = Command::new("cp")
        .args(flags)
        .args(sources)
        .arg(dir)
        .output()
        .map_err(|e| LabError::new(format!("run {op}"), dir, e))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(LabError::new(op, dir, format!("{}: {}", out.status, err.trim())));
    }
    Ok(())
}


