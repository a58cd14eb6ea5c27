//! Whether the lower's kernel ever looks again at what it cached.
//!
//! A 9p mount with `cache=loose` (or `cache=fscache`) keeps a name, its inode number, its size
//! and its pages as the guest first saw them until memory pressure evicts them: a file the host
//! replaced by rename reads old forever, a file the host deleted stays listed by `stat`. Measured
//! in a Debian 6.1 guest (docs/lab.md, "The real box"): a read-only open still reaches the
//! server (qemu opens the path anew), so an `O_DIRECT` read returns the host's current bytes,
//! whole, and an open of a deleted name fails with ENOENT; nothing but dropping the guest's
//! dentry cache makes an exclusive create through a stale name possible. seamfs therefore
//! reads git-dir files with `O_DIRECT` there, takes a live file's size from the bytes read, and
//! drops the dentry cache when a name the server's listing no longer has blocks a lock.

use std::os::fd::RawFd;
use std::path::Path;

/// How the lower's kernel caches, as far as seamfs's reads depend on it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LowerCache {
    /// None for a share that revalidates (virtiofs, FUSE, 9p without a loose cache, a local
    /// filesystem), else what was found (`9p cache=loose`): the kernel never looks again at
    /// what it cached.
    pub stale_pages: Option<String>,
    /// The lower is virtiofs, 9p or a local filesystem ([`LINK_ALONE`]): any lookup that
    /// reaches its server is answered with the host's current state, and the link's
    /// `LOOKUP_EXCL` reaches it, so a refresh needs only the link (ADR 0041). Elsewhere a stat
    /// comes first: a FUSE server may answer an ordinary lookup from a cache of its own (sshfs,
    /// the lab's emulator, ADR 0002), and NFS keeps a negative entry through an exclusive
    /// create's revalidation (it leaves that to the server's create), which the stat does not.
    pub link_alone: bool,
}

/// The lower's [`LowerCache`], from mountinfo (a 9p mount reports the host's `f_type`, not its
/// own).
#[cfg(target_os = "linux")]
pub fn of_lower(_dir_fd: RawFd, dir: &Path) -> LowerCache {
    let Some(real) = std::fs::canonicalize(dir).ok() else { return LowerCache::default() };
    let Some(info) = std::fs::read_to_string("/proc/self/mountinfo").ok() else { return LowerCache::default() };
    let Some((fstype, opts)) = mount_of(&info, &real) else { return LowerCache::default() };
    described(&fstype, &opts)
}

/// The default on a macOS host: its lower is its own filesystem, which revalidates, and with no
/// mountinfo to tell a FUSE lower from another, refreshes keep their stat.
#[cfg(not(target_os = "linux"))]
pub fn of_lower(_dir_fd: RawFd, _dir: &Path) -> LowerCache {
    LowerCache::default()
}

/// A [`LowerCache`] from a mount's type and super options.
#[cfg(any(target_os = "linux", test))]
fn described(fstype: &str, opts: &str) -> LowerCache {
    let stale_pages =
        (fstype == "9p").then(|| cache_mode(opts)).flatten().filter(|m| *m == "loose" || *m == "fscache").map(|m| format!("9p cache={m}"));
    LowerCache { stale_pages, link_alone: LINK_ALONE.contains(&fstype) }
}

/// The lower filesystems a refresh makes the link alone on (ADR 0041): the kernel's share
/// clients whose server is the host's filesystem, and local filesystems, which cache nothing
/// of another kernel's.
#[cfg(any(target_os = "linux", test))]
const LINK_ALONE: &[&str] = &["virtiofs", "9p", "ext4", "ext3", "ext2", "xfs", "btrfs", "tmpfs", "overlay", "f2fs", "bcachefs", "zfs"];

/// The filesystem type and super options of the mount `path` is on.
#[cfg(any(target_os = "linux", test))]
fn mount_of(info: &str, path: &Path) -> Option<(String, String)> {
    crate::mountinfo::containing_in(&crate::mountinfo::parse(info), path).map(|m| (m.fstype, m.options))
}

/// 9p's cache mode among its super options: `cache=loose` in newer kernels, a bare `loose` (or
/// `fscache`, `mmap`) in 6.1's.
#[cfg(any(target_os = "linux", test))]
fn cache_mode(opts: &str) -> Option<&str> {
    opts.split(',').find_map(|o| o.strip_prefix("cache=").or(["loose", "fscache", "mmap", "none"].into_iter().find(|m| *m == o)))
}

/// Drops the guest kernel's unused dentries and inodes (`/proc/sys/vm/drop_caches`, 2): the only
/// way found to make a 9p `cache=loose` mount forget a name the host removed. Costly for every
/// mount of the guest, so called only when such a name blocks an exclusive create.
pub fn drop_dentries() -> std::io::Result<()> {
    if cfg!(not(target_os = "linux")) {
        return Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "drop the dentry cache: not available on this host"));
    }
    std::fs::write("/proc/sys/vm/drop_caches", "2")
}

