//! Issue 12's "attacker in a loop": a box process (this test binary again) swaps FIFOs, symlinks,
//! hard links and renames of `.git/HEAD`, refs, `worktrees/*` and proposal names as fast as it can, while a real
//! `seamd run` (under strace) installs proposals a planter keeps leaving and `seamd doctor`
//! (under strace too) runs again and again. The traces show every path seamd named and every
//! fd it got back; each must lie inside the checkout (past the dynamic loader's start-up).

use std::os::unix::fs::symlink;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seamfs::heal::proposal::ProposalName;
use seamfs::heal::{blob_id, HealKind};

use super::{exchange, special_at};
use crate::{git_in, Fx};

/// Installs to wait for; the planter stops early at `BUDGET`. The attack's exposure is either
/// all 1,000 installs or the whole budget with at least `MIN_INSTALLS`: the rate is the
/// machine's, not seamd's (a count within a time is a timed assertion). On the portable resolver
/// under strace a clean-clone CI run made 986 installs in 80 s one day and 621 in 150 s another;
/// `0051441`'s build, the same day, 404.
const INSTALLS: usize = 1000;
const MIN_INSTALLS: usize = 200;
const BUDGET: Duration = Duration::from_secs(150);

/// `strace` over seamd: what it traces, with timestamps, durations and fd paths (`-y`).
fn traced(trace: &Path, args: &[&str], co: &Path) -> Command {
    let mut c = Command::new("strace");
    c.args(["-f", "-q", "--seccomp-bpf", "-ttt", "-T", "-y", "-e", "trace=%file,openat2", "-o"])
        .arg(trace)
        .arg(env!("CARGO_BIN_EXE_seamd"))
        .args(args)
        .arg(co)
        .current_dir(co);
    c
}

/// `path` without `.` and `..` (lexically: the kernel's own resolution is checked separately
/// through the fd paths strace prints).
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// The loader's and std's start-up reads (the libraries, through cargo's LD_LIBRARY_PATH too, and
/// /proc/self): before seamd looks at anything of the box's.
fn startup(p: &str) -> bool {
    let exe_dir = Path::new(env!("CARGO_BIN_EXE_seamd")).parent().expect("bin dir").to_path_buf();
    let ld = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
    ["/etc/ld.so.", "/lib/", "/lib64/", "/usr/lib/", "/proc/"].iter().any(|a| p.starts_with(a))
        || Path::new(p).starts_with(&exe_dir)
        || ld.split(':').filter(|d| !d.is_empty()).any(|d| Path::new(p).starts_with(d))
}

/// What one trace shows: lines, paths outside the checkout, the longest syscall and the longest
/// silence between two, and how each traced process ended.
#[derive(Default, Debug)]
struct Trace {
    lines: usize,
    outside: Vec<String>,
    longest_call: f64,
    longest_gap: f64,
    ends: Vec<String>,
    /// The dir of every write to a name `index` or `index.lock` (create, rename, link, unlink).
    index_writes: Vec<PathBuf>,
}

