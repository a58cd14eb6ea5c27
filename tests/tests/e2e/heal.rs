//! Healing: a box move of the checked-out branch heals the host's shared index under its
//! `index.lock`, sealed to the ref rename (host staging disjoint from the move carried; overlaps,
//! conflicts and file/directory clashes refused and reported); a lock held too long leaves a
//! proposal that `seamd run --once` installs; after a host move the box's index-box heals on its
//! next touch, and the box's own moves (a soft reset) are never healed away.
//!
//! Host git runs on the backing dir, box git through the mount; `seamd` is the built binary.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use seam_tests::run::{run, Bg, Ran};

use crate::hostbox::{bytes, lines_with, Child, locks_below, names_with_prefix, staged, status, wait_until, write, Env, Repo};

const FILES: &[(&str, &str)] = &[("a.txt", "a\n"), ("m.txt", "m\n"), ("d.txt", "d\n"), ("x.sh", "echo x\n")];

/// `git show --name-status --format= REV` lines, sorted: what a commit changed.
fn changed_by(env: &Env, r: &Repo, rev: &str) -> Vec<String> {
    let mut v: Vec<String> =
        env.host(r, &["show", "--name-status", "--no-renames", "--format=", rev]).lines().map(str::to_string).collect();
    v.sort();
    v
}

/// A box commit of new file `name`.
fn box_commit(env: &Env, r: &Repo, name: &str) {
    write(&r.b(name), &format!("{name} from the box\n"));
    env.boxed(r, &["add", name]);
    env.boxed(r, &["commit", "-q", "-m", &format!("box {name}")]);
}

fn seamd(checkout: &Path) -> Ran {
    run(Command::new(seam_tests::bins::bin("seamd")).arg("run").arg(checkout).arg("--once"))
}

fn proposals(r: &Repo) -> Vec<String> {
    names_with_prefix(&r.h(".git"), "index.seam-proposed.")
}

/// The system call `pid` is in, with its arguments (`/proc/<pid>/syscall`).
fn syscall_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default()
}

/// Whether `pid` is blocked in an open or a rename (x86_64 numbers): the same call, with the
/// same arguments, seen five times 20 ms apart (a call through seamfs that does not wait takes
/// well under a millisecond).
fn blocked_in_open_or_rename(pid: u32) -> bool {
    let first = syscall_of(pid);
    if !matches!(first.split_whitespace().next(), Some("2" | "257" | "82" | "264" | "316")) {
        return false;
    }
    (0..4).all(|_| {
        std::thread::sleep(Duration::from_millis(20));
        syscall_of(pid) == first
    })
}

