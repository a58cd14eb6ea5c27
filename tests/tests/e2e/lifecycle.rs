//! The daemon's life as a box bootstrap sees it: signals end in a clean unmount, a second
//! mount is refused, `seamfs umount` touches only seamfs and says what it did, `--over` warns
//! about processes it cannot move.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use seam_tests::mount::seamfs_cmd;
use seam_tests::run::{Bg, Ran};
use seam_tests::{procfs, Git, Mount, TempDir};

/// A repository with one commit at `dir` (through whatever is mounted there).
fn repo_with_a_commit(dir: &Path) -> Git {
    let git = Git::new();
    std::fs::create_dir_all(dir).expect("mkdir the repo");
    git.run(dir, &["init", "-q"]);
    std::fs::write(dir.join("a.txt"), "a\n").expect("write a.txt");
    git.run(dir, &["add", "a.txt"]);
    git.run(dir, &["commit", "-q", "-m", "one"]);
    git
}

fn wait_exited(pid: u32, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !procfs::fully_exited(pid) {
        assert!(Instant::now() < deadline, "{what}: daemon {pid} still running after 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn umount_cmd(p: &Path) -> Ran {
    seamfs_cmd(&[OsStr::new("umount"), p.as_os_str()])
}

/// Lines of a daemon log at WARN or ERROR.
fn warnings(log: &str) -> Vec<&str> {
    log.lines().filter(|l| l.contains(" WARN ") || l.contains(" ERROR ")).collect()
}

#[test]
fn sigterm_sigint_sighup_end_in_a_clean_unmount() {
    for (sig, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT"), (libc::SIGHUP, "SIGHUP")] {
        let lower = TempDir::new("sig-lower");
        let mnt = TempDir::new("sig-mnt");
        let m = Mount::seamfs(lower.path(), mnt.path(), &[]);
        let git = repo_with_a_commit(&m.join("repo"));
        let pid = m.daemon_pid();
        // Several times: the signal may land on any thread of the daemon.
        // SAFETY: kill(2) of the daemon this test started.
        assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0, "kill -{name} {pid}");
        wait_exited(pid, name);
        assert!(!m.is_mounted(), "{name}: {} still mounted after the daemon exited (a dead mount)\n{}", mnt.path().display(), m.log());
        assert!(m.log().contains("signal received, unmounting"), "{name}: the signal was not handled:\n{}", m.log());
        assert_eq!(warnings(&m.log()), Vec::<&str>::new(), "{name}: warnings on a clean unmount");
        git.fsck(&lower.join("repo"));
    }
}

#[test]
fn clean_unmount_logs_no_warning() {
    let lower = TempDir::new("clean-lower");
    let mnt = TempDir::new("clean-mnt");
    let m = Mount::seamfs(lower.path(), mnt.path(), &[]);
    repo_with_a_commit(&m.join("repo"));
    let pid = m.daemon_pid();
    umount_cmd(mnt.path()).ok();
    // `seamfs umount` returns once the daemon is gone.
    assert!(procfs::fully_exited(pid), "seamfs umount returned before daemon {pid} exited");
    assert!(!m.is_mounted());
    assert_eq!(warnings(&m.log()), Vec::<&str>::new(), "warnings on a clean unmount:\n{}", m.log());
}

#[test]
fn the_kernel_type_is_fuse_seamfs() {
    let lower = TempDir::new("type-lower");
    let mnt = TempDir::new("type-mnt");
    let m = Mount::seamfs(lower.path(), mnt.path(), &[]);
    let found = procfs::mount_at(mnt.path()).expect("mounted");
    assert_eq!(found.fstype, "fuse.seamfs");
    let r = seam_tests::run::run(Command::new("findmnt").args(["-n", "-t", "fuse.seamfs", "-o", "TARGET"]).arg(mnt.path()));
    assert_eq!(r.stdout.trim(), mnt.path().to_string_lossy(), "findmnt -t fuse.seamfs:\n{r}");
    m.unmount();
}

#[test]
fn a_second_mount_over_is_refused_naming_the_pid() {
    let t = TempDir::new("twice");
    let dir = t.subdir("checkout");
    let git = repo_with_a_commit(&dir);
    let m = Mount::seamfs_over(&dir, &[]);
    let pid = m.daemon_pid();
    let r = seamfs_cmd(&[OsStr::new("mount"), OsStr::new("--over"), dir.as_os_str()]);
    let stacked = procfs::mounts().iter().filter(|l| l.target == dir).count();
    if stacked > 1 {
        // The guard unmounts one mount: take the extra one off before failing.
        let _ = umount_cmd(&dir);
        panic!("a second seamfs is stacked on {}:\n{r}", dir.display());
    }
    assert_eq!(r.code(), Some(2), "{r}");
    assert!(r.stderr.contains("already a seamfs mount") && r.stderr.contains(&format!("pid {pid}")), "{r}");
    // Nor on a separate mountpoint that is a seamfs mount already.
    let other = t.subdir("other");
    let r = seamfs_cmd(&[OsStr::new("mount"), other.as_os_str(), dir.as_os_str()]);
    assert_eq!(r.code(), Some(2), "{r}");
    assert!(r.stderr.contains("already a seamfs mount"), "{r}");
    git.run(&dir, &["status", "--porcelain"]);
    git.fsck(&dir);
    m.unmount();
}

/// A tmpfs mounted by the test, unmounted on drop.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn at(p: &Path) -> Tmpfs {
        seam_tests::run::run(Command::new("mount").args(["-t", "tmpfs", "seam-test-tmpfs"]).arg(p)).ok();
        Tmpfs(p.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        seam_tests::mount::detach_all(&self.0, "tmpfs");
    }
}

