//! Helpers shared by the index-split, locks, ref-move and heal tests: a host (the backing dir)
//! and a box (a seamfs mount over it) working on the same repository, and a scripted "slow git"
//! child process for the judging, which is per process.
//!
//! - [`Env`]: the backing dir, the mount (with `--log`) and a clean-environment git runner.
//! - [`Repo`]: one repository seen from both sides (`host` on the backing dir, `boxed` through
//!   the mount); host git runs on the former, box git on the latter.
//! - [`Child`]: this test binary re-executed (`child_process_entry`) to run a small script of
//!   reads, waits, lock creates and renames through the mount, reporting each errno.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use seam_tests::run::Ran;
use seam_tests::sys;
use seam_tests::{Git, Mount, TempDir};

/// A host (the backing dir) and a box (seamfs over it). Fields drop in order: the mount first.
pub struct Env {
    pub mount: Mount,
    pub git: Git,
    pub backing: TempDir,
    _mnt: TempDir,
}

/// One repository as both sides see it.
#[derive(Clone, Debug)]
pub struct Repo {
    /// On the backing dir (the host's checkout).
    pub host: PathBuf,
    /// Through the mount (the box's view).
    pub boxed: PathBuf,
}

impl Repo {
    /// A path in the host's view.
    pub fn h(&self, rel: &str) -> PathBuf {
        self.host.join(rel)
    }

    /// A path in the box's view.
    pub fn b(&self, rel: &str) -> PathBuf {
        self.boxed.join(rel)
    }
}

impl Env {
    /// A mount with `--ttl 0` (the box sees host work-tree writes at once, so no test waits for
    /// a cache to expire) plus `extra`.
    pub fn new(label: &str, extra: &[&str]) -> Env {
        Env::with_mount(label, extra, Mount::seamfs)
    }

    /// Like [`Env::new`], with the mount made by `mount(backing, mnt, args)`.
    pub fn with_mount(label: &str, extra: &[&str], mount: impl FnOnce(&Path, &Path, &[&str]) -> Mount) -> Env {
        let backing = TempDir::new(&format!("{label}-backing"));
        let mnt = TempDir::new(&format!("{label}-mnt"));
        let mut args = vec!["--ttl", "0"];
        args.extend_from_slice(extra);
        let mount = mount(backing.path(), mnt.path(), &args);
        Env { mount, git: Git::new(), backing, _mnt: mnt }
    }

    /// The repository `name` (not created).
    pub fn repo_at(&self, name: &str) -> Repo {
        Repo { host: self.backing.join(name), boxed: self.mount.join(name) }
    }

    /// A repository made by the host, with `files` committed as "base". File mtimes are set an
    /// hour back before they are staged, so no entry is racily clean.
    pub fn host_repo(&self, name: &str, files: &[(&str, &str)]) -> Repo {
        let r = self.repo_at(name);
        make_repo(&self.git, &r.host, files);
        r
    }

    /// Host git (on the backing dir); panics unless it exits 0.
    #[track_caller]
    pub fn host(&self, r: &Repo, args: &[&str]) -> String {
        self.git.run(&r.host, args)
    }

    /// Box git (through the mount); panics unless it exits 0.
    #[track_caller]
    pub fn boxed(&self, r: &Repo, args: &[&str]) -> String {
        self.git.run(&r.boxed, args)
    }

    /// Host git, whatever its exit status.
    pub fn try_host(&self, r: &Repo, args: &[&str]) -> Ran {
        self.git.try_run(&r.host, args)
    }

    /// Box git, whatever its exit status.
    pub fn try_box(&self, r: &Repo, args: &[&str]) -> Ran {
        self.git.try_run(&r.boxed, args)
    }

    /// `git rev-parse REV` on the host.
    pub fn host_rev(&self, r: &Repo, rev: &str) -> String {
        self.host(r, &["rev-parse", rev]).trim().to_string()
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        self.mount.log()
    }