/// Reads a strace `-ttt -T -y` file. Every `<fd path>` strace shows (dir fds and returned fds:
/// where the kernel really is) and every path argument joined to its dir fd must be inside `co`.
fn read_trace(file: &Path, co: &Path) -> Trace {
    let text = std::fs::read_to_string(file).expect("read trace");
    let mut t = Trace::default();
    let mut last: Option<f64> = None;
    for line in text.lines() {
        t.lines += 1;
        // `PID   TIMESTAMP call(...) = result <duration>` (strace pads the pid).
        let after_pid = line.trim_start().split_once(' ').map_or("", |(_, r)| r.trim_start());
        let (ts, rest) = after_pid.split_once(' ').map_or((None, ""), |(t, r)| (t.parse::<f64>().ok(), r));
        if let Some(ts) = ts {
            if let Some(l) = last {
                t.longest_gap = t.longest_gap.max(ts - l);
            }
            last = Some(ts);
        }
        if rest.starts_with("+++") {
            t.ends.push(rest.to_string());
            continue;
        }
        if let Some(d) = rest.rsplit_once(" <").and_then(|(_, d)| d.strip_suffix('>')).and_then(|d| d.parse::<f64>().ok()) {
            t.longest_call = t.longest_call.max(d);
        }
        if rest.starts_with("execve(") || rest.starts_with("getcwd(") {
            continue;
        }
        // `Lower::refresh`'s `link("/", name)`: a lookup of the new name that can never succeed
        // (EEXIST, EPERM, EXDEV); "/" is only its impossible source, so only the name is checked.
        let refresh = rest.starts_with("linkat(AT_FDCWD<") && rest.contains(") = -1 ");
        let rest = match rest.split_once(">, \"/\", ") {
            Some((_, name)) if refresh => format!("linkat({name}"),
            _ => rest.to_string(),
        };
        let rest = rest.as_str();
        let bad = |p: &Path, outside: &mut Vec<String>| {
            let s = p.to_string_lossy();
            // The checkout's own ancestors: canonicalizing the argument seamd was given.
            if !p.starts_with(co) && !startup(&s) && !co.starts_with(p) {
                outside.push(format!("{s}   in: {line}"));
            }
        };
        // Every `<...>` strace adds after an fd: where that fd really is.
        let mut dirs: Vec<(usize, PathBuf)> = Vec::new();
        let b = rest.as_bytes();
        let mut i = 0;
        while let Some(off) = rest[i..].find('<') {
            let at = i + off;
            let digit_before = at > 0 && (b[at - 1].is_ascii_digit() || rest[..at].ends_with("AT_FDCWD"));
            if let (true, Some(end)) = (digit_before, rest[at..].find('>')) {
                let p = PathBuf::from(&rest[at + 1..at + end]);
                bad(&p, &mut t.outside);
                dirs.push((at + end + 1, p));
                i = at + end + 1;
            } else {
                i = at + 1;
            }
        }
        // Writes of an index: the dir fd before the name.
        let writes = ["renameat2(", "linkat(", "unlinkat("].iter().any(|c| rest.starts_with(c)) || (rest.starts_with("open") && ["O_WRONLY", "O_RDWR", "O_CREAT"].iter().any(|f| rest.contains(f)));
        if writes {
            for (after, dir) in &dirs {
                if [", \"index\"", ", \"index.lock\""].iter().any(|n| rest[*after..].starts_with(n)) {
                    t.index_writes.push(dir.clone());
                }
            }
        }
        // A path argument right after a dir fd (`fd</dir>, "name"`), joined to it. Joining is
        // lexical, so a relative name must also be resolved by the kernel without links: one
        // component (or openat2's RESOLVE_NO_SYMLINKS), and no final link followed.
        let call = rest.split('(').next().unwrap_or("");
        let nofollow = ["AT_SYMLINK_NOFOLLOW", "O_NOFOLLOW"].iter().any(|f| rest.contains(f));
        let follows_last = matches!(call, "newfstatat" | "statx" | "openat" | "faccessat" | "faccessat2") && !nofollow;
        for (after, dir) in dirs {
            if let Some(s) = rest[after..].strip_prefix(", \"").and_then(|s| s.split_once('"')).map(|(s, _)| s) {
                let p = if s.starts_with('/') { PathBuf::from(s) } else { normal(&dir.join(s)) };
                bad(&p, &mut t.outside);
                if !s.starts_with('/') && !s.is_empty() && s != "." && call != "openat2" && (s.contains('/') || follows_last) {
                    t.outside.push(format!("{s}: looked up through links (not beneath, or following)   in: {line}"));
                }
            }
        }
        // Calls that take a plain path first (access, stat, readlink...): against the cwd (`co`).
        if let Some(s) = rest.split_once("(\"").and_then(|(_, s)| s.split_once('"')).map(|(s, _)| s) {
            let p = if s.starts_with('/') { PathBuf::from(s) } else { normal(&co.join(s)) };
            bad(&p, &mut t.outside);
        }
    }
    t
}

