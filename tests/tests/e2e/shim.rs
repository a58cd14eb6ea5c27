//! `seam-git`, the hook shim, with real git through a real mount: a commit seamfs refuses fails
//! in the hook with seamfs's reason (git's rename never happens); other commits go through; the
//! repository's own reference-transaction hook still runs and can still abort; off seamfs the
//! shim only delegates. And the attribute it asks, `user.seamfs.verdict`, is virtual.
//!
//! The refusal is provoked as in `refmoves`: an operation of the host in progress
//! (`rebase-merge/` on the backing dir) stops any box move of HEAD.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use seam_tests::run::{run, Ran};
use seam_tests::sys::{self, Errno};
use seam_tests::TempDir;

use crate::hostbox::{write, Env, Repo};

const FILES: &[(&str, &str)] = &[("a.txt", "a\n")];
const VERDICT: &str = "user.seamfs.verdict";

/// A hooks dir made by `seam-git install-hooks`, as the box bootstrap makes it.
fn hooks_dir(label: &str) -> (TempDir, std::path::PathBuf) {
    let tmp = TempDir::new(label);
    let dir = tmp.join("hooks");
    run(std::process::Command::new(seam_tests::bins::seam_git()).arg("install-hooks").arg(&dir)).ok();
    let link = dir.join("reference-transaction");
    assert_eq!(std::fs::read_link(&link).expect("a link"), seam_tests::bins::seam_git().canonicalize().expect("the binary"));
    (tmp, dir)
}

/// `git -c core.hooksPath=DIR ARGS` in `cwd` (what `--global` gives the box's git).
fn git_with_hooks(env: &Env, cwd: &Path, hooks: &Path, args: &[&str]) -> Ran {
    let mut all = vec!["-c".to_string(), format!("core.hooksPath={}", hooks.display())];
    all.extend(args.iter().map(|a| a.to_string()));
    env.git.try_run(cwd, &all)
}

/// The repository's own reference-transaction hook: appends its arguments and input to
/// `.git/rt.log`; exits 1 in `prepared` while `.git/rt-refuse` exists.
fn repo_hook(r: &Repo) {
    let p = r.h(".git/hooks/reference-transaction");
    write(
        &p,
        "#!/bin/sh\nlog=\"$(git rev-parse --git-dir)/rt.log\"\necho \"args: $*\" >> \"$log\"\ncat >> \"$log\"\n\
         [ \"$1\" = prepared ] && [ -e \"$(git rev-parse --git-dir)/rt-refuse\" ] && exit 1\nexit 0\n",
    );
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod the hook");
}

/// HEAD, main and the reflog of main on the backing dir.
fn refs_of(r: &Repo) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let read = |p: &str| std::fs::read(r.h(p)).unwrap_or_default();
    (read(".git/HEAD"), read(".git/refs/heads/main"), read(".git/logs/refs/heads/main"))
}

#[test]
fn a_refused_box_commit_fails_in_the_hook_with_seamfss_reason() {
    let env = Env::new("shim-refused", &[]);
    let r = env.host_repo("repo", FILES);
    let (_tmp, hooks) = hooks_dir("shim-refused-hooks");
    write(&r.h(".git/rebase-merge/head-name"), "refs/heads/main\n");
    write(&r.b("b.txt"), "box\n");
    env.boxed(&r, &["add", "b.txt"]);
    repo_hook(&r);
    let before = refs_of(&r);
    let res = git_with_hooks(&env, &r.boxed, &hooks, &["commit", "-q", "-m", "box commit"]);
    assert!(!res.success(), "the box commit landed during a host rebase:\n{res}\n{}", env.log());
    let said = "seam-git: refused to move HEAD: the other side has an operation in progress (rebase-merge is present)";
    assert!(res.stderr.contains(said), "git's stderr lacks seamfs's reason:\n{res}\n{}", env.log());
    assert!(!res.stderr.contains("Device or resource busy"), "the hook should stop git before its rename:\n{res}");
    assert_eq!(refs_of(&r), before, "HEAD or the branch moved");
    assert!(!env.log().contains("refused to move"), "the rename reached seamfs's judging:\n{}", env.log());
    let log = std::fs::read_to_string(r.h(".git/rt.log")).expect("the repo's hook ran for the abort");
    assert!(!log.contains("args: prepared") && log.contains("args: aborted"), "refused before the repo's hook:\n{log}");
    // Once the host's rebase is over, the same commit goes through the hook.
    std::fs::remove_dir_all(r.h(".git/rebase-merge")).expect("the host's rebase finishes");
    let res = git_with_hooks(&env, &r.boxed, &hooks, &["commit", "-q", "-m", "box commit"]);
    assert!(res.success(), "{res}\n{}", env.log());
    assert_eq!(env.host(&r, &["log", "--format=%s", "-n", "1", "main"]), "box commit\n");
    let log = std::fs::read_to_string(r.h(".git/rt.log")).expect("log");
    assert!(log.contains("args: prepared") && log.contains("args: committed"), "through the hook:\n{log}");
    env.finish();
}

