//! Cases about file data and open files: create with O_EXCL, read, write, fsync and
//! fsyncdir, fallocate, SEEK_DATA/SEEK_HOLE, copy_file_range, a file unlinked while open.

use std::path::Path;

use super::trace::{bytes, Trace};
use seam_tests::sys;

pub fn open_create_excl(d: &Path, t: &mut Trace) {
    let j = |n: &str| d.join(n);
    let excl = libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY;
    if let Ok(fd) = t.rec("open n O_CREAT|O_EXCL 0640", sys::open(&j("n"), excl, 0o640)) {
        t.rec("write new", sys::write(&fd, b"new")).ok();
    }
    t.lstat("lstat n", &j("n"));
    t.rec("open n O_CREAT|O_EXCL again", sys::open(&j("n"), excl, 0o640)).ok();
    t.rec("open n O_CREAT (exists) 0600", sys::open(&j("n"), libc::O_CREAT | libc::O_WRONLY, 0o600)).ok();
    t.lstat("lstat n (mode and content kept)", &j("n"));
    t.read_file("read n", &j("n"));
    t.rec("open n O_WRONLY|O_TRUNC", sys::open(&j("n"), libc::O_WRONLY | libc::O_TRUNC, 0)).ok();
    t.lstat("lstat n (truncated)", &j("n"));
    t.rec("open missing O_RDONLY", sys::open(&j("missing"), libc::O_RDONLY, 0)).ok();
    t.rec("mkdir sub", sys::mkdir(&j("sub"), 0o755)).ok();
    t.rec("open sub O_WRONLY", sys::open(&j("sub"), libc::O_WRONLY, 0)).ok();
    t.rec("open sub O_DIRECTORY", sys::open(&j("sub"), libc::O_RDONLY | libc::O_DIRECTORY, 0)).ok();
    t.rec("open n O_DIRECTORY", sys::open(&j("n"), libc::O_RDONLY | libc::O_DIRECTORY, 0)).ok();
    t.rec("open sub O_CREAT|O_EXCL", sys::open(&j("sub"), excl, 0o644)).ok();
    t.rec("symlink l -> n", sys::symlink("n", &j("l"))).ok();
    t.rec("open l O_NOFOLLOW", sys::open(&j("l"), libc::O_RDONLY | libc::O_NOFOLLOW, 0)).ok();
    t.rec("open l O_CREAT|O_EXCL", sys::open(&j("l"), excl, 0o644)).ok();
    t.rec("symlink dl -> sub/t (dangling)", sys::symlink("sub/t", &j("dl"))).ok();
    t.rec("open dl O_CREAT (creates sub/t)", sys::open(&j("dl"), libc::O_CREAT | libc::O_WRONLY, 0o600)).ok();
    t.lstat("lstat sub/t", &j("sub/t"));
    t.rec("open missing/x O_CREAT", sys::open(&j("missing/x"), libc::O_CREAT | libc::O_WRONLY, 0o644)).ok();
    t.rec("chmod n 0444", sys::chmod(&j("n"), 0o444)).ok();
    t.rec("open n O_WRONLY (0444, root)", sys::open(&j("n"), libc::O_WRONLY, 0)).ok();
    t.rec(
        "open n O_RDWR|O_CREAT|O_EXCL 0444 new",
        sys::open(&j("ro"), libc::O_RDWR | libc::O_CREAT | libc::O_EXCL, 0o444),
    )
    .ok();
    t.lstat("lstat ro", &j("ro"));
}

