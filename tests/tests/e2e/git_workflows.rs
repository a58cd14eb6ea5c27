//! Everyday git workflows through seamfs, with the real git CLI: init, add, commit, branch,
//! checkout, merge, rebase, stash, tag, gc and repack, worktrees, submodules, clones.
//!
//! Each workflow runs in a repository on the mount and checks what git reports (history,
//! files in the work tree, status) and that `git fsck --strict` is clean after each stage,
//! both through the mount and directly on the backing dir (the same bytes must be there).
//! Every workflow runs with FUSE passthrough and with `--no-passthrough`.

use std::path::{Path, PathBuf};

use seam_tests::{Git, Mount, TempDir};

/// What a workflow works with.
struct Ctx {
    git: Git,
    backing: PathBuf,
    mnt: PathBuf,
    /// A plain directory off the mount, for source repositories.
    outside: TempDir,
}

impl Ctx {
    /// A fresh directory on the mount.
    fn dir(&self, name: &str) -> PathBuf {
        let p = self.mnt.join(name);
        std::fs::create_dir(&p).unwrap_or_else(|e| panic!("mkdir {} through seamfs: {e}", p.display()));
        p
    }

    /// A fresh repository on the mount with one commit of `a.txt`.
    fn repo(&self, name: &str) -> PathBuf {
        let r = self.dir(name);
        self.git.run(&r, &["init", "-q"]);
        write(&r.join("a.txt"), "base\n");
        self.commit_all(&r, "base");
        r
    }

    /// The same path seen directly on the backing dir.
    fn backing_of(&self, p: &Path) -> PathBuf {
        self.backing.join(p.strip_prefix(&self.mnt).expect("a path on the mount"))
    }

    fn commit_all(&self, repo: &Path, msg: &str) {
        self.git.run(repo, &["add", "-A"]);
        self.git.run(repo, &["commit", "-q", "-m", msg]);
    }

    /// fsck clean through the mount and on the backing dir, once no park is pending.
    #[track_caller]
    fn fsck(&self, repo: &Path) {
        self.park_settled();
        self.git.fsck(repo);
        self.git.fsck(&self.backing_of(repo));
    }

