//! `seam-lab vm`: the real box. A qemu guest with a stock Debian 6.1 kernel (no FUSE passthrough)
//! sees the host's backing directory over real virtiofs (virtiofsd, with or without file handles)
//! or real 9p (`cache=loose` or `cache=mmap`); box actors run in the guest through
//! `seam-box-agent` over a virtio-serial port, host actors on the host, and the race scenarios
//! judge both with the same code as `seam-lab race`.
//!
//! - [`setup`]: the cache (packages, kernel, virtiofsd), once.
//! - [`initramfs`]: the guest's root, rebuilt per run around the static binaries under test.
//! - [`guest`]: one booted guest and the agent's channel.
//! - [`race`]: `vm race`; [`bench`]: `vm bench`; [`counts`]: `vm counts`.

pub mod bench;
pub mod counts;
pub mod feed;
pub mod cpio;
pub mod guest;
pub mod initramfs;
pub mod race;
pub mod setup;

use std::path::{Path, PathBuf};

use crate::lab::LabError;

/// The default cache directory.
pub const DEFAULT_CACHE: &str = "/var/cache/seam-lab";

/// How the guest sees the host's directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareMode {
    /// virtiofsd with file handles (a Linux host): coherent for renames.
    Virtiofs,
    /// virtiofsd `--inode-file-handles=never`: what a macOS host amounts to.
    VirtiofsNofh,
    /// 9p with `cache=loose` (the seed's Linux and WSL2 hosts).
    NinepLoose,
    /// 9p with `cache=mmap`.
    NinepMmap,
}

impl ShareMode {
    /// Every mode, in the order `--share all` runs them.
    pub const ALL: [ShareMode; 4] = [ShareMode::Virtiofs, ShareMode::VirtiofsNofh, ShareMode::NinepLoose, ShareMode::NinepMmap];

    /// The command-line name (also the guest's `seam.share=`).
    pub fn name(self) -> &'static str {
        match self {
            ShareMode::Virtiofs => "virtiofs",
            ShareMode::VirtiofsNofh => "virtiofs-nofh",
            ShareMode::NinepLoose => "9p-loose",
            ShareMode::NinepMmap => "9p-mmap",
        }
    }

    /// Served by virtiofsd.
    pub fn is_virtiofs(self) -> bool {
        matches!(self, ShareMode::Virtiofs | ShareMode::VirtiofsNofh)
    }
}

impl std::str::FromStr for ShareMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        ShareMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("unknown share mode {s:?}: expected virtiofs, virtiofs-nofh, 9p-loose or 9p-mmap"))
    }
}

/// The unpacked guest kernel.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// The bootable image.
    pub image: PathBuf,
    /// `/lib/modules/RELEASE` of the unpacked package.
    pub modules: PathBuf,
    /// The release (`6.1.0-57-amd64`).
    pub release: String,
}

/// The cache directory `vm setup` fills.
#[derive(Debug, Clone)]
pub struct Cache {
    /// Its root.
    pub root: PathBuf,
}

impl Cache {
    /// The cache at `root`.
    pub fn new(root: &Path) -> Cache {
        Cache { root: root.to_path_buf() }
    }

    /// The kernel `vm setup` unpacked.
    pub fn kernel(&self) -> Result<Kernel, LabError> {
        let kroot = self.root.join("kernel");
        let boot = kroot.join("boot");
        let not_set_up = |why: String| LabError::new("find the guest kernel", &boot, format!("{why}: run `seam-lab vm setup --cache {}`", self.root.display()));
        let entries = std::fs::read_dir(&boot).map_err(|e| not_set_up(e.to_string()))?;
        let image = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("vmlinuz-")))
            .ok_or_else(|| not_set_up("no vmlinuz-*".into()))?;
        let release = image.file_name().and_then(|n| n.to_str()).unwrap_or("").trim_start_matches("vmlinuz-").to_string();
        let modules = kroot.join("lib/modules").join(&release);
        if !modules.join("kernel").is_dir() {
            return Err(not_set_up(format!("no {}", modules.join("kernel").display())));
        }
        Ok(Kernel { image, modules, release })
    }

    /// virtiofsd as `vm setup` builds it.
    pub fn virtiofsd(&self) -> PathBuf {
        self.root.join("virtiofsd/bin/virtiofsd")
    }
}

/// Where `cargo build-static` puts its executables, beside this binary's target dir
/// (`target/release/seam-lab` → `target/x86_64-unknown-linux-gnu/release/`).
pub fn static_dir() -> Result<PathBuf, LabError> {
    let bin = crate::lab::bin_dir()?;
    let target = bin.parent().ok_or_else(|| LabError::new("locate target dir", &bin, "no parent"))?;
    Ok(target.join("x86_64-unknown-linux-gnu/release"))
}
