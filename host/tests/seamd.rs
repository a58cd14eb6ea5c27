//! seamd against real checkouts. git builds the fixtures (and checks the results); seamd itself
//! runs no process, which `starts_no_process_at_all` proves under strace.
//!
//! Every refused case asserts the shared index is byte-identical afterwards.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};

use seamd::gitdirs::Checkout;
use seamd::install::{Hooks, Verdict};
use seamd::run::{pass, Quiet};
use seamfs::heal::proposal::ProposalName;
use seamfs::heal::{blob_id, heal, HealOutcome};

static SEQ: AtomicU64 = AtomicU64::new(0);

/// A temp root holding `checkout/` (the host's main checkout) and room for things outside it.
struct Fx {
    root: PathBuf,
    co: PathBuf,
    base: String,
}

impl Drop for Fx {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.root);
        } else {
            eprintln!("fixture kept for inspection: {}", self.root.display());
        }
    }
}

fn git_in(dir: &Path, index: Option<&Path>, args: &[&str]) -> String {
    let mut c = Command::new("git");
    c.current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .args(args);
    match index {
        Some(i) => c.env("GIT_INDEX_FILE", i),
        None => c.env_remove("GIT_INDEX_FILE"),
    };
    let out = c.output().expect("run git");
    assert!(out.status.success(), "git {args:?} in {}: {}", dir.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Fx {
    fn new() -> Fx {
        let root = std::env::temp_dir().join(format!("seamd-test-{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed)));
        let _ = std::fs::remove_dir_all(&root);
        let co = root.join("checkout");
        std::fs::create_dir_all(&co).expect("mkdir checkout");
        git_in(&co, None, &["init", "-q", "-b", "main"]);
        let mut fx = Fx { root, co, base: String::new() };
        fx.write("a", "1\n");
        fx.write("keep", "k\n");
        fx.git(&["add", "-A"]);
        fx.git(&["commit", "-q", "-m", "base"]);
        fx.boxgit(&["read-tree", "HEAD"]);
        fx.base = fx.head();
        fx
    }

    fn gitdir(&self) -> PathBuf {
        self.co.join(".git")
    }

    fn git(&self, args: &[&str]) -> String {
        git_in(&self.co, None, args)
    }

    fn boxgit(&self, args: &[&str]) -> String {
        git_in(&self.co, Some(&self.gitdir().join("index-box")), args)
    }

    fn write(&self, rel: &str, content: &str) {
        let p = self.co.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir -p");
        std::fs::write(p, content).expect("write");
    }

    fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"]).trim().to_string()
    }

    /// The box commits a change to `a`; returns the new HEAD.
    fn box_commit(&self, content: &str) -> String {
        self.write("a", content);
        self.boxgit(&["add", "a"]);
        self.boxgit(&["commit", "-q", "-m", "box"]);
        self.head()
    }

    fn index(&self) -> Vec<u8> {
        std::fs::read(self.gitdir().join("index")).expect("read index")
    }

    /// What the box's heal would leave: the proposal for `gitdir`'s index, from `old` to
    /// `new`, written under a temp name and renamed into place. Returns its path and bytes.
    fn propose_in(&self, gitdir: &Path, old: &str, new: &str) -> (PathBuf, Vec<u8>) {
        let index = std::fs::read(gitdir.join("index")).expect("read index");
        let out = heal(&self.gitdir().join("objects"), &index, old, new).expect("heal");
        let HealOutcome::Healed { bytes, kind } = out else { panic!("fixture expects a heal, got {out:?}") };
        let name = ProposalName { head: new.into(), base: blob_id(&index, gix::hash::Kind::Sha1), kind }.file_name();
        let tmp = gitdir.join("index.seam-tmp.test");
        std::fs::write(&tmp, &bytes).expect("write proposal");
        let path = gitdir.join(name);
        std::fs::rename(&tmp, &path).expect("rename proposal");
        (path, bytes)
    }

    fn propose(&self, old: &str, new: &str) -> (PathBuf, Vec<u8>) {
        self.propose_in(&self.gitdir(), old, new)
    }

    /// A proposal name for the current index and HEAD with arbitrary content.
    fn named(&self, content: &[u8]) -> PathBuf {
        let name = ProposalName { head: self.head(), base: blob_id(&self.index(), gix::hash::Kind::Sha1), kind: seamfs::heal::HealKind::Ff }.file_name();
        let p = self.gitdir().join(name);
        std::fs::write(&p, content).expect("write");
        p
    }

    fn seamd(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_seamd")).args(args).arg(&self.co).output().expect("run seamd")
    }

    fn run_once(&self) -> Output {
        let out = self.seamd(&["run", "--once"]);
        eprintln!("seamd run --once: {:?}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
        out
    }

    fn proposals_left(&self, gitdir: &Path) -> Vec<OsString> {
        let mut v: Vec<OsString> = std::fs::read_dir(gitdir)
            .expect("list gitdir")
            .map(|e| e.expect("entry").file_name())
            .filter(|n| n.to_string_lossy().starts_with("index.seam-proposed."))
            .collect();
        v.sort();
        v
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Plants a `core.fsmonitor` hook and a clean filter that would each create a marker file if
/// any git ran in the checkout. Returns the two markers.
fn plant_canaries(fx: &Fx) -> (PathBuf, PathBuf) {
    let fsm = fx.root.join("fsmonitor-fired");
    let clean = fx.root.join("clean-filter-fired");
    let hook = fx.root.join("fsmonitor.sh");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch '{}'\nexit 1\n", fsm.display())).expect("write hook");
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).expect("chmod hook");
    fx.git(&["config", "core.fsmonitor", &hook.to_string_lossy()]);
    fx.git(&["config", "filter.canary.clean", &format!("sh -c 'touch \"{}\"; cat'", clean.display())]);
    fx.git(&["config", "filter.canary.required", "true"]);
    std::fs::create_dir_all(fx.gitdir().join("info")).expect("mkdir info");
    std::fs::write(fx.gitdir().join("info/attributes"), "* filter=canary\n").expect("write attributes");
    (fsm, clean)
}

#[test]
fn a_good_proposal_is_installed_and_no_git_runs() {
    let fx = Fx::new();
    let new = fx.box_commit("box\n");
    let (path, bytes) = fx.propose(&fx.base, &new);
    let (fsm, clean) = plant_canaries(&fx);

    let out = fx.run_once();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("installed (ff)"), "{}", stderr(&out));
    assert_eq!(fx.index(), bytes, "the proposal's bytes are the index");
    assert!(!path.exists(), "a consumed proposal is removed");
    assert!(!fsm.exists() && !clean.exists(), "seamd ran no git: no canary fired");

    // git's view (this runs git, so the canaries must fire now: they were armed).
    assert_eq!(fx.git(&["status", "--porcelain"]), "", "host status is clean");
    assert_eq!(fx.git(&["diff", "--cached", "--name-status"]), "");
    fx.git(&["fsck", "--no-progress"]);
    assert!(fsm.exists(), "control: the fsmonitor canary fires when git runs");
    assert!(clean.exists(), "control: the clean-filter canary fires when git hashes a file");
}

#[test]
fn base_changed_is_pruned_and_the_index_kept() {
    let fx = Fx::new();
    let new = fx.box_commit("box\n");
    let (path, _) = fx.propose(&fx.base, &new);
    fx.write("host-new", "h\n");
    fx.git(&["add", "host-new"]);
    let before = fx.index();
    let out = fx.run_once();
    assert!(out.status.success());
    assert!(stderr(&out).contains("stale"), "{}", stderr(&out));
    assert_eq!(fx.index(), before, "byte-identical");
    assert!(!path.exists(), "a stale proposal is pruned");
}

#[test]
fn head_moved_before_the_install_is_pruned() {
    let fx = Fx::new();
    let first = fx.box_commit("box 1\n");
    let (path, _) = fx.propose(&fx.base, &first);
    fx.box_commit("box 2\n");
    let before = fx.index();
    let out = fx.run_once();
    assert!(stderr(&out).contains("HEAD no longer resolves"), "{}", stderr(&out));
    assert_eq!(fx.index(), before, "byte-identical");
    assert!(!path.exists());
}

#[test]
fn head_read_from_packed_refs_counts() {
    let fx = Fx::new();
    let new = fx.box_commit("box\n");
    let (_, bytes) = fx.propose(&fx.base, &new);
    fx.git(&["pack-refs", "--all"]);
    assert!(!fx.gitdir().join("refs/heads/main").exists(), "the branch is packed");
    let out = fx.run_once();
    assert!(stderr(&out).contains("installed"), "{}", stderr(&out));
    assert_eq!(fx.index(), bytes);
}

fn one_pass(fx: &Fx, hooks: &Hooks) -> Vec<(PathBuf, OsString, Verdict)> {
    let c = Checkout::open(&fx.co).expect("open checkout");
    let report = pass(&c, hooks, &mut Quiet::default(), &mut |l| eprintln!("seamd: {l}"));
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    report.verdicts
}

#[test]
fn head_moved_after_the_write_restores_the_index_byte_exact() {
    let fx = Fx::new();
    let new = fx.box_commit("box\n");
    let (path, _) = fx.propose(&fx.base, &new);
    let before = fx.index();
    let main_ref = fx.gitdir().join("refs/heads/main");
    let base = fx.base.clone();
    let hooks = Hooks {
        after_write: Some(Box::new(move |_| {
            // A host `reset --soft` between seamd's checks: HEAD moves without index.lock.
            std::fs::write(&main_ref, format!("{base}\n")).expect("move HEAD");
        })),
        ..Default::default()
    };
    let verdicts = one_pass(&fx, &hooks);
    assert!(matches!(&verdicts[..], [(_, _, Verdict::Restored(_))]), "{verdicts:?}");
    assert_eq!(fx.index(), before, "the old index is back, byte-exact");
    assert!(!path.exists(), "the proposal is spent");
    assert!(!fx.gitdir().join("index.lock").exists(), "no lock left");
}

#[test]
fn a_host_write_after_the_install_is_never_overwritten_by_the_restore() {
    let fx = Fx::new();
    let new = fx.box_commit("box\n");
    fx.propose(&fx.base, &new);
    let host_bytes = fx.index(); // stands for whatever a host git writes next
    let gd = fx.gitdir();
    let base = fx.base.clone();
    let hooks = Hooks {
        after_write: Some(Box::new(move |_| {
            std::fs::write(gd.join("index.tmp-host"), &host_bytes).expect("write");
            std::fs::rename(gd.join("index.tmp-host"), gd.join("index")).expect("host git renames its index in");
            std::fs::write(gd.join("refs/heads/main"), format!("{base}\n")).expect("move HEAD");
        })),
        ..Default::default()
    };
    let before = fx.index();
    let verdicts = one_pass(&fx, &hooks);
    assert!(matches!(&verdicts[..], [(_, _, Verdict::RestoreFailed(w))] if w.contains("kept")), "{verdicts:?}");
    assert!(verdicts[0].2.to_string().contains("Next: `git status` on the host"), "no next step: {}", verdicts[0].2);
    assert_eq!(fx.index(), before, "the host's write stays");
}

#[test]
fn not_dirc_torn_and_oversized_are_pruned() {
    let fx = Fx::new();
    let before = fx.index();
    let not_dirc = fx.named(b"this is not an index, though long enough to look like one");
    let out = fx.run_once();
    assert!(stderr(&out).contains("no DIRC signature"), "{}", stderr(&out));
    assert!(!not_dirc.exists());
    assert_eq!(fx.index(), before);

    let mut torn = before.clone();
    let mid = torn.len() / 2;
    torn[mid] ^= 0xff;
    let torn = fx.named(&torn);
    let out = fx.run_once();
    assert!(stderr(&out).contains("not a whole index"), "{}", stderr(&out));
    assert!(!torn.exists());
    assert_eq!(fx.index(), before);

    let big = fx.named(b"DIRC");
    let f = std::fs::OpenOptions::new().write(true).open(&big).expect("open");
    f.set_len(seamd::fsx::MAX_FILE + 1).expect("sparse 256 MiB + 1");
    drop(f);
    let out = fx.run_once();
    assert!(stderr(&out).contains("over the bound"), "{}", stderr(&out));
    assert!(!big.exists());
    assert_eq!(fx.index(), before);
}

#[test]
fn a_symlinked_proposal_is_refused_and_left() {
    let fx = Fx::new();
    let new = fx.box_commit("box\n");
    let (path, bytes) = fx.propose(&fx.base, &new);
    // The real bytes live outside; the name in the git dir is a link to them.
    let outside = fx.root.join("outside-proposal");
    std::fs::rename(&path, &outside).expect("move out");
    std::os::unix::fs::symlink(&outside, &path).expect("symlink");
    let before = fx.index();
    let out = fx.run_once();
    assert!(stderr(&out).contains("a symlink, not a regular file"), "{}", stderr(&out));
    assert_eq!(fx.index(), before, "byte-identical");
    assert!(path.symlink_metadata().is_ok(), "the link is left where it is");
    assert_eq!(std::fs::read(&outside).expect("target"), bytes, "its target untouched");
}

#[test]
fn forged_and_malformed_names_are_pruned() {
    let fx = Fx::new();
    let before = fx.index();
    let head = fx.head();
    let base = blob_id(&before, gix::hash::Kind::Sha1);
    let names = [
        "index.seam-proposed.junk".to_string(),
        format!("index.seam-proposed.{head}.{base}.ff.extra"),
        format!("index.seam-proposed.{}.{base}.ff", head.to_uppercase()),
        format!("index.seam-proposed.{head}.{base}.fast"),
    ];
    for n in &names {
        std::fs::write(fx.gitdir().join(n), &before).expect("write");
    }
    // Well-formed, but for a head that is not HEAD: stale.
    let forged = fx.gitdir().join(format!("index.seam-proposed.{}.{base}.ff", "0".repeat(40)));
    std::fs::write(&forged, &before).expect("write");
    let out = fx.run_once();
    let err = stderr(&out);
    assert_eq!(err.matches("malformed").count(), names.len(), "one line each: {err}");
    assert_eq!(fx.proposals_left(&fx.gitdir()), Vec::<OsString>::new(), "all pruned: {err}");
    assert_eq!(fx.index(), before);
}

#[test]
fn a_held_index_lock_defers_the_install() {
    let fx = Fx::new();
    let new = fx.box_commit("box\n");
    let (path, bytes) = fx.propose(&fx.base, &new);
    let lock = fx.gitdir().join("index.lock");
    std::fs::write(&lock, b"host git").expect("hold the lock");
    let before = fx.index();
    let out = fx.run_once();
    assert!(stderr(&out).contains("index.lock is held"), "{}", stderr(&out));
    assert_eq!(fx.index(), before);
    assert!(path.exists(), "kept for the next pass");
    assert_eq!(std::fs::read(&lock).expect("lock"), b"host git", "the host's lock is not touched");
    std::fs::remove_file(&lock).expect("release");
    let out = fx.run_once();
    assert!(stderr(&out).contains("installed"), "{}", stderr(&out));
    assert_eq!(fx.index(), bytes);
}

#[test]
fn registered_worktrees_are_served_by_name() {
    let fx = Fx::new();
    let wt = fx.root.join("wt");
    fx.git(&["worktree", "add", "-q", "-b", "side", &wt.to_string_lossy()]);
    let wgd = fx.gitdir().join("worktrees/wt");
    let wbox = wgd.join("index-box");
    git_in(&wt, Some(&wbox), &["read-tree", "HEAD"]);
    let old = git_in(&wt, None, &["rev-parse", "HEAD"]).trim().to_string();
    std::fs::write(wt.join("a"), "wt box\n").expect("write");
    git_in(&wt, Some(&wbox), &["add", "a"]);
    git_in(&wt, Some(&wbox), &["commit", "-q", "-m", "wt box"]);
    let new = git_in(&wt, None, &["rev-parse", "HEAD"]).trim().to_string();
    let (path, bytes) = fx.propose_in(&wgd, &old, &new);
    let out = fx.run_once();
    assert!(stderr(&out).contains("installed"), "{}", stderr(&out));
    assert_eq!(std::fs::read(wgd.join("index")).expect("index"), bytes);
    assert!(!path.exists());
    assert_eq!(git_in(&wt, None, &["status", "--porcelain"]), "");
}

/// A git dir outside the checkout (HEAD, index, commondir) holding a well-formed proposal that
/// matches it; returned with its index bytes.
fn outside_gitdir(fx: &Fx, name: &str) -> (PathBuf, Vec<u8>) {
    let dir = fx.root.join(name);
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("HEAD"), format!("{}\n", fx.head())).expect("write HEAD");
    std::fs::write(dir.join("commondir"), "../checkout/.git\n").expect("write commondir");
    let index = fx.index();
    std::fs::write(dir.join("index"), &index).expect("write index");
    let n = ProposalName { head: fx.head(), base: blob_id(&index, gix::hash::Kind::Sha1), kind: seamfs::heal::HealKind::Ff };
    std::fs::write(dir.join(n.file_name()), seamfs::index::validate::empty_index()).expect("write proposal");
    (dir, index)
}

#[test]
fn a_symlinked_worktree_git_dir_is_not_visited() {
    let fx = Fx::new();
    let (outside, index) = outside_gitdir(&fx, "elsewhere");
    std::fs::create_dir_all(fx.gitdir().join("worktrees")).expect("mkdir");
    std::os::unix::fs::symlink(&outside, fx.gitdir().join("worktrees/evil")).expect("symlink");
    let out = fx.run_once();
    assert!(stderr(&out).contains("worktrees/evil: skipped: a symlink"), "{}", stderr(&out));
    assert_eq!(std::fs::read(outside.join("index")).expect("index"), index, "nothing written out there");
    assert_eq!(fx.proposals_left(&outside).len(), 1, "nothing removed out there");
}

#[test]
fn a_symlinked_worktrees_dir_is_not_visited() {
    let fx = Fx::new();
    let (outside, index) = outside_gitdir(&fx, "elsewhere");
    let wts = fx.root.join("wts");
    std::fs::create_dir_all(&wts).expect("mkdir");
    std::fs::rename(&outside, wts.join("w")).expect("move");
    std::os::unix::fs::symlink(&wts, fx.gitdir().join("worktrees")).expect("symlink");
    let out = fx.run_once();
    assert!(stderr(&out).contains(".git/worktrees: skipped: a symlink"), "{}", stderr(&out));
    assert_eq!(std::fs::read(wts.join("w/index")).expect("index"), index);
    assert_eq!(fx.proposals_left(&wts.join("w")).len(), 1);
}

#[test]
fn a_worktree_dot_git_file_pointing_outside_is_never_read() {
    let fx = Fx::new();
    let (outside, index) = outside_gitdir(&fx, "fake-gitdir");
    // A work tree whose .git file names a git dir outside <main>/.git/worktrees/.
    std::fs::create_dir_all(fx.co.join("sub")).expect("mkdir");
    std::fs::write(fx.co.join("sub/.git"), format!("gitdir: {}\n", outside.display())).expect("write");
    let out = fx.run_once();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read(outside.join("index")).expect("index"), index);
    assert_eq!(fx.proposals_left(&outside).len(), 1);
}

#[test]
fn a_symlinked_dot_git_is_refused_with_exit_3() {
    let fx = Fx::new();
    let real = fx.root.join("real-git");
    std::fs::rename(fx.gitdir(), &real).expect("move .git");
    std::os::unix::fs::symlink(&real, fx.gitdir()).expect("symlink");
    let out = fx.seamd(&["run", "--once"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains(".git is a symlink"), "{}", stderr(&out));
}

#[test]
fn an_operation_in_progress_defers_the_install() {
    let fx = Fx::new();
    let new = fx.box_commit("box\n");
    let (path, _) = fx.propose(&fx.base, &new);
    std::fs::create_dir_all(fx.gitdir().join("rebase-merge")).expect("mkdir");
    let before = fx.index();
    let out = fx.run_once();
    assert!(stderr(&out).contains("operation is in progress (rebase-merge)"), "{}", stderr(&out));
    assert_eq!(fx.index(), before);
    assert!(path.exists());
}

#[test]
fn doctor_reports_what_to_look_at() {
    let fx = Fx::new();
    let new = fx.box_commit("box\n");
    let (pending, _) = fx.propose(&fx.base, &new);
    std::fs::write(fx.gitdir().join("index.seam-proposed.junk"), b"x").expect("write");
    std::os::unix::fs::symlink("/etc/passwd", fx.gitdir().join(format!("index.seam-proposed.{new}.{}.ff", "1".repeat(40)))).expect("symlink");
    std::fs::create_dir_all(fx.gitdir().join("rebase-merge")).expect("mkdir");
    std::fs::write(fx.gitdir().join("rebase-merge/autostash"), format!("{}\n", fx.base)).expect("write");
    let lock = fx.gitdir().join("HEAD.lock");
    std::fs::write(&lock, b"").expect("write");
    std::fs::File::options()
        .write(true)
        .open(&lock)
        .expect("open")
        .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(3600))
        .expect("age the lock");
    std::fs::write(fx.gitdir().join("refs/heads/young.lock"), b"").expect("write");

    let out = fx.seamd(&["doctor"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{text}");
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains(".ff: pending\n       fix: `seamd run` installs it"), "{text}");
    assert!(text.contains("index.seam-proposed.junk: malformed proposal name"), "{text}");
    assert!(text.contains("a symlink: refused, never followed"), "{text}");
    assert!(text.contains(&format!("git stash store -m autostash {}", fx.base)), "{text}");
    assert!(text.contains("HEAD.lock: lock is 3600 s old") || text.contains("HEAD.lock: lock is 3601 s old"), "{text}");
    assert!(!text.contains("young.lock"), "a fresh lock is not reported: {text}");
    assert!(text.contains("index-box present"), "{text}");
    assert!(pending.exists(), "doctor changes nothing");
}

#[test]
fn doctor_on_a_quiet_checkout_exits_0() {
    let fx = Fx::new();
    std::fs::remove_file(fx.gitdir().join("index-box")).expect("rm index-box");
    let out = fx.seamd(&["doctor"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
}

/// seamd under `strace -f`: one execve (its own) and no new process; threads (clone with
/// CLONE_THREAD) would be allowed.
#[test]
fn starts_no_process_at_all() {
    let fx = Fx::new();
    let new = fx.box_commit("box\n");
    let (path, _) = fx.propose(&fx.base, &new);
    let (fsm, clean) = plant_canaries(&fx);
    let trace = fx.root.join("strace.out");
    let status = Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=execve,execveat,clone,clone3,fork,vfork", "-o"])
        .arg(&trace)
        .arg(env!("CARGO_BIN_EXE_seamd"))
        .args(["run", "--once"])
        .arg(&fx.co)
        .status()
        .expect("strace is needed for this test: apt-get install -y strace");
    assert!(status.success());
    assert!(!path.exists(), "the run did install (the whole path was traced)");
    let text = std::fs::read_to_string(&trace).expect("read trace");
    let calls: Vec<&str> = text.lines().filter(|l| !l.contains("resumed>") && !l.contains("+++") && !l.contains("---")).collect();
    let execs: Vec<&&str> = calls.iter().filter(|l| l.contains("execve(") || l.contains("execveat(")).collect();
    assert_eq!(execs.len(), 1, "only seamd's own execve:\n{text}");
    assert!(execs[0].contains(env!("CARGO_BIN_EXE_seamd")), "{text}");
    for l in &calls {
        let is_fork = l.contains("fork(") || l.contains("clone(") || l.contains("clone3(");
        assert!(!is_fork || l.contains("CLONE_THREAD"), "a new process was started: {l}\n{text}");
    }
    assert!(!fsm.exists() && !clean.exists(), "no canary fired");
}

#[test]
fn a_fifo_or_directory_named_as_a_proposal_cannot_stall_or_fool_seamd() {
    let fx = Fx::new();
    let head = fx.head();
    let base = blob_id(&fx.index(), gix::hash::Kind::Sha1);
    let fifo = fx.gitdir().join(format!("index.seam-proposed.{head}.{base}.ff"));
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("no NUL");
    // SAFETY: a valid C path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
    let dir = fx.gitdir().join(format!("index.seam-proposed.{head}.{base}.carry"));
    std::fs::create_dir(&dir).expect("mkdir");
    let before = fx.index();
    let out = fx.run_once();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("a special file, not a regular file"), "{}", stderr(&out));
    assert!(stderr(&out).contains("a directory, not a regular file"), "{}", stderr(&out));
    assert!(fifo.exists() && dir.exists(), "left in place");
    assert_eq!(fx.index(), before);
}

fn git_env(c: &mut Command) -> &mut Command {
    c.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .env_remove("GIT_INDEX_FILE")
}

impl Fx {
    /// What an interrupted `pull --rebase --autostash` leaves once the rebase is gone:
    /// `rebase-merge/` holding only `autostash`, the stash of a host change. Returns its id.
    fn leave_autostash_only(&self) -> String {
        self.write("keep", "host change\n");
        let oid = self.git(&["stash", "create"]).trim().to_string();
        self.git(&["checkout", "--", "keep"]);
        std::fs::create_dir_all(self.gitdir().join("rebase-merge")).expect("mkdir");
        std::fs::write(self.gitdir().join("rebase-merge/autostash"), format!("{oid}\n")).expect("write");
        oid
    }

    /// `seamd doctor --json`: (exit code, rows).
    fn doctor_json(&self) -> (Option<i32>, Vec<serde_json::Value>) {
        let out = self.seamd(&["doctor", "--json"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
        assert_eq!(doc["tool"], "seamd doctor");
        (out.status.code(), doc["rows"].as_array().expect("rows").clone())
    }
}

/// The row of `kind`; every row has the documented fields.
fn row_of<'a>(rows: &'a [serde_json::Value], kind: &str) -> &'a serde_json::Value {
    for r in rows {
        for f in ["kind", "severity", "at", "found", "recovery"] {
            assert!(r[f].is_string(), "row without {f}: {r}");
        }
    }
    rows.iter().find(|r| r["kind"] == kind).unwrap_or_else(|| panic!("no {kind} row in {rows:#?}"))
}

#[test]
fn doctor_json_has_a_row_and_a_recovery_for_every_leftover() {
    let fx = Fx::new();
    // First: the stash refreshes the shared index, which would make a proposal stale.
    let oid = fx.leave_autostash_only();
    let new = fx.box_commit("box\n");
    fx.propose(&fx.base, &new);
    std::fs::write(fx.gitdir().join("index.seam-proposed.junk"), b"x").expect("write");
    let lock = fx.gitdir().join("packed-refs.lock");
    std::fs::write(&lock, b"").expect("write");
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(600);
    std::fs::File::options().write(true).open(&lock).expect("open").set_modified(old).expect("age the lock");
    fx.git(&["config", "core.hooksPath", "/nonexistent/seam-git/hooks"]);
    let (code, rows) = fx.doctor_json();
    assert_eq!(code, Some(1));
    let expect = [
        ("pending-proposal", "info", "seamd run` installs it"),
        ("malformed-proposal", "warn", "prunes it"),
        ("old-lock", "warn", "rm -- '"),
        ("autostash-only", "warn", "git stash store -m autostash"),
        ("missing-hooks", "warn", "git config --unset core.hooksPath"),
    ];
    for (kind, severity, fix) in expect {
        let r = row_of(&rows, kind);
        assert_eq!(r["severity"], severity, "{r}");
        assert!(r["recovery"].as_str().expect("text").contains(fix), "{kind}: {r}");
    }
    assert!(row_of(&rows, "autostash-only")["recovery"].as_str().expect("text").contains(&oid));
    // A stale proposal: the shared index changed under it.
    let fx = Fx::new();
    let new = fx.box_commit("box\n");
    fx.propose(&fx.base, &new);
    fx.write("keep", "staged on the host\n");
    fx.git(&["add", "keep"]);
    let (_, rows) = fx.doctor_json();
    let r = row_of(&rows, "stale-proposal");
    assert_eq!(r["severity"], "warn");
    assert!(r["found"].as_str().expect("text").contains("the shared index changed"), "{r}");
}

#[test]
fn autostash_only_recovery_as_written_clears_the_rebase_and_unblocks_seamd() {
    let fx = Fx::new();
    let oid = fx.leave_autostash_only();
    let new = fx.box_commit("box\n");
    let (pending, bytes) = fx.propose(&fx.base, &new);
    // Blocked: seamd waits for the "rebase", and git can neither continue nor abort it.
    fx.run_once();
    assert!(pending.exists(), "seamd installed during a rebase");
    for step in ["--continue", "--abort"] {
        let out = git_env(Command::new("git").current_dir(&fx.co).args(["rebase", step])).output().expect("git");
        assert!(!out.status.success(), "git rebase {step} worked after all: the row's premise is wrong");
    }
    let (_, rows) = fx.doctor_json();
    let fix = row_of(&rows, "autostash-only")["recovery"].as_str().expect("text").to_string();
    // Followed exactly as written.
    let out = git_env(Command::new("sh").args(["-c", &fix])).output().expect("sh");
    assert!(out.status.success(), "the recovery failed: {fix}\n{}", String::from_utf8_lossy(&out.stderr));
    let status = fx.git(&["status"]);
    assert!(!status.contains("rebase"), "git status still sees a rebase:\n{status}");
    assert!(fx.git(&["stash", "list"]).contains("autostash"), "the stash was not kept");
    assert_eq!(fx.git(&["rev-parse", "stash@{0}"]).trim(), oid);
    fx.run_once();
    assert!(!pending.exists() && fx.index() == bytes, "seamd is still blocked after the recovery");
    fx.git(&["stash", "pop", "-q"]);
    assert_eq!(std::fs::read_to_string(fx.co.join("keep")).expect("read"), "host change\n");
}

#[path = "hostile/mod.rs"]
mod hostile;