    /// Waits (at most 10 s) until seamfs has no park burst pending. A park commit lands on
    /// `refs/seam/parked` a few seconds after a box process destroyed uncommitted bytes (ADR
    /// 0029; `submodule add` renames over a new `.gitmodules`). An fsck running across it lists
    /// the objects before the commit and reads the ref after it: "missing commit", no error.
    #[track_caller]
    fn park_settled(&self) {
        let pending = || {
            let v = seam_tests::sys::getxattr(&self.mnt, "user.seamfs.status", 4096, false).expect("read user.seamfs.status");
            String::from_utf8_lossy(&v).lines().find_map(|l| l.strip_prefix("park_pending=")).map(|n| n.trim() != "0")
        };
        let t0 = std::time::Instant::now();
        while pending() == Some(true) {
            assert!(t0.elapsed() < std::time::Duration::from_secs(10), "a park stayed pending for 10 s");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    fn head(&self, repo: &Path) -> String {
        self.git.run(repo, &["rev-parse", "HEAD"]).trim().to_string()
    }

    fn count(&self, repo: &Path, range: &str) -> usize {
        self.git.run(repo, &["rev-list", "--count", range]).trim().parse().expect("a count")
    }
}

/// Writes a file through whatever path it is given, creating parent directories.
fn write(p: &Path, content: &str) {
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("mkdir -p {}: {e}", parent.display()));
    }
    std::fs::write(p, content).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

fn run(name: &str, wf: fn(&Ctx), extra: &[&str]) {
    let backing = TempDir::new(&format!("git-{name}-backing"));
    let mnt = TempDir::new(&format!("git-{name}-mnt"));
    let m = Mount::seamfs(backing.path(), mnt.path(), extra);
    let ctx = Ctx {
        git: Git::new(),
        backing: backing.path().to_path_buf(),
        mnt: m.path().to_path_buf(),
        outside: TempDir::new(&format!("git-{name}-outside")),
    };
    wf(&ctx);
    m.unmount();
}

fn init_add_commit(c: &Ctx) {
    let r = c.dir("repo");
    c.git.run(&r, &["init", "-q"]);
    assert!(c.backing_of(&r).join(".git/HEAD").is_file(), "git init through seamfs left no HEAD on the backing dir");
    write(&r.join("README"), "hello\n");
    write(&r.join("src/lib.rs"), "pub fn f() {}\n");
    write(&r.join("src/deep/a/b/c.txt"), "deep\n");
    write(&r.join("bin/run.sh"), "#!/bin/sh\necho run\n");
    std::os::unix::fs::symlink("README", r.join("link")).expect("symlink through seamfs");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(r.join("bin/run.sh"), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    c.commit_all(&r, "first");
    c.fsck(&r);
    let staged = c.git.run(&r, &["ls-files", "-s"]);
    assert!(staged.lines().any(|l| l.starts_with("100755") && l.ends_with("bin/run.sh")), "exec bit lost:\n{staged}");
    assert!(
        staged.lines().any(|l| l.starts_with("120000") && l.ends_with("link")),
        "symlink not staged as one:\n{staged}"
    );
    assert_eq!(staged.lines().count(), 5, "{staged}");

    write(&r.join("README"), "hello again\n");
    c.git.run(&r, &["commit", "-q", "-a", "-m", "second"]);
    c.git.run(&r, &["rm", "-q", "src/deep/a/b/c.txt"]);
    c.git.run(&r, &["mv", "src/lib.rs", "src/main.rs"]);
    c.git.run(&r, &["commit", "-q", "-m", "third"]);
    c.git.assert_clean(&r);
    assert_eq!(c.count(&r, "HEAD"), 3);
    assert!(!r.join("src/deep").exists(), "git rm left src/deep behind");
    assert_eq!(c.git.run(&r, &["show", "HEAD:src/main.rs"]), "pub fn f() {}\n");
    // The same history and files, read directly on the backing dir. (Not `git status` there:
    // the backing dir's shared index is the host's, which box commits do not move.)
    let b = c.backing_of(&r);
    assert_eq!(c.git.run(&b, &["show", "HEAD:README"]), "hello again\n");
    assert_eq!(c.git.run(&b, &["rev-parse", "HEAD"]).trim(), c.head(&r));
    assert_eq!(read(&b.join("README")), "hello again\n");
    c.fsck(&r);
}

fn branch_checkout_merge(c: &Ctx) {
    let r = c.repo("repo");
    c.git.run(&r, &["branch", "feature"]);
    c.git.run(&r, &["checkout", "-q", "feature"]);
    write(&r.join("b.txt"), "feature\n");
    c.commit_all(&r, "feature work");
    c.git.run(&r, &["checkout", "-q", "main"]);
    assert!(!r.join("b.txt").exists(), "checkout main left the feature's file in the work tree");
    write(&r.join("c.txt"), "main\n");
    c.commit_all(&r, "main work");
    c.fsck(&r);
    c.git.run(&r, &["merge", "-q", "--no-ff", "-m", "merge feature", "feature"]);
    assert_eq!(read(&r.join("b.txt")), "feature\n");
    assert_eq!(read(&r.join("c.txt")), "main\n");
    let parents = c.git.run(&r, &["rev-list", "--parents", "-n", "1", "HEAD"]);
    assert_eq!(parents.split_whitespace().count(), 3, "not a merge commit: {parents}");
    c.fsck(&r);

    c.git.run(&r, &["switch", "-q", "-c", "ff"]);
    write(&r.join("d.txt"), "ff\n");
    c.commit_all(&r, "ff work");
    let ff = c.head(&r);
    c.git.run(&r, &["switch", "-q", "main"]);
    c.git.run(&r, &["merge", "-q", "--ff-only", "ff"]);
    assert_eq!(c.head(&r), ff);

    // A conflicting merge, then --abort: back to a clean main.
    c.git.run(&r, &["switch", "-q", "-c", "x"]);
    write(&r.join("a.txt"), "X\n");
    c.commit_all(&r, "x");
    c.git.run(&r, &["switch", "-q", "main"]);
    write(&r.join("a.txt"), "M\n");
    c.commit_all(&r, "m");
    let before = c.head(&r);
    let merge = c.git.try_run(&r, &["merge", "x"]);
    assert_eq!(merge.code(), Some(1), "the merge should stop on a conflict:\n{merge}");
    let status = c.git.run(&r, &["status", "--porcelain"]);
    assert_eq!(status.trim(), "UU a.txt");
    assert!(r.join(".git/MERGE_HEAD").is_file());
    c.git.run(&r, &["merge", "--abort"]);
    c.git.assert_clean(&r);
    assert_eq!(read(&r.join("a.txt")), "M\n");
    assert_eq!(c.head(&r), before);
    assert!(!r.join(".git/MERGE_HEAD").exists(), "MERGE_HEAD survived --abort");
    c.fsck(&r);
}

fn rebase(c: &Ctx) {
    let r = c.repo("repo");
    c.git.run(&r, &["branch", "topic"]);
    for i in 1..=2 {
        write(&r.join(format!("m{i}.txt")), "main\n");
        c.commit_all(&r, &format!("m{i}"));
    }
    c.git.run(&r, &["switch", "-q", "topic"]);
    for i in 1..=3 {
        write(&r.join(format!("t{i}.txt")), "topic\n");
        c.commit_all(&r, &format!("t{i}"));
    }
    c.git.run(&r, &["rebase", "-q", "main"]);
    assert_eq!(c.count(&r, "main..topic"), 3);
    assert_eq!(c.git.run(&r, &["merge-base", "main", "topic"]), c.git.run(&r, &["rev-parse", "main"]));
    for f in ["m1.txt", "m2.txt", "t1.txt", "t2.txt", "t3.txt"] {
        assert!(r.join(f).is_file(), "{f} missing after the rebase");
    }
    c.fsck(&r);

    // Interactive: squash the three into one, the todo list edited by sed.
    let mut cmd = c.git.cmd(&r, &["rebase", "-q", "-i", "main"]);
    cmd.env("GIT_SEQUENCE_EDITOR", "sed -i -e '2,$ s/^pick/squash/'");
    seam_tests::run::run(&mut cmd).ok();
    assert_eq!(c.count(&r, "main..topic"), 1);
    c.git.assert_clean(&r);
    c.fsck(&r);

    // A conflicting rebase, aborted: the branch is back where it was.
    c.git.run(&r, &["switch", "-q", "-c", "clash", "main"]);
    write(&r.join("m1.txt"), "clash\n");
    c.commit_all(&r, "clash");
    c.git.run(&r, &["switch", "-q", "topic"]);
    write(&r.join("m1.txt"), "topic edit\n");
    c.commit_all(&r, "topic edit");
    let before = c.head(&r);
    let rb = c.git.try_run(&r, &["rebase", "clash"]);
    assert!(!rb.success(), "the rebase should stop on a conflict:\n{rb}");
    assert!(r.join(".git/rebase-merge").is_dir(), "no rebase-merge state through seamfs");
    c.git.run(&r, &["rebase", "--abort"]);
    assert_eq!(c.head(&r), before);
    assert!(!r.join(".git/rebase-merge").exists(), "rebase-merge survived --abort");
    c.git.assert_clean(&r);
    c.fsck(&r);
}

fn stash(c: &Ctx) {
    let r = c.repo("repo");
    write(&r.join("a.txt"), "changed\n");
    write(&r.join("untracked.txt"), "new\n");
    c.git.run(&r, &["stash", "push", "-q", "-u", "-m", "wip"]);
    c.git.assert_clean(&r);
    assert!(!r.join("untracked.txt").exists());
    assert_eq!(read(&r.join("a.txt")), "base\n");
    let list = c.git.run(&r, &["stash", "list"]);
    assert_eq!(list.lines().count(), 1, "{list}");
    assert!(list.contains("wip"), "{list}");
    c.fsck(&r);
    c.git.run(&r, &["stash", "pop", "-q"]);
    assert_eq!(read(&r.join("a.txt")), "changed\n");
    assert_eq!(read(&r.join("untracked.txt")), "new\n");
    assert_eq!(c.git.run(&r, &["stash", "list"]), "");
    c.git.run(&r, &["stash", "push", "-q"]);
    c.git.run(&r, &["stash", "drop", "-q"]);
    assert_eq!(c.git.run(&r, &["stash", "list"]), "");
    assert_eq!(read(&r.join("a.txt")), "base\n");
    c.fsck(&r);
}

fn tag(c: &Ctx) {
    let r = c.repo("repo");
    c.git.run(&r, &["tag", "v1"]);
    write(&r.join("b.txt"), "b\n");
    c.commit_all(&r, "b");
    c.git.run(&r, &["tag", "-a", "v2", "-m", "release 2"]);
    assert_eq!(c.git.run(&r, &["tag", "-l"]), "v1\nv2\n");
    assert_eq!(c.git.run(&r, &["cat-file", "-t", "v2"]), "tag\n");
    assert_eq!(c.git.run(&r, &["cat-file", "-t", "v1"]), "commit\n");
    assert_eq!(c.git.run(&r, &["describe"]), "v2\n");
    write(&r.join("c.txt"), "c\n");
    c.commit_all(&r, "c");
    assert!(c.git.run(&r, &["describe"]).starts_with("v2-1-g"));
    c.git.run(&r, &["tag", "-d", "v1"]);
    assert_eq!(c.git.run(&r, &["tag", "-l"]), "v2\n");
    c.git.run(&r, &["pack-refs", "--all"]);
    assert!(!r.join(".git/refs/tags/v2").exists(), "pack-refs left the loose tag");
    assert!(read(&r.join(".git/packed-refs")).contains("refs/tags/v2"));
    assert_eq!(c.git.run(&r, &["tag", "-l"]), "v2\n");
    c.fsck(&r);
}

fn gc_repack(c: &Ctx) {
    let r = c.repo("repo");
    for i in 0..30 {
        write(&r.join(format!("f{i}.txt")), &format!("file {i}\n"));
        write(&r.join("common.txt"), &format!("version {i}\n{}", "line\n".repeat(i)));
        c.commit_all(&r, &format!("c{i}"));
    }
    let loose = c.git.run(&r, &["count-objects", "-v"]);
    assert!(!loose.contains("\ncount: 0\n") && loose.starts_with("count: "), "expected loose objects:\n{loose}");
    // The test's own rewrites of `common.txt` are parked (ADR 0029); a park commit landing
    // after gc's repack would add its blob, tree and commit as loose objects (CI: "count: 3").
    c.park_settled();
    c.git.run(&r, &["gc", "-q", "--prune=now"]);
    let after = c.git.run(&r, &["count-objects", "-v"]);
    assert!(after.starts_with("count: 0\n") && after.contains("\npacks: 1\n"), "gc did not pack everything:\n{after}");
    c.fsck(&r);
    c.git.run(&r, &["repack", "-q", "-a", "-d", "-f", "--depth=10"]);
    let idx: Vec<PathBuf> = std::fs::read_dir(r.join(".git/objects/pack"))
        .expect("list packs")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "idx"))
        .collect();
    assert_eq!(idx.len(), 1, "{idx:?}");
    c.git.run(&r, &["verify-pack", &idx[0].to_string_lossy()]);
    c.git.run(&r, &["commit-graph", "write", "--reachable"]);
    c.git.run(&r, &["multi-pack-index", "write"]);
    c.git.run(&r, &["commit-graph", "verify"]);
    c.git.run(&r, &["multi-pack-index", "verify"]);
    assert_eq!(c.count(&r, "HEAD"), 31);
    c.git.run(&r, &["gc", "-q", "--aggressive", "--prune=now"]);
    c.git.assert_clean(&r);
    c.fsck(&r);
}