impl crate::lower::Lower {
    /// Whether the lower's server has `rel`: a stat, or on a lower that never revalidates (where
    /// a name the host removed still stats) the server's listing of its directory.
    pub fn server_has(&self, rel: &std::ffi::CStr) -> bool {
        if self.stale_pages().is_none() {
            return self.stat(rel).is_ok();
        }
        let bytes = rel.to_bytes();
        let (dir, name) = match bytes.iter().rposition(|&b| b == b'/') {
            Some(i) => (&bytes[..i], &bytes[i + 1..]),
            None => (&b""[..], bytes),
        };
        let dir = std::ffi::CString::new(dir).expect("a part of a C string has no NUL");
        match self.list(&dir) {
            Ok(names) => names.iter().any(|(n, _)| std::os::unix::ffi::OsStrExt::as_bytes(n.as_os_str()) == name),
            Err(_) => self.stat(rel).is_ok(),
        }
    }

    /// An exclusive create of `rel` met EEXIST: on a lower that never revalidates, when the
    /// server no longer has the name (the host removed it), drops the guest's dentry cache so
    /// the next create reaches the server. True when it did (worth one more try).
    pub fn forget_stale_name(&self, rel: &std::ffi::CStr) -> bool {
        if self.stale_pages().is_none() || self.server_has(rel) {
            return false;
        }
        self.forget_dirs();
        match drop_dentries() {
            Ok(()) => {
                tracing::debug!(name = ?rel, "a name the host removed blocked a create: dropped the guest's dentry cache");
                true
            }
            Err(e) => {
                tracing::warn!(name = ?rel, error = %e, "a name the host removed blocks a create, and the dentry cache could not be dropped");
                false
            }
        }
    }

    /// The file just made at `made` has the inode number the lower still gives `other`: on a
    /// lower that never revalidates, `other`'s entry is stale (its file is gone and the host
    /// reused the number), and every lookup of it would give the new file's number, so the box
    /// would see one file under both names (ADR 0047). Drops the guest's dentry cache so the next
    /// lookup of `other` reaches the server.
    pub fn forget_stale_number(&self, made: &std::ffi::CStr, other: &std::ffi::CStr) {
        if self.stale_pages().is_none() {
            return;
        }
        self.forget_dirs();
        match drop_dentries() {
            Ok(()) => tracing::info!(made = ?made, other = ?other, "a new file has the inode number the guest still gives another name: dropped the guest's dentry cache"),
            Err(e) => tracing::warn!(made = ?made, other = ?other, error = %e, "a new file has the inode number the guest still gives another name, and the dentry cache could not be dropped: the two names may read as one file until it is"),
        }
    }
}

/// Reads `fd` (from `Lower::open_regular`, O_DIRECT on such a lower) to its end; the number of
/// bytes (the size the lower's cached inode may not know).
pub fn direct_len(fd: std::os::fd::OwnedFd) -> std::io::Result<u64> {
    crate::short_read::len_until_short(std::fs::File::from(fd), 64 << 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "22 1 0:21 / / rw - ext4 /dev/vda rw\n\
        30 22 0:40 / /share rw,relatime - 9p share rw,access=client,msize=512000,trans=virtio,cache=loose\n\
        31 30 0:41 / /share/a\\040b rw - fuse.seamfs seamfs rw\n";

    #[test]
    fn the_lower_mount_is_the_longest_prefix() {
        assert_eq!(mount_of(INFO, Path::new("/share/x/y")).map(|m| m.0), Some("9p".into()));
        assert_eq!(mount_of(INFO, Path::new("/share/a b/c")).map(|m| m.0), Some("fuse.seamfs".into()));
        assert_eq!(mount_of(INFO, Path::new("/sharex")).map(|m| m.0), Some("ext4".into()));
        let (_, opts) = mount_of(INFO, Path::new("/share")).unwrap();
        assert_eq!(cache_mode(&opts), Some("loose"));
        assert_eq!(described("9p", &opts), LowerCache { stale_pages: Some("9p cache=loose".into()), link_alone: true });
        assert_eq!(cache_mode("rw,trans=virtio"), None);
        assert_eq!(cache_mode("rw,dirsync,loose,access=client,msize=512000,trans=virtio"), Some("loose"));
    }

    #[test]
    fn a_local_directory_revalidates() {
        let d = std::env::temp_dir();
        let f = std::fs::File::open(&d).unwrap();
        assert_eq!(of_lower(std::os::fd::AsRawFd::as_raw_fd(&f), &d).stale_pages, None);
    }

    #[test]
    fn only_a_kernel_share_or_a_local_lower_drops_the_stat_before_the_link() {
        for other in ["fuse", "fuseblk", "fuse.seam-lab-share", "fuse.sshfs", "nfs", "nfs4", "cifs", "unknownfs"] {
            assert!(!described(other, "rw").link_alone, "{other}");
        }
        for kernel in ["virtiofs", "9p", "ext4", "xfs", "btrfs", "tmpfs", "overlay"] {
            assert!(described(kernel, "rw").link_alone, "{kernel}");
        }
        assert_eq!(described("virtiofs", "rw").stale_pages, None);
    }
}