pub fn read_write(d: &Path, t: &mut Trace) {
    let f = d.join("f");
    if let Ok(fd) = t.rec("open f O_CREAT|O_RDWR", sys::open(&f, libc::O_CREAT | libc::O_RDWR, 0o644)) {
        t.rec("pwrite hello at 0", sys::pwrite(&fd, b"hello", 0)).ok();
        t.rec("pwrite world at 10 (hole)", sys::pwrite(&fd, b"world", 10)).ok();
        t.rec("pread 32 at 0", sys::pread(&fd, 32, 0)).ok();
        t.fstat("fstat", &fd);
        t.rec("lseek SET 0", sys::lseek(&fd, 0, libc::SEEK_SET)).ok();
        t.rec("read 3", sys::read(&fd, 3)).ok();
        t.rec("read 3", sys::read(&fd, 3)).ok();
        t.rec("lseek CUR 0", sys::lseek(&fd, 0, libc::SEEK_CUR)).ok();
        t.rec("pread 10 at 100 (past EOF)", sys::pread(&fd, 10, 100)).ok();
    }
    if let Ok(fd) = t.rec("open f O_WRONLY|O_APPEND", sys::open(&f, libc::O_WRONLY | libc::O_APPEND, 0)) {
        t.rec("write !!", sys::write(&fd, b"!!")).ok();
        t.rec("write ??", sys::write(&fd, b"??")).ok();
        t.rec("pread on a write-only fd", sys::pread(&fd, 4, 0)).ok();
    }
    t.read_file("read f", &f);
    if let Ok(fd) = t.rec("open f O_RDONLY", sys::open(&f, libc::O_RDONLY, 0)) {
        t.rec("write on a read-only fd", sys::write(&fd, b"x")).ok();
    }
    // A large write and read, crossing many pages and FUSE request sizes.
    let big: Vec<u8> = (0..3 * 1024 * 1024 + 17).map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    t.write_file("write 3 MiB", &d.join("big"), &big);
    t.read_file("read 3 MiB", &d.join("big"));
    if let Ok(fd) = t.rec("open big O_RDWR", sys::open(&d.join("big"), libc::O_RDWR, 0)) {
        t.rec("pwrite 5 bytes at 1 MiB - 2", sys::pwrite(&fd, b"ABCDE", 1024 * 1024 - 2)).ok();
        t.rec("pread 9 at 1 MiB - 4", sys::pread(&fd, 9, 1024 * 1024 - 4)).ok();
    }
    t.lstat("lstat big", &d.join("big"));
}

pub fn fsync_fsyncdir(d: &Path, t: &mut Trace) {
    let f = d.join("f");
    if let Ok(fd) = t.rec("open f O_CREAT|O_RDWR", sys::open(&f, libc::O_CREAT | libc::O_RDWR, 0o644)) {
        t.rec("write", sys::write(&fd, b"data")).ok();
        t.rec("fsync", sys::fsync(&fd)).ok();
        t.rec("fdatasync", sys::fdatasync(&fd)).ok();
    }
    if let Ok(fd) = t.rec("open f O_RDONLY", sys::open(&f, libc::O_RDONLY, 0)) {
        t.rec("fsync a read-only fd", sys::fsync(&fd)).ok();
    }
    t.rec("mkdir sub", sys::mkdir(&d.join("sub"), 0o755)).ok();
    if let Ok(fd) = t.rec("open sub O_DIRECTORY", sys::open(&d.join("sub"), libc::O_RDONLY | libc::O_DIRECTORY, 0)) {
        t.rec("fsync dir (fsyncdir)", sys::fsync(&fd)).ok();
        t.rec("fdatasync dir", sys::fdatasync(&fd)).ok();
    }
    if let Ok(fd) = t.rec("open . O_DIRECTORY", sys::open(d, libc::O_RDONLY | libc::O_DIRECTORY, 0)) {
        t.rec("fsync .", sys::fsync(&fd)).ok();
    }
    t.read_file("read f", &f);
}

pub fn fallocate(d: &Path, t: &mut Trace) {
    let f = d.join("f");
    let keep = libc::FALLOC_FL_KEEP_SIZE;
    if let Ok(fd) = t.rec("open f O_CREAT|O_RDWR", sys::open(&f, libc::O_CREAT | libc::O_RDWR, 0o644)) {
        t.rec("fallocate 0..8192", sys::fallocate(&fd, 0, 0, 8192)).ok();
        t.fstat("fstat (size 8192)", &fd);
        t.rec("fallocate KEEP_SIZE 8192..16384", sys::fallocate(&fd, keep, 8192, 8192)).ok();
        t.fstat("fstat (size kept, more blocks)", &fd);
        t.rec("pwrite data at 0", sys::pwrite(&fd, &[b'd'; 4096], 0)).ok();
        t.rec("punch hole 0..4096", sys::fallocate(&fd, libc::FALLOC_FL_PUNCH_HOLE | keep, 0, 4096)).ok();
        t.rec("pread 8 at 0 (zeros)", sys::pread(&fd, 8, 0)).ok();
        t.rec("punch hole without KEEP_SIZE", sys::fallocate(&fd, libc::FALLOC_FL_PUNCH_HOLE, 0, 4096)).ok();
        t.rec("fallocate length 0", sys::fallocate(&fd, 0, 0, 0)).ok();
        t.rec("pwrite data at 4096", sys::pwrite(&fd, &[b'e'; 4096], 4096)).ok();
        t.rec("zero range 4096..6144", sys::fallocate(&fd, libc::FALLOC_FL_ZERO_RANGE, 4096, 2048)).ok();
        t.rec("pread 8 at 6140", sys::pread(&fd, 8, 6140)).ok();
        t.rec("fallocate extends to 20000", sys::fallocate(&fd, 0, 16384, 20000 - 16384)).ok();
        t.fstat("fstat", &fd);
    }
    if let Ok(fd) = t.rec("open f O_RDONLY", sys::open(&f, libc::O_RDONLY, 0)) {
        t.rec("fallocate on a read-only fd", sys::fallocate(&fd, 0, 0, 4096)).ok();
    }
    t.lstat("lstat f", &f);
}