#[test]
fn umount_refuses_what_is_not_seamfs() {
    let t = TempDir::new("umount-other");
    let dir = t.subdir("tmpfs");
    let tmpfs = Tmpfs::at(&dir);
    let r = umount_cmd(&dir);
    assert_eq!(r.code(), Some(2), "{r}");
    assert!(r.stderr.contains("not seamfs") && r.stderr.contains(&*dir.to_string_lossy()), "{r}");
    assert!(procfs::mount_at(&dir).is_some_and(|m| m.fstype == "tmpfs"), "seamfs umount unmounted a tmpfs");
    drop(tmpfs);
    let r = umount_cmd(&dir);
    assert_eq!(r.code(), Some(2), "nothing mounted is bad input:\n{r}");
}

#[test]
fn umount_after_over_leaves_the_share_beneath() {
    let backing = TempDir::new("umount-share-backing");
    let share_mnt = TempDir::new("umount-share");
    let share = Mount::share(backing.path(), share_mnt.path(), &[]);
    let m = Mount::seamfs_over(share_mnt.path(), &[]);
    umount_cmd(share_mnt.path()).ok();
    assert!(!m.is_mounted() || procfs::mount_at(share_mnt.path()).is_some_and(|l| l.fstype != "fuse.seamfs"));
    let r = umount_cmd(share_mnt.path());
    assert_eq!(r.code(), Some(2), "a second seamfs umount must refuse the share beneath:\n{r}");
    assert!(share.is_mounted(), "the share beneath was unmounted");
    drop(m);
    share.unmount();
}

#[test]
fn umount_of_a_busy_mount_says_it_detached_lazily() {
    let lower = TempDir::new("busy-lower");
    let mnt = TempDir::new("busy-mnt");
    let m = Mount::seamfs(lower.path(), mnt.path(), &[]);
    std::fs::create_dir(m.join("sub")).expect("mkdir");
    let pid = m.daemon_pid();
    let sleeper = Bg::spawn(Command::new("sleep").arg("60").current_dir(m.join("sub")).stdin(Stdio::null()));
    let r = umount_cmd(mnt.path());
    assert_eq!(r.code(), Some(0), "{r}");
    assert!(r.stderr.contains("lazily") && r.stderr.contains(&sleeper.pid().to_string()), "should say it detached lazily and who held it:\n{r}");
    assert!(!m.is_mounted(), "detached: gone from the tree");
    assert!(procfs::alive(pid), "the daemon serves the process still inside");
    drop(sleeper);
    wait_exited(pid, "after the last user left");
}

#[test]
fn mount_on_a_dead_mount_says_to_umount_it() {
    let lower = TempDir::new("dead-lower");
    let mnt = TempDir::new("dead-mnt");
    let m = Mount::seamfs(lower.path(), mnt.path(), &[]);
    let pid = m.daemon_pid();
    // SAFETY: kill(2) of the daemon this test started.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    wait_exited(pid, "SIGKILL");
    let r = seamfs_cmd(&[OsStr::new("mount"), lower.path().as_os_str(), mnt.path().as_os_str()]);
    assert_eq!(r.code(), Some(2), "{r}");
    assert!(r.stderr.contains(&format!("seamfs umount {}", mnt.path().display())), "no hint to clear the dead mount:\n{r}");
    let r = umount_cmd(mnt.path()).ok();
    assert!(r.stderr.contains("died"), "should say it cleared a dead mount:\n{r}");
    assert!(!m.is_mounted());
}

#[test]
fn over_warns_about_processes_already_inside() {
    let t = TempDir::new("over-users");
    let dir = t.subdir("checkout");
    std::fs::create_dir(dir.join("sub")).expect("mkdir");
    std::fs::write(dir.join("held.txt"), "x\n").expect("write");
    let in_cwd = Bg::spawn(Command::new("sleep").arg("60").current_dir(dir.join("sub")).stdin(Stdio::null()));
    let held = std::fs::File::open(dir.join("held.txt")).expect("open held.txt");
    let with_file = Bg::spawn(Command::new("sleep").arg("61").current_dir("/").stdin(held));
    let (m, r) = Mount::seamfs_over_reporting(&dir, &[]);
    for p in [&in_cwd, &with_file] {
        assert!(r.stderr.contains(&format!("{} sleep", p.pid())), "pid {} not named:\n{r}", p.pid());
    }
    assert!(r.stderr.contains("warning") && r.stderr.contains("held.txt"), "{r}");
    drop((in_cwd, with_file));
    m.unmount();
}