#[test]
fn the_repos_own_reference_transaction_hook_runs_and_can_abort() {
    let env = Env::new("shim-delegate", &[]);
    let r = env.host_repo("repo", FILES);
    let (_tmp, hooks) = hooks_dir("shim-delegate-hooks");
    repo_hook(&r);
    write(&r.b("b.txt"), "box\n");
    env.boxed(&r, &["add", "b.txt"]);
    let res = git_with_hooks(&env, &r.boxed, &hooks, &["commit", "-q", "-m", "box commit"]);
    assert!(res.success(), "{res}\n{}", env.log());
    let new = env.host_rev(&r, "main");
    let log = std::fs::read_to_string(r.h(".git/rt.log")).expect("the repo's hook ran");
    assert!(log.contains("args: prepared\n") && log.contains("args: committed\n"), "{log}");
    assert!(log.contains(&format!(" {new} refs/heads/main\n")), "the hook got git's input:\n{log}");
    // The repo's hook refuses: git aborts, nothing moves.
    write(&r.h(".git/rt-refuse"), "");
    write(&r.b("c.txt"), "box\n");
    env.boxed(&r, &["add", "c.txt"]);
    let before = refs_of(&r);
    let res = git_with_hooks(&env, &r.boxed, &hooks, &["commit", "-q", "-m", "refused by the repo"]);
    assert!(!res.success(), "the repo's hook could not abort the commit:\n{res}");
    assert!(res.stderr.contains("ref updates aborted by hook"), "git says a hook aborted:\n{res}");
    assert!(!res.stderr.contains("seam-git"), "the shim had nothing to say:\n{res}");
    assert_eq!(refs_of(&r), before, "HEAD or the branch moved");
    let log = std::fs::read_to_string(r.h(".git/rt.log")).expect("log");
    assert!(log.rsplit("args: ").next().is_some_and(|last| last.starts_with("aborted\n")), "git ran the aborted state last:\n{log}");
    env.finish();
}

#[test]
fn off_seamfs_the_hook_has_no_opinion_and_delegates() {
    let git = seam_tests::Git::new();
    let tmp = TempDir::new("shim-plain");
    let repo = tmp.join("repo");
    std::fs::create_dir(&repo).expect("mkdir");
    git.run(&repo, &["init", "-q"]);
    let r = Repo { host: repo.clone(), boxed: repo.clone() };
    write(&r.h("a.txt"), "a\n");
    git.run(&repo, &["add", "a.txt"]);
    repo_hook(&r);
    // An operation in progress means nothing to a plain directory: no opinion.
    write(&r.h(".git/rebase-merge/head-name"), "refs/heads/main\n");
    let (_h, hooks) = hooks_dir("shim-plain-hooks");
    let mut all = vec!["-c".to_string(), format!("core.hooksPath={}", hooks.display())];
    all.extend(["commit", "-q", "-m", "plain"].map(String::from));
    let res = git.try_run(&repo, &all);
    assert!(res.success() && !res.stderr.contains("seam-git"), "{res}");
    let log = std::fs::read_to_string(r.h(".git/rt.log")).expect("the repo's hook ran");
    assert!(log.contains("args: prepared\n") && log.contains("refs/heads/main\n"), "{log}");
}