pub fn seek_data_hole(d: &Path, t: &mut Trace) {
    let f = d.join("sparse");
    const MIB: i64 = 1024 * 1024;
    if let Ok(fd) = t.rec("open sparse O_CREAT|O_RDWR", sys::open(&f, libc::O_CREAT | libc::O_RDWR, 0o644)) {
        t.rec("pwrite 4096 bytes at 0", sys::pwrite(&fd, &[b'a'; 4096], 0)).ok();
        t.rec("pwrite 1 byte at 1 MiB", sys::pwrite(&fd, b"z", MIB)).ok();
        t.rec("fsync", sys::fsync(&fd)).ok();
        t.rec("SEEK_DATA 0", sys::lseek(&fd, 0, libc::SEEK_DATA)).ok();
        t.rec("SEEK_HOLE 0", sys::lseek(&fd, 0, libc::SEEK_HOLE)).ok();
        t.rec("SEEK_DATA 4096", sys::lseek(&fd, 4096, libc::SEEK_DATA)).ok();
        t.rec("SEEK_HOLE 1 MiB", sys::lseek(&fd, MIB, libc::SEEK_HOLE)).ok();
        t.rec("SEEK_DATA 1 MiB + 1 (at EOF)", sys::lseek(&fd, MIB + 1, libc::SEEK_DATA)).ok();
        t.rec("SEEK_HOLE 2 MiB (past EOF)", sys::lseek(&fd, 2 * MIB, libc::SEEK_HOLE)).ok();
        t.rec("SEEK_END 0", sys::lseek(&fd, 0, libc::SEEK_END)).ok();
        t.rec("SEEK_SET -1", sys::lseek(&fd, -1, libc::SEEK_SET)).ok();
        t.rec("pread 2 at 1 MiB - 1", sys::pread(&fd, 2, MIB - 1)).ok();
    }
    t.lstat("lstat sparse", &f);
}

pub fn copy_file_range(d: &Path, t: &mut Trace) {
    let pattern: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    t.write_file("create src (10000 bytes)", &d.join("src"), &pattern);
    let src = t.rec("open src O_RDONLY", sys::open(&d.join("src"), libc::O_RDONLY, 0));
    let dst = t.rec("open dst O_CREAT|O_RDWR", sys::open(&d.join("dst"), libc::O_CREAT | libc::O_RDWR, 0o644));
    if let (Ok(src), Ok(dst)) = (&src, &dst) {
        t.rec("copy 5000 from 100 to 0", sys::copy_file_range(src, 100, dst, 0, 5000)).ok();
        t.note("expected dst", bytes(&pattern[100..5100]));
        t.rec("pread dst", sys::pread(dst, 6000, 0)).ok();
        t.fstat("fstat dst", dst);
        t.rec("copy past src EOF (from 9990, 100)", sys::copy_file_range(src, 9990, dst, 5000, 100)).ok();
        t.rec("copy 0 bytes", sys::copy_file_range(src, 0, dst, 0, 0)).ok();
        t.rec("copy at src EOF", sys::copy_file_range(src, 10_000, dst, 0, 10)).ok();
        t.rec("copy into the read-only src", sys::copy_file_range(dst, 0, src, 0, 10)).ok();
        t.rec("copy overlapping within dst", sys::copy_file_range(dst, 0, dst, 10, 100)).ok();
        t.rec("copy to dst at 8192 (hole before)", sys::copy_file_range(src, 0, dst, 8192, 100)).ok();
        t.fstat("fstat dst", dst);
    }
    // Closed first: reading while still open is `open_twice`'s business.
    drop((src, dst));
    t.read_file("read dst", &d.join("dst"));
}

