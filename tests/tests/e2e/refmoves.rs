//! Ref moves judged under the lock: a box rename of `<ref>.lock` onto `<ref>` is held, for HEAD
//! and the branch the process started on, to what that process saw when it started (advanced by
//! its own moves); other refs are left to git's own compare-and-swap; a host operation that
//! appeared meanwhile (or a leftover autostash dir) stops a HEAD move; a branch that reads absent
//! but has a reflog never gets a root commit.
//!
//! The judging is per process, so most cases use the scripted child of `hostbox` (this test
//! binary re-executed): it reads HEAD and the branch through the mount (its start), signals,
//! waits while the host moves things on the backing dir, then writes `<ref>.lock` and renames it
//! onto `<ref>`, reporting the errno. Real git covers the rest (hooks make the host commit in
//! the middle of a box command).

use std::os::unix::fs::PermissionsExt;

use seam_tests::run::run;

use crate::hostbox::{bytes, lines_with, ref_snapshot, staged, status, write, Child, Env, Repo};

const FILES: &[(&str, &str)] = &[("a.txt", "a\n")];
const MAIN: &str = "refs/heads/main";

/// A commit on top of `parent` with the same tree (created on the host, on no branch).
fn child_of(env: &Env, r: &Repo, parent: &str, msg: &str) -> String {
    env.host(r, &["commit-tree", &format!("{parent}^{{tree}}"), "-p", parent, "-m", msg]).trim().to_string()
}

/// The usual start: HEAD and the branch read through the mount, then `ready`, then `go`.
fn start_script(extra_reads: &[&str], moves: &[(&str, &str)]) -> String {
    let mut s = String::from("read HEAD\nread refs/heads/main\n");
    for r in extra_reads {
        s.push_str(&format!("read {r}\n"));
    }
    s.push_str("signal ready\nwait go\n");
    for (r, v) in moves {
        s.push_str(&format!("move {r} {v}\n"));
    }
    s
}

/// A host commit of one new file on the backing dir; returns the new HEAD.
fn host_commit(env: &Env, r: &Repo, file: &str) -> String {
    write(&r.h(file), &format!("{file} from the host\n"));
    env.host(r, &["add", file]);
    env.host(r, &["commit", "-q", "-m", &format!("host {file}")]);
    env.host_rev(r, "HEAD")
}

#[test]
fn host_move_in_between_is_refused() {
    let env = Env::new("ref-host-moved", &[]);
    let r = env.host_repo("repo", FILES);
    let c1 = env.host_rev(&r, "HEAD");
    let v = child_of(&env, &r, &c1, "box move");
    let mut child = Child::spawn(&r.b(".git"), &start_script(&[], &[(MAIN, &v)]));
    child.wait_for("ready");
    let c2 = host_commit(&env, &r, "h.txt");
    let before = ref_snapshot(&r.h(".git"));
    child.signal("go");
    let report = child.finish();
    assert!(
        report.contains("move refs/heads/main EBUSY unlink=ok"),
        "the stale move was not refused with EBUSY:\n{report}\n{}",
        env.log()
    );
    assert_eq!(env.host_rev(&r, "main"), c2, "the host's commit is no longer the tip");
    assert_eq!(ref_snapshot(&r.h(".git")), before, "a refused move changed refs or the shared index");
    assert!(!r.h(".git/refs/heads/main.lock").exists(), "the lock was left behind");
    assert_eq!(
        lines_with(&env.log(), "refused to move refs/heads/main").len(),
        1,
        "one log line for the refusal:\n{}",
        env.log()
    );
    assert!(status(&env.git, &r.host).is_empty());
    env.finish();
}

#[test]
fn no_host_move_lands() {
    let env = Env::new("ref-no-move", &[]);
    let r = env.host_repo("repo", FILES);
    let c1 = env.host_rev(&r, "HEAD");
    let v = child_of(&env, &r, &c1, "box move");
    let mut child = Child::spawn(&r.b(".git"), &start_script(&[], &[(MAIN, &v)]));
    child.wait_for("ready");
    child.signal("go");
    let report = child.finish();
    assert_eq!(report, "read HEAD ok\nread refs/heads/main ok\nmove refs/heads/main ok\n", "{}", env.log());
    assert_eq!(env.host_rev(&r, "main"), v);
    env.finish();
}

