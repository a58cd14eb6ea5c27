//! The per-kernel index: in every git dir the box's `index` is the lower's `index-box.<id>`, seeded on
//! first touch from the shared index (else HEAD's tree, else nothing for an unborn branch) and
//! never replacing one that exists; the host's index and seamfs's own files are never visible.
//!
//! The host is the backing dir (host git runs there, on the shared `index`); the box is a seamfs
//! mount over it (box git runs there). Every check is made with real git on both sides and by
//! comparing the lower's bytes.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use seam_tests::sys::{self, Errno};
use seam_tests::TempDir;

use crate::hostbox::{bytes, lines_with, staged, status, write, Child, Env, Repo};

const FILES: &[(&str, &str)] = &[("a.txt", "a\n"), ("b.txt", "b\n"), ("dir/c.txt", "c\n")];

/// The mount still answers: the root stats, and git works in a healthy repository on it.
#[track_caller]
fn mount_answers(env: &Env) {
    assert!(env.mount.find_daemon().is_some(), "the seamfs daemon is gone:\n{}", env.log());
    sys::stat(env.mount.path()).unwrap_or_else(|e| panic!("stat of the mount root: {e}\n{}", env.log()));
    let healthy = env.repo_at("healthy-probe");
    if !healthy.host.exists() {
        env.host_repo("healthy-probe", &[("p.txt", "p\n")]);
    }
    assert!(status(&env.git, &healthy.boxed).is_empty(), "a healthy repo on the mount is not clean");
    assert!(!env.log().contains("panicked"), "seamfs panicked:\n{}", env.log());
}

fn shared_index(r: &Repo) -> Vec<u8> {
    bytes(&r.h(".git/index"))
}

#[test]
fn box_stages_and_commits_with_its_own_index() {
    let env = Env::new("split-own", &[]);
    let r = env.host_repo("repo", FILES);
    let shared_before = shared_index(&r);

    write(&r.b("new.txt"), "new\n");
    write(&r.b("a.txt"), "a changed in the box\n");
    env.boxed(&r, &["add", "new.txt", "a.txt"]);
    assert_eq!(shared_index(&r), shared_before, "a box `git add` changed the host's shared index bytes");
    assert!(r.h(&env.ib()).is_file(), "no index-box on the lower after a box `git add`");
    assert_eq!(staged(&env.git, &r.boxed), vec!["A\tnew.txt", "M\ta.txt"], "the box's own staging");
    // The host sees the box's work-tree changes, but none of its staging.
    assert_eq!(status(&env.git, &r.host), vec![" M a.txt", "?? new.txt"], "host status after a box `git add`");
    assert!(staged(&env.git, &r.host).is_empty(), "the host sees the box's staging");

    env.boxed(&r, &["commit", "-q", "-m", "box commit"]);
    assert!(status(&env.git, &r.boxed).is_empty(), "box status after its commit");
    assert!(status(&env.git, &r.host).is_empty(), "host status right after the box commit (the heal)");
    assert_eq!(env.host(&r, &["log", "-1", "--format=%s"]).trim(), "box commit");
    env.git.fsck(&r.host);
    env.finish();
}

#[test]
fn seed_keeps_the_hosts_staging() {
    let env = Env::new("split-seed-staging", &[]);
    let r = env.host_repo("repo", FILES);
    write(&r.h("h.txt"), "host staged\n");
    write(&r.h("a.txt"), "a staged by the host\n");
    env.host(&r, &["add", "h.txt", "a.txt"]);
    let shared_before = shared_index(&r);
    // The box's first touch: its view starts from the host's staging.
    assert_eq!(staged(&env.git, &r.boxed), vec!["A\th.txt", "M\ta.txt"], "the seed dropped the host's staging");
    assert_eq!(status(&env.git, &r.boxed), vec!["A  h.txt", "M  a.txt"]);
    assert_eq!(shared_index(&r), shared_before, "seeding changed the shared index");
    assert_eq!(lines_with(&env.log(), "index-box seeded").len(), 1, "one seed, from the shared index:\n{}", env.log());
    assert!(env.log().contains("FromShared"), "{}", env.log());
    env.finish();
}

#[test]
fn seed_waits_out_a_briefly_missing_shared_index() {
    let env = Env::new("split-seed-missing", &[]);
    let r = env.host_repo("repo", FILES);
    write(&r.h("h.txt"), "host staged\n");
    env.host(&r, &["add", "h.txt"]);
    // The host is mid-rename: the shared index is away for 300 ms.
    std::fs::rename(r.h(".git/index"), r.h(".git/index.aside")).expect("move the index aside");
    let back = {
        let (from, to) = (r.h(".git/index.aside"), r.h(".git/index"));
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            std::fs::rename(from, to).expect("put the index back");
        })
    };
    let got = staged(&env.git, &r.boxed);
    back.join().expect("the renaming thread");
    assert_eq!(got, vec!["A\th.txt"], "the box's first view lost the host's staging (or saw deletions)");
    assert!(env.log().contains("FromShared"), "seeded from something else than the shared index:\n{}", env.log());
    env.finish();
}

