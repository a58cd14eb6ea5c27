//! The manifest of one park commit: what was parked (or logged as not parked), one line each.
//!
//! Plain text so `git show refs/seam/parked:manifest` reads it. Written by seamfs, read by the
//! box and the host CLIs, which trust none of it: every line is parsed strictly and a path is
//! only ever used after `safe_path` (no `..`, no absolute path, nothing in a `.git`).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// First line of every manifest.
pub const HEADER: &str = "seam-park 1";

/// The largest manifest a reader accepts (a count cap of 10,000 lines is well under it).
pub const MAX_MANIFEST: usize = 16 << 20;

/// What destroyed the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// unlink(2).
    Unlink,
    /// truncate(2) / ftruncate(2) to a smaller size.
    Truncate,
    /// open(2) with O_TRUNC of an existing file.
    OpenTrunc,
    /// rename(2) onto the file.
    RenameOver,
}

impl Op {
    /// The name written in the manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Unlink => "unlink",
            Op::Truncate => "truncate",
            Op::OpenTrunc => "open-trunc",
            Op::RenameOver => "rename-over",
        }
    }

    fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "unlink" => Op::Unlink,
            "truncate" => Op::Truncate,
            "open-trunc" => Op::OpenTrunc,
            "rename-over" => Op::RenameOver,
            _ => return None,
        })
    }
}

/// Whether the bytes were kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// In the tree as entry `f<index>`.
    Parked,
    /// Over the size cap: logged only.
    TooBig,
    /// Over the burst's count cap: logged only.
    OverCap,
    /// Reading or writing failed: logged only.
    Failed,
}

impl Kept {
    /// The name written in the manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            Kept::Parked => "parked",
            Kept::TooBig => "too-big",
            Kept::OverCap => "over-cap",
            Kept::Failed => "failed",
        }
    }

    fn parse(s: &str) -> Option<Kept> {
        Some(match s {
            "parked" => Kept::Parked,
            "too-big" => Kept::TooBig,
            "over-cap" => Kept::OverCap,
            "failed" => Kept::Failed,
            _ => return None,
        })
    }
}

/// One manifest line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Whether the bytes are in the tree.
    pub kept: Kept,
    /// The blob's hex id (empty unless parked).
    pub blob: String,
    /// The file's mode (`st_mode` permission bits and type).
    pub mode: u32,
    /// Its size in bytes.
    pub size: u64,
    /// When, in milliseconds since the epoch.
    pub time_ms: u64,
    /// What destroyed it.
    pub op: Op,
    /// The box process.
    pub pid: u32,
    /// The linked worktree's name (its git dir's last component), or "." for the main one.
    pub tree: String,
    /// The path relative to its work tree, as bytes.
    pub path: Vec<u8>,
    /// The box process's command line, arguments joined by spaces.
    pub cmd: Vec<u8>,
}

/// A manifest line that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong with it.
    pub why: String,
}

impl std::fmt::Display for BadLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "manifest line {}: {}", self.line, self.why)
    }
}

/// Encodes records as a manifest.
pub fn encode(records: &[Record]) -> Vec<u8> {
    let mut out = format!("{HEADER}\n").into_bytes();
    for r in records {
        out.extend_from_slice(
            format!(
                "{}\t{}\t{:o}\t{}\t{}\t{}\t{}\t",
                r.kept.as_str(),
                if r.blob.is_empty() { "-" } else { &r.blob },
                r.mode,
                r.size,
                r.time_ms,
                r.op.as_str(),
                r.pid
            )
            .as_bytes(),
        );
        escape_into(r.tree.as_bytes(), &mut out);
        out.push(b'\t');
        escape_into(&r.path, &mut out);
        out.push(b'\t');
        escape_into(&r.cmd, &mut out);
        out.push(b'\n');
    }
    out
}

/// Parses a manifest: every line must be well formed (a reader refuses the whole commit
/// otherwise, naming the line).
pub fn parse(bytes: &[u8]) -> Result<Vec<Record>, BadLine> {
    if bytes.len() > MAX_MANIFEST {
        return Err(BadLine { line: 0, why: format!("{} bytes, more than {MAX_MANIFEST}", bytes.len()) });
    }
    let mut lines = bytes.split(|&b| b == b'\n');
    if lines.next() != Some(HEADER.as_bytes()) {
        return Err(BadLine { line: 1, why: format!("not a `{HEADER}` manifest") });
    }
    let mut out = Vec::new();
    for (i, line) in lines.enumerate() {
        if line.is_empty() {
            continue;
        }
        out.push(parse_line(line).map_err(|why| BadLine { line: i + 2, why })?);
    }
    Ok(out)
}

