//! Names the box chose, made safe to print: in a shell command a human may paste, and in a
//! report or log line. A proposal or lock name can hold quotes, `$(...)`, newlines (which
//! would forge whole rows) and bytes that are not UTF-8.

use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `p` as one shell word that means exactly those bytes: `'...'` (a `'` inside written `'\''`)
/// when every byte is printable ASCII, else bash/zsh's `$'...'` with `\xHH` for every byte
/// that is not (so no newline or control byte reaches the terminal raw).
pub fn shell(p: &Path) -> String {
    let b = p.as_os_str().as_bytes();
    if b.iter().all(|&c| (b' '..=b'~').contains(&c)) {
        return format!("'{}'", String::from_utf8_lossy(b).replace('\'', r"'\''"));
    }
    let mut out = String::from("$'");
    for &c in b {
        match c {
            b'\'' | b'\\' => {
                out.push('\\');
                out.push(c as char);
            }
            b' '..=b'~' => out.push(c as char),
            _ => {
                let _ = write!(out, "\\x{c:02x}");
            }
        }
    }
    out.push('\'');
    out
}

/// `p` for a message: one line, printable; control characters, bidi overrides, `\` and bytes
/// that are not UTF-8 written as escapes (`\n`, `\x1b`, `\u{202e}`).
pub fn shown(p: &Path) -> String {
    let mut out = String::new();
    for chunk in p.as_os_str().as_bytes().utf8_chunks() {
        for ch in chunk.valid().chars() {
            match ch {
                '\\' => out.push_str(r"\\"),
                '\n' => out.push_str(r"\n"),
                '\t' => out.push_str(r"\t"),
                '\r' => out.push_str(r"\r"),
                c if c.is_control() || is_bidi(c) => {
                    let _ = write!(out, "\\u{{{:x}}}", c as u32);
                }
                c => out.push(c),
            }
        }
        for &b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// Unicode's directional formatting characters: they reorder what a terminal shows.
fn is_bidi(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn shell_words() {
        assert_eq!(shell(Path::new("/a/b c")), "'/a/b c'");
        assert_eq!(shell(Path::new("x'$(touch y)'")), r"'x'\''$(touch y)'\'''");
        assert_eq!(shell(Path::new("a\nb'")), r"$'a\x0ab\''");
        assert_eq!(shell(Path::new(OsStr::from_bytes(b"\xff"))), r"$'\xff'");
    }

    #[test]
    fn shown_on_one_line() {
        assert_eq!(shown(Path::new("a\nwarn  forged")), r"a\nwarn  forged");
        assert_eq!(shown(Path::new(OsStr::from_bytes(b"x\xff\x1b[2J"))), r"x\xff\u{1b}[2J");
        assert_eq!(shown(Path::new("r\u{202e}txt.lock")), r"r\u{202e}txt.lock");
        assert_eq!(shown(Path::new("é/ok")), "é/ok");
    }
}
