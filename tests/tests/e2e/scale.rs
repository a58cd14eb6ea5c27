//! Scale: a 100,000-file checkout through seamfs under the machine's 20,000 open-file limit.
//!
//! seamfs keeps nodes by path, not one fd per inode; a design that pinned an fd per file
//! would hit EMFILE long before `git status` had looked at every file. The checkout is built
//! directly on the backing dir (fast), and `git status` runs through the mount while the
//! daemon's open fds are sampled.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seam_tests::{procfs, Git, Mount, TempDir};

const DIRS: usize = 1000;
const FILES_PER_DIR: usize = 100;
/// The machine's hard open-file limit, which cannot be raised (see DESIGN.md).
const FD_LIMIT: u64 = 20_000;
/// "Far below" the limit: the pin budget (4096) and a margin, a fifth of the limit.
const FD_CEILING: usize = 4_000 + 100;

fn rlimit_nofile() -> (u64, u64) {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: out-pointer to a local rlimit.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) }, 0, "getrlimit");
    (r.rlim_cur, r.rlim_max)
}

#[test]
fn status_of_100k_files_stays_under_the_fd_limit() {
    // The premise: this machine cannot give any process more than 20,000 fds.
    let (soft, hard) = rlimit_nofile();
    assert!(
        soft <= FD_LIMIT && hard <= FD_LIMIT,
        "RLIMIT_NOFILE is {soft}/{hard}; the test assumes at most {FD_LIMIT}"
    );

    let backing = TempDir::new("scale-backing");
    let mnt = TempDir::new("scale-mnt");
    let repo = backing.subdir("repo");
    let git = Git::new();
    let t0 = Instant::now();
    git.run(&repo, &["init", "-q"]);
    for d in 0..DIRS {
        let dir = repo.join(format!("d{d:04}"));
        std::fs::create_dir(&dir).expect("mkdir on the backing dir");
        for f in 0..FILES_PER_DIR {
            std::fs::write(dir.join(format!("f{f:03}.txt")), format!("dir {d} file {f}\n"))
                .expect("write on the backing dir");
        }
    }
    let made = t0.elapsed();
    git.run(&repo, &["add", "-A"]);
    git.run(&repo, &["commit", "-q", "-m", "100k files"]);
    let committed = t0.elapsed();

    let m = Mount::seamfs(backing.path(), mnt.path(), &[]);
    let pid = m.daemon_pid();
    let (dsoft, dhard) = procfs::nofile_limit(pid);
    let (dsoft, dhard) = (dsoft.expect("a finite soft limit"), dhard.expect("a finite hard limit"));
    assert!(dsoft <= FD_LIMIT && dhard <= FD_LIMIT, "the daemon's open-file limit is {dsoft}/{dhard}");

    // Sample the daemon's fd count all through the status runs.
    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicUsize::new(0));
    let sampler = {
        let (stop, peak) = (stop.clone(), peak.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Ok(d) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
                    peak.fetch_max(d.count(), Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let via = m.join("repo");
    let t1 = Instant::now();
    let first = git.run(&via, &["status", "--porcelain"]);
    let cold = t1.elapsed();
    let second = git.run(&via, &["status", "--porcelain"]);
    let warm = t1.elapsed() - cold;
    let tracked = git.run(&via, &["ls-files"]).lines().count();
    stop.store(true, Ordering::Relaxed);
    sampler.join().expect("the sampler thread");
    let after = procfs::fd_count(pid);
    let peak = peak.load(Ordering::Relaxed).max(after);
    eprintln!(
        "[scale] made {} files in {made:.1?}, add+commit done at {committed:.1?}; status through seamfs: \
         cold {cold:.1?}, warm {warm:.1?}; daemon fds: peak {peak}, after {after}; limit {dsoft}/{dhard}",
        DIRS * FILES_PER_DIR
    );
    assert!(first.is_empty(), "git status through seamfs is not clean:\n{}", &first[..first.len().min(2000)]);
    assert!(second.is_empty(), "the second git status is not clean:\n{}", &second[..second.len().min(2000)]);
    assert_eq!(tracked, DIRS * FILES_PER_DIR);
    assert!(
        peak < FD_CEILING,
        "the daemon held up to {peak} fds for a 100k-file status (limit {dhard}, expected < {FD_CEILING})"
    );
    assert!(procfs::alive(pid), "the daemon died during the status runs");
    m.unmount();
}
