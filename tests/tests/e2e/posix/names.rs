//! Cases that create, remove and move names: symlink, mknod, mkdir, unlink, rmdir, rename
//! (plain, RENAME_NOREPLACE, RENAME_EXCHANGE), link, readdir. Several check that a node
//! reached by a new path after a move still leads to the right file, since seamfs keeps its
//! nodes by path.

use std::path::Path;

use super::trace::Trace;
use seam_tests::sys;

pub fn symlink_readlink(d: &Path, t: &mut Trace) {
    let l = d.join("l");
    t.rec("symlink l -> target/x", sys::symlink("target/x", &l)).ok();
    t.rec("readlink l", sys::readlink(&l)).ok();
    t.lstat("lstat l", &l);
    t.rec("symlink l again", sys::symlink("y", &l)).ok();
    t.write_file("create f", &d.join("f"), b"x");
    t.rec("readlink f (not a link)", sys::readlink(&d.join("f"))).ok();
    t.rec("readlink missing", sys::readlink(&d.join("missing"))).ok();
    let long = "d/".repeat(500);
    t.rec("symlink long (1000-byte target)", sys::symlink(&long, &d.join("long"))).ok();
    t.rec("readlink long", sys::readlink(&d.join("long"))).ok();
    t.rec("symlink abs -> /proc/self", sys::symlink("/proc/self", &d.join("abs"))).ok();
    t.rec("readlink abs", sys::readlink(&d.join("abs"))).ok();
    t.rec("symlink empty target", sys::symlink("", &d.join("empty"))).ok();
    t.rec("symlink rel -> f", sys::symlink("f", &d.join("rel"))).ok();
    t.read_file("read through rel", &d.join("rel"));
    t.rec("symlink in missing dir", sys::symlink("f", &d.join("missing/l"))).ok();
    t.rec("symlink loop a -> b", sys::symlink("b", &d.join("a"))).ok();
    t.rec("symlink loop b -> a", sys::symlink("a", &d.join("b"))).ok();
    t.stat("stat a (loop)", &d.join("a"));
}

pub fn mknod_fifo(d: &Path, t: &mut Trace) {
    let p = d.join("p");
    t.rec("mkfifo p 0640", sys::mkfifo(&p, 0o640)).ok();
    t.lstat("lstat p", &p);
    t.rec("mkfifo p again", sys::mkfifo(&p, 0o640)).ok();
    let r = t.rec("open p O_RDONLY|O_NONBLOCK", sys::open(&p, libc::O_RDONLY | libc::O_NONBLOCK, 0));
    let w = t.rec("open p O_WRONLY|O_NONBLOCK", sys::open(&p, libc::O_WRONLY | libc::O_NONBLOCK, 0));
    if let (Ok(r), Ok(w)) = (r, w) {
        t.rec("write ping", sys::write(&w, b"ping")).ok();
        t.rec("read", sys::read(&r, 16)).ok();
    }
    t.rec("mknod sock", sys::mknod(&d.join("sock"), libc::S_IFSOCK | 0o600, 0)).ok();
    t.lstat("lstat sock", &d.join("sock"));
    t.rec("mknod chr 1:3", sys::mknod(&d.join("null"), libc::S_IFCHR | 0o666, libc::makedev(1, 3))).ok();
    t.lstat("lstat chr", &d.join("null"));
    t.rec("mknod reg", sys::mknod(&d.join("reg"), libc::S_IFREG | 0o600, 0)).ok();
    t.lstat("lstat reg", &d.join("reg"));
    t.rec("mkfifo in missing dir", sys::mkfifo(&d.join("missing/p"), 0o600)).ok();
}

pub fn mkdir(d: &Path, t: &mut Trace) {
    let a = d.join("a");
    t.rec("mkdir a 0750", sys::mkdir(&a, 0o750)).ok();
    t.lstat("lstat a", &a);
    t.rec("mkdir a again", sys::mkdir(&a, 0o750)).ok();
    t.rec("mkdir missing/b", sys::mkdir(&d.join("missing/b"), 0o755)).ok();
    t.write_file("create f", &d.join("f"), b"x");
    t.rec("mkdir f/b (under a file)", sys::mkdir(&d.join("f/b"), 0o755)).ok();
    t.rec("mkdir a/b", sys::mkdir(&a.join("b"), 0o700)).ok();
    t.lstat("lstat a (nlink 3)", &a);
    t.rec("chown a 0:1000", sys::chown(&a, 0, 1000)).ok();
    t.rec("chmod a 02775", sys::chmod(&a, 0o2775)).ok();
    t.rec("mkdir a/g (inherits setgid and group)", sys::mkdir(&a.join("g"), 0o755)).ok();
    t.lstat("lstat a/g", &a.join("g"));
    t.write_file("create a/gf", &a.join("gf"), b"x");
    t.lstat("lstat a/gf (group inherited)", &a.join("gf"));
    t.rec("mkdir a/b/c/d (no parents)", sys::mkdir(&a.join("b/c/d"), 0o755)).ok();
    t.rec("mkdir with mode 07777", sys::mkdir(&d.join("all"), 0o7777)).ok();
    t.lstat("lstat all", &d.join("all"));
}