#[test]
fn host_rewrite_to_the_same_value_is_no_refusal() {
    let env = Env::new("ref-same-value", &[]);
    let r = env.host_repo("repo", FILES);
    let c1 = env.host_rev(&r, "HEAD");
    let v = child_of(&env, &r, &c1, "box move");
    let mut child = Child::spawn(&r.b(".git"), &start_script(&[], &[(MAIN, &v)]));
    child.wait_for("ready");
    // The host replaces the ref file (a new inode) with the very same value.
    let tmp = r.h(".git/refs/heads/main.tmp");
    std::fs::write(&tmp, format!("{c1}\n")).expect("write");
    std::fs::rename(&tmp, r.h(".git/refs/heads/main")).expect("rename onto the ref");
    child.signal("go");
    let report = child.finish();
    assert!(
        report.contains("move refs/heads/main ok"),
        "a same-value rewrite caused a refusal:\n{report}\n{}",
        env.log()
    );
    assert_eq!(env.host_rev(&r, "main"), v);
    env.finish();
}

#[test]
fn own_moves_advance_the_baseline() {
    let env = Env::new("ref-own-moves", &[]);
    let r = env.host_repo("repo", FILES);
    let c1 = env.host_rev(&r, "HEAD");
    let v1 = child_of(&env, &r, &c1, "first box move");
    let v2 = child_of(&env, &r, &v1, "second box move");
    let mut child = Child::spawn(&r.b(".git"), &start_script(&[], &[(MAIN, &v1), (MAIN, &v2)]));
    child.wait_for("ready");
    child.signal("go");
    let report = child.finish();
    assert_eq!(
        report.matches("move refs/heads/main ok").count(),
        2,
        "the second move was judged against the start, not the own first move:\n{report}\n{}",
        env.log()
    );
    assert_eq!(env.host_rev(&r, "main"), v2);
    env.finish();
}

#[test]
fn host_move_after_an_own_move_is_refused() {
    let env = Env::new("ref-own-then-host", &[]);
    let r = env.host_repo("repo", FILES);
    let c1 = env.host_rev(&r, "HEAD");
    let v1 = child_of(&env, &r, &c1, "first box move");
    let v2 = child_of(&env, &r, &v1, "second box move");
    let script =
        format!("read HEAD\nread refs/heads/main\nmove {MAIN} {v1}\nsignal moved\nwait go\nmove {MAIN} {v2}\n");
    let mut child = Child::spawn(&r.b(".git"), &script);
    child.wait_for("moved");
    assert_eq!(env.host_rev(&r, "main"), v1);
    let ch = host_commit(&env, &r, "h.txt");
    child.signal("go");
    let report = child.finish();
    assert!(report.contains(&format!("move {MAIN} ok")), "{report}");
    assert!(
        report.contains(&format!("move {MAIN} EBUSY")),
        "a move over a host commit (after an own move) was not refused:\n{report}\n{}",
        env.log()
    );
    assert_eq!(env.host_rev(&r, "main"), ch);
    env.finish();
}

#[test]
fn another_branch_is_left_to_gits_own_compare_and_swap() {
    let env = Env::new("ref-side", &[]);
    let r = env.host_repo("repo", FILES);
    let c1 = env.host_rev(&r, "HEAD");
    env.host(&r, &["branch", "side"]);
    let host_side = child_of(&env, &r, &c1, "host moves side");
    let box_side = child_of(&env, &r, &c1, "box moves side");
    let mut child = Child::spawn(&r.b(".git"), &start_script(&["refs/heads/side"], &[("refs/heads/side", &box_side)]));
    child.wait_for("ready");
    env.host(&r, &["branch", "-f", "side", &host_side]);
    child.signal("go");
    let report = child.finish();
    assert!(
        report.contains("move refs/heads/side ok"),
        "a move of a branch the command did not start on was second-guessed:\n{report}\n{}",
        env.log()
    );
    assert_eq!(env.host_rev(&r, "side"), box_side);
    assert_eq!(env.host_rev(&r, "main"), c1);
    env.finish();
}

