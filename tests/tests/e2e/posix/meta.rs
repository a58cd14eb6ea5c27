//! Cases about a node's metadata: lookup and stat, mode, owner, size, times, access, statfs,
//! extended attributes.

use std::path::Path;

use super::trace::Trace;
use seam_tests::sys;

pub fn lookup_stat(d: &Path, t: &mut Trace) {
    let f = d.join("f");
    t.write_file("create f", &f, b"hello");
    t.lstat("lstat f", &f);
    t.lstat("lstat missing", &d.join("missing"));
    t.lstat("lstat f/x (a file as a directory)", &d.join("f/x"));
    t.lstat("lstat a 300-byte name", &d.join("n".repeat(300)));
    t.rec("mkdir sub", sys::mkdir(&d.join("sub"), 0o755)).ok();
    t.lstat("lstat sub", &d.join("sub"));
    t.lstat("lstat sub/..", &d.join("sub/.."));
    t.rec("symlink l -> f", sys::symlink("f", &d.join("l"))).ok();
    t.lstat("lstat l", &d.join("l"));
    t.stat("stat l (follows)", &d.join("l"));
    t.rec("symlink dangling -> nowhere", sys::symlink("nowhere", &d.join("dangling"))).ok();
    t.stat("stat dangling", &d.join("dangling"));
    t.lstat("lstat dangling", &d.join("dangling"));
    t.lstat("lstat sub/../f", &d.join("sub/../f"));
}

pub fn chmod(d: &Path, t: &mut Trace) {
    let f = d.join("f");
    t.write_file("create f", &f, b"x");
    t.rec("chmod f 0600", sys::chmod(&f, 0o600)).ok();
    t.lstat("lstat f", &f);
    t.rec("chmod f 04755 (setuid)", sys::chmod(&f, 0o4755)).ok();
    t.lstat("lstat f", &f);
    t.rec("chmod f 01644 (sticky)", sys::chmod(&f, 0o1644)).ok();
    t.lstat("lstat f", &f);
    t.rec("chmod missing", sys::chmod(&d.join("missing"), 0o644)).ok();
    t.rec("mkdir sub", sys::mkdir(&d.join("sub"), 0o755)).ok();
    t.rec("chmod sub 02770 (setgid dir)", sys::chmod(&d.join("sub"), 0o2770)).ok();
    t.lstat("lstat sub", &d.join("sub"));
    t.rec("symlink l -> f", sys::symlink("f", &d.join("l"))).ok();
    t.rec("chmod l 0640 (changes f)", sys::chmod(&d.join("l"), 0o640)).ok();
    t.lstat("lstat f", &f);
    t.lstat("lstat l (unchanged)", &d.join("l"));
}

pub fn chown(d: &Path, t: &mut Trace) {
    let f = d.join("f");
    t.write_file("create f", &f, b"x");
    t.rec("chown f 1000:1000", sys::chown(&f, 1000, 1000)).ok();
    t.lstat("lstat f", &f);
    t.rec("chown f -1:2000 (group only)", sys::chown(&f, u32::MAX, 2000)).ok();
    t.lstat("lstat f", &f);
    t.rec("chown f -1:-1 (no change)", sys::chown(&f, u32::MAX, u32::MAX)).ok();
    t.lstat("lstat f", &f);
    t.rec("chmod f 06755", sys::chmod(&f, 0o6755)).ok();
    t.rec("chown f 0:0 (clears setuid/setgid)", sys::chown(&f, 0, 0)).ok();
    t.lstat("lstat f", &f);
    t.rec("symlink l -> f", sys::symlink("f", &d.join("l"))).ok();
    t.rec("lchown l 1000:1000", sys::lchown(&d.join("l"), 1000, 1000)).ok();
    t.lstat("lstat l", &d.join("l"));
    t.lstat("lstat f (not changed by lchown)", &f);
    t.rec("chown l 3000:3000 (follows)", sys::chown(&d.join("l"), 3000, 3000)).ok();
    t.lstat("lstat f", &f);
    t.rec("chown missing", sys::chown(&d.join("missing"), 1, 1)).ok();
}