pub fn unlink(d: &Path, t: &mut Trace) {
    let f = d.join("f");
    t.write_file("create f", &f, b"x");
    t.rec("unlink f", sys::unlink(&f)).ok();
    t.lstat("lstat f", &f);
    t.rec("unlink f again", sys::unlink(&f)).ok();
    t.rec("mkdir sub", sys::mkdir(&d.join("sub"), 0o755)).ok();
    t.rec("unlink sub (a directory)", sys::unlink(&d.join("sub"))).ok();
    t.rec("symlink l -> sub", sys::symlink("sub", &d.join("l"))).ok();
    t.rec("unlink l", sys::unlink(&d.join("l"))).ok();
    t.lstat("lstat sub (still there)", &d.join("sub"));
    t.rec("unlink missing/x", sys::unlink(&d.join("missing/x"))).ok();
    t.write_file("create f again", &f, b"second");
    t.read_file("read f (the new file)", &f);
    t.rec("readdir", sys::readdir(d)).ok();
}

pub fn rmdir(d: &Path, t: &mut Trace) {
    t.rec("mkdir e", sys::mkdir(&d.join("e"), 0o755)).ok();
    t.rec("rmdir e", sys::rmdir(&d.join("e"))).ok();
    t.lstat("lstat e", &d.join("e"));
    t.rec("rmdir e again", sys::rmdir(&d.join("e"))).ok();
    t.rec("mkdir n", sys::mkdir(&d.join("n"), 0o755)).ok();
    t.write_file("create n/f", &d.join("n/f"), b"x");
    t.rec("rmdir n (not empty)", sys::rmdir(&d.join("n"))).ok();
    t.rec("rmdir n/f (a file)", sys::rmdir(&d.join("n/f"))).ok();
    t.rec("rmdir n/. ", sys::rmdir(&d.join("n/."))).ok();
    t.rec("rmdir n/sub/.. ", sys::rmdir(&d.join("n/sub/.."))).ok();
    t.rec("unlink n/f", sys::unlink(&d.join("n/f"))).ok();
    t.rec("rmdir n", sys::rmdir(&d.join("n"))).ok();
    t.rec("symlink l -> n", sys::symlink("n", &d.join("l"))).ok();
    t.rec("rmdir l (a symlink)", sys::rmdir(&d.join("l"))).ok();
    t.rec("mkdir e again", sys::mkdir(&d.join("e"), 0o700)).ok();
    t.lstat("lstat e (the new one)", &d.join("e"));
    t.rec("readdir", sys::readdir(d)).ok();
}

