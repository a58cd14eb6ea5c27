//! The guest's root filesystem, as an initramfs: busybox, the host's git and the libraries it
//! links, the kernel modules the shares need, the static seamfs, seam-git and agent under test,
//! the box bootstrap script users install (`dist/box/seamfs-bootstrap`), and an init that loads
//! the modules, mounts the share as the kernel command line says and runs the agent.

use std::collections::BTreeSet;

use std::path::{Path, PathBuf};
use std::process::Command;

use super::cpio::Cpio;
use super::Kernel;
use crate::lab::LabError;

/// Modules the guest loads (their dependencies come from modules.dep).
const MODULES: [&str; 6] = ["virtio_pci", "virtio_console", "fuse", "virtiofs", "9pnet_virtio", "9p"];

/// The box bootstrap script, as shipped.
const BOOTSTRAP: &str = include_str!("../../../dist/box/seamfs-bootstrap");

/// The guest's init: mounts, modules, the share (`seam.share=` on the command line), the agent;
/// when the agent exits, the share is unmounted and the guest powers off.
const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/usr/local/sbin:/usr/local/bin:/usr/bin:/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
while read -r m; do insmod "$m" || echo "seam-init: insmod $m failed"; done < /etc/seam-modules
share=$(sed -n 's/.*seam\.share=\([^ ]*\).*/\1/p' /proc/cmdline)
mkdir -p /share
case "$share" in
  virtiofs|virtiofs-nofh) mount -t virtiofs share /share ;;
  9p-loose) mount -t 9p -o trans=virtio,version=9p2000.L,cache=loose,msize=512000 share /share ;;
  9p-mmap) mount -t 9p -o trans=virtio,version=9p2000.L,cache=mmap,msize=512000 share /share ;;
  *) false ;;
esac && echo "seam-init: share $share mounted on /share" || echo "seam-init: could not mount share '$share'"
# udev's /dev/virtio-ports/NAME links (the agent's and the change feed's ports).
mkdir -p /dev/virtio-ports
for p in /sys/class/virtio-ports/*; do [ -e "$p/name" ] && ln -sf "/dev/${p##*/}" "/dev/virtio-ports/$(cat "$p/name")"; done
seam-box-agent
echo "seam-init: agent exited $?"
sync
umount /share || echo "seam-init: could not unmount /share"
poweroff -f
"#;

/// Builds the initramfs at `to` from the static binaries in `bins`.
pub fn build(kernel: &Kernel, bins: &Path, to: &Path) -> Result<(), LabError> {
    build_with(kernel, bins, &[], to)
}

/// `build`, with more static binaries: (name in `/usr/local/bin`, file on the host).
pub fn build_with(kernel: &Kernel, bins: &Path, extra: &[(&str, &Path)], to: &Path) -> Result<(), LabError> {
    build_with_tools(kernel, bins, extra, &[], to)
}

/// `build_with`, with host tools (and the libraries they link) at their host paths: a
/// diagnostic such as `strace` for `vm counts --syscalls`.
pub fn build_with_tools(kernel: &Kernel, bins: &Path, extra: &[(&str, &Path)], tools: &[&Path], to: &Path) -> Result<(), LabError> {
    let mut a = Cpio::default();
    for d in ["bin", "sbin", "dev", "proc", "sys", "tmp", "root", "etc", "share", "usr", "usr/bin", "usr/local", "usr/local/bin", "usr/local/sbin", "usr/lib", "usr/lib/git-core", "lib", "lib64", "lib/modules"] {
        a.dir(d);
    }
    a.copy("bin/busybox", Path::new("/bin/busybox"))?;
    a.file("init", 0o755, INIT.as_bytes());
    a.file("etc/passwd", 0o644, b"root:x:0:0:root:/root:/bin/sh\n");
    a.file("etc/group", 0o644, b"root:x:0:\n");
    a.file("usr/local/sbin/seamfs-bootstrap", 0o755, BOOTSTRAP.as_bytes());
    for b in ["seamfs", "seam-git", "seam-box-agent"] {
        let p = bins.join(b);
        check_static(&p)?;
        a.copy(&format!("usr/local/bin/{b}"), &p)?;
    }
    for (name, p) in extra {
        check_static(p)?;
        a.copy(&format!("usr/local/bin/{name}"), p)?;
    }
    git(&mut a)?;
    let mut dirs = BTreeSet::new();
    for t in tools {
        with_libraries(&mut a, t, &mut dirs)?;
    }
    modules(&mut a, kernel)?;
    a.finish(to)
}