pub fn open_twice(d: &Path, t: &mut Trace) {
    let f = d.join("f");
    t.write_file("create f", &f, b"first");
    let a = t.rec("open f O_RDONLY", sys::open(&f, libc::O_RDONLY, 0));
    let b = t.rec("open f O_RDONLY again (first still open)", sys::open(&f, libc::O_RDONLY, 0));
    let w = t.rec("open f O_WRONLY (both still open)", sys::open(&f, libc::O_WRONLY, 0));
    t.on("write through the writer", &w, |w| sys::pwrite(w, b"FIRST", 0));
    t.on("pread the first reader", &a, |fd| sys::pread(fd, 16, 0));
    t.on("pread the second reader", &b, |fd| sys::pread(fd, 16, 0));
    t.read_file("read f (a fourth open)", &f);
    drop((a, b, w));
    t.read_file("read f (all closed)", &f);
}

pub fn unlink_while_open(d: &Path, t: &mut Trace) {
    let f = d.join("f");
    t.write_file("create f", &f, b"keep");
    if let Ok(fd) = t.rec("open f O_RDWR", sys::open(&f, libc::O_RDWR, 0)) {
        t.rec("unlink f", sys::unlink(&f)).ok();
        t.lstat("lstat f", &f);
        t.fstat("fstat the open fd (nlink 0)", &fd);
        t.rec("pread", sys::pread(&fd, 16, 0)).ok();
        t.rec("pwrite more at 4", sys::pwrite(&fd, b"more", 4)).ok();
        t.rec("pread", sys::pread(&fd, 16, 0)).ok();
        t.rec("ftruncate 2", sys::ftruncate(&fd, 2)).ok();
        t.fstat("fstat", &fd);
        t.write_file("create f anew", &f, b"other");
        t.rec("pread the old fd", sys::pread(&fd, 16, 0)).ok();
        t.read_file("read f (the new file)", &f);
    }
    t.rec("readdir", sys::readdir(d)).ok();
}

/// Every call on an open fd reaches its file by the handle once the name is gone (unlinked, or
/// replaced by a rename): opened read-only after a whole read (seamfs defers that open until a
/// read comes) and read-write.
pub fn gone_while_open_by_fd(d: &Path, t: &mut Trace) {
    for (label, flags) in [("rdonly", libc::O_RDONLY), ("rdwr", libc::O_RDWR)] {
        for how in ["unlink", "rename over"] {
            let f = d.join(label);
            t.write_file("create f", &f, b"data");
            t.read_file("read f whole", &f);
            t.read_file("read f whole again", &f);
            let Ok(fd) = t.rec(&format!("open f {label}"), sys::open(&f, flags, 0)) else { continue };
            if how == "unlink" {
                t.rec("unlink f", sys::unlink(&f)).ok();
            } else {
                let g = d.join("g");
                t.write_file("create g", &g, b"other");
                t.rec("rename g over f", sys::rename2(&g, &f, 0)).ok();
            }
            t.fstat("fstat (nlink 0)", &fd);
            t.rec("fchmod 0600", sys::fchmod(&fd, 0o600)).ok();
            t.rec("fchown 1:1", sys::fchown(&fd, 1, 1)).ok();
            t.rec("futimens", sys::futimens(&fd, (1, 0), (2, 0))).ok();
            t.rec("fsetxattr", sys::fsetxattr(&fd, "user.k", b"v", 0)).ok();
            t.rec("fgetxattr", sys::fgetxattr(&fd, "user.k")).ok();
            t.rec("flistxattr", sys::flistxattr(&fd)).ok();
            t.rec("fremovexattr", sys::fremovexattr(&fd, "user.k")).ok();
            t.rec("pread", sys::pread(&fd, 16, 0)).ok();
            t.rec("ftruncate 2", sys::ftruncate(&fd, 2)).ok();
            t.rec("fallocate 8", sys::fallocate(&fd, 0, 0, 8)).ok();
            t.rec("fsync", sys::fsync(&fd)).ok();
            t.fstat("fstat", &fd);
            let _ = std::fs::remove_file(&f);
        }
    }
}