fn worktree(c: &Ctx) {
    let r = c.repo("repo");
    let wt = c.mnt.join("wt");
    c.git.run(&r, &["worktree", "add", "-q", "-b", "wtb", &wt.to_string_lossy()]);
    assert!(wt.join(".git").is_file() && wt.join("a.txt").is_file());
    write(&wt.join("w.txt"), "from the worktree\n");
    c.commit_all(&wt, "in worktree");
    c.git.assert_clean(&wt);
    c.git.assert_clean(&r);
    let list = c.git.run(&r, &["worktree", "list", "--porcelain"]);
    assert_eq!(list.matches("worktree ").count(), 2, "{list}");
    assert_eq!(c.git.run(&r, &["show", "wtb:w.txt"]), "from the worktree\n");
    c.fsck(&r);
    c.git.fsck(&wt);

    let wt2 = c.mnt.join("wt2");
    let wt3 = c.mnt.join("wt3");
    c.git.run(&r, &["worktree", "add", "-q", "--detach", &wt2.to_string_lossy(), "HEAD"]);
    c.git.run(&r, &["worktree", "move", &wt2.to_string_lossy(), &wt3.to_string_lossy()]);
    assert!(!wt2.exists() && wt3.join("a.txt").is_file());
    c.git.assert_clean(&wt3);
    c.git.run(&r, &["worktree", "remove", &wt3.to_string_lossy()]);
    c.git.run(&r, &["worktree", "remove", &wt.to_string_lossy()]);
    assert!(!wt.exists() && !c.backing_of(&wt).exists(), "worktree remove left the directory");
    c.git.run(&r, &["worktree", "prune"]);
    let list = c.git.run(&r, &["worktree", "list", "--porcelain"]);
    assert_eq!(list.matches("worktree ").count(), 1, "{list}");
    assert!(
        !r.join(".git/worktrees").exists() || std::fs::read_dir(r.join(".git/worktrees")).expect("ls").count() == 0
    );
    assert_eq!(c.count(&r, "wtb"), 2, "the worktree's branch lost its commit");
    c.fsck(&r);
}

