//! Under `--over`, the heal's object database never walks seamfs's own mount (ADR 0022): gix
//! takes the real path of the objects directory, which is the mountpoint's own path, and a
//! daemon looking itself up from inside a FUSE request can deadlock on a directory lock its
//! caller holds. The heal runs in a mount namespace of its own where that path is the lower;
//! strace shows every stat the daemon made of a path under the mountpoint answered by the
//! share beneath (its device), none by seamfs.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use seam_tests::strace::Strace;
use seam_tests::{Git, Mount, TempDir};

fn files(dir: &Path) {
    for i in 0..20 {
        std::fs::write(dir.join(format!("f{i}")), format!("{i}\n")).expect("write");
    }
}

/// (path, device "major:minor") of each stat in an strace -v log.
fn stats(log: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for l in log.lines() {
        let Some(path) = l.split('"').nth(1) else { continue };
        let dev = if let Some(i) = l.find("stx_dev_major=") {
            let maj = l[i + 14..].split(|c: char| !c.is_ascii_digit()).next().unwrap_or("");
            let j = l.find("stx_dev_minor=").map(|j| &l[j + 14..]).unwrap_or("");
            format!("{maj}:{}", j.split(|c: char| !c.is_ascii_digit()).next().unwrap_or(""))
        } else if let Some(i) = l.find("st_dev=makedev(") {
            let inner: String = l[i + 15..].chars().take_while(|&c| c != ')').collect();
            let parts: Vec<u64> = inner.split(',').map(|p| {
                let p = p.trim();
                p.strip_prefix("0x").map_or_else(|| p.parse().unwrap_or(0), |h| u64::from_str_radix(h, 16).unwrap_or(0))
            }).collect();
            format!("{}:{}", parts.first().unwrap_or(&0), parts.get(1).unwrap_or(&0))
        } else {
            continue;
        };
        out.push((path.to_string(), dev));
    }
    out
}

#[test]
fn under_over_the_heal_never_walks_seamfs_s_own_mount() {
    let git = Git::new();
    let backing = TempDir::new("lv-backing");
    let share_mnt = TempDir::new("lv-share");
    git.run(backing.path(), &["init", "-q", "-b", "main"]);
    files(backing.path());
    git.run(backing.path(), &["add", "-A"]);
    git.run(backing.path(), &["commit", "-q", "-m", "one"]);
    let share = Mount::share(backing.path(), share_mnt.path(), &[]);
    let share_dev = std::fs::metadata(share_mnt.path()).expect("stat the share").dev();
    let m = Mount::seamfs_over(share_mnt.path(), &[]);
    let seamfs_dev = std::fs::metadata(share_mnt.path()).expect("stat the mount").dev();
    assert_ne!(share_dev, seamfs_dev);
    let dev = |d: u64| format!("{}:{}", libc::major(d), libc::minor(d));
    git.run(share_mnt.path(), &["status", "--porcelain"]);
    let trace = TempDir::new("lv-trace");
    let log = trace.join("strace.log");
    let strace = Strace::attach(m.daemon_pid(), &["-v", "-e", "trace=newfstatat,statx,lstat,stat"], &log);
    // The host commits a change (on the backing dir); after the share's TTL the box's next
    // status heals its index onto the new HEAD, through gix.
    std::fs::write(backing.join("f3"), "host\n").expect("write");
    git.run(backing.path(), &["commit", "-q", "-am", "host"]);
    std::thread::sleep(Duration::from_millis(1200));
    let st = git.run(share_mnt.path(), &["status", "--porcelain"]);
    std::thread::sleep(Duration::from_millis(300));
    let text = strace.stop();
    let mnt = share_mnt.path().to_string_lossy().into_owned();
    let under: Vec<(String, String)> = stats(&text).into_iter().filter(|(p, _)| p.starts_with(&mnt)).collect();
    println!("box status after the host commit: {st:?}; daemon stats under the mountpoint: {}", under.len());
    assert!(st.trim().is_empty(), "the box's index was not healed onto the host's commit: {st:?}\n{}", m.log());
    assert!(under.iter().any(|(p, _)| p.ends_with("/objects")), "gix never looked at the objects dir (no heal traced):\n{text}");
    let through_seamfs: Vec<_> = under.iter().filter(|(_, d)| *d == dev(seamfs_dev)).collect();
    assert!(through_seamfs.is_empty(), "the daemon walked its own mount: {through_seamfs:?}");
    drop(m);
    share.unmount();
}
