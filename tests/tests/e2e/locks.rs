//! Lock files across kernels: a host-held lock is waited for (bounded by `--lock-wait-ms`), a lock
//! whose box creator died is removed within about a second, a live holder's lock and a host's
//! lock are never removed, and a lock the host just released can be taken at once.
//!
//! Host locks are made directly on the backing dir; box locks by a box process through the
//! mount (box git, or the scripted child of `hostbox`, which can be killed at a known point).

use std::time::{Duration, Instant};

use seam_tests::sys;

use crate::hostbox::{bytes, lines_with, locks_below, wait_until, write, Child, Env};

const FILES: &[(&str, &str)] = &[("a.txt", "a\n")];

#[test]
fn host_held_lock_makes_the_box_wait_then_fail() {
    let env = Env::new("locks-host-held", &[]);
    let r = env.host_repo("repo", FILES);
    let config = bytes(&r.h(".git/config"));
    write(&r.h(".git/config.lock"), "held by the host\n");
    let t = Instant::now();
    let res = env.try_box(&r, &["config", "x.y", "z"]);
    let took = t.elapsed();
    assert!(!res.success(), "box git config succeeded although the host holds config.lock:\n{res}");
    assert!(
        res.stderr.contains("File exists") || res.stderr.contains("could not lock"),
        "the failure should be git's lock error (EEXIST):\n{res}"
    );
    assert!(
        took >= Duration::from_millis(950),
        "the box did not wait for the host's lock (lock-wait 1000 ms): {took:?}"
    );
    assert_eq!(bytes(&r.h(".git/config")), config, "config changed");
    assert_eq!(std::fs::read_to_string(r.h(".git/config.lock")).expect("the host's lock"), "held by the host\n");
    env.finish();
}

#[test]
fn lock_wait_is_configurable() {
    let env = Env::new("locks-wait-ms", &["--lock-wait-ms", "2500"]);
    let r = env.host_repo("repo", FILES);
    write(&r.h(".git/config.lock"), "held by the host\n");
    let t = Instant::now();
    let res = env.try_box(&r, &["config", "x.y", "z"]);
    let took = t.elapsed();
    assert!(!res.success(), "{res}");
    assert!(took >= Duration::from_millis(2400), "--lock-wait-ms 2500 but the box gave up after {took:?}");
    env.finish();
}

#[test]
fn host_lock_released_within_the_wait_lets_the_box_through() {
    let env = Env::new("locks-released", &[]);
    let r = env.host_repo("repo", FILES);
    let lock = r.h(".git/config.lock");
    write(&lock, "held by the host\n");
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        std::fs::remove_file(lock).expect("release the host's lock");
    });
    let res = env.try_box(&r, &["config", "x.y", "z"]);
    release.join().expect("the releasing thread");
    assert!(res.success(), "a host lock released after 200 ms should not fail the box (lock-wait 1000 ms):\n{res}");
    assert_eq!(env.host(&r, &["config", "x.y"]), "z\n");
    env.finish();
}

#[test]
fn a_dead_box_processes_lock_is_released() {
    let env = Env::new("locks-orphan", &[]);
    let r = env.host_repo("repo", FILES);
    let mut child = Child::spawn(&r.b(".git"), "lock config.lock\nsignal locked\nhold\n");
    child.wait_for("locked");
    assert_eq!(child.report(), "lock config.lock ok\n");
    assert!(r.h(".git/config.lock").is_file(), "the child's lock is not on the lower");
    child.kill9();
    let t = Instant::now();
    let gone = wait_until(Duration::from_millis(1500), || !r.h(".git/config.lock").exists());
    assert!(gone, "the lock of a SIGKILLed box process is still there after 1.5 s:\n{}", env.log());
    eprintln!("orphan lock removed {:?} after the kill", t.elapsed());
    assert_eq!(lines_with(&env.log(), "removed a lock left by a box process that died").len(), 1, "{}", env.log());
    env.boxed(&r, &["config", "after.orphan", "yes"]);
    assert_eq!(env.host(&r, &["config", "after.orphan"]), "yes\n");
    env.finish();
}

#[test]
fn a_live_holders_lock_stays() {
    let env = Env::new("locks-live", &[]);
    let r = env.host_repo("repo", FILES);
    let mut child = Child::spawn(&r.b(".git"), "lock config.lock\nsignal locked\nhold\n");
    child.wait_for("locked");
    std::thread::sleep(Duration::from_secs(2));
    assert!(r.h(".git/config.lock").is_file(), "a live box process's lock was removed:\n{}", env.log());
    // Another box process cannot take it.
    let res = env.try_box(&r, &["config", "x.y", "z"]);
    assert!(!res.success(), "box git config took a lock a live box process holds:\n{res}");
    assert!(r.h(".git/config.lock").is_file(), "the live holder's lock is gone after a competing git");
    child.kill9();
    assert!(
        wait_until(Duration::from_millis(1500), || !r.h(".git/config.lock").exists()),
        "not released after the holder died"
    );
    env.finish();
}