/// Refuses a binary that needs a dynamic loader: the guest must run exactly the file a box
/// image would ship (`cargo build-static`).
fn check_static(p: &Path) -> Result<(), LabError> {
    let data = std::fs::read(p).map_err(|e| LabError::new("read", p, format!("{e}: build it with `cargo build-static`")))?;
    if interp(&data).ok_or_else(|| LabError::new("read ELF header", p, "not a 64-bit ELF executable"))? {
        return Err(LabError::new("check static", p, "dynamically linked (has PT_INTERP): build it with `cargo build-static`"));
    }
    Ok(())
}

/// Whether a 64-bit little-endian ELF file has a PT_INTERP header (None: not such a file).
pub fn interp(d: &[u8]) -> Option<bool> {
    if d.len() < 64 || &d[..4] != b"\x7fELF" || d[4] != 2 || d[5] != 1 {
        return None;
    }
    let u16_at = |o: usize| u16::from_le_bytes([d[o], d[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(d[32..40].try_into().ok()?) as usize;
    let (phentsize, phnum) = (u16_at(54), u16_at(56));
    (0..phnum).try_fold(false, |found, i| {
        let o = phoff.checked_add(i * phentsize)?;
        let t = u32::from_le_bytes(d.get(o..o + 4)?.try_into().ok()?);
        Some(found || t == 3)
    })
}

/// The host's git and every library `ldd` names, at the same paths.
fn git(a: &mut Cpio) -> Result<(), LabError> {
    let git = Path::new("/usr/bin/git");
    a.symlink("usr/lib/git-core/git", "/usr/bin/git");
    with_libraries(a, git, &mut BTreeSet::new())
}

/// A host executable at its own path, and every library `ldd` names, at the same paths.
/// `dirs` are the directories already in the archive.
fn with_libraries(a: &mut Cpio, exe: &Path, dirs: &mut BTreeSet<PathBuf>) -> Result<(), LabError> {
    a.copy(exe.to_string_lossy().trim_start_matches('/'), exe)?;
    let out = Command::new("ldd").arg(exe).output().map_err(|e| LabError::new("ldd", exe, e))?;
    let text = String::from_utf8_lossy(&out.stdout);
    for lib in text.split_whitespace().filter(|w| w.starts_with('/')) {
        let p = PathBuf::from(lib);
        // Follow the soname link so the archive holds the library itself under the name asked.
        let real = std::fs::canonicalize(&p).map_err(|e| LabError::new("resolve library", &p, e))?;
        if let Some(parent) = p.parent() {
            let mut acc = PathBuf::new();
            for c in parent.components().skip(1) {
                acc.push(c);
                if dirs.insert(acc.clone()) {
                    a.dir(&acc.to_string_lossy());
                }
            }
        }
        a.copy(&p.to_string_lossy(), &real)?;
    }
    Ok(())
}

/// The wanted modules and their dependencies (from each module's own `depends=` field: the
/// package ships no modules.dep, and the host may have no depmod), in load order, with a list
/// `/etc/seam-modules` the init loads with insmod.
fn modules(a: &mut Cpio, k: &Kernel) -> Result<(), LabError> {
    let mut index = std::collections::HashMap::new();
    index_modules(&k.modules.join("kernel"), &mut index)?;
    let mut order: Vec<String> = Vec::new();
    for name in MODULES {
        add_module(name, &index, &mut order, 0)?;
    }
    let base = format!("lib/modules/{}", k.release);
    a.dir(&base);
    let mut list = String::new();
    for name in &order {
        let path = &index[name];
        let at = format!("{base}/{name}.ko");
        a.copy(&at, path)?;
        list.push_str(&format!("/{at}\n"));
    }
    a.file("etc/seam-modules", 0o644, list.as_bytes());
    Ok(())
}

/// A module's name as the kernel compares them (`-` and `_` are one).
fn module_name(file: &str) -> String {
    file.trim_end_matches(".ko").replace('-', "_")
}

fn index_modules(dir: &Path, index: &mut std::collections::HashMap<String, PathBuf>) -> Result<(), LabError> {
    for e in std::fs::read_dir(dir).map_err(|e| LabError::new("list modules", dir, e))? {
        let p = e.map_err(|e| LabError::new("list modules", dir, e))?.path();
        if p.is_dir() {
            index_modules(&p, index)?;
        } else if let Some(n) = p.file_name().and_then(|n| n.to_str()).filter(|n| n.ends_with(".ko")) {
            index.insert(module_name(n), p.clone());
        }
    }
    Ok(())
}

fn add_module(name: &str, index: &std::collections::HashMap<String, PathBuf>, order: &mut Vec<String>, depth: usize) -> Result<(), LabError> {
    let name = module_name(name);
    if order.contains(&name) {
        return Ok(());
    }
    let path = index.get(&name).ok_or_else(|| LabError::new("find kernel module", Path::new(&name), "not in the kernel package"))?;
    if depth > 16 {
        return Err(LabError::new("resolve module dependencies", path, "dependency chain deeper than 16"));
    }
    let data = std::fs::read(path).map_err(|e| LabError::new("read module", path, e))?;
    for dep in depends(&data) {
        add_module(&dep, index, order, depth + 1)?;
    }
    order.push(name);
    Ok(())
}

/// The `depends=` field of a module's `.modinfo` (NUL-separated `key=value` strings).
fn depends(data: &[u8]) -> Vec<String> {
    let key = b"\0depends=";
    let Some(at) = data.windows(key.len()).position(|w| w == key) else { return Vec::new() };
    let rest = &data[at + key.len()..];
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    String::from_utf8_lossy(&rest[..end]).split(',').filter(|d| !d.is_empty()).map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 header with one program header of type `ptype`.
    fn elf(ptype: u32) -> Vec<u8> {
        let mut d = vec![0u8; 64 + 56];
        d[..4].copy_from_slice(b"\x7fELF");
        d[4] = 2;
        d[5] = 1;
        d[32..40].copy_from_slice(&64u64.to_le_bytes());
        d[54..56].copy_from_slice(&56u16.to_le_bytes());
        d[56..58].copy_from_slice(&1u16.to_le_bytes());
        d[64..68].copy_from_slice(&ptype.to_le_bytes());
        d
    }

    #[test]
    fn a_loader_header_marks_a_dynamic_executable() {
        assert_eq!(interp(&elf(3)), Some(true), "PT_INTERP");
        assert_eq!(interp(&elf(1)), Some(false), "PT_LOAD only");
        assert_eq!(interp(b"#!/bin/sh\n"), None);
        let mut cut = elf(3);
        cut.truncate(66);
        assert_eq!(interp(&cut), None, "a header table past the end of the file");
        // This test binary links libc dynamically.
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert_eq!(interp(&me), Some(true));
    }

    #[test]
    fn module_dependencies_come_from_modinfo() {
        let data = b"junk\0license=GPL\0depends=netfs,9pnet\0vermagic=6.1\0";
        assert_eq!(depends(data), vec!["netfs".to_string(), "9pnet".to_string()]);
        assert!(depends(b"\0depends=\0").is_empty());
        assert!(depends(b"no modinfo here").is_empty());
        assert_eq!(module_name("virtio-rng.ko"), "virtio_rng");
    }
}
