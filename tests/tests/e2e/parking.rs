//! Parking (ADR 0029): a box command that destroys the host's uncommitted work-tree bytes
//! (`git checkout -- .`, `reset --hard`, `stash -u` + `drop`, `clean -fdx`, `worktree remove
//! --force`, `rm -rf`) leaves them on `refs/seam/parked`, listed by `seamfs parked` (box) and
//! `seamd parked` (host) and restored byte-exact by `restore`. Ignored files cost no read;
//! `git fsck` stays clean and the host's `git status` shows nothing of the park log. Each case
//! also runs with `--no-park` as the control: there the bytes are gone.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use seam_tests::run::{run, Ran};
use seam_tests::sys;

use crate::hostbox::{age, status, wait_until, write, Env, Repo};

const BASE: &[(&str, &str)] = &[
    ("src/a.txt", "a base\n"),
    ("src/b.sh", "echo b base\n"),
    ("src/c.txt", "c base (stays clean)\n"),
    (".gitignore", "build/\n"),
];

/// The host's uncommitted work: two modified tracked files (one executable), two untracked.
const MODIFIED: &[(&str, &str)] = &[("src/a.txt", "a edited on the host\n"), ("src/b.sh", "echo b edited on the host\n")];
const UNTRACKED: &[(&str, &str)] = &[("src/new.txt", "a new file on the host\n"), ("notes.md", "host notes\n")];
const IGNORED_FILES: usize = 6;

