//! Freshness through the share emulator: host commits seen from the box.
//!
//! The backing dir is the host; `seam-lab share` over it is the box's view of the share; seamfs
//! over a second emulator on the same backing dir is the box's view through seamfs (a separate
//! emulator, so seamfs's refreshes do not freshen the control's kernel cache). Every read is a real
//! `git rev-parse HEAD` or a real read through the mounts.
//!
//! Needs `seamfs` and `seam-lab` built in the same profile (`cargo build -p seamfs -p seam-lab`),
//! or `SEAM_BIN_DIR` pointing at them. Helpers are private to this file.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------------
// Helpers: binaries, temp dirs, mount guards, git.

use seam_tests::bins::bin;

/// Mount points at or below `dir`, from /proc/self/mounts.
fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mounts").expect("read /proc/self/mounts");
    text.lines()
        .filter_map(|l| l.split(' ').nth(1))
        .map(|m| PathBuf::from(m.replace("\\040", " ")))
        .filter(|m| m.starts_with(dir))
        .collect()
}

/// A unique directory under /tmp, removed on drop unless something is still mounted below it.
struct Tmp(PathBuf);

impl Tmp {
    fn new(tag: &str) -> Tmp {
        static N: AtomicU64 = AtomicU64::new(0);
        let p = PathBuf::from(format!("/tmp/seam-fresh-{}-{}-{tag}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir(&p).unwrap_or_else(|e| panic!("create temp dir {}: {e}", p.display()));
        Tmp(p)
    }

    fn dir(&self, name: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::create_dir(&p).unwrap_or_else(|e| panic!("create dir {}: {e}", p.display()));
        p
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let left = mounts_under(&self.0);
        if !left.is_empty() {
            // Removing now would delete through the mount.
            eprintln!("leaving {}: still mounted below: {left:?}", self.0.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A daemonised mount, unmounted on drop (also when the test panics).
struct Mounted {
    mnt: PathBuf,
    log: PathBuf,
}

impl Mounted {
    /// Runs `program ARGS --log LOG`, which returns once the mount answers.
    fn start(program: &Path, args: &[&str], mnt: &Path, log: PathBuf) -> Mounted {
        let out = Command::new(program)
            .args(args)
            .arg("--log")
            .arg(&log)
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", program.display()));
        let guard = Mounted { mnt: mnt.to_path_buf(), log };
        assert!(
            out.status.success(),
            "{} {args:?} failed ({}): {}\nlog:\n{}",
            program.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr),
            guard.log()
        );
        assert!(mounts_under(mnt).iter().any(|m| m == mnt), "{} exited 0 but {} is not mounted", program.display(), mnt.display());
        guard
    }

    /// `seam-lab share BACKING MNT EXTRA...`.
    fn share(backing: &Path, mnt: &Path, extra: &[&str], log: PathBuf) -> Mounted {
        let mut args = vec!["share", s(backing), s(mnt)];
        args.extend_from_slice(extra);
        Mounted::start(&bin("seam-lab"), &args, mnt, log)
    }

    /// `seamfs mount LOWER MNT`.
    fn seamfs(lower: &Path, mnt: &Path, log: PathBuf) -> Mounted {
        Mounted::start(&bin("seamfs"), &["mount", s(lower), s(mnt)], mnt, log)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let c = CString::new(self.mnt.as_os_str().as_encoded_bytes()).expect("mountpoint without NUL");
        // SAFETY: valid C string; a busy mount is detached lazily so nothing is left behind.
        unsafe {
            if libc::umount2(c.as_ptr(), 0) != 0 && libc::umount2(c.as_ptr(), libc::MNT_DETACH) != 0 {
                eprintln!("unmount {}: {}", self.mnt.display(), std::io::Error::last_os_error());
            }
        }
    }
}

fn s(p: &Path) -> &str {
    p.to_str().expect("temp paths are UTF-8")
}

/// git in `dir` with a fixed identity and no global or system config.
fn git_cmd(dir: &Path) -> Command {
    let mut c = Command::new("git");
    c.arg("-C")
        .arg(dir)
        .args(["-c", "user.name=seam-test", "-c", "user.email=test@seamfs.invalid"])
        .args(["-c", "commit.gpgsign=false", "-c", "gc.auto=0", "-c", "maintenance.auto=false"])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env_remove("GIT_DIR")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_WORK_TREE");
    c
}

/// git's trimmed stdout, or its status and stderr.
fn try_git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = git_cmd(dir).args(args).output().map_err(|e| format!("run git {args:?} in {}: {e}", dir.display()))?;
    if !out.status.success() {
        return Err(format!("git {args:?} in {}: {}: {}", dir.display(), out.status, String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[track_caller]
fn git(dir: &Path, args: &[&str]) -> String {
    try_git(dir, args).unwrap_or_else(|e| panic!("{e}"))
}

/// A host repository with one commit of a tracked file.
fn host_repo(dir: &Path) {
    git(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("host.txt"), "0\n").expect("write host.txt");
    git(dir, &["add", "host.txt"]);
    git(dir, &["commit", "-q", "-m", "initial"]);
}

/// One host commit in the backing dir; returns the new HEAD.
fn host_commit(dir: &Path, n: usize) -> String {
    let f = dir.join("host.txt");
    std::fs::write(&f, format!("{n}\n")).unwrap_or_else(|e| panic!("write {}: {e}", f.display()));
    git(dir, &["commit", "-q", "-a", "-m", &format!("host {n}")]);
    git(dir, &["rev-parse", "HEAD"])
}

/// The box's views of one host repository. Fields drop in order: seamfs before the emulator
/// under it, every mount before the temp dir.
struct Views {
    seamfs: Mounted,
    _under_seamfs: Mounted,
    raw: Mounted,
    host: PathBuf,
    _tmp: Tmp,
}

impl Views {
    /// A host repository, the control emulator over it, and seamfs over a second emulator.
    fn new(tag: &str, share_args: &[&str]) -> Views {
        let tmp = Tmp::new(tag);
        let host = tmp.dir("host");
        host_repo(&host);
        let (raw_mnt, under_mnt, sfs_mnt) = (tmp.dir("share"), tmp.dir("share-under-seamfs"), tmp.dir("seamfs"));
        let raw = Mounted::share(&host, &raw_mnt, share_args, tmp.0.join("share.log"));
        let under = Mounted::share(&host, &under_mnt, share_args, tmp.0.join("share-under-seamfs.log"));
        let seamfs = Mounted::seamfs(&under_mnt, &sfs_mnt, tmp.0.join("seamfs.log"));
        Views { seamfs, _under_seamfs: under, raw, host, _tmp: tmp }
    }
}

/// What a read of the branch's ref returned, against the truth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Fresh,
    Old,
    Missing,
    Other,
}

fn judge(read: &Result<String, String>, truth: &str, earlier: &[String]) -> Seen {
    match read {
        Ok(v) if v == truth => Seen::Fresh,
        Ok(v) if earlier.contains(v) => Seen::Old,
        Ok(_) => Seen::Other,
        Err(_) => Seen::Missing,
    }
}

/// The ref file itself, read through a mount (no git in between: ENOENT shows as missing).
fn read_ref(mnt: &Path) -> Result<String, String> {
    let p = mnt.join(".git/refs/heads/main");
    std::fs::read_to_string(&p).map(|s| s.trim().to_string()).map_err(|e| format!("read {}: {e}", p.display()))
}

// ---------------------------------------------------------------------------------------------
// Tests.

/// (a) 200 host commits; after each, HEAD read through seamfs is never stale, through the raw
/// share (the control) it is.
#[test]
fn seamfs_reads_every_host_commit_fresh_where_the_raw_share_is_stale() {
    const COMMITS: usize = 200;
    let v = Views::new("reads", &[]);
    // The box has looked at the repository, as a prompt or an IDE does.
    git(v.raw.mnt.as_path(), &["rev-parse", "HEAD"]);
    git(v.seamfs.mnt.as_path(), &["rev-parse", "HEAD"]);
    let (mut raw_stale, mut sfs_stale) = (0usize, 0usize);
    let mut sfs_failures = Vec::new();
    for n in 1..=COMMITS {
        let truth = host_commit(&v.host, n);
        let raw = try_git(&v.raw.mnt, &["rev-parse", "HEAD"]);
        let sfs = try_git(&v.seamfs.mnt, &["rev-parse", "HEAD"]);
        if raw.as_deref() != Ok(truth.as_str()) {
            raw_stale += 1;
        }
        if sfs.as_deref() != Ok(truth.as_str()) {
            sfs_stale += 1;
            sfs_failures.push(format!("commit {n}: truth {truth}, seamfs read {sfs:?}"));
        }
    }
    eprintln!("stale reads of HEAD after {COMMITS} host commits: raw share {raw_stale}, seamfs {sfs_stale}");
    assert_eq!(sfs_stale, 0, "seamfs read stale HEADs:\n{}\nseamfs log:\n{}", sfs_failures.join("\n"), v.seamfs.log());
    assert!(raw_stale > 0, "the control read every HEAD fresh: the emulator is not stale, so the test shows nothing");
}

/// (b) DESIGN.md's facts through the emulator: a name replaced by rename reads old for about the
/// TTL; a deleted one reads old, then ENOENT; a negative entry hides a new file for the TTL.
#[test]
fn the_share_serves_replaced_deleted_and_new_names_as_the_facts_say() {
    const TTL: Duration = Duration::from_secs(2);
    let tmp = Tmp::new("facts");
    let host = tmp.dir("host");
    host_repo(&host);
    let mnt = tmp.dir("share");
    let share = Mounted::share(&host, &mnt, &["--entry-ttl", "2", "--attr-ttl", "2", "--negative-ttl", "2"], tmp.0.join("share.log"));
    let (replaced, deleted, new) = (".git/probe-replaced", ".git/probe-deleted", ".git/probe-new");
    std::fs::write(host.join(replaced), "old\n").expect("write probe-replaced");
    std::fs::write(host.join(deleted), "old\n").expect("write probe-deleted");
    // The box looks all three up: two positive entries and one negative entry are cached now.
    assert_eq!(std::fs::read_to_string(mnt.join(replaced)).expect("read probe-replaced through the share"), "old\n");
    assert_eq!(std::fs::read_to_string(mnt.join(deleted)).expect("read probe-deleted through the share"), "old\n");
    assert!(!mnt.join(new).exists(), "probe-new must not exist yet");

    let t0 = Instant::now();
    std::fs::write(host.join(".git/probe-replaced.tmp"), "new\n").expect("write the replacement");
    std::fs::rename(host.join(".git/probe-replaced.tmp"), host.join(replaced)).expect("rename over probe-replaced");
    std::fs::remove_file(host.join(deleted)).expect("remove probe-deleted");
    std::fs::write(host.join(new), "new\n").expect("create probe-new");

    let (mut replaced_at, mut deleted_at, mut new_at) = (None, None, None);
    let mut deleted_read_old = false;
    while t0.elapsed() < TTL * 3 && (replaced_at.is_none() || deleted_at.is_none() || new_at.is_none()) {
        let now = t0.elapsed();
        if replaced_at.is_none() {
            match std::fs::read_to_string(mnt.join(replaced)).as_deref() {
                Ok("new\n") => replaced_at = Some(now),
                Ok("old\n") => {}
                other => panic!("probe-replaced read {other:?} at {now:?}"),
            }
        }
        if deleted_at.is_none() {
            match std::fs::read_to_string(mnt.join(deleted)) {
                Ok(s) if s == "old\n" => deleted_read_old = true,
                Ok(s) => panic!("probe-deleted read {s:?} at {now:?}"),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => deleted_at = Some(now),
                Err(e) => panic!("probe-deleted: {e} at {now:?}"),
            }
        }
        if new_at.is_none() && mnt.join(new).exists() {
            new_at = Some(now);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!(
        "through the share (TTL {TTL:?}): replaced read old for {replaced_at:?}, deleted read old for {deleted_at:?} \
         then ENOENT, new hidden for {new_at:?}"
    );
    let about_ttl = |what: &str, d: Option<Duration>| {
        let d = d.unwrap_or_else(|| panic!("{what}: never changed within {:?}\nlog:\n{}", TTL * 3, share.log()));
        assert!(
            d >= TTL.mul_f64(0.8) && d <= TTL + Duration::from_secs(1),
            "{what}: stale for {d:?}, expected about the TTL ({TTL:?})"
        );
    };
    about_ttl("replaced name read old", replaced_at);
    about_ttl("deleted name read old", deleted_at);
    about_ttl("new name hidden by the negative entry", new_at);
    assert!(deleted_read_old, "the deleted name never read old: the share does not hold the old file as virtiofsd does");
}

/// (c) Injected faults show through the raw share; seamfs over the same faulty share reads fresh.
fn faults_show_raw_and_seamfs_reads_fresh(fault: &str, expect: Seen) {
    const ROUNDS: usize = 6;
    let v = Views::new(fault, &["--fault", fault, "--window", "1000", "--seed", "11"]);
    let mut earlier = vec![git(&v.host, &["rev-parse", "HEAD"])];
    read_ref(&v.raw.mnt).expect("the control reads the ref before any change");
    git(&v.seamfs.mnt, &["rev-parse", "HEAD"]);
    let mut raw_seen = Vec::new();
    let mut sfs_wrong = Vec::new();
    for n in 1..=ROUNDS {
        let truth = host_commit(&v.host, n);
        // Let both emulators' kernel entries expire: the next lookup is unforced, and the
        // emulator sees the replacement and starts a fault window.
        std::thread::sleep(Duration::from_millis(1150));
        raw_seen.push(judge(&read_ref(&v.raw.mnt), &truth, &earlier));
        let sfs_file = read_ref(&v.seamfs.mnt);
        let sfs_git = try_git(&v.seamfs.mnt, &["rev-parse", "HEAD"]);
        if sfs_file.as_deref() != Ok(truth.as_str()) || sfs_git.as_deref() != Ok(truth.as_str()) {
            sfs_wrong.push(format!("round {n}: truth {truth}, ref file {sfs_file:?}, rev-parse {sfs_git:?}"));
        }
        earlier.push(truth);
    }
    // Then host commits at every phase of the TTLs and windows: seamfs must never read stale.
    for (i, pause) in [0u64, 80, 400, 900].iter().cycle().take(20).enumerate() {
        let n = ROUNDS + 1 + i;
        let truth = host_commit(&v.host, n);
        let sfs_git = try_git(&v.seamfs.mnt, &["rev-parse", "HEAD"]);
        if sfs_git.as_deref() != Ok(truth.as_str()) {
            sfs_wrong.push(format!("commit {n}: truth {truth}, rev-parse {sfs_git:?}"));
        }
        std::thread::sleep(Duration::from_millis(*pause));
    }
    let shown = raw_seen.iter().filter(|s| **s == expect).count();
    eprintln!("--fault {fault}: raw share read {raw_seen:?} ({shown}/{ROUNDS} {expect:?}); seamfs stale {}", sfs_wrong.len());
    assert!(sfs_wrong.is_empty(), "seamfs read through the fault:\n{}\nseamfs log:\n{}", sfs_wrong.join("\n"), v.seamfs.log());
    assert!(shown > 0, "--fault {fault} never showed through the raw share: {raw_seen:?}\nlog:\n{}", v.raw.log());
}

#[test]
fn stale_missing_fault_shows_raw_and_seamfs_reads_fresh() {
    faults_show_raw_and_seamfs_reads_fresh("stale-missing", Seen::Missing);
}

#[test]
fn stale_old_fault_shows_raw_and_seamfs_reads_fresh() {
    faults_show_raw_and_seamfs_reads_fresh("stale-old", Seen::Old);
}

/// (d) The host rewriting HEAD by rename in a loop (detach, re-attach) never makes the repository
/// read as absent through seamfs: a node the kernel holds for HEAD that the host replaced
/// answers with the file now at the name, rather than ESTALE, which the kernel retries only once
/// (a second replacement during the retry reached git as "not a git repository").
#[test]
fn host_rewriting_head_never_hides_the_repository() {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    const READS: usize = 800;
    let v = Views::new("head-flips", &[]);
    let head = git(&v.host, &["rev-parse", "HEAD"]);
    git(&v.seamfs.mnt, &["rev-parse", "HEAD"]);
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (stop, host) = (stop.clone(), v.host.clone());
        std::thread::spawn(move || {
            let mut flips = 0usize;
            while !stop.load(Ordering::Relaxed) {
                git(&host, &["update-ref", "--no-deref", "HEAD", &head]);
                git(&host, &["symbolic-ref", "HEAD", "refs/heads/main"]);
                flips += 2;
            }
            flips
        })
    };
    let mut failures = Vec::new();
    for _ in 0..READS {
        if let Err(e) = try_git(&v.seamfs.mnt, &["rev-parse", "--git-dir", "HEAD"]) {
            failures.push(e);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let flips = flipper.join().expect("the host loop panicked");
    eprintln!("{READS} box reads during {flips} host rewrites of HEAD: {} failed", failures.len());
    assert!(flips > 100, "the host rewrote HEAD only {flips} times: the test shows nothing");
    assert!(
        failures.is_empty(),
        "{} of {READS} box reads failed while the host rewrote HEAD, first: {}\nseamfs log:\n{}",
        failures.len(),
        failures[0],
        v.seamfs.log()
    );
}

/// (e) Work-tree files read again keep the kernel's page cache only while they are unchanged:
/// a host change in place or by rename is read through seamfs once the share's TTL has passed,
/// however often the file was read before (the second read opens nothing on the lower).
#[test]
fn work_tree_pages_are_kept_only_while_the_file_is_unchanged() {
    let v = Views::new("page-cache", &[]);
    let (host, boxed) = (v.host.join("host.txt"), v.seamfs.mnt.join("host.txt"));
    let read = || std::fs::read_to_string(&boxed).unwrap_or_else(|e| panic!("read {}: {e}", boxed.display()));
    let settle = || std::thread::sleep(Duration::from_millis(1300));
    std::fs::write(&host, "one\n").expect("write host.txt");
    settle();
    assert_eq!(read(), "one\n");
    assert_eq!(read(), "one\n", "read again (from the page cache)");
    // In place, same size: only mtime and ctime tell.
    std::fs::write(&host, "two\n").expect("rewrite host.txt in place");
    settle();
    assert_eq!(read(), "two\n", "a change in place is read once the TTL passed");
    assert_eq!(read(), "two\n");
    let tmp = v.host.join("host.txt.new");
    std::fs::write(&tmp, "three\n").expect("write host.txt.new");
    std::fs::rename(&tmp, &host).expect("rename onto host.txt");
    settle();
    assert_eq!(read(), "three\n", "a file replaced by rename is read once the TTL passed");
    // Appended while the box holds it open: the open file reads on.
    let mut f = std::fs::File::open(&boxed).expect("open host.txt through seamfs");
    std::fs::OpenOptions::new().append(true).open(&host).and_then(|mut h| std::io::Write::write_all(&mut h, b"four\n")).expect("append");
    settle();
    let mut s = String::new();
    std::io::Read::read_to_string(&mut f, &mut s).expect("read the open file");
    assert!(s.starts_with("three\n"), "open file read {s:?}");
    assert_eq!(read(), "three\nfour\n");
}

/// Names from one `getdents64` call on `fd` with a small buffer (a few entries at a time, so a
/// listing can be read part way); empty at the end.
fn getdents_some(fd: &std::os::fd::OwnedFd) -> Vec<String> {
    use std::os::fd::AsRawFd;
    let mut buf = vec![0u8; 512];
    // SAFETY: valid fd and buffer of the given length.
    let n = unsafe { libc::syscall(libc::SYS_getdents64, fd.as_raw_fd(), buf.as_mut_ptr(), buf.len()) };
    assert!(n >= 0, "getdents64: {}", std::io::Error::last_os_error());
    let (mut at, mut out) = (0usize, Vec::new());
    while at < n as usize {
        // linux_dirent64: u64 ino, i64 off, u16 reclen, u8 type, NUL-terminated name.
        let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
        let name = &buf[at + 19..at + reclen];
        let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        out.push(String::from_utf8_lossy(&name[..end]).into_owned());
        at += reclen;
    }
    out
}

/// Every name in a directory listed through `dir`, sorted, without "." and "..".
fn listed(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("list {}: {e}", dir.display()))
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// (f) Work-tree listings, which the box's kernel may cache (ADR 0010): host additions, removals
/// and replacements are listed once the share's TTL passed; the box's own changes at once; and a
/// listing read part way before the host changed the directory goes on with its own entries,
/// every untouched name exactly once, while a new open lists the new content.
#[test]
fn work_tree_listings_follow_the_host_and_never_splice() {
    let v = Views::new("listing", &[]);
    let (host, boxed) = (v.host.join("d"), v.seamfs.mnt.join("d"));
    let settle = || std::thread::sleep(Duration::from_millis(1300));
    std::fs::create_dir(&host).expect("mkdir d");
    let first: Vec<String> = (0..120).map(|i| format!("f{i:03}")).collect();
    for n in &first {
        std::fs::write(host.join(n), n).expect("write a file");
    }
    settle();
    assert_eq!(listed(&boxed), listed(&host), "first listing");
    assert_eq!(listed(&boxed), listed(&host), "listed again within the TTL");
    // A reader part way through, then the host changes the directory.
    let part = std::fs::File::open(&boxed).map(std::os::fd::OwnedFd::from).expect("open d through seamfs");
    let mut seen = getdents_some(&part);
    assert!(!seen.is_empty() && seen.len() < 60, "a small buffer reads a few entries: {}", seen.len());
    let mtime = std::fs::metadata(&host).and_then(|m| m.modified()).expect("mtime of d");
    for i in 0..60 {
        std::fs::write(host.join(format!("g{i:03}")), "new").expect("write a new file");
    }
    std::fs::remove_file(host.join("f007")).expect("remove f007");
    std::fs::write(host.join("f008.new"), "replaced").expect("write f008.new");
    std::fs::rename(host.join("f008.new"), host.join("f008")).expect("replace f008");
    // As `tar -x` or `rsync -t` leave it: the kernel's own check of a cached listing (the
    // directory's mtime) cannot see this change; only seamfs's comparison of content can.
    std::fs::File::open(&host).and_then(|f| f.set_modified(mtime)).expect("put d's mtime back");
    settle();
    assert_eq!(listed(&boxed), listed(&host), "host additions, removal and replacement after the TTL");
    assert_eq!(std::fs::read_to_string(boxed.join("f008")).expect("read f008"), "replaced");
    loop {
        let more = getdents_some(&part);
        if more.is_empty() {
            break;
        }
        seen.extend(more);
    }
    for n in first.iter().filter(|n| *n != "f007" && *n != "f008") {
        let times = seen.iter().filter(|s| *s == n).count();
        assert_eq!(times, 1, "{n} listed {times} times by the reader that started before the change: {seen:?}");
    }
    // The box's own changes are listed at once, within the TTL.
    std::fs::write(boxed.join("boxed.txt"), "box").expect("create through seamfs");
    std::fs::remove_file(boxed.join("f000")).expect("remove through seamfs");
    assert_eq!(listed(&boxed), listed(&host), "the box's own create and unlink");
}

/// Writes 64 KiB to `dir/tmp_obj`, publishes it as `dir/name` by rename (while still open when
/// `open_while_renaming`, as gitoxide persists its tempfiles; closed first as git does), and
/// returns the size the host sees at `host_dir/name` right after.
fn publish(dir: &Path, host_dir: &Path, name: &str, open_while_renaming: bool) -> u64 {
    use std::io::Write;
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
    let tmp = dir.join("tmp_obj");
    let mut f = std::fs::File::create(&tmp).unwrap_or_else(|e| panic!("create {}: {e}", tmp.display()));
    f.write_all(&[b'x'; 64 * 1024]).expect("write the object");
    if !open_while_renaming {
        drop(f);
        f = std::fs::File::open(dir).expect("open the dir instead");
    }
    std::fs::rename(&tmp, dir.join(name)).expect("rename into place");
    let seen = std::fs::metadata(host_dir.join(name)).map(|m| m.len()).unwrap_or(0);
    drop(f);
    seen
}

/// (g) A guest-caching share (the emulator with a FUSE writeback cache, as 9p `cache=loose`)
/// sends a rename at once and the data later. A file renamed into the git dir while still open:
/// through the raw share the host finds it short (the control), through seamfs whole. Closed
/// before the rename, it is whole on both (the close writes it back).
#[test]
fn data_reaches_the_host_before_the_name_that_publishes_it() {
    let v = Views::new("writeback", &["--writeback-cache"]);
    let host_dir = v.host.join(".git/objects/ab");
    let whole = 64 * 1024;
    let raw = publish(&v.raw.mnt.join(".git/objects/ab"), &host_dir, "raw-open", true);
    assert!(raw < whole, "control: the raw share published a whole file ({raw} bytes): no writeback cache to test against");
    let seamfs = publish(&v.seamfs.mnt.join(".git/objects/ab"), &host_dir, "seamfs-open", true);
    assert_eq!(seamfs, whole, "through seamfs the host read {seamfs} of {whole} bytes at the rename");
    let raw_closed = publish(&v.raw.mnt.join(".git/objects/ab"), &host_dir, "raw-closed", false);
    let seamfs_closed = publish(&v.seamfs.mnt.join(".git/objects/ab"), &host_dir, "seamfs-closed", false);
    assert_eq!((raw_closed, seamfs_closed), (whole, whole), "closed before the rename");
}

/// (g) A host operation that started a moment ago (its `rebase-merge` directory made while the
/// share's kernel still holds a negative entry for the name) is seen by seamfs before it takes
/// the shared `index.lock` for a box ref lock (ADR 0054): taking it would fail the host's next
/// step. The control's stat shows the stale negative entry happened.
#[test]
fn a_host_operation_behind_a_stale_negative_entry_keeps_its_index_lock() {
    let v = Views::new("host-op", &["--negative-ttl", "30"]);
    let (raw_op, sfs_op) = (v.raw.mnt.join(".git/rebase-merge"), v.seamfs.mnt.join(".git/rebase-merge"));
    // The box looks the name up (missing): both emulators' kernels keep a negative entry.
    assert!(std::fs::symlink_metadata(&raw_op).is_err() && std::fs::symlink_metadata(&sfs_op).is_err());
    git(&v.seamfs.mnt, &["status", "--porcelain"]);
    // The host starts a rebase: its state directory, as `git rebase` writes it first.
    let op = v.host.join(".git/rebase-merge");
    std::fs::create_dir(&op).expect("create the host's rebase-merge");
    std::fs::write(op.join("head-name"), "refs/heads/main\n").expect("write head-name");
    let raw_stale = std::fs::symlink_metadata(&raw_op).is_err();
    // A box git's first ref lock, held while the host's index lock is looked at.
    let head_lock = v.seamfs.mnt.join(".git/HEAD.lock");
    let held = std::fs::OpenOptions::new().write(true).create_new(true).open(&head_lock).expect("the box takes HEAD.lock");
    let index_lock = v.host.join(".git/index.lock");
    let taken = index_lock.exists();
    drop(held);
    std::fs::remove_file(&head_lock).expect("the box releases HEAD.lock");
    let left = index_lock.exists();
    eprintln!("control stat of the new rebase-merge: {}; seamfs took index.lock under the host's rebase: {taken}", if raw_stale { "missing (stale)" } else { "present" });
    assert!(!taken && !left, "seamfs took the host's index.lock while its rebase was in progress (left after: {left})\nseamfs log:\n{}", v.seamfs.log());
    assert!(raw_stale, "the control saw the new rebase-merge at once: no stale negative entry, the test shows nothing");
}

/// Moves every ref in the host's `packed-refs` back to a loose file and removes `packed-refs`:
/// the repository of a fresh `git init` again, which never packed.
fn unpack_refs(host: &Path) {
    let packed = host.join(".git/packed-refs");
    let text = std::fs::read_to_string(&packed).unwrap_or_else(|e| panic!("read {}: {e}", packed.display()));
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.starts_with('^')) {
        let (oid, name) = line.split_once(' ').unwrap_or_else(|| panic!("malformed packed-refs line {line:?}"));
        let loose = host.join(".git").join(name);
        std::fs::create_dir_all(loose.parent().expect("a ref has a directory")).expect("create the ref's directory");
        std::fs::write(&loose, format!("{oid}\n")).unwrap_or_else(|e| panic!("write {}: {e}", loose.display()));
    }
    std::fs::remove_file(&packed).unwrap_or_else(|e| panic!("remove {}: {e}", packed.display()));
}

/// The box looks for a ref that does not exist, so git stats the missing `packed-refs` (through
/// seamfs the kernel now keeps that absence a moment, ADR 0060; the emulator keeps it its TTL).
fn box_misses_a_ref(mnt: &Path) {
    let missing = try_git(mnt, &["rev-parse", "-q", "--verify", "refs/heads/none"]);
    assert!(missing.is_err(), "refs/heads/none exists in {}: {missing:?}", mnt.display());
}

/// (h) ADR 0060: the kernel keeps a missing `packed-refs` a moment. A host `pack-refs --prune`
/// right after the box found it missing moves a new branch into it: the next box command must
/// read that branch at once. The control (the emulator's 1 s negative entry) reads it missing.
#[test]
fn a_host_pack_refs_is_seen_by_the_next_box_command() {
    const ROUNDS: usize = 20;
    let v = Views::new("packed", &[]);
    let head = git(&v.host, &["rev-parse", "HEAD"]);
    let (mut raw_missing, mut sfs_wrong, mut within) = (0usize, Vec::new(), 0usize);
    for n in 0..ROUNDS {
        let name = format!("refs/heads/p{n}");
        git(&v.host, &["update-ref", &name, &head]);
        box_misses_a_ref(&v.seamfs.mnt);
        box_misses_a_ref(&v.raw.mnt);
        let missed = Instant::now();
        git(&v.host, &["pack-refs", "--all", "--prune"]);
        assert!(!v.host.join(".git").join(&name).exists(), "pack-refs --prune left {name} loose");
        // The control first: seamfs may wait its kept negative entry out, the control's would expire meanwhile.
        raw_missing += usize::from(try_git(&v.raw.mnt, &["rev-parse", "--verify", &name]).is_err());
        // Started while the kernel could still keep the absence (ADR 0060's TTL is 250 ms at most).
        within += usize::from(missed.elapsed() < Duration::from_millis(250));
        let sfs = try_git(&v.seamfs.mnt, &["rev-parse", "--verify", &name]);
        if sfs.as_deref() != Ok(head.as_str()) {
            sfs_wrong.push(format!("round {n}: {name} read {sfs:?}"));
        }
        unpack_refs(&v.host);
    }
    eprintln!("{ROUNDS} host pack-refs: the next box command read the packed branch missing: control {raw_missing}, seamfs {}; seamfs read within 250 ms of finding packed-refs missing: {within}", sfs_wrong.len());
    assert!(sfs_wrong.is_empty(), "through seamfs a box command after the host's pack-refs read a stale view: {sfs_wrong:#?}\nseamfs log:\n{}", v.seamfs.log());
    assert!(within >= ROUNDS / 2, "only {within} of {ROUNDS} reads came while the kernel could keep the negative entry: the test shows nothing");
    assert!(raw_missing > 0, "the control read every packed branch: its negative entry never hid one, the test shows nothing");
}

/// One box `git update-ref --stdin` process, driven a command at a time.
struct UpdateRef {
    child: std::process::Child,
    out: std::io::BufReader<std::process::ChildStdout>,
}

impl UpdateRef {
    /// Starts it in `mnt` and opens a transaction (git reads HEAD as it starts).
    fn start(mnt: &Path) -> UpdateRef {
        let mut child = git_cmd(mnt)
            .args(["update-ref", "--stdin"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn git update-ref --stdin in {}: {e}", mnt.display()));
        let out = std::io::BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut u = UpdateRef { child, out };
        assert_eq!(u.say("start").as_deref(), Some("start: ok"), "git update-ref --stdin did not start a transaction in {}", mnt.display());
        u
    }

    /// Sends one line; returns git's answer line, None when it ended instead.
    fn say(&mut self, line: &str) -> Option<String> {
        use std::io::{BufRead, Write};
        let stdin = self.child.stdin.as_mut().expect("piped stdin");
        writeln!(stdin, "{line}").and_then(|()| stdin.flush()).ok()?;
        let mut answer = String::new();
        (self.out.read_line(&mut answer).ok()? > 0).then(|| answer.trim().to_string())
    }

    /// Creates `name` at `oid` (expected absent) and commits: Ok when git committed it, else
    /// git's error.
    fn create(mut self, name: &str, oid: &str) -> Result<(), String> {
        use std::io::Write;
        let stdin = self.child.stdin.as_mut().expect("piped stdin");
        let _ = writeln!(stdin, "create {name} {oid}");
        let prepared = self.say("prepare");
        let committed = prepared.as_deref() == Some("prepare: ok") && self.say("commit").as_deref() == Some("commit: ok");
        drop(self.child.stdin.take());
        let out = self.child.wait_with_output().expect("wait for git update-ref");
        match (committed, out.status.success()) {
            (true, true) => Ok(()),
            _ => Err(format!("{}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim())),
        }
    }
}

/// (i) ADR 0060: a box git that started before a host `pack-refs --prune` creates a branch the
/// host's pack just moved into `packed-refs`, while the kernel may still keep that file's
/// absence. Under the branch's lock git must read the host's packed branch and refuse, and the
/// host's branch keeps its commit. On the control git reads its share's stale negative entry
/// and replaces the host's branch.
#[test]
fn a_box_lock_reads_the_packed_refs_the_host_just_made() {
    const ROUNDS: usize = 12;
    let v = Views::new("packed-lock", &[]);
    let older = git(&v.host, &["rev-parse", "HEAD"]);
    let head = host_commit(&v.host, 1);
    let (mut raw_replaced, mut sfs_replaced, mut sfs_refused) = (0usize, Vec::new(), 0usize);
    for n in 0..ROUNDS {
        let name = format!("refs/heads/q{n}");
        git(&v.host, &["update-ref", &name, &head]);
        let (sfs, raw) = (UpdateRef::start(&v.seamfs.mnt), UpdateRef::start(&v.raw.mnt));
        box_misses_a_ref(&v.seamfs.mnt);
        box_misses_a_ref(&v.raw.mnt);
        git(&v.host, &["pack-refs", "--all", "--prune"]);
        // The control first: seamfs may wait its kept negative entry out, the control's would expire meanwhile.
        let _ = raw.create(&name, &older);
        raw_replaced += usize::from(git(&v.host, &["rev-parse", &name]) != head);
        git(&v.host, &["update-ref", &name, &head]);
        git(&v.host, &["pack-refs", "--all", "--prune"]);
        let made = sfs.create(&name, &older);
        sfs_refused += usize::from(made.is_err());
        let now = git(&v.host, &["rev-parse", &name]);
        if now != head {
            sfs_replaced.push(format!("round {n}: the host's {name} is {now} (the box's create: {made:?})"));
        }
        unpack_refs(&v.host);
    }
    eprintln!("{ROUNDS} box creates of a branch the host just packed: the host's branch replaced: control {raw_replaced}, seamfs {} (refused through seamfs: {sfs_refused})", sfs_replaced.len());
    assert!(sfs_replaced.is_empty(), "through seamfs a box lock read a stale packed-refs: {sfs_replaced:#?}\nseamfs log:\n{}", v.seamfs.log());
    assert_eq!(sfs_refused, ROUNDS, "every box create of an existing branch must be refused");
    assert!(raw_replaced > 0, "the control never replaced the host's branch: its negative entry hid nothing, the test shows nothing");
}
