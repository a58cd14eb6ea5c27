//! Several boxes over one checkout (ADR 0028): each seamfs mount has a box id, its index is
//! `index-box.<id>` on the lower, and every other box is another side, as the host is: its
//! staging is never seen, its commit heals this box's index, its lock is waited for.
//!
//! The host is the backing dir; each box is a seamfs mount directly over it with its own
//! `--box-id` (what a second VM's seamfs over the same share amounts to: the other box's
//! writes reach this one through the lower, never through this mount).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use seam_tests::mount::seamfs_cmd;
use seam_tests::sys::{self, Errno};
use seam_tests::{Git, Mount, TempDir};

use crate::hostbox::{make_repo, staged, status, write, Child};

const FILES: &[(&str, &str)] = &[("a.txt", "a\n"), ("b.txt", "b\n"), ("c.txt", "c\n")];

/// The host and one seamfs mount per box id. Fields drop in order: the mounts first.
struct Boxes {
    mounts: Vec<Mount>,
    _mnts: Vec<TempDir>,
    git: Git,
    backing: TempDir,
}

impl Boxes {
    /// One mount per id (`--ttl 0`: no test waits for a cache), and a host repository `repo`
    /// with [`FILES`] committed.
    fn new(label: &str, ids: &[&str]) -> Boxes {
        let backing = TempDir::new(&format!("{label}-backing"));
        let git = Git::new();
        make_repo(&git, &backing.join("repo"), FILES);
        let mut mnts = Vec::new();
        let mut mounts = Vec::new();
        for id in ids {
            let mnt = TempDir::new(&format!("{label}-{id}"));
            mounts.push(Mount::seamfs(backing.path(), mnt.path(), &["--ttl", "0", "--box-id", id]));
            mnts.push(mnt);
        }
        Boxes { mounts, _mnts: mnts, git, backing }
    }

    /// The repository as box `i` sees it.
    fn b(&self, i: usize) -> PathBuf {
        self.mounts[i].join("repo")
    }

    /// The repository on the host.
    fn h(&self) -> PathBuf {
        self.backing.join("repo")
    }

    fn run(&self, dir: &Path, args: &[&str]) -> String {
        self.git.run(dir, args)
    }

    fn logs(&self) -> String {
        self.mounts.iter().map(|m| format!("--- {}:\n{}", m.path().display(), m.log())).collect()
    }

    fn finish(self) {
        for m in self.mounts {
            m.unmount();
        }
    }
}

/// Names listed in a directory.
fn listed(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = sys::readdir(dir).expect("readdir").into_iter().map(|(n, _)| n).collect();
    v.sort();
    v
}

#[test]
fn each_box_keeps_its_own_staging() {
    let bx = Boxes::new("boxes-staging", &["ba", "bb", "bc"]);
    assert_eq!(bx.mounts[0].status().get("box_id").map(String::as_str), Some("ba"), "user.seamfs.status names the box id");
    write(&bx.b(0).join("a.txt"), "a from box ba\n");
    write(&bx.b(0).join("new-a.txt"), "new in ba\n");
    bx.run(&bx.b(0), &["add", "a.txt", "new-a.txt"]);
    write(&bx.b(1).join("b.txt"), "b from box bb\n");
    bx.run(&bx.b(1), &["add", "b.txt"]);

    assert_eq!(staged(&bx.git, &bx.b(0)), vec!["A\tnew-a.txt", "M\ta.txt"], "box ba's own staging");
    assert_eq!(staged(&bx.git, &bx.b(1)), vec!["M\tb.txt"], "box bb sees another box's staging");
    assert!(staged(&bx.git, &bx.b(2)).is_empty(), "box bc sees another box's staging");
    assert!(staged(&bx.git, &bx.h()).is_empty(), "the host sees a box's staging");
    let st = status(&bx.git, &bx.b(2));
    assert_eq!(st, vec![" M a.txt", " M b.txt", "?? new-a.txt"], "box bc sees the others' work tree, none of their staging");

    let gitdir = bx.h().join(".git");
    for id in ["ba", "bb", "bc"] {
        assert!(gitdir.join(format!("index-box.{id}")).is_file(), "no index-box.{id} on the lower");
    }
    assert!(!gitdir.join("index-box").exists(), "an id-less index-box was made");
    // `ls .git` in a box: `index` (its own), never another box's index or the host's.
    let names = listed(&bx.b(0).join(".git"));
    assert_eq!(names.iter().filter(|n| n.starts_with("index")).collect::<Vec<_>>(), vec!["index"], "{names:?}");
    let other = bx.b(0).join(".git/index-box.bb");
    assert_eq!(sys::stat(&other).map(drop), Err(Errno(libc::ENOENT)), "box ba can stat box bb's index");
    assert!(sys::open(&other, libc::O_RDONLY, 0).is_err(), "box ba can open box bb's index");
    let created = sys::open(&bx.b(0).join(".git/index-box.bz"), libc::O_WRONLY | libc::O_CREAT, 0o644).map(drop);
    assert_eq!(created, Err(Errno(libc::EPERM)), "a box can create a name of another box");
    bx.finish();
}