pub fn truncate(d: &Path, t: &mut Trace) {
    let f = d.join("f");
    t.write_file("create f", &f, b"0123456789abcdef");
    t.rec("truncate f 4", sys::truncate(&f, 4)).ok();
    t.read_file("read f", &f);
    t.rec("truncate f 10 (extend)", sys::truncate(&f, 10)).ok();
    t.read_file("read f", &f);
    t.lstat("lstat f", &f);
    t.rec("truncate f -1", sys::truncate(&f, -1)).ok();
    t.rec("mkdir sub", sys::mkdir(&d.join("sub"), 0o755)).ok();
    t.rec("truncate sub (a directory)", sys::truncate(&d.join("sub"), 0)).ok();
    t.rec("truncate missing", sys::truncate(&d.join("missing"), 0)).ok();
    if let Ok(fd) = t.rec("open f O_RDWR", sys::open(&f, libc::O_RDWR, 0)) {
        t.rec("ftruncate 2", sys::ftruncate(&fd, 2)).ok();
        t.fstat("fstat", &fd);
    }
    if let Ok(fd) = t.rec("open f O_RDONLY", sys::open(&f, libc::O_RDONLY, 0)) {
        t.rec("ftruncate on a read-only fd", sys::ftruncate(&fd, 0)).ok();
    }
    t.read_file("read f", &f);
    t.rec("open f O_WRONLY|O_TRUNC", sys::open(&f, libc::O_WRONLY | libc::O_TRUNC, 0)).ok();
    t.lstat("lstat f", &f);
}

fn times(p: &Path, follow: bool) -> sys::Sys<String> {
    let st = if follow { sys::stat(p)? } else { sys::lstat(p)? };
    Ok(format!("atime={}.{:09} mtime={}.{:09}", st.st_atime, st.st_atime_nsec, st.st_mtime, st.st_mtime_nsec))
}

pub fn utimens(d: &Path, t: &mut Trace) {
    let f = d.join("f");
    let l = d.join("l");
    t.write_file("create f", &f, b"x");
    t.rec("utimens f", sys::utimens(&f, (1_000_000_000, 123_456_789), (1_500_000_000, 987_654_321), 0)).ok();
    t.rec("times f", times(&f, false)).ok();
    t.rec("utimens f (atime omitted)", sys::utimens(&f, (0, libc::UTIME_OMIT), (2_000_000_000, 5), 0)).ok();
    t.rec("times f", times(&f, false)).ok();
    t.rec("symlink l -> f", sys::symlink("f", &l)).ok();
    t.rec("utimens l NOFOLLOW", sys::utimens(&l, (1_000_000_007, 0), (1_000_000_008, 0), libc::AT_SYMLINK_NOFOLLOW))
        .ok();
    t.rec("times l", times(&l, false)).ok();
    t.rec("times f (unchanged)", times(&f, false)).ok();
    t.rec("utimens l (follows)", sys::utimens(&l, (1_100_000_000, 1), (1_100_000_000, 2), 0)).ok();
    t.rec("times f", times(&f, false)).ok();
    t.rec("utimens missing", sys::utimens(&d.join("missing"), (1, 0), (1, 0), 0)).ok();
    t.rec("utimens f nsec out of range", sys::utimens(&f, (1, 1_000_000_000), (1, 0), 0)).ok();
    t.rec("mkdir sub", sys::mkdir(&d.join("sub"), 0o755)).ok();
    t.rec("utimens sub", sys::utimens(&d.join("sub"), (1_200_000_000, 0), (1_200_000_001, 0), 0)).ok();
    t.rec("times sub", times(&d.join("sub"), false)).ok();
}

pub fn access(d: &Path, t: &mut Trace) {
    let f = d.join("f");
    t.write_file("create f", &f, b"x");
    t.rec("access f F_OK", sys::access(&f, libc::F_OK)).ok();
    t.rec("access f R_OK|W_OK", sys::access(&f, libc::R_OK | libc::W_OK)).ok();
    t.rec("access f X_OK (0644, root)", sys::access(&f, libc::X_OK)).ok();
    t.rec("chmod f 0", sys::chmod(&f, 0)).ok();
    t.rec("access f R_OK (mode 0, root)", sys::access(&f, libc::R_OK)).ok();
    t.rec("chmod f 0100", sys::chmod(&f, 0o100)).ok();
    t.rec("access f X_OK (0100)", sys::access(&f, libc::X_OK)).ok();
    t.rec("mkdir sub", sys::mkdir(&d.join("sub"), 0o700)).ok();
    t.rec("access sub X_OK", sys::access(&d.join("sub"), libc::X_OK)).ok();
    t.rec("access missing", sys::access(&d.join("missing"), libc::F_OK)).ok();
    t.rec("access f/x", sys::access(&d.join("f/x"), libc::F_OK)).ok();
}