/// One box move: make `what` at a temp name, then rename it over `at` (the box's own atomic swap).
enum Thing<'a> {
    Fifo,
    Link(&'a Path),
    Hard(&'a Path),
    Bytes(&'a [u8]),
}

fn swap_in(at: &Path, what: Thing) -> bool {
    let tmp = at.with_file_name(".attack.tmp");
    let _ = std::fs::remove_file(&tmp);
    let made = match what {
        Thing::Fifo => {
            special_at(&tmp, None);
            true
        }
        Thing::Link(to) => symlink(to, &tmp).is_ok(),
        Thing::Hard(of) => std::fs::hard_link(of, &tmp).is_ok(),
        Thing::Bytes(b) => std::fs::write(&tmp, b).is_ok(),
    };
    made && std::fs::rename(&tmp, at).is_ok()
}

/// seamd's pid, from its `execve` in the trace (strace's own children include a short-lived
/// probe of seccomp, so its first child is not always seamd); checked against /proc.
fn traced_pid(trace: &Path) -> Option<libc::pid_t> {
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        let text = std::fs::read_to_string(trace).unwrap_or_default();
        let pid = text.lines().find(|l| l.contains("execve(") && l.contains(" = 0 ")).and_then(|l| l.split_whitespace().next()).and_then(|p| p.parse().ok());
        if let Some(p) = pid {
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            return String::from_utf8_lossy(&cmd).contains("seamd").then_some(p);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}

/// seamd under strace; if the test fails midway, both are ended by pid so nothing outlives it.
struct Traced {
    strace: std::process::Child,
    seamd: libc::pid_t,
}

impl Drop for Traced {
    fn drop(&mut self) {
        if self.strace.try_wait().ok().flatten().is_none() {
            // SAFETY: the seamd this test started under strace, by its pid.
            unsafe { libc::kill(self.seamd, libc::SIGKILL) };
            let _ = self.strace.kill();
            let _ = self.strace.wait();
        }
    }
}

/// Every file in a tree, with its bytes (links as their targets).
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("list").map(|e| e.expect("entry")) {
            let (p, ft) = (e.path(), e.file_type().expect("type"));
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_symlink() {
                out.push((p.clone(), std::fs::read_link(&p).expect("readlink").into_os_string().into_encoded_bytes()));
            } else {
                out.push((p.clone(), std::fs::read(&p).expect("read")));
            }
        }
    }
    out.sort();
    out
}

/// The env var that makes `attacker_process` attack: its paths, one a line.
const ATTACK: &str = "SEAM_TEST_ATTACK";

/// Not a test of its own: the box process `an_attacker_in_a_loop_...` starts (this binary
/// again, with `ATTACK` set). Swaps until the stop file exists, then prints what it did.
#[test]
#[ignore = "the attacker process of an_attacker_in_a_loop_never_leads_seamd_outside_the_checkout"]
fn attacker_process() {
    let Ok(spec) = std::env::var(ATTACK) else { return };
    let p: Vec<PathBuf> = spec.lines().map(PathBuf::from).collect();
    let (stop, gd, dg, wts, new, pname, fakes) = (&p[0], &p[1], &p[2], &p[3..5], p[5].to_string_lossy().into_owned(), p[6].clone(), &p[7..11]);
    let (mut swaps, mut rounds) = (0u64, 0u64);
    let head_ref = b"ref: refs/heads/main\n".as_slice();
    let main_oid = format!("{new}\n");
    let (main_ref, wt_head) = (gd.join("refs/heads/main"), wts[0].join("HEAD"));
    let wt_head_bytes = std::fs::read(&wt_head).expect("wt HEAD");
    let away = gd.join("worktrees/wt.away");
    while !stop.exists() {
        let moves: [bool; 20] = [
            // HEAD: a FIFO, a link out, a hard link of the decoy's, a ref through a link.
            swap_in(&gd.join("HEAD"), Thing::Fifo),
            swap_in(&gd.join("HEAD"), Thing::Link(&dg.join("HEAD"))),
            swap_in(&gd.join("HEAD"), Thing::Hard(&dg.join("HEAD"))),
            swap_in(&gd.join("HEAD"), Thing::Bytes(b"ref: refs/heads/x/main\n")),
            swap_in(&gd.join("HEAD"), Thing::Bytes(head_ref)),
            // The branch: a link out, a FIFO; packed-refs a FIFO; then back.
            swap_in(&main_ref, Thing::Link(&dg.join("refs/heads/main"))),
            swap_in(&main_ref, Thing::Fifo),
            swap_in(&gd.join("packed-refs"), Thing::Fifo),
            std::fs::remove_file(gd.join("packed-refs")).is_ok(),
            swap_in(&main_ref, Thing::Bytes(main_oid.as_bytes())),
            // Worktrees: exchanged, one replaced by a link out, its HEAD a FIFO.
            { exchange(&wts[0], &wts[1]); true },
            std::fs::rename(&wts[0], &away).is_ok() && symlink(dg, &wts[0]).is_ok(),
            std::fs::remove_file(&wts[0]).is_ok() && std::fs::rename(&away, &wts[0]).is_ok(),
            { exchange(&wts[0], &wts[1]); true },
            swap_in(&wt_head, Thing::Fifo) && swap_in(&wt_head, Thing::Bytes(&wt_head_bytes)),
            // Proposal names: a link out, a FIFO, a hard link of the decoy's index, a
            // rename; the real proposal hard-linked into a worktree.
            swap_in(&fakes[0], Thing::Link(&dg.join("index"))),
            swap_in(&fakes[1], Thing::Fifo),
            swap_in(&fakes[2], Thing::Hard(&dg.join("index"))),
            std::fs::rename(&fakes[2], &fakes[3]).is_ok(),
            std::fs::hard_link(gd.join(&pname), wts[0].join(&pname)).is_ok(),
        ];
        swaps += moves.iter().filter(|&&m| m).count() as u64;
        rounds += 1;
    }
    println!("ATTACK swaps={swaps} rounds={rounds}");
}

/// The attacker process; ended by its pid if the test fails before it stopped.
struct Attacker(std::process::Child);

impl Drop for Attacker {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Waits (up to 5 s) for the attacker told to stop, SIGKILLs it by pid if it did not; its counts.
fn end_attacker(a: &mut Attacker) -> (u64, u64) {
    let t0 = Instant::now();
    while a.0.try_wait().expect("wait attacker").is_none() && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    if a.0.try_wait().expect("wait attacker").is_none() {
        let _ = a.0.kill();
    }
    let status = a.0.wait().expect("wait attacker");
    let mut text = String::new();
    let _ = std::io::Read::read_to_string(&mut a.0.stdout.take().expect("piped stdout"), &mut text);
    let line = text.lines().find_map(|l| l.split_once("ATTACK ").map(|(_, r)| r)).unwrap_or_else(|| panic!("the attacker said nothing ({status:?}):\n{text}"));
    let num = |k: &str| line.split_whitespace().find_map(|w| w.strip_prefix(k)).and_then(|n| n.parse().ok()).expect("a count");
    (num("swaps="), num("rounds="))
}

#[test]
fn an_attacker_in_a_loop_never_leads_seamd_outside_the_checkout() {
    let fx = Fx::new();
    let co = fx.co.canonicalize().expect("canonical checkout");
    let gd = co.join(".git");
    // A decoy repo outside the checkout: every link the attacker makes points into it.
    let decoy = fx.root.join("decoy");
    std::fs::create_dir_all(&decoy).expect("mkdir decoy");
    git_in(&decoy, None, &["init", "-q", "-b", "main"]);
    std::fs::write(decoy.join("d"), "decoy\n").expect("write");
    git_in(&decoy, None, &["add", "d"]);
    git_in(&decoy, None, &["commit", "-q", "-m", "decoy"]);
    let dg = decoy.join(".git");
    // Two worktrees whose indexes seamd must never write (no proposal is ever right for them).
    let mut wts = Vec::new();
    for w in ["wt", "wt2"] {
        let dir = fx.root.join(w);
        fx.git(&["worktree", "add", "-q", "-b", w, &dir.to_string_lossy()]);
        std::fs::write(dir.join("a"), format!("{w}\n")).expect("write");
        git_in(&dir, None, &["commit", "-q", "-am", w]);
        wts.push(gd.join("worktrees").join(w));
    }
    let old_index = fx.index();
    let new = fx.box_commit("box\n");
    let (proposal, bytes) = fx.propose(&fx.base, &new);
    let pname = proposal.file_name().expect("name").to_owned();
    let before_decoy = snapshot(&dg);
    let before_wts: Vec<Vec<u8>> = wts.iter().map(|w| std::fs::read(w.join("index")).expect("wt index")).collect();
    symlink(dg.join("refs/heads"), gd.join("refs/heads/x")).expect("symlink refs/heads/x");
    let fake = |i: u32| gd.join(ProposalName { head: format!("{i:040x}"), base: blob_id(&old_index, gix::hash::Kind::Sha1), kind: HealKind::Ff }.file_name());

    // The attacker: this test binary again, as its own process (the box's), ended by its pid.
    let stop_file = fx.root.join("attack.stop");
    let fakes: Vec<PathBuf> = (1..=4).map(fake).collect();
    let mut spec = vec![stop_file.clone(), gd.clone(), dg.clone(), wts[0].clone(), wts[1].clone(), PathBuf::from(&new), PathBuf::from(&pname)];
    spec.extend(fakes);
    let mut attacker = Attacker(Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "hostile::attacker::attacker_process", "--ignored", "--nocapture", "--test-threads", "1"])
        .env(ATTACK, spec.iter().map(|p| p.to_string_lossy()).collect::<Vec<_>>().join("\n"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the attacker"));
    let stop = Arc::new(AtomicBool::new(false));

    let trace = fx.root.join("seamd-run.trace");
    let log = fx.root.join("seamd-run.log");
    let strace = traced(&trace, &["run", "--interval-ms", "10"], &co)
        .stderr(std::fs::File::create(&log).expect("create log"))
        .stdout(Stdio::null())
        .spawn()
        .expect("strace is needed for this test");
    let seamd_pid = traced_pid(&trace).expect("seamd never started under strace");
    let mut daemon = Traced { strace, seamd: seamd_pid };

    let doctors = {
        let (stop, co, root) = (stop.clone(), co.clone(), fx.root.clone());
        std::thread::spawn(move || {
            let mut runs = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let t = root.join(format!("doctor-{}.trace", runs.len()));
                let t0 = Instant::now();
                let out = traced(&t, &["doctor"], &co).output().expect("run doctor under strace");
                runs.push((t, t0.elapsed(), out.status));
                // Again and again, but leaving the two cores to seamd and the attacker.
                std::thread::sleep(Duration::from_millis(25));
            }
            runs
        })
    };

    // The planter: each time seamd spent the proposal, the index is its base again and the
    // proposal is back.
    let installed = || std::fs::read_to_string(&log).unwrap_or_default().matches("installed (").count();
    let t0 = Instant::now();
    let planted = AtomicU64::new(0);
    while installed() < INSTALLS && t0.elapsed() < BUDGET && daemon.strace.try_wait().expect("wait").is_none() {
        if !proposal.exists() {
            std::fs::write(gd.join("index.test-tmp"), &old_index).expect("write");
            std::fs::rename(gd.join("index.test-tmp"), gd.join("index")).expect("rename");
            std::fs::write(gd.join("index.seam-tmp.test"), &bytes).expect("write");
            std::fs::rename(gd.join("index.seam-tmp.test"), &proposal).expect("rename");
            planted.fetch_add(1, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let elapsed = t0.elapsed();
    stop.store(true, Ordering::Relaxed);
    std::fs::write(&stop_file, b"").expect("stop the attacker");
    let (swaps, rounds) = end_attacker(&mut attacker);
    let doctor_runs = doctors.join().expect("doctor loop");
    // SAFETY: SIGTERM to the seamd strace started, by its pid.
    unsafe { libc::kill(seamd_pid, libc::SIGTERM) };
    let t_term = Instant::now();
    while daemon.strace.try_wait().expect("wait strace").is_none() && t_term.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let term_took = t_term.elapsed();
    if daemon.strace.try_wait().expect("wait strace").is_none() {
        // SAFETY: our own children, by pid.
        unsafe { libc::kill(seamd_pid, libc::SIGKILL) };
        let _ = daemon.strace.kill();
        let _ = daemon.strace.wait();
    }

    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let installs = text.matches("installed (").count();
    let run = read_trace(&trace, &co);
    let mut outside = run.outside.clone();
    let (mut doctor_call, mut doctor_gap, mut doctor_wall, mut doctor_bad) = (0f64, 0f64, Duration::ZERO, Vec::new());
    for (t, wall, status) in &doctor_runs {
        let d = read_trace(t, &co);
        outside.extend(d.outside);
        doctor_call = doctor_call.max(d.longest_call);
        doctor_gap = doctor_gap.max(d.longest_gap);
        doctor_wall = doctor_wall.max(*wall);
        if status.code().is_none() || !d.ends.iter().all(|e| e.starts_with("+++ exited with")) {
            doctor_bad.push(format!("{}: {status:?} {:?}", t.display(), d.ends));
        }
    }
    eprintln!(
        "attacker: {swaps} swaps in {rounds} rounds; seamd run: {installs} installs ({} planted) in {elapsed:?}, {} traced calls, longest call {:.3} s, longest silence {:.3} s, SIGTERM took {term_took:?}, ends {:?}; doctor: {} runs, longest call {doctor_call:.3} s, longest silence {doctor_gap:.3} s, longest run {doctor_wall:?}; {} index writes, all in {}",
        planted.load(Ordering::Relaxed),
        run.lines,
        run.longest_call,
        run.longest_gap,
        run.ends,
        doctor_runs.len(),
        run.index_writes.len(),
        gd.display()
    );
    let refusals: Vec<&str> = text.lines().filter(|l| !l.contains("installed (")).take(12).collect();
    eprintln!("some other log lines:\n{}", refusals.join("\n"));

    // The attack happened, and so did the work under it.
    assert!(rounds >= 100 && swaps >= rounds * 15, "the attacker barely ran: {swaps} swaps in {rounds} rounds");
    assert!(doctor_runs.len() >= 5, "doctor ran only {} times", doctor_runs.len());
    let exposed = installs >= INSTALLS || (elapsed >= BUDGET && installs >= MIN_INSTALLS);
    assert!(exposed, "only {installs} installs in {elapsed:?}:\n{}", text.lines().rev().take(30).collect::<Vec<_>>().join("\n"));
    // Never outside the checkout.
    assert!(outside.is_empty(), "{} lookups outside the checkout, first:\n{}", outside.len(), outside.iter().take(10).cloned().collect::<Vec<_>>().join("\n"));
    // Never blocked: no traced call and no silence of 1 s (seamd passes every 10 ms).
    assert!(run.longest_call < 1.0 && run.longest_gap < 1.0, "seamd run blocked: call {:.3} s, silence {:.3} s", run.longest_call, run.longest_gap);
    assert!(doctor_call < 1.0 && doctor_gap < 1.0, "seamd doctor blocked: call {doctor_call:.3} s, silence {doctor_gap:.3} s");
    // Never crashed: seamd ended on SIGTERM with its own exit, and so did every doctor.
    assert!(term_took < Duration::from_secs(1), "seamd took {term_took:?} to end on SIGTERM");
    assert_eq!(run.ends.len(), 1, "{:?}", run.ends);
    assert!(run.ends[0].starts_with("+++ exited with 0"), "seamd ended {:?}", run.ends);
    assert!(doctor_bad.is_empty(), "doctor crashed or was killed: {doctor_bad:?}");
    // Never wrote another index, never left a lock.
    let (into_main, elsewhere): (Vec<_>, Vec<_>) = run.index_writes.iter().partition(|d| **d == gd);
    assert!(elsewhere.is_empty(), "seamd wrote an index outside {}: {elsewhere:?}", gd.display());
    assert!(into_main.len() >= installs, "only {} index writes traced for {installs} installs", into_main.len());
    assert_eq!(snapshot(&dg), before_decoy, "the decoy repo outside the checkout changed");
    for (w, b) in wts.iter().zip(&before_wts) {
        assert_eq!(&std::fs::read(w.join("index")).expect("wt index"), b, "{}'s index was written", w.display());
    }
    for g in [gd.clone(), wts[0].clone(), wts[1].clone()] {
        assert!(!g.join("index.lock").exists(), "{} left behind", g.join("index.lock").display());
    }
}