/// A box `touch` of a lock that the host created while seamfs was about to create it opens
/// the host's file; the toucher then exits, and the host's lock stays (old seamfs recorded the
/// toucher as its creator, and the reaper removed the host's live lock).
///
/// The window is made wide and certain: the box locks a branch that reads as absent while its
/// reflog has entries, so seamfs waits before its exclusive create; the host takes the lock and
/// writes the branch meanwhile.
#[test]
fn a_touched_foreign_lock_is_never_reaped() {
    let env = Env::new("locks-touched", &[]);
    let r = env.host_repo("repo", FILES);
    let head = env.host_rev(&r, "HEAD");
    write(&r.h(".git/logs/refs/heads/x"), &format!("{} {head} t <t@e> 0 +0000\tbranch: made\n", "0".repeat(40)));
    let mut child = Child::spawn(&r.b(".git"), "signal ready\ntouch refs/heads/x.lock\n");
    child.wait_for("ready");
    std::thread::sleep(Duration::from_millis(200));
    let lock = r.h(".git/refs/heads/x.lock");
    let fd = sys::open(&lock, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o644).expect("the host takes the lock");
    sys::write(&fd, b"host\n").expect("write the host's lock");
    let host_ino = sys::fstat(&fd).expect("fstat").st_ino;
    write(&r.h(".git/refs/heads/x"), &format!("{head}\n"));
    let report = child.finish();
    eprintln!("box: {report}host lock inode {host_ino}");
    // The event this test is about: the box's open got the host's file, not one of its own.
    assert_eq!(report, format!("touch refs/heads/x.lock ok ino={host_ino}\n"), "the box did not open the host's lock:\n{}", env.log());
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        std::fs::read_to_string(&lock).ok().as_deref(),
        Some("host\n"),
        "the host's live lock was removed after the box process that touched it exited:\n{}",
        env.log()
    );
    assert!(!env.log().contains("removed a lock"), "{}", env.log());
    drop(fd);
    std::fs::remove_file(&lock).expect("the host releases");
    env.finish();
}

#[test]
fn a_host_created_lock_is_never_removed() {
    let env = Env::new("locks-host-kept", &[]);
    let r = env.host_repo("repo", FILES);
    let locks = [".git/config.lock", ".git/refs/heads/main.lock", ".git/HEAD.lock"];
    for l in locks {
        write(&r.h(l), "host\n");
    }
    // The box looks at them and trips over them.
    for l in locks {
        assert!(sys::stat(&r.b(l)).is_ok(), "the box does not see the host's {l}");
    }
    let res = env.try_box(&r, &["config", "x.y", "z"]);
    assert!(!res.success(), "{res}");
    std::thread::sleep(Duration::from_secs(2));
    for l in locks {
        assert_eq!(
            std::fs::read_to_string(r.h(l)).ok().as_deref(),
            Some("host\n"),
            "the host's {l} was removed or changed:\n{}",
            env.log()
        );
    }
    assert!(!env.log().contains("removed a lock"), "{}", env.log());
    env.finish();
}

#[test]
fn no_spurious_file_exists_after_the_host_releases() {
    // A box lookup of a host-held lock waits (lock-wait) before it answers: keep that short here.
    let env = Env::new("locks-fresh", &["--lock-wait-ms", "100"]);
    let r = env.host_repo("repo", FILES);
    let (host_lock, box_lock) = (r.h(".git/config.lock"), r.b(".git/config.lock"));
    for i in 0..20 {
        write(&host_lock, "host\n");
        assert!(sys::stat(&box_lock).is_ok(), "round {i}: the box does not see the host's lock");
        std::fs::remove_file(&host_lock).expect("host releases");
        let fd = sys::open(&box_lock, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o644)
            .unwrap_or_else(|e| panic!("round {i}: the box could not take a lock the host released: {e}"));
        drop(fd);
        sys::unlink(&box_lock).expect("the box releases");
        assert!(!host_lock.exists());
    }
    write(&host_lock, "host\n");
    assert!(sys::stat(&box_lock).is_ok());
    std::fs::remove_file(&host_lock).expect("host releases");
    env.boxed(&r, &["config", "after.release", "yes"]);
    assert_eq!(env.host(&r, &["config", "after.release"]), "yes\n");
    env.finish();
}

