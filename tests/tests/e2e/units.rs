//! The box's systemd unit, exercised: its ExecStart and ExecStop (the bootstrap's `up` and
//! `down`) run as systemd would, 10 start/stop cycles over a share while git runs in the
//! checkout, and no cycle leaves a dead mount or a daemon behind.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use seam_tests::run::{run, Bg, Ran};
use seam_tests::{bins, procfs, Git, Mount, TempDir};

fn dist() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../dist")
}

/// The unit's `key=` command line, with the install paths and specifiers of this test.
fn unit_command(unit: &str, key: &str, checkout: &Path, opts: &str) -> String {
    let line = unit.lines().find_map(|l| l.strip_prefix(&format!("{key}="))).unwrap_or_else(|| panic!("no {key}= in the unit"));
    line.replace("/usr/local/sbin/seamfs-bootstrap", &dist().join("box/seamfs-bootstrap").display().to_string())
        .replace("%f", &checkout.display().to_string())
        .replace("$SEAMFS_OPTS", opts)
}

fn exec(cmd: &str) -> Ran {
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", bins::bin_dir().display());
    run(Command::new("sh").args(["-c", cmd]).env("PATH", path))
}

fn wait_exited(pid: u32, within: Duration) {
    let deadline = Instant::now() + within;
    while !procfs::fully_exited(pid) {
        assert!(Instant::now() < deadline, "daemon {pid} still running {within:?} after ExecStop (TimeoutStopSec)");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn box_unit_start_stop_cycles_while_git_runs() {
    let unit = std::fs::read_to_string(dist().join("box/seamfs@.service")).expect("read the box unit");
    assert!(unit.contains("RequiresMountsFor=%f"), "the unit must order itself after the share's mount");
    let backing = TempDir::new("unit-backing");
    let co = TempDir::new("unit-checkout");
    let share = Mount::share(backing.path(), co.path(), &[]);
    let _unit = Stopped(co.path().to_path_buf());
    let git = Git::new();
    git.run(co.path(), &["init", "-q"]);
    git.run(co.path(), &["commit", "-q", "--allow-empty", "-m", "base"]);
    let logs = TempDir::new("unit-log");
    let log = logs.join("seamfs.log");
    let opts = format!("--ttl 0.5 --log {}", log.display());
    let (start, stop) = (unit_command(&unit, "ExecStart", co.path(), &opts), unit_command(&unit, "ExecStop", co.path(), &opts));

    let c = co.path().display();
    let mut sh = Command::new("sh");
    // Reads only: box commits racing other box git over --over can deadlock the daemon on a
    // pre-existing bug (gix resolves the objects dir's real path through seamfs's own mount).
    // Without optional locks, as IDE pollers run it: two box gits racing for index.lock
    // would fail each other's commits as plain git does.
    sh.args(["-c", &format!("while :; do git -C {c} --no-optional-locks status --porcelain; git -C {c} log -1 --format=%H; done")]);
    git.env(&mut sh);
    let looping = Bg::spawn(sh.stdout(Stdio::null()).stderr(Stdio::null()));
    for cycle in 0..10 {
        exec(&start).ok();
        let top = procfs::mount_at(co.path()).expect("mounted");
        assert_eq!(top.fstype, "fuse.seamfs", "cycle {cycle}: ExecStart left {top:?}");
        let pid = *procfs::pids_with_arg(&log.display().to_string()).first().expect("the daemon runs");
        commit_beside_the_loop(&git, co.path(), cycle);
        std::thread::sleep(Duration::from_millis(100));
        exec(&stop).ok();
        let top = procfs::mount_at(co.path()).expect("the share is still there");
        assert_eq!(top.fstype, share_type(&share), "cycle {cycle}: ExecStop left {top:?}");
        wait_exited(pid, Duration::from_secs(30));
        let dead: Vec<_> = procfs::mounts().into_iter().filter(|m| m.fstype == "fuse.seamfs" && m.target.starts_with("/tmp/seam-e2e-")).filter(|m| m.target.starts_with(co.path())).collect();
        assert!(dead.is_empty(), "cycle {cycle}: seamfs mounts left: {dead:?}");
    }
    drop(looping);
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    // A lookup the loop's git had in flight when the unmount went through is dropped by the
    // kernel with the connection; fuser then logs that its answer found no request. Benign.
    let errors: Vec<&str> = log_text
        .lines()
        .filter(|l| l.contains(" ERROR ") && !l.contains("Failed to send FUSE reply: No such file or directory"))
        .collect();
    assert!(errors.is_empty(), "errors in the daemon's log: {errors:#?}");
    git.fsck(backing.path());
    let n: u32 = git.run(backing.path(), &["rev-list", "--count", "HEAD"]).trim().parse().expect("a count");
    assert_eq!(n, 11, "one commit a cycle through the mount, and the base");
    share.unmount();
}

/// A commit through the mount, beside the loop's reads.
fn commit_beside_the_loop(git: &Git, co: &Path, cycle: usize) {
    let r = git.try_run(co, &["commit", "-q", "--allow-empty", "-m", &format!("cycle {cycle}")]);
    assert!(r.success(), "cycle {cycle}: a commit through the mount failed:\n{r}");
}

fn share_type(share: &Mount) -> String {
    procfs::mounts().into_iter().find(|m| m.target == share.path()).expect("the share").fstype
}

/// On the way out (a failed cycle too): no seamfs left over the share, so the share's guard
/// unmounts the share itself.
struct Stopped(PathBuf);

impl Drop for Stopped {
    fn drop(&mut self) {
        seam_tests::mount::detach_all(&self.0, "fuse.seamfs");
    }
}