/// A worktree added and removed, then a fresh repository made at once (agent tools do this all
/// the time): the removed worktree's git dir frees an inode number the next `mkdir` gets, and
/// that directory is a work-tree directory, not the git dir once known by that number. It used
/// to be served as one, so the new repository's first `git add` failed with "unable to write new
/// index file" (ADR 0027). Several rounds, since which number the lower reuses is up to it.
fn worktree_then_fresh_repo(c: &Ctx) {
    for round in 0..4 {
        let base = c.dir(&format!("round-{round}"));
        let r = base.join("r");
        std::fs::create_dir(&r).expect("mkdir through seamfs");
        c.git.run(&r, &["init", "-q"]);
        write(&r.join("a.txt"), "a\n");
        c.commit_all(&r, "one");
        let wt = base.join("w");
        c.git.run(&r, &["worktree", "add", "-q", &wt.to_string_lossy()]);
        c.git.run(&r, &["worktree", "remove", &wt.to_string_lossy()]);
        assert!(!wt.exists(), "round {round}: worktree remove left the directory");
        c.fsck(&r);
    }
    let r = c.dir("fresh");
    for round in 0..4 {
        let f = r.join(format!("f{round}"));
        std::fs::create_dir(&f).expect("mkdir through seamfs");
        c.git.run(&f, &["init", "-q"]);
        write(&f.join("b.txt"), "b\n");
        c.commit_all(&f, "fresh");
        assert_eq!(c.count(&f, "HEAD"), 1, "round {round}");
        c.git.assert_clean(&f);
        c.fsck(&f);
    }
}

