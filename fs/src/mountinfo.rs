//! What is mounted where, from `/proc/self/mountinfo`, and whether it is seamfs.

use std::path::{Path, PathBuf};

/// The kernel type of a seamfs mount (`fuse.` + the subtype seamfs mounts with).
pub const SEAMFS_TYPE: &str = "fuse.seamfs";

/// One mount.
#[derive(Debug, Clone, PartialEq)]
pub struct MountEntry {
    /// Where it is mounted.
    pub target: PathBuf,
    /// Kernel type (`fuse.seamfs`, `virtiofs`, `9p`, `tmpfs`...).
    pub fstype: String,
    /// Source (`seamfs:<lower>` for seamfs).
    pub source: String,
    /// `major:minor` of the superblock (a FUSE mount's minor is its connection number).
    pub dev: String,
    /// The superblock's options (`cache=loose`, `user_id=0`...).
    pub options: String,
}

impl MountEntry {
    /// True for a seamfs mount; also one made before seamfs mounted as `fuse.seamfs` (plain
    /// `fuse` with a `seamfs:` source), so a box upgraded while mounted can still clear it.
    pub fn is_seamfs(&self) -> bool {
        self.fstype == SEAMFS_TYPE || (self.fstype == "fuse" && self.source.starts_with("seamfs:"))
    }
}

/// Undoes the kernel's octal escapes (`\040` for a space, `\012`, `\134`...).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses one mountinfo line: `id parent dev root target opts [tags...] - type source super`.
fn parse_line(line: &str) -> Option<MountEntry> {
    let f: Vec<&str> = line.split(' ').collect();
    let dash = f.iter().position(|x| *x == "-")?;
    Some(MountEntry {
        target: PathBuf::from(unescape(f.get(4)?)),
        dev: f.get(2)?.to_string(),
        fstype: unescape(f.get(dash + 1)?),
        source: unescape(f.get(dash + 2)?),
        options: f.get(dash + 3).map(|o| unescape(o)).unwrap_or_default(),
    })
}

/// The mounts in mountinfo text, in mount order (unparsable lines skipped).
pub fn parse(text: &str) -> Vec<MountEntry> {
    text.lines().filter_map(parse_line).collect()
}

/// Every mount this process sees, in mount order.
pub fn mounts() -> std::io::Result<Vec<MountEntry>> {
    Ok(parse(&std::fs::read_to_string("/proc/self/mountinfo")?))
}

/// The topmost mount at exactly `path` (absolute, no trailing slash), if any.
pub fn mount_at(path: &Path) -> Option<MountEntry> {
    mounts().ok()?.into_iter().rev().find(|m| m.target == path)
}

/// The mount `path` (absolute, canonical) is on: the topmost one at the longest prefix.
pub fn containing(path: &Path) -> Option<MountEntry> {
    containing_in(&mounts().ok()?, path)
}

/// [`containing`] among `all` (in mount order: the kernel stacks later mounts on top).
pub fn containing_in(all: &[MountEntry], path: &Path) -> Option<MountEntry> {
    let best = all.iter().filter(|m| path.starts_with(&m.target)).map(|m| m.target.components().count()).max()?;
    all.iter().rev().find(|m| path.starts_with(&m.target) && m.target.components().count() == best).cloned()
}

/// `path` made absolute without touching it (a dead mount cannot be stat'ed): the parent is
/// resolved when it can be, the last name is kept as given.
pub fn absolute(path: &Path) -> PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    match (abs.parent(), abs.file_name()) {
        (Some(parent), Some(name)) => std::fs::canonicalize(parent).map(|p| p.join(name)).unwrap_or(abs),
        _ => abs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lines_and_tells_seamfs() {
        let l = "36 25 0:53 / /work/a\\040b rw,relatime shared:1 - fuse.seamfs seamfs:/share rw,user_id=0";
        let m = parse_line(l).unwrap();
        assert_eq!(m.target, Path::new("/work/a b"));
        assert_eq!((m.fstype.as_str(), m.source.as_str(), m.dev.as_str()), ("fuse.seamfs", "seamfs:/share", "0:53"));
        assert_eq!(m.options, "rw,user_id=0");
        assert!(m.is_seamfs());
        let old = parse_line("1 2 0:9 / /x rw - fuse seamfs:/y rw").unwrap();
        assert!(old.is_seamfs());
        let other = parse_line("1 2 0:9 / /x rw - fuse seam-share:/y rw").unwrap();
        assert!(!other.is_seamfs());
        assert!(parse_line("garbage").is_none());
        assert_eq!(unescape("tab\\011x\\134"), "tab\tx\\");
    }

    #[test]
    fn absolute_keeps_the_last_name_and_resolves_the_parent() {
        assert_eq!(absolute(Path::new("/tmp/../tmp/nope")), Path::new("/tmp/nope"));
        assert!(mount_at(Path::new("/")).is_some());
        assert!(containing(Path::new("/proc/self")).is_some_and(|m| m.fstype == "proc"));
    }
}