#[test]
fn no_shared_index_seeds_from_heads_tree() {
    let env = Env::new("split-seed-head", &[]);
    let r = env.host_repo("repo", FILES);
    std::fs::remove_file(r.h(".git/index")).expect("remove the shared index");
    let t = Instant::now();
    let st = status(&env.git, &r.boxed);
    let took = t.elapsed();
    assert!(st.is_empty(), "box status with no shared index shows phantom changes (an empty seed?):\n{st:?}");
    let files = env.boxed(&r, &["ls-files"]);
    assert_eq!(files, "a.txt\nb.txt\ndir/c.txt\n");
    assert!(env.log().contains("FromHead"), "not seeded from HEAD's tree:\n{}", env.log());
    assert!(took < Duration::from_secs(20), "the seed took {took:?}");
    // If the box published its index as the shared one (there was none), it is a whole copy.
    if r.h(".git/index").exists() {
        assert!(status(&env.git, &r.host).is_empty(), "the published shared index is not HEAD's tree");
    }
    env.finish();
}

#[test]
fn branch_briefly_missing_during_the_seed_loses_no_staging() {
    let env = Env::new("split-seed-branch", &[]);
    let r = env.host_repo("repo", FILES);
    write(&r.h("h.txt"), "host staged\n");
    env.host(&r, &["add", "h.txt"]);
    let tip = bytes(&r.h(".git/refs/heads/main"));
    // HEAD's branch reads absent (it has a reflog) for 300 ms.
    std::fs::remove_file(r.h(".git/refs/heads/main")).expect("remove the branch");
    let back = {
        let p = r.h(".git/refs/heads/main");
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            let tmp = p.with_extension("tmp");
            std::fs::write(&tmp, tip).expect("write");
            std::fs::rename(tmp, p).expect("put the branch back");
        })
    };
    let r2 = env.try_box(&r, &["diff", "--cached", "--name-status"]);
    back.join().expect("the restoring thread");
    assert!(r2.success(), "box diff failed while the branch was briefly missing:\n{r2}\nlog:\n{}", env.log());
    assert_eq!(r2.stdout, "A\th.txt\n", "the box lost the host's staging, or sees deletions");
    assert_eq!(staged(&env.git, &r.boxed), vec!["A\th.txt"]);
    env.finish();
}

#[test]
fn unborn_repo_seeds_nothing_and_does_not_wait() {
    let env = Env::new("split-unborn", &[]);
    let r = env.repo_at("repo");
    std::fs::create_dir(&r.host).expect("mkdir");
    env.host(&r, &["init", "-q"]);
    write(&r.h("f.txt"), "f\n");
    let t = Instant::now();
    let st = status(&env.git, &r.boxed);
    let took = t.elapsed();
    assert_eq!(st, vec!["?? f.txt"]);
    assert!(took < Duration::from_millis(1500), "box status in an unborn repo took {took:?} (waited for a seed?)");
    assert!(!env.log().contains("index-box seeded"), "something was seeded for an unborn branch:\n{}", env.log());

    // The box stages: its index is published as the shared one, since the host has none.
    env.boxed(&r, &["add", "f.txt"]);
    assert!(r.h(&env.ib()).is_file());
    assert!(r.h(".git/index").is_file(), "no shared index published for a repo without one");
    assert_eq!(status(&env.git, &r.host), vec!["A  f.txt"], "the host should see the box's first staging");
    env.boxed(&r, &["commit", "-q", "-m", "first"]);
    assert!(status(&env.git, &r.host).is_empty(), "host status after the box's first commit");
    assert!(status(&env.git, &r.boxed).is_empty());
    env.finish();
}

#[test]
fn a_repo_the_box_creates_gets_a_shared_index() {
    let env = Env::new("split-box-init", &[]);
    let r = env.repo_at("repo");
    std::fs::create_dir(&r.boxed).expect("mkdir through seamfs");
    env.boxed(&r, &["init", "-q"]);
    for (p, c) in FILES {
        write(&r.b(p), c);
    }
    env.boxed(&r, &["add", "-A"]);
    env.boxed(&r, &["commit", "-q", "-m", "box root"]);
    assert!(r.h(".git/index").is_file(), "no shared index for a repo the box created");
    assert!(r.h(&env.ib()).is_file());
    assert!(status(&env.git, &r.host).is_empty(), "host sees the box-made repo dirty");
    assert_eq!(env.host(&r, &["ls-files"]), "a.txt\nb.txt\ndir/c.txt\n");
    // A clone into the mount, likewise.
    let src = env.repo_at("repo");
    let c = env.repo_at("clone");
    env.git.run(env.mount.path(), &["clone", "-q", src.boxed.to_str().expect("utf-8"), "clone"]);
    assert!(c.h(".git/index").is_file(), "no shared index for a clone the box made");
    assert!(status(&env.git, &c.host).is_empty());
    assert!(status(&env.git, &c.boxed).is_empty());
    env.finish();
}