fn submodule(c: &Ctx) {
    // The submodule's source is a plain repo off the mount.
    let src = c.outside.subdir("libsrc");
    c.git.run(&src, &["init", "-q"]);
    write(&src.join("lib.txt"), "lib v1\n");
    c.commit_all(&src, "lib v1");

    let r = c.repo("super");
    let allow = ["-c", "protocol.file.allow=always"];
    let add: Vec<&str> =
        allow.iter().copied().chain(["submodule", "add", "-q", src.to_str().expect("utf-8"), "sub"]).collect();
    c.git.run(&r, &add);
    c.git.run(&r, &["commit", "-q", "-m", "add sub"]);
    assert!(r.join("sub/.git").is_file(), "the submodule's .git should be a gitdir file");
    assert!(c.backing_of(&r).join(".git/modules/sub/HEAD").is_file(), "no .git/modules/sub on the backing dir");
    assert_eq!(read(&r.join("sub/lib.txt")), "lib v1\n");
    let st = c.git.run(&r, &["submodule", "status"]);
    assert!(st.starts_with(' ') && st.contains(" sub"), "submodule not clean: {st:?}");
    c.git.assert_clean(&r);
    c.fsck(&r);
    c.fsck(&r.join("sub"));

    // A new upstream commit, taken with update --remote and committed in the superproject.
    write(&src.join("lib.txt"), "lib v2\n");
    c.commit_all(&src, "lib v2");
    let upd: Vec<&str> = allow.iter().copied().chain(["submodule", "update", "-q", "--remote"]).collect();
    c.git.run(&r, &upd);
    assert_eq!(read(&r.join("sub/lib.txt")), "lib v2\n");
    c.commit_all(&r, "bump sub");
    c.git.assert_clean(&r);

    // A recursive clone of the superproject, on the mount too.
    let clone2 = c.mnt.join("clone2");
    let cl: Vec<&str> = allow
        .iter()
        .copied()
        .chain(["clone", "-q", "--recurse-submodules", r.to_str().expect("utf-8"), clone2.to_str().expect("utf-8")])
        .collect();
    c.git.run(&c.mnt, &cl);
    assert_eq!(read(&clone2.join("sub/lib.txt")), "lib v2\n");
    c.git.assert_clean(&clone2);
    c.fsck(&r);
    c.fsck(&r.join("sub"));
    c.fsck(&clone2);
    c.fsck(&clone2.join("sub"));
}

