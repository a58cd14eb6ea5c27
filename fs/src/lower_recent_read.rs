//! Small lower files seamfs read a moment ago, by identity (ADR 0031).
//!
//! seamfs reads `HEAD`, the branch, `config` and the index's sync point itself, several times
//! per git command (to note what a process started from, and to judge a move). On a share each
//! read is an OPEN, a FLUSH and a RELEASE on its server, and it doubled the opens git itself
//! makes. A file whose identity and change stamps (device, inode, size, mtime, ctime) match the
//! last read has the same bytes: git replaces these files by rename (a new inode), and a write
//! in place changes ctime. The stamps come from the lower's attributes, fresh after a refresh.
//! Never used on a lower whose attributes never revalidate (`crate::lower_cache`).

use std::collections::HashMap;

use parking_lot::Mutex;

/// Files larger than this are read every time (refs, `HEAD`, sync points and `config` fit).
pub const MAX_BYTES: usize = 16 << 10;
/// Past this many files the memory starts over: at most 4 MiB held.
const MAX_FILES: usize = 256;

/// The stamps that change whenever a file's bytes do.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Stamp {
    size: i64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(st: &libc::stat) -> Stamp {
        // The casts are for macOS, whose stat fields are narrower.
        #[allow(clippy::unnecessary_cast)]
        Stamp {
            size: st.st_size as i64,
            mtime: (st.st_mtime as i64, st.st_mtime_nsec as i64),
            ctime: (st.st_ctime as i64, st.st_ctime_nsec as i64),
        }
    }
}

/// Bytes read, by (device, inode), with the stamps they were read under.
type Reads = HashMap<(u64, u64), (Stamp, Vec<u8>)>;

/// What was read (None until the first read).
static READ: Mutex<Option<Reads>> = Mutex::new(None);

/// The bytes last read from the file `st` describes, if its stamps still match.
pub fn recall(st: &libc::stat) -> Option<Vec<u8>> {
    let key = crate::lower::dev_ino(st);
    let read = READ.lock();
    match read.as_ref()?.get(&key) {
        Some((stamp, bytes)) if *stamp == Stamp::of(st) => Some(bytes.clone()),
        _ => None,
    }
}

/// Remembers `bytes` as the content of the file `st` describes (taken before the read).
pub fn remember(st: &libc::stat, bytes: &[u8]) {
    if bytes.len() > MAX_BYTES || bytes.len() as i64 != st.st_size {
        return;
    }
    let mut read = READ.lock();
    let map = read.get_or_insert_with(HashMap::new);
    if map.len() >= MAX_FILES {
        map.clear();
    }
    map.insert(crate::lower::dev_ino(st), (Stamp::of(st), bytes.to_vec()));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat_of(ino: u64, size: i64, ctime_nsec: i64) -> libc::stat {
        let mut st = crate::lower::empty_stat();
        st.st_dev = 9;
        st.st_ino = ino;
        st.st_size = size;
        st.st_ctime_nsec = ctime_nsec;
        st
    }

    #[test]
    fn recalled_only_while_every_stamp_matches() {
        let st = stat_of(1_000_001, 3, 5);
        assert_eq!(recall(&st), None, "nothing read yet");
        remember(&st, b"abc");
        assert_eq!(recall(&st).as_deref(), Some(&b"abc"[..]));
        assert_eq!(recall(&stat_of(1_000_001, 3, 6)), None, "written in place: ctime moved");
        assert_eq!(recall(&stat_of(1_000_002, 3, 5)), None, "replaced by rename: another inode");
        remember(&stat_of(1_000_003, 4, 0), b"abc");
        assert_eq!(recall(&stat_of(1_000_003, 4, 0)), None, "a read that did not match the size is not kept");
    }
}