#[test]
fn racing_first_touches_never_replace_the_first_staging() {
    let env = Env::new("split-race", &[]);
    let r = env.host_repo("repo", FILES);
    // No shared index: each first touch waits (about 2 s) before it seeds from HEAD's tree, so
    // a touch that starts later seeds after the earlier one has published and staged.
    std::fs::remove_file(r.h(".git/index")).expect("remove the shared index");
    write(&r.b("x.txt"), "staged by the first\n");
    let first =
        env.git.cmd(&r.boxed, &["add", "x.txt"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    std::thread::sleep(Duration::from_millis(1000));
    // Without the optional index refresh: a status that took `index.lock` before a loaded
    // machine let the add create it would fail the add with "File exists", git's own answer to
    // two commands at once, which is not what this test is about.
    let second = env
        .git
        .cmd(&r.boxed, &["status", "--porcelain"])
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let (o1, o2) = (first.wait_with_output().expect("wait"), second.wait_with_output().expect("wait"));
    assert!(o1.status.success(), "first touch (git add) failed: {}", String::from_utf8_lossy(&o1.stderr));
    assert!(o2.status.success(), "second touch (git status) failed: {}", String::from_utf8_lossy(&o2.stderr));
    assert_eq!(staged(&env.git, &r.boxed), vec!["A\tx.txt"], "the first touch's staging was replaced:\n{}", env.log());
    assert!(status(&env.git, &r.boxed).iter().all(|l| !l.starts_with('D')), "phantom deletions");
    env.finish();
}

#[test]
fn overlapping_seeds_publish_once() {
    // The kernel serialises two lookups of the same name, so two seeds overlap only when one
    // comes from a listing (which holds the directory shared). A shared index that stays
    // unusable makes each seed retry about 2 s; the listing starts 1 s before a `git add`.
    let env = Env::new("split-race-listing", &[]);
    let r = env.host_repo("repo", FILES);
    let garbage = b"not an index\n".repeat(8);
    std::fs::write(r.h(".git/index"), &garbage).expect("write a bad shared index");
    write(&r.b("x.txt"), "staged by the second touch\n");
    let lister = {
        let dir = r.b(".git");
        std::thread::spawn(move || sys::readdir(&dir))
    };
    std::thread::sleep(Duration::from_millis(1000));
    let add = env.try_box(&r, &["add", "x.txt"]);
    let listed = lister.join().expect("the listing thread").expect("readdir .git");
    assert!(add.success(), "box git add during a listing's seed:\n{add}");
    assert_eq!(listed.iter().filter(|(n, _)| n == "index").count(), 1, "{listed:?}");
    assert_eq!(
        staged(&env.git, &r.boxed),
        vec!["A\tx.txt"],
        "the staging was replaced by a later seed:\n{}",
        env.log()
    );
    let seeded = lines_with(&env.log(), "index-box seeded").len();
    assert_eq!(seeded, 1, "index-box was published more than once (a seed replaced another):\n{}", env.log());
    assert_eq!(bytes(&r.h(".git/index")), garbage);
    env.finish();
}

#[test]
fn worktree_add_writes_the_new_worktrees_index() {
    let env = Env::new("split-worktree", &[]);
    let r = env.host_repo("repo", FILES);
    assert!(status(&env.git, &r.boxed).is_empty());
    let caller_box = bytes(&r.h(&env.ib()));
    let caller_shared = shared_index(&r);
    let wt = env.mount.join("wt");
    env.boxed(&r, &["worktree", "add", "-q", "-b", "wtb", wt.to_str().expect("utf-8")]);
    let wgit = r.h(".git/worktrees/wt");
    assert!(
        wgit.join(env.index_box()).is_file(),
        "the new worktree has no index-box: {:?}",
        std::fs::read_dir(&wgit).map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
    );
    assert_eq!(bytes(&r.h(&env.ib())), caller_box, "worktree add rewrote the caller's index-box");
    assert_eq!(shared_index(&r), caller_shared, "worktree add rewrote the caller's shared index");
    assert!(status(&env.git, &wt).is_empty(), "the new worktree is not clean in the box");
    assert!(status(&env.git, &r.boxed).is_empty(), "the caller is not clean in the box");
    assert!(status(&env.git, &r.host).is_empty(), "the caller is not clean on the host");
    // The new worktree's indexes list every file.
    let own = env.index_box();
    for name in [own.as_str(), "index"] {
        let p = wgit.join(name);
        assert!(p.is_file(), "no {} in the new worktree's git dir", name);
        let mut c = env.git.cmd(&r.host, &["ls-files"]);
        c.env("GIT_INDEX_FILE", &p);
        let out = seam_tests::run::run(&mut c).ok();
        assert_eq!(out.stdout, "a.txt\nb.txt\ndir/c.txt\n", "{name} of the new worktree");
    }
    env.finish();
}

#[test]
fn explicit_temporary_indexes_are_untouched() {
    let env = Env::new("split-tempindex", &[]);
    let r = env.host_repo("repo", FILES);
    assert!(status(&env.git, &r.boxed).is_empty());
    let (box_before, shared_before) = (bytes(&r.h(&env.ib())), shared_index(&r));
    write(&r.b("t.txt"), "t\n");

    // An index off the mount.
    let off = TempDir::new("split-tempindex-off");
    let x = off.join("x");
    let mut c = env.git.cmd(&r.boxed, &["add", "t.txt"]);
    c.env("GIT_INDEX_FILE", &x);
    seam_tests::run::run(&mut c).ok();
    let mut c = env.git.cmd(&r.boxed, &["ls-files"]);
    c.env("GIT_INDEX_FILE", &x);
    assert_eq!(seam_tests::run::run(&mut c).ok().stdout, "t.txt\n");

    // An index inside the git dir under another name: not redirected.
    let mut c = env.git.cmd(&r.boxed, &["read-tree", "HEAD"]);
    c.env("GIT_INDEX_FILE", r.b(".git/alt-index"));
    seam_tests::run::run(&mut c).ok();
    let mut c = env.git.cmd(&r.boxed, &["add", "t.txt"]);
    c.env("GIT_INDEX_FILE", r.b(".git/alt-index"));
    seam_tests::run::run(&mut c).ok();
    assert!(r.h(".git/alt-index").is_file(), "GIT_INDEX_FILE=.git/alt-index did not land under its own name");
    let mut c = env.git.cmd(&r.host, &["ls-files"]);
    c.env("GIT_INDEX_FILE", r.h(".git/alt-index"));
    assert_eq!(seam_tests::run::run(&mut c).ok().stdout, "a.txt\nb.txt\ndir/c.txt\nt.txt\n");

    assert_eq!(bytes(&r.h(&env.ib())), box_before, "a temporary index run changed index-box");
    assert_eq!(shared_index(&r), shared_before, "a temporary index run changed the shared index");
    env.finish();
}

#[test]
fn commit_a_stash_and_add_p_work() {
    let env = Env::new("split-tempops", &[]);
    let lines: String = (1..=20).map(|i| format!("line {i}\n")).collect();
    let r = env.host_repo("repo", &[("a.txt", "a\n"), ("long.txt", &lines)]);

    // commit -a
    write(&r.b("a.txt"), "a via commit -a\n");
    env.boxed(&r, &["commit", "-q", "-a", "-m", "commit -a"]);
    assert!(status(&env.git, &r.boxed).is_empty());
    assert!(status(&env.git, &r.host).is_empty(), "host not clean after a box commit -a");

    // A partial commit (`git commit PATH` builds a temporary index).
    write(&r.b("a.txt"), "a via partial commit\n");
    write(&r.b("long.txt"), &lines.replace("line 10\n", "line ten\n"));
    env.boxed(&r, &["commit", "-q", "-m", "partial", "a.txt"]);
    assert_eq!(status(&env.git, &r.boxed), vec![" M long.txt"], "the partial commit took or lost more than a.txt");
    env.boxed(&r, &["checkout", "--", "long.txt"]);

    // stash push and pop, with an untracked file.
    write(&r.b("a.txt"), "a stashed\n");
    write(&r.b("u.txt"), "untracked\n");
    env.boxed(&r, &["stash", "push", "-q", "-u"]);
    assert!(status(&env.git, &r.boxed).is_empty(), "box not clean after stash");
    env.boxed(&r, &["stash", "pop", "-q"]);
    assert_eq!(status(&env.git, &r.boxed), vec![" M a.txt", "?? u.txt"]);
    assert!(
        crate::hostbox::names_with_prefix(&r.h(".git"), "index.stash").is_empty(),
        "stash left its temporary index"
    );
    env.boxed(&r, &["checkout", "--", "a.txt"]);
    std::fs::remove_file(r.b("u.txt")).expect("rm");

    // add -p: two hunks, the first taken, the second not.
    let changed = lines.replace("line 1\n", "line one\n").replace("line 20\n", "line twenty\n");
    write(&r.b("long.txt"), &changed);
    let mut child = env
        .git
        .cmd(&r.boxed, &["add", "-p", "long.txt"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn git add -p");
    child.stdin.take().expect("stdin").write_all(b"y\nn\n").expect("answer add -p");
    let out = child.wait_with_output().expect("wait for add -p");
    assert!(out.status.success(), "git add -p failed: {}", String::from_utf8_lossy(&out.stderr));
    let cached = env.boxed(&r, &["diff", "--cached", "-U0"]);
    assert!(
        cached.contains("+line one") && !cached.contains("+line twenty"),
        "add -p staged the wrong hunks:\n{cached}"
    );
    let unstaged = env.boxed(&r, &["diff", "-U0"]);
    assert!(unstaged.contains("+line twenty") && !unstaged.contains("+line one"), "{unstaged}");
    env.boxed(&r, &["commit", "-q", "-m", "hunk one"]);
    assert_eq!(status(&env.git, &r.host), vec![" M long.txt"], "host view after the box's add -p commit");
    env.git.fsck(&r.host);
    env.finish();
}

#[test]
fn no_index_split_passes_the_index_through() {
    let env = Env::new("split-off", &["--no-index-split"]);
    let r = env.host_repo("repo", FILES);
    write(&r.b("new.txt"), "new\n");
    env.boxed(&r, &["add", "new.txt"]);
    assert!(!r.h(&env.ib()).exists(), "index-box created although the split is off");
    assert_eq!(status(&env.git, &r.host), vec!["A  new.txt"], "the box's `git add` should be in the lower's index");
    let names: Vec<String> = sys::readdir(&r.b(".git")).expect("readdir").into_iter().map(|(n, _)| n).collect();
    assert_eq!(names.iter().filter(|n| *n == "index").count(), 1);
    env.boxed(&r, &["commit", "-q", "-m", "through"]);
    assert!(status(&env.git, &r.host).is_empty());
    env.finish();
}

#[test]
fn listing_shows_index_once_and_hides_private_names() {
    let env = Env::new("split-listing", &[]);
    let r = env.host_repo("repo", FILES);
    let hex = "0123456789abcdef0123456789abcdef01234567";
    let private =
        [format!("index.seam-proposed.{hex}.{hex}.ff"), "index-box.junk".to_string(), "index.lock".to_string()];
    for p in &private {
        write(&r.h(&format!(".git/{p}")), "private\n");
    }
    let listing = || -> Vec<String> {
        sys::readdir(&r.b(".git")).expect("readdir .git through the mount").into_iter().map(|(n, _)| n).collect()
    };
    // Before any touch (the listing seeds), after a touch, and after a box commit.
    for stage in ["first listing", "after status", "after commit"] {
        match stage {
            "after status" => drop(status(&env.git, &r.boxed)),
            "after commit" => {
                std::fs::remove_file(r.h(".git/index.lock")).ok();
                write(&r.b("n.txt"), "n\n");
                env.boxed(&r, &["add", "n.txt"]);
                env.boxed(&r, &["commit", "-q", "-m", "n"]);
                write(&r.h(".git/index.lock"), "private\n");
            }
            _ => {}
        }
        let names = listing();
        assert_eq!(
            names.iter().filter(|n| *n == "index").count(),
            1,
            "{stage}: `index` not listed exactly once: {names:?}"
        );
        let leaked: Vec<&String> = names
            .iter()
            .filter(|n| n.starts_with("index-box") || n.starts_with("index.seam-") || *n == "index.lock")
            .collect();
        assert!(leaked.is_empty(), "{stage}: the box sees private names {leaked:?}");
    }
    assert!(r.h(&env.ib()).is_file());
    assert_eq!(sys::stat(&r.b(".git/index-box")).map(drop), Err(Errno(libc::ENOENT)), "index-box is addressable");
    assert_eq!(sys::stat(&r.b(&env.ib())).map(drop), Err(Errno(libc::ENOENT)), "the box's own index-box.<id> is addressable");
    assert_eq!(sys::stat(&r.b(&format!(".git/{}", private[0]))).map(drop), Err(Errno(libc::ENOENT)));
    let before = bytes(&r.h(&env.ib()));
    let created = sys::open(&r.b(&env.ib()), libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC, 0o644);
    assert!(created.is_err(), "the box could create/truncate index-box");
    assert_eq!(bytes(&r.h(&env.ib())), before, "index-box changed");
    // The box's index.lock is index-box.lock: the host's lock does not block it.
    write(&r.b("m.txt"), "m\n");
    env.boxed(&r, &["add", "m.txt"]);
    assert_eq!(
        std::fs::read_to_string(r.h(".git/index.lock")).expect("host lock"),
        "private\n",
        "the host's index.lock was touched"
    );
    env.finish();
}

#[test]
fn a_separate_git_dir_inside_the_mount_gets_the_split() {
    let env = Env::new("split-separate", &[]);
    let work = env.mount.join("work");
    let sep = env.mount.join("sep.git");
    env.git.run(env.mount.path(), &["init", "-q", "--separate-git-dir", sep.to_str().expect("utf-8"), "work"]);
    for (p, c) in FILES {
        write(&work.join(p), c);
    }
    env.git.run(&work, &["add", "-A"]);
    env.git.run(&work, &["commit", "-q", "-m", "separate"]);
    assert!(status(&env.git, &work).is_empty());
    let hsep = env.backing.join("sep.git");
    assert!(hsep.join(env.index_box()).is_file(), "the separate git dir has no index-box (no split there)");
    assert!(hsep.join("index").is_file(), "no shared index published in the separate git dir");
    // The host's view of it, through GIT_DIR (the .git file holds the box's absolute path).
    let mut c = env.git.cmd(&env.backing.join("work"), &["status", "--porcelain"]);
    c.env("GIT_DIR", &hsep).env("GIT_WORK_TREE", env.backing.join("work"));
    assert_eq!(seam_tests::run::run(&mut c).ok().stdout, "", "the host sees the separate repo dirty");
    env.finish();
}

// ---------------------------------------------------------------------------------------------
// Bad input.

#[test]
fn gitdir_file_pointing_outside_the_mount() {
    let env = Env::new("split-bad-outside", &[]);
    let outside = TempDir::new("split-bad-outside-repo");
    env.git.run(outside.path(), &["init", "-q"]);
    write(&outside.join("o.txt"), "o\n");
    env.git.run(outside.path(), &["add", "-A"]);
    env.git.run(outside.path(), &["commit", "-q", "-m", "outside"]);
    let dotgit = format!("gitdir: {}\n", outside.join(".git").display());
    write(&env.backing.join("wt/.git"), &dotgit);
    write(&env.backing.join("wt/o.txt"), "o\n");
    let r = env.git.try_run(&env.mount.join("wt"), &["status", "--porcelain"]);
    eprintln!("box git status in a worktree whose .git points outside:\n{r}");
    assert_eq!(
        std::fs::read_to_string(env.backing.join("wt/.git")).expect("read"),
        dotgit,
        "the .git file was rewritten"
    );
    assert!(!outside.join(env.ib()).exists(), "seamfs wrote outside its mount");
    let log = env.log();
    assert_eq!(lines_with(&log, "names a git dir outside the mount").len(), 1, "one clear log line expected:\n{log}");
    mount_answers(&env);
    env.finish();
}

#[test]
fn loop_of_gitdir_files() {
    let env = Env::new("split-bad-loop", &[]);
    let files =
        [("l1/.git", "gitdir: ../l2/.git\n"), ("l2/.git", "gitdir: ../l1/.git\n"), ("g/.git", "\u{0}\u{1}garbage\n")];
    for (p, c) in files {
        write(&env.backing.join(p), c);
    }
    for d in ["l1", "l2", "g"] {
        let r = env.git.try_run(&env.mount.join(d), &["status", "--porcelain"]);
        assert!(!r.success(), "git status in {d} should fail (no repository):\n{r}");
    }
    for (p, c) in files {
        assert_eq!(std::fs::read_to_string(env.backing.join(p)).expect("read"), c, "{p} was rewritten");
    }
    // One line per file: l1 and l2 each name a `.git` file (a chain, never followed), g is garbage.
    let log = env.log();
    for (file, problem) in
        [("l1/.git", "names no git dir"), ("l2/.git", "names no git dir"), ("g/.git", "malformed .git file")]
    {
        let lines: Vec<&str> =
            lines_with(&log, problem).into_iter().filter(|l| l.contains(&format!("file={file} "))).collect();
        assert_eq!(lines.len(), 1, "one `{problem}` line for {file} expected:\n{log}");
    }
    mount_answers(&env);
    env.finish();
}

/// The shared index is replaced by `bad`: the box seeds from HEAD's tree, says so, and never
/// writes over the bad file, even when it commits.
fn bad_shared_index(label: &str, bad: impl Fn(&[u8]) -> Vec<u8>, problem: &str) {
    let env = Env::new(label, &[]);
    let r = env.host_repo("repo", FILES);
    let garbage = bad(&shared_index(&r));
    std::fs::write(r.h(".git/index"), &garbage).expect("write the bad index");
    let st = status(&env.git, &r.boxed);
    assert!(st.is_empty(), "box status with a bad shared index: {st:?}");
    let log = env.log();
    assert!(log.contains("FromHead"), "not seeded from HEAD's tree:\n{log}");
    let lines = lines_with(&log, "shared index unusable");
    assert_eq!(lines.len(), 1, "one log line about the bad shared index expected:\n{log}");
    assert!(lines[0].contains(problem), "the log line should say `{problem}`: {}", lines[0]);
    assert_eq!(bytes(&r.h(".git/index")), garbage, "the bad shared index was written over by the seed");
    write(&r.b("n.txt"), "n\n");
    env.boxed(&r, &["add", "n.txt"]);
    env.boxed(&r, &["commit", "-q", "-m", "box commit over a bad shared index"]);
    assert_eq!(bytes(&r.h(".git/index")), garbage, "the bad shared index was written over by the heal");
    mount_answers(&env);
    env.finish();
}

#[test]
fn garbage_shared_index() {
    bad_shared_index(
        "split-bad-garbage",
        |_| b"this is not an index at all, just words\n".repeat(4),
        "no DIRC signature",
    );
}

#[test]
fn truncated_shared_index() {
    bad_shared_index("split-bad-truncated", |good| good[..good.len() - 30].to_vec(), "checksum");
}

#[test]
fn garbage_index_box() {
    let env = Env::new("split-bad-indexbox", &[]);
    let r = env.host_repo("repo", FILES);
    assert!(status(&env.git, &r.boxed).is_empty());
    let garbage = b"DIRC but then nothing that makes sense\n".repeat(3);
    std::fs::write(r.h(&env.ib()), &garbage).expect("write garbage");
    // A host commit too, so the box's next touch would heal index-box if it could.
    write(&r.h("h.txt"), "h\n");
    env.host(&r, &["add", "h.txt"]);
    env.host(&r, &["commit", "-q", "-m", "host"]);
    let shared = shared_index(&r);
    let st = env.try_box(&r, &["status", "--porcelain"]);
    assert!(!st.success(), "box git should report the corrupt index itself:\n{st}");
    assert!(st.stderr.contains("index"), "git's own error should be about the index:\n{st}");
    let add = env.try_box(&r, &["add", "h.txt"]);
    assert!(!add.success(), "box git add over a corrupt index:\n{add}");
    assert_eq!(bytes(&r.h(&env.ib())), garbage, "the garbage index-box was written over");
    assert_eq!(shared_index(&r), shared, "the shared index changed");
    mount_answers(&env);
    env.finish();
}

/// `git ls-files --debug` blocks by path.
fn debug_entries(env: &Env, dir: &Path) -> BTreeMap<String, String> {
    let out = env.git.run(dir, &["ls-files", "--debug"]);
    let mut m = BTreeMap::new();
    let mut cur: Option<String> = None;
    for line in out.lines() {
        if line.starts_with(' ') {
            let k = cur.clone().expect("a path line first");
            m.entry(k).or_insert_with(String::new).push_str(&format!("{line}\n"));
        } else {
            cur = Some(line.to_string());
        }
    }
    m
}

#[test]
fn host_stat_data_is_kept_across_a_box_commit() {
    let env = Env::new("split-statdata", &[]);
    let files: Vec<(String, String)> = (0..8).map(|i| (format!("d{}/f{i}.txt", i % 3), format!("{i}\n"))).collect();
    let refs: Vec<(&str, &str)> = files.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let r = env.host_repo("repo", &refs);
    assert!(status(&env.git, &r.host).is_empty());
    let before = debug_entries(&env, &r.host);
    assert!(before.values().all(|b| !b.contains("size: 0")), "the host index has no stat data to keep:\n{before:?}");
    write(&r.b("box.txt"), "from the box\n");
    write(&r.b("d0/f0.txt"), "changed by the box\n");
    env.boxed(&r, &["add", "box.txt", "d0/f0.txt"]);
    env.boxed(&r, &["commit", "-q", "-m", "box"]);
    let after = debug_entries(&env, &r.host);
    for (path, block) in &before {
        if path == "d0/f0.txt" {
            continue;
        }
        assert_eq!(after.get(path), Some(block), "the host's stat data of {path} (untouched by the box) changed");
    }
    assert!(after.contains_key("box.txt"));
    assert!(status(&env.git, &r.host).is_empty(), "host status after the box commit");
    env.finish();
}

#[test]
fn commit_messages_are_per_side() {
    let env = Env::new("split-editmsg", &[]);
    let r = env.host_repo("repo", FILES);
    write(&r.h("h.txt"), "h\n");
    env.host(&r, &["add", "h.txt"]);
    env.host(&r, &["commit", "-q", "-m", "host message"]);
    write(&r.b("b2.txt"), "b2\n");
    env.boxed(&r, &["add", "b2.txt"]);
    env.boxed(&r, &["commit", "-q", "-m", "box message"]);
    // git writes COMMIT_EDITMSG in place: each side keeps its own, so two commits at once never
    // swap messages.
    assert_eq!(std::fs::read_to_string(r.h(".git/COMMIT_EDITMSG")).expect("host message file"), "host message\n");
    assert_eq!(std::fs::read_to_string(r.b(".git/COMMIT_EDITMSG")).expect("box message file"), "box message\n");
    assert_eq!(std::fs::read_to_string(r.h(&format!(".git/COMMIT_EDITMSG-box.{}", env.mount.box_id()))).expect("lower name"), "box message\n");
    let listed: Vec<String> = std::fs::read_dir(r.b(".git")).expect("list .git").map(|e| e.expect("entry").file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(listed.iter().filter(|n| n.starts_with("COMMIT_EDITMSG")).collect::<Vec<_>>(), vec!["COMMIT_EDITMSG"], "the box lists only its own");
    assert_eq!(env.host(&r, &["log", "-2", "--format=%s"]), "box message\nhost message\n");
    env.finish();
}

/// Whether HEAD's tree in `dir` has `path`.
fn head_has(env: &Env, dir: &Path, path: &str) -> bool {
    !env.git.run(dir, &["ls-tree", "--name-only", "HEAD", "--", path]).trim().is_empty()
}

/// A box checkout rewrites a file by unlink, then create. On one kernel, and on the raw share,
/// it holds the one `index.lock` meanwhile, so a host `git commit -a` fails ("File exists")
/// rather than scan the work tree inside that gap. With the index split the box locks its own
/// index: seamfs takes the shared `index.lock` with it from the box's first work-tree unlink
/// (ADR 0032). Without it, the host's commit here records `a.txt` as deleted (lab.md, bug 5).
#[test]
fn a_box_rewriting_the_work_tree_holds_the_host_index_lock() {
    let env = Env::new("split-exclude", &[]);
    let r = env.host_repo("repo", FILES);
    write(&r.h("b.txt"), "b\nthe host's change\n");
    // A scripted box checkout: the index lock, the unlink of a tracked file, a pause, the create.
    let mut child = Child::spawn(&r.boxed, "lock .git/index.lock\nunlink a.txt\nsignal unlinked\nwait go\ncreate a.txt a\nunlink .git/index.lock\n");
    child.wait_for("unlinked");
    assert!(!r.h("a.txt").exists(), "the box's unlink reached the host: the gap is open\n{}", child.output());
    let during = env.git.try_run(&r.host, &["commit", "-qam", "host commit inside the box's rewrite"]);
    let deleted = !head_has(&env, &r.host, "a.txt");
    assert!(!during.status.success(), "a host commit -a ran inside the box's unlink and create (a.txt recorded deleted: {deleted}):\n{during}");
    assert!(during.stderr.contains("index.lock"), "refused for another reason than the index lock:\n{during}");
    assert!(!deleted, "HEAD lost a.txt while the box rewrote it");
    assert!(r.h(".git/index.lock").exists(), "no shared index.lock while a box process rewrites the work tree:\n{}", env.log());
    child.signal("go");
    let report = child.finish();
    assert!(report.contains("create a.txt ok") && report.contains("unlink .git/index.lock ok"), "{report}");
    assert!(!r.h(".git/index.lock").exists(), "the shared index.lock outlived the box's own lock:\n{}", env.log());
    env.git.run(&r.host, &["commit", "-qam", "host commit after the box's rewrite"]);
    assert!(head_has(&env, &r.host, "a.txt"), "the host's commit recorded a.txt as deleted");
    assert_eq!(env.git.run(&r.host, &["show", "HEAD:b.txt"]), "b\nthe host's change\n");
    env.finish();
}

/// A box process killed inside its rewrite leaves no shared `index.lock`: it was recorded as
/// that process's lock, and the reaper removes it with the box's own.
#[test]
fn a_box_killed_while_rewriting_the_work_tree_leaves_no_host_index_lock() {
    let env = Env::new("split-exclude-kill", &[]);
    let r = env.host_repo("repo", FILES);
    let mut child = Child::spawn(&r.boxed, "lock .git/index.lock\nunlink a.txt\nsignal unlinked\nhold\n");
    child.wait_for("unlinked");
    assert!(r.h(".git/index.lock").exists(), "no shared index.lock while a box process rewrites the work tree:\n{}", env.log());
    child.kill9();
    let gone = crate::hostbox::wait_until(Duration::from_secs(5), || !r.h(".git/index.lock").exists());
    assert!(gone, "the shared index.lock of a killed box process is still there after 5 s:\n{}", env.log());
    write(&r.h("b.txt"), "b\nthe host's change\n");
    env.git.run(&r.host, &["commit", "-qam", "host commit after the kill"]);
    env.finish();
}