/// A host operation state appears after the child started: its move of main is refused.
fn operation_appears(label: &str, make: impl Fn(&Repo), name: &str) {
    let env = Env::new(label, &[]);
    let r = env.host_repo("repo", FILES);
    let c1 = env.host_rev(&r, "HEAD");
    let v = child_of(&env, &r, &c1, "box move");
    let mut child = Child::spawn(&r.b(".git"), &start_script(&[], &[(MAIN, &v)]));
    child.wait_for("ready");
    make(&r);
    child.signal("go");
    let report = child.finish();
    assert!(
        report.contains("move refs/heads/main EBUSY"),
        "a HEAD move during a host {name} was not refused:\n{report}\n{}",
        env.log()
    );
    assert_eq!(env.host_rev(&r, "main"), c1);
    let log = env.log();
    assert!(
        lines_with(&log, "refused to move HEAD").iter().any(|l| l.contains(name)),
        "the log should name {name}:\n{log}"
    );
    env.finish();
}

#[test]
fn host_rebase_started_meanwhile_refuses() {
    operation_appears(
        "ref-op-rebase",
        |r| write(&r.h(".git/rebase-merge/head-name"), "refs/heads/main\n"),
        "rebase-merge",
    );
}

#[test]
fn host_merge_started_meanwhile_refuses() {
    operation_appears(
        "ref-op-merge",
        |r| {
            let head = std::fs::read_to_string(r.h(".git/refs/heads/main")).expect("read main");
            write(&r.h(".git/MERGE_HEAD"), &head);
        },
        "MERGE_HEAD",
    );
}

#[test]
fn operation_present_at_start_refuses_until_it_finishes() {
    let env = Env::new("ref-op-old", &[]);
    let r = env.host_repo("repo", FILES);
    write(&r.h(".git/rebase-merge/head-name"), "refs/heads/main\n");
    // Present at start, still present at the move: a box commit would land on the host's
    // rebase and be lost when the host finishes or aborts it.
    let c1 = env.host_rev(&r, "HEAD");
    let v1 = child_of(&env, &r, &c1, "box move 1");
    let mut child = Child::spawn(&r.b(".git"), &start_script(&[], &[(MAIN, &v1)]));
    child.wait_for("ready");
    child.signal("go");
    let report = child.finish();
    assert!(
        report.contains("move refs/heads/main EBUSY"),
        "a host rebase in progress at the start did not hold the box back:\n{report}\n{}",
        env.log()
    );
    assert_eq!(env.host_rev(&r, "main"), c1);
    let log = env.log();
    assert!(
        lines_with(&log, "operation in progress").iter().any(|l| l.contains("rebase-merge")),
        "the refusal should name rebase-merge:\n{log}"
    );
    // Present at start, finished (removed) before the move.
    let mut child = Child::spawn(&r.b(".git"), &start_script(&[], &[(MAIN, &v1)]));
    child.wait_for("ready");
    std::fs::remove_dir_all(r.h(".git/rebase-merge")).expect("the host's rebase finishes");
    child.signal("go");
    let report = child.finish();
    assert!(
        report.contains("move refs/heads/main ok"),
        "an operation that just finished held the box back:\n{report}\n{}",
        env.log()
    );
    assert_eq!(env.host_rev(&r, "main"), v1);
    env.finish();
}

#[test]
fn leftover_autostash_refuses_and_names_the_recovery() {
    let env = Env::new("ref-autostash", &[]);
    let r = env.host_repo("repo", FILES);
    let c1 = env.host_rev(&r, "HEAD");
    // A fresh autostash-only dir is a host pull just starting its rebase: in progress, not a
    // leftover, so refused without the recovery text.
    write(&r.h(".git/rebase-merge/autostash"), &format!("{c1}\n"));
    let v = child_of(&env, &r, &c1, "box move");
    let mut child = Child::spawn(&r.b(".git"), &start_script(&[], &[(MAIN, &v)]));
    child.wait_for("ready");
    child.signal("go");
    let report = child.finish();
    assert!(report.contains("move refs/heads/main EBUSY"), "a pull starting its rebase did not hold the box back:\n{report}");
    let log = env.log();
    assert!(
        lines_with(&log, "operation in progress").iter().any(|l| l.contains("rebase-merge")),
        "a fresh autostash dir should read as an operation in progress:\n{log}"
    );
    assert!(!log.contains("git stash store"), "a fresh autostash dir is not a leftover:\n{log}");
    assert_eq!(env.host_rev(&r, "main"), c1);
    // The host moves main itself meanwhile (its pull landed); the next box move builds on it.
    env.host(&r, &["update-ref", "refs/heads/main", &v]);
    // 60 s old: a leftover of a failed `pull --rebase --autostash`.
    crate::hostbox::age(&r.h(".git/rebase-merge/autostash"));
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs() as i64 - 60;
    seam_tests::sys::utimens(&r.h(".git/rebase-merge"), (t, 0), (t, 0), 0).expect("age the dir");
    let v2 = child_of(&env, &r, &v, "box move 2");
    let mut child = Child::spawn(&r.b(".git"), &start_script(&[], &[(MAIN, &v2)]));
    child.wait_for("ready");
    child.signal("go");
    let report = child.finish();
    assert!(
        report.contains("move refs/heads/main EBUSY"),
        "a leftover autostash dir did not refuse the move:\n{report}\n{}",
        env.log()
    );
    assert_eq!(env.host_rev(&r, "main"), v);
    let log = env.log();
    assert!(
        lines_with(&log, "autostash").iter().any(|l| l.contains("git stash store")),
        "the refusal should name `git stash store`:\n{log}"
    );
    env.finish();
}