    /// This box's index in a git dir, as a name on the lower (`index-box.<id>`).
    pub fn index_box(&self) -> String {
        self.mount.index_box()
    }

    /// This box's index of the main git dir, as a path relative to a repository.
    pub fn ib(&self) -> String {
        format!(".git/{}", self.index_box())
    }

    /// Unmounts, asserting a clean exit.
    pub fn finish(self) {
        let Env { mount, git, backing, _mnt } = self;
        mount.unmount();
        drop((git, backing, _mnt));
    }
}

/// Makes a repository at `dir` (a new directory) with `files` committed as "base", their mtimes
/// an hour back before they are staged, so no entry is racily clean.
pub fn make_repo(git: &Git, dir: &Path, files: &[(&str, &str)]) {
    std::fs::create_dir(dir).expect("mkdir on the backing dir");
    git.run(dir, &["init", "-q"]);
    for (p, c) in files {
        write(&dir.join(p), c);
        age(&dir.join(p));
    }
    git.run(dir, &["add", "-A"]);
    git.run(dir, &["commit", "-q", "-m", "base"]);
}

/// Writes a file (creating parents).
pub fn write(p: &Path, content: &str) {
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("mkdir -p {}: {e}", parent.display()));
    }
    std::fs::write(p, content).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
}

/// Reads a file's bytes; panics when it cannot.
pub fn bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

/// Sets a file's atime and mtime one hour back.
pub fn age(p: &Path) {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs() as i64 - 3600;
    sys::utimens(p, (t, 0), (t, 0), libc::AT_SYMLINK_NOFOLLOW)
        .unwrap_or_else(|e| panic!("utimens {}: {e}", p.display()));
}

/// Polls `f` every 10 ms until it holds or `bound` passes; true when it held.
pub fn wait_until(bound: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + bound;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Every `*.lock` below `dir` (relative paths, sorted).
pub fn locks_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "lock") {
                out.push(p.strip_prefix(dir).expect("below").to_path_buf());
            }
        }
    }
    out.sort();
    out
}

/// The names in a git dir (one level) that start with `prefix`.
pub fn names_with_prefix(dir: &Path, prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("list {}: {e}", dir.display()))
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect();
    v.sort();
    v
}

/// The ref state of a git dir as bytes: HEAD, every file below refs/, packed-refs, the shared
/// index. For "nothing else changed" comparisons.
pub fn ref_snapshot(gitdir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut m = BTreeMap::new();
    for f in ["HEAD", "packed-refs", "index"] {
        if let Ok(b) = std::fs::read(gitdir.join(f)) {
            m.insert(f.to_string(), b);
        }
    }
    let mut stack = vec![gitdir.join("refs")];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(gitdir).expect("below").to_string_lossy().into_owned();
                m.insert(rel, bytes(&p));
            }
        }
    }
    m
}

/// `git status --porcelain=v1 --untracked-files=all` lines, sorted.
pub fn status(git: &Git, dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        git.run(dir, &["status", "--porcelain=v1", "--untracked-files=all"]).lines().map(str::to_string).collect();
    v.sort();
    v
}

/// `git diff --cached --name-status` lines (what is staged), sorted.
pub fn staged(git: &Git, dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        git.run(dir, &["diff", "--cached", "--name-status", "--no-renames"]).lines().map(str::to_string).collect();
    v.sort();
    v
}

/// Lines of `text` containing `needle`.
pub fn lines_with<'a>(text: &'a str, needle: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.contains(needle)).collect()
}

// ---------------------------------------------------------------------------------------------
// The scripted child process.

const CTL_ENV: &str = "SEAM_E2E_CHILD_CTL";
const DIR_ENV: &str = "SEAM_E2E_CHILD_DIR";