#[test]
fn a_commit_in_one_box_heals_the_others() {
    let bx = Boxes::new("boxes-heal", &["ha", "hb"]);
    // Box hb stages first, then box ha commits something else.
    write(&bx.b(1).join("b.txt"), "b staged in hb\n");
    bx.run(&bx.b(1), &["add", "b.txt"]);
    write(&bx.b(0).join("a.txt"), "a committed in ha\n");
    bx.run(&bx.b(0), &["add", "a.txt"]);
    bx.run(&bx.b(0), &["commit", "-q", "-m", "from ha"]);
    let files = bx.run(&bx.h(), &["show", "--name-only", "--format=", "HEAD"]);
    assert_eq!(files, "a.txt\n", "ha's commit took another box's staging");

    // hb's index heals onto ha's commit: its staging kept, no phantom revert of a.txt.
    assert_eq!(staged(&bx.git, &bx.b(1)), vec!["M\tb.txt"], "box hb after ha's commit:\n{}", bx.logs());
    assert_eq!(status(&bx.git, &bx.b(1)), vec!["M  b.txt"], "box hb shows phantom changes:\n{}", bx.logs());
    assert!(bx.logs().contains("box index healed after a move by the host or another box"), "{}", bx.logs());
    bx.run(&bx.b(1), &["commit", "-q", "-m", "from hb"]);
    let log = bx.run(&bx.h(), &["log", "--format=%s"]);
    assert_eq!(log, "from hb\nfrom ha\nbase\n");
    let files = bx.run(&bx.h(), &["show", "--name-only", "--format=", "HEAD"]);
    assert_eq!(files, "b.txt\n", "hb's commit reverted or took a.txt");
    // Every side is clean: ha's index healed after hb's commit, the host's in each commit.
    assert!(status(&bx.git, &bx.b(0)).is_empty(), "box ha after hb's commit:\n{}", bx.logs());
    assert!(status(&bx.git, &bx.h()).is_empty(), "the host after both commits");
    bx.git.fsck(&bx.h());
    bx.finish();
}

#[test]
fn another_boxs_lock_is_waited_for_not_reaped() {
    let bx = Boxes::new("boxes-lock", &["la", "lb"]);
    let lock = bx.h().join(".git/config.lock");
    let child = Child::spawn(&bx.b(0).join(".git"), "lock config.lock\nsignal locked\nhold\n");
    let mut child = child;
    child.wait_for("locked");
    assert_eq!(child.report(), "lock config.lock ok\n");
    let t = Instant::now();
    let res = bx.git.try_run(&bx.b(1), &["config", "x.y", "z"]);
    let took = t.elapsed();
    assert!(!res.success(), "box lb took the config lock box la holds:\n{res}");
    assert!(took >= Duration::from_millis(950), "box lb did not wait for box la's lock (lock-wait 1000 ms): {took:?}");
    // Box lb's reaper runs every 200 ms: the live holder's lock stays.
    std::thread::sleep(Duration::from_millis(600));
    assert!(lock.is_file(), "box lb removed box la's live lock:\n{}", bx.logs());
    // Its own box releases it once the holder dies; then lb goes through.
    child.kill9();
    let t = Instant::now();
    while lock.exists() && t.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!lock.exists(), "box la did not release its dead process's lock:\n{}", bx.logs());
    bx.run(&bx.b(1), &["config", "x.y", "z"]);
    assert_eq!(bx.run(&bx.h(), &["config", "x.y"]), "z\n");
    bx.finish();
}