/// Spawns a box `git commit` of new file `name` and returns once seamfs holds it waiting for
/// the shared `index.lock`: in the create of its `HEAD.lock`, before it takes any ref lock
/// (ADR 0054); plus 50 ms, so seamfs is certainly waiting.
fn spawn_box_commit_waiting_for_the_index_lock(env: &Env, r: &Repo, name: &str) -> std::process::Child {
    write(&r.b(name), &format!("{name} from the box\n"));
    env.boxed(r, &["add", name]);
    let mut child = env
        .git
        .cmd(&r.boxed, &["commit", "-q", "-m", &format!("box {name}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn box git commit");
    let pid = child.id();
    let seen = wait_until(Duration::from_secs(30), || blocked_in_open_or_rename(pid) || child.try_wait().ok().flatten().is_some());
    assert!(
        seen && child.try_wait().ok().flatten().is_none(),
        "the box commit never blocked waiting for index.lock (did seamfs not wait for it?)\n{}",
        env.log()
    );
    std::thread::sleep(Duration::from_millis(50));
    child
}

fn finish(child: std::process::Child, what: &str) {
    let out = child.wait_with_output().expect("wait for box git");
    assert!(out.status.success(), "{what} failed: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn box_commit_heals_the_host_index_at_once() {
    let env = Env::new("heal-sealed", &[]);
    let r = env.host_repo("repo", FILES);
    box_commit(&env, &r, "b.txt");
    assert!(status(&env.git, &r.host).is_empty(), "host status right after a box commit:\n{}", env.log());
    // The host's next commit adds only its own file and keeps the box's.
    write(&r.h("h.txt"), "host\n");
    env.host(&r, &["add", "h.txt"]);
    env.host(&r, &["commit", "-q", "-m", "host"]);
    assert_eq!(changed_by(&env, &r, "HEAD"), vec!["A\th.txt"], "the host's commit reverted or re-added box work");
    assert!(env.host(&r, &["ls-tree", "-r", "--name-only", "HEAD"]).lines().any(|l| l == "b.txt"));
    assert!(status(&env.git, &r.boxed).is_empty(), "the box after the host's commit");
    assert!(proposals(&r).is_empty(), "a proposal was left although index.lock was free");
    env.finish();
}

/// Owner and mode bits of a file on the backing dir.
fn owner_mode(p: &Path) -> (u32, u32, u32) {
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::metadata(p).unwrap_or_else(|e| panic!("stat {}: {e}", p.display()));
    (md.uid(), md.gid(), md.mode() & 0o7777)
}

/// In a repository a host user owns, the files seamfs writes for its heals (as root) end up
/// with the owner and mode of the file they replace, or of the git dir: the shared index after
/// a box commit (mode 0600 kept), the box's index after a host commit, the sync point. seamfs
/// skips a chown or chmod that would change nothing (ADR 0055); these must still be made.
#[test]
fn heal_written_files_keep_the_host_users_owner_and_mode() {
    const USER: (u32, u32) = (1000, 1000);
    let env = Env::new("heal-owner", &[]);
    let r = env.host_repo("repo", FILES);
    let chown = run(Command::new("chown").args(["-R", &format!("{}:{}", USER.0, USER.1)]).arg(&r.host));
    assert!(chown.success(), "chown the repository: {chown}");
    let set_mode = |p: &Path, m: u32| std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(m)).expect("chmod");
    set_mode(&r.h(".git/index"), 0o600);
    let user = seam_tests::Git::as_user(USER.0, USER.1);

    write(&r.b("b.txt"), "b from the box\n");
    user.run(&r.boxed, &["add", "b.txt"]);
    user.run(&r.boxed, &["commit", "-q", "-m", "box b"]);
    // Checked before any host git reads it: git rewrites an index it refreshes with its own mode.
    assert_eq!(owner_mode(&r.h(".git/index")), (USER.0, USER.1, 0o600), "the healed shared index:\n{}", env.log());
    assert!(status(&user, &r.host).is_empty(), "the box commit was not healed into the host's index:\n{}", env.log());
    let base = r.h(".git").join(format!("{}.seam-base", env.index_box()));
    assert_eq!(owner_mode(&base).0, USER.0, "the sync point is owned like the git dir");

    let index_box = r.h(".git").join(env.index_box());
    set_mode(&index_box, 0o600);
    write(&r.h("h.txt"), "host\n");
    user.run(&r.host, &["add", "h.txt"]);
    user.run(&r.host, &["commit", "-q", "-m", "host"]);
    let head = user.run(&r.host, &["rev-parse", "HEAD"]).trim().to_string();
    // `ls-files` reads the index and never writes it: what is on the backing dir is the heal's.
    let listed = user.run(&r.boxed, &["ls-files"]);
    assert!(listed.lines().any(|l| l == "h.txt"), "the box's index lacks the host's file after its commit:\n{listed}\n{}", env.log());
    let synced = std::fs::read_to_string(&base).expect("read the sync point");
    assert_eq!(synced.trim(), head, "the box's index was not healed onto the host's commit:\n{}", env.log());
    assert_eq!(owner_mode(&index_box), (USER.0, USER.1, 0o600), "the healed box index:\n{}", env.log());
    // Root's git checks the repository at the end: give it back.
    assert!(run(Command::new("chown").args(["-R", "0:0"]).arg(&r.host)).success());
    env.finish();
}

/// A sync point's temporary left behind (a seamfs that died mid-write, whose pid the running one
/// now has) does not keep the sync point from moving: the create meets it, removes it and
/// writes the record (the unlink is no longer made before every create).
#[test]
fn a_stale_sync_point_temporary_is_replaced() {
    let env = Env::new("heal-stale-tmp", &[]);
    let r = env.host_repo("repo", FILES);
    box_commit(&env, &r, "b.txt");
    let base = format!("{}.seam-base", env.mount.index_box());
    let tmp = r.h(".git").join(format!("{base}.tmp.{}", env.mount.daemon_pid()));
    write(&tmp, "0000000000000000000000000000000000000000");
    box_commit(&env, &r, "c.txt");
    let head = env.host(&r, &["rev-parse", "HEAD"]);
    let synced = std::fs::read_to_string(r.h(".git").join(&base)).expect("read the sync point");
    assert_eq!(synced.trim(), head.trim(), "the sync point did not follow the box's commit past a stale temporary:\n{}", env.log());
    assert!(!tmp.exists(), "the stale temporary is still there");
    assert!(status(&env.git, &r.host).is_empty(), "host status right after the box commit:\n{}", env.log());
    env.finish();
}

#[test]
fn host_staging_survives_a_box_commit() {
    let env = Env::new("heal-carry", &[]);
    let r = env.host_repo("repo", FILES);
    assert!(status(&env.git, &r.boxed).is_empty(), "the box seeds before the host stages");
    write(&r.h("m.txt"), "m staged by the host\n");
    write(&r.h("a-new.txt"), "added by the host\n");
    env.host(&r, &["add", "m.txt", "a-new.txt"]);
    env.host(&r, &["rm", "-q", "d.txt"]);
    env.host(&r, &["update-index", "--chmod=+x", "x.sh"]);
    let want = vec!["A\ta-new.txt", "D\td.txt", "M\tm.txt", "M\tx.sh"];
    assert_eq!(staged(&env.git, &r.host), want);
    box_commit(&env, &r, "b.txt");
    assert_eq!(changed_by(&env, &r, "HEAD"), vec!["A\tb.txt"], "the box's commit took host staging");
    assert_eq!(staged(&env.git, &r.host), want, "host staging after the box commit:\n{}", env.log());
    assert!(env.host(&r, &["ls-files", "-s", "x.sh"]).starts_with("100755 "), "mode change lost");
    assert!(env.host(&r, &["ls-files", "b.txt"]).trim() == "b.txt", "the box's file is not in the host's index");
    assert!(!status(&env.git, &r.host).iter().any(|l| l.contains("b.txt")), "host sees the box's commit as a change");
    env.host(&r, &["commit", "-q", "-m", "host staging"]);
    assert_eq!(changed_by(&env, &r, "HEAD"), want, "the host's commit holds something else than its staging");
    env.finish();
}

#[test]
fn glob_characters_are_carried_literally() {
    let env = Env::new("heal-glob", &[]);
    let r = env.host_repo("repo", &[("ab", "ab\n"), ("x", "x\n"), ("[x]", "bracket\n"), ("a.txt", "a\n")]);
    assert!(status(&env.git, &r.boxed).is_empty());
    write(&r.h("a*b"), "star\n");
    write(&r.h("[x]"), "bracket staged\n");
    env.host(&r, &["add", "--", ":(literal)a*b", ":(literal)[x]"]);
    let want = vec!["A\ta*b", "M\t[x]"];
    assert_eq!(staged(&env.git, &r.host), want);
    // The box changes exactly the paths the globs would match.
    write(&r.b("ab"), "ab by the box\n");
    write(&r.b("x"), "x by the box\n");
    env.boxed(&r, &["add", "--", ":(literal)ab", ":(literal)x"]);
    env.boxed(&r, &["commit", "-q", "-m", "box ab x"]);
    assert_eq!(changed_by(&env, &r, "HEAD"), vec!["M\tab", "M\tx"]);
    assert_eq!(staged(&env.git, &r.host), want, "glob-named staging not carried literally:\n{}", env.log());
    assert_eq!(env.host(&r, &["show", ":ab"]), "ab by the box\n");
    assert_eq!(env.host(&r, &["show", ":[x]"]), "bracket staged\n");
    env.finish();
}

#[test]
fn a_host_conflict_is_never_carried_as_a_deletion() {
    let env = Env::new("heal-conflict", &[]);
    let r = env.host_repo("repo", &[("a.txt", "a\n"), ("c.txt", "c\n")]);
    assert!(status(&env.git, &r.boxed).is_empty());
    write(&r.h("c.txt"), "host stash\n");
    env.host(&r, &["stash", "-q"]);
    write(&r.h("c.txt"), "host commit\n");
    env.host(&r, &["commit", "-q", "-a", "-m", "host c"]);
    let pop = env.try_host(&r, &["stash", "pop"]);
    assert!(!pop.success(), "the stash pop should conflict:\n{pop}");
    let unmerged = env.host(&r, &["ls-files", "-u"]);
    assert_eq!(unmerged.lines().count(), 3, "{unmerged}");
    let shared = bytes(&r.h(".git/index"));
    box_commit(&env, &r, "b.txt");
    assert_eq!(bytes(&r.h(".git/index")), shared, "an index with a conflict was healed (rewritten)");
    assert_eq!(env.host(&r, &["ls-files", "-u"]), unmerged, "the host's conflict is gone");
    assert!(!staged(&env.git, &r.host).iter().any(|l| l == "D\tc.txt"), "the conflict reads as a deletion");
    let log = env.log();
    assert_eq!(
        lines_with(&log, "shared index not healed").iter().filter(|l| l.contains("unmerged")).count(),
        1,
        "one report:\n{log}"
    );
    assert!(proposals(&r).is_empty(), "a proposal for a refused heal");
    env.finish();
}

#[test]
fn a_host_file_where_the_box_made_a_directory_refuses() {
    let env = Env::new("heal-dirfile", &[]);
    let r = env.host_repo("repo", FILES);
    assert!(status(&env.git, &r.boxed).is_empty());
    write(&r.h("x"), "a file staged by the host\n");
    env.host(&r, &["add", "x"]);
    std::fs::remove_file(r.h("x")).expect("rm x in the host's work tree");
    let shared = bytes(&r.h(".git/index"));
    write(&r.b("x/inner"), "the box's directory\n");
    env.boxed(&r, &["add", "x/inner"]);
    env.boxed(&r, &["commit", "-q", "-m", "box x/"]);
    assert_eq!(bytes(&r.h(".git/index")), shared, "a file/directory clash was healed");
    assert!(env.host(&r, &["ls-files", "-s", "x"]).contains("\tx\n"), "the host's staged file is gone");
    let log = env.log();
    assert!(lines_with(&log, "shared index not healed").iter().any(|l| l.contains("file and a directory")), "{log}");
    env.finish();
}

#[test]
fn a_briefly_busy_index_lock_is_waited_for() {
    let env = Env::new("heal-busy", &[]);
    let r = env.host_repo("repo", FILES);
    let lock = r.h(".git/index.lock");
    write(&lock, "");
    let child = spawn_box_commit_waiting_for_the_index_lock(&env, &r, "b.txt");
    std::thread::sleep(Duration::from_millis(250));
    std::fs::remove_file(&lock).expect("the host releases index.lock");
    finish(child, "box commit");
    assert!(proposals(&r).is_empty(), "a 0.3 s lock was fallen back from (proposal left):\n{}", env.log());
    assert!(status(&env.git, &r.host).is_empty(), "host not healed after a briefly busy lock:\n{}", env.log());
    assert!(!lock.exists());
    env.finish();
}

#[test]
fn a_held_index_lock_leaves_a_proposal_that_seamd_installs() {
    let env = Env::new("heal-proposal", &["--lock-wait-ms", "300"]);
    let r = env.host_repo("repo", FILES);
    let lock = r.h(".git/index.lock");
    write(&lock, "");
    let base = env.host(&r, &["hash-object", ".git/index"]).trim().to_string();
    box_commit(&env, &r, "b.txt");
    let head = env.host_rev(&r, "HEAD");
    assert_eq!(proposals(&r), vec![format!("index.seam-proposed.{head}.{base}.ff")], "{}", env.log());
    assert!(env.log().contains("left a heal proposal"), "{}", env.log());
    assert_eq!(bytes(&lock), b"", "the host's lock was touched");
    std::fs::remove_file(&lock).expect("the host releases index.lock");
    let out = seamd(&r.host);
    assert!(out.success(), "{out}");
    assert!(out.stderr.contains("installed"), "{out}");
    assert!(proposals(&r).is_empty(), "the installed proposal was not removed");
    assert!(status(&env.git, &r.host).is_empty(), "host not healed after seamd installed the proposal");
    env.finish();
}

#[test]
fn head_moved_before_install_seamd_refuses() {
    let env = Env::new("heal-proposal-stale", &["--lock-wait-ms", "300"]);
    let r = env.host_repo("repo", FILES);
    write(&r.h(".git/index.lock"), "");
    box_commit(&env, &r, "b.txt");
    assert_eq!(proposals(&r).len(), 1, "{}", env.log());
    std::fs::remove_file(r.h(".git/index.lock")).expect("release");
    // HEAD moves again (without the index) before seamd gets to it.
    env.host(&r, &["update-ref", "refs/heads/main", "HEAD~"]);
    let shared = bytes(&r.h(".git/index"));
    let out = seamd(&r.host);
    assert!(out.stderr.contains("stale"), "{out}");
    assert_eq!(bytes(&r.h(".git/index")), shared, "seamd changed the index although HEAD moved");
    assert!(proposals(&r).is_empty(), "a stale proposal was not pruned");
    env.finish();
}

/// After a poller's stat-only rewrite, doctor calls the proposal pending, as `run` judges it
/// (old doctor compared blob ids only and called it stale, while `run` installed it).
#[test]
fn doctor_judges_a_stat_only_rewrite_as_run_does() {
    let env = Env::new("heal-doctor-poller", &["--lock-wait-ms", "300"]);
    let r = env.host_repo("repo", FILES);
    write(&r.h(".git/index.lock"), "");
    box_commit(&env, &r, "b.txt");
    assert_eq!(proposals(&r).len(), 1, "{}", env.log());
    std::fs::remove_file(r.h(".git/index.lock")).expect("release");
    let before = bytes(&r.h(".git/index"));
    std::fs::write(r.h("a.txt"), "a\n").expect("rewrite a.txt with the same content");
    env.host(&r, &["update-index", "-q", "--really-refresh"]);
    assert_ne!(bytes(&r.h(".git/index")), before, "the poller did not rewrite the index");
    let doctor = run(Command::new(seam_tests::bins::bin("seamd")).arg("doctor").arg(&r.host));
    eprintln!("{doctor}");
    let row = doctor.stdout.lines().find(|l| l.contains("index.seam-proposed.")).unwrap_or_else(|| panic!("no proposal row:\n{doctor}"));
    assert!(row.ends_with(": pending") && doctor.stdout.contains("`seamd run` installs it"), "doctor and run disagree: {row}\n{doctor}");
    let out = seamd(&r.host);
    assert!(staged(&env.git, &r.host).is_empty() && proposals(&r).is_empty(), "run did not install it:\n{out}");
    env.finish();
}

#[test]
fn a_stat_only_rewrite_by_a_poller_still_installs() {
    let env = Env::new("heal-proposal-poller", &["--lock-wait-ms", "300"]);
    let r = env.host_repo("repo", FILES);
    write(&r.h(".git/index.lock"), "");
    box_commit(&env, &r, "b.txt");
    assert_eq!(proposals(&r).len(), 1, "{}", env.log());
    std::fs::remove_file(r.h(".git/index.lock")).expect("release");
    // A poller (an IDE's `git status`) rewrites the index with new stat data, same entries.
    let before = bytes(&r.h(".git/index"));
    let entries = env.host(&r, &["ls-files", "-s"]);
    std::fs::write(r.h("a.txt"), "a\n").expect("rewrite a.txt with the same content");
    env.host(&r, &["update-index", "-q", "--really-refresh"]);
    assert_ne!(bytes(&r.h(".git/index")), before, "the poller did not rewrite the index");
    assert_eq!(env.host(&r, &["ls-files", "-s"]), entries, "the poller changed entries");
    let out = seamd(&r.host);
    eprintln!("seamd after a stat-only rewrite:\n{out}");
    let st = staged(&env.git, &r.host);
    assert!(
        st.is_empty(),
        "the proposal was not installed after a stat-only rewrite; the host's index now shows {st:?}:\n{out}"
    );
    env.finish();
}

#[test]
fn host_staging_made_while_the_heal_waits_is_carried() {
    let env = Env::new("heal-between", &["--lock-wait-ms", "5000"]);
    let r = env.host_repo("repo", FILES);
    let lock = r.h(".git/index.lock");
    write(&lock, "");
    // The host's next index, made aside (as host git would, under its lock).
    let aside = seam_tests::TempDir::new("heal-between-aside");
    let tmp = aside.join("index");
    std::fs::copy(r.h(".git/index"), &tmp).expect("copy the shared index");
    write(&r.h("h.txt"), "host staged\n");
    let mut add = env.git.cmd(&r.host, &["add", "h.txt"]);
    add.env("GIT_INDEX_FILE", &tmp);
    run(&mut add).ok();
    let child = spawn_box_commit_waiting_for_the_index_lock(&env, &r, "b.txt");
    // The host writes its staging into its lock and renames it in: the lock is free again.
    std::fs::write(&lock, bytes(&tmp)).expect("write the host's new index into its lock");
    std::fs::rename(&lock, r.h(".git/index")).expect("the host commits its index");
    finish(child, "box commit");
    assert_eq!(changed_by(&env, &r, "HEAD"), vec!["A\tb.txt"]);
    assert_eq!(staged(&env.git, &r.host), vec!["A\th.txt"], "host staging made while the heal waited:\n{}", env.log());
    assert!(proposals(&r).is_empty());
    env.finish();
}

/// A box git killed while seamfs waits for the shared `index.lock` for it (before its ref locks,
/// ADR 0054): nothing of its commit moves, and neither the shared lock seamfs then takes for it
/// nor its ref lock stays behind.
#[test]
fn a_box_git_killed_at_the_heal_leaves_no_index_lock() {
    let env = Env::new("heal-killed", &["--lock-wait-ms", "5000"]);
    let r = env.host_repo("repo", FILES);
    let lock = r.h(".git/index.lock");
    write(&lock, "");
    let before = env.host_rev(&r, "HEAD");
    let mut child = spawn_box_commit_waiting_for_the_index_lock(&env, &r, "b.txt");
    std::thread::sleep(Duration::from_millis(150));
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    // The killed git stays until seamfs answers its create, which waits for index.lock: release
    // the lock before reaping it. seamfs then takes the shared lock and makes `HEAD.lock` for a
    // process that is gone: the reaper must remove both.
    std::thread::sleep(Duration::from_millis(100));
    std::fs::remove_file(&lock).expect("the host releases index.lock");
    let _ = child.wait();
    let gitdir = r.h(".git");
    let clear = wait_until(Duration::from_millis(1500), || locks_below(&gitdir).is_empty());
    assert!(clear, "locks left after a box git was killed at the heal: {:?}\n{}", locks_below(&gitdir), env.log());
    assert_eq!(env.host_rev(&r, "HEAD"), before, "a commit killed before its ref locks moved the branch:\n{}", env.log());
    assert!(staged(&env.git, &r.host).is_empty(), "the host's index does not match HEAD:\n{}", env.log());
    env.git.fsck(&r.host);
    env.finish();
}

/// Host git takes `index.lock`, then `HEAD.lock` and the branch's lock (retrying those while it
/// keeps `index.lock`). A box commit must not hold its ref locks while seamfs waits for the
/// shared `index.lock`, or each side waits for the other (ADR 0054): while the host holds
/// `index.lock` the box holds no ref lock, the host's own ref transaction goes through, and the
/// box commit then lands healed, with no proposal left.
#[test]
fn a_host_holding_the_index_lock_is_never_blocked_by_box_ref_locks() {
    let env = Env::new("heal-lock-order", &["--lock-wait-ms", "5000"]);
    let r = env.host_repo("repo", FILES);
    let index_lock = r.h(".git/index.lock");
    write(&index_lock, "");
    let child = spawn_box_commit_waiting_for_the_index_lock(&env, &r, "b.txt");
    let (head_lock, main_lock) = (r.h(".git/HEAD.lock"), r.h(".git/refs/heads/main.lock"));
    assert!(
        !head_lock.exists() && !main_lock.exists(),
        "the box holds a ref lock while it waits for the host's index.lock: {:?}\n{}",
        locks_below(&r.h(".git")),
        env.log()
    );
    // The host's ref transaction, as host git makes it under its index lock: both ref locks
    // are free to take.
    for l in [&head_lock, &main_lock] {
        std::fs::OpenOptions::new().write(true).create_new(true).open(l).unwrap_or_else(|e| panic!("host lock {}: {e}", l.display()));
    }
    for l in [&main_lock, &head_lock, &index_lock] {
        std::fs::remove_file(l).expect("the host releases its lock");
    }
    finish(child, "box commit");
    assert_eq!(changed_by(&env, &r, "HEAD"), vec!["A\tb.txt"]);
    assert!(proposals(&r).is_empty(), "the heal fell back to a proposal:\n{}", env.log());
    assert!(status(&env.git, &r.host).is_empty(), "host not healed:\n{}", env.log());
    assert!(locks_below(&r.h(".git")).is_empty(), "locks left: {:?}", locks_below(&r.h(".git")));
    env.finish();
}

/// Host status right after a box command, and again after `seamd run --once` (in case seamfs
/// fell back to proposals): both must be clean, never an index that reverts the box's work.
#[track_caller]
fn host_follows(env: &Env, r: &Repo, what: &str) {
    let at_once = status(&env.git, &r.host);
    let out = seamd(&r.host);
    let after_seamd = status(&env.git, &r.host);
    assert!(
        at_once.is_empty() && after_seamd.is_empty(),
        "host status after {what}: {at_once:?}; after `seamd run --once`: {after_seamd:?}\n{out}\n{}",
        env.log()
    );
}

#[test]
fn a_box_rebase_leaves_the_host_index_at_the_new_head() {
    let env = Env::new("heal-box-rebase", &[]);
    let r = env.host_repo("repo", FILES);
    env.boxed(&r, &["checkout", "-q", "-b", "topic"]);
    box_commit(&env, &r, "t1.txt");
    box_commit(&env, &r, "t2.txt");
    env.boxed(&r, &["checkout", "-q", "main"]);
    box_commit(&env, &r, "m1.txt");
    env.boxed(&r, &["checkout", "-q", "topic"]);
    host_follows(&env, &r, "box commits and checkouts");
    env.boxed(&r, &["rebase", "-q", "main"]);
    assert_eq!(env.host(&r, &["log", "--format=%s"]), "box t2.txt\nbox t1.txt\nbox m1.txt\nbase\n");
    host_follows(&env, &r, "a box `git rebase` of two commits");
    env.finish();
}

#[test]
fn a_host_commit_heals_index_box_on_the_next_touch() {
    let env = Env::new("heal-reverse", &[]);
    let r = env.host_repo("repo", FILES);
    write(&r.b("b.txt"), "box staged\n");
    env.boxed(&r, &["add", "b.txt"]);
    write(&r.h("h.txt"), "host\n");
    write(&r.h("m.txt"), "m changed by the host\n");
    env.host(&r, &["add", "h.txt", "m.txt"]);
    env.host(&r, &["commit", "-q", "-m", "host"]);
    assert_eq!(status(&env.git, &r.boxed), vec!["A  b.txt"], "the box's index after a host commit:\n{}", env.log());
    assert!(env.log().contains("box index healed after a move by the host or another box"), "{}", env.log());
    env.boxed(&r, &["commit", "-q", "-m", "box b"]);
    assert_eq!(changed_by(&env, &r, "HEAD"), vec!["A\tb.txt"], "the box's commit reverted the host's");
    assert!(status(&env.git, &r.host).is_empty());
    env.finish();
}

/// A host commit is healed into the box's index at a box process's first look at HEAD, right
/// after seamfs answers it (ADR 0059), not only when a process touches the index: `cat
/// .git/HEAD` never reads the index, and the sync point on the backing dir still moves onto the
/// host's commit. (The heal at the index's own touch would leave it where it was.)
#[test]
fn a_host_commit_is_healed_after_a_box_process_first_looks_at_head() {
    let env = Env::new("heal-early", &[]);
    let r = env.host_repo("repo", FILES);
    assert!(status(&env.git, &r.boxed).is_empty(), "the box's index before the host's commit");
    let base = r.h(".git").join(format!("{}.seam-base", env.index_box()));
    let synced = || std::fs::read_to_string(&base).map(|s| s.trim().to_string()).unwrap_or_default();
    let before = synced();
    write(&r.h("m.txt"), "m changed by the host\n");
    env.host(&r, &["commit", "-q", "-am", "host"]);
    let head = env.host(&r, &["rev-parse", "HEAD"]).trim().to_string();
    assert_ne!(before, head, "the sync point was already at the host's new commit");
    let cat = run(Command::new("cat").arg(r.b(".git/HEAD")));
    assert!(cat.success() && cat.stdout.starts_with("ref: refs/heads/"), "box `cat .git/HEAD`: {cat:?}");
    assert!(
        wait_until(Duration::from_secs(5), || synced() == head),
        "the sync point stayed at {} after a box process looked at HEAD (host commit {head}):\n{}",
        synced(),
        env.log()
    );
    assert!(env.log().contains("box index healed after a move by the host or another box"), "{}", env.log());
    assert!(status(&env.git, &r.boxed).is_empty(), "the box sees the host's commit as its own change:\n{}", env.log());
    env.finish();
}

/// A box process's lookups of its index read HEAD as that process last refreshed it (ADR 0033),
/// so a host commit made a moment after one lookup is not healed at the next. The same
/// process's index lock create must still heal onto it: git takes the lock before it reads the
/// index it will write, and a stale check there would let a box commit revert the host's.
#[test]
fn a_host_commit_inside_a_process_window_is_healed_at_its_index_lock() {
    let env = Env::new("heal-window", &[]);
    let r = env.host_repo("repo", FILES);
    std::fs::read(r.b(".git/index")).expect("the box reads its index (refreshing HEAD for this process)");
    write(&r.h("m.txt"), "m changed by the host\n");
    env.host(&r, &["commit", "-q", "-am", "host"]);
    let head = env.host(&r, &["rev-parse", "HEAD"]).trim().to_string();
    let lock = r.b(".git/index.lock");
    std::fs::OpenOptions::new().write(true).create_new(true).open(&lock).expect("the same process takes its index lock");
    let base = names_with_prefix(&r.h(".git"), "index-box.")
        .into_iter()
        .find(|n| n.ends_with(".seam-base"))
        .map(|n| std::fs::read_to_string(r.h(".git").join(n)).expect("read the sync point"));
    std::fs::remove_file(&lock).expect("remove the lock");
    assert_eq!(base.as_deref().map(str::trim), Some(head.as_str()), "the index lock did not heal the box index onto the host's commit:\n{}", env.log());
    assert!(status(&env.git, &r.boxed).is_empty(), "the box sees the host's commit as its own change:\n{}", env.log());
    env.finish();
}

/// The box stages its own change to `m.txt`; the host commits another change to `m.txt` and a new
/// file. The heal of the box's index onto the host's commit is refused (the staging overlaps), so
/// a box commit now would be that index's tree on top of the host's commit: it would undo the
/// host's commit. It is refused, saying so; the host's commit stays whole; after `git reset` and
/// staging again, the box commits on top.
#[test]
fn a_box_commit_from_an_index_that_could_not_heal_is_refused() {
    let env = Env::new("heal-overlap-commit", &[]);
    let r = env.host_repo("repo", FILES);
    write(&r.b("m.txt"), "m changed by the box\n");
    env.boxed(&r, &["add", "m.txt"]);
    write(&r.h("m.txt"), "m changed by the host\n");
    write(&r.h("h.txt"), "host\n");
    env.host(&r, &["add", "h.txt", "m.txt"]);
    env.host(&r, &["commit", "-q", "-m", "host"]);
    let host_head = env.host(&r, &["rev-parse", "HEAD"]);
    let c = env.try_box(&r, &["commit", "-q", "-m", "box m"]);
    assert!(!c.success(), "a box commit from an index still at the old commit went through:\n{}", changed_by(&env, &r, "HEAD").join("\n"));
    assert_eq!(env.host(&r, &["rev-parse", "HEAD"]), host_head, "the refused commit moved the branch");
    assert!(env.log().contains("this command's index is from commit"), "no reason logged:\n{}", env.log());
    assert!(env.log().contains("staged changes overlap"), "the heal was not refused as the test means:\n{}", env.log());
    // What the message says to do works: unstage, stage again, commit. (The work tree is shared:
    // the host's write of m.txt replaced the box's, so the box edits it again.)
    env.boxed(&r, &["reset", "-q"]);
    write(&r.b("m.txt"), "m changed by the box, on top of the host\n");
    env.boxed(&r, &["add", "m.txt"]);
    env.boxed(&r, &["commit", "-q", "-m", "box m"]);
    assert_eq!(changed_by(&env, &r, "HEAD"), vec!["M\tm.txt"], "the box's commit reverted the host's");
    assert_eq!(env.host(&r, &["rev-parse", "HEAD~"]), host_head);
    env.finish();
}

/// A box `git reset --hard HEAD` reads HEAD at the host's new commit, and the host takes that
/// commit back (`reset --soft HEAD~`) before the box reads and writes its index: the index the
/// box writes is the taken-back commit's tree, so it is in sync with that commit and heals back
/// on the next touch; counted as in sync with the commit before it, the box's next commit
/// re-added the host's file (the three-box race's "carrying another box's files: A", ADR 0030).
/// The box git is held between its read of HEAD and its read of the index by `.git/shallow`
/// as a FIFO, which git opens in between (the FIFO is the box kernel's, through the mount).
#[test]
fn a_box_reset_to_a_commit_taken_back_before_its_index_write_heals_back() {
    let env = Env::new("heal-reset-taken-back", &[]);
    let r = env.host_repo("repo", FILES);
    let base = env.host_rev(&r, "HEAD");
    assert!(status(&env.git, &r.boxed).is_empty(), "the box's first look");
    write(&r.h("h.txt"), "host\n");
    env.host(&r, &["add", "h.txt"]);
    env.host(&r, &["commit", "-q", "-m", "host h"]);
    let host_commit = env.host_rev(&r, "HEAD");
    seam_tests::sys::mkfifo(&r.h(".git/shallow"), 0o644).expect("mkfifo .git/shallow on the backing dir");
    let child = env.git.cmd(&r.boxed, &["reset", "-q", "--hard", "HEAD"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
    let mut child = child.expect("spawn box git reset");
    // A write open succeeds (O_NONBLOCK) only once a reader is there: git, held in its open.
    let fifo = r.b(".git/shallow");
    let mut writer = None;
    let held = wait_until(Duration::from_secs(30), || {
        writer = seam_tests::sys::open(&fifo, libc::O_WRONLY | libc::O_NONBLOCK, 0).ok();
        writer.is_some() || child.try_wait().ok().flatten().is_some()
    });
    assert!(held && writer.is_some(), "the box reset never opened .git/shallow\n{}", env.log());
    // The host's `reset --soft HEAD~`, as its ref store's rename (host git would open the FIFO).
    write(&r.h(".git/refs/heads/main.lock"), &format!("{base}\n"));
    std::fs::rename(r.h(".git/refs/heads/main.lock"), r.h(".git/refs/heads/main")).expect("move the host's branch");
    // Later opens of `shallow` must not block: the name goes, then git reads the FIFO's end.
    seam_tests::sys::unlink(&fifo).expect("unlink the FIFO through the mount");
    drop(writer);
    let out = child.wait_with_output().expect("wait for the box reset");
    // It read HEAD at the host's commit (so the window was hit): its move of HEAD back onto
    // that commit is refused, as the host moved HEAD since.
    assert!(!out.status.success(), "the box reset did not try to move HEAD back to {host_commit}: the host's soft reset came too late");
    assert_eq!(env.host_rev(&r, "HEAD"), base, "the box reset undid the host's soft reset");
    box_commit(&env, &r, "b.txt");
    assert_eq!(
        changed_by(&env, &r, "HEAD"),
        vec!["A\tb.txt"],
        "the box's commit re-added the commit the host took back:\n{}",
        env.log()
    );
    assert_eq!(env.host_rev(&r, "HEAD~"), base);
    env.finish();
}

/// A box process looks its index up, a heal onto the host's commit lands (another box command's
/// touch), then the process reads its index and writes it back (as `git status` refreshes it):
/// what it wrote is the healed index, so its sync point is the host's commit. Counted as in
/// sync with the commit before (the process's first lookup), the host's soft reset of that
/// commit then healed nothing, and the box's next commit re-added the host's file (the
/// three-box race's one remaining "carrying another box's files: A").
#[test]
fn a_box_index_written_from_a_read_after_a_heal_follows_that_heal() {
    let env = Env::new("heal-read-after-heal", &[]);
    let r = env.host_repo("repo", FILES);
    let base = env.host_rev(&r, "HEAD");
    // The box's own staging, so its index is no commit's tree.
    write(&r.b("s.txt"), "staged by the box\n");
    env.boxed(&r, &["add", "s.txt"]);
    let mut child = Child::spawn(&r.b(".git"), "stat index\nsignal looked\nwait go\nrewrite index\n");
    child.wait_for("looked");
    write(&r.h("h.txt"), "host\n");
    env.host(&r, &["add", "h.txt"]);
    env.host(&r, &["commit", "-q", "-m", "host h"]);
    assert_eq!(staged(&env.git, &r.boxed), vec!["A\ts.txt"], "the box's index healed onto the host's commit");
    child.signal("go");
    assert_eq!(child.finish(), "stat index ok\nrewrite index ok\n");
    // The host takes its commit back (keeping it staged, as `reset --soft HEAD~` does).
    env.host(&r, &["reset", "-q", "--soft", "HEAD~"]);
    assert_eq!(env.host_rev(&r, "HEAD"), base);
    box_commit(&env, &r, "b.txt");
    assert_eq!(
        changed_by(&env, &r, "HEAD"),
        vec!["A\tb.txt", "A\ts.txt"],
        "the box's commit re-added the commit the host took back:\n{}",
        env.log()
    );
    env.finish();
}

#[test]
fn a_box_soft_reset_is_kept_across_a_host_commit() {
    let env = Env::new("heal-soft-host-commit", &[]);
    let r = env.host_repo("repo", FILES);
    box_commit(&env, &r, "b.txt");
    env.boxed(&r, &["reset", "-q", "--soft", "HEAD~"]);
    assert_eq!(staged(&env.git, &r.boxed), vec!["A\tb.txt"]);
    assert_eq!(status(&env.git, &r.host), vec!["?? b.txt"], "the host's index should follow the box's reset");
    write(&r.h("h.txt"), "host\n");
    env.host(&r, &["add", "h.txt"]);
    env.host(&r, &["commit", "-q", "-m", "host"]);
    assert_eq!(changed_by(&env, &r, "HEAD"), vec!["A\th.txt"]);
    assert_eq!(
        staged(&env.git, &r.boxed),
        vec!["A\tb.txt"],
        "the box's soft-reset staging was healed away:\n{}",
        env.log()
    );
    assert_eq!(status(&env.git, &r.boxed), vec!["A  b.txt"]);
    env.finish();
}

#[test]
fn a_box_soft_reset_is_kept_across_a_host_soft_reset() {
    let env = Env::new("heal-soft-host-soft", &[]);
    let r = env.host_repo("repo", FILES);
    box_commit(&env, &r, "b.txt");
    box_commit(&env, &r, "c.txt");
    env.boxed(&r, &["reset", "-q", "--soft", "HEAD~"]);
    assert_eq!(staged(&env.git, &r.boxed), vec!["A\tc.txt"]);
    env.host(&r, &["reset", "-q", "--soft", "HEAD~"]);
    assert_eq!(staged(&env.git, &r.host), vec!["A\tb.txt"], "the host's own soft reset");
    assert_eq!(
        staged(&env.git, &r.boxed),
        vec!["A\tc.txt"],
        "the box's soft-reset staging after a host soft reset:\n{}",
        env.log()
    );
    env.finish();
}

#[test]
fn overlapping_box_staging_is_kept_and_reported_once() {
    let env = Env::new("heal-overlap-box", &[]);
    let r = env.host_repo("repo", FILES);
    write(&r.b("m.txt"), "m staged by the box\n");
    env.boxed(&r, &["add", "m.txt"]);
    write(&r.h("m.txt"), "m committed by the host\n");
    env.host(&r, &["commit", "-q", "-a", "-m", "host m"]);
    for _ in 0..3 {
        let st = env.try_box(&r, &["status", "--porcelain"]);
        assert!(st.success(), "{st}");
    }
    assert_eq!(
        env.boxed(&r, &["show", ":m.txt"]),
        "m staged by the box\n",
        "the box's overlapping staging was dropped"
    );
    let log = env.log();
    let reports: Vec<&str> = lines_with(&log, "box index not healed after a move by the host or another box");
    assert_eq!(reports.len(), 1, "the overlap should be reported once:\n{log}");
    assert!(reports[0].contains("overlap") && reports[0].contains("m.txt"), "{}", reports[0]);
    env.finish();
}

#[test]
fn overlapping_host_staging_is_kept_reported_once_and_cleared_by_a_host_reset() {
    let env = Env::new("heal-overlap-host", &[]);
    let r = env.host_repo("repo", FILES);
    assert!(status(&env.git, &r.boxed).is_empty());
    write(&r.h("m.txt"), "m staged by the host\n");
    env.host(&r, &["add", "m.txt"]);
    let shared = bytes(&r.h(".git/index"));
    write(&r.b("m.txt"), "m committed by the box\n");
    env.boxed(&r, &["commit", "-q", "-a", "-m", "box m"]);
    assert_eq!(bytes(&r.h(".git/index")), shared, "an overlapping heal rewrote the shared index");
    assert_eq!(env.host(&r, &["show", ":m.txt"]), "m staged by the host\n");
    let log = env.log();
    let reports = lines_with(&log, "shared index not healed");
    assert_eq!(reports.len(), 1, "{log}");
    assert!(reports[0].contains("overlap") && reports[0].contains("m.txt"), "{}", reports[0]);
    // The host resets: its index is HEAD (the box's commit; the work tree is shared, so it holds
    // the box's m.txt too); the next box commit heals cleanly.
    env.host(&r, &["reset", "-q"]);
    assert!(status(&env.git, &r.host).is_empty());
    box_commit(&env, &r, "b.txt");
    assert!(status(&env.git, &r.host).is_empty(), "after the host's reset and a box commit:\n{}", env.log());
    assert_eq!(lines_with(&env.log(), "shared index not healed").len(), 1, "{}", env.log());
    env.finish();
}

/// lab.md bug 9 (ADR 0051): `git commit` reads the index before it takes `index.lock`, and
/// writes what it read back under the lock when its refresh changed a stat entry. A host commit
/// that read the shared index before a box commit's heal was installed and locked after puts the
/// pre-heal index back: its own commit fails (it read HEAD before the box moved it), and the
/// index lacks the box's file under a HEAD that has it. Here the host commit's open of
/// `index.lock` is held back 2 s by strace while the box commits. The write-back is shown to
/// happen (the failure itself), then seamfs's watch leaves the heal again as a proposal on the
/// written-back bytes, and `seamd run --once` puts it in: host staging kept, nothing reverted.
#[test]
fn a_host_commit_writing_back_the_index_it_read_before_a_heal_is_healed_again() {
    let env = Env::new("heal-writeback", &[]);
    let r = env.host_repo("repo", FILES);
    assert!(status(&env.git, &r.boxed).is_empty(), "the box seeds first");
    write(&r.h("m.txt"), "m staged by the host\n");
    env.host(&r, &["add", "m.txt"]);
    let lock = r.h(".git/index.lock");
    let mut c = Command::new("strace");
    env.git.env(&mut c);
    c.current_dir(&r.host)
        .args(["-f", "-qq", "-o", "/dev/null", "-P"])
        .arg(&lock)
        .args(["-e", "trace=openat", "-e", "inject=openat:delay_enter=2000000", "--", "git", "commit", "-q", "-m", "host"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut host = Bg::spawn(&mut c);
    // git reads the index at once, then waits at its lock's open.
    std::thread::sleep(Duration::from_millis(500));
    box_commit(&env, &r, "b.txt");
    let box_head = env.host_rev(&r, "HEAD");
    assert!(env.host(&r, &["ls-files", "b.txt"]).contains("b.txt"), "the box's heal was not installed:\n{}", env.log());
    // A tracked file's stat changes, so the host commit's refresh changes an entry and writes.
    let later = std::time::SystemTime::now() + Duration::from_secs(5);
    std::fs::File::options().write(true).open(r.h("a.txt")).and_then(|f| f.set_modified(later)).expect("touch a.txt");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut host.0.stderr.take().expect("piped stderr"), &mut stderr).expect("read the host commit's stderr");
    let status = host.0.wait().expect("wait for the host commit");
    assert!(!status.success() && stderr.contains("cannot lock ref"), "the host commit should have failed git's compare-and-swap: {stderr}");
    assert_eq!(env.host_rev(&r, "HEAD"), box_head, "HEAD moved");
    // The failure itself, seen: the written-back index lacks the box's file (or seamfs's watch
    // already left its proposal, which is what the next assertion waits for).
    let written_back = env.host(&r, &["ls-files", "b.txt"]).trim().is_empty();
    assert!(written_back, "the host commit did not write back the pre-heal index: the race did not happen\n{}", env.log());
    assert!(wait_until(Duration::from_secs(5), || !proposals(&r).is_empty()), "seamfs left no proposal after the write-back:\n{}", env.log());
    assert!(env.log().contains("wrote back the index it read before the box's heal"), "{}", env.log());
    let out = seamd(&r.host);
    assert!(out.success() && out.stderr.contains("installed"), "{out}");
    assert!(env.host(&r, &["ls-files", "b.txt"]).contains("b.txt"), "the box's file is still missing from the host's index");
    assert_eq!(staged(&env.git, &r.host), vec!["M\tm.txt"], "host staging after the repair");
    env.host(&r, &["commit", "-q", "-m", "host"]);
    assert_eq!(changed_by(&env, &r, "HEAD"), vec!["M\tm.txt"], "the host's next commit took the box's work back");
    env.finish();
}