/// A scripted box process: this test binary re-executed to run `child_process_entry`.
///
/// Script steps, one per line, paths relative to the child's directory (a git dir, usually):
/// - `read REL`: open and read the file (its lookup is what seamfs notes);
/// - `stat REL`: look the file up, open nothing;
/// - `rewrite REL`: read the file, then write those bytes back through `REL.lock` (O_EXCL) and
///   a rename onto REL, as git rewrites its index;
/// - `signal NAME` / `wait NAME`: create / wait (up to 60 s) for the control file NAME;
/// - `move REL VALUE`: create `REL.lock` with O_EXCL, write `VALUE\n`, rename it onto REL;
///   on failure the lock is unlinked, as git does;
/// - `lock REL`: create REL with O_CREAT|O_EXCL (and keep it);
/// - `unlink REL`: remove the file REL;
/// - `create REL VALUE`: create REL with O_CREAT|O_EXCL and write `VALUE\n`, as git checks a
///   file out;
/// - `touch REL`: open REL with O_CREAT but no O_EXCL, report its inode number;
/// - `hold`: sleep until killed (at most 120 s).
///
/// Each step appends a line to the report (`move REL ok`, `move REL EBUSY unlink=ok`,
/// `lock REL ok`...).
pub struct Child {
    proc_: std::process::Child,
    ctl: TempDir,
}

impl Child {
    /// Starts the child in `dir` with `script`.
    pub fn spawn(dir: &Path, script: &str) -> Child {
        let ctl = TempDir::new("child-ctl");
        std::fs::write(ctl.join("script"), script).expect("write the child's script");
        let exe = std::env::current_exe().expect("the test binary");
        let out = std::fs::File::create(ctl.join("output")).expect("child output file");
        let proc_ = Command::new(exe)
            .args(["--exact", "hostbox::child_process_entry", "--nocapture", "--test-threads", "1", "-q"])
            .env(CTL_ENV, ctl.path())
            .env(DIR_ENV, dir)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("dup"))
            .stderr(out)
            .spawn()
            .expect("start the child process");
        Child { proc_, ctl }
    }

    /// Creates control file `name` (a `wait NAME` in the script returns).
    pub fn signal(&self, name: &str) {
        std::fs::write(self.ctl.join(name), "").expect("write a control file");
    }

    /// Waits (up to 30 s) until the script did `signal NAME`.
    #[track_caller]
    pub fn wait_for(&mut self, name: &str) {
        let p = self.ctl.join(name);
        let ok = wait_until(Duration::from_secs(30), || p.exists() || self.proc_.try_wait().ok().flatten().is_some());
        if !ok || !p.exists() {
            panic!("the child never signalled {name}:\n{}", self.output());
        }
    }

    /// The report so far.
    pub fn report(&self) -> String {
        std::fs::read_to_string(self.ctl.join("report")).unwrap_or_default()
    }

    /// The child's own stdout and stderr.
    pub fn output(&self) -> String {
        format!(
            "report:\n{}\noutput:\n{}",
            self.report(),
            std::fs::read_to_string(self.ctl.join("output")).unwrap_or_default()
        )
    }

    /// Waits (up to 60 s) for it to exit and returns the report; panics if it failed.
    #[track_caller]
    pub fn finish(mut self) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(st) = self.proc_.try_wait().expect("poll the child") {
                assert!(st.success(), "the child failed ({st}):\n{}", self.output());
                return self.report();
            }
            if Instant::now() >= deadline {
                let _ = self.proc_.kill();
                let _ = self.proc_.wait();
                panic!("the child did not finish in 60 s:\n{}", self.output());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGKILL, and reap it.
    pub fn kill9(mut self) {
        // SAFETY: kill(2) of our own child.
        unsafe { libc::kill(self.proc_.id() as i32, libc::SIGKILL) };
        let _ = self.proc_.wait();
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.proc_.try_wait().ok().flatten().is_none() {
            let _ = self.proc_.kill();
            let _ = self.proc_.wait();
        }
    }
}

