//! Names more than `PATH_MAX` below the mount's root, reached through an fd of their directory
//! (`/proc/self/fd/N/name`): seamfs's path on the lower is then longer than one syscall takes
//! (`node_modules` and generated trees get that deep).

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::trace::Trace;
use seam_tests::sys;

/// 24 levels of 200-byte names: about 4,800 bytes below the mount's root.
const LEVELS: usize = 24;

fn via(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

pub fn deep_paths(d: &Path, t: &mut Trace) {
    let name = "d".repeat(200);
    let Ok(top) = t.rec("open the case dir", sys::open(d, libc::O_PATH | libc::O_DIRECTORY, 0)) else { return };
    let mut dirs = vec![top];
    for i in 0..LEVELS {
        let here = via(dirs.last().expect("the case dir"));
        t.rec(&format!("mkdir level {i}"), sys::mkdir(&here.join(&name), 0o755)).ok();
        match sys::open(&here.join(&name), libc::O_PATH | libc::O_DIRECTORY, 0) {
            Ok(fd) => dirs.push(fd),
            Err(e) => return t.note(&format!("open level {i}"), format!("Err({e})")),
        }
    }
    let here = via(dirs.last().expect("the deepest dir"));
    let (f, g, l, p, sub) = (here.join("f"), here.join("g"), here.join("l"), here.join("p"), here.join("sub"));
    t.write_file("create f", &f, b"deep");
    t.lstat("lstat f", &f);
    t.rec("chmod f 0600", sys::chmod(&f, 0o600)).ok();
    t.rec("chown f 1:1", sys::chown(&f, 1, 1)).ok();
    t.rec("truncate f 2", sys::truncate(&f, 2)).ok();
    t.rec("utimens f", sys::utimens(&f, (1, 0), (2, 0), 0)).ok();
    t.read_file("read f", &f);
    t.rec("setxattr f", sys::setxattr(&f, "user.k", b"v", 0, false)).ok();
    t.rec("getxattr f", sys::getxattr(&f, "user.k", 64, false)).ok();
    t.rec("open f O_EXCL", sys::open(&f, libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY, 0o644)).ok();
    t.rec("link f g", sys::link(&f, &g)).ok();
    t.rec("symlink l -> f", sys::symlink("f", &l)).ok();
    t.rec("readlink l", sys::readlink(&l)).ok();
    t.rec("mkfifo p", sys::mkfifo(&p, 0o644)).ok();
    t.rec("mkdir sub", sys::mkdir(&sub, 0o755)).ok();
    t.rec("rename g sub/g", sys::rename2(&g, &sub.join("g"), 0)).ok();
    t.rec("readdir", sys::readdir(&here)).ok();
    t.rec("unlink sub/g", sys::unlink(&sub.join("g"))).ok();
    t.rec("rmdir sub", sys::rmdir(&sub)).ok();
    for n in [&f, &l, &p] {
        t.rec(&format!("unlink {}", n.file_name().expect("a name").to_string_lossy()), sys::unlink(n)).ok();
    }
    // A whole deep tree renamed: its open directory fds still lead to it.
    let mid = via(&dirs[LEVELS / 2]);
    t.rec("rename a deep subtree", sys::rename2(&mid.join(&name), &mid.join("moved"), 0)).ok();
    t.rec("readdir the deepest dir after", sys::readdir(&here)).ok();
    t.rec("rename it back", sys::rename2(&mid.join("moved"), &mid.join(&name), 0)).ok();
    dirs.pop();
    while let Some(fd) = dirs.pop() {
        let r = sys::rmdir(&via(&fd).join(&name));
        t.rec(&format!("rmdir level {}", dirs.len()), r).ok();
    }
}