#[test]
fn branch_absent_with_a_reflog_never_gets_a_root_commit() {
    let env = Env::new("ref-hidden-branch", &[]);
    let r = env.host_repo("repo", FILES);
    assert!(status(&env.git, &r.boxed).is_empty());
    let tip = env.host_rev(&r, "HEAD");
    let roots = |env: &Env| env.host(&r, &["rev-list", "--max-parents=0", "--all", "--reflog"]).lines().count();
    let roots_before = roots(&env);
    assert!(
        !r.h(".git/packed-refs").exists()
            || !bytes(&r.h(".git/packed-refs")).windows(15).any(|w| w == b"refs/heads/main")
    );
    assert!(!bytes(&r.h(".git/logs/refs/heads/main")).is_empty(), "the fixture needs a reflog");
    // The loose branch file reads absent on the lower (a stale share), its reflog has entries.
    std::fs::remove_file(r.h(".git/refs/heads/main")).expect("remove the branch file");
    write(&r.b("n.txt"), "n\n");
    env.boxed(&r, &["add", "n.txt"]);
    let res = env.try_box(&r, &["commit", "-q", "-m", "must not be a root commit"]);
    let recreated = r.h(".git/refs/heads/main").exists();
    let roots_after = roots(&env);
    assert_eq!(
        (roots_after, recreated),
        (roots_before, false),
        "the box made a root commit on a branch that reads absent but has history (roots before/after, branch recreated):\n{res}\n{}",
        env.log()
    );
    assert!(!res.success(), "the box commit reported success although nothing moved:\n{res}");
    assert!(env.log().contains("reads as absent but has a reflog"), "{}", env.log());
    // Once the branch is back, the same commit lands on top of it.
    std::fs::write(r.h(".git/refs/heads/main"), format!("{tip}\n")).expect("restore");
    env.boxed(&r, &["commit", "-q", "-m", "after the branch came back"]);
    assert_eq!(env.host_rev(&r, "HEAD~1"), tip);
    assert_eq!(roots(&env), roots_before);
    env.finish();
}

#[test]
fn an_orphan_branch_takes_its_first_commit() {
    let env = Env::new("ref-orphan", &[]);
    let r = env.host_repo("repo", FILES);
    env.boxed(&r, &["checkout", "-q", "--orphan", "fresh"]);
    env.boxed(&r, &["commit", "-q", "-m", "root of fresh"]);
    let parents = env.host(&r, &["rev-list", "--parents", "-n", "1", "fresh"]);
    assert_eq!(parents.split_whitespace().count(), 1, "the orphan's first commit should be a root: {parents}");
    env.finish();
}

#[test]
fn a_host_commit_right_after_a_box_commit_is_not_the_boxs() {
    let env = Env::new("ref-after", &[]);
    let r = env.host_repo("repo", FILES);
    write(&r.b("b1.txt"), "b\n");
    env.boxed(&r, &["add", "b1.txt"]);
    env.boxed(&r, &["commit", "-q", "-m", "box 1"]);
    let h = host_commit(&env, &r, "h.txt");
    write(&r.b("b2.txt"), "b\n");
    env.boxed(&r, &["add", "b2.txt"]);
    env.boxed(&r, &["commit", "-q", "-m", "box 2"]);
    assert_eq!(env.host_rev(&r, "HEAD~1"), h, "the box's second commit does not parent the host's");
    assert_eq!(env.host(&r, &["log", "--format=%s"]), "box 2\nhost h.txt\nbox 1\nbase\n");
    assert!(status(&env.git, &r.host).is_empty());
    assert!(status(&env.git, &r.boxed).is_empty());
    env.finish();
}

