//! A hostile other side against seamfs (issue 12): special files where refs should be, symref
//! cycles. seamfs must never block a request on them, never open a device, and never crash.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use seam_tests::sys;

use crate::hostbox::{Env, Repo};

const FILES: &[(&str, &str)] = &[("a.txt", "a\n")];

/// Reads `p` on a thread: how long it took, or None when it did not return within `bound`.
fn timed_read(p: PathBuf, bound: Duration) -> Option<(Duration, std::io::Result<Vec<u8>>)> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let t = Instant::now();
        let r = std::fs::read(&p);
        let _ = tx.send((t.elapsed(), r));
    });
    rx.recv_timeout(bound).ok()
}

/// Opens a FIFO's write side without blocking: releases a reader stuck in `open`, so a failing
/// test does not leave a seamfs thread blocked for good.
fn unblock_fifo(p: &Path) {
    let _ = sys::open(p, libc::O_WRONLY | libc::O_NONBLOCK, 0);
}

/// Makes `rel` in the host's view a FIFO (or, with `dev`, a character device).
fn special(r: &Repo, rel: &str, dev: Option<u64>) -> PathBuf {
    let p = r.h(rel);
    std::fs::remove_file(&p).unwrap_or_else(|e| panic!("rm {}: {e}", p.display()));
    match dev {
        None => sys::mkfifo(&p, 0o644),
        Some(d) => sys::mknod(&p, libc::S_IFCHR | 0o644, d),
    }
    .unwrap_or_else(|e| panic!("mknod {}: {e}", p.display()));
    p
}

/// HEAD's branch is a FIFO: the box's first read of HEAD (which makes seamfs read the branch
/// as data) answers within 1 s. Old seamfs blocked in `open` of the FIFO.
#[test]
fn a_fifo_as_heads_branch_never_blocks_seamfs() {
    let env = Env::new("hostile-fifo-ref", &[]);
    let r = env.host_repo("repo", FILES);
    let fifo = special(&r, ".git/refs/heads/main", None);
    let got = timed_read(r.b(".git/HEAD"), Duration::from_secs(1));
    if got.is_none() {
        unblock_fifo(&fifo);
    }
    let (took, res) = got.unwrap_or_else(|| panic!("reading HEAD through the mount blocked over 1 s:\n{}", env.log()));
    eprintln!("HEAD read in {took:?} with a FIFO as its branch");
    assert_eq!(res.expect("read HEAD"), b"ref: refs/heads/main\n");
    assert!(env.mount.is_mounted(), "seamfs died");
    env.finish();
}

/// A character device as HEAD's branch is looked at, never opened, by seamfs: strace of the
/// daemon shows each open of the name with `O_PATH`.
#[test]
fn a_device_as_heads_branch_is_never_opened_by_seamfs() {
    let env = Env::new("hostile-dev-ref", &[]);
    let r = env.host_repo("repo", FILES);
    special(&r, ".git/refs/heads/main", Some(libc::makedev(1, 3)));
    let trace = env.backing.join("strace.out");
    let pid = env.mount.daemon_pid().to_string();
    let mut strace = std::process::Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=open,openat,openat2", "-p", &pid, "-o"])
        .arg(&trace)
        .spawn()
        .expect("strace is needed for this test");
    // strace attaches asynchronously: wait until it wrote its first line about the daemon.
    std::thread::sleep(Duration::from_millis(500));
    let read = timed_read(r.b(".git/HEAD"), Duration::from_secs(2));
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: signalling the strace we started, by pid.
    unsafe { libc::kill(strace.id() as i32, libc::SIGINT) };
    let _ = strace.wait();
    let text = std::fs::read_to_string(&trace).unwrap_or_default();
    // By its path from the lower root, or by its name from the branch directory kept open a
    // moment (ADR 0035).
    let opens: Vec<&str> = text.lines().filter(|l| l.contains("refs/heads/main\"") || l.contains("\"main\"")).collect();
    eprintln!("seamfs's opens of refs/heads/main:\n{}", opens.join("\n"));
    assert!(read.is_some_and(|(_, r)| r.is_ok()), "reading HEAD failed or blocked:\n{}", env.log());
    assert!(!opens.is_empty(), "seamfs never looked at HEAD's branch: the test proves nothing\n{text}");
    for l in &opens {
        assert!(l.contains("O_PATH"), "seamfs opened the device for real: {l}");
    }
    env.finish();
}

/// `refs/heads/a` -> `ref: refs/heads/b` -> `ref: refs/heads/a`, with HEAD on `a`: the box's
/// reads and git commands fail as git's own do, and seamfs does not crash (old seamfs
/// recursed until its stack overflowed, which aborted the daemon).
#[test]
fn a_symref_cycle_does_not_crash_seamfs() {
    let env = Env::new("hostile-symref-cycle", &[]);
    let r = env.host_repo("repo", FILES);
    std::fs::write(r.h(".git/refs/heads/a"), "ref: refs/heads/b\n").expect("write a");
    std::fs::write(r.h(".git/refs/heads/b"), "ref: refs/heads/a\n").expect("write b");
    std::fs::write(r.h(".git/HEAD"), "ref: refs/heads/a\n").expect("write HEAD");
    let got = timed_read(r.b(".git/HEAD"), Duration::from_secs(2));
    let res = env.try_box(&r, &["commit", "--allow-empty", "-q", "-m", "on a cycle"]);
    assert!(env.mount.is_mounted() && sys::stat(&r.b(".git")).is_ok(), "seamfs died on the cycle:\n{}", env.log());
    let (_, head) = got.expect("reading HEAD did not return");
    assert_eq!(head.expect("read HEAD"), b"ref: refs/heads/a\n");
    eprintln!("box commit on the cycle: exit {:?}\n{}", res.code(), res.stderr);
    // Repaired by the host, the repository works through the same mount.
    std::fs::write(r.h(".git/HEAD"), "ref: refs/heads/main\n").expect("repair HEAD");
    env.boxed(&r, &["commit", "--allow-empty", "-q", "-m", "after the repair"]);
    env.finish();
}