/// The status attribute's value of `key` (`park_reads`...).
fn stat_of(env: &Env, key: &str) -> u64 {
    let v = sys::getxattr(env.mount.path(), "user.seamfs.status", 8192, false).expect("user.seamfs.status");
    let text = String::from_utf8_lossy(&v).into_owned();
    text.lines().find_map(|l| l.strip_prefix(&format!("{key}="))).and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// A host repository with BASE committed, then the host's edits and an ignored build dir.
fn host_edits(env: &Env) -> Repo {
    let r = env.host_repo("repo", BASE);
    std::fs::set_permissions(r.h("src/b.sh"), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    env.host(&r, &["add", "src/b.sh"]);
    env.host(&r, &["commit", "-q", "-m", "exec bit"]);
    for (p, c) in MODIFIED.iter().chain(UNTRACKED) {
        write(&r.h(p), c);
    }
    for i in 0..IGNORED_FILES {
        write(&r.h(&format!("build/out/o{i}.o")), &format!("object {i}\n"));
    }
    age(&r.h("src/a.txt"));
    r
}

/// The host checkout's path, as an argument.
fn top(r: &Repo) -> &str {
    r.host.to_str().expect("utf-8 temp path")
}

fn seamd(args: &[&str]) -> Ran {
    run(Command::new(seam_tests::bins::bin("seamd")).args(args))
}

fn seamfs_in(dir: &Path, args: &[&str]) -> Ran {
    run(Command::new(seam_tests::bins::seamfs()).args(args).current_dir(dir))
}

fn sh_in(env: &Env, dir: &Path, script: &str) {
    let mut c = Command::new("sh");
    c.arg("-c").arg(script).current_dir(dir);
    env.git.env(&mut c);
    run(&mut c).ok();
}

/// Waits for the park commit(s) of the burst to be written.
fn wait_parked(env: &Env, commits: u64) {
    let ok = wait_until(Duration::from_secs(8), || stat_of(env, "park_commits") >= commits);
    assert!(ok, "no park commit within 8 s:\n{}", env.log());
}

/// Runs `destroy` in the box and checks what `expect` names was parked and comes back.
fn case(label: &str, expect: &[(&str, &str)], destroy: impl Fn(&Env, &Repo)) {
    // The control: without parking, the bytes are gone for good.
    {
        let env = Env::new(&format!("{label}-ctl"), &["--no-park"]);
        let r = host_edits(&env);
        destroy(&env, &r);
        for (p, c) in expect {
            let now = std::fs::read(r.h(p)).unwrap_or_default();
            assert_ne!(now, c.as_bytes(), "{label} (control): {p} kept its bytes: the command destroys nothing");
        }
        let listed = seamfs_in(&r.boxed, &["parked"]).ok().stdout;
        assert_eq!(listed.lines().count(), 1, "{label} (control): --no-park parked something:\n{listed}");
        env.finish();
    }
    let env = Env::new(label, &[]);
    let r = host_edits(&env);
    let before = status(&env.git, &r.host);
    destroy(&env, &r);
    wait_parked(&env, 1);
    let reads = stat_of(&env, "park_reads");
    assert_eq!(reads, expect.len() as u64, "{label}: files read for parking (the ignored dir must cost none)\n{}", env.log());
    let listed = seamfs_in(&r.boxed, &["parked"]).ok().stdout;
    let host_listed = seamd(&["parked", top(&r)]).ok().stdout;
    assert_eq!(listed, host_listed, "{label}: box and host list the same");
    for (p, _) in expect {
        assert!(listed.lines().any(|l| l.contains(&format!(" {p} "))), "{label}: {p} not listed:\n{listed}");
    }
    assert!(!listed.contains("build/"), "{label}: an ignored file was parked:\n{listed}");
    // The host's status shows nothing of the log; fsck is clean with the park commits.
    assert!(status(&env.git, &r.host).iter().all(|l| !l.contains("seam")), "{label}: the host's status shows the park log");
    env.git.fsck(&r.host);
    for (i, (p, c)) in expect.iter().enumerate() {
        // Alternate the box and the host as the restorer.
        if i % 2 == 0 {
            seamfs_in(&r.boxed, &["parked", "restore", p]).ok();
        } else {
            seamd(&["parked", top(&r), "restore", p]).ok();
        }
        assert_eq!(std::fs::read(r.h(p)).expect("restored"), c.as_bytes(), "{label}: {p} restored byte-exact");
    }
    let mode = std::fs::metadata(r.h("src/b.sh")).map(|m| m.permissions().mode() & 0o777).unwrap_or(0);
    if expect.iter().any(|(p, _)| *p == "src/b.sh") {
        assert_eq!(mode, 0o755, "{label}: src/b.sh restored with its mode");
    }
    if expect.len() == MODIFIED.len() + UNTRACKED.len() {
        assert_eq!(status(&env.git, &r.host), before, "{label}: after the restores the host's status is as before");
    }
    env.git.fsck(&r.host);
    env.finish();
}

fn all() -> Vec<(&'static str, &'static str)> {
    MODIFIED.iter().chain(UNTRACKED).copied().collect()
}

#[test]
fn checkout_dot_parks_modified_files() {
    case("park-checkout", MODIFIED, |env, r| drop(env.boxed(r, &["checkout", "--", "."])));
}

#[test]
fn reset_hard_parks_modified_files() {
    case("park-reset", MODIFIED, |env, r| drop(env.boxed(r, &["reset", "-q", "--hard"])));
}

#[test]
fn stash_u_then_drop_parks_everything() {
    case("park-stash", &all(), |env, r| {
        env.boxed(r, &["stash", "-u", "-q"]);
        env.boxed(r, &["stash", "drop", "-q"]);
    });
}

#[test]
fn clean_fdx_parks_untracked_not_ignored() {
    case("park-clean", UNTRACKED, |env, r| {
        env.boxed(r, &["clean", "-q", "-fdx"]);
        assert!(!r.h("build").exists(), "git clean -x removed the ignored dir");
    });
}

#[test]
fn rm_rf_parks_what_is_in_no_object() {
    let expect: Vec<_> = all().into_iter().filter(|(p, _)| p.starts_with("src/")).collect();
    case("park-rm", &expect, |env, r| {
        sh_in(env, &r.boxed, "rm -rf src build");
    });
}

#[test]
fn worktree_remove_force_parks_its_uncommitted_files() {
    let env = Env::new("park-wt", &[]);
    let r = env.host_repo("repo", BASE);
    env.boxed(&r, &["worktree", "add", "-q", "../wt"]);
    let wt_host = env.backing.join("wt");
    write(&wt_host.join("src/a.txt"), "a edited in the linked worktree\n");
    write(&wt_host.join("wt-only.txt"), "untracked in the linked worktree\n");
    write(&wt_host.join("build/x.o"), "ignored\n");
    env.boxed(&r, &["worktree", "remove", "--force", "../wt"]);
    assert!(!wt_host.exists(), "the worktree is gone");
    wait_parked(&env, 1);
    assert_eq!(stat_of(&env, "park_reads"), 2, "only the two uncommitted files were read\n{}", env.log());
    let listed = seamd(&["parked", top(&r)]).ok().stdout;
    assert!(listed.contains("[wt] src/a.txt") && listed.contains("[wt] wt-only.txt"), "listed:\n{listed}");
    // From the main checkout an entry of another worktree needs a destination.
    let refused = seamd(&["parked", top(&r), "restore", "src/a.txt"]);
    assert!(!refused.success(), "restore by path from the main checkout finds no main-tree entry:\n{refused}");
    let id = listed.lines().find(|l| l.contains("[wt] wt-only.txt")).and_then(|l| l.split_whitespace().next()).expect("id");
    let no_to = seamd(&["parked", top(&r), "restore", id]);
    assert!(!no_to.success() && no_to.stderr.contains("--to"), "restore asks for --to:\n{no_to}");
    let dest = env.backing.join("wt-back");
    std::fs::create_dir(&dest).expect("mkdir");
    seamd(&["parked", top(&r), "restore", id, "--to", dest.to_str().expect("utf-8")]).ok();
    assert_eq!(std::fs::read(dest.join("wt-only.txt")).expect("restored"), b"untracked in the linked worktree\n");
    env.git.fsck(&r.host);
    env.finish();
}

#[test]
fn restore_refuses_a_file_changed_since() {
    let env = Env::new("park-changed", &[]);
    let r = host_edits(&env);
    env.boxed(&r, &["checkout", "--", "."]);
    // Right away: the box's `parked` waits for the burst's commit.
    let listed = seamfs_in(&r.boxed, &["parked"]).ok();
    assert!(listed.stdout.contains(" src/a.txt ") && listed.stderr.contains("waiting for seamfs"), "{listed}");
    write(&r.h("src/a.txt"), "edited again after the park\n");
    let refused = seamd(&["parked", top(&r), "restore", "src/a.txt"]);
    assert!(!refused.success() && refused.stderr.contains("src/a.txt") && refused.stderr.contains("--force"), "{refused}");
    assert_eq!(std::fs::read(r.h("src/a.txt")).expect("read"), b"edited again after the park\n", "a refusal changes nothing");
    seamd(&["parked", top(&r), "restore", "src/a.txt", "--force"]).ok();
    assert_eq!(std::fs::read(r.h("src/a.txt")).expect("read"), MODIFIED[0].1.as_bytes());
    env.finish();
}

/// Host git fed `input` on stdin; its trimmed stdout.
fn git_stdin(env: &Env, r: &Repo, args: &[&str], input: &[u8]) -> String {
    use std::io::Write as _;
    let mut c = env.git.cmd(&r.host, args);
    let mut child = c.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).spawn().expect("git");
    child.stdin.take().expect("stdin").write_all(input).expect("write");
    let out = child.wait_with_output().expect("git");
    assert!(out.status.success(), "git {args:?} failed");
    String::from_utf8(out.stdout).expect("utf-8").trim().to_string()
}

/// A park log the box could have forged: paths leaving the checkout or inside `.git`.
#[test]
fn hostile_log_entries_are_refused() {
    let env = Env::new("park-hostile", &["--no-park"]);
    let r = env.host_repo("repo", BASE);
    let outside = env.backing.join("escaped");
    let blob = git_stdin(&env, &r, &["hash-object", "-w", "--stdin"], b"evil\n");
    let line = |p: &str| format!("parked\t{blob}\t100644\t5\t1700000000000\tunlink\t1\t.\t{p}\tevil\n");
    let manifest = format!("seam-park 1\n{}{}{}", line("../escaped"), line("/tmp/abs-escape"), line(".git/hooks/pre-commit"));
    std::fs::write(env.backing.join("manifest"), manifest).expect("write");
    let mblob = env.host(&r, &["hash-object", "-w", env.backing.join("manifest").to_str().expect("utf-8")]);
    let tree_in = format!("100644 blob {}\tf000000\n100644 blob {}\tmanifest\n", blob, mblob.trim());
    let tree = git_stdin(&env, &r, &["mktree"], tree_in.as_bytes());
    let commit = env.host(&r, &["commit-tree", &tree, "-m", "forged"]).trim().to_string();
    env.host(&r, &["update-ref", "refs/seam/parked", &commit]);
    let ran = seamd(&["parked", top(&r)]).ok();
    let listed = ran.stdout.clone();
    assert_eq!(listed.matches("refused").count(), 3, "every hostile entry is shown refused:\n{ran}");
    for id in listed.lines().skip(1).filter_map(|l| l.split_whitespace().next()) {
        let out = seamd(&["parked", top(&r), "restore", id, "--force"]);
        assert!(!out.success() && out.stderr.contains("refused"), "restore of a hostile entry:\n{out}");
    }
    assert!(!outside.exists() && !Path::new("/tmp/abs-escape").exists(), "a hostile entry was written");
    assert!(!r.h(".git/hooks/pre-commit").exists(), "a hostile entry was written into .git");
    // A malformed manifest: the commit is skipped with a reason, never trusted.
    std::fs::write(env.backing.join("manifest"), "seam-park 1\nparked\tnot-hex\n").expect("write");
    let bad = env.host(&r, &["hash-object", "-w", env.backing.join("manifest").to_str().expect("utf-8")]);
    let tree = git_stdin(&env, &r, &["mktree"], format!("100644 blob {}\tmanifest\n", bad.trim()).as_bytes());
    let c2 = env.host(&r, &["commit-tree", &tree, "-p", &commit, "-m", "malformed"]).trim().to_string();
    env.host(&r, &["update-ref", "refs/seam/parked", &c2]);
    let out = seamd(&["parked", top(&r)]).ok();
    assert!(out.stderr.contains("skipped park commit") && out.stderr.contains("manifest line 2"), "{out}");
    env.finish();
}

#[test]
fn size_and_burst_caps_log_without_parking() {
    let cfg = seam_tests::TempDir::new("park-caps-cfg");
    std::fs::write(cfg.join("seamfs.toml"), "park_max_bytes = 1000\npark_burst_cap = 3\n").expect("write");
    let env = Env::new("park-caps", &["--config", cfg.join("seamfs.toml").to_str().expect("utf-8")]);
    let r = env.host_repo("repo", BASE);
    write(&r.h("big.bin"), &"x".repeat(5000));
    for i in 0..6 {
        write(&r.h(&format!("many/u{i}.txt")), &format!("untracked {i}\n"));
    }
    sh_in(&env, &r.boxed, "rm -f big.bin && rm -rf many");
    wait_parked(&env, 1);
    let listed = seamfs_in(&r.boxed, &["parked"]).ok().stdout;
    assert!(listed.contains("big.bin (not parked: too-big)"), "{listed}");
    // big.bin counts: 2 parked, 4 over the cap, of which 3 logged (the log stops at twice the cap).
    assert_eq!(listed.matches("(not parked: over-cap)").count(), 3, "the cap of 3 per burst:\n{listed}");
    let msg = env.host(&r, &["log", "-1", "--format=%B", "refs/seam/parked"]);
    assert!(msg.contains("over-cap: 1 more not logged"), "{msg}");
    assert_eq!(stat_of(&env, "park_reads"), 2, "over-cap and too-big files are not read");
    env.git.fsck(&r.host);
    env.finish();
}

#[test]
fn prune_drops_old_commits() {
    let env = Env::new("park-prune", &[]);
    let r = host_edits(&env);
    env.boxed(&r, &["checkout", "--", "."]);
    wait_parked(&env, 1);
    let kept = seamd(&["parked", top(&r), "prune", "--older-than", "1h"]).ok().stdout;
    assert!(kept.contains("pruned 0"), "{kept}");
    std::thread::sleep(Duration::from_millis(1100));
    let out = seamd(&["parked", top(&r), "prune", "--older-than", "0s"]).ok().stdout;
    assert!(out.contains("pruned 1"), "{out}");
    let listed = seamd(&["parked", top(&r)]).ok().stdout;
    assert_eq!(listed.lines().count(), 1, "nothing left:\n{listed}");
    env.git.fsck(&r.host);
    env.finish();
}

/// The log is git's like any ref: a box commit after a park is judged as ever, a host `git gc`
/// packs the parked blobs (restore then reads the pack) and keeps them.
#[test]
fn park_log_survives_box_commits_and_host_gc() {
    let env = Env::new("park-gc", &[]);
    let r = host_edits(&env);
    env.boxed(&r, &["checkout", "--", "."]);
    wait_parked(&env, 1);
    write(&r.b("src/c.txt"), "a box change\n");
    env.boxed(&r, &["commit", "-q", "-am", "box commit after a park"]);
    assert_eq!(env.host(&r, &["log", "-1", "--format=%s", "main"]).trim(), "box commit after a park");
    env.host(&r, &["gc", "-q", "--prune=now"]);
    assert!(std::fs::read_dir(r.h(".git/objects/pack")).expect("pack dir").count() > 0, "gc packed");
    seamd(&["parked", top(&r), "restore", "src/a.txt"]).ok();
    assert_eq!(std::fs::read(r.h("src/a.txt")).expect("read"), MODIFIED[0].1.as_bytes(), "restored from the pack");
    env.git.fsck(&r.host);
    env.finish();
}

/// Under `--over` the lower's path is seamfs's own mount: parking and its retention prune (gix
/// over the object store) reach the lower, never the mount, and nothing hangs.
#[test]
fn parks_under_over() {
    let git = seam_tests::Git::new();
    let dir = seam_tests::TempDir::new("park-over");
    let repo = dir.join("repo");
    std::fs::create_dir(&repo).expect("mkdir");
    git.run(&repo, &["init", "-q"]);
    write(&repo.join("a.txt"), "a\n");
    git.run(&repo, &["add", "-A"]);
    git.run(&repo, &["commit", "-q", "-m", "base"]);
    write(&repo.join("u.txt"), "untracked, removed under --over\n");
    let m = seam_tests::Mount::seamfs_over(dir.path(), &[]);
    git.run(&repo, &["clean", "-q", "-f"]);
    let commits = || {
        let v = sys::getxattr(m.path(), "user.seamfs.status", 8192, false).unwrap_or_default();
        String::from_utf8_lossy(&v).lines().any(|l| l.starts_with("park_commits=") && l != "park_commits=0")
    };
    assert!(wait_until(Duration::from_secs(8), commits), "no park commit under --over:\n{}", m.log());
    let listed = run(Command::new(seam_tests::bins::seamfs()).arg("parked").current_dir(&repo)).ok().stdout;
    assert!(listed.contains(" u.txt "), "{listed}");
    m.unmount();
    let host = seamd(&["parked", repo.to_str().expect("utf-8"), "restore", "u.txt"]);
    assert!(host.success(), "{host}");
    assert_eq!(std::fs::read(repo.join("u.txt")).expect("read"), b"untracked, removed under --over\n");
    git.fsck(&repo);
}

/// The other ways to destroy bytes: a shell's `>` (O_TRUNC), `truncate`, and `mv` onto a file.
#[test]
fn truncation_and_rename_over_park_too() {
    let env = Env::new("park-trunc", &[]);
    let r = host_edits(&env);
    sh_in(&env, &r.boxed, "echo replaced > src/a.txt && truncate -s 1 src/b.sh && echo x > tmp && mv tmp notes.md && truncate -s 100 src/new.txt");
    wait_parked(&env, 1);
    let listed = seamfs_in(&r.boxed, &["parked"]).ok().stdout;
    for (p, op) in [("src/a.txt", "trunc"), ("src/b.sh", "truncate"), ("notes.md", "rename-over")] {
        assert!(listed.lines().any(|l| l.contains(&format!(" {p} ")) && l.contains(op)), "{p} by {op}:\n{listed}");
    }
    let paths: Vec<&str> = listed.lines().skip(1).filter_map(|l| l.split_whitespace().nth(5)).collect();
    assert!(!paths.contains(&"src/new.txt"), "growing a file destroys nothing:\n{listed}");
    for (p, c) in [MODIFIED[0], MODIFIED[1], UNTRACKED[1]] {
        seamd(&["parked", top(&r), "restore", p, "--force"]).ok();
        assert_eq!(std::fs::read(r.h(p)).expect("restored"), c.as_bytes(), "{p}");
    }
    env.git.fsck(&r.host);
    env.finish();
}