pub fn statfs(d: &Path, t: &mut Trace) {
    // Free counts change with every other test's writes: only the fixed figures are compared.
    let r = sys::statvfs(d).map(|s| {
        format!(
            "bsize={} frsize={} blocks={} files={} namemax={} rdonly={}",
            s.f_bsize,
            s.f_frsize,
            s.f_blocks,
            s.f_files,
            s.f_namemax,
            s.f_flag & libc::ST_RDONLY != 0
        )
    });
    t.rec("statvfs dir", r).ok();
    t.write_file("create f", &d.join("f"), b"x");
    let r = sys::statvfs(&d.join("f")).map(|s| format!("bsize={} namemax={}", s.f_bsize, s.f_namemax));
    t.rec("statvfs f", r).ok();
    t.rec("statvfs missing", sys::statvfs(&d.join("missing")).map(drop)).ok();
}

pub fn xattrs(d: &Path, t: &mut Trace) {
    let f = d.join("f");
    t.write_file("create f", &f, b"x");
    t.rec("listxattr f (none yet)", sys::listxattr(&f)).ok();
    t.rec("setxattr f user.a=v1", sys::setxattr(&f, "user.a", b"v1", 0, false)).ok();
    t.rec("getxattr f user.a", sys::getxattr(&f, "user.a", 256, false)).ok();
    t.rec("getxattr f user.a size 0 (length)", sys::getxattr(&f, "user.a", 0, false).map(|v| v.len())).ok();
    t.rec("getxattr f user.a into 1 byte", sys::getxattr(&f, "user.a", 1, false)).ok();
    t.rec("setxattr CREATE existing user.a", sys::setxattr(&f, "user.a", b"v2", libc::XATTR_CREATE, false)).ok();
    t.rec("setxattr REPLACE missing user.b", sys::setxattr(&f, "user.b", b"v", libc::XATTR_REPLACE, false)).ok();
    t.rec("setxattr REPLACE user.a=v3", sys::setxattr(&f, "user.a", b"v3", libc::XATTR_REPLACE, false)).ok();
    t.rec("getxattr f user.a", sys::getxattr(&f, "user.a", 256, false)).ok();
    t.rec("setxattr f user.empty=''", sys::setxattr(&f, "user.empty", b"", 0, false)).ok();
    t.rec("getxattr f user.empty", sys::getxattr(&f, "user.empty", 256, false)).ok();
    let big = vec![b'z'; 3000];
    t.rec("setxattr f user.big (3000 bytes)", sys::setxattr(&f, "user.big", &big, 0, false)).ok();
    t.rec("getxattr f user.big", sys::getxattr(&f, "user.big", 4096, false)).ok();
    t.rec("listxattr f", sys::listxattr(&f)).ok();
    t.rec("removexattr f user.a", sys::removexattr(&f, "user.a")).ok();
    t.rec("getxattr f user.a (removed)", sys::getxattr(&f, "user.a", 256, false)).ok();
    t.rec("removexattr f user.a again", sys::removexattr(&f, "user.a")).ok();
    t.rec("listxattr f", sys::listxattr(&f)).ok();
    t.rec("getxattr f user.never", sys::getxattr(&f, "user.never", 256, false)).ok();
    t.rec("getxattr f bogus.ns", sys::getxattr(&f, "bogus.ns", 256, false)).ok();
    t.rec("setxattr f trusted.t=v (root)", sys::setxattr(&f, "trusted.t", b"v", 0, false)).ok();
    t.rec("getxattr f trusted.t", sys::getxattr(&f, "trusted.t", 256, false)).ok();
    t.rec("mkdir sub", sys::mkdir(&d.join("sub"), 0o755)).ok();
    t.rec("setxattr sub user.dir=x", sys::setxattr(&d.join("sub"), "user.dir", b"x", 0, false)).ok();
    t.rec("getxattr sub user.dir", sys::getxattr(&d.join("sub"), "user.dir", 256, false)).ok();
    t.rec("symlink l -> f", sys::symlink("f", &d.join("l"))).ok();
    t.rec("lsetxattr l user.x (user.* on a symlink)", sys::setxattr(&d.join("l"), "user.x", b"v", 0, true)).ok();
    t.rec("lgetxattr l user.empty", sys::getxattr(&d.join("l"), "user.empty", 256, true)).ok();
    t.rec("getxattr l user.empty (follows)", sys::getxattr(&d.join("l"), "user.empty", 256, false)).ok();
    t.rec("getxattr missing", sys::getxattr(&d.join("missing"), "user.a", 256, false)).ok();
}