/// Installs an executable hook on the backing dir.
fn hook(r: &Repo, name: &str, body: &str) {
    let p = r.h(&format!(".git/hooks/{name}"));
    write(&p, body);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod the hook");
}

/// A hook body that makes one host commit of `host.txt` in the backing dir (once).
fn host_commit_body(r: &Repo, guard: &str) -> String {
    format!(
        "#!/bin/sh\n{guard}\nunset GIT_DIR GIT_INDEX_FILE GIT_WORK_TREE GIT_PREFIX GIT_OBJECT_DIRECTORY GIT_COMMON_DIR\n\
         cd '{host}' || exit 1\n[ -e .git/hook-ran ] && exit 0\ntouch .git/hook-ran\n\
         echo host > host.txt\ngit add host.txt && git commit -q --no-verify -m 'host commit from a hook' || exit 1\nexit 0\n",
        host = r.host.display()
    )
}

#[test]
fn a_host_commit_inside_a_box_commit_stops_it() {
    let env = Env::new("ref-precommit", &[]);
    let r = env.host_repo("repo", FILES);
    let c1 = env.host_rev(&r, "HEAD");
    hook(&r, "pre-commit", &host_commit_body(&r, ""));
    write(&r.b("b.txt"), "box\n");
    env.boxed(&r, &["add", "b.txt"]);
    let res = env.try_box(&r, &["commit", "-q", "-m", "box commit"]);
    assert!(r.h(".git/hook-ran").exists(), "the hook did not run");
    assert!(!res.success(), "the box commit landed over a host commit made while it ran:\n{res}\n{}", env.log());
    eprintln!("box commit refused:\n{res}\nlog:\n{}", env.log());
    let h = env.host_rev(&r, "main");
    assert_eq!(env.host(&r, &["log", "--format=%s", "main"]), "host commit from a hook\nbase\n");
    assert_eq!(env.host_rev(&r, "main~1"), c1);
    env.git.fsck(&r.host);
    // The box's staging is still there, carried onto the host's commit; the retry lands on top.
    assert_eq!(staged(&env.git, &r.boxed), vec!["A\tb.txt"], "the box's staging after the refusal:\n{}", env.log());
    std::fs::remove_file(r.h(".git/hooks/pre-commit")).expect("rm hook");
    env.boxed(&r, &["commit", "-q", "-m", "box commit again"]);
    assert_eq!(env.host_rev(&r, "main~1"), h);
    assert!(status(&env.git, &r.host).is_empty());
    env.finish();
}

/// A box `git reset MODE HEAD~` during which the host commits (from the reference-transaction
/// hook of its ORIG_HEAD update, before HEAD moves): the host commit is not rewound.
fn reset_with_host_commit_inside(mode: &str) {
    let env = Env::new(&format!("ref-reset{mode}"), &[]);
    let r = env.host_repo("repo", FILES);
    write(&r.b("b.txt"), "box\n");
    env.boxed(&r, &["add", "b.txt"]);
    env.boxed(&r, &["commit", "-q", "-m", "box second"]);
    let c1 = env.host_rev(&r, "HEAD");
    let guard = "[ \"$1\" = committed ] || exit 0\ngrep -q ORIG_HEAD || exit 0";
    hook(&r, "reference-transaction", &host_commit_body(&r, guard));
    let res = env.try_box(&r, &["reset", "-q", mode, "HEAD~"]);
    assert!(r.h(".git/hook-ran").exists(), "the hook did not run (reset {mode}):\n{res}");
    std::fs::remove_file(r.h(".git/hooks/reference-transaction")).expect("rm hook");
    eprintln!("box reset {mode} with a host commit inside:\n{res}\nlog:\n{}", env.log());
    let tip = env.host_rev(&r, "main");
    assert_eq!(
        env.host(&r, &["log", "-1", "--format=%s", "main"]).trim(),
        "host commit from a hook",
        "reset {mode} rewound the host's commit:\n{res}\n{}",
        env.log()
    );
    assert_eq!(env.host_rev(&r, &format!("{tip}~1")), c1);
    assert!(!res.success(), "the reset reported success although HEAD did not move:\n{res}");
    env.git.fsck(&r.host);
    env.finish();
}

