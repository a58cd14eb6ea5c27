//! The change feed's wire format: one line per message, names only, bounded, checked.
//!
//! ```text
//! SEAMFEED 1                 hello, first line of every connection
//! <seq> c <path>             created (or renamed to)
//! <seq> m <path>             modified in place, or its attributes changed
//! <seq> r <path>             removed (or renamed from)
//! <seq> beat                 the feed is alive (every BEAT_EVERY)
//! <seq> overflow             the host's watcher lost events: trust nothing cached
//! ```
//! `<path>` is relative to the checkout, every byte outside `!`..`~` and `%` itself written as
//! `%XX`. The feed is untrusted on both ends (seamd's watcher may see box-made names): a line
//! that does not parse, or a path that is absolute, has `.`/`..`/empty components or a NUL, is
//! dropped by the reader.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The hello line's text (without the newline).
pub const HELLO: &str = "SEAMFEED 1";
/// The longest path a message may carry, in bytes (decoded).
pub const MAX_PATH: usize = 4096;
/// The longest line a reader accepts: a path escaped whole, its sequence and kind.
pub const MAX_LINE: usize = MAX_PATH * 3 + 32;
/// How often seamd says it is alive when nothing changes.
pub const BEAT_EVERY: Duration = Duration::from_secs(1);
/// Silence after which a reader counts the feed as down.
pub const DEAD_AFTER: Duration = Duration::from_secs(3);

/// What happened to a name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Created, or renamed to.
    Create,
    /// Written in place, or its attributes changed.
    Modify,
    /// Removed, or renamed from.
    Remove,
}

/// One message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// The first line of a connection.
    Hello,
    /// A name changed.
    Change {
        /// Sequence number (one counter over all messages but the hello).
        seq: u64,
        /// What happened.
        kind: Kind,
        /// Relative to the checkout, checked.
        path: PathBuf,
    },
    /// Nothing changed; the feed is alive.
    Beat {
        /// Sequence number.
        seq: u64,
    },
    /// The watcher lost events.
    Overflow {
        /// Sequence number.
        seq: u64,
    },
}

/// Why a line was dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine(pub &'static str);

impl std::fmt::Display for BadLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl Message {
    /// The message as a line, newline included.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = match self {
            Message::Hello => HELLO.as_bytes().to_vec(),
            Message::Beat { seq } => format!("{seq} beat").into_bytes(),
            Message::Overflow { seq } => format!("{seq} overflow").into_bytes(),
            Message::Change { seq, kind, path } => {
                let k = match kind {
                    Kind::Create => 'c',
                    Kind::Modify => 'm',
                    Kind::Remove => 'r',
                };
                let mut v = format!("{seq} {k} ").into_bytes();
                escape_into(path.as_os_str().as_bytes(), &mut v);
                v
            }
        };
        out.push(b'\n');
        out
    }

    /// Parses one line (without its newline).
    pub fn decode(line: &[u8]) -> Result<Message, BadLine> {
        if line == HELLO.as_bytes() {
            return Ok(Message::Hello);
        }
        if line.len() > MAX_LINE {
            return Err(BadLine("line too long"));
        }
        let mut parts = line.splitn(3, |&b| b == b' ');
        let seq = parts.next().and_then(|s| std::str::from_utf8(s).ok()).and_then(|s| s.parse::<u64>().ok());
        let seq = seq.ok_or(BadLine("no sequence number"))?;
        match (parts.next(), parts.next()) {
            (Some(b"beat"), None) => Ok(Message::Beat { seq }),
            (Some(b"overflow"), None) => Ok(Message::Overflow { seq }),
            (Some(k), Some(p)) => {
                let kind = match k {
                    b"c" => Kind::Create,
                    b"m" => Kind::Modify,
                    b"r" => Kind::Remove,
                    _ => return Err(BadLine("unknown kind")),
                };
                Ok(Message::Change { seq, kind, path: checked_path(&unescape(p)?)? })
            }
            _ => Err(BadLine("unknown message")),
        }
    }
}

fn escape_into(bytes: &[u8], out: &mut Vec<u8>) {
    for &b in bytes {
        if (b'!'..=b'~').contains(&b) && b != b'%' {
            out.push(b);
        } else {
            out.extend_from_slice(format!("%{b:02X}").as_bytes());
        }
    }
}

fn unescape(s: &[u8]) -> Result<Vec<u8>, BadLine> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' => {
                let hex = s.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).ok_or(BadLine("bad escape"))?;
                out.push(u8::from_str_radix(hex, 16).map_err(|_| BadLine("bad escape"))?);
                i += 3;
            }
            b if (b'!'..=b'~').contains(&b) => {
                out.push(b);
                i += 1;
            }
            _ => return Err(BadLine("unescaped byte in path")),
        }
    }
    Ok(out)
}

/// A path the feed may name: relative, only normal components, no NUL, bounded.
pub fn checked_path(bytes: &[u8]) -> Result<PathBuf, BadLine> {
    if bytes.is_empty() || bytes.len() > MAX_PATH {
        return Err(BadLine("empty or too long path"));
    }
    if bytes.contains(&0) {
        return Err(BadLine("NUL in path"));
    }
    // Byte by byte: `Path::components` would quietly drop an inner `.` or an empty component.
    for c in bytes.split(|&b| b == b'/') {
        match c {
            b"" => return Err(BadLine("absolute path or empty component")),
            b"." | b".." => return Err(BadLine("`.` or `..` in path")),
            _ => {}
        }
    }
    Ok(Path::new(OsStr::from_bytes(bytes)).to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(kind: Kind, p: &[u8]) -> Message {
        Message::Change { seq: 7, kind, path: PathBuf::from(OsStr::from_bytes(p)) }
    }

    #[test]
    fn round_trips() {
        for m in [
            Message::Hello,
            Message::Beat { seq: 1 },
            Message::Overflow { seq: u64::MAX },
            change(Kind::Create, b"src/a b.rs"),
            change(Kind::Modify, b"odd/\n%\xff\x01name"),
            change(Kind::Remove, b"x"),
        ] {
            let line = m.encode();
            assert_eq!(line.last(), Some(&b'\n'));
            assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1, "a newline in a name never ends the line");
            assert_eq!(Message::decode(&line[..line.len() - 1]), Ok(m));
        }
    }

    #[test]
    fn hostile_lines_are_refused() {
        for bad in [
            &b"1 c /etc/passwd"[..],
            b"1 c ../up",
            b"1 c a/../../b",
            b"1 c a/./b",
            b"1 c a//b",
            b"1 c a/",
            b"1 c %00",
            b"1 c a%2F..%2F..%2Fb",
            b"1 c a b",
            b"1 c %zz",
            b"1 c %4",
            b"x c a",
            b"1 q a",
            b"1",
            b"",
            b"1 beat extra",
        ] {
            assert!(Message::decode(bad).is_err(), "{:?} must be refused", String::from_utf8_lossy(bad));
        }
        let long = format!("1 c {}", "a".repeat(MAX_PATH + 1));
        assert!(Message::decode(long.as_bytes()).is_err());
    }
}