#[test]
fn the_verdict_attribute_is_virtual() {
    let env = Env::new("shim-xattr", &[]);
    let r = env.host_repo("repo", FILES);
    for p in [r.b(".git/HEAD"), r.b("a.txt"), r.b(".git/config")] {
        assert_eq!(sys::getxattr(&p, VERDICT, 4096, false), Err(Errno(libc::ENODATA)), "{}", p.display());
        assert_eq!(sys::setxattr(&p, VERDICT, b"ok", 0, false), Err(Errno(libc::EPERM)), "{}", p.display());
        assert_eq!(sys::removexattr(&p, VERDICT), Err(Errno(libc::EPERM)), "{}", p.display());
    }
    // A lock: judged for this test's parent, which never read HEAD, so nothing holds it.
    let lock = r.b(".git/HEAD.lock");
    write(&lock, "ref: refs/heads/main\n");
    assert_eq!(sys::getxattr(&lock, VERDICT, 4096, false).as_deref(), Ok(&b"ok"[..]));
    assert_eq!(sys::getxattr(&lock, VERDICT, 0, false).map(|v| v.len()), Ok(2), "the size alone");
    assert_eq!(sys::getxattr(&lock, VERDICT, 1, false), Err(Errno(libc::ERANGE)));
    assert!(!sys::listxattr(&lock).expect("listxattr").iter().any(|n| n == VERDICT), "never listed");
    assert_eq!(sys::setxattr(&lock, VERDICT, b"ok", 0, false), Err(Errno(libc::EPERM)));
    // Other names still reach the lower.
    sys::setxattr(&r.b("a.txt"), "user.other", b"v", 0, false).expect("a user xattr");
    assert_eq!(sys::getxattr(&r.b("a.txt"), "user.other", 16, false).as_deref(), Ok(&b"v"[..]));
    std::fs::remove_file(&lock).expect("rm the lock");
    env.finish();
}

#[test]
fn install_hooks_makes_a_relative_dir_absolute_and_links_the_exe_given() {
    let tmp = TempDir::new("hooks-relative");
    let installed = tmp.join("usr-local-bin-seam-git");
    std::fs::copy(seam_tests::bins::seam_git(), &installed).expect("copy the binary");
    let r = run(
        std::process::Command::new(seam_tests::bins::seam_git())
            .args(["install-hooks", "relhooks", "--exe"])
            .arg(&installed)
            .current_dir(tmp.path()),
    )
    .ok();
    let dir = tmp.join("relhooks");
    assert_eq!(r.stdout.trim(), format!("git config --system core.hooksPath {}", dir.display()), "{r}");
    assert_eq!(std::fs::read_link(dir.join("reference-transaction")).expect("a link"), installed, "{r}");
    // From a build tree without --exe: it says so.
    let r = run(std::process::Command::new(seam_tests::bins::seam_git()).arg("install-hooks").arg(tmp.join("other"))).ok();
    if seam_tests::bins::seam_git().components().any(|c| c.as_os_str() == "target") {
        assert!(r.stderr.contains("build tree"), "{r}");
    }
}

