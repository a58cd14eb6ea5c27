//! The fast share (`seam-lab share --fast`, ADR 0024): real git gives the same results through it
//! as on the backing dir, and it holds no more O_PATH fds than its budget while a tree far bigger
//! than the budget is walked, read and `git status`ed through it; a name the host replaces reads
//! as virtiofsd serves it, old through a held fd, new once the budget dropped it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use seam_tests::{listing, procfs, Git, Mount, TempDir};

use crate::git_parity::compare_on;

/// Every everyday git command the bench and the box run: init, add, commit, status, branch and
/// checkout, log, a linked worktree added, committed in and removed, gc, fsck.
const GIT_STEPS: &[&str] = &[
    "git init -q r",
    "cd r && mkdir -p src/a src/b && for i in 1 2 3 4 5 6 7 8; do echo $i > src/a/f$i; echo b$i > src/b/g$i; done",
    "cd r && ln -s src/a/f1 link && chmod +x src/b/g1 && git add -A && git commit -qm one && git status --porcelain",
    "cd r && echo more >> src/a/f2 && rm src/b/g3 && git status --porcelain && git add -A && git commit -qm two",
    "cd r && git checkout -qb side HEAD~1 && echo side > side.txt && git add side.txt && git commit -qm side && git log --oneline --all",
    "cd r && git checkout -q main && git status --porcelain && git log --format='%H %s' && ls src/b",
    "cd r && git worktree add -q ../wt side && echo wt > ../wt/wt.txt && git -C ../wt add wt.txt && git -C ../wt commit -qm 'in the worktree'",
    "cd r && git worktree list --porcelain | sed 's/^worktree .*\\//worktree /' && git log --oneline side",
    "cd r && git worktree remove ../wt && git worktree prune && git branch -v",
    "cd r && git gc -q && git fsck --no-progress && git count-objects -v | grep -v size && git status --porcelain",
    "cd r && git reset -q --hard HEAD~1 && git status --porcelain && git log --oneline",
];

#[test]
fn real_git_on_the_fast_share_matches_native() {
    compare_on("fast-git", GIT_STEPS, "seam-lab share --fast", |b, m| Mount::fast_share(b, m, &[]));
}

#[test]
fn real_git_on_the_fast_share_matches_native_without_passthrough() {
    compare_on("fast-git-nopt", GIT_STEPS, "seam-lab share --fast --no-passthrough", |b, m| {
        Mount::fast_share(b, m, &["--no-passthrough"])
    });
}

/// A budget far below the tree: 256 fds for 5,000 files.
const BUDGET: usize = 256;
const DIRS: usize = 50;
const FILES_PER_DIR: usize = 100;
/// Fds the share holds besides its budget: stdio, its log, /dev/fuse and a clone per worker
/// thread, the root, directory handles and files open in requests now being served.
const SLACK: usize = 32;

#[test]
fn fd_budget_holds_while_a_bigger_tree_is_walked_read_and_statused() {
    let backing = TempDir::new("fast-budget-backing");
    let mnt = TempDir::new("fast-budget-mnt");
    let repo = backing.subdir("repo");
    let git = Git::new();
    git.run(&repo, &["init", "-q"]);
    for d in 0..DIRS {
        let dir = repo.join(format!("d{d:02}"));
        std::fs::create_dir(&dir).expect("mkdir on the backing dir");
        for f in 0..FILES_PER_DIR {
            std::fs::write(dir.join(format!("f{f:03}")), format!("{d}/{f}\n")).expect("write on the backing dir");
        }
    }
    git.run(&repo, &["add", "-A"]);
    git.run(&repo, &["commit", "-q", "-m", "5,000 files"]);

    let budget = BUDGET.to_string();
    let m = Mount::fast_share(backing.path(), mnt.path(), &["--fd-budget", &budget]);
    let pid = m.daemon_pid();
    let base = procfs::fd_count(pid);
    // Sampled all through the walks, not only at the end: the budget must hold at every moment.
    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicUsize::new(base));
    let sampler = {
        let (stop, peak) = (stop.clone(), peak.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(procfs::fd_count(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let via = m.join("repo");
    let files = || listing::walk(&via).into_iter().filter(|n| n.kind == 'f' && !n.rel.starts_with(".git")).count();
    assert_eq!(files(), DIRS * FILES_PER_DIR, "every file seen through the share");
    // Read every file: each open reopens a node, most of whose O_PATH fds were dropped long ago.
    for d in 0..DIRS {
        for f in 0..FILES_PER_DIR {
            let p = via.join(format!("d{d:02}/f{f:03}"));
            let got = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
            assert_eq!(got, format!("{d}/{f}\n"), "{}", p.display());
        }
    }
    assert_eq!(git.run(&via, &["status", "--porcelain"]), "", "git status through the share");
    // After the TTL the kernel looks every name up again: dropped nodes are found by name.
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(files(), DIRS * FILES_PER_DIR, "every file seen again after the TTL");
    assert_eq!(git.run(&via, &["status", "--porcelain"]), "", "git status after the TTL");
    stop.store(true, Ordering::Relaxed);
    sampler.join().expect("sampler thread");

    let peak = peak.load(Ordering::Relaxed);
    eprintln!("fast share fds: {base} at mount, peak {peak} for {} files (budget {BUDGET})", DIRS * FILES_PER_DIR);
    assert!(peak <= BUDGET + SLACK, "the share held {peak} fds; budget {BUDGET} + {SLACK}");
    // Not vacuous: the walk did fill the budget.
    assert!(peak >= BUDGET, "peak {peak} below the budget {BUDGET}: the tree never filled it");
    m.unmount();
}

/// A name the host replaces by rename reads as virtiofsd serves it: the old file while the
/// kernel's entry lives if the share still holds the old inode's fd, the new file at once if the
/// budget had dropped that fd (the reopen by name finds another inode: ESTALE, and the kernel
/// walks the path again), and the new file everywhere after the TTL.
#[test]
fn a_replaced_name_reads_old_while_held_and_new_once_dropped() {
    const FILES: usize = 200;
    let backing = TempDir::new("fast-stale-backing");
    let mnt = TempDir::new("fast-stale-mnt");
    for i in 0..FILES {
        std::fs::write(backing.join(format!("f{i:03}")), "old\n").expect("write on the backing dir");
    }
    // 16 fds for 200 files: the first names walked are dropped, the last ones still held.
    let m = Mount::fast_share(backing.path(), mnt.path(), &["--fd-budget", "16"]);
    for i in 0..FILES {
        std::fs::metadata(m.join(format!("f{i:03}"))).expect("stat through the share");
    }
    let (dropped, held) = ("f000", &format!("f{:03}", FILES - 1));
    for name in [dropped, held.as_str()] {
        let tmp = backing.join(format!("{name}.new"));
        std::fs::write(&tmp, "new\n").expect("write on the backing dir");
        std::fs::rename(&tmp, backing.join(name)).expect("rename on the backing dir");
    }
    let read = |name: &str| std::fs::read_to_string(m.join(name)).unwrap_or_else(|e| panic!("read {name}: {e}"));
    // Within the entry TTL (1 s) of the walk above.
    assert_eq!(read(dropped), "new\n", "a dropped node reopened by name: ESTALE, then the new file");
    assert_eq!(read(held), "old\n", "a held node: the old inode through the kernel's cached entry");
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(read(held), "new\n", "after the TTL the kernel looks the name up again");
    m.unmount();
}