fn parse_line(line: &[u8]) -> Result<Record, String> {
    let f: Vec<&[u8]> = line.split(|&b| b == b'\t').collect();
    if f.len() != 10 {
        return Err(format!("{} fields, expected 10", f.len()));
    }
    let text = |i: usize| std::str::from_utf8(f[i]).map_err(|_| format!("field {} is not text", i + 1));
    let num = |i: usize| text(i)?.parse::<u64>().map_err(|_| format!("field {} is not a number", i + 1));
    let kept = Kept::parse(text(0)?).ok_or("unknown status")?;
    let blob = match text(1)? {
        "-" => String::new(),
        h if (h.len() == 40 || h.len() == 64) && h.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) => h.to_string(),
        _ => return Err("bad blob id".into()),
    };
    if (kept == Kept::Parked) == blob.is_empty() {
        return Err("a parked entry needs a blob id, and only a parked one has one".into());
    }
    let mode = u32::from_str_radix(text(2)?, 8).map_err(|_| "bad mode")?;
    let op = Op::parse(text(5)?).ok_or("unknown op")?;
    let pid = u32::try_from(num(6)?).map_err(|_| "bad pid")?;
    let tree = String::from_utf8(unescape(f[7])?).map_err(|_| "worktree name is not text")?;
    Ok(Record { kept, blob, mode, size: num(3)?, time_ms: num(4)?, op, pid, tree, path: unescape(f[8])?, cmd: unescape(f[9])? })
}

/// Escapes tab, newline, backslash and control bytes as `\xNN`, so a field stays on its line.
fn escape_into(bytes: &[u8], out: &mut Vec<u8>) {
    for &b in bytes {
        if b < 0x20 || b == b'\\' || b == 0x7f {
            out.extend_from_slice(format!("\\x{b:02x}").as_bytes());
        } else {
            out.push(b);
        }
    }
}

fn unescape(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            let hex = bytes.get(i + 1..i + 4).filter(|h| h[0] == b'x').ok_or("bad escape")?;
            let s = std::str::from_utf8(&hex[1..]).map_err(|_| "bad escape")?;
            out.push(u8::from_str_radix(s, 16).map_err(|_| "bad escape")?);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// The path a record names, if it is safe to write below a work tree: relative, no `.`/`..`
/// component, no NUL, not empty, nothing inside a `.git`. Anything else is the box's word only.
pub fn safe_path(path: &[u8]) -> Result<PathBuf, String> {
    if path.is_empty() || path.contains(&0) {
        return Err("empty path or a NUL byte".into());
    }
    let p = Path::new(OsStr::from_bytes(path));
    for c in p.components() {
        match c {
            Component::Normal(n) if n.as_bytes().eq_ignore_ascii_case(b".git") => return Err("a path inside a .git".into()),
            Component::Normal(_) => {}
            Component::CurDir if path.starts_with(b"./") => return Err("a `.` component".into()),
            _ => return Err("an absolute path or a `..` component".into()),
        }
    }
    if path.ends_with(b"/") || path.windows(2).any(|w| w == b"//") || path.split(|&b| b == b'/').any(|c| c == b".") {
        return Err("not a plain path".into());
    }
    Ok(p.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(path: &[u8]) -> Record {
        Record {
            kept: Kept::Parked,
            blob: "a".repeat(40),
            mode: 0o100644,
            size: 3,
            time_ms: 1,
            op: Op::Unlink,
            pid: 7,
            tree: ".".into(),
            path: path.to_vec(),
            cmd: b"git checkout -- .".to_vec(),
        }
    }

    #[test]
    fn round_trips_odd_bytes() {
        let r = vec![rec(b"a\tb\nc\\d\xff"), Record { kept: Kept::TooBig, blob: String::new(), ..rec(b"x") }];
        assert_eq!(parse(&encode(&r)).unwrap(), r);
    }

    #[test]
    fn refuses_malformed_lines() {
        assert!(parse(b"nope\n").is_err());
        assert!(parse(b"seam-park 1\nparked\t-\t644\t1\t1\tunlink\t1\t.\tx\tc\n").is_err());
        assert!(parse(b"seam-park 1\nparked\tzz\t644\t1\t1\tunlink\t1\t.\tx\tc\n").is_err());
        assert!(parse(b"seam-park 1\nparked\t-\t644\n").is_err());
    }

    #[test]
    fn safe_paths_only() {
        assert!(safe_path(b"src/a.rs").is_ok());
        for bad in [&b"../x"[..], b"/etc/passwd", b"a/../../x", b".git/config", b"a/.GIT/hooks/x", b"", b"./a", b"a//b", b"a/./b", b"a/"] {
            assert!(safe_path(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
