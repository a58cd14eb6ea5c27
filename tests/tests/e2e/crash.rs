//! A daemon killed with SIGKILL: the mount reports ENOTCONN, `seamfs umount` clears it, and
//! the repository on the backing dir is intact (git writes objects and refs by rename, and
//! seamfs must not add a way to tear them).

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use seam_tests::mount::seamfs_cmd;
use seam_tests::sys::{self, Errno};
use seam_tests::{procfs, Git, Mount, TempDir};

fn kill_and_wait(pid: u32) {
    // SAFETY: kill(2) of the daemon this test started.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0, "kill -9 {pid}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !procfs::fully_exited(pid) {
        assert!(Instant::now() < deadline, "daemon {pid} survived SIGKILL for 10 s");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The work-tree TTL the crash mounts use, so the test knows when cached attributes expire.
const TTL: &str = "0.5";

/// After the kill: ENOTCONN, then `seamfs umount` exits 0 and the mountpoint is a plain
/// directory again.
fn check_dead_mount_and_clear(m: &Mount) {
    let enotconn = Err(Errno(libc::ENOTCONN));
    // Requests the kernel cannot answer from its cache fail at once.
    assert_eq!(sys::statvfs(m.path()).map(drop), enotconn, "statfs of the dead mount");
    assert_eq!(sys::readdir(m.path()).map(drop), enotconn, "readdir of the dead mount");
    assert_eq!(
        sys::stat(&m.join("repo/.git/index")).map(drop),
        enotconn,
        "stat of the index (entry TTL 0) below the dead mount"
    );
    // The root's attributes, and a live ref's entry and attributes (ADR 0038; a ref read from
    // the page cache leaves them valid, ADR 0040), may be served from the kernel's cache until
    // their TTL ends.
    std::thread::sleep(Duration::from_secs_f64(TTL.parse::<f64>().expect("a number") * 2.0));
    assert_eq!(sys::stat(m.path()).map(drop), enotconn, "stat of the dead mount once its TTL ({TTL} s) ran out");
    assert_eq!(
        sys::stat(&m.join("repo/.git/HEAD")).map(drop),
        enotconn,
        "stat of a live ref below the dead mount once its TTL ({TTL} s) ran out"
    );
    assert!(m.is_mounted(), "a killed daemon's mount stays in /proc/mounts until cleared");
    let r = seamfs_cmd(&[std::ffi::OsStr::new("umount"), m.path().as_os_str()]);
    assert_eq!(r.code(), Some(0), "seamfs umount of a dead mount:\n{r}");
    assert!(!m.is_mounted(), "still in /proc/mounts after seamfs umount");
    let st = sys::stat(m.path()).expect("the mountpoint is reachable again");
    assert_eq!(st.st_mode & libc::S_IFMT, libc::S_IFDIR);
    assert_eq!(
        std::fs::read_dir(m.path()).expect("list the bare mountpoint").count(),
        0,
        "the bare mountpoint is not empty"
    );
}

#[test]
fn sigkill_when_idle() {
    let backing = TempDir::new("crash-idle-backing");
    let mnt = TempDir::new("crash-idle-mnt");
    let m = Mount::seamfs(backing.path(), mnt.path(), &["--ttl", TTL]);
    let git = Git::new();
    let repo = m.join("repo");
    std::fs::create_dir(&repo).expect("mkdir through seamfs");
    git.run(&repo, &["init", "-q"]);
    for i in 0..3 {
        std::fs::write(repo.join(format!("f{i}")), format!("{i}\n")).expect("write through seamfs");
        git.run(&repo, &["add", "-A"]);
        git.run(&repo, &["commit", "-q", "-m", &format!("c{i}")]);
    }
    let head = git.run(&repo, &["rev-parse", "HEAD"]);

    kill_and_wait(m.daemon_pid());
    check_dead_mount_and_clear(&m);

    let on_backing = backing.join("repo");
    git.fsck(&on_backing);
    assert_eq!(git.run(&on_backing, &["rev-parse", "HEAD"]), head, "HEAD on the backing dir");
    assert_eq!(git.run(&on_backing, &["rev-list", "--count", "HEAD"]).trim(), "3");
}

#[test]
fn sigkill_during_commits() {
    let backing = TempDir::new("crash-busy-backing");
    let mnt = TempDir::new("crash-busy-mnt");
    let m = Mount::seamfs(backing.path(), mnt.path(), &["--ttl", TTL]);
    let git = Git::new();
    let repo = m.join("repo");
    std::fs::create_dir(&repo).expect("mkdir through seamfs");
    git.run(&repo, &["init", "-q"]);

    // A loop of commits through the mount, killed under it.
    let scripts = TempDir::new("crash-busy-script");
    let script = scripts.join("loop.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\ni=0\nwhile [ $i -lt 100000 ]; do\n  i=$((i+1))\n  echo $i > f$((i % 50))\n  \
         git add -A && git commit -q -m c$i || exit 1\ndone\n",
    )
    .expect("write the loop script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let mut cmd = Command::new("/bin/sh");
    cmd.arg(&script).current_dir(&repo).stdout(Stdio::null()).stderr(Stdio::piped());
    git.env(&mut cmd);
    let mut child = cmd.spawn().expect("start the commit loop");

    // Let some commits land first.
    let deadline = Instant::now() + Duration::from_secs(20);
    while git.try_run(&backing.join("repo"), &["rev-list", "--count", "HEAD"]).stdout.trim().parse::<u32>().unwrap_or(0)
        < 5
    {
        assert!(Instant::now() < deadline, "the commit loop made fewer than 5 commits in 20 s");
        assert!(child.try_wait().expect("poll the loop").is_none(), "the commit loop stopped early");
        std::thread::sleep(Duration::from_millis(50));
    }
    kill_and_wait(m.daemon_pid());
    let out = child.wait_with_output().expect("the commit loop ends once the mount is dead");
    assert!(!out.status.success(), "the commit loop should fail on the dead mount");

    check_dead_mount_and_clear(&m);
    let on_backing = backing.join("repo");
    // Objects and refs are whole; a lock the killed git left behind may remain.
    git.fsck(&on_backing);
    let n: u32 = git.run(&on_backing, &["rev-list", "--count", "HEAD"]).trim().parse().expect("a count");
    assert!(n >= 5, "only {n} commits on the backing dir");
}

/// seamfs SIGKILLed while its sealed heal holds the shared `index.lock` (held open by delaying
/// the daemon's renames with strace): the next mount of the same lower removes that lock within
/// 1 s, from the record seamfs kept beside it (old seamfs left it, blocking host git for good).
#[test]
fn sigkill_while_the_heal_holds_index_lock_is_released_on_the_next_mount() {
    let backing = TempDir::new("crash-heal-lock-backing");
    let mnt = TempDir::new("crash-heal-lock-mnt");
    let git = Git::new();
    let host = crate::round_trips::repo(backing.path());
    let m = Mount::seamfs(backing.path(), mnt.path(), &["--ttl", TTL]);
    let boxed = m.join("repo");
    std::fs::write(boxed.join("b.txt"), "b\n").expect("write through the mount");
    git.run(&boxed, &["add", "b.txt"]);
    let pid = m.daemon_pid();
    // Every rename of the daemon waits 5 s: the heal takes index.lock, then renames the ref.
    let mut strace = Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=rename,renameat,renameat2", "-e", "inject=rename,renameat,renameat2:delay_enter=5000000", "-o", "/dev/null", "-p"])
        .arg(pid.to_string())
        .spawn()
        .expect("strace is needed for this test");
    std::thread::sleep(Duration::from_millis(500));
    let mut commit = git.cmd(&boxed, &["commit", "-q", "-m", "box"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("spawn");
    let lock = host.join(".git/index.lock");
    let t0 = Instant::now();
    while !lock.exists() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let held = lock.exists();
    std::thread::sleep(Duration::from_millis(100));
    kill_and_wait(pid);
    let _ = strace.wait();
    let _ = commit.wait();
    assert!(held, "the heal never took index.lock: the test proves nothing\n{}", m.log());
    eprintln!("killed seamfs while it held {}", lock.display());
    assert!(lock.exists(), "index.lock vanished with the kill");
    let r = seamfs_cmd(&[std::ffi::OsStr::new("umount"), m.path().as_os_str()]);
    assert_eq!(r.code(), Some(0), "seamfs umount of the dead mount:\n{r}");
    drop(m);
    let m = Mount::seamfs(backing.path(), mnt.path(), &["--ttl", TTL]);
    let t1 = Instant::now();
    // The lock goes first, then its record (a crash between leaves a record, never a lock
    // without one): wait for both.
    let record = host.join(".git/index.seam-held");
    while (lock.exists() || record.exists()) && t1.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!lock.exists(), "the dead seamfs's index.lock is still there 1 s after the next mount:\n{}", m.log());
    eprintln!("released {:?} after the mount", t1.elapsed());
    assert!(!record.exists(), "the record stayed 1 s after the next mount");
    git.run(&host, &["status", "--porcelain"]);
    git.fsck(&host);
    m.unmount();
}

/// seamfs SIGKILLed while it holds the shared `index.lock` for a box process that rewrites the
/// work tree (ADR 0032): the next mount of the same lower removes it within 1 s, from the record
/// seamfs now keeps for that lock as for the heal's (before, only the box process's death was
/// covered, by the reaper of the seamfs that died with it: the lock stayed, blocking host git).
#[test]
fn sigkill_while_a_box_rewrite_holds_index_lock_is_released_on_the_next_mount() {
    let backing = TempDir::new("crash-rewrite-lock-backing");
    let mnt = TempDir::new("crash-rewrite-lock-mnt");
    let git = Git::new();
    let host = crate::round_trips::repo(backing.path());
    let m = Mount::seamfs(backing.path(), mnt.path(), &["--ttl", TTL]);
    let boxed = m.join("repo");
    git.run(&boxed, &["status", "--porcelain"]);
    let mut child = crate::hostbox::Child::spawn(&boxed, "lock .git/index.lock\nunlink a.txt\nsignal unlinked\nhold\n");
    child.wait_for("unlinked");
    let lock = host.join(".git/index.lock");
    let held = lock.exists();
    kill_and_wait(m.daemon_pid());
    child.kill9();
    assert!(held, "seamfs never took the shared index.lock for the rewrite: the test proves nothing\n{}", m.log());
    assert!(lock.exists(), "index.lock vanished with the kill");
    let r = seamfs_cmd(&[std::ffi::OsStr::new("umount"), m.path().as_os_str()]);
    assert_eq!(r.code(), Some(0), "seamfs umount of the dead mount:\n{r}");
    drop(m);
    let m = Mount::seamfs(backing.path(), mnt.path(), &["--ttl", TTL]);
    let record = host.join(".git/index.seam-held");
    let t1 = Instant::now();
    while (lock.exists() || record.exists()) && t1.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!lock.exists(), "the dead seamfs's index.lock is still there 1 s after the next mount:\n{}", m.log());
    assert!(!record.exists(), "the record stayed 1 s after the next mount");
    std::fs::write(host.join("a.txt"), "a\nhost\n").expect("write");
    git.run(&host, &["commit", "-qam", "host commit after the release"]);
    m.unmount();
}

/// The box's own rebase stops on a conflict; seamfs is unmounted and mounted again; the box
/// resolves and runs `git rebase --continue`, which moves HEAD. seamfs knows the rebase is the
/// box's from the record beside it (`index-box.<id>.seam-ops`); old seamfs kept that in memory only,
/// took the rebase for the host's after the restart and refused every HEAD move.
#[test]
fn a_restart_during_the_boxs_own_rebase_lets_it_continue() {
    let backing = TempDir::new("crash-own-rebase-backing");
    let mnt = TempDir::new("crash-own-rebase-mnt");
    let git = Git::new();
    let host = backing.join("repo");
    std::fs::create_dir(&host).expect("mkdir");
    git.run(&host, &["init", "-q"]);
    std::fs::write(host.join("a.txt"), "base\n").expect("write");
    git.run(&host, &["add", "a.txt"]);
    git.run(&host, &["commit", "-q", "-m", "base"]);
    let m = Mount::seamfs(backing.path(), mnt.path(), &["--ttl", TTL]);
    let boxed = m.join("repo");
    git.run(&boxed, &["checkout", "-q", "-b", "topic"]);
    std::fs::write(boxed.join("a.txt"), "topic\n").expect("write");
    git.run(&boxed, &["commit", "-q", "-am", "topic"]);
    git.run(&boxed, &["checkout", "-q", "main"]);
    std::fs::write(boxed.join("a.txt"), "main\n").expect("write");
    git.run(&boxed, &["commit", "-q", "-am", "main"]);
    git.run(&boxed, &["checkout", "-q", "topic"]);
    let r = git.try_run(&boxed, &["rebase", "main"]);
    assert!(!r.success() && host.join(".git/rebase-merge").is_dir(), "the box's rebase did not stop on its conflict:\n{r}");
    m.unmount();
    let m = Mount::seamfs(backing.path(), mnt.path(), &["--ttl", TTL]);
    std::fs::write(boxed.join("a.txt"), "resolved\n").expect("resolve");
    git.run(&boxed, &["add", "a.txt"]);
    let mut cont = git.cmd(&boxed, &["rebase", "--continue"]);
    cont.env("GIT_EDITOR", "true");
    let r = seam_tests::run::run(&mut cont);
    assert!(r.success(), "rebase --continue after the restart failed:\n{r}\n{}", m.log());
    assert!(!host.join(".git/rebase-merge").exists(), "the rebase did not finish");
    assert_eq!(git.run(&host, &["log", "--format=%s", "-n", "2", "topic"]), "topic\nmain\n");
    eprintln!("the box's rebase continued after the restart");
    m.unmount();
}