/// A box process that read HEAD before another box committed is held to what it saw, as after a
/// host commit: its move is refused, the other box's commit stays the tip.
#[test]
fn another_boxs_ref_move_is_judged_like_the_hosts() {
    let bx = Boxes::new("boxes-refmove", &["ra", "rb"]);
    let base = bx.run(&bx.h(), &["rev-parse", "HEAD"]).trim().to_string();
    let tree = format!("{base}^{{tree}}");
    let stale = bx.run(&bx.h(), &["commit-tree", &tree, "-p", &base, "-m", "box ra's move"]).trim().to_string();
    let script = format!("read HEAD\nread refs/heads/main\nsignal ready\nwait go\nmove refs/heads/main {stale}\n");
    let mut child = Child::spawn(&bx.b(0).join(".git"), &script);
    child.wait_for("ready");
    write(&bx.b(1).join("b.txt"), "b from box rb\n");
    bx.run(&bx.b(1), &["commit", "-q", "-a", "-m", "from rb"]);
    let tip = bx.run(&bx.h(), &["rev-parse", "HEAD"]).trim().to_string();
    child.signal("go");
    let report = child.finish();
    assert!(report.contains("move refs/heads/main EBUSY unlink=ok"), "box ra's stale move was not refused:\n{report}\n{}", bx.logs());
    assert_eq!(bx.run(&bx.h(), &["rev-parse", "HEAD"]).trim(), tip, "box rb's commit is no longer the tip");
    assert!(bx.mounts[0].log().contains("moved by the other side"), "{}", bx.logs());
    bx.finish();
}

/// The older `index-box`, so two boxes' first touches at once can race for it: one wins.
fn legacy_repo(bx: &Boxes, staged_file: &str) -> Vec<u8> {
    let (host, gitdir) = (bx.h(), bx.h().join(".git"));
    write(&host.join(staged_file), "staged by an older seamfs\n");
    std::fs::copy(gitdir.join("index"), gitdir.join("index-box")).expect("copy the index");
    let mut add = bx.git.cmd(&host, &["add", staged_file]);
    add.env("GIT_INDEX_FILE", gitdir.join("index-box"));
    seam_tests::run::run(&mut add).ok();
    std::fs::read(gitdir.join("index-box")).expect("read")
}

#[test]
fn two_first_touches_at_once_migrate_once() {
    let mut bx = Boxes::new("boxes-migrate-race", &[]);
    let old = legacy_repo(&bx, "old.txt");
    for id in ["xa", "xb"] {
        let mnt = TempDir::new(&format!("boxes-migrate-race-{id}"));
        bx.mounts.push(Mount::seamfs(bx.backing.path(), mnt.path(), &["--ttl", "0", "--box-id", id]));
        bx._mnts.push(mnt);
    }
    let staged_in: Vec<Vec<String>> = std::thread::scope(|s| {
        let runs: Vec<_> = (0..2).map(|i| s.spawn({ let bx = &bx; move || staged(&bx.git, &bx.b(i)) })).collect();
        runs.into_iter().map(|t| t.join().expect("a box's git status")).collect()
    });
    let gitdir = bx.h().join(".git");
    let winners: Vec<&str> = ["xa", "xb"].into_iter().filter(|id| std::fs::read(gitdir.join(format!("index-box.{id}"))).is_ok_and(|b| b == old)).collect();
    assert_eq!(winners.len(), 1, "the older index went to {winners:?}:\n{}", bx.logs());
    assert_eq!(staged_in.iter().filter(|s| s.as_slice() == ["A\told.txt"]).count(), 1, "{staged_in:?}\n{}", bx.logs());
    assert!(!gitdir.join("index-box").exists());
    assert_eq!(bx.logs().matches("migrated index-box").count(), 1, "{}", bx.logs());
    bx.finish();
}

