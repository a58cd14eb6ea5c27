//! A hostile box against a running seamd (issue 12): FIFOs and devices where refs should be,
//! HEAD swapped under an install. seamd must never block, never leave `index.lock`, and end on
//! SIGTERM within a second.

use std::ffi::CString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seamd::install::{Hooks, Verdict};
use seamfs::heal::proposal::ProposalName;

use super::Fx;

/// `mkfifo` (or `mknod` of the char device `dev`) at `path`, replacing what is there.
fn special_at(path: &Path, dev: Option<libc::dev_t>) {
    let _ = std::fs::remove_file(path);
    let c = CString::new(path.as_os_str().as_encoded_bytes()).expect("no NUL");
    // SAFETY: a valid C path.
    let r = unsafe {
        match dev {
            None => libc::mkfifo(c.as_ptr(), 0o644),
            Some(d) => libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o644, d),
        }
    };
    assert_eq!(r, 0, "make a special file at {}: {}", path.display(), std::io::Error::last_os_error());
}

/// `seamd run` in the background, its stderr in a file.
struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Daemon {
    fn start(fx: &Fx, interval_ms: u32) -> Daemon {
        let log = fx.root.join(format!("seamd-{}.log", super::SEQ.fetch_add(1, Ordering::Relaxed)));
        let child = Command::new(env!("CARGO_BIN_EXE_seamd"))
            .args(["run", "--interval-ms", &interval_ms.to_string()])
            .arg(&fx.co)
            .stderr(std::fs::File::create(&log).expect("create log"))
            .stdout(Stdio::null())
            .spawn()
            .expect("start seamd");
        Daemon { child, log }
    }

    fn log(&self) -> String {
        let mut s = String::new();
        let _ = std::fs::File::open(&self.log).and_then(|mut f| f.read_to_string(&mut s));
        s
    }

    /// Waits up to `within` for a log line containing `what`.
    fn wait_for(&self, what: &str, within: Duration) -> bool {
        let until = Instant::now() + within;
        while Instant::now() < until {
            if self.log().contains(what) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    /// SIGTERM; how long seamd took to exit (None: still running after 1 s, then SIGKILLed).
    fn terminate(mut self) -> Option<Duration> {
        let t0 = Instant::now();
        // SAFETY: signalling the child we started, by its pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        while t0.elapsed() < Duration::from_secs(1) {
            if self.child.try_wait().expect("wait seamd").is_some() {
                return Some(t0.elapsed());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A FIFO as HEAD's branch: seamd says so within 1 s (old seamd blocked in `open` for good),
/// SIGTERM ends it, and no lock is left.
#[test]
fn a_fifo_as_heads_branch_never_blocks_seamd() {
    let fx = Fx::new();
    let new = fx.box_commit("box\n");
    let (path, _) = fx.propose(&fx.base, &new);
    let before = fx.index();
    special_at(&fx.gitdir().join("refs/heads/main"), None);
    let d = Daemon::start(&fx, 20);
    let said = d.wait_for("a FIFO, not a regular file", Duration::from_secs(1));
    let log = d.log();
    let took = d.terminate();
    eprintln!("seamd log:\n{log}\nSIGTERM ended it after {took:?}");
    assert!(said, "seamd did not report the FIFO within 1 s (blocked?):\n{log}");
    assert!(took.is_some(), "seamd did not end within 1 s of SIGTERM:\n{log}");
    assert!(!fx.gitdir().join("index.lock").exists(), "index.lock left behind");
    assert_eq!(fx.index(), before, "nothing installed on an unreadable HEAD");
    assert!(path.exists(), "the proposal waits for a readable HEAD");
}

/// A character device as HEAD's branch is never opened (only looked at: through `O_PATH`, or
/// with the portable resolver by `lstat`): strace shows every open and stat of its name.
#[test]
fn a_device_as_heads_branch_is_never_opened() {
    let fx = Fx::new();
    let new = fx.box_commit("box\n");
    fx.propose(&fx.base, &new);
    // /dev/null's numbers: harmless if opened, and strace tells whether it was.
    special_at(&fx.gitdir().join("refs/heads/main"), Some(libc::makedev(1, 3)));
    let trace = fx.root.join("strace-open.out");
    let out = Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=open,openat,openat2,newfstatat,statx", "-o"])
        .arg(&trace)
        .arg(env!("CARGO_BIN_EXE_seamd"))
        .args(["run", "--once"])
        .arg(&fx.co)
        .output()
        .expect("strace is needed for this test: apt-get install -y strace");
    let text = std::fs::read_to_string(&trace).expect("read trace");
    // The portable resolver descends a name at a time: the last call names `main` alone.
    let seen: Vec<&str> = text.lines().filter(|l| l.contains("refs/heads/main") || l.contains("\"main\"")).collect();
    eprintln!("opens and stats of refs/heads/main:\n{}\nseamd: {}", seen.join("\n"), String::from_utf8_lossy(&out.stderr));
    assert!(!seen.is_empty(), "seamd never looked at HEAD's branch: the test proves nothing\n{text}");
    for l in seen.iter().filter(|l| l.contains("open")) {
        // The portable resolver has no O_PATH: it must not open the name at all.
        assert!(!seamfs::lower::PORTABLE && l.contains("O_PATH"), "the device was opened for real: {l}");
    }
    assert!(String::from_utf8_lossy(&out.stderr).contains("a character device, not a regular file"), "{:?}", out);
    assert!(!fx.gitdir().join("index.lock").exists(), "index.lock left behind");
}

/// An attacker swaps HEAD between a file and a FIFO as fast as it can while seamd installs
/// proposals that a helper keeps planting: seamd keeps installing, ends on SIGTERM within 1 s,
/// and leaves no lock. Old seamd hung in `open` of the FIFO, often holding `index.lock`.
#[test]
fn head_toggling_to_a_fifo_under_installs_never_hangs_seamd() {
    let fx = Fx::new();
    let old_index = fx.index();
    let new = fx.box_commit("box\n");
    let (proposal, bytes) = fx.propose(&fx.base, &new);
    let gd = fx.gitdir();
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = {
        let (gd, stop) = (gd.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                special_at(&gd.join("HEAD.fifo"), None);
                let _ = std::fs::rename(gd.join("HEAD.fifo"), gd.join("HEAD"));
                std::fs::write(gd.join("HEAD.file"), "ref: refs/heads/main\n").expect("write");
                let _ = std::fs::rename(gd.join("HEAD.file"), gd.join("HEAD"));
                n += 1;
            }
            n
        })
    };
    let d = Daemon::start(&fx, 10);
    let t0 = Instant::now();
    let mut planted = 0;
    while t0.elapsed() < Duration::from_secs(3) {
        // Each time seamd spent the proposal, make the index its base again and plant it anew.
        if !proposal.exists() {
            std::fs::write(gd.join("index.test-tmp"), &old_index).expect("write");
            std::fs::rename(gd.join("index.test-tmp"), gd.join("index")).expect("rename");
            std::fs::write(gd.join("index.seam-tmp.test"), &bytes).expect("write");
            std::fs::rename(gd.join("index.seam-tmp.test"), &proposal).expect("rename");
            planted += 1;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    let n = swaps.join().expect("swapper");
    std::fs::write(gd.join("HEAD"), "ref: refs/heads/main\n").expect("restore HEAD");
    let log = d.log();
    let took = d.terminate();
    // An install, or an install undone because HEAD read as a FIFO right after the write.
    let installs = log.matches("installed (").count() + log.matches("installed, then HEAD moved").count();
    let fifos = log.matches("a FIFO, not a regular file").count();
    eprintln!("{n} HEAD swaps; {planted} proposals planted again; {installs} installs, {fifos} FIFO refusals logged; SIGTERM took {took:?}");
    assert!(took.is_some(), "seamd did not end within 1 s of SIGTERM (blocked on the FIFO?):\n{log}");
    assert!(installs >= 1, "no install happened in 3 s of swaps (seamd blocked, or the test proves nothing)\n{log}");
    assert!(!gd.join("index.lock").exists(), "index.lock left behind");
}

/// `refs/heads/a` -> `ref: refs/heads/b` -> `ref: refs/heads/a`, HEAD on `a`: seamd says so and
/// exits normally (old seamd overflowed its stack and aborted: no `Drop` ran).
#[test]
fn a_symref_cycle_does_not_crash_seamd() {
    let fx = Fx::new();
    let new = fx.box_commit("box\n");
    let (path, _) = fx.propose(&fx.base, &new);
    let before = fx.index();
    std::fs::write(fx.gitdir().join("refs/heads/a"), "ref: refs/heads/b\n").expect("write a");
    std::fs::write(fx.gitdir().join("refs/heads/b"), "ref: refs/heads/a\n").expect("write b");
    std::fs::write(fx.gitdir().join("HEAD"), "ref: refs/heads/a\n").expect("write HEAD");
    let out = fx.run_once();
    assert!(out.status.code().is_some(), "seamd was killed by a signal: {:?}", out.status);
    assert!(super::stderr(&out).contains("symbolic refs nested deeper than 5"), "{}", super::stderr(&out));
    assert_eq!(fx.index(), before, "nothing installed on an unresolvable HEAD");
    assert!(path.exists(), "the proposal waits");
    assert!(!fx.gitdir().join("index.lock").exists(), "index.lock left behind");
}

/// The commands doctor prints after `: rm -- ` in its output, one per row.
fn rm_commands(text: &str) -> Vec<String> {
    text.lines().filter_map(|l| l.split_once(": rm -- ").map(|(_, w)| format!("rm -- {w}"))).collect()
}

/// A malformed proposal and an old lock whose names hold `'$(touch x)'` and a newline: doctor
/// prints each on one row (no forged rows), and each `rm` it prints, run by bash, removes
/// exactly that file and runs nothing (old doctor put the raw name inside `'...'`).
#[test]
fn doctor_quotes_hostile_names() {
    let fx = Fx::new();
    let gd = fx.gitdir();
    let marker = fx.co.join("x");
    let proposal = gd.join("index.seam-proposed.'$(touch x)'\nwarn  .git: forged row");
    std::fs::write(&proposal, b"junk").expect("write the proposal");
    let lock = gd.join("refs/heads/a'$(touch x)'\ninfo  forged.lock");
    std::fs::write(&lock, b"").expect("write the lock");
    let old = std::time::SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::options().write(true).open(&lock).expect("open").set_modified(old).expect("age the lock");
    let out = fx.seamd(&["doctor"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{text}");
    for l in text.lines() {
        let row = l.starts_with("info  ") || l.starts_with("warn  ") || l.starts_with("       fix: ");
        assert!(row || l.starts_with("seamd doctor: "), "a forged or broken row: {l:?}\n{text}");
    }
    assert!(!text.contains("forged row\n") && !text.contains("\ninfo  forged"), "a name's newline reached the output:\n{text}");
    let cmds = rm_commands(&text);
    assert_eq!(cmds.len(), 2, "one rm per hostile name:\n{text}");
    for cmd in &cmds {
        let ran = Command::new("bash").arg("-c").arg(cmd).current_dir(&fx.co).output().expect("run bash");
        assert!(ran.status.success(), "{cmd}: {}", String::from_utf8_lossy(&ran.stderr));
    }
    assert!(!marker.exists(), "pasting doctor's command ran the name's $(touch x)");
    assert!(!proposal.exists() && !lock.exists(), "the printed commands did not remove the named files");
}

/// The same names through `seamd run`'s log: one line per name, escaped.
#[test]
fn seamd_log_escapes_hostile_names() {
    let fx = Fx::new();
    let name = "index.seam-proposed.'$(touch x)'\nseamd: forged line";
    std::fs::write(fx.gitdir().join(name), b"junk").expect("write");
    let out = fx.run_once();
    let log = super::stderr(&out);
    assert!(log.contains(r"index.seam-proposed.'$(touch x)'\nseamd: forged line: malformed"), "{log}");
    assert!(!log.lines().any(|l| l.starts_with("seamd: forged line")), "a forged log line:\n{log}");
}

/// An atomic swap of two paths: `renameat2(RENAME_EXCHANGE)`, on macOS `renamex_np(RENAME_SWAP)`.
fn exchange(a: &Path, b: &Path) {
    let (ca, cb) = (CString::new(a.as_os_str().as_encoded_bytes()).expect("no NUL"), CString::new(b.as_os_str().as_encoded_bytes()).expect("no NUL"));
    // SAFETY: valid C strings.
    #[cfg(target_os = "linux")]
    let r = unsafe { libc::renameat2(libc::AT_FDCWD, ca.as_ptr(), libc::AT_FDCWD, cb.as_ptr(), libc::RENAME_EXCHANGE) };
    // SAFETY: valid C strings.
    #[cfg(target_os = "macos")]
    let r = unsafe { libc::renamex_np(ca.as_ptr(), cb.as_ptr(), libc::RENAME_SWAP) };
    assert_eq!(r, 0, "exchange {} and {}: {}", a.display(), b.display(), std::io::Error::last_os_error());
}

/// Worktrees `a` (HEAD on the base) and `b` (HEAD on a box commit), and a proposal in `a` made
/// for `b`'s HEAD over `a`'s index. The box swaps `worktrees/a` and `worktrees/b` after seamd
/// listed them: seamd must judge `a`'s proposal by `a`'s HEAD, through the fd it installs by, and
/// prune it (old seamd read HEAD by path, found `b`'s, and installed into `a`'s index).
#[test]
fn a_worktree_swap_mid_pass_never_installs_into_the_other_index() {
    let fx = Fx::new();
    let (wa, wb) = (fx.root.join("wa"), fx.root.join("wb"));
    fx.git(&["worktree", "add", "-q", "-b", "wa", &wa.to_string_lossy()]);
    fx.git(&["worktree", "add", "-q", "-b", "wb", &wb.to_string_lossy()]);
    std::fs::write(wb.join("a"), "b's\n").expect("write");
    super::git_in(&wb, None, &["commit", "-q", "-am", "on b"]);
    let b_head = super::git_in(&wb, None, &["rev-parse", "HEAD"]).trim().to_string();
    let (ga, gb) = (fx.gitdir().join("worktrees/wa"), fx.gitdir().join("worktrees/wb"));
    let a_index = std::fs::read(ga.join("index")).expect("a's index");
    let objects = fx.gitdir().join("objects");
    let out = seamfs::heal::heal(&objects, &a_index, &fx.base, &b_head).expect("heal");
    let seamfs::heal::HealOutcome::Healed { bytes, kind } = out else { panic!("{out:?}") };
    let name = ProposalName { head: b_head.clone(), base: seamfs::heal::blob_id(&a_index, gix::hash::Kind::Sha1), kind }.file_name();
    std::fs::write(ga.join(&name), &bytes).expect("write the proposal");
    let swapped = Arc::new(AtomicBool::new(false));
    let hooks = Hooks {
        before_check: Some(Box::new({
            let (ga, gb, swapped) = (ga.clone(), gb.clone(), swapped.clone());
            move |rel: &Path| {
                if rel.ends_with("wa") && !swapped.swap(true, Ordering::Relaxed) {
                    exchange(&ga, &gb);
                }
            }
        })),
        ..Default::default()
    };
    let verdicts = super::one_pass(&fx, &hooks);
    eprintln!("verdicts: {verdicts:?}");
    assert!(swapped.load(Ordering::Relaxed), "the swap never happened: the test proves nothing");
    // a's git dir is now at worktrees/wb.
    assert_eq!(std::fs::read(gb.join("index")).expect("a's index"), a_index, "b's HEAD was checked and a's index replaced");
    assert!(matches!(&verdicts[..], [(_, _, Verdict::Stale(_))]), "{verdicts:?}");
}

/// `seamd run --once` on `fx` under `strace -e trace=openat,openat2`; the trace.
fn traced_opens(fx: &Fx) -> String {
    let trace = fx.root.join(format!("strace-{}.out", super::SEQ.fetch_add(1, Ordering::Relaxed)));
    let out = Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=openat,openat2", "-o"])
        .arg(&trace)
        .arg(env!("CARGO_BIN_EXE_seamd"))
        .args(["run", "--once"])
        .arg(&fx.co)
        .output()
        .expect("strace is needed for this test");
    eprintln!("seamd: {}", String::from_utf8_lossy(&out.stderr));
    std::fs::read_to_string(&trace).expect("read trace")
}

/// While a host operation is in progress seamd passes every 250 ms: the proposal (up to
/// 256 MiB) is not opened at all (old seamd read and hashed it whole each pass first).
#[test]
fn an_operation_in_progress_costs_no_read_of_the_proposal() {
    let fx = Fx::new();
    let new = fx.box_commit("box\n");
    let (path, _) = fx.propose(&fx.base, &new);
    std::fs::create_dir(fx.gitdir().join("rebase-merge")).expect("mkdir");
    let text = traced_opens(&fx);
    let name = path.file_name().expect("name").to_string_lossy().into_owned();
    let opens: Vec<&str> = text.lines().filter(|l| l.contains(&name)).collect();
    let listed = text.lines().any(|l| l.contains("\".\"") && l.contains("O_DIRECTORY") && !l.contains("O_PATH"));
    assert!(listed, "seamd never listed the git dir: the trace shows nothing\n{text}");
    assert!(opens.is_empty(), "the proposal was opened while an operation is in progress:\n{}", opens.join("\n"));
    assert!(path.exists(), "left for later");
}

/// Twenty stale proposals are pruned with a bounded number of listings of the git dir (old
/// seamd listed it again for each one: quadratic in the number of proposals).
#[test]
fn pruning_many_proposals_lists_the_git_dir_a_bounded_number_of_times() {
    let fx = Fx::new();
    let index = fx.index();
    for i in 0..20 {
        let head = format!("{i:040x}");
        let name = ProposalName { head, base: seamfs::heal::blob_id(&index, gix::hash::Kind::Sha1), kind: seamfs::heal::HealKind::Ff }.file_name();
        std::fs::write(fx.gitdir().join(name), &index).expect("write");
    }
    let text = traced_opens(&fx);
    let listings = text.lines().filter(|l| l.contains("\".\"") && l.contains("O_DIRECTORY") && !l.contains("O_PATH")).count();
    eprintln!("{listings} listings of a git dir for 20 pruned proposals");
    assert!(fx.proposals_left(&fx.gitdir()).is_empty(), "not all pruned");
    assert!(listings <= 4, "{listings} listings for 20 proposals:\n{text}");
}

/// An `index.lock` left by a crash an hour ago: seamd says it may be one and prints the command
/// that removes it (old seamd said only "a host git is running", pass after pass).
#[test]
fn a_stale_index_lock_is_named_with_its_remedy() {
    let fx = Fx::new();
    let new = fx.box_commit("box\n");
    let (path, bytes) = fx.propose(&fx.base, &new);
    let lock = fx.gitdir().join("index.lock");
    std::fs::write(&lock, b"").expect("write the lock");
    let log = super::stderr(&fx.run_once());
    let cmd = log.lines().find_map(|l| l.split_once(": rm -- ").map(|(_, w)| format!("rm -- {w}"))).unwrap_or_else(|| panic!("no remedy printed:\n{log}"));
    assert!(log.contains("left by a crash"), "{log}");
    let ran = Command::new("bash").arg("-c").arg(&cmd).output().expect("bash");
    assert!(ran.status.success() && !lock.exists(), "{cmd} did not remove the lock");
    assert!(path.exists(), "nothing installed while the lock was there");
    fx.run_once();
    assert_eq!(fx.index(), bytes, "installed once the lock was gone");
}
mod attacker;

/// A symlink in the middle of a path (`refs/heads` -> a directory outside holding `main`) is
/// never followed, by either resolver: HEAD's branch reads as unresolvable, nothing is
/// installed, and the outside directory is not touched.
#[test]
fn a_symlinked_refs_dir_mid_path_is_never_followed() {
    let fx = Fx::new();
    let new = fx.box_commit("box\n");
    let (path, _) = fx.propose(&fx.base, &new);
    let heads = fx.gitdir().join("refs/heads");
    let outside = fx.root.join("outside-heads");
    std::fs::rename(&heads, &outside).expect("move refs/heads out");
    std::os::unix::fs::symlink(&outside, &heads).expect("symlink refs/heads");
    let ref_before = std::fs::read(outside.join("main")).expect("the outside main");
    let before = fx.index();
    let out = fx.run_once();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refs/heads/main"), "seamd did not name the branch it could not read:\n{err}");
    assert!(err.contains("symbolic links"), "not refused as a link (ELOOP), under either resolver:\n{err}");
    assert_eq!(fx.index(), before, "nothing installed through a linked refs dir");
    assert!(path.exists(), "the proposal waits");
    assert_eq!(std::fs::read(outside.join("main")).expect("outside main"), ref_before, "the outside ref untouched");
    assert!(!fx.gitdir().join("index.lock").exists(), "index.lock left behind");
}