#[test]
fn kill9_of_box_commits_leaves_no_lock() {
    let env = Env::new("locks-kill-commit", &[]);
    let r = env.host_repo("repo", FILES);
    let gitdir = r.h(".git");
    // Deterministic "random" delays (an LCG), 0..60 ms.
    let mut seed: u64 = 0x5eaf5;
    let mut next = || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) % 60
    };
    let (mut landed, mut holding) = (0, 0);
    for i in 0..20 {
        write(&r.b(&format!("f{}.txt", i % 5)), &format!("{i}\n"));
        env.boxed(&r, &["add", "-A"]);
        let before = env.host_rev(&r, "HEAD");
        let mut commit = env.git.cmd(&r.boxed, &["commit", "-q", "-m", &format!("c{i}")]);
        let mut proc_ =
            commit.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().expect("spawn");
        std::thread::sleep(Duration::from_millis(next()));
        // SAFETY: kill(2) of our own child.
        unsafe { libc::kill(proc_.id() as i32, libc::SIGKILL) };
        let _ = proc_.wait();
        // Right after the kill, before the reaper's next pass (200 ms): did it hold a lock?
        if !locks_below(&gitdir).is_empty() {
            holding += 1;
        }
        let clear = wait_until(Duration::from_millis(1500), || locks_below(&gitdir).is_empty());
        assert!(
            clear,
            "iteration {i}: locks left 1.5 s after kill -9 of box git commit: {:?}\n{}",
            locks_below(&gitdir),
            env.log()
        );
        if env.host_rev(&r, "HEAD") != before {
            landed += 1;
        }
    }
    eprintln!("{landed} of 20 killed commits landed; {holding} kills landed while git held a lock");
    assert!(holding > 0, "no kill landed while git held a lock: the test proves nothing about their release");
    env.git.fsck(&r.host);
    env.git.fsck(&r.boxed);
    // Both sides still work.
    env.boxed(&r, &["add", "-A"]);
    env.boxed(&r, &["commit", "-q", "--allow-empty", "-m", "after the kills"]);
    assert!(crate::hostbox::status(&env.git, &r.boxed).is_empty());
    assert!(
        crate::hostbox::staged(&env.git, &r.host).is_empty(),
        "the host's index does not match HEAD after the kills"
    );
    env.finish();
}

/// The process that holds a pid namespace open for a daemon started inside it (its pid 1),
/// found by a unique tag in its arguments and SIGKILLed by pid on drop (after the mount's own
/// guard unmounted: declare it first). The namespace's other processes die with it.
struct NsHolder {
    tag: String,
}

impl NsHolder {
    /// Where the daemon's arguments wait for it.
    fn args(&self) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("{}.args", self.tag))
    }
}

impl Drop for NsHolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.args());
        for pid in seam_tests::procfs::pids_with_arg(&self.tag) {
            // SAFETY: kill(2) of the namespace holder this test started, by pid.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    }
}

/// seamfs as a container would run it: in its own pid namespace with the host's /proc. FUSE
/// gives pid 0 for the test's processes (outside that namespace) and /proc/self is not seamfs's
/// pid: seamfs says it runs without the reaper, and a pid-0 caller's lock outlives the caller
/// untouched (old seamfs read pid 0 as dead and removed the live lock at once).
#[test]
fn seamfs_in_another_pid_namespace_never_reaps() {
    let holder = NsHolder { tag: format!("seam-ns-holder-{}-{}", std::process::id(), line!()) };
    let env = Env::with_mount("locks-pidns", &[], |lower, mnt, args| {
        // Pid 1 of the new namespace runs seamfs, then waits, so the daemon's namespace lives
        // on; the outer sh returns once the mount is up. The arguments go through a file, so
        // only the daemon carries the mount's unique `--log` (how the guard finds it).
        let script = format!(
            "printf '%s\\0' \"$0\" \"$@\" > {args}\n\
             setsid unshare --pid --fork xargs -0 -a {args} sh -c '\"$0\" \"$@\" || exit 1; exec sh -c \"while :; do sleep 1; done\" {tag}' </dev/null >/dev/null 2>&1 &\n\
             for i in $(seq 200); do grep -qF ' {mnt} fuse' /proc/mounts && exit 0; sleep 0.05; done; exit 1",
            args = holder.args().display(),
            tag = holder.tag,
            mnt = mnt.display()
        );
        let mut argv: Vec<std::ffi::OsString> = vec!["-c".into(), script.into(), seam_tests::bins::seamfs().into(), "mount".into(), lower.into(), mnt.into()];
        argv.extend(args.iter().map(std::ffi::OsString::from));
        seam_tests::Mount::start("seamfs in a pid namespace", std::path::Path::new("/bin/sh"), argv, lower, mnt)
    });
    let r = env.host_repo("repo", FILES);
    let mut child = Child::spawn(&r.b(".git"), "lock config.lock\nsignal locked\n");
    child.wait_for("locked");
    assert_eq!(child.finish(), "lock config.lock ok\n");
    // The event: a pid-0 caller made a lock, and it is gone.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(r.h(".git/config.lock").is_file(), "a pid-0 caller's lock was removed:\n{}", env.log());
    assert!(!env.log().contains("removed a lock"), "{}", env.log());
    assert!(env.log().contains("no lock reaper"), "no word about the reaper:\n{}", env.log());
    assert!(env.log().contains("outside seamfs's pid namespace (pid 0) created a lock"), "the caller was not pid 0:\n{}", env.log());
    std::fs::remove_file(r.h(".git/config.lock")).expect("release by hand");
    env.finish();
    drop(holder);
}