/// A repository whose path is not UTF-8, with `GIT_DIR` absolute, so git passes `commit-msg` a
/// non-UTF-8 path: the shim hands the very bytes to the repository's hook (old seam-git
/// panicked in `std::env::args`, and every commit there failed).
#[test]
fn a_non_utf8_hook_argument_is_passed_on() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let git = seam_tests::Git::new();
    let tmp = TempDir::new("shim-non-utf8");
    let repo = tmp.path().join(OsStr::from_bytes(b"repo-\xff\xfe"));
    std::fs::create_dir(&repo).expect("mkdir");
    git.run(&repo, &["init", "-q"]);
    let got = tmp.join("commit-msg-arg");
    let hook = repo.join(".git/hooks/commit-msg");
    write(&hook, &format!("#!/bin/sh\nprintf '%s' \"$1\" > '{}'\n", got.display()));
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).expect("chmod the hook");
    let (_h, hooks) = hooks_dir("shim-non-utf8-hooks");
    let mut cmd = git.cmd(&repo, &["-c", &format!("core.hooksPath={}", hooks.display()), "commit", "-q", "--allow-empty", "-m", "x"]);
    cmd.env("GIT_DIR", repo.join(".git")).env("GIT_WORK_TREE", &repo);
    let res = run(&mut cmd);
    assert!(res.success(), "a commit in a non-UTF-8 path failed through the shim:\n{res}");
    let arg = std::fs::read(&got).expect("the repository's commit-msg hook ran");
    eprintln!("commit-msg got {:?}", String::from_utf8_lossy(&arg));
    assert_eq!(arg, repo.join(".git/COMMIT_EDITMSG").as_os_str().as_bytes(), "the hook got other bytes");
}

/// `proc-receive` speaks pkt-lines both ways with git: the shim must neither read its input
/// nor hold its output (old seam-git read stdin to its end first, and git waited for the
/// hook's `version=1` answer: a deadlock, ended here by `timeout`).
#[test]
fn proc_receive_talks_to_git_through_the_shim() {
    let git = seam_tests::Git::new();
    let tmp = TempDir::new("shim-proc-receive");
    let (server, client) = (tmp.join("server.git"), tmp.join("client"));
    std::fs::create_dir(&server).expect("mkdir");
    git.run(&server, &["init", "-q", "--bare"]);
    let (_h, hooks) = hooks_dir("shim-proc-receive-hooks");
    git.run(&server, &["config", "core.hooksPath", &hooks.to_string_lossy()]);
    git.run(&server, &["config", "receive.procReceiveRefs", "refs/for"]);
    let log = tmp.join("proc-receive.log");
    let hook = server.join("hooks/proc-receive");
    write(&hook, &PROC_RECEIVE.replace("LOG", &log.to_string_lossy()));
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).expect("chmod the hook");
    git.run(tmp.path(), &["clone", "-q", &server.to_string_lossy(), "client"]);
    git.run(&client, &["commit", "-q", "--allow-empty", "-m", "for review"]);
    let mut cmd = std::process::Command::new("timeout");
    git.env(&mut cmd);
    cmd.args(["-k", "2", "20", "git", "push", "origin", "HEAD:refs/for/main"]).current_dir(&client);
    let res = run(&mut cmd);
    let seen = std::fs::read_to_string(&log).unwrap_or_default();
    eprintln!("proc-receive saw:\n{seen}");
    assert!(res.success(), "the push through proc-receive failed or hung (exit 124: timed out):\n{res}");
    assert!(seen.contains(" refs/for/main"), "the repository's proc-receive never got the command:\n{seen}\n{res}");
    assert!(res.stderr.contains("refs/for/main"), "git did not report the reference:\n{res}");
}

/// A proc-receive hook (githooks(5), protocol version 1) that accepts every command and logs it.
const PROC_RECEIVE: &str = r#"#!/usr/bin/env python3
import sys
i, o = sys.stdin.buffer, sys.stdout.buffer
def pkt():
    n = int(i.read(4), 16)
    return None if n == 0 else i.read(n - 4)
def put(b):
    o.write(b"%04x" % (len(b) + 4) + b)
while pkt() is not None:
    pass
put(b"version=1\n"); o.write(b"0000"); o.flush()
cmds = []
while (p := pkt()) is not None:
    cmds.append(p.decode().strip())
with open("LOG", "a") as f:
    f.write("\n".join(cmds) + "\n")
for c in cmds:
    put(("ok %s\n" % c.split(" ")[2]).encode())
o.write(b"0000"); o.flush()
"#;
