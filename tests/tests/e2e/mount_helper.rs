//! Standard mounting: `mount -t fuse.seamfs LOWER MNT -o ...` and fstab lines go through the
//! `mount.fuse.seamfs` helper (a link to seamfs) with the `-o` options honoured, and
//! `umount(8)` unmounts.
//!
//! mount(8) finds helpers only in /sbin, so the test runs in a private mount namespace
//! (`unshare -m`) with a directory holding just the helper link bound over /usr/sbin: the
//! machine's /sbin is never changed, and the mounts exist only in that namespace.

use std::path::Path;
use std::process::Command;

use seam_tests::run::{run, Ran};
use seam_tests::{bins, procfs, TempDir};

/// Kills, by pid, any seamfs daemon whose arguments mention `marker` (a unique log path), so a
/// failing script leaves no daemon in its namespace.
struct Daemons(String);

impl Drop for Daemons {
    fn drop(&mut self) {
        for pid in pids_mentioning(&self.0) {
            // SAFETY: kill(2) of a daemon this test started (its arguments name our log).
            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        }
    }
}

fn pids_mentioning(marker: &str) -> Vec<u32> {
    let Ok(d) = std::fs::read_dir("/proc") else { return Vec::new() };
    d.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| p != std::process::id() && procfs::alive(p))
        .filter(|&p| procfs::cmdline(p).iter().any(|a| a.contains(marker)))
        .collect()
}

/// Runs `script` with `sh -eu` in a private mount namespace where /usr/sbin holds only
/// `mount.fuse.seamfs`.
fn in_namespace(t: &TempDir, script: &str) -> Ran {
    let helpers = t.subdir("sbin");
    std::os::unix::fs::symlink(bins::seamfs(), helpers.join("mount.fuse.seamfs")).expect("link the helper");
    let full = format!("mount --bind {} /usr/sbin\n{script}", helpers.display());
    run(Command::new("unshare").args(["--mount", "--propagation", "private", "sh", "-eu", "-c", &full]))
}

/// The status lines the daemon at `mnt` reports (`user.seamfs.status`), printed by python3.
fn status_of(mnt: &Path) -> String {
    format!("python3 -c 'import os,sys; print(os.getxattr(sys.argv[1], \"user.seamfs.status\").decode())' {}", mnt.display())
}

#[test]
fn mount_t_fuse_seamfs_and_fstab_lines() {
    let t = TempDir::new("helper");
    let lower = t.subdir("lower");
    std::fs::write(lower.join("a.txt"), "from the lower\n").expect("write");
    let (mnt, mnt2, over) = (t.subdir("mnt"), t.subdir("mnt2"), t.subdir("over"));
    std::fs::write(over.join("b.txt"), "over\n").expect("write");
    let log = t.join("helper.log");
    let _daemons = Daemons(log.display().to_string());
    let fstab = t.join("fstab");
    std::fs::write(
        &fstab,
        format!(
            "# a box's fstab\n{l} {m2} fuse.seamfs ttl=2,lock_wait_ms=250,log={log},noauto,nofail,x-systemd.after=share.mount 0 0\n\
             {o} {o} fuse.seamfs over,no_index_split,log={log} 0 0\n",
            l = lower.display(),
            m2 = mnt2.display(),
            o = over.display(),
            log = log.display()
        ),
    )
    .expect("write the fstab");
    let script = format!(
        "mount -t fuse.seamfs -o ttl=0.5,lock_wait_ms=300,no_index_split,log={log} {l} {m}\n\
         echo TYPE=$(findmnt -n -o FSTYPE {m})\n cat {m}/a.txt\n {st1}\n umount {m}\n echo AFTER=$(findmnt -n {m} || true)\n\
         mount -T {fstab} {m2}\n {st2}\n umount {m2}\n\
         mount -T {fstab} {o}\n cat {o}/b.txt\n {st3}\n umount {o}\n echo DONE\n",
        log = log.display(),
        l = lower.display(),
        m = mnt.display(),
        m2 = mnt2.display(),
        o = over.display(),
        fstab = fstab.display(),
        st1 = status_of(&mnt),
        st2 = status_of(&mnt2),
        st3 = status_of(&over),
    );
    let r = in_namespace(&t, &script);
    assert!(r.success() && r.stdout.contains("DONE"), "the mount script failed:\n{r}\n  log:\n{}", std::fs::read_to_string(&log).unwrap_or_default());
    let out = &r.stdout;
    assert!(out.contains("TYPE=fuse.seamfs") && out.contains("from the lower") && out.contains("AFTER=\n"), "{r}");
    // Each status block starts at `pid=`; -o options and fstab options reached the daemon.
    let blocks: Vec<&str> = out.split("pid=").skip(1).collect();
    assert_eq!(blocks.len(), 3, "{r}");
    for (b, want) in blocks.iter().zip([
        ["ttl=0.5", "lock_wait_ms=300", "index_split=false"],
        ["ttl=2", "lock_wait_ms=250", "index_split=true"],
        ["ttl=1", "lock_wait_ms=1000", "index_split=false"],
    ]) {
        for w in want {
            assert!(b.lines().any(|l| l == w), "{w} missing from the daemon's status:\n{b}\n{r}");
        }
    }
    assert!(out.contains("over\n"), "the over line shows the directory's own content:\n{r}");
    // umount(8) ended each daemon (a daemon exits just after its unmount: give it 2 s).
    let marker = log.display().to_string();
    let t = std::time::Instant::now();
    while !pids_mentioning(&marker).is_empty() && t.elapsed() < std::time::Duration::from_secs(2) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(pids_mentioning(&marker), Vec::<u32>::new(), "daemons left 2 s after umount:\n{r}");
}

#[test]
fn helper_refuses_unknown_options() {
    let t = TempDir::new("helper-bad");
    let (lower, mnt) = (t.subdir("lower"), t.subdir("mnt"));
    let r = run(Command::new(bins::seamfs()).arg0_helper().args([&lower, &mnt]).args(["-o", "ttl=1,bogus"]));
    assert_eq!(r.code(), Some(2), "{r}");
    assert!(r.stderr.contains("bogus"), "{r}");
    assert!(!procfs::is_mounted(&mnt));
}

trait Arg0 {
    fn arg0_helper(&mut self) -> &mut Self;
}

impl Arg0 for Command {
    fn arg0_helper(&mut self) -> &mut Self {
        std::os::unix::process::CommandExt::arg0(self, "mount.fuse.seamfs")
    }
}