pub fn rename(d: &Path, t: &mut Trace) {
    let j = |n: &str| d.join(n);
    t.write_file("create a", &j("a"), b"A");
    t.rec("rename a b", sys::rename2(&j("a"), &j("b"), 0)).ok();
    t.lstat("lstat a", &j("a"));
    t.read_file("read b", &j("b"));
    t.write_file("create c", &j("c"), b"C");
    let held = t.rec("open c (held across the replace)", sys::open(&j("c"), libc::O_RDONLY, 0));
    t.rec("rename b c (replaces c)", sys::rename2(&j("b"), &j("c"), 0)).ok();
    t.read_file("read c (now A)", &j("c"));
    t.lstat("lstat b", &j("b"));
    if let Ok(fd) = held {
        t.rec("read the held fd (old c)", sys::pread(&fd, 16, 0)).ok();
    }
    t.rec("mkdir d1", sys::mkdir(&j("d1"), 0o755)).ok();
    t.write_file("create d1/f", &j("d1/f"), b"F");
    t.rec("rename d1 d2", sys::rename2(&j("d1"), &j("d2"), 0)).ok();
    t.read_file("read d2/f", &j("d2/f"));
    t.lstat("lstat d1/f", &j("d1/f"));
    t.rec("mkdir d1 again", sys::mkdir(&j("d1"), 0o755)).ok();
    t.lstat("lstat d1/f (new empty d1)", &j("d1/f"));
    t.write_file("create d2/g", &j("d2/g"), b"G");
    t.rec("mkdir d3", sys::mkdir(&j("d3"), 0o755)).ok();
    t.write_file("create d3/x", &j("d3/x"), b"x");
    t.rec("rename d2 d3 (not empty)", sys::rename2(&j("d2"), &j("d3"), 0)).ok();
    t.rec("mkdir d4", sys::mkdir(&j("d4"), 0o755)).ok();
    t.rec("rename d2 d4 (empty target)", sys::rename2(&j("d2"), &j("d4"), 0)).ok();
    t.read_file("read d4/f", &j("d4/f"));
    t.read_file("read d4/g", &j("d4/g"));
    t.rec("rename c d4 (file onto dir)", sys::rename2(&j("c"), &j("d4"), 0)).ok();
    t.rec("rename d4 c (dir onto file)", sys::rename2(&j("d4"), &j("c"), 0)).ok();
    t.rec("rename d4 d4/sub (into itself)", sys::rename2(&j("d4"), &j("d4/sub"), 0)).ok();
    t.rec("rename missing x", sys::rename2(&j("missing"), &j("x"), 0)).ok();
    t.rec("rename c d3/c (across dirs)", sys::rename2(&j("c"), &j("d3/c"), 0)).ok();
    t.read_file("read d3/c", &j("d3/c"));
    t.rec("rename d3/c d3/c (same name)", sys::rename2(&j("d3/c"), &j("d3/c"), 0)).ok();
    t.rec("rename d4 d3/d4 (dir across dirs)", sys::rename2(&j("d4"), &j("d3/d4"), 0)).ok();
    t.read_file("read d3/d4/f", &j("d3/d4/f"));
    t.write_file("write d3/d4/f", &j("d3/d4/f"), b"F2");
    t.read_file("read d3/d4/f", &j("d3/d4/f"));
    t.rec("readdir d3", sys::readdir(&j("d3"))).ok();
}

pub fn rename_noreplace(d: &Path, t: &mut Trace) {
    let j = |n: &str| d.join(n);
    t.write_file("create a", &j("a"), b"A");
    t.write_file("create b", &j("b"), b"B");
    t.rec("rename a b NOREPLACE", sys::rename2(&j("a"), &j("b"), libc::RENAME_NOREPLACE)).ok();
    t.read_file("read a", &j("a"));
    t.read_file("read b", &j("b"));
    t.rec("rename a c NOREPLACE", sys::rename2(&j("a"), &j("c"), libc::RENAME_NOREPLACE)).ok();
    t.read_file("read c", &j("c"));
    t.lstat("lstat a", &j("a"));
    t.rec("mkdir sub", sys::mkdir(&j("sub"), 0o755)).ok();
    t.rec("rename c sub NOREPLACE", sys::rename2(&j("c"), &j("sub"), libc::RENAME_NOREPLACE)).ok();
    t.rec("rename sub sub2 NOREPLACE", sys::rename2(&j("sub"), &j("sub2"), libc::RENAME_NOREPLACE)).ok();
    t.lstat("lstat sub2", &j("sub2"));
    t.rec("rename missing z NOREPLACE", sys::rename2(&j("missing"), &j("z"), libc::RENAME_NOREPLACE)).ok();
}

pub fn rename_exchange(d: &Path, t: &mut Trace) {
    let j = |n: &str| d.join(n);
    let x = libc::RENAME_EXCHANGE;
    t.write_file("create a", &j("a"), b"A");
    t.write_file("create b", &j("b"), b"B");
    t.rec("exchange a b", sys::rename2(&j("a"), &j("b"), x)).ok();
    t.read_file("read a (B)", &j("a"));
    t.read_file("read b (A)", &j("b"));
    t.rec("mkdir d1", sys::mkdir(&j("d1"), 0o755)).ok();
    t.write_file("create d1/f", &j("d1/f"), b"1");
    t.rec("mkdir d2", sys::mkdir(&j("d2"), 0o700)).ok();
    t.write_file("create d2/g", &j("d2/g"), b"2");
    t.rec("exchange d1 d2", sys::rename2(&j("d1"), &j("d2"), x)).ok();
    t.read_file("read d1/g", &j("d1/g"));
    t.read_file("read d2/f", &j("d2/f"));
    t.lstat("lstat d1/f", &j("d1/f"));
    t.lstat("lstat d1", &j("d1"));
    t.rec("exchange a missing", sys::rename2(&j("a"), &j("missing"), x)).ok();
    t.rec("exchange a (file) d1 (dir)", sys::rename2(&j("a"), &j("d1"), x)).ok();
    t.lstat("lstat a (now the dir)", &j("a"));
    t.read_file("read a/g", &j("a/g"));
    t.read_file("read d1 (now the file)", &j("d1"));
    t.rec("exchange with NOREPLACE too", sys::rename2(&j("a"), &j("b"), x | libc::RENAME_NOREPLACE)).ok();
    t.rec("exchange b d2/f (across dirs)", sys::rename2(&j("b"), &j("d2/f"), x)).ok();
    t.read_file("read b", &j("b"));
    t.read_file("read d2/f", &j("d2/f"));
}

