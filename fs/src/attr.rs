//! Conversion of the lower's `stat` into FUSE attributes.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{FileAttr, FileType, INodeNo};

fn time(sec: i64, nsec: i64) -> SystemTime {
    if sec >= 0 {
        UNIX_EPOCH + Duration::new(sec as u64, nsec as u32)
    } else {
        UNIX_EPOCH - Duration::new(sec.unsigned_abs(), 0) + Duration::from_nanos(nsec as u64)
    }
}

/// The FUSE file type of a mode.
pub fn file_type(mode: u32) -> FileType {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFBLK => FileType::BlockDevice,
        libc::S_IFSOCK => FileType::Socket,
        _ => FileType::RegularFile,
    }
}

/// What of a node's attributes can make the kernel's copy wrong for an open file: its size and
/// times (`Core::open` compares the file it opens with the attributes last given).
pub fn attr_stamp(a: &FileAttr) -> u64 {
    let ns = |t: SystemTime| match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as u64,
        Err(e) => (e.duration().as_nanos() as u64).wrapping_neg(),
    };
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for v in [a.size, ns(a.mtime), ns(a.ctime)] {
        h = (h ^ v).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// FUSE attributes for node `id` from the lower's stat.
pub fn to_attr(id: u64, st: &libc::stat) -> FileAttr {
    FileAttr {
        ino: INodeNo(id),
        size: st.st_size as u64,
        blocks: st.st_blocks as u64,
        atime: time(st.st_atime, st.st_atime_nsec),
        mtime: time(st.st_mtime, st.st_mtime_nsec),
        ctime: time(st.st_ctime, st.st_ctime_nsec),
        crtime: UNIX_EPOCH,
        kind: file_type(st.st_mode),
        perm: (st.st_mode & 0o7777) as u16,
        nlink: st.st_nlink as u32,
        uid: st.st_uid,
        gid: st.st_gid,
        rdev: st.st_rdev as u32,
        blksize: st.st_blksize as u32,
        flags: 0,
    }
}