#[test]
fn an_older_index_box_migrates_once() {
    let bx = Boxes::new("boxes-migrate", &[]);
    let (host, gitdir) = (bx.h(), bx.h().join(".git"));
    // What a seamfs before box ids left: its index-box with the box's staging, its sync point
    // and its commit message.
    let old_index = legacy_repo(&bx, "old.txt");
    let head = bx.run(&host, &["rev-parse", "HEAD"]);
    std::fs::write(gitdir.join("index-box.seam-base"), head.trim()).expect("write the old sync point");
    std::fs::write(gitdir.join("COMMIT_EDITMSG-box"), "old message\n").expect("write the old message");

    let mut bx = bx;
    for id in ["ma", "mb"] {
        let mnt = TempDir::new(&format!("boxes-migrate-{id}"));
        bx.mounts.push(Mount::seamfs(bx.backing.path(), mnt.path(), &["--ttl", "0", "--box-id", id]));
        bx._mnts.push(mnt);
    }
    assert_eq!(staged(&bx.git, &bx.b(0)), vec!["A\told.txt"], "the first box lost the older seamfs's staging:\n{}", bx.logs());
    assert!(!gitdir.join("index-box").exists(), "index-box is still there after the migration");
    assert_eq!(std::fs::read(gitdir.join("index-box.ma")).expect("index-box.ma"), old_index, "migrated bytes differ");
    assert!(gitdir.join("index-box.ma.seam-base").is_file(), "the sync point did not move with the index");
    assert_eq!(std::fs::read_to_string(bx.b(0).join(".git/COMMIT_EDITMSG")).expect("message"), "old message\n");
    // The second box seeds its own from the shared index: the old staging is the first box's.
    assert!(staged(&bx.git, &bx.b(1)).is_empty(), "the second box took the older staging too:\n{}", bx.logs());
    let migrated = bx.logs().matches("migrated index-box").count();
    assert_eq!(migrated, 1, "migrated {migrated} times:\n{}", bx.logs());
    bx.finish();
}

#[test]
fn a_bad_box_id_is_refused() {
    let backing = TempDir::new("boxes-bad-backing");
    let mnt = TempDir::new("boxes-bad-mnt");
    let (b, m) = (backing.path().to_str().expect("utf-8"), mnt.path().to_str().expect("utf-8"));
    for bad in ["Bad", "a/b", "..", "lock", "seam-x", &"x".repeat(33)] {
        let r = seamfs_cmd(&["mount", b, m, "--box-id", bad]);
        assert_eq!(r.code(), Some(2), "--box-id {bad:?} was not refused with exit 2:\n{r}");
        assert!(r.stderr.contains("box id") && r.stderr.contains(m), "the message names neither the id nor the mount:\n{r}");
    }
    let r = seamfs_cmd(&["mount", b, m, "-o", "box_id=A/B"]);
    assert_eq!(r.code(), Some(2), "-o box_id=A/B:\n{r}");
    assert!(r.stderr.contains("a-z, 0-9"), "the message does not say what an id may hold:\n{r}");
    let conf = backing.join("seamfs.toml");
    std::fs::write(&conf, "box_id = \"Not OK\"\n").expect("write config");
    let r = seamfs_cmd(&["mount", b, m, "--config", conf.to_str().expect("utf-8")]);
    assert_eq!(r.code(), Some(2), "box_id in seamfs.toml:\n{r}");
    assert!(r.stderr.contains("seamfs.toml:1") && r.stderr.contains("box id"), "{r}");
    std::fs::remove_file(&conf).expect("rm config");
    assert!(seam_tests::procfs::mount_at(mnt.path()).is_none(), "something got mounted");

    // No id given: the machine's, or a fallback that says so.
    let mount = Mount::seamfs(backing.path(), mnt.path(), &[]);
    let st = mount.status();
    let machine = std::fs::read_to_string("/etc/machine-id").unwrap_or_default();
    let machine = machine.trim();
    if machine.len() == 32 && machine.bytes().all(|c| c.is_ascii_hexdigit()) {
        assert_eq!(st.get("box_id").map(String::as_str), Some(&machine[..12].to_ascii_lowercase()[..]), "{st:?}");
        assert_eq!(st.get("box_id_from").map(String::as_str), Some("machine-id"), "{st:?}");
    } else {
        assert!(mount.log().contains("box id taken from a fallback"), "{}", mount.log());
    }
    mount.unmount();
}
