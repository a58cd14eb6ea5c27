//! The entries of an index file read straight from its bytes (path, mode, object id), without a
//! decoded copy: a hint index is only hashed into trees (`memtrees`), and at 100,000 files a
//! decoded `gix::index::State` is ~12 MiB the heal cannot afford beside its own (issue #16).
//!
//! Versions 2, 3 and 4 (prefix-compressed paths), as git writes them. Nothing read here is
//! trusted: a malformed file stops the walk, and what it yielded so far only hashes to trees
//! nobody asks for.

use std::io::BufRead;

use gix::index::entry::Mode;
use gix::ObjectId;

/// The fixed part of an entry before the object id: ctime, mtime, dev, ino, mode, uid, gid,
/// size (ten 32-bit fields).
const STAT_LEN: usize = 40;
const EXTENDED: u16 = 0x4000;
const NAME_MASK: u16 = 0x0fff;

/// Reads exactly `n` bytes into the front of `buf`.
fn take<'b>(r: &mut impl BufRead, buf: &'b mut [u8], n: usize) -> Option<&'b [u8]> {
    r.read_exact(buf.get_mut(..n)?).ok()?;
    Some(&buf[..n])
}

fn byte(r: &mut impl BufRead) -> Option<u8> {
    let mut b = [0u8; 1];
    r.read_exact(&mut b).ok()?;
    Some(b[0])
}

/// git's offset varint (`decode_varint`): the number of bytes a version-4 path strips from the
/// previous one.
fn varint(r: &mut impl BufRead) -> Option<usize> {
    let mut c = byte(r)?;
    let mut val = (c & 127) as usize;
    while c & 128 != 0 {
        c = byte(r)?;
        val = val.checked_add(1)?.checked_mul(128)?.checked_add((c & 127) as usize)?;
    }
    Some(val)
}

/// Appends the bytes up to the next NUL to `out` (the NUL is consumed, not appended).
fn until_nul(r: &mut impl BufRead, out: &mut Vec<u8>) -> Option<()> {
    r.read_until(0, out).ok()?;
    (out.pop() == Some(0)).then_some(())
}

/// Calls `f(path, mode, id)` for each entry of the index file `r` reads, in file order, reading
/// it once front to back (an open file is never held whole). None when it is not an index of
/// `kind` or is cut short (the entries before the fault were still given to `f`).
pub(crate) fn for_each_entry(mut r: impl BufRead, kind: gix::hash::Kind, mut f: impl FnMut(&[u8], Mode, ObjectId)) -> Option<()> {
    let mut buf = [0u8; 128];
    let head = take(&mut r, &mut buf, 12)?;
    if &head[..4] != b"DIRC" {
        return None;
    }
    let version = u32::from_be_bytes(head[4..8].try_into().ok()?);
    let count = u32::from_be_bytes(head[8..12].try_into().ok()?);
    if !(2..=4).contains(&version) {
        return None;
    }
    let hash_len = kind.len_in_bytes();
    let mut path: Vec<u8> = Vec::new();
    for _ in 0..count {
        let fixed = take(&mut r, &mut buf, STAT_LEN + hash_len + 2)?;
        let mode = u32::from_be_bytes(fixed[24..28].try_into().ok()?);
        let id = ObjectId::from_bytes_or_panic(&fixed[STAT_LEN..STAT_LEN + hash_len]);
        let flags = u16::from_be_bytes(fixed[STAT_LEN + hash_len..].try_into().ok()?);
        let mut entry_len = STAT_LEN + hash_len + 2;
        if flags & EXTENDED != 0 {
            if version < 3 {
                return None;
            }
            take(&mut r, &mut buf, 2)?;
            entry_len += 2;
        }
        if version == 4 {
            let strip = varint(&mut r)?;
            path.truncate(path.len().checked_sub(strip)?);
            until_nul(&mut r, &mut path)?;
        } else {
            path.clear();
            let name = (flags & NAME_MASK) as usize;
            let mut consumed = entry_len;
            if name < NAME_MASK as usize {
                path.resize(name, 0);
                r.read_exact(&mut path).ok()?;
                consumed += name;
            } else {
                // Too long for the flags: up to the NUL, the first byte of the padding.
                until_nul(&mut r, &mut path)?;
                consumed += path.len() + 1;
            }
            // Padded with 1 to 8 NULs to a multiple of 8 from the entry's start (git's
            // `ondisk_ce_size`).
            let padded = (entry_len + path.len() + 8) & !7;
            take(&mut r, &mut buf, padded - consumed)?;
        }
        f(&path, Mode::from_bits_truncate(mode), id);
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every version git writes yields the entries `git ls-files --stage` lists, in its order,
    /// a path too long for the flags' length field included (gix's decoder refuses that one).
    #[test]
    fn entries_match_git_in_every_version() {
        let dir = std::env::temp_dir().join(format!("seamfs-rawindex-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let git = |args: &[&str]| -> Vec<u8> {
            let out = std::process::Command::new("git").arg("-C").arg(&dir).args(args).env("GIT_CONFIG_GLOBAL", "/dev/null").output().unwrap();
            assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
            out.stdout
        };
        git(&["init", "-q"]);
        for p in ["a.txt", "src/lib.rs", "src/deep/x/y.txt", "src/deep/x/z.txt", "zz"] {
            let f = dir.join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(&f, p.as_bytes()).unwrap();
        }
        git(&["add", "-A"]);
        // A path of 0xfff bytes or more (its length no longer fits the flags): only in the index.
        let long = vec!["l".repeat(250); 20].join("/");
        let blob = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391";
        git(&["update-index", "--add", "--cacheinfo", &format!("100644,{blob},d/{long}")]);
        std::fs::write(dir.join("new.txt"), "n").unwrap();
        git(&["add", "-N", "new.txt"]);
        for v in ["2", "3", "4"] {
            git(&["update-index", "--index-version", v]);
            let bytes = std::fs::read(dir.join(".git/index")).unwrap();
            // "<mode> <id> <stage>\t<path>\0" per entry.
            let want: Vec<(Vec<u8>, Mode, ObjectId)> = git(&["ls-files", "--stage", "-z"])
                .split(|&b| b == 0)
                .filter(|l| !l.is_empty())
                .map(|l| {
                    let tab = l.iter().position(|&b| b == b'\t').unwrap();
                    let head = std::str::from_utf8(&l[..tab]).unwrap();
                    let mut f = head.split(' ');
                    let mode = u32::from_str_radix(f.next().unwrap(), 8).unwrap();
                    let id = ObjectId::from_hex(f.next().unwrap().as_bytes()).unwrap();
                    (l[tab + 1..].to_vec(), Mode::from_bits_truncate(mode), id)
                })
                .collect();
            assert_eq!(want.len(), 7);
            let mut got = Vec::new();
            assert_eq!(for_each_entry(&bytes[..], gix::hash::Kind::Sha1, |p, m, id| got.push((p.to_vec(), m, id))), Some(()), "version {v}");
            assert_eq!(got, want, "version {v}");
            assert!(for_each_entry(&bytes[..bytes.len() / 2], gix::hash::Kind::Sha1, |_, _, _| {}).is_none(), "version {v} cut short");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn not_an_index_is_refused() {
        assert!(for_each_entry(&b"PACK\0\0\0\x02\0\0\0\x01"[..], gix::hash::Kind::Sha1, |_, _, _| panic!()).is_none());
        assert!(for_each_entry(&b"DIRC\0\0\0\x09\0\0\0\x00"[..], gix::hash::Kind::Sha1, |_, _, _| panic!()).is_none());
    }
}