#[test]
fn a_host_commit_inside_a_box_reset_soft_is_not_rewound() {
    reset_with_host_commit_inside("--soft");
}

#[test]
fn a_host_commit_inside_a_box_reset_mixed_is_not_rewound() {
    reset_with_host_commit_inside("--mixed");
}

#[test]
fn a_host_commit_inside_a_box_reset_hard_is_not_rewound() {
    reset_with_host_commit_inside("--hard");
}

/// A repo whose `*.dat` files go through filter `hc`; the box's smudge of it makes one host
/// commit (of `host.txt`, on the backing dir) while the box command updates the work tree, so
/// before it moves the branch. git's own compare-and-swap cannot see that: `checkout -B` moves the
/// branch with no expected value, and `reset` reads the value it replaces only after the work tree.
struct Slow {
    env: Env,
    r: Repo,
    _scripts: seam_tests::TempDir,
    smudge: String,
    marker: std::path::PathBuf,
}

fn slow_setup(label: &str) -> Slow {
    let env = Env::new(label, &[]);
    let r = env.host_repo("repo", &[("a.txt", "a\n"), (".gitattributes", "*.dat filter=hc\n"), ("x.dat", "1\n")]);
    let scripts = seam_tests::TempDir::new(&format!("{label}-scripts"));
    let marker = scripts.join("ran");
    let script = scripts.join("smudge.sh");
    // The host commits through an index of its own: the box's checkout holds the shared
    // `index.lock` while it rewrites the work tree (ADR 0032), as one kernel would, and a host
    // ref move that needs no shared index (a tool with its own index, `update-ref`) is what can
    // still land inside it.
    let host_index = scripts.join("host-index");
    write(
        &script,
        &format!(
            "#!/bin/sh\nif [ ! -e '{marker}' ]; then\n  touch '{marker}'\n  ( unset GIT_DIR GIT_INDEX_FILE GIT_WORK_TREE GIT_PREFIX GIT_CONFIG_PARAMETERS\n    \
             cd '{host}' && export GIT_INDEX_FILE='{index}' && git read-tree HEAD && echo host > host.txt && git add host.txt && git commit -q --no-verify -m 'host commit from a filter' ) </dev/null >'{marker}.out' 2>&1\nfi\nexec cat\n",
            marker = marker.display(),
            host = r.host.display(),
            index = host_index.display()
        ),
    );
    let smudge = format!("filter.hc.smudge=sh {}", script.display());
    Slow { env, r, _scripts: scripts, smudge, marker }
}

#[test]
fn a_host_commit_inside_a_slow_box_checkout_b_is_not_rewound() {
    let s = slow_setup("ref-slow-checkout-b");
    let (env, r) = (&s.env, &s.r);
    env.host(r, &["branch", "other"]);
    env.host(r, &["checkout", "-q", "other"]);
    write(&r.h("x.dat"), "2\n");
    env.host(r, &["commit", "-q", "-a", "-m", "other"]);
    env.host(r, &["checkout", "-q", "main"]);
    let c1 = env.host_rev(r, "main");
    let res = env.try_box(r, &["-c", &s.smudge, "checkout", "-q", "-B", "main", "other"]);
    assert!(s.marker.exists(), "the smudge filter did not run:\n{res}");
    eprintln!("box checkout -B with a host commit inside:\n{res}\nlog:\n{}", env.log());
    let tip = env.host_rev(r, "main");
    assert_eq!(
        env.host(r, &["log", "-1", "--format=%s", "main"]).trim(),
        "host commit from a filter",
        "a slow box `checkout -B main` rewound the host's commit made while it ran:\n{res}\n{}",
        env.log()
    );
    assert_eq!(env.host_rev(r, &format!("{tip}~1")), c1);
    assert!(!res.success(), "checkout -B reported success although the branch did not move:\n{res}");
    assert!(lines_with(&env.log(), "refused to move refs/heads/main").len() == 1, "{}", env.log());
    env.git.fsck(&r.host);
    s.env.finish();
}

