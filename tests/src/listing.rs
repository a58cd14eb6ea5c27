//! Recursive listings: for failure dumps, and for comparing modes and owners of two trees.

use std::fmt::Write as _;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// One entry of a tree, without anything that legitimately differs between two trees
/// (inode numbers, devices, times).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Node {
    /// Path relative to the root.
    pub rel: PathBuf,
    /// `d`, `f`, `l`, `p` (fifo), `s`, `c`, `b`.
    pub kind: char,
    /// Permission bits (with set-id and sticky bits).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
}

/// The kind letter of a mode.
pub fn kind_char(mode: u32) -> char {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => 'd',
        libc::S_IFLNK => 'l',
        libc::S_IFIFO => 'p',
        libc::S_IFSOCK => 's',
        libc::S_IFCHR => 'c',
        libc::S_IFBLK => 'b',
        _ => 'f',
    }
}

/// Every entry below `root` (not `root` itself), sorted, never following symlinks.
pub fn walk(root: &Path) -> Vec<Node> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let rd = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("list {}: {e}", dir.display()));
        for e in rd {
            let e = e.unwrap_or_else(|err| panic!("list {}: {err}", dir.display()));
            let p = e.path();
            let m = std::fs::symlink_metadata(&p).unwrap_or_else(|err| panic!("lstat {}: {err}", p.display()));
            if m.is_dir() {
                stack.push(p.clone());
            }
            out.push(Node {
                rel: p.strip_prefix(root).expect("below root").to_path_buf(),
                kind: kind_char(m.mode()),
                mode: m.mode() & 0o7777,
                uid: m.uid(),
                gid: m.gid(),
            });
        }
    }
    out.sort();
    out
}

/// A readable listing of at most `max` entries below `root` (for failure reports); errors
/// are written into the listing instead of panicking, since it runs while a test fails.
pub fn dump(root: &Path, max: usize) -> String {
    let mut s = String::new();
    let mut count = 0usize;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let rd = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) => {
                let _ = writeln!(s, "    {}: {e}", dir.display());
                continue;
            }
        };
        let mut names: Vec<_> = rd.flatten().map(|e| e.path()).collect();
        names.sort();
        for p in names.into_iter().rev() {
            count += 1;
            if count > max {
                let _ = writeln!(s, "    ... (more than {max} entries)");
                return s;
            }
            match std::fs::symlink_metadata(&p) {
                Ok(m) => {
                    if m.is_dir() {
                        stack.push(p.clone());
                    }
                    let _ = writeln!(
                        s,
                        "    {}{:04o} {:>5}:{:<5} {:>9} {}",
                        kind_char(m.mode()),
                        m.mode() & 0o7777,
                        m.uid(),
                        m.gid(),
                        m.size(),
                        p.strip_prefix(root).unwrap_or(&p).display()
                    );
                }
                Err(e) => {
                    let _ = writeln!(s, "    ?     {}: {e}", p.display());
                }
            }
        }
    }
    s
}
