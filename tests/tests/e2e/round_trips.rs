//! Round trips to the share that seamfs spares, counted by the daemon itself (the `refreshes`
//! line of `user.seamfs.status`: forced revalidations of live names, ADR 0020) or by the kernel
//! (the requests the fast share's server is sent: `seam_tests::fuse_trace`, ADR 0031). Counts,
//! not times: the bound holds on a loaded machine as on an idle one.

use std::path::Path;
use std::time::Instant;

use seam_tests::fuse_trace::FuseRequests;
use seam_tests::strace::Strace;
use seam_tests::sys;
use seam_tests::{Git, Mount, TempDir};

/// The daemon's count of forced revalidations so far.
fn refreshes(m: &Mount) -> u64 {
    let v = sys::getxattr(m.path(), "user.seamfs.status", 4096, false).expect("read user.seamfs.status");
    let text = String::from_utf8_lossy(&v).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix("refreshes="))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no refreshes= line in user.seamfs.status:\n{text}"))
}

/// Runs `round` until one run of it takes less than `limit` (a count made in a round that took
/// longer would measure a window, not what the test means), and returns that run's result;
/// fails after 20 tries.
fn in_a_quick_round<T>(limit: std::time::Duration, mut round: impl FnMut() -> T) -> T {
    for attempt in 0..20 {
        let t = Instant::now();
        let r = round();
        if t.elapsed() < limit {
            eprintln!("attempt {attempt} took {:?}", t.elapsed());
            return r;
        }
    }
    panic!("no round took under {limit:?}: the machine is too loaded to tell");
}

/// `<backing>/repo` with one commit of `a.txt` (the crash tests use it too).
pub(crate) fn repo(backing: &Path) -> std::path::PathBuf {
    let git = Git::new();
    let host = backing.join("repo");
    std::fs::create_dir(&host).expect("mkdir");
    git.run(&host, &["init", "-q"]);
    std::fs::write(host.join("a.txt"), "a\n").expect("write");
    git.run(&host, &["add", "a.txt"]);
    git.run(&host, &["commit", "-q", "-m", "base"]);
    host
}

/// seamfs mounted over a backing dir that holds [`repo`]. Fields drop in order: the mount
/// goes before the directories under it.
struct OverRepo {
    m: Mount,
    /// The host's repository on the backing dir.
    host: std::path::PathBuf,
    _dirs: (TempDir, TempDir),
}

fn seamfs_over_repo(tag: &str, args: &[&str]) -> OverRepo {
    let backing = TempDir::new(&format!("rt-{tag}-backing"));
    let mnt = TempDir::new(&format!("rt-{tag}-mnt"));
    let host = repo(backing.path());
    let m = Mount::seamfs(backing.path(), mnt.path(), args);
    OverRepo { m, host, _dirs: (backing, mnt) }
}

/// seamfs over the fast share (`seam-lab share --fast`) over a backing dir that holds [`repo`].
/// Fields drop in order: seamfs, then the share, then the directories.
struct OverFastShare {
    m: Mount,
    s: Mount,
    _dirs: (TempDir, TempDir, TempDir),
}

fn seamfs_over_fast_share(tag: &str) -> OverFastShare {
    let backing = TempDir::new(&format!("rt-{tag}-backing"));
    let share = TempDir::new(&format!("rt-{tag}-share"));
    let mnt = TempDir::new(&format!("rt-{tag}-mnt"));
    repo(backing.path());
    let s = Mount::fast_share(backing.path(), share.path(), &[]);
    let m = Mount::seamfs(s.path(), mnt.path(), &["--ttl", "1"]);
    OverFastShare { m, s, _dirs: (backing, share, mnt) }
}

impl OverFastShare {
    /// Unmounts both, failing on a problem (dropping only logs it).
    fn unmount(self) {
        self.m.unmount();
        self.s.unmount();
    }
}

/// Git stats `config` and `HEAD` right after each lookup; every GETATTR used to force its own
/// revalidation on the share. One process stating a live name again and again now pays one
/// refresh per window (the work-tree TTL, ADR 0033; the bound allows one per 50 ms), not one
/// per stat.
#[test]
fn a_process_stating_a_live_name_again_refreshes_it_once_a_moment() {
    let f = seamfs_over_repo("stat", &["--ttl", "1"]);
    let m = &f.m;
    let config = m.join("repo/.git/config");
    const STATS: u64 = 200;
    let before = refreshes(m);
    let t = Instant::now();
    for _ in 0..STATS {
        std::fs::symlink_metadata(&config).expect("lstat .git/config");
    }
    let took = t.elapsed();
    let spent = refreshes(m) - before;
    let windows = took.as_millis() as u64 / 50 + 1;
    eprintln!("{STATS} lstats of .git/config in {took:?}: {spent} refreshes ({windows} windows of 50 ms)");
    assert!(spent >= 1, "the first stat must revalidate the name: the count is not counting");
    assert!(spent <= 2 * windows + 2, "{spent} refreshes for {STATS} stats in {windows} windows: a stat is refreshing again");
    f.m.unmount();
}

/// A lock the box creates is a barrier: a stat the memo spared a moment ago revalidates again
/// right after it, so what git reads under a lock is the share's current state. Tried until
/// one round fits inside the 50 ms window (else the window, not the barrier, would refresh).
#[test]
fn a_box_lock_makes_the_next_stat_refresh_again() {
    let f = seamfs_over_repo("lock", &["--ttl", "1"]);
    let m = &f.m;
    let head = m.join("repo/.git/HEAD");
    let lock = m.join("repo/.git/refs/heads/probe.lock");
    let (r1, r2, r3, r4) = in_a_quick_round(std::time::Duration::from_millis(40), || {
        std::fs::symlink_metadata(&head).expect("lstat HEAD");
        let r1 = refreshes(m);
        std::fs::symlink_metadata(&head).expect("lstat HEAD again");
        let r2 = refreshes(m);
        std::fs::write(&lock, "").expect("create a box lock");
        let r3 = refreshes(m);
        std::fs::symlink_metadata(&head).expect("lstat HEAD under the lock");
        let r4 = refreshes(m);
        std::fs::remove_file(&lock).expect("remove the lock");
        (r1, r2, r3, r4)
    });
    eprintln!("again {} refreshes, under the lock {}", r2 - r1, r4 - r3);
    assert_eq!(r2, r1, "a second stat within the window refreshed: the memo is off");
    assert!(r4 > r3, "HEAD was not revalidated after a box lock create: the barrier is gone");
    f.m.unmount();
}

