//! The host change feed (issue #11, ADR 0021): a real `seamd run --feed unix:…` watching the
//! backing dir, a real seamfs mount with `--feed` and a long work-tree TTL, host edits made on
//! the backing dir. Each test runs the same edits through seamfs without the feed (the control)
//! and shows the failure there: with a 30 s TTL and no feed the box reads the old state and its
//! watchers hear nothing.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use seam_tests::{Mount, TempDir};

/// The work-tree TTL of every mount here: long, so only the feed can make a host edit show.
const TTL: &str = "30";

/// A `seamd run --feed` process, ended by its pid when dropped.
struct Seamd {
    child: Child,
}

impl Seamd {
    /// Makes `checkout` a git checkout (seamd refuses anything else), then starts seamd on it
    /// with `env` added to its environment.
    fn start(checkout: &Path, sock: &Path, env: &[(&str, &str)]) -> Seamd {
        if !checkout.join(".git").exists() {
            seam_tests::Git::new().run(checkout, &["init", "-q"]);
        }
        let child = Command::new(seam_tests::bins::bin("seamd"))
            .envs(env.iter().copied())
            .arg("run")
            .arg(checkout)
            .arg("--feed")
            .arg(format!("unix:{}", sock.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start seamd run --feed");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !sock.exists() {
            assert!(Instant::now() < deadline, "seamd never created its feed socket {}", sock.display());
            std::thread::sleep(Duration::from_millis(10));
        }
        Seamd { child }
    }
}

impl Drop for Seamd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A checkout-like backing dir with one file, and a mount of it, with or without the feed.
/// Fields drop in order: the mount comes down before its dirs are removed (a dir with a mount
/// below it is left behind).
struct Rig {
    m: Mount,
    seamd: Option<Seamd>,
    backing: TempDir,
    _mnt: TempDir,
    _sock_dir: TempDir,
}

impl Rig {
    /// With the work-tree TTL [`TTL`].
    fn new(feed: bool) -> Rig {
        Rig::with_ttl(feed, TTL)
    }

    fn with_ttl(feed: bool, ttl: &str) -> Rig {
        Rig::build(feed, ttl, &[], |b| {
            std::fs::create_dir(b.join("src")).unwrap();
            std::fs::write(b.join("src/a.txt"), "one\n").unwrap();
        })
    }

    /// `prepare` fills the backing dir before anything runs on it; `seamd_env` is seamd's.
    fn build(feed: bool, ttl: &str, seamd_env: &[(&str, &str)], prepare: impl FnOnce(&Path)) -> Rig {
        let backing = TempDir::new("feed-backing");
        let mnt = TempDir::new("feed-mnt");
        let sock_dir = TempDir::new("feed-sock");
        prepare(backing.path());
        let sock = sock_dir.join("feed.sock");
        let seamd = feed.then(|| Seamd::start(backing.path(), &sock, seamd_env));
        let feed_arg = format!("unix:{}", sock.display());
        let mut extra = vec!["--ttl", ttl];
        if feed {
            extra.extend(["--feed", feed_arg.as_str()]);
        }
        let m = Mount::seamfs(backing.path(), mnt.path(), &extra);
        let r = Rig { m, seamd, backing, _mnt: mnt, _sock_dir: sock_dir };
        if feed {
            r.wait_for_log("change feed live", Duration::from_secs(10));
        }
        r
    }

    fn host(&self, rel: &str) -> PathBuf {
        self.backing.join(rel)
    }

