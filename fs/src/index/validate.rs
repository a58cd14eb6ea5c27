//! Is an index file whole? Header `DIRC`, version 2–4, and a trailing checksum over the rest
//! (SHA-1 or SHA-256; all zeros when git wrote it with `index.skipHash`).

use std::fmt;

/// Why an index file is not usable.
#[derive(Debug, PartialEq, Eq)]
pub enum BadIndex {
    /// Shorter than a header and a checksum.
    Truncated,
    /// Does not start with `DIRC`.
    NotDirc,
    /// A version git does not write.
    Version(u32),
    /// The trailing checksum does not match the content.
    Checksum,
}

impl fmt::Display for BadIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadIndex::Truncated => f.write_str("truncated (shorter than a header and checksum)"),
            BadIndex::NotDirc => f.write_str("not an index (no DIRC signature)"),
            BadIndex::Version(v) => write!(f, "unknown index version {v}"),
            BadIndex::Checksum => f.write_str("checksum mismatch (torn or partial write)"),
        }
    }
}

impl std::error::Error for BadIndex {}

/// What a whole index says about itself.
#[derive(Debug, PartialEq, Eq)]
pub struct IndexInfo {
    /// Format version.
    pub version: u32,
    /// Number of entries.
    pub entries: u32,
}

fn digest(kind: gix::hash::Kind, data: &[u8]) -> Option<Vec<u8>> {
    let mut h = gix::hash::hasher(kind);
    h.update(data);
    h.try_finalize().ok().map(|id| id.as_bytes().to_vec())
}

/// Checks `bytes` as an index file.
pub fn check(bytes: &[u8]) -> Result<IndexInfo, BadIndex> {
    if bytes.len() < 12 + 20 {
        return Err(BadIndex::Truncated);
    }
    if &bytes[..4] != b"DIRC" {
        return Err(BadIndex::NotDirc);
    }
    let version = u32::from_be_bytes(bytes[4..8].try_into().expect("4 bytes"));
    if !(2..=4).contains(&version) {
        return Err(BadIndex::Version(version));
    }
    let entries = u32::from_be_bytes(bytes[8..12].try_into().expect("4 bytes"));
    let info = IndexInfo { version, entries };
    for (kind, len) in [(gix::hash::Kind::Sha1, 20usize), (gix::hash::Kind::Sha256, 32)] {
        if bytes.len() < 12 + len {
            continue;
        }
        let (body, trailer) = bytes.split_at(bytes.len() - len);
        if trailer.iter().all(|&b| b == 0) || digest(kind, body).as_deref() == Some(trailer) {
            return Ok(info);
        }
    }
    Err(BadIndex::Checksum)
}

/// An empty version-2 index with its SHA-1 checksum.
pub fn empty_index() -> Vec<u8> {
    let mut v = b"DIRC\0\0\0\x02\0\0\0\0".to_vec();
    let sum = digest(gix::hash::Kind::Sha1, &v).expect("sha1 of a constant");
    v.extend_from_slice(&sum);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_index_is_whole_and_damage_is_seen() {
        let e = empty_index();
        assert_eq!(check(&e), Ok(IndexInfo { version: 2, entries: 0 }));
        let mut torn = e.clone();
        torn[15] ^= 1;
        assert_eq!(check(&torn), Err(BadIndex::Checksum));
        assert_eq!(check(&e[..20]), Err(BadIndex::Truncated));
        let mut bad = e.clone();
        bad[0] = b'X';
        assert_eq!(check(&bad), Err(BadIndex::NotDirc));
    }
}
