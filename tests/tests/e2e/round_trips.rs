//! Round trips to the share that seamfs spares, counted by the daemon itself (the `refreshes`
//! line of `user.seamfs.status`: forced revalidations of live names, ADR 0020). Counts, not
//! times: the bound holds on a loaded machine as on an idle one.

use std::path::Path;
use std::time::Instant;

use seam_tests::sys;
use seam_tests::{Git, Mount, TempDir};

/// The daemon's count of forced revalidations so far.
fn refreshes(m: &Mount) -> u64 {
    let v = sys::getxattr(m.path(), "user.seamfs.status", 4096, false).expect("read user.seamfs.status");
    let text = String::from_utf8_lossy(&v).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix("refreshes="))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no refreshes= line in user.seamfs.status:\n{text}"))
}

fn repo(backing: &Path) -> std::path::PathBuf {
    let git = Git::new();
    let host = backing.join("repo");
    std::fs::create_dir(&host).expect("mkdir");
    git.run(&host, &["init", "-q"]);
    std::fs::write(host.join("a.txt"), "a\n").expect("write");
    git.run(&host, &["add", "a.txt"]);
    git.run(&host, &["commit", "-q", "-m", "base"]);
    host
}

/// Git stats `config` and `HEAD` right after each lookup; every GETATTR used to force its own
/// revalidation on the share. One process stating a live name again and again now pays one
/// refresh per 50 ms window (and one per lookup's window), not one per stat.
#[test]
fn a_process_stating_a_live_name_again_refreshes_it_once_a_moment() {
    let backing = TempDir::new("rt-stat-backing");
    let mnt = TempDir::new("rt-stat-mnt");
    repo(backing.path());
    let m = Mount::seamfs(backing.path(), mnt.path(), &["--ttl", "1"]);
    let config = m.join("repo/.git/config");
    const STATS: u64 = 200;
    let before = refreshes(&m);
    let t = Instant::now();
    for _ in 0..STATS {
        std::fs::symlink_metadata(&config).expect("lstat .git/config");
    }
    let took = t.elapsed();
    let spent = refreshes(&m) - before;
    let windows = took.as_millis() as u64 / 50 + 1;
    eprintln!("{STATS} lstats of .git/config in {took:?}: {spent} refreshes ({windows} windows of 50 ms)");
    assert!(spent >= 1, "the first stat must revalidate the name: the count is not counting");
    assert!(spent <= 2 * windows + 2, "{spent} refreshes for {STATS} stats in {windows} windows: a stat is refreshing again");
    m.unmount();
}

/// A lock the box creates is a barrier: a stat the memo spared a moment ago revalidates again
/// right after it, so what git reads under a lock is the share's current state. Tried until
/// one round fits inside the 50 ms window (else the window, not the barrier, would refresh).
#[test]
fn a_box_lock_makes_the_next_stat_refresh_again() {
    let backing = TempDir::new("rt-lock-backing");
    let mnt = TempDir::new("rt-lock-mnt");
    repo(backing.path());
    let m = Mount::seamfs(backing.path(), mnt.path(), &["--ttl", "1"]);
    let head = m.join("repo/.git/HEAD");
    let lock = m.join("repo/.git/refs/heads/probe.lock");
    for attempt in 0..20 {
        let t = Instant::now();
        std::fs::symlink_metadata(&head).expect("lstat HEAD");
        let r1 = refreshes(&m);
        std::fs::symlink_metadata(&head).expect("lstat HEAD again");
        let r2 = refreshes(&m);
        std::fs::write(&lock, "").expect("create a box lock");
        let r3 = refreshes(&m);
        std::fs::symlink_metadata(&head).expect("lstat HEAD under the lock");
        let r4 = refreshes(&m);
        std::fs::remove_file(&lock).expect("remove the lock");
        if t.elapsed().as_millis() >= 40 {
            continue;
        }
        eprintln!("attempt {attempt}: again {} refreshes, under the lock {}", r2 - r1, r4 - r3);
        assert_eq!(r2, r1, "a second stat within the window refreshed: the memo is off");
        assert!(r4 > r3, "HEAD was not revalidated after a box lock create: the barrier is gone");
        m.unmount();
        return;
    }
    panic!("no round of four stats and a lock took under 40 ms: the machine is too loaded to tell");
}