/// The ref-store directories git never removes (`refs`, `refs/heads`, ...) are not refreshed
/// again after a box lock (ADR 0052): git reads files under a lock, and these directories are
/// still the ones the process found. A branch directory git prunes when empty
/// (`refs/heads/topic/`) is refreshed again, which shows the count counts. Between the lock and
/// the stats the kernel's attributes of both expire (50 ms), so both stats reach seamfs.
#[test]
fn a_box_lock_does_not_refresh_the_ref_directories_git_never_removes_again() {
    let f = seamfs_over_repo("refdirs", &["--ttl", "1"]);
    Git::new().run(&f.host, &["branch", "topic/x"]);
    let m = &f.m;
    let heads = m.join("repo/.git/refs/heads");
    let topic = m.join("repo/.git/refs/heads/topic");
    let lock = m.join("repo/.git/refs/heads/probe.lock");
    // Within the process's window (the TTL, 1 s), or the window and not the lock decides.
    let (r1, r2, r3) = in_a_quick_round(std::time::Duration::from_millis(600), || {
        sys::lstat(&heads).expect("lstat refs/heads");
        sys::lstat(&topic).expect("lstat refs/heads/topic");
        std::fs::write(&lock, "").expect("create a box lock");
        std::thread::sleep(std::time::Duration::from_millis(120));
        let r1 = refreshes(m);
        sys::lstat(&heads).expect("lstat refs/heads under the lock");
        let r2 = refreshes(m);
        sys::lstat(&topic).expect("lstat refs/heads/topic under the lock");
        let r3 = refreshes(m);
        std::fs::remove_file(&lock).expect("remove the lock");
        (r1, r2, r3)
    });
    eprintln!("under the lock refs/heads {} refreshes, refs/heads/topic {}", r2 - r1, r3 - r2);
    assert!(r3 > r2, "refs/heads/topic was not revalidated after a box lock: the count is not counting");
    assert_eq!(r2, r1, "refs/heads was revalidated again after a box lock: ADR 0052's directories are refreshed");
    f.m.unmount();
}

/// The kernel keeps the entries of the ref-store directories git never removes as long as the
/// git dir's own (ADR 0052), whether its lookup or a listing of `refs/` gave them: a walk of
/// `refs/heads/main` 300 ms after another asks seamfs for neither `refs` nor `heads` (the
/// ref-store TTL, 100 ms, had the kernel look both up again).
/// A branch directory git prunes keeps the short TTL: its walk asks again.
#[test]
fn the_kernel_keeps_the_ref_directories_git_never_removes() {
    let f = seamfs_over_repo("refdir-ttl", &["--ttl", "1"]);
    Git::new().run(&f.host, &["branch", "topic/x"]);
    let m = &f.m;
    let main = m.join("repo/.git/refs/heads/main");
    let main = if main.exists() { main } else { m.join("repo/.git/refs/heads/master") };
    let x = m.join("repo/.git/refs/heads/topic/x");
    let mut attempt = 0;
    let (kept, pruned) = in_a_quick_round(std::time::Duration::from_millis(800), || {
        attempt += 1;
        sys::lstat(&main).expect("lstat the branch");
        sys::lstat(&x).expect("lstat topic/x");
        // A listing of `refs/` (READDIRPLUS) sets the TTL of `heads` again: it must keep it.
        std::fs::read_dir(m.join("repo/.git/refs")).expect("list refs").for_each(drop);
        std::thread::sleep(std::time::Duration::from_millis(300));
        let trace = FuseRequests::of(m.path(), &format!("refdir-ttl-{attempt}"));
        sys::lstat(&main).expect("lstat the branch again");
        let (kept, _) = trace.count("FUSE_LOOKUP");
        trace.clear();
        sys::lstat(&x).expect("lstat topic/x again");
        (kept, trace.count("FUSE_LOOKUP").0)
    });
    eprintln!("LOOKUPs walking refs/heads/<branch> again {kept}, refs/heads/topic/x again {pruned}");
    assert!(pruned >= 1, "refs/heads/topic was not looked up again past the ref-store TTL: the count is not counting");
    assert_eq!(kept, 0, "the kernel looked refs or refs/heads up again within the git dir's TTL");
    f.m.unmount();
}

/// One process's refresh of a live name stands for the share's own TTL, not 50 ms (ADR 0033):
/// in a guest one git process outlasts 50 ms many times over, and refreshed `HEAD` again at
/// nearly every look. With `--ttl 0.05` the window is ADR 0020's 50 ms again: the same pause
/// costs a refresh, which shows the count counts. A new process still refreshes for itself, so
/// the next box command sees a host commit at once.
#[test]
fn a_refresh_stands_for_the_share_ttl_within_one_process() {
    let backing = TempDir::new("rt-window-backing");
    let mnt = TempDir::new("rt-window-mnt");
    let host = repo(backing.path());
    let pause = std::time::Duration::from_millis(200);
    for (ttl, spared) in [("1", true), ("0.05", false)] {
        let m = Mount::seamfs(backing.path(), mnt.path(), &["--ttl", ttl]);
        let head = m.join("repo/.git/HEAD");
        let before = refreshes(&m);
        std::fs::read(&head).expect("read HEAD");
        let first = refreshes(&m);
        std::thread::sleep(pause);
        let t = Instant::now();
        std::fs::read(&head).expect("read HEAD again");
        let again = refreshes(&m) - first;
        eprintln!("ttl {ttl}: first read {} refreshes, again after {pause:?} {again}", first - before);
        assert!(first > before, "ttl {ttl}: the first read must refresh HEAD: the count is not counting");
        if spared {
            assert!(t.elapsed() < std::time::Duration::from_millis(700), "the machine stalled: cannot tell");
            assert_eq!(again, 0, "ttl 1: a read 200 ms after the process's refresh refreshed again (the 50 ms window)");
            // The host commits; the next box command (a new process) must see it at once.
            std::fs::write(host.join("a.txt"), "host\n").expect("host edit");
            Git::new().run(&host, &["commit", "-q", "-am", "host"]);
            let want = Git::new().run(&host, &["rev-parse", "HEAD"]);
            let seen = Git::new().run(&m.join("repo"), &["rev-parse", "HEAD"]);
            assert_eq!(seen.trim(), want.trim(), "a new box process read HEAD older than the host's commit");
        } else {
            assert!(again > 0, "ttl 0.05: a read 200 ms later must refresh again");
        }
        m.unmount();
    }
}