#[test]
fn a_host_commit_inside_a_slow_box_reset_hard_is_not_rewound() {
    let s = slow_setup("ref-slow-reset-hard");
    let (env, r) = (&s.env, &s.r);
    write(&r.b("x.dat"), "2\n");
    env.boxed(r, &["commit", "-q", "-a", "-m", "box second"]);
    let c1 = env.host_rev(r, "main");
    let res = env.try_box(r, &["-c", &s.smudge, "reset", "-q", "--hard", "HEAD~"]);
    assert!(s.marker.exists(), "the smudge filter did not run:\n{res}");
    eprintln!("box reset --hard with a host commit inside:\n{res}\nlog:\n{}", env.log());
    let tip = env.host_rev(r, "main");
    assert_eq!(
        env.host(r, &["log", "-1", "--format=%s", "main"]).trim(),
        "host commit from a filter",
        "a slow box `reset --hard` rewound the host's commit made while it ran:\n{res}\n{}",
        env.log()
    );
    assert_eq!(env.host_rev(r, &format!("{tip}~1")), c1);
    assert!(!res.success(), "reset reported success although HEAD did not move:\n{res}");
    env.git.fsck(&r.host);
    s.env.finish();
}

#[test]
fn a_ref_that_vanishes_while_git_runs_moves_nothing() {
    let env = Env::new("ref-vanish", &[]);
    let r = env.host_repo("repo", FILES);
    let c1 = env.host_rev(&r, "HEAD");
    let roots_before = env.host(&r, &["rev-list", "--max-parents=0", "--all", "--reflog"]).lines().count();
    // The pre-commit hook removes the branch file on the backing dir (its reflog stays).
    hook(&r, "pre-commit", &format!("#!/bin/sh\nrm -f '{}'\n", r.h(".git/refs/heads/main").display()));
    write(&r.b("b.txt"), "box\n");
    env.boxed(&r, &["add", "b.txt"]);
    let res = env.try_box(&r, &["commit", "-q", "-m", "box commit"]);
    std::fs::remove_file(r.h(".git/hooks/pre-commit")).expect("rm hook");
    let recreated = r.h(".git/refs/heads/main").exists();
    let roots_after = env.host(&r, &["rev-list", "--max-parents=0", "--all", "--reflog"]).lines().count();
    assert_eq!(
        (recreated, roots_after),
        (false, roots_before),
        "a commit landed on a vanished branch:\n{res}\n{}",
        env.log()
    );
    assert!(!res.success(), "the commit said nothing although it moved nothing:\n{res}");
    std::fs::write(r.h(".git/refs/heads/main"), format!("{c1}\n")).expect("restore");
    assert_eq!(env.host_rev(&r, "main"), c1);
    env.finish();
}

#[test]
fn moves_of_other_branches_with_real_git_are_not_second_guessed() {
    let env = Env::new("ref-side-git", &[]);
    let r = env.host_repo("repo", FILES);
    env.host(&r, &["branch", "side"]);
    assert!(status(&env.git, &r.boxed).is_empty());
    let h = host_commit(&env, &r, "h.txt");
    env.host(&r, &["branch", "-f", "side", &h]);
    env.boxed(&r, &["branch", "-f", "side", "HEAD~"]);
    assert_eq!(env.host_rev(&r, "side"), env.host_rev(&r, "HEAD~"));
    env.boxed(&r, &["tag", "t1"]);
    assert_eq!(env.host_rev(&r, "t1"), h);
    env.boxed(&r, &["branch", "-D", "side"]);
    assert!(env.try_host(&r, &["rev-parse", "--verify", "-q", "side"]).stdout.is_empty());
    assert_eq!(env.host_rev(&r, "main"), h);
    assert!(!env.log().contains("refused"), "{}", env.log());
    env.finish();
}

#[test]
fn a_two_commit_cherry_pick_is_held_to_its_own_last_move() {
    let env = Env::new("ref-cherry", &[]);
    let r = env.host_repo("repo", FILES);
    env.host(&r, &["checkout", "-q", "-b", "topic"]);
    host_commit(&env, &r, "t1.txt");
    host_commit(&env, &r, "t2.txt");
    env.host(&r, &["checkout", "-q", "main"]);
    env.boxed(&r, &["cherry-pick", "topic~1", "topic"]);
    assert_eq!(env.host(&r, &["log", "--format=%s", "main"]), "host t2.txt\nhost t1.txt\nbase\n");
    assert!(status(&env.git, &r.boxed).is_empty());
    assert!(!env.log().contains("refused"), "{}", env.log());
    // The host's index follows: sealed at once, or (if seamfs fell back to proposals) once seamd
    // has run. Either way never an index that reverts the box's picks.
    let at_once = status(&env.git, &r.host);
    let out = run(std::process::Command::new(seam_tests::bins::bin("seamd")).arg("run").arg(&r.host).arg("--once"));
    let after_seamd = status(&env.git, &r.host);
    assert!(
        at_once.is_empty() && after_seamd.is_empty(),
        "host status after the box's two-commit cherry-pick: {at_once:?}; after `seamd run --once`: {after_seamd:?}\n{out}\n{}",
        env.log()
    );
    env.finish();
}