pub fn link(d: &Path, t: &mut Trace) {
    let j = |n: &str| d.join(n);
    t.write_file("create f", &j("f"), b"F");
    t.rec("link f g", sys::link(&j("f"), &j("g"))).ok();
    t.lstat("lstat f (nlink 2)", &j("f"));
    t.lstat("lstat g", &j("g"));
    t.read_file("read g", &j("g"));
    t.rec("link f g again", sys::link(&j("f"), &j("g"))).ok();
    t.rec("mkdir sub", sys::mkdir(&j("sub"), 0o755)).ok();
    t.rec("link sub sub2 (a directory)", sys::link(&j("sub"), &j("sub2"))).ok();
    t.rec("link missing x", sys::link(&j("missing"), &j("x"))).ok();
    t.rec("link f missing/x", sys::link(&j("f"), &j("missing/x"))).ok();
    t.rec("link f sub/h (other dir)", sys::link(&j("f"), &j("sub/h"))).ok();
    t.lstat("lstat f (nlink 3)", &j("f"));
    t.rec("unlink f", sys::unlink(&j("f"))).ok();
    t.read_file("read g after unlinking f", &j("g"));
    t.lstat("lstat g (nlink 2)", &j("g"));
    t.write_file("rewrite g", &j("g"), b"G2");
    t.read_file("read sub/h (same file)", &j("sub/h"));
    t.rec("symlink l -> g", sys::symlink("g", &j("l"))).ok();
    t.rec("link l l2 (the symlink itself)", sys::link(&j("l"), &j("l2"))).ok();
    t.lstat("lstat l2", &j("l2"));
    t.rec("readlink l2", sys::readlink(&j("l2"))).ok();
}

pub fn readdir(d: &Path, t: &mut Trace) {
    let j = |n: &str| d.join(n);
    t.write_file("create f", &j("f"), b"x");
    t.rec("mkdir sub", sys::mkdir(&j("sub"), 0o755)).ok();
    t.rec("symlink l", sys::symlink("f", &j("l"))).ok();
    t.rec("mkfifo p", sys::mkfifo(&j("p"), 0o644)).ok();
    t.write_file("create sub/x", &j("sub/x"), b"x");
    t.rec("readdir .", sys::readdir(d)).ok();
    t.rec("readdir sub", sys::readdir(&j("sub"))).ok();
    t.rec("readdir missing", sys::readdir(&j("missing"))).ok();
    t.rec("readdir f (a file)", sys::readdir(&j("f"))).ok();
    // Enough long names to need several readdir buffers.
    t.rec("mkdir big", sys::mkdir(&j("big"), 0o755)).ok();
    let names: Vec<String> = (0..1500).map(|i| format!("entry-{i:05}-{}", "n".repeat(60))).collect();
    for n in &names {
        if let Err(e) = sys::open(&j("big").join(n), libc::O_CREAT | libc::O_WRONLY, 0o644) {
            t.note("create the 1500 entries", format!("failed at {n}: {e}"));
            break;
        }
    }
    let listed = sys::readdir(&j("big"));
    t.rec("readdir big", listed.clone()).ok();
    if let Ok(l) = listed {
        let got: std::collections::BTreeSet<&str> = l.iter().map(|(n, _)| n.as_str()).collect();
        let missing: Vec<&String> = names.iter().filter(|n| !got.contains(n.as_str())).collect();
        t.note("names created but not listed", format!("{missing:?}"));
    }
    for n in names.iter().step_by(3) {
        let _ = sys::unlink(&j("big").join(n));
    }
    t.rec("readdir big after removing a third", sys::readdir(&j("big"))).ok();
}