/// Every lookup of `index` checks whether the host moved HEAD (the reverse heal), reading the
/// box index, HEAD and the branch, each refreshed: three round trips per look, and git looks
/// the index up several times per command. Outside a lock the check now reads them as the
/// process last refreshed them (ADR 0033); a lock create refreshes them (`heal` tests).
#[test]
fn a_process_looking_its_index_up_again_refreshes_nothing() {
    let f = seamfs_over_repo("index", &["--ttl", "1"]);
    let m = &f.m;
    let index = m.join("repo/.git/index");
    let r0 = refreshes(m);
    let t = Instant::now();
    std::fs::read(&index).expect("read the index (seeds the box index)");
    let r1 = refreshes(m);
    std::fs::read(&index).expect("read the index again");
    let r2 = refreshes(m);
    eprintln!("index looked up: {} refreshes, again: {}", r1 - r0, r2 - r1);
    assert!(r1 > r0, "the first look must have refreshed: the count is not counting");
    assert!(t.elapsed() < std::time::Duration::from_millis(700), "the machine stalled past the window: cannot tell");
    assert_eq!(r2, r1, "a process's second look at its index refreshed HEAD, the branch or the box index again");
    f.m.unmount();
}

/// A lookup of a live name the share does not have costs its server two LOOKUPs, the refresh's
/// (ADR 0031): the forced revalidation's own answer says it is missing, so seamfs no longer
/// stats it after the refresh and again to look for a host-held lock. Git probes such names in
/// every command (`MERGE_HEAD`, `CHERRY_PICK_HEAD`... and each lock before it creates it); on a
/// share that keeps no negative entries (virtiofsd, the fast share) each probe cost three or four.
#[test]
fn a_missing_live_name_costs_the_share_only_its_refresh() {
    let f = seamfs_over_fast_share("miss");
    let gitdir = f.m.join("repo/.git");
    let names = ["MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "AUTO_MERGE", "HEAD.lock", "config.lock", "packed-refs.lock", "ORIG_HEAD.lock"];
    sys::lstat(&gitdir.join("HEAD")).expect("lstat HEAD (walks the git dir first)");
    let trace = FuseRequests::of(f.s.path(), "missing");
    for n in names {
        assert_eq!(sys::lstat(&gitdir.join(n)).map(drop), Err(sys::Errno(libc::ENOENT)), "{n} must read missing");
    }
    let (lookups, all) = trace.count("FUSE_LOOKUP");
    eprintln!("{} missing live names: {lookups} LOOKUPs, {all} requests on the share ({:?})", names.len(), trace.counts());
    let n = names.len() as u64;
    assert!(lookups >= n, "{lookups} LOOKUPs for {n} names: each must reach the share's server, or the count is not counting");
    // Two each: the stat that gives the forced revalidation an entry to replace (ADR 0002's
    // fault model answers an expired entry's lookup stale), then the link's forced one; the
    // git dir's own entry may expire (TTL 1 s) and be looked up once more.
    assert!(lookups <= 2 * n + 2, "{lookups} LOOKUPs on the share for {n} missing names: more than two each");
    drop(trace);
    f.unmount();
}

/// A missing live name one process looks up again costs the share nothing more (ADR 0037): its
/// refresh's "missing" stands for the window, as a present name's refresh does. Git probes
/// `MERGE_HEAD`, `CHERRY_PICK_HEAD` and the like, and every ref name its DWIM rules try, several
/// times in one command; on a share without negative entries each later look was one more
/// LOOKUP on the share's server.
#[test]
fn a_missing_live_name_looked_up_again_costs_the_share_nothing() {
    let f = seamfs_over_fast_share("miss2");
    let gitdir = f.m.join("repo/.git");
    let names = ["MERGE_HEAD", "CHERRY_PICK_HEAD", "refs/tags/HEAD", "refs/remotes/HEAD"];
    const ROUNDS: u64 = 5;
    let n = names.len() as u64;
    let round = || {
        for name in names {
            assert_eq!(sys::lstat(&gitdir.join(name)).map(drop), Err(sys::Errno(libc::ENOENT)), "{name} must read missing");
        }
    };
    // Rounds that outlast the window (1 s) refresh each name once more: measured again.
    for attempt in 0..3 {
        std::thread::sleep(std::time::Duration::from_millis(1100));
        round();
        let t = Instant::now();
        let trace = FuseRequests::of(f.s.path(), &format!("miss2-{attempt}"));
        for _ in 0..ROUNDS {
            round();
        }
        let (again, all) = trace.count("FUSE_LOOKUP");
        let elapsed = t.elapsed();
        eprintln!("{ROUNDS} more rounds of {n} missing names in {elapsed:?}: {again} LOOKUPs, {all} requests on the share ({:?})", trace.counts());
        // Past the window the same process asks the server again: the count counts.
        trace.clear();
        std::thread::sleep(std::time::Duration::from_millis(1100));
        round();
        let (later, _) = trace.count("FUSE_LOOKUP");
        eprintln!("a round past the window: {later} LOOKUPs ({:?})", trace.counts());
        if elapsed >= std::time::Duration::from_millis(900) {
            continue;
        }
        assert!(later >= n, "{later} LOOKUPs for {n} names past the window: each must reach the share's server, or the count is not counting");
        // At most a directory entry that expired meanwhile; no name asked again.
        assert!(again <= 2, "{again} LOOKUPs on the share for {ROUNDS} more rounds of {n} missing names: the rounds asked again");
        drop(trace);
        f.unmount();
        return;
    }
    panic!("every attempt outlasted the window: the machine is too loaded for this count");
}

/// A refresh on virtiofs, 9p or a local filesystem is the link's forced lookup alone; on a FUSE
/// lower a stat comes first (ADR 0041). Over virtiofsd the stat of a missing
/// name was one more LOOKUP on the server for each refresh: dropping it took six everyday
/// commands in the guest from 1,072 share requests (604 LOOKUPs) to 925 (441). Counted with strace on the daemon: the stats of names git
/// probes and the share does not have, which seamfs answers from the refresh alone (ADR 0031).
#[test]
fn a_refresh_stats_first_on_a_fuse_lower_not_on_a_local_one() {
    let names = ["MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "AUTO_MERGE"];
    let count = |m: &Mount, tag: &str| {
        let gitdir = m.join("repo/.git");
        sys::lstat(&gitdir.join("HEAD")).expect("lstat HEAD (walks the git dir first)");
        let trace = TempDir::new(&format!("rt-{tag}-trace"));
        let strace = Strace::attach(m.daemon_pid(), &["-e", "trace=newfstatat,linkat"], &trace.join("strace.log"));
        for n in names {
            assert_eq!(sys::lstat(&gitdir.join(n)).map(drop), Err(sys::Errno(libc::ENOENT)), "{n} must read missing");
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
        let text = strace.stop();
        let of = |call: &str| text.lines().filter(|l| l.contains(call) && names.iter().any(|n| l.contains(&format!("\"{n}\"")))).count();
        let (links, stats) = (of("linkat("), of("newfstatat("));
        eprintln!("{tag}: {links} links and {stats} stats of {} missing live names", names.len());
        assert_eq!(links, names.len(), "{tag}: each missing name is refreshed once by its link, or strace is not counting");
        stats
    };
    // The temp dir is a local filesystem (ext4 here and in CI); one ADR 0041 does not name
    // keeps the stat, which the daemon's startup line says.
    let kernel = seamfs_over_repo("linkalone", &["--ttl", "1"]);
    let stats = count(&kernel.m, "local lower");
    let log = kernel.m.log();
    kernel.m.unmount();
    if log.contains("forced lookup alone") {
        assert_eq!(stats, 0, "on a local lower a refresh is the link alone: the stat before it is one more round trip on a share");
    } else {
        assert!(log.contains("a stat, then the link"), "the daemon's log says how it refreshes:\n{log}");
        eprintln!("the temp dir's filesystem is not one ADR 0041 names: only its stat-first refresh is checked");
        assert_eq!(stats, names.len(), "a lower that keeps the stat stats each name first");
    }
    // The control: over a FUSE share each link follows its stat (ADR 0002's fault model).
    let fuse = seamfs_over_fast_share("statfirst");
    let stats = count(&fuse.m, "FUSE lower");
    fuse.unmount();
    assert_eq!(stats, names.len(), "on a FUSE lower each refresh stats the name first");
}

/// What the box makes through seamfs is seen at once by a process whose refresh found the name
/// missing a moment before (ADR 0037: a create, link or rename through the lower moves the
/// name's generation, and the recalled "missing" no longer stands); what the host makes is seen
/// by the next command at once, and by the same process after the window.
#[test]
fn a_name_found_missing_is_seen_once_the_box_or_the_host_makes_it() {
    let f = seamfs_over_repo("miss3", &["--ttl", "1"]);
    let gitdir = f.m.join("repo/.git");
    let missing = |name: &str| sys::lstat(&gitdir.join(name)).map(drop) == Err(sys::Errno(libc::ENOENT));
    // Created by the box.
    assert!(missing("MERGE_HEAD"));
    std::fs::write(gitdir.join("MERGE_HEAD"), "0000000000000000000000000000000000000000\n").expect("create MERGE_HEAD");
    assert!(!missing("MERGE_HEAD"), "MERGE_HEAD, which this process just created, reads missing");
    // Renamed into place by the box.
    assert!(missing("refs/heads/made"));
    let head = std::fs::read_to_string(f.host.join(".git/refs/heads/master"))
        .or_else(|_| std::fs::read_to_string(f.host.join(".git/refs/heads/main")))
        .expect("read the branch");
    std::fs::write(gitdir.join("made.tmp"), &head).expect("write made.tmp");
    std::fs::rename(gitdir.join("made.tmp"), gitdir.join("refs/heads/made")).expect("rename made.tmp");
    assert!(!missing("refs/heads/made"), "a branch this process just renamed into place reads missing");
    // Linked by the box.
    assert!(missing("CHERRY_PICK_HEAD"));
    std::fs::write(gitdir.join("pick.tmp"), &head).expect("write pick.tmp");
    sys::link(&gitdir.join("pick.tmp"), &gitdir.join("CHERRY_PICK_HEAD")).expect("link CHERRY_PICK_HEAD");
    assert!(!missing("CHERRY_PICK_HEAD"), "a name this process just linked reads missing");
    // Made by the host: the next command sees it at once; this process, after the window.
    assert!(missing("REVERT_HEAD"));
    std::fs::write(f.host.join(".git/REVERT_HEAD"), &head).expect("host writes REVERT_HEAD");
    let git = Git::new();
    let seen = git.run(&f.m.join("repo"), &["rev-parse", "-q", "--verify", "REVERT_HEAD"]);
    assert_eq!(seen.trim(), head.trim(), "a new box command must see the host's REVERT_HEAD at once");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert!(!missing("REVERT_HEAD"), "past the window this process must see the host's REVERT_HEAD");
}

/// A box command opens on the share what git opens and no more (ADR 0031): seamfs's own reads
/// of `HEAD`, the branch and `config` (to note where a process starts and what it read) are
/// answered from what it read a moment ago while the file's identity and stamps are unchanged.
/// They used to add an OPEN, a FLUSH and a RELEASE each: `rev-parse HEAD` opened 8-9 files on
/// the share through seamfs against 5 on the share alone.
#[test]
fn a_box_command_opens_on_the_share_what_git_opens() {
    let backing = TempDir::new("rt-open-backing");
    let share = TempDir::new("rt-open-share");
    let mnt = TempDir::new("rt-open-mnt");
    repo(backing.path());
    let twin = backing.path().join("twin");
    let git = Git::new();
    git.run(backing.path(), &["clone", "-q", "repo", "twin"]);
    let s = Mount::fast_share(backing.path(), share.path(), &[]);
    let m = Mount::seamfs(s.path(), mnt.path(), &["--ttl", "1"]);
    let through_seamfs = m.join("repo");
    let alone = s.path().join("twin");
    assert!(twin.join(".git/HEAD").exists(), "the twin repository was cloned");
    const RUNS: u64 = 3;
    let opens = |dir: &Path, label: &str| {
        git.run(dir, &["rev-parse", "HEAD"]);
        let trace = FuseRequests::of(s.path(), label);
        for _ in 0..RUNS {
            git.run(dir, &["rev-parse", "HEAD"]);
        }
        let (opens, all) = trace.count("FUSE_OPEN");
        eprintln!("{label}: {RUNS} x rev-parse HEAD: {opens} OPENs, {all} requests on the share ({:?})", trace.counts());
        opens
    };
    let seamfs = opens(&through_seamfs, "seamfs");
    let raw = opens(&alone, "alone");
    assert!(raw >= RUNS, "git on the share alone opened {raw} files in {RUNS} runs: the count is not counting");
    assert!(seamfs <= raw + RUNS, "through seamfs the share saw {seamfs} OPENs where git alone made {raw}: seamfs reopens what it read");
    m.unmount();
    s.unmount();
}

/// A live ref's entry and attributes are kept (ADR 0036, 0038): 100 stats of `config` and
/// `HEAD` are a LOOKUP or two and a GETATTR per 50 ms, no longer a LOOKUP each. A missing live
/// name still costs a LOOKUP at every look (no negative entry), which also shows the count counts.
#[test]
fn a_stat_of_a_live_ref_is_answered_from_the_kept_entry() {
    let f = seamfs_over_repo("attr", &["--ttl", "1"]);
    let m = &f.m;
    let gitdir = m.join("repo/.git");
    sys::lstat(&gitdir.join("HEAD")).expect("lstat HEAD (walks the git dir first)");
    let trace = FuseRequests::of(m.path(), "live-attr");
    const STATS: u64 = 50;
    let t = Instant::now();
    for _ in 0..STATS {
        for n in ["config", "HEAD"] {
            sys::lstat(&gitdir.join(n)).unwrap_or_else(|e| panic!("lstat {n}: {e:?}"));
        }
    }
    let windows = t.elapsed().as_millis() as u64 / 50 + 1;
    let c = trace.counts();
    let lookups = c.get("FUSE_LOOKUP").copied().unwrap_or(0);
    let getattrs = c.get("FUSE_GETATTR").copied().unwrap_or(0);
    eprintln!("{} lstats of live refs in {:?}: {lookups} LOOKUPs, {getattrs} GETATTRs ({c:?})", 2 * STATS, t.elapsed());
    assert!(lookups <= 4, "{lookups} LOOKUPs for {} lstats: a live ref's entry is not kept", 2 * STATS);
    assert!(getattrs <= 2 * windows + 2, "{getattrs} GETATTRs for {} lstats in {windows} windows of 50 ms: attributes not kept", 2 * STATS);
    drop(trace);
    let trace = FuseRequests::of(m.path(), "live-missing");
    for _ in 0..STATS {
        assert!(sys::lstat(&gitdir.join("MERGE_HEAD")).is_err(), "MERGE_HEAD must not exist");
    }
    let missing = trace.counts().get("FUSE_LOOKUP").copied().unwrap_or(0);
    assert!(missing >= STATS, "{missing} LOOKUPs for {STATS} lstats of a missing live name: a negative entry is kept, or the count is not counting");
    drop(trace);
    f.m.unmount();
}

/// The kept attributes never describe another file to an open one (ADR 0036; why ADR 0020
/// withdrew them for live refs): the box looks `config` up, the host renames a config of
/// another size over it, and the box opens the node it looked up (an `O_PATH` fd reopened
/// through `/proc/self/fd`: an OPEN with no LOOKUP before it, as when the rename lands between
/// git's lookup and its open). The kernel still holds the old file's attributes then; seamfs
/// drops them at the open, so `fstat` on the new fd gives the size of the file read. Rounds
/// where the open came more than 50 ms after the lookup (the copy had expired anyway) prove
/// nothing and are not counted.
#[test]
fn an_open_after_a_host_rename_sizes_the_file_it_reads() {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    use std::os::fd::AsRawFd;
    let f = seamfs_over_repo("size", &["--ttl", "1"]);
    let m = &f.m;
    let host = &f.host;
    let config = m.join("repo/.git/config");
    let host_config = host.join(".git/config");
    let base = std::fs::read_to_string(&host_config).expect("read the host's config");
    let (mut inside, mut rounds) = (0, 0);
    while inside < 30 && rounds < 300 {
        rounds += 1;
        let t = Instant::now();
        let node = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_PATH).open(&config).expect("look config up (O_PATH)");
        let looked = node.metadata().expect("fstat the O_PATH fd").size();
        // The host replaces config by rename with one of another size (git config's way).
        let next = format!("{base}[seam]\n\tround = {}\n", "x".repeat(1 + rounds % 7 * 40));
        let tmp = host.join(".git/config.host-tmp");
        std::fs::write(&tmp, &next).expect("write the host's new config");
        std::fs::rename(&tmp, &host_config).expect("rename it over config");
        let mut f = std::fs::File::open(format!("/proc/self/fd/{}", node.as_raw_fd())).expect("open the looked-up config");
        let size = f.metadata().expect("fstat config").size();
        let within = t.elapsed() < std::time::Duration::from_millis(50);
        let mut read = String::new();
        f.read_to_string(&mut read).expect("read config");
        assert_eq!(read, next, "round {rounds}: the open did not read the host's new config");
        assert_eq!(size, read.len() as u64, "round {rounds}: fstat says {size} bytes for a file of {} (the lookup saw {looked}): the kernel kept another file's attributes", read.len());
        if within && looked != size {
            inside += 1;
        }
    }
    eprintln!("{inside} of {rounds} rounds opened within 50 ms of a lookup that saw another size");
    assert!(inside >= 30, "only {inside} rounds fitted in the attributes' 50 ms: the case was not exercised");
    f.m.unmount();
}

/// seamfs opens a parent directory once a moment, not once per request (ADR 0035): `git
/// rev-parse HEAD` made seamfs open the git dir by path about twenty times. Counted with strace
/// on the daemon: `openat2` calls whose path is the git dir itself.
#[test]
fn a_box_command_opens_its_git_dir_once_a_moment() {
    let f = seamfs_over_repo("dirs", &["--ttl", "1", "--no-passthrough"]);
    let m = &f.m;
    let git = Git::new();
    let dir = m.join("repo");
    git.run(&dir, &["rev-parse", "HEAD"]);
    let trace = TempDir::new("rt-dirs-trace");
    let strace = Strace::attach(m.daemon_pid(), &["-e", "trace=openat2"], &trace.join("strace.log"));
    const RUNS: usize = 3;
    let t = Instant::now();
    for _ in 0..RUNS {
        git.run(&dir, &["rev-parse", "HEAD"]);
    }
    let took = t.elapsed();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let text = strace.stop();
    let calls = text.lines().filter(|l| l.contains("openat2(")).count();
    let gitdir = text.lines().filter(|l| l.contains("openat2(") && l.contains("\"repo/.git\"")).count();
    eprintln!("{RUNS} x rev-parse HEAD in {took:?}: seamfs made {calls} openat2 calls, {gitdir} of the git dir");
    assert!(calls >= RUNS, "{calls} openat2 calls for {RUNS} commands: strace saw nothing, the count is not counting");
    // One per 100 ms window at most, and one after each command's start in a new window.
    let windows = took.as_millis() as usize / 100 + 1;
    assert!(gitdir <= windows + RUNS, "seamfs opened the git dir {gitdir} times in {windows} windows of 100 ms: a parent is opened per request");
    f.m.unmount();
}

/// A read-only open of a live ref carries `FOPEN_NOFLUSH` (ADR 0008, amended): its close sends
/// seamfs nothing, where every close of `HEAD` or `config` used to send a FLUSH that seamfs
/// answered at once. Counted on seamfs's own connection.
#[test]
fn reading_a_live_ref_sends_no_flush() {
    let f = seamfs_over_repo("flush", &["--ttl", "1"]);
    let m = &f.m;
    let gitdir = m.join("repo/.git");
    sys::lstat(&gitdir.join("HEAD")).expect("lstat HEAD (walks the git dir first)");
    let trace = FuseRequests::of(m.path(), "live-flush");
    const READS: u64 = 20;
    for _ in 0..READS {
        for n in ["HEAD", "config"] {
            std::fs::read(gitdir.join(n)).unwrap_or_else(|e| panic!("read {n}: {e}"));
        }
    }
    let c = trace.counts();
    let opens = c.get("FUSE_OPEN").copied().unwrap_or(0);
    let flushes = c.get("FUSE_FLUSH").copied().unwrap_or(0);
    eprintln!("{} reads of live refs: {opens} OPENs, {flushes} FLUSHes ({c:?})", 2 * READS);
    assert!(opens >= 2 * READS, "{opens} OPENs for {} reads: every open of a live ref must reach seamfs, or the count is not counting", 2 * READS);
    assert_eq!(flushes, 0, "closing a live ref opened read-only sent seamfs {flushes} FLUSHes");
    drop(trace);
    f.m.unmount();
}

/// A ref read again is served from the kernel's page cache (ADR 0040): while the file at the
/// name is the one read before, a read of `HEAD`, a branch or `config` sends seamfs no READ,
/// where a direct read sent two (the bytes, then end of file). `packed-refs`, whose snapshot
/// git checks by `stat`, stays direct: its READs show the count counts.
#[test]
fn a_ref_read_again_is_served_from_the_page_cache() {
    let f = seamfs_over_repo("pagecache", &["--ttl", "1"]);
    let git = Git::new();
    git.run(&f.host, &["tag", "t"]);
    git.run(&f.host, &["pack-refs"]);
    let gitdir = f.m.join("repo/.git");
    const READS: u64 = 20;
    let count_reads = |name: &str| {
        let want = std::fs::read(f.host.join(".git").join(name)).expect("read the host's file");
        assert_eq!(std::fs::read(gitdir.join(name)).expect("first read"), want);
        let trace = FuseRequests::of(f.m.path(), &format!("pc-{}", name.replace('/', "-")));
        for _ in 0..READS {
            assert_eq!(std::fs::read(gitdir.join(name)).unwrap_or_else(|e| panic!("read {name}: {e}")), want, "{name} read otherwise than the host has it");
        }
        let c = trace.counts();
        eprintln!("{READS} reads of {name}: {c:?}");
        (c.get("FUSE_OPEN").copied().unwrap_or(0), c.get("FUSE_READ").copied().unwrap_or(0))
    };
    let head = std::fs::read_to_string(f.host.join(".git/HEAD")).expect("read the host's HEAD");
    let branch = head.trim().strip_prefix("ref: ").expect("HEAD names a branch").to_string();
    for name in ["HEAD", branch.as_str(), "config"] {
        let (opens, reads) = count_reads(name);
        assert!(opens >= READS, "{opens} OPENs for {READS} reads of {name}: every open of a live ref must reach seamfs");
        assert!(reads <= 1, "{reads} READs for {READS} reads of an unchanged {name}: not served from the page cache");
    }
    let (_, reads) = count_reads("packed-refs");
    assert!(reads >= READS, "{reads} READs for {READS} reads of packed-refs: it must stay direct, or the count is not counting");
    f.m.unmount();
}

/// A ref read again from the page cache opens nothing on the share (ADR 0040, with ADR 0008's
/// deferred open): while the file at the name is unchanged, seamfs answers the OPEN from a stat
/// and opens the share's file only if a read comes. `packed-refs` stays direct: it opens the
/// share's file every time, which shows the count counts.
#[test]
fn a_ref_read_again_opens_nothing_on_the_share() {
    let f = seamfs_over_fast_share("pcopen");
    let gitdir = f.m.join("repo/.git");
    let git = Git::new();
    git.run(&f.m.join("repo"), &["tag", "t"]);
    git.run(&f.m.join("repo"), &["pack-refs"]);
    const READS: u64 = 20;
    let share_opens = |name: &str| {
        std::fs::read(gitdir.join(name)).expect("first read");
        let trace = FuseRequests::of(f.s.path(), &format!("pco-{name}"));
        for _ in 0..READS {
            std::fs::read(gitdir.join(name)).unwrap_or_else(|e| panic!("read {name}: {e}"));
        }
        let (opens, all) = trace.count("FUSE_OPEN");
        eprintln!("{READS} reads of {name}: {opens} OPENs, {all} requests on the share ({:?})", trace.counts());
        opens
    };
    for name in ["HEAD", "config"] {
        let n = share_opens(name);
        assert!(n <= 1, "{READS} reads of an unchanged {name} opened it {n} times on the share");
    }
    let packed = share_opens("packed-refs");
    assert!(packed >= READS, "{READS} reads of packed-refs opened it {packed} times on the share: it must stay direct, or the count is not counting");
    f.unmount();
}

/// A ref the box reads through the page cache while the host replaces it by rename: the box's
/// open file goes on reading the file it opened, whole, even when a later open, a `stat` and a
/// read of the new file (shorter) come in between; the later open reads the new file. Serving
/// the new file as the same node (as a direct read may) would give that node the new file's
/// size, and the kernel would cut the first file's page-cache reads at it (ADR 0040).
#[test]
fn a_ref_replaced_while_read_through_the_page_cache_is_read_whole() {
    use std::io::{Read, Seek};
    let f = seamfs_over_repo("pcrename", &["--ttl", "1"]);
    let (head, host_head) = (f.m.join("repo/.git/HEAD"), f.host.join(".git/HEAD"));
    let long = format!("ref: refs/heads/{}\n", "l".repeat(60));
    let short = "ref: refs/heads/s\n".to_string();
    for round in 0..20 {
        let (first, next) = if round % 2 == 0 { (&long, &short) } else { (&short, &long) };
        let tmp = f.host.join(".git/HEAD.host-tmp");
        std::fs::write(&tmp, first).expect("write the host's HEAD");
        std::fs::rename(&tmp, &host_head).expect("rename it over HEAD");
        std::thread::sleep(std::time::Duration::from_millis(5));
        // Until the box's next open finds the new file, its entry may still be the old one.
        let mut held = loop {
            let mut f = std::fs::File::open(&head).expect("open HEAD");
            let mut s = String::new();
            f.read_to_string(&mut s).expect("read HEAD");
            if &s == first {
                break f;
            }
        };
        std::fs::write(&tmp, next).expect("write the host's next HEAD");
        std::fs::rename(&tmp, &host_head).expect("rename it over HEAD");
        let mut again = String::new();
        std::fs::File::open(&head).expect("open HEAD again").read_to_string(&mut again).expect("read HEAD again");
        assert_eq!(&again, next, "round {round}: a new open did not read the host's new HEAD");
        let size = std::fs::metadata(&head).expect("stat HEAD").len();
        assert_eq!(size, next.len() as u64, "round {round}: stat of HEAD does not describe the file at the name");
        held.rewind().expect("rewind");
        let mut old = String::new();
        held.read_to_string(&mut old).expect("read the held HEAD again");
        assert_eq!(&old, first, "round {round}: the file open before the host's rename was not read whole");
    }
    f.m.unmount();
}

/// A parent directory kept a moment (ADR 0035) that the host removes and makes anew does not
/// fail the box's next create in it. The kept fd is of the removed directory, where a create
/// meets ENOENT; seamfs answered ESTALE, the kernel walked the path again, and the create met the
/// same kept fd: the box got "Stale file handle" (`races::autostash_pull_vs_box_commits`, whose
/// host rebase removes and remakes the box's directory, failed so in CI).
#[test]
fn a_create_in_a_directory_the_host_made_anew_succeeds() {
    let f = seamfs_over_repo("remade", &["--ttl", "1"]);
    let (boxed, host) = (f.m.join("repo/d"), f.host.join("d"));
    std::fs::create_dir(&host).expect("the host makes d");
    for round in 0..5 {
        std::fs::write(boxed.join(format!("a{round}")), "box\n").expect("the box creates a file in d");
        std::fs::remove_dir_all(&host).expect("the host removes d");
        std::fs::create_dir(&host).expect("the host makes d anew");
        let b = boxed.join(format!("b{round}"));
        if let Err(e) = std::fs::write(&b, "box\n") {
            panic!("round {round}: the box's create in the directory the host made anew failed: {e}");
        }
        assert_eq!(std::fs::read_to_string(host.join(format!("b{round}"))).ok().as_deref(), Some("box\n"), "round {round}: the file is not in the host's d");
    }
}


/// An unlink, a rename and a link of a name the box's kernel still holds, in a directory the
/// host removed and made anew with that name in it, change the new directory's file. seamfs's
/// kept fd (ADR 0035) is of the removed directory, where the name is missing; the box's kernel
/// holds the name from before, so it asks seamfs without looking it up, and the box got ENOENT
/// for a file `ls` shows. A change that failed changed nothing, so it is made once more from a
/// fresh parent, as a create is.
#[test]
fn a_change_in_a_directory_the_host_made_anew_succeeds() {
    let f = seamfs_over_repo("remade-change", &["--ttl", "1"]);
    let (boxed, host) = (f.m.join("repo/d"), f.host.join("d"));
    type Step = fn(&Path) -> std::io::Result<()>;
    let steps: [(&str, Step); 3] = [
        ("unlink", |d| std::fs::remove_file(d.join("y"))),
        ("rename", |d| std::fs::rename(d.join("y"), d.join("z"))),
        ("link", |d| std::fs::hard_link(d.join("y"), d.join("z"))),
    ];
    for (what, step) in steps {
        std::fs::create_dir(&host).expect("the host makes d");
        std::fs::write(host.join("y"), "old\n").expect("the host writes d/y");
        // The box's kernel now holds d and d/y, and seamfs keeps d's fd.
        assert!(boxed.join("y").exists(), "{what}: the box does not see d/y");
        std::fs::remove_dir_all(&host).expect("the host removes d");
        std::fs::create_dir(&host).expect("the host makes d anew");
        std::fs::write(host.join("y"), "new\n").expect("the host writes the new d/y");
        if let Err(e) = step(&boxed) {
            panic!("{what} of d/y, which the host made anew, failed: {e}");
        }
        let (y, z) = (host.join("y").exists(), std::fs::read_to_string(host.join("z")).ok());
        let expected = match what {
            "unlink" => (false, None),
            "rename" => (false, Some("new\n".to_string())),
            _ => (true, Some("new\n".to_string())),
        };
        assert_eq!((y, z), expected, "{what}: the host's new d is not as the box's {what} left it (y there, z's bytes)");
        std::fs::remove_dir_all(&host).expect("the host removes d");
        // The box's kernel keeps d missing for the TTL.
        std::thread::sleep(std::time::Duration::from_millis(1100));
    }
}

/// Over a share that itself answers ESTALE for a directory its server lost (the emulator, as
/// virtiofs and NFS do), a create in a directory the host removed and made anew succeeds, and
/// one in a directory the host removed answers ENOENT, as a local directory would. seamfs's
/// kept fd of the removed directory (ADR 0035) met the share's ESTALE, which the share's kernel
/// cannot retry from a directory fd; seamfs passed it on, the kernel walked the path again, the
/// create met the same kept fd, and the box got "Stale file handle"
/// (`races::autostash_pull_vs_box_commits` failed so twice in CI).
#[test]
fn a_create_in_a_directory_the_host_removed_over_a_share_is_never_estale() {
    let backing = TempDir::new("rt-removed-backing");
    let share = TempDir::new("rt-removed-share");
    let mnt = TempDir::new("rt-removed-mnt");
    let host = repo(backing.path()).join("d");
    let s = Mount::share(backing.path(), share.path(), &[]);
    let m = Mount::seamfs(s.path(), mnt.path(), &["--ttl", "1"]);
    let boxed = m.join("repo/d");
    // The box creates `name` in d and looks up a missing name there, as git add does: seamfs
    // keeps d's fd a moment.
    let touch = |name: &str| -> std::io::Result<()> {
        std::fs::write(boxed.join(name), "box\n")?;
        assert!(!boxed.join("none").exists(), "d/none exists");
        Ok(())
    };
    for round in 0..5 {
        std::fs::create_dir(&host).expect("the host makes d");
        touch(&format!("a{round}")).expect("the box creates a file in d");
        std::fs::remove_dir_all(&host).expect("the host removes d");
        std::fs::create_dir(&host).expect("the host makes d anew");
        if let Err(e) = touch(&format!("b{round}")) {
            panic!("round {round}: the box's create in the d the host made anew failed: {e}");
        }
        assert!(host.join(format!("b{round}")).exists(), "round {round}: the box's file is not in the host's d");
        std::fs::remove_dir_all(&host).expect("the host removes d");
        match touch(&format!("c{round}")) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => panic!("round {round}: a create in the removed d failed with {e}, not ENOENT"),
            Ok(()) => panic!("round {round}: a create in the removed d succeeded"),
        }
        assert!(!host.exists(), "round {round}: the box's create made the host's d again");
        // The box's kernel keeps d missing for the TTL.
        std::thread::sleep(std::time::Duration::from_millis(1100));
    }
    m.unmount();
    s.unmount();
}

/// Before the first write to a file the kernel asks whether it carries file capabilities; for a
/// file CREATE just made seamfs answers "none" itself, in the lower's own words (ADR 0056),
/// instead of asking the share (six GETXATTRs in one box `git commit`). What the file says
/// afterwards, to a reader or once a capability is set on it, is the lower's.
#[test]
fn a_new_file_written_costs_the_share_no_capability_question() {
    let f = seamfs_over_fast_share("caps");
    let dir = f.m.join("repo");
    let backing_answer = sys::getxattr(&f.s.join("repo/a.txt"), "security.capability", 0, true).map(drop);
    assert!(backing_answer.is_err(), "a.txt on the share carries no capability: {backing_answer:?}");
    // The first new file teaches seamfs the lower's errno for a missing attribute.
    std::fs::write(dir.join("first.txt"), "1\n").expect("write first.txt");
    const FILES: u64 = 10;
    let trace = FuseRequests::of(f.s.path(), "caps");
    for i in 0..FILES {
        std::fs::write(dir.join(format!("new-{i}.txt")), "n\n").expect("write a new file");
    }
    let (asked, all) = trace.count("FUSE_GETXATTR");
    let (creates, _) = trace.count("FUSE_CREATE");
    eprintln!("{FILES} new files written: {asked} GETXATTRs, {creates} CREATEs, {all} requests on the share ({:?})", trace.counts());
    assert_eq!(creates, FILES, "each new file reached the share: the trace counts this mount");
    // The share's own kernel may ask once per file for seamfs's write to it: at most that.
    assert!(asked <= FILES, "{asked} GETXATTRs on the share for {FILES} new files: seamfs asked it about their capabilities");
    // A reader asking is told what the lower says, once the kernel's question is spent.
    let fresh = dir.join("new-0.txt");
    assert_eq!(sys::getxattr(&fresh, "security.capability", 0, true).map(drop), backing_answer, "a new file's capability reads as the share says");
    // A capability set on a fresh file (root may) is read back, from the lower.
    // `vfs_cap_data` revision 2, permitted: `cap_net_raw`.
    let cap: [u8; 20] = [0, 0, 0, 2, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let set = dir.join("setcap.txt");
    std::fs::File::create(&set).expect("create setcap.txt");
    match sys::setxattr(&set, "security.capability", &cap, 0, true) {
        Ok(()) => {
            let got = sys::getxattr(&set, "security.capability", 64, true).expect("a capability just set reads back");
            assert_eq!(got, cap, "the capability read back is the one set");
        }
        Err(e) => eprintln!("the share keeps no capabilities ({e:?}): the set-then-read half is not run"),
    }
    drop(trace);
    f.unmount();
}