#[test]
fn an_operation_the_box_started_can_be_finished_in_the_box() {
    let env = Env::new("ref-own-op", &[]);
    let r = env.host_repo("repo", &[("c.txt", "c\n")]);
    env.boxed(&r, &["checkout", "-q", "-b", "topic"]);
    write(&r.b("c.txt"), "topic\n");
    env.boxed(&r, &["commit", "-q", "-a", "-m", "topic c"]);
    env.boxed(&r, &["checkout", "-q", "main"]);
    write(&r.b("c.txt"), "main\n");
    env.boxed(&r, &["commit", "-q", "-a", "-m", "main c"]);
    // A merge that stops on a conflict, finished by a later box process.
    let m = env.try_box(&r, &["merge", "topic"]);
    assert!(!m.success() && r.h(".git/MERGE_HEAD").exists(), "{m}");
    write(&r.b("c.txt"), "resolved\n");
    env.boxed(&r, &["add", "c.txt"]);
    env.boxed(&r, &["commit", "-q", "--no-edit"]);
    assert_eq!(env.host(&r, &["rev-list", "--parents", "-n", "1", "HEAD"]).split_whitespace().count(), 3);
    // A rebase that stops on a conflict, continued in the box.
    env.boxed(&r, &["checkout", "-q", "-b", "again", "topic"]);
    write(&r.b("c.txt"), "again\n");
    env.boxed(&r, &["commit", "-q", "-a", "-m", "again c"]);
    let rb = env.try_box(&r, &["rebase", "main"]);
    assert!(!rb.success() && r.h(".git/rebase-merge").is_dir(), "{rb}");
    write(&r.b("c.txt"), "rebased\n");
    env.boxed(&r, &["add", "c.txt"]);
    env.boxed(&r, &["rebase", "--continue"]);
    assert!(!r.h(".git/rebase-merge").exists());
    assert_eq!(env.host(&r, &["show", "again:c.txt"]), "rebased\n");
    assert!(!env.log().contains("refused"), "{}", env.log());
    env.git.fsck(&r.host);
    env.finish();
}

#[test]
fn a_head_the_host_just_rewrote_does_not_hide_the_repository() {
    let env = Env::new("ref-head-rewrite", &[]);
    let r = env.host_repo("repo", &[("a.txt", "a\n"), ("sub/s.txt", "s\n")]);
    let wt = env.mount.join("wt");
    env.boxed(&r, &["worktree", "add", "-q", "-b", "wtb", wt.to_str().expect("utf-8")]);
    let places = [(r.boxed.clone(), r.boxed.clone()), (r.b("sub"), r.boxed.clone()), (wt.clone(), wt.clone())];
    for i in 0..10 {
        for head in [r.h(".git/HEAD"), r.h(".git/worktrees/wt/HEAD")] {
            let content = bytes(&head);
            let tmp = head.with_extension("tmp");
            std::fs::write(&tmp, &content).expect("write");
            std::fs::rename(&tmp, &head).expect("the host replaces HEAD");
        }
        for (cwd, top) in &places {
            let got = env.git.run(cwd, &["rev-parse", "--show-toplevel"]);
            assert_eq!(got.trim(), top.to_str().expect("utf-8"), "round {i}: from {}", cwd.display());
        }
    }
    env.finish();
}

#[test]
fn slow_box_reset_without_interference_lands() {
    let env = Env::new("ref-reset-ok", &[]);
    let r = env.host_repo("repo", FILES);
    write(&r.b("b.txt"), "box\n");
    env.boxed(&r, &["add", "b.txt"]);
    env.boxed(&r, &["commit", "-q", "-m", "box second"]);
    let c0 = env.host_rev(&r, "HEAD~1");
    env.boxed(&r, &["reset", "-q", "--soft", "HEAD~"]);
    assert_eq!(env.host_rev(&r, "main"), c0);
    assert_eq!(staged(&env.git, &r.boxed), vec!["A\tb.txt"]);
    env.finish();
}
