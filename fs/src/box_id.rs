//! Which box a seamfs mount is. Several boxes over one share each keep their own index and
//! per-side files under their id (`index-box.<id>`, `index::names::BoxNames`), and see every
//! other box's writes as they see the host's (ADR 0028).
//!
//! An id is 1 to 32 of `a-z 0-9 _ -`: lower case only, because a macOS host's file system is
//! case-insensitive and `index-box.A` would be `index-box.a` there. `lock` and names starting
//! with `seam` are refused: `index-box.lock` and `index-box.seam-*` are older seamfs's names.

use std::fmt;

/// The longest id.
pub const MAX_LEN: usize = 32;

/// A checked box id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BoxId(String);

/// Where the default id came from (said in the log at mount).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `--box-id`, `box_id` in seamfs.toml or `-o box_id=`.
    Given,
    /// The first 12 hex digits of `/etc/machine-id`.
    MachineId,
    /// `/etc/machine-id` missing or malformed: the host name, sanitised.
    Hostname,
    /// Neither usable: the fixed id `box`.
    Fixed,
}

impl Source {
    /// How `user.seamfs.status` and `seamfs doctor` name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Given => "given",
            Source::MachineId => "machine-id",
            Source::Hostname => "hostname",
            Source::Fixed => "fixed",
        }
    }

    /// True for a fallback: another box may have come to the same id.
    pub fn is_fallback(self) -> bool {
        matches!(self, Source::Hostname | Source::Fixed)
    }
}

impl BoxId {
    /// Checks `s`; the error says what is allowed.
    pub fn parse(s: &str) -> Result<BoxId, String> {
        let ok_chars = s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if s.is_empty() || s.len() > MAX_LEN || !ok_chars {
            return Err(format!("box id `{s}`: use 1 to {MAX_LEN} of a-z, 0-9, `_` and `-` (lower case: a macOS host cannot tell case apart)"));
        }
        if s == "lock" || s.starts_with("seam") {
            return Err(format!("box id `{s}`: `lock` and ids starting with `seam` are reserved (older seamfs's file names); pick another"));
        }
        Ok(BoxId(s.to_string()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for BoxId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The id from `/etc/machine-id`'s text: its first 12 hex digits (systemd writes 32).
pub fn from_machine_id(text: &str) -> Option<BoxId> {
    let t = text.trim();
    let hex = t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit());
    // All zeros is an image's placeholder, not a machine.
    (hex && t.bytes().any(|b| b != b'0')).then(|| BoxId(t[..12].to_ascii_lowercase()))
}

/// The id from a host name: lower-cased, every other character `-`, at most [`MAX_LEN`].
pub fn from_hostname(text: &str) -> Option<BoxId> {
    let s: String = text
        .trim()
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' { c } else { '-' })
        .take(MAX_LEN)
        .collect();
    BoxId::parse(&s).ok()
}

/// The default id of this machine, and where it came from.
pub fn default_id() -> (BoxId, Source) {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    if let Some(id) = from_machine_id(&read("/etc/machine-id")) {
        return (id, Source::MachineId);
    }
    if let Some(id) = from_hostname(&read("/proc/sys/kernel/hostname")) {
        return (id, Source::Hostname);
    }
    (BoxId("box".into()), Source::Fixed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_checked() {
        for good in ["a", "box-1", "agent_7", &"x".repeat(32)] {
            assert!(BoxId::parse(good).is_ok(), "{good}");
        }
        for bad in ["", "A", "a.b", "a/b", "../x", "lock", "seam-base", "seamx", &"x".repeat(33), "é"] {
            assert!(BoxId::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn defaults_are_short_stable_and_safe() {
        let m = "0123456789ABCDEF0123456789abcdef\n";
        assert_eq!(from_machine_id(m).unwrap().as_str(), "0123456789ab");
        assert_eq!(from_machine_id("uninitialized\n"), None);
        assert_eq!(from_machine_id(&"0".repeat(32)), None);
        assert_eq!(from_machine_id("123"), None);
        assert_eq!(from_hostname("My.Box\n").unwrap().as_str(), "my-box");
        assert_eq!(from_hostname(""), None);
        assert_eq!(from_hostname("seamhost"), None, "reserved after sanitising: the fixed fallback");
        let (id, _) = default_id();
        assert!(BoxId::parse(id.as_str()).is_ok());
    }
}