/// A FUSE mount whose daemon is stopped (SIGSTOP): any lookup into it hangs, as a dead NFS
/// server or an automount would. SIGCONT on drop, so its guard can unmount it.
struct Frozen {
    mount: seam_tests::Mount,
    _dirs: (seam_tests::TempDir, seam_tests::TempDir),
}

impl Frozen {
    fn new(label: &str) -> Frozen {
        let (lower, mnt) = (seam_tests::TempDir::new(&format!("{label}-frozen-lower")), seam_tests::TempDir::new(&format!("{label}-frozen-mnt")));
        let mount = seam_tests::Mount::seamfs(lower.path(), mnt.path(), &[]);
        // SAFETY: kill(2) of the daemon this test started, by pid.
        unsafe { libc::kill(mount.daemon_pid() as i32, libc::SIGSTOP) };
        Frozen { mount, _dirs: (lower, mnt) }
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        if let Some(pid) = self.mount.find_daemon() {
            // SAFETY: as above.
            unsafe { libc::kill(pid as i32, libc::SIGCONT) };
        }
    }
}

/// A branch directory that is a symlink into a hung mount, and HEAD naming a ref below it
/// (`refs/heads/x -> <frozen mount>`, `ref: refs/heads/x/y`): reading that ref must not walk
/// through the link. Old code looked `x/y` up with `fstatat` and `linkat`, which follow links in
/// the middle of a path, and hung in the frozen mount.
fn plant_link_into_frozen(r: &Repo, frozen: &Frozen) {
    std::os::unix::fs::symlink(frozen.mount.path(), r.h(".git/refs/heads/x")).expect("symlink");
    std::fs::write(r.h(".git/HEAD"), "ref: refs/heads/x/y\n").expect("write HEAD");
}

#[test]
fn a_ref_below_a_symlinked_dir_is_not_looked_up_by_seamfs() {
    let frozen = Frozen::new("hostile-link-seamfs");
    let env = Env::new("hostile-link-seamfs", &[]);
    let r = env.host_repo("repo", FILES);
    plant_link_into_frozen(&r, &frozen);
    let got = timed_read(r.b(".git/HEAD"), Duration::from_secs(2));
    // Thaw before any assertion: a hung worker would also keep the mount's guard waiting.
    drop(frozen);
    let (took, res) = got.unwrap_or_else(|| panic!("reading HEAD blocked: seamfs walked through the link:\n{}", env.log()));
    eprintln!("HEAD read in {took:?} with its branch below a symlink into a frozen mount");
    assert_eq!(res.expect("read HEAD"), b"ref: refs/heads/x/y\n");
    env.finish();
}

#[test]
fn a_ref_below_a_symlinked_dir_is_not_looked_up_by_seamd() {
    let frozen = Frozen::new("hostile-link-seamd");
    let t = seam_tests::TempDir::new("hostile-link-seamd");
    let git = seam_tests::Git::new();
    let host = t.subdir("checkout");
    git.run(&host, &["init", "-q"]);
    git.run(&host, &["commit", "-q", "--allow-empty", "-m", "base"]);
    let r = Repo { host: host.clone(), boxed: host.clone() };
    // A whole index as a proposal makes seamd read HEAD (its name's head and base are made up).
    // Before the link: git itself would walk through it and hang.
    git.run(&host, &["read-tree", "HEAD"]);
    let index = std::fs::read(r.h(".git/index")).expect("read the index");
    std::fs::write(r.h(&format!(".git/index.seam-proposed.{}.{}.ff", "1".repeat(40), "2".repeat(40))), index).expect("write");
    plant_link_into_frozen(&r, &frozen);
    let mut seamd = std::process::Command::new(seam_tests::bins::bin("seamd"))
        .args(["run", "--once"])
        .arg(&host)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start seamd");
    let t0 = Instant::now();
    let mut done = None;
    while t0.elapsed() < Duration::from_secs(2) && done.is_none() {
        done = seamd.try_wait().expect("wait seamd");
        std::thread::sleep(Duration::from_millis(10));
    }
    if done.is_none() {
        let _ = seamd.kill();
    }
    let out = seamd.wait_with_output().expect("seamd output");
    drop(frozen);
    let log = String::from_utf8_lossy(&out.stderr);
    eprintln!("seamd after {:?}: {log}", t0.elapsed());
    assert!(done.is_some(), "seamd hung: it walked through the link into the frozen mount");
    assert!(log.contains("HEAD"), "seamd did not get to HEAD: the test proves nothing\n{log}");
}
