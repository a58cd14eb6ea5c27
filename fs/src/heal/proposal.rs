//! Proposal files: `index.seam-proposed.<head>.<base>.<ff|carry>` beside an index.
//!
//! When the sealed heal cannot take `index.lock` in time, the box leaves the healed index under
//! such a name for `seamd` to install: `<head>` is the commit the heal is for, `<base>` the blob
//! id of the index bytes it was built from, and the last field says whether staging was carried.
//! Parsing is strict (lowercase hex ids of one length, 40 or 64; exactly `ff` or `carry`;
//! nothing else): readers ignore any other name, and `seamd` prunes them.

use std::fmt;

use super::outcome::HealKind;

/// Every proposal name starts with this.
pub const PREFIX: &str = "index.seam-proposed.";

/// Beside proposals: `index.seam-base.<base>` holds the bytes of the index a proposal was built
/// from (its blob id is the name), so an installer can tell a stat-only rewrite of the index
/// (same entries, new stat data) from a real change.
pub const BASE_PREFIX: &str = "index.seam-base.";

/// A well-formed proposal name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProposalName {
    /// The commit the healed index is for (HEAD must still resolve to it), lowercase hex.
    pub head: String,
    /// The blob id of the index the heal was built from, lowercase hex.
    pub base: String,
    /// Whether staging was carried.
    pub kind: HealKind,
}

/// Why a name starting with [`PREFIX`] is not a proposal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MalformedName(pub &'static str);

impl fmt::Display for MalformedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed proposal name: {}", self.0)
    }
}

impl std::error::Error for MalformedName {}

fn is_hex_id(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl ProposalName {
    /// The file name.
    pub fn file_name(&self) -> String {
        format!("{PREFIX}{}.{}.{}", self.head, self.base, self.kind)
    }

    /// The hash kind of its ids.
    pub fn hash_kind(&self) -> gix::hash::Kind {
        if self.head.len() == 64 {
            gix::hash::Kind::Sha256
        } else {
            gix::hash::Kind::Sha1
        }
    }

    /// Parses a file name; anything but exactly `PREFIX<head>.<base>.<ff|carry>` is refused.
    pub fn parse(name: &[u8]) -> Result<ProposalName, MalformedName> {
        let name = std::str::from_utf8(name).map_err(|_| MalformedName("not UTF-8"))?;
        let rest = name.strip_prefix(PREFIX).ok_or(MalformedName("no index.seam-proposed. prefix"))?;
        let mut parts = rest.split('.');
        let (Some(head), Some(base), Some(kind), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
            return Err(MalformedName("not exactly <head>.<base>.<ff|carry>"));
        };
        if !is_hex_id(head) || !is_hex_id(base) {
            return Err(MalformedName("ids must be 40 or 64 lowercase hex digits"));
        }
        if head.len() != base.len() {
            return Err(MalformedName("head and base ids of different hash kinds"));
        }
        let kind = match kind {
            "ff" => HealKind::Ff,
            "carry" => HealKind::Carry,
            _ => return Err(MalformedName("kind must be ff or carry")),
        };
        Ok(ProposalName { head: head.to_string(), base: base.to_string(), kind })
    }
}

impl fmt::Display for ProposalName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file_name())
    }
}

/// Whether a file name claims to be a proposal (well-formed or not).
pub fn looks_like_proposal(name: &[u8]) -> bool {
    name.starts_with(PREFIX.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: &str = "1111111111111111111111111111111111111111";
    const B: &str = "abcdefabcdefabcdefabcdefabcdefabcdef0123";

    #[test]
    fn round_trips() {
        for kind in [HealKind::Ff, HealKind::Carry] {
            let p = ProposalName { head: H.into(), base: B.into(), kind };
            assert_eq!(ProposalName::parse(p.file_name().as_bytes()), Ok(p.clone()));
        }
        let long = "a".repeat(64);
        let p = ProposalName { head: long.clone(), base: long, kind: HealKind::Ff };
        assert_eq!(ProposalName::parse(p.file_name().as_bytes()).map(|p| p.hash_kind()), Ok(gix::hash::Kind::Sha256));
    }

    #[test]
    fn refuses_anything_else() {
        let bad = [
            format!("{PREFIX}{H}.{B}"),
            format!("{PREFIX}{H}.{B}.ff.x"),
            format!("{PREFIX}{H}.{B}.FF"),
            format!("{PREFIX}{H}.{B}.ff carry"),
            format!("{PREFIX}{H}.{B}.ffcarry"),
            format!("{PREFIX}{H}.{}.ff", B.to_uppercase()),
            format!("{PREFIX}{}.{B}.ff", &H[..39]),
            format!("{PREFIX}{H}.{}.ff", "a".repeat(64)),
            format!("{PREFIX}{H}.{B}.ff/"),
            format!("{PREFIX}../../{H}.{B}.ff"),
            format!("{PREFIX}{H}.{}z.ff", &B[..39]),
            format!("index.seam-proposedX{H}.{B}.ff"),
            format!("{PREFIX}.{H}.{B}.ff"),
            format!("{PREFIX}{H}..{B}.ff"),
            String::new(),
        ];
        for name in bad {
            assert!(ProposalName::parse(name.as_bytes()).is_err(), "{name:?} must be refused");
        }
        assert!(ProposalName::parse(&[0xff, 0xfe]).is_err());
        assert!(looks_like_proposal(format!("{PREFIX}junk").as_bytes()));
        assert!(!looks_like_proposal(b"index.lock"));
    }
}