    fn wait_for_log(&self, what: &str, within: Duration) {
        let deadline = Instant::now() + within;
        while !self.m.log().contains(what) {
            assert!(Instant::now() < deadline, "seamfs never logged `{what}`; log:\n{}", self.m.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Polls `f` for up to `within`; the time it took, or None.
fn within(within: Duration, mut f: impl FnMut() -> bool) -> Option<Duration> {
    let t0 = Instant::now();
    while t0.elapsed() < within {
        if f() {
            return Some(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    None
}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

/// The file's content, when its size as `stat` reports it (the kernel's cached attributes)
/// agrees: a box tool sees a host edit only when both do.
fn read_whole(p: &Path) -> Option<String> {
    let s = read(p)?;
    (std::fs::metadata(p).ok()?.len() == s.len() as u64).then_some(s)
}

/// `stat`'s size through the mount: answered from the kernel's cache while it is valid.
fn size(p: &Path) -> Option<u64> {
    std::fs::metadata(p).ok().map(|m| m.len())
}

/// Host edits of every kind, each polled through the mount with `stat` only (a read would open
/// the file, and an open reaches seamfs whatever the kernel cached); how long each took to show,
/// None when it did not in 2 s. What showed is then read whole.
fn host_edits_seen(r: &Rig) -> Vec<(&'static str, Option<Duration>)> {
    let box_a = r.m.join("src/a.txt");
    let box_b = r.m.join("src/b.txt");
    // The box has looked at everything first, so its kernel holds entries and attributes.
    assert_eq!(read(&box_a).as_deref(), Some("one\n"));
    assert!(read(&box_b).is_none());
    let wait = Duration::from_secs(2);
    let mut seen = Vec::new();
    std::fs::write(r.host("src/b.txt"), "created\n").unwrap();
    seen.push(("create", within(wait, || size(&box_b) == Some(8))));
    std::fs::write(r.host("src/a.txt.tmp"), "two, by rename\n").unwrap();
    std::fs::rename(r.host("src/a.txt.tmp"), r.host("src/a.txt")).unwrap();
    seen.push(("replace by rename", within(wait, || size(&box_a) == Some(15))));
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(r.host("src/a.txt")).unwrap();
        f.write_all(b"three, in place\n").unwrap();
    }
    seen.push(("append in place", within(wait, || size(&box_a) == Some(31))));
    std::fs::remove_file(r.host("src/b.txt")).unwrap();
    seen.push(("delete", within(wait, || size(&box_b).is_none())));
    if seen.iter().all(|(_, t)| t.is_some()) {
        assert_eq!(read_whole(&box_a).as_deref(), Some("two, by rename\nthree, in place\n"));
    }
    seen
}

#[test]
fn host_edits_show_in_the_box_at_once_with_the_feed_and_not_without() {
    let with = host_edits_seen(&Rig::new(true));
    let without = host_edits_seen(&Rig::new(false));
    println!("host edit seen through seamfs --ttl {TTL}: with the feed {with:?}; without (control) {without:?}");
    for (what, t) in &with {
        assert!(t.is_some(), "with the feed the box never saw the host's {what} (2 s): {with:?}");
    }
    // Without the feed a host create hides behind a negative entry and an append behind cached
    // attributes, for the whole TTL.
    assert!(without[0].1.is_none() && without[2].1.is_none(), "the control (no feed, TTL {TTL} s) should answer stat from its stale cache: {without:?}");
}

/// An inotify watch on a directory through the mount; events as (mask, name).
struct Watch {
    fd: i32,
}

impl Watch {
    fn new(dir: &Path) -> Watch {
        // SAFETY: plain syscalls; the fd is closed in Drop.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        assert!(fd >= 0, "inotify_init1");
        let c = CString::new(dir.as_os_str().as_bytes()).unwrap();
        // SAFETY: valid fd and C string.
        let wd = unsafe { libc::inotify_add_watch(fd, c.as_ptr(), libc::IN_ALL_EVENTS) };
        assert!(wd >= 0, "inotify_add_watch {}", dir.display());
        Watch { fd }
    }

    /// Events within `wait`.
    fn events(&self, wait: Duration) -> Vec<(u32, String)> {
        let mut out = Vec::new();
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline {
            let mut buf = [0u8; 4096];
            // SAFETY: valid fd and buffer.
            let n = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            let mut i = 0;
            while i + 16 <= n as usize {
                let mask = u32::from_ne_bytes(buf[i + 4..i + 8].try_into().unwrap());
                let len = u32::from_ne_bytes(buf[i + 12..i + 16].try_into().unwrap()) as usize;
                let name = String::from_utf8_lossy(&buf[i + 16..i + 16 + len]).trim_end_matches('\0').to_string();
                out.push((mask, name));
                i += 16 + len;
            }
        }
        out
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // SAFETY: our fd.
        unsafe { libc::close(self.fd) };
    }
}

/// Host create, modify, rename and delete under a box watch; the events the box got.
fn box_watch_events(r: &Rig) -> Vec<(&'static str, Vec<(u32, String)>)> {
    let _ = std::fs::read_dir(r.m.join("src")).unwrap().count();
    let _ = read(&r.m.join("src/a.txt"));
    let w = Watch::new(&r.m.join("src"));
    let wait = Duration::from_millis(500);
    let mut got = Vec::new();
    std::fs::write(r.host("src/new.txt"), "n\n").unwrap();
    got.push(("create", w.events(wait)));
    std::fs::write(r.host("src/a.txt"), "changed\n").unwrap();
    got.push(("modify", w.events(wait)));
    let _ = read(&r.m.join("src/new.txt"));
    std::fs::rename(r.host("src/new.txt"), r.host("src/moved.txt")).unwrap();
    got.push(("rename", w.events(wait)));
    let _ = read(&r.m.join("src/moved.txt"));
    std::fs::remove_file(r.host("src/moved.txt")).unwrap();
    got.push(("delete", w.events(wait)));
    got
}

fn has(events: &[(u32, String)], mask: u32, name: &str) -> bool {
    events.iter().any(|(m, n)| m & mask != 0 && n == name)
}

#[test]
fn box_watchers_fire_on_host_changes_with_the_feed_and_not_without() {
    let with = box_watch_events(&Rig::new(true));
    let without = box_watch_events(&Rig::new(false));
    println!("box inotify events: with the feed {with:?}; without (control) {without:?}");
    let ev = |what: &str| &with.iter().find(|(w, _)| *w == what).unwrap().1;
    assert!(has(ev("create"), libc::IN_ATTRIB, "new.txt"), "no event for a host create: {with:?}");
    assert!(has(ev("modify"), libc::IN_ATTRIB, "a.txt"), "no event for a host modify: {with:?}");
    assert!(has(ev("rename"), libc::IN_DELETE, "new.txt") && has(ev("rename"), libc::IN_ATTRIB, "moved.txt"), "rename: {with:?}");
    assert!(has(ev("delete"), libc::IN_DELETE, "moved.txt"), "no IN_DELETE for a host delete: {with:?}");
    // (The test's own reads show as open/access/close: those are not news of the host.)
    let news = libc::IN_ATTRIB | libc::IN_CREATE | libc::IN_DELETE | libc::IN_MODIFY | libc::IN_MOVED_FROM | libc::IN_MOVED_TO;
    assert!(without.iter().all(|(_, e)| e.iter().all(|(m, _)| m & news == 0)), "the control (no feed) should hear nothing: {without:?}");
}

#[test]
fn a_feed_that_dies_puts_the_work_tree_back_on_the_share_ttl() {
    // The share's TTL is 1 s; the feed's is 60 s.
    let mut r = Rig::with_ttl(true, "1");
    let f = r.m.join("src/a.txt");
    assert_eq!(std::fs::metadata(&f).unwrap().len(), 4, "cached while the feed is live (TTL 60 s)");
    drop(r.seamd.take());
    r.wait_for_log("change feed down", Duration::from_secs(10));
    // seamd is gone: no message will come for this edit. Only the fallback to the 1 s TTL
    // (with everything cached on the feed's word invalidated) lets the box see it.
    std::fs::write(r.host("src/a.txt.tmp"), "after, longer\n").unwrap();
    std::fs::rename(r.host("src/a.txt.tmp"), r.host("src/a.txt")).unwrap();
    // `stat` alone: answered from the kernel's cache, which only the fallback invalidates.
    let t = within(Duration::from_secs(5), || std::fs::metadata(&f).is_ok_and(|m| m.len() == 14));
    println!("after the feed died, a host edit showed in the box in {t:?} (share TTL 1 s)");
    assert!(t.is_some(), "a host edit after the feed died stayed stale past the share's TTL");
}

#[test]
fn an_overflow_invalidates_what_the_box_cached_on_the_feed_s_word() {
    // Every burst overflows (seamd's test hook): no message will ever name the edited file, so
    // only the fallback's invalidation on `overflow` can show the edit; the share's TTL is 1 s.
    let r = Rig::build(true, "1", &[("SEAMD_FEED_MAX_BURST", "0")], |b| {
        std::fs::create_dir(b.join("src")).unwrap();
        std::fs::write(b.join("src/a.txt"), "one\n").unwrap();
    });
    let f = r.m.join("src/a.txt");
    assert_eq!(size(&f), Some(4), "cached while the feed is live (FEED_TTL)");
    std::fs::write(r.host("src/a.txt.tmp"), "after an overflow\n").unwrap();
    std::fs::rename(r.host("src/a.txt.tmp"), r.host("src/a.txt")).unwrap();
    // `stat` alone: answered from the kernel's cache, which only the fallback invalidates.
    let t = within(Duration::from_secs(5), || size(&f) == Some(18));
    println!("after an overflow, a host edit showed in the box in {t:?} (share TTL 1 s; FEED_TTL without the fallback)");
    assert!(r.m.log().contains("change feed lost messages"), "seamfs never saw the overflow; log:\n{}", r.m.log());
    assert!(t.is_some_and(|t| t <= Duration::from_secs(2)), "a host edit lost in an overflow stayed stale past the share's TTL: {t:?}");
    assert!(r.m.log().contains("change feed live") && !r.m.log().contains("change feed down"), "an overflow keeps the feed live");
}

/// Commits a repository with two branches in `b` (on `main`), then leaves work in progress that
/// both branches carry: an untracked file, a tracked file edited, and a file staged.
fn two_branches(b: &Path) {
    let git = seam_tests::Git::new();
    git.run(b, &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(b.join("dir")).unwrap();
    for (f, text) in [("keep.txt", "kept\n"), ("changes.txt", "main\n"), ("gone.txt", "only on main\n"), ("dir/sub.txt", "sub\n"), ("staged.txt", "s\n")] {
        std::fs::write(b.join(f), text).unwrap();
    }
    git.run(b, &["add", "-A"]);
    git.run(b, &["commit", "-q", "-m", "main"]);
    git.run(b, &["checkout", "-q", "-b", "other"]);
    std::fs::write(b.join("changes.txt"), "the other branch's version, longer\n").unwrap();
    std::fs::remove_file(b.join("gone.txt")).unwrap();
    std::fs::remove_dir_all(b.join("dir")).unwrap();
    std::fs::create_dir_all(b.join("dir2")).unwrap();
    std::fs::write(b.join("dir2/new.txt"), "only on other\n").unwrap();
    git.run(b, &["add", "-A"]);
    git.run(b, &["commit", "-q", "-m", "other"]);
    git.run(b, &["checkout", "-q", "main"]);
    std::fs::write(b.join("untracked.txt"), "u\n").unwrap();
    std::fs::write(b.join("keep.txt"), "kept, edited in the work tree\n").unwrap();
    std::fs::write(b.join("staged.txt"), "staged change\n").unwrap();
    git.run(b, &["add", "staged.txt"]);
}

/// `git status` (porcelain v2, with the branch) on the host and in the box right after a host
/// `git checkout other`, the box having run it (and looked at every name) just before.
fn status_after_host_checkout(feed: bool) -> (String, String) {
    let r = Rig::build(feed, TTL, &[], two_branches);
    let git = seam_tests::Git::new();
    let status = ["status", "--porcelain=v2", "--branch", "--untracked-files=all"];
    let before = git.run(&r.m.join(""), &status);
    assert_eq!(before, git.run(&r.host(""), &status), "the box and the host agree before the checkout");
    // The box's kernel now holds the whole tree (and the names only `other` has as negative
    // entries).
    for f in ["gone.txt", "dir/sub.txt", "changes.txt", "dir2/new.txt"] {
        let _ = std::fs::symlink_metadata(r.m.join(f));
    }
    git.run(&r.host(""), &["checkout", "-q", "other"]);
    // The box first, at once: nothing waits for the feed's messages.
    let boxed = git.run(&r.m.join(""), &status);
    let host = git.run(&r.host(""), &status);
    assert!(host.contains("# branch.head other") && host.contains("untracked.txt") && host.contains("keep.txt") && host.contains("staged.txt"), "the host's status: {host}");
    if feed {
        assert_eq!(git.run(&r.m.join(""), &["diff"]), git.run(&r.host(""), &["diff"]), "the box's diff after a host checkout differs from the host's");
    }
    (host, boxed)
}

#[test]
fn git_status_right_after_a_host_checkout_shows_what_the_host_s_shows() {
    // With the feed live the work tree is cached for FEED_TTL, and for --ttl 30 in the control:
    // only the feed's messages can tell the box's kernel that the checkout rewrote the tree.
    let (host, boxed) = status_after_host_checkout(true);
    println!("after a host checkout, host git status:\n{host}\nbox git status (feed):\n{boxed}");
    assert_eq!(boxed, host, "the box's git status right after a host checkout differs from the host's");
    let (host, control) = status_after_host_checkout(false);
    println!("box git status (control, no feed):\n{control}");
    assert_ne!(control, host, "the control (no feed, TTL {TTL} s) should show the tree it cached before the checkout");
}

#[test]
fn a_forged_feed_changes_nothing_and_is_logged() {
    let backing = TempDir::new("feed-forged-backing");
    let mnt = TempDir::new("feed-forged-mnt");
    let sock_dir = TempDir::new("feed-forged-sock");
    std::fs::write(backing.join("keep"), "kept\n").unwrap();
    let sock = sock_dir.join("feed.sock");
    let listener = UnixListener::bind(&sock).unwrap();
    let feed = format!("unix:{}", sock.display());
    let m = Mount::seamfs(backing.path(), mnt.path(), &["--ttl", TTL, "--feed", &feed]);
    let (mut conn, _) = listener.accept().expect("seamfs connects to the feed");
    use std::io::Write;
    let mut lines: Vec<u8> = b"SEAMFEED 1\n1 c ../../etc/passwd\n2 c /etc/passwd\n3 m a/./b\n4 c %00\n".to_vec();
    lines.extend(vec![b'x'; 20_000]);
    lines.extend(b"\n5 r keep\n6 beat\n");
    conn.write_all(&lines).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !m.log().contains("dropped a malformed change-feed line") {
        assert!(Instant::now() < deadline, "seamfs never said it dropped the forged lines; log:\n{}", m.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    // A forged removal of a file the share has hides nothing.
    assert_eq!(read(&m.join("keep")).as_deref(), Some("kept\n"));
    assert!(backing.join("keep").exists());
    assert!(m.log().contains("change feed live"), "well-formed lines still count: {}", m.log());
}

#[test]
fn a_host_edit_right_after_the_box_s_own_is_seen_within_the_share_ttl() {
    let r = Rig::new(true);
    let f = r.m.join("src/a.txt");
    // The box writes; the host's watcher sees that write through the share and sends it back
    // (an echo, ECHO_WINDOW): then the host writes the same file at once.
    std::fs::write(&f, "box\n").unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(size(&f), Some(4));
    std::fs::write(r.host("src/a.txt.tmp"), "host, right after\n").unwrap();
    std::fs::rename(r.host("src/a.txt.tmp"), r.host("src/a.txt")).unwrap();
    let t = within(Duration::from_secs(3), || size(&f) == Some(18));
    println!("host edit 50 ms after the box's own write seen by stat in {t:?} (work-tree TTL {TTL} s, feed live)");
    assert!(t.is_some(), "a host edit inside the echo window stayed stale (the kernel's copy must still be dropped)");
    assert_eq!(read(&f).as_deref(), Some("host, right after\n"));
}

/// `seam-lab feed` (the feed's measurements) on a few edits: every target reports, the feed's
/// target misses nothing, and a box watcher on the raw share or on seamfs without the feed hears
/// of no host change (figures only: no latency is asserted).
#[test]
fn seam_lab_feed_reports_the_three_targets() {
    let r = seam_tests::run::run(Command::new(seam_tests::bins::seam_lab()).args(["feed", "latency", "--edits", "8", "--gap-ms", "10", "--json"]));
    assert_eq!(r.code(), Some(0), "seam-lab feed latency did not run:\n{r}");
    let j: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap_or_else(|e| panic!("no JSON report ({e}):\n{r}"));
    for t in ["share", "seamfs", "seamfs-feed"] {
        let all = &j["latency"]["targets"][t]["all"];
        assert_eq!(all["n"], 8, "{t}: {all}");
        assert_eq!(all["missed"], 0, "{t} never showed some host edits (within 5 s): {all}");
    }
    let r = seam_tests::run::run(Command::new(seam_tests::bins::seam_lab()).args(["feed", "watch", "--changes", "3", "--gap-ms", "10", "--json"]));
    assert_eq!(r.code(), Some(0), "seam-lab feed watch did not run:\n{r}");
    let j: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap_or_else(|e| panic!("no JSON report ({e}):\n{r}"));
    let missed = |t: &str| j["watch"]["targets"][t]["all"]["missed"].as_u64().unwrap_or_else(|| panic!("no watch figures for {t}: {j}"));
    println!("box watcher misses of 12 host changes: share {}, seamfs {}, seamfs-feed {}", missed("share"), missed("seamfs"), missed("seamfs-feed"));
    assert_eq!(missed("seamfs-feed"), 0, "the feed's watcher missed host changes: {}", j["watch"]);
    assert_eq!((missed("share"), missed("seamfs")), (12, 12), "without the feed a box watcher should hear of no host change: {}", j["watch"]);
}

/// seamd names changes relative to the checkout it watches, and seamfs applies them relative to
/// its lower's root. A mount of a parent of that checkout gets names it does not have (measured
/// on a 20,000-file checkout: three quarters of the share's LOOKUPs were such names at the
/// root, and host edits reached no box tool): it says so when the feed goes live. A mount of
/// the checkout itself does not.
#[test]
fn a_mount_of_another_directory_than_the_watched_checkout_says_so() {
    const SAID: &str = "this mount's root has no .git";
    for over_checkout in [false, true] {
        let backing = TempDir::new("feed-root-backing");
        let mnt = TempDir::new("feed-root-mnt");
        let sock_dir = TempDir::new("feed-root-sock");
        let checkout = backing.join("repo");
        std::fs::create_dir(&checkout).expect("mkdir the checkout");
        let sock = sock_dir.join("feed.sock");
        let seamd = Seamd::start(&checkout, &sock, &[]);
        let lower = if over_checkout { checkout.clone() } else { backing.path().to_path_buf() };
        let feed = format!("unix:{}", sock.display());
        let m = Mount::seamfs(&lower, mnt.path(), &["--ttl", TTL, "--feed", &feed]);
        let live = within(Duration::from_secs(10), || m.log().contains("change feed live"));
        // The check follows the "live" line on the same thread: a moment covers it.
        std::thread::sleep(Duration::from_millis(300));
        let log = m.log();
        m.unmount();
        drop(seamd);
        assert!(live.is_some(), "the feed never went live; log:\n{log}");
        if over_checkout {
            assert!(!log.contains(SAID), "a mount of the watched checkout was told it is not one:\n{log}");
        } else {
            assert!(log.contains(SAID), "a mount of the checkout's parent was not told the feed's names are not its own:\n{log}");
        }
    }
}

/// Runs `git init -q` from a shell whose cwd is `dir`, entered before `between` runs: the
/// shell's `getcwd` must still name the directory after whatever `between` does.
fn git_init_after(dir: &Path, between: impl FnOnce()) -> std::process::Output {
    use std::io::{BufRead, Write};
    let mut sh = Command::new("sh")
        .arg("-c")
        .arg("cd \"$1\" && echo in && read go && exec git init -q")
        .arg("sh")
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sh");
    let mut line = String::new();
    std::io::BufReader::new(sh.stdout.as_mut().expect("stdout")).read_line(&mut line).expect("read the shell's line");
    assert_eq!(line, "in\n", "the shell did not enter {}", dir.display());
    between();
    writeln!(sh.stdin.as_mut().expect("stdin"), "go").expect("tell the shell to go on");
    sh.wait_with_output().expect("wait for sh")
}

/// A directory the feed reports changed (the echo of the box's own mkdir, or the host touching
/// it) is still the directory at its name: its entry is kept, so a box process with its cwd
/// there still has one. Dropping the entry unhashed the cwd's dentry and `git init` there failed
/// ("unable to get current working directory"), as `seam-lab small` did over the feed: the echo
/// half fails without the fix. For a host change the feed's own poke (`raise_change`, a
/// `utimensat` through the mount) looks the path up again, which rehashes the dentry, so that
/// half passed before too; it stays as the guard of that path.
#[test]
fn a_directory_the_feed_reports_stays_the_cwd_of_box_processes_in_it() {
    let r = Rig::new(true);
    // The host makes a directory and, once the box is in it, touches it (IN_ATTRIB: a change
    // the feed sends, outside the echo window of anything the box did).
    std::fs::create_dir(r.host("hostdir")).unwrap();
    let inside = r.m.join("hostdir");
    assert!(within(Duration::from_secs(3), || inside.is_dir()).is_some(), "the host's new directory never showed");
    let out = git_init_after(&inside, || {
        std::fs::set_permissions(r.host("hostdir"), std::os::unix::fs::PermissionsExt::from_mode(0o750)).unwrap();
        // The feed's change reaches seamfs, which applies it (and its second pass, IN_FLIGHT).
        // Nothing here looks the path up meanwhile: a lookup would find the directory again
        // and rehash a dropped dentry, hiding the loss.
        std::thread::sleep(Duration::from_secs(1));
    });
    assert!(out.status.success(), "git init in a directory the host touched: {}", String::from_utf8_lossy(&out.stderr));
    // The chmod shows through attributes kept for the 30 s TTL only because the feed dropped them.
    let mode = std::fs::metadata(&inside).map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777);
    assert_eq!(mode.ok(), Some(0o750), "the host's chmod never reached the box: the feed applied nothing");
    // The box makes a directory and goes in at once: the echo of its mkdir comes back.
    let mine = r.m.join("boxdir");
    std::fs::create_dir(&mine).unwrap();
    let out = git_init_after(&mine, || std::thread::sleep(Duration::from_millis(500)));
    assert!(out.status.success(), "git init in a directory the box just made: {}", String::from_utf8_lossy(&out.stderr));
    assert!(r.host("boxdir/.git/HEAD").is_file() && r.host("hostdir/.git/HEAD").is_file());
}

/// Lost messages (an overflow: every burst overflows here) invalidate everything cached on the
/// feed's word, but a directory the share still holds at its name keeps its entry while the
/// feed stays live: a box shell in it still has a cwd (before, `git init` there failed with
/// "unable to get current working directory"). A directory the host replaced in the same burst
/// is dropped: the box sees the new one's files.
#[test]
fn lost_messages_keep_the_cwd_of_box_processes_and_drop_a_replaced_directory() {
    let r = Rig::build(true, "1", &[("SEAMD_FEED_MAX_BURST", "0")], |b| {
        for d in ["src", "docs"] {
            std::fs::create_dir(b.join(d)).unwrap();
            std::fs::write(b.join(d).join("a.txt"), "one\n").unwrap();
        }
    });
    let (src, docs) = (r.m.join("src"), r.m.join("docs"));
    assert_eq!(size(&src.join("a.txt")), Some(4));
    assert_eq!(size(&docs.join("a.txt")), Some(4));
    let overflows = || r.m.log().matches("change feed lost messages").count();
    let before = overflows();
    let out = git_init_after(&src, || {
        // The host replaces docs/ and edits a file: the burst overflows.
        std::fs::rename(r.host("docs"), r.host("docs.old")).unwrap();
        std::fs::create_dir(r.host("docs")).unwrap();
        std::fs::write(r.host("docs/b.txt"), "new\n").unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while overflows() == before {
            assert!(Instant::now() < deadline, "seamfs never saw the overflow; log:\n{}", r.m.log());
            std::thread::sleep(Duration::from_millis(20));
        }
        // Its second pass (IN_FLIGHT) too; nothing here looks `src` up meanwhile.
        std::thread::sleep(Duration::from_millis(500));
    });
    assert!(out.status.success(), "git init in a directory kept through an overflow: {}", String::from_utf8_lossy(&out.stderr));
    assert!(r.host("src/.git/HEAD").is_file());
    let t = within(Duration::from_secs(3), || docs.join("b.txt").is_file() && !docs.join("a.txt").exists());
    assert!(t.is_some(), "a directory the host replaced still showed the old one after an overflow");
}

/// A directory the host moves onto another's name (an empty one, which `rename` replaces) is a
/// new directory at that name, even though the box knows it (by its old name): the box sees the
/// moved directory's files there and the old name gone. (A guard of the outcome: seamfs resolves
/// children by path, so a kept entry of the replaced directory would still list the new files;
/// the consumer drops it anyway, since the node at the name was known by another name.)
#[test]
fn a_directory_moved_onto_another_s_name_replaces_it_in_the_box() {
    let r = Rig::build(true, TTL, &[], |b| {
        std::fs::create_dir_all(b.join("old")).unwrap();
        std::fs::write(b.join("old/file"), "moved\n").unwrap();
        std::fs::create_dir(b.join("d")).unwrap();
    });
    let (old, d) = (r.m.join("old"), r.m.join("d"));
    // The box knows both directories (entries kept for FEED_TTL).
    assert!(old.join("file").is_file() && d.is_dir() && !d.join("file").exists());
    std::fs::rename(r.host("old"), r.host("d")).unwrap();
    let t = within(Duration::from_secs(3), || d.join("file").is_file() && !old.exists());
    println!("a directory the host moved onto another's name showed in {t:?} (work-tree TTL {TTL} s, feed live)");
    assert!(t.is_some(), "the box still saw the replaced (empty) directory at d/, or old/ at its old name");
}

/// A feed that goes down drops every entry cached on its word, directories too (one kept would
/// carry the feed's hour-long TTL with no feed left to end it). Each directory is then looked up
/// again through the mount, which rehashes the kernel's dropped dentry of it: a box shell inside
/// keeps its cwd (before, `git init` there failed with "unable to get current working
/// directory"), and the entry is back on the share's TTL.
#[test]
fn a_feed_that_goes_down_leaves_box_shells_their_cwd() {
    let mut r = Rig::with_ttl(true, "1");
    let src = r.m.join("src");
    assert_eq!(size(&src.join("a.txt")), Some(4));
    let out = git_init_after(&src, || {
        drop(r.seamd.take());
        r.wait_for_log("change feed down", Duration::from_secs(10));
        // Nothing here looks `src` up: only seamfs's own look after the fallback may.
        std::thread::sleep(Duration::from_millis(300));
    });
    assert!(out.status.success(), "git init in a directory after the feed went down: {}", String::from_utf8_lossy(&out.stderr));
    assert!(r.host("src/.git/HEAD").is_file());
}