fn clone(c: &Ctx) {
    let src = c.outside.subdir("src");
    c.git.run(&src, &["init", "-q"]);
    for i in 0..5 {
        write(&src.join(format!("dir{i}/f.txt")), &format!("{i}\n"));
        c.commit_all(&src, &format!("c{i}"));
    }
    c.git.run(&src, &["tag", "-a", "v1", "-m", "v1"]);
    let head = c.head(&src);
    let s = src.to_str().expect("utf-8").to_string();
    let m = |n: &str| c.mnt.join(n).to_str().expect("utf-8").to_string();

    // From off the mount: a local clone (another device: objects are copied), a clone over the
    // file:// transport (a pack), and a shallow one.
    c.git.run(&c.mnt, &["clone", "-q", &s, &m("c1")]);
    c.git.run(&c.mnt, &["clone", "-q", "--no-local", &format!("file://{s}"), &m("c2")]);
    c.git.run(&c.mnt, &["clone", "-q", "--depth", "1", &format!("file://{s}"), &m("c4")]);
    // Within the mount: a local clone hardlinks the objects, through seamfs's link().
    c.git.run(&c.mnt, &["clone", "-q", &m("c1"), &m("c3")]);
    for name in ["c1", "c2", "c3", "c4"] {
        let r = c.mnt.join(name);
        assert_eq!(c.head(&r), head, "{name}");
        c.git.assert_clean(&r);
        c.fsck(&r);
    }
    assert_eq!(c.count(&c.mnt.join("c2"), "HEAD"), 5);
    assert_eq!(c.count(&c.mnt.join("c4"), "HEAD"), 1);
    assert!(c.mnt.join("c4/.git/shallow").is_file());
    assert_eq!(c.git.run(&c.mnt.join("c2"), &["describe"]), "v1\n");

    // c3's objects are hard links to c1's, on the backing dir as well.
    use std::os::unix::fs::MetadataExt;
    let objects = |r: &str| -> Vec<(PathBuf, u64)> {
        let base = c.backing.join(r).join(".git/objects");
        let mut v = Vec::new();
        for d in std::fs::read_dir(&base).expect("ls objects").flatten() {
            if d.file_name().len() == 2 {
                for f in std::fs::read_dir(d.path()).expect("ls").flatten() {
                    v.push((
                        f.path().strip_prefix(&base).expect("below").to_path_buf(),
                        f.metadata().expect("stat").ino(),
                    ));
                }
            }
        }
        v.sort();
        v
    };
    let (o1, o3) = (objects("c1"), objects("c3"));
    assert!(!o1.is_empty(), "c1 has no loose objects to compare");
    assert_eq!(o1, o3, "a local clone within the mount should hardlink every loose object");
}

/// One test per workflow and mode: `git_workflows::passthrough::<wf>` and `..::no_passthrough::<wf>`.
macro_rules! workflows {
    ($($wf:ident),* $(,)?) => {
        mod passthrough {
            $( #[test] fn $wf() { super::run(stringify!($wf), super::$wf, &[]) } )*
        }
        mod no_passthrough {
            $( #[test] fn $wf() { super::run(stringify!($wf), super::$wf, &["--no-passthrough"]) } )*
        }
    };
}

workflows!(init_add_commit, branch_checkout_merge, rebase, stash, tag, gc_repack, worktree, worktree_then_fresh_repo, submodule, clone);