/// The child's side: runs the script when started by [`Child::spawn`]; a no-op test otherwise.
#[test]
fn child_process_entry() {
    let (Some(ctl), Some(dir)) = (std::env::var_os(CTL_ENV), std::env::var_os(DIR_ENV)) else { return };
    let (ctl, dir) = (PathBuf::from(ctl), PathBuf::from(dir));
    let script = std::fs::read_to_string(ctl.join("script")).expect("read the script");
    let mut report = std::fs::OpenOptions::new().create(true).append(true).open(ctl.join("report")).expect("report");
    let mut say = |line: String| {
        report.write_all(format!("{line}\n").as_bytes()).expect("write the report");
        report.flush().expect("flush the report");
    };
    for step in script.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let mut parts = step.splitn(3, ' ');
        let op = parts.next().unwrap_or("");
        let a = parts.next().unwrap_or("");
        let b = parts.next().unwrap_or("");
        match op {
            "read" => {
                let r = std::fs::read(dir.join(a));
                say(format!("read {a} {}", if r.is_ok() { "ok" } else { "missing" }));
            }
            "stat" => {
                let r = sys::lstat(&dir.join(a));
                say(format!("stat {a} {}", r.map(|_| "ok".to_string()).unwrap_or_else(|e| e.name())));
            }
            "rewrite" => {
                let target = dir.join(a);
                let lock = dir.join(format!("{a}.lock"));
                let bytes = std::fs::read(&target).expect("read the file to rewrite");
                let line = match sys::open(&lock, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o644) {
                    Err(e) => format!("rewrite {a} lock-failed {e}"),
                    Ok(fd) => {
                        let written = sys::write(&fd, &bytes);
                        drop(fd);
                        match written.and_then(|_| sys::rename2(&lock, &target, 0)) {
                            Ok(()) => format!("rewrite {a} ok"),
                            Err(e) => format!("rewrite {a} {e}"),
                        }
                    }
                };
                say(line);
            }
            "signal" => std::fs::write(ctl.join(a), "").expect("signal"),
            "wait" => {
                let p = ctl.join(a);
                assert!(wait_until(Duration::from_secs(60), || p.exists()), "no {a} in 60 s");
            }
            "move" => {
                let target = dir.join(a);
                let lock = dir.join(format!("{a}.lock"));
                let line = match sys::open(&lock, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o644) {
                    Err(e) => format!("move {a} lock-failed {e}"),
                    Ok(fd) => {
                        let written = sys::write(&fd, format!("{b}\n").as_bytes());
                        drop(fd);
                        match written.and_then(|_| sys::rename2(&lock, &target, 0)) {
                            Ok(()) => format!("move {a} ok"),
                            Err(e) => {
                                let u = sys::unlink(&lock).map(|()| "ok".to_string()).unwrap_or_else(|e| e.name());
                                format!("move {a} {e} unlink={u}")
                            }
                        }
                    }
                };
                say(line);
            }
            "lock" => {
                let r = sys::open(&dir.join(a), libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o644);
                say(format!("lock {a} {}", r.map(|_| "ok".to_string()).unwrap_or_else(|e| e.name())));
            }
            "unlink" => {
                let r = sys::unlink(&dir.join(a));
                say(format!("unlink {a} {}", r.map(|()| "ok".to_string()).unwrap_or_else(|e| e.name())));
            }
            "create" => {
                let r = sys::open(&dir.join(a), libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o644)
                    .and_then(|fd| sys::write(&fd, format!("{b}\n").as_bytes()));
                say(format!("create {a} {}", r.map(|_| "ok".to_string()).unwrap_or_else(|e| e.name())));
            }
            "touch" => {
                // As `touch` and `>>` open: O_CREAT without O_EXCL, so an existing file is opened.
                let r = sys::open(&dir.join(a), libc::O_WRONLY | libc::O_CREAT, 0o644).and_then(|fd| sys::fstat(&fd));
                say(format!("touch {a} {}", r.map(|st| format!("ok ino={}", st.st_ino)).unwrap_or_else(|e| e.name())));
            }
            "hold" => std::thread::sleep(Duration::from_secs(120)),
            other => panic!("unknown step {other:?}"),
        }
    }
}
