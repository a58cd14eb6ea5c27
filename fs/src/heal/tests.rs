//! The heal against real repositories built with the git CLI: git is the reference.
//!
//! Each test plays one host and one box on one work tree: the host stages into `.git/index`,
//! the box commits through its own index file (`GIT_INDEX_FILE`), which moves the branch and
//! leaves the host's index stale. The healed bytes are then written over `.git/index` and git
//! is asked what it shows.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

use super::*;

static SEQ: AtomicU64 = AtomicU64::new(0);

/// A throwaway repository; removed on drop.
struct Repo {
    dir: PathBuf,
}

impl Drop for Repo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Repo {
    fn new(format: &str) -> Repo {
        let dir = std::env::temp_dir().join(format!("seamfs-heal-{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed)));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the test repo dir");
        let r = Repo { dir };
        r.git(&["init", "-q", "-b", "main", &format!("--object-format={format}")]);
        r
    }

    fn cmd(&self, args: &[&str], box_side: bool) -> Command {
        let mut c = Command::new("git");
        c.current_dir(&self.dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .args(["-c", "core.quotepath=false", "-c", "core.fsmonitor=false"])
            .args(args);
        if box_side {
            c.env("GIT_INDEX_FILE", self.dir.join(".git/index-box"));
        } else {
            c.env_remove("GIT_INDEX_FILE");
        }
        c
    }

    fn run(&self, args: &[&str], box_side: bool) -> String {
        let out = self.cmd(args, box_side).output().expect("run git");
        assert!(out.status.success(), "git {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("git output is UTF-8 here")
    }

    /// Host-side git (the shared index).
    fn git(&self, args: &[&str]) -> String {
        self.run(args, false)
    }

    /// Box-side git (its own index).
    fn boxgit(&self, args: &[&str]) -> String {
        self.run(args, true)
    }

    fn write(&self, path: &str, content: &str) {
        let p = self.dir.join(path);
        std::fs::create_dir_all(p.parent().expect("a file has a parent")).expect("mkdir -p");
        std::fs::write(p, content).expect("write a work tree file");
    }

    fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"]).trim().to_string()
    }

    fn objects(&self) -> PathBuf {
        self.dir.join(".git/objects")
    }

    fn index(&self) -> Vec<u8> {
        std::fs::read(self.dir.join(".git/index")).expect("read .git/index")
    }

    fn set_index(&self, bytes: &[u8]) {
        std::fs::write(self.dir.join(".git/index"), bytes).expect("write .git/index");
    }

    /// Host and box start in sync at a first commit of `files`.
    fn seeded(format: &str, files: &[(&str, &str)]) -> (Repo, String) {
        let r = Repo::new(format);
        for (p, c) in files {
            r.write(p, c);
        }
        r.git(&["add", "-A"]);
        r.git(&["commit", "-q", "-m", "base"]);
        r.boxgit(&["read-tree", "HEAD"]);
        let head = r.head();
        (r, head)
    }

    /// The box commits `paths` as they are in the work tree (deleted ones: removed).
    fn box_commit(&self, paths: &[&str]) -> String {
        let mut args = vec!["add", "-A", "--"];
        args.extend_from_slice(paths);
        self.boxgit(&args);
        self.boxgit(&["commit", "-q", "-m", "box"]);
        self.head()
    }

    /// Heals the host's index after a box commit; the box's index as a hint changes nothing but
    /// the cost.
    fn heal_from(&self, old: &str) -> HealOutcome {
        let new = self.head();
        let plain = heal(&self.objects(), &self.index(), old, &new).expect("heal decides");
        let from_box = || std::fs::File::open(self.dir.join(".git/index-box")).ok().map(HintData::File);
        let hints: [Hint; 1] = [&from_box];
        let hinted =
            heal_with(&self.objects(), &self.index(), old, &new, HealOptions { hints: &hints, ..Default::default() })
                .expect("heal decides");
        assert_eq!(plain, hinted, "a hint changes nothing but the cost");
        plain
    }

    /// `git diff --cached --name-status` as sorted lines.
    fn staged(&self) -> Vec<String> {
        let mut v: Vec<String> = self.git(&["diff", "--cached", "--name-status"]).lines().map(|l| l.replace('\t', " ")).collect();
        v.sort();
        v
    }

    fn status(&self) -> String {
        self.git(&["status", "--porcelain"])
    }
}

fn healed(o: HealOutcome) -> (Vec<u8>, HealKind) {
    match o {
        HealOutcome::Healed { bytes, kind } => (bytes, kind),
        other => panic!("expected a healed index, got {other:?}"),
    }
}

fn decode_state(bytes: &[u8]) -> gix::index::State {
    gix::index::State::from_bytes(bytes, filetime::FileTime::now(), gix::hash::Kind::Sha1, Default::default()).expect("decode").0
}

#[test]
fn pure_staleness_fast_forwards() {
    let (r, base) = Repo::seeded("sha1", &[("a", "1\n"), ("c", "gone soon\n"), ("keep", "k\n")]);
    r.write("a", "2\n");
    r.write("b/new", "new\n");
    std::fs::remove_file(r.dir.join("c")).expect("rm c");
    r.box_commit(&["a", "b/new", "c"]);
    assert!(!r.staged().is_empty(), "before the heal the host index reverts the box commit");

    let (bytes, kind) = healed(r.heal_from(&base));
    assert_eq!(kind, HealKind::Ff);
    r.set_index(&bytes);
    assert_eq!(r.staged(), Vec::<String>::new());
    assert_eq!(r.status(), "");
    assert_eq!(r.git(&["write-tree"]), r.git(&["rev-parse", "HEAD^{tree}"]), "no stale tree cache");
    assert!(decode_state(&bytes).tree().is_none(), "no tree-cache extension written");
}

#[test]
fn host_staging_is_carried() {
    let (r, base) = Repo::seeded(
        "sha1",
        &[("a", "1\n"), ("h_mod", "m\n"), ("h_del", "d\n"), ("h_exec", "#!/bin/sh\n"), ("keep", "k\n")],
    );
    // Host staging: addition, modification, deletion, mode change.
    r.write("h_new", "new\n");
    r.write("h_mod", "m2\n");
    std::fs::remove_file(r.dir.join("h_del")).expect("rm h_del");
    r.git(&["add", "-A", "--", "h_new", "h_mod", "h_del"]);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(r.dir.join("h_exec"), std::fs::Permissions::from_mode(0o755)).expect("chmod +x");
    r.git(&["add", "h_exec"]);
    // The box commits only its own file.
    r.write("a", "box\n");
    r.box_commit(&["a"]);

    let (bytes, kind) = healed(r.heal_from(&base));
    assert_eq!(kind, HealKind::Carry);
    r.set_index(&bytes);
    assert_eq!(r.staged(), vec!["A h_new", "D h_del", "M h_exec", "M h_mod"]);
    assert!(r.git(&["ls-files", "-s", "h_exec"]).starts_with("100755 "), "mode change carried");
    assert_eq!(r.git(&["diff", "--name-status"]), "", "the box's file matches the index");
}

#[test]
fn host_add_all_of_the_box_files_is_already_healed() {
    // An IDE's `git add -A` on the host staged the box's work before the box committed it.
    let (r, base) = Repo::seeded("sha1", &[("a", "1\n")]);
    r.write("a", "2\n");
    r.write("n", "new\n");
    r.git(&["add", "-A"]);
    r.box_commit(&["a", "n"]);
    assert_eq!(r.heal_from(&base), HealOutcome::Unchanged);
}

#[test]
fn overlap_is_refused() {
    let (r, base) = Repo::seeded("sha1", &[("a", "1\n"), ("b", "b\n")]);
    r.write("a", "host\n");
    r.git(&["add", "a"]);
    r.write("a", "box\n");
    r.box_commit(&["a"]);
    assert_eq!(r.heal_from(&base), HealOutcome::Refused(Refusal::Overlap(vec!["a".into()])));
}

#[test]
fn conflict_is_refused_never_carried() {
    let (r, base) = Repo::seeded("sha1", &[("a", "1\n"), ("c", "c\n")]);
    let blob = r.git(&["hash-object", "-w", "c"]);
    let blob = blob.trim();
    // Unmerged entries for c (as a stash pop leaves them).
    r.git(&["update-index", "--force-remove", "c"]);
    let info = format!("100644 {blob} 1\tc\n100644 {blob} 2\tc\n100644 {blob} 3\tc\n");
    let mut child = r.cmd(&["update-index", "--index-info"], false).stdin(std::process::Stdio::piped()).spawn().expect("git");
    use std::io::Write;
    child.stdin.take().expect("stdin").write_all(info.as_bytes()).expect("feed index-info");
    assert!(child.wait().expect("wait").success());
    r.write("a", "box\n");
    r.box_commit(&["a"]);
    assert_eq!(r.heal_from(&base), HealOutcome::Refused(Refusal::Conflicted(vec!["c".into()])));
}

#[test]
fn a_host_file_where_the_box_made_a_directory_is_refused() {
    let (r, base) = Repo::seeded("sha1", &[("a", "1\n")]);
    r.write("x", "host file\n");
    r.git(&["add", "x"]);
    std::fs::remove_file(r.dir.join("x")).expect("rm x");
    r.write("x/inner", "box\n");
    r.box_commit(&["x/inner"]);
    assert_eq!(r.heal_from(&base), HealOutcome::Refused(Refusal::DirFileClash(vec!["x".into(), "x/inner".into()])));
}

#[test]
fn a_host_directory_where_the_box_made_a_file_is_refused() {
    let (r, base) = Repo::seeded("sha1", &[("a", "1\n")]);
    r.write("y/deep/f", "host\n");
    r.git(&["add", "y/deep/f"]);
    std::fs::remove_dir_all(r.dir.join("y")).expect("rm y");
    r.write("y", "box file\n");
    r.box_commit(&["y"]);
    assert_eq!(
        r.heal_from(&base),
        HealOutcome::Refused(Refusal::DirFileClash(vec!["y".into(), "y/deep/f".into()]))
    );
}

#[test]
fn glob_characters_are_literal() {
    let (r, base) = Repo::seeded("sha1", &[("a", "1\n"), ("[x].txt", "x\n"), ("x.txt", "plain\n")]);
    r.write("a*b[1]?.txt", "glob\n");
    r.write("[x].txt", "x2\n");
    r.git(&["add", "--", ":(literal)a*b[1]?.txt", ":(literal)[x].txt"]);
    r.write("x.txt", "box\n");
    r.box_commit(&["x.txt"]);
    let (bytes, kind) = healed(r.heal_from(&base));
    assert_eq!(kind, HealKind::Carry);
    r.set_index(&bytes);
    assert_eq!(r.staged(), vec!["A a*b[1]?.txt", "M [x].txt"]);
    assert_eq!(r.git(&["diff", "--name-status"]), "");
}

#[test]
fn stat_data_is_kept_for_unchanged_entries_only() {
    let (r, base) = Repo::seeded("sha1", &[("a", "1\n"), ("keep", "k\n"), ("d/keep2", "k2\n")]);
    r.git(&["update-index", "--refresh"]);
    let before = decode_state(&r.index());
    r.write("a", "2\n");
    r.write("new", "n\n");
    r.box_commit(&["a", "new"]);
    let (bytes, _) = healed(r.heal_from(&base));
    let after = decode_state(&bytes);
    for path in ["keep", "d/keep2"] {
        let b = before.entry_by_path(path.into()).expect("entry before");
        let a = after.entry_by_path(path.into()).expect("entry after");
        assert_ne!(b.stat, gix::index::entry::Stat::default(), "{path} had stat data");
        assert_eq!(a.stat, b.stat, "{path} keeps its stat data");
    }
    for path in ["a", "new"] {
        let a = after.entry_by_path(path.into()).expect("entry after");
        assert_eq!(a.stat, gix::index::entry::Stat::default(), "{path} is re-checked by git");
    }
    r.set_index(&bytes);
    assert_eq!(r.status(), "");
    assert_eq!(r.git(&["ls-files", "-s"]), r.boxgit(&["ls-files", "-s"]));
}

#[test]
fn racy_entries_are_smudged_when_the_index_mtime_is_known() {
    let (r, base) = Repo::seeded("sha1", &[("a", "1\n"), ("keep", "k\n")]);
    r.write("a", "2\n");
    r.box_commit(&["a"]);
    let opts = HealOptions { index_mtime: Some(std::time::SystemTime::UNIX_EPOCH), ..Default::default() };
    let out = heal_with(&r.objects(), &r.index(), &base, &r.head(), opts).expect("heal");
    let (bytes, _) = healed(out);
    let keep = decode_state(&bytes).entry_by_path("keep".into()).expect("keep").stat;
    assert_eq!(keep.size, 0, "an entry not older than the index is smudged");
    assert_ne!(keep.mtime.secs, 0, "the rest of its stat data stays");
    r.set_index(&bytes);
    assert_eq!(r.status(), "");
}

#[test]
fn intent_to_add_is_carried_as_staging() {
    let (r, base) = Repo::seeded("sha1", &[("a", "1\n")]);
    r.write("later", "l\n");
    r.git(&["add", "-N", "later"]);
    r.write("a", "2\n");
    r.box_commit(&["a"]);
    let (bytes, kind) = healed(r.heal_from(&base));
    assert_eq!(kind, HealKind::Carry);
    r.set_index(&bytes);
    assert_eq!(r.status(), " A later\n");
}

#[test]
fn unborn_branch_heals_from_the_empty_tree() {
    let r = Repo::new("sha1");
    r.write("host", "h\n");
    r.git(&["add", "host"]);
    r.write("boxfile", "b\n");
    r.box_commit(&["boxfile"]);
    let (bytes, kind) = healed(r.heal_from(""));
    assert_eq!(kind, HealKind::Carry);
    r.set_index(&bytes);
    assert_eq!(r.staged(), vec!["A host"]);
}

#[test]
fn no_move_is_unchanged() {
    let (r, base) = Repo::seeded("sha1", &[("a", "1\n")]);
    r.write("h", "h\n");
    r.git(&["add", "h"]);
    assert_eq!(heal(&r.objects(), &r.index(), &base, &base).expect("heal"), HealOutcome::Unchanged);
}

#[test]
fn sha256_repositories_heal_too() {
    let (r, base) = Repo::seeded("sha256", &[("a", "1\n")]);
    assert_eq!(base.len(), 64);
    r.write("a", "2\n");
    r.box_commit(&["a"]);
    let new = r.head();
    let out = heal(&r.objects(), &r.index(), &base, &new).expect("heal");
    let (bytes, kind) = healed(out);
    assert_eq!(kind, HealKind::Ff);
    r.set_index(&bytes);
    assert_eq!(r.status(), "");
}

#[test]
fn blob_id_is_git_hash_object() {
    let (r, _) = Repo::seeded("sha1", &[("a", "1\n")]);
    let want = r.git(&["hash-object", ".git/index"]);
    assert_eq!(blob_id(&r.index(), gix::hash::Kind::Sha1), want.trim());
    let (r, _) = Repo::seeded("sha256", &[("a", "1\n")]);
    let want = r.git(&["hash-object", ".git/index"]);
    assert_eq!(blob_id(&r.index(), gix::hash::Kind::Sha256), want.trim());
}

#[test]
fn a_tree_git_would_not_check_out_is_not_healed_onto() {
    let (r, base) = Repo::seeded("sha1", &[("a", "1\n")]);
    let blob = r.git(&["hash-object", "-w", "a"]);
    let entry = format!("100644 blob {}\t.GIT\n", blob.trim());
    let mut child = r.cmd(&["mktree"], false).stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).spawn().expect("git");
    use std::io::Write;
    child.stdin.take().expect("stdin").write_all(entry.as_bytes()).expect("feed mktree");
    let out = child.wait_with_output().expect("mktree");
    assert!(out.status.success());
    let tree = String::from_utf8(out.stdout).expect("utf8");
    let commit = r.git(&["commit-tree", tree.trim(), "-p", &base, "-m", "evil"]);
    let err = heal(&r.objects(), &r.index(), &base, commit.trim()).expect_err("refused");
    assert!(matches!(err, HealError::UnsafePath { .. }), "{err}");
}

#[test]
fn bad_input_is_an_error_naming_it() {
    let (r, base) = Repo::seeded("sha1", &[("a", "1\n")]);
    let err = heal(&r.objects(), b"not an index at all, nor ever will be one", &base, &base).expect_err("not an index");
    assert!(err.to_string().contains("DIRC"), "{err}");
    let err = heal(&r.objects(), &r.index(), &base, "xyz").expect_err("bad id");
    assert!(err.to_string().contains("xyz"), "{err}");
    let missing = "1".repeat(40);
    let err = heal(&r.objects(), &r.index(), &base, &missing).expect_err("missing commit");
    assert!(err.to_string().contains(&missing), "{err}");
}

/// The heal's cost on a 20,000-file repository (one box commit of one file). Run with
/// `cargo test --release -p seamfs heal_cost -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check"]
fn heal_cost_on_20k_files() {
    let r = Repo::new("sha1");
    for d in 0..200 {
        for f in 0..100 {
            r.write(&format!("d{d:03}/f{f:03}.txt"), &format!("{d} {f}\n"));
        }
    }
    r.git(&["add", "-A"]);
    r.git(&["commit", "-q", "-m", "base"]);
    r.git(&["update-index", "--refresh"]);
    r.boxgit(&["read-tree", "HEAD"]);
    let base = r.head();
    r.write("d100/f050.txt", "box\n");
    r.box_commit(&["d100/f050.txt"]);
    r.write("d007/f007.txt", "host\n");
    r.git(&["add", "d007/f007.txt"]);
    let index = r.index();
    let new = r.head();
    let mut best = std::time::Duration::MAX;
    for _ in 0..5 {
        let t = std::time::Instant::now();
        let out = heal(&r.objects(), &index, &base, &new).expect("heal");
        best = best.min(t.elapsed());
        assert!(matches!(out, HealOutcome::Healed { kind: HealKind::Carry, .. }));
    }
    let t = std::time::Instant::now();
    let _ = blob_id(&index, gix::hash::Kind::Sha1);
    eprintln!("heal of a 20,000-entry index ({} bytes): best of 5 {:?}; blob_id {:?}", index.len(), best, t.elapsed());
}

#[test]
fn staging_deep_in_unchanged_directories_is_seen() {
    let files = [("d1/a", "1\n"), ("d2/sub/x", "x\n"), ("d3/y", "y\n"), ("d3/z", "z\n"), ("top", "t\n")];
    // Nothing staged: the tree cache vouches for the unchanged directories.
    let (r, base) = Repo::seeded("sha1", &files);
    assert!(decode_state(&r.index()).tree().is_some(), "git commit wrote a tree cache");
    r.write("d1/a", "box\n");
    r.box_commit(&["d1/a"]);
    assert!(matches!(r.heal_from(&base), HealOutcome::Healed { kind: HealKind::Ff, .. }));

    for (what, stage) in [
        ("a modification", &(|r: &Repo| {
            r.write("d2/sub/x", "host\n");
            r.git(&["add", "d2/sub/x"]);
        }) as &dyn Fn(&Repo)),
        ("a deletion", &|r: &Repo| {
            r.git(&["rm", "-q", "--cached", "d3/y"]);
        }),
        ("an addition", &|r: &Repo| {
            r.write("d2/sub/new", "n\n");
            r.git(&["add", "d2/sub/new"]);
        }),
    ] {
        let (r, base) = Repo::seeded("sha1", &files);
        stage(&r);
        r.write("d1/a", "box\n");
        r.box_commit(&["d1/a"]);
        let (bytes, kind) = healed(r.heal_from(&base));
        assert_eq!(kind, HealKind::Carry, "{what} is staging");
        r.set_index(&bytes);
        assert_eq!(r.staged().len(), 1, "{what}: {:?}", r.staged());
    }
}

/// Every tree hashed from an index is the object database's tree of that id, item for item:
/// names that sort differently as files and as directories, modes, symlinks, gitlinks.
#[test]
fn trees_hashed_from_an_index_are_the_objects() {
    use std::os::unix::fs::PermissionsExt;
    for format in ["sha1", "sha256"] {
        let r = Repo::new(format);
        for p in ["a.b", "a-b/x", "a/x", "a/y/z", "a0", "b/c/d/e", "é/ü", "z"] {
            r.write(p, &format!("{p}\n"));
        }
        std::fs::set_permissions(r.dir.join("a/x"), std::fs::Permissions::from_mode(0o755)).expect("chmod +x");
        std::os::unix::fs::symlink("a/x", r.dir.join("link")).expect("symlink");
        r.git(&["add", "-A"]);
        r.git(&["commit", "-q", "-m", "base"]);
        let head_commit = r.head();
        r.git(&["update-index", "--add", "--cacheinfo", &format!("160000,{head_commit},sub/module")]);
        let kind = if format == "sha1" { gix::hash::Kind::Sha1 } else { gix::hash::Kind::Sha256 };
        let state = gix::index::State::from_bytes(&r.index(), filetime::FileTime::now(), kind, Default::default())
            .expect("decode")
            .0;
        let mut mem = memtrees::MemTrees::default();
        let root = mem.add(&state).expect("a whole tree");
        assert_eq!(root.to_string(), r.git(&["write-tree"]).trim(), "{format}: the root is git's write-tree");
        let odb = trees::Objects::open(&r.objects(), kind).expect("objects");
        let mut stack = vec![root];
        let mut seen = 0;
        while let Some(id) = stack.pop() {
            let from_mem = mem.get(&id).expect("every subtree is known");
            let from_odb = odb.items(&id, b"".as_bstr()).expect("git wrote every tree");
            assert_eq!(from_mem, from_odb, "{format}: tree {id}");
            stack.extend(from_mem.iter().filter_map(|(_, i)| match i {
                trees::Item::Tree(t) => Some(t),
                trees::Item::Leaf(_) => None,
            }));
            seen += 1;
        }
        assert!(seen >= 8, "{format}: walked {seen} trees");
    }
}

/// A hint that is no index, or holds unrelated trees, is ignored.
#[test]
fn a_bad_hint_is_ignored() {
    let (r, base) = Repo::seeded("sha1", &[("a", "1\n"), ("d/b", "2\n")]);
    r.write("d/b", "box\n");
    r.box_commit(&["d/b"]);
    let junk = || Some(HintData::Bytes(b"DIRC not an index at all".to_vec()));
    let none = || None;
    let other = || Some(HintData::Bytes(r.index()));
    let hints: [Hint; 3] = [&junk, &none, &other];
    let out =
        heal_with(&r.objects(), &r.index(), &base, &r.head(), HealOptions { hints: &hints, ..Default::default() })
            .expect("heal decides");
    assert_eq!(out, r.heal_from(&base));
    let (bytes, kind) = healed(out);
    assert_eq!(kind, HealKind::Ff);
    r.set_index(&bytes);
    assert_eq!(r.status(), "");
}

#[test]
fn entries_digest_ignores_stat_data_and_sees_every_entry_change() {
    for format in ["sha1", "sha256"] {
        let kind = if format == "sha1" { gix::hash::Kind::Sha1 } else { gix::hash::Kind::Sha256 };
        let (r, _) = Repo::seeded(format, &[("a.txt", "a\n"), ("d/b.txt", "b\n")]);
        let before = r.index();
        let digest = super::entries_digest(&before, kind).expect("an index");
        // A stat-only rewrite (what git's refresh writes): other bytes, the same digest.
        let f = std::fs::File::options().write(true).open(r.dir.join("a.txt")).expect("open a.txt");
        f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(7)).expect("touch a.txt");
        r.git(&["update-index", "--refresh"]);
        let refreshed = r.index();
        assert_ne!(refreshed, before, "{format}: the refresh did not rewrite the index");
        assert_eq!(super::entries_digest(&refreshed, kind), Some(digest), "{format}: stat data changed the digest");
        // New content, a new file, a mode: each changes it.
        r.write("a.txt", "a, changed\n");
        r.git(&["add", "a.txt"]);
        let changed = super::entries_digest(&r.index(), kind);
        assert!(changed.is_some() && changed != Some(digest), "{format}: new content, same digest");
        r.write("c.txt", "c\n");
        r.git(&["add", "c.txt"]);
        assert!(super::entries_digest(&r.index(), kind) != changed, "{format}: a new entry, same digest");
        let added = super::entries_digest(&r.index(), kind);
        r.git(&["update-index", "--chmod=+x", "c.txt"]);
        assert!(super::entries_digest(&r.index(), kind) != added, "{format}: a mode change, same digest");
        assert_eq!(super::entries_digest(b"not an index", kind), None);
    }
}
