//! Box processes by identity: a pid and its start time (field 22 of `/proc/<pid>/stat`).

/// A process as seen in FUSE requests (pids are in the daemon's namespace).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Proc {
    /// Process id.
    pub pid: u32,
    /// Start time in clock ticks since boot; 0 when it could not be read.
    pub start: u64,
}

/// Why `/proc` cannot tell this daemon's callers apart, if it cannot: it belongs to another pid
/// namespace (`/proc/self` names another pid than `getpid`), or cannot be read. FUSE gives
/// callers' pids in the daemon's namespace, so liveness read from another `/proc` would look at
/// unrelated processes.
pub fn proc_mismatch() -> Option<String> {
    // SAFETY: getpid has no failure mode.
    let me = unsafe { libc::getpid() } as u32;
    match std::fs::read_link("/proc/self") {
        Ok(p) if p.to_str().and_then(|s| s.parse::<u32>().ok()) == Some(me) => None,
        Ok(p) => Some(format!("/proc/self is {} but this process is pid {me}: /proc belongs to another pid namespace", p.display())),
        Err(e) => Some(format!("read /proc/self: {e}")),
    }
}

thread_local! {
    /// `/proc` files this thread has read: what naming callers costs (tests count it).
    static PROC_READS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The text of a file under `/proc`, or None when it cannot be read (the task is gone).
/// `read_to_string` sizes its buffer by `fstat`, which is 0 here, and grows it from 32 bytes:
/// nine syscalls for `status`, on the critical path of the request that names its caller
/// (each a trap into a guest kernel, where seamfs runs). This is an open, a read and the read
/// that finds the end.
pub fn read_proc(path: &str) -> Option<String> {
    use std::io::Read;
    PROC_READS.with(|n| n.set(n.get() + 1));
    let mut f = std::fs::File::open(path).ok()?;
    let mut buf = vec![0u8; 4096];
    let mut n = 0;
    loop {
        if n == buf.len() {
            buf.resize(2 * n, 0);
        }
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    buf.truncate(n);
    String::from_utf8(buf).ok()
}

/// How many `/proc` files this thread has read so far.
#[cfg(test)]
fn proc_reads() -> u64 {
    PROC_READS.with(|n| n.get())
}

/// The start time of `pid`, or None when it is gone.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = read_proc(&format!("/proc/{pid}/stat"))?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The parent process id of `pid` (field 4 of `/proc/<pid>/stat`), or None when it is gone.
pub fn parent_pid(pid: u32) -> Option<u32> {
    let stat = read_proc(&format!("/proc/{pid}/stat"))?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The thread-group id (the process) of a thread id; FUSE requests carry the thread's id.
pub fn tgid(tid: u32) -> Option<u32> {
    let status = read_proc(&format!("/proc/{tid}/status"))?;
    status.lines().find_map(|l| l.strip_prefix("Tgid:")).and_then(|v| v.trim().parse().ok())
}

impl Proc {
    /// The process behind a request's pid (a thread id: a lock taken by a worker thread
    /// belongs to its process), now.
    pub fn of(tid: u32) -> Proc {
        if let Some(p) = recent::get(tid) {
            return p;
        }
        let pid = tgid(tid).unwrap_or(tid);
        let p = Proc { pid, start: start_time(pid).unwrap_or(0) };
        recent::put(tid, p);
        p
    }

    /// The parent of the process behind a request's pid: a git hook asking about the lock its
    /// git holds runs as that git's child.
    pub fn parent_of(tid: u32) -> Option<Proc> {
        let pid = tgid(tid).unwrap_or(tid);
        parent_pid(pid).filter(|&pp| pp != 0).map(Proc::of)
    }

    /// True while this very process runs. A zombie whose threads have all ended counts as gone
    /// (it will never rename); a zombie leader (it called `pthread_exit`) whose other threads
    /// still run is alive: they hold its locks and may still rename them.
    pub fn alive(&self) -> bool {
        if self.pid == 0 {
            return false;
        }
        match read_proc(&format!("/proc/{}/stat", self.pid)) {
            Some(stat) => {
                let Some((state, start)) = state_and_start(&stat) else { return false };
                if self.start != 0 && start != self.start {
                    return false;
                }
                match state {
                    "X" => false,
                    "Z" => self.a_thread_runs(),
                    _ => true,
                }
            }
            None => false,
        }
    }

    /// Whether a thread of this process other than its (zombie) leader is not dead.
    fn a_thread_runs(&self) -> bool {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", self.pid)) else { return false };
        tasks.filter_map(|t| t.ok()).filter(|t| t.file_name().to_str() != Some(&self.pid.to_string())).any(|t| {
            t.path().join("stat").to_str().and_then(read_proc).as_deref().and_then(state_and_start).is_some_and(|(s, _)| s != "Z" && s != "X")
        })
    }
}

/// Callers named a moment ago: git makes dozens of requests in a few milliseconds, and each
/// guard used to read two `/proc` files to name the caller again. A thread id cannot name another
/// task within [`recent::WINDOW`]: pids are handed out cyclically, so reuse needs the whole pid
/// space (`pid_max`, at least 32,768) to wrap first, tens of thousands of new tasks in one
/// second. (50 ms was too short for a TCG guest, where one `git commit` lasts 400 ms: 26 of its
/// requests named their caller again, ADR 0042.)
mod recent {
    use super::Proc;
    use parking_lot::Mutex;
    use std::time::{Duration, Instant};

    pub const WINDOW: Duration = Duration::from_secs(1);
    const MAX: usize = 64;
    static SEEN: Mutex<Vec<(u32, Proc, Instant)>> = Mutex::new(Vec::new());

    pub fn get(tid: u32) -> Option<Proc> {
        let now = Instant::now();
        SEEN.lock().iter().find(|(t, _, at)| *t == tid && now.duration_since(*at) < WINDOW).map(|(_, p, _)| *p)
    }

    pub fn put(tid: u32, p: Proc) {
        let now = Instant::now();
        let mut seen = SEEN.lock();
        seen.retain(|(t, _, at)| *t != tid && now.duration_since(*at) < WINDOW);
        if seen.len() >= MAX {
            seen.remove(0);
        }
        seen.push((tid, p, now));
    }
}

/// State (field 3) and start time (field 22) of a `/proc/.../stat` line; the command name may
/// hold spaces and parentheses, so fields are counted after the last ')'.
fn state_and_start(stat: &str) -> Option<(&str, u64)> {
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?;
    Some((state, fields.nth(18).and_then(|s| s.parse().ok()).unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_dead_child_is_not() {
        let me = Proc::of(std::process::id());
        assert!(me.start > 0 && me.alive());
        let mut child = std::process::Command::new("true").spawn().expect("spawn true");
        let p = Proc::of(child.id());
        child.wait().expect("wait");
        assert!(!p.alive(), "a reaped child is gone");
        assert!(!Proc { pid: me.pid, start: me.start + 1 }.alive(), "same pid, other start: another process");
        let (here, parent) = std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: gettid has no failure mode.
                let tid = unsafe { libc::gettid() } as u32;
                (Proc::of(tid), Proc::parent_of(tid))
            })
            .join()
            .expect("thread")
        });
        assert_eq!(here.pid, me.pid, "a thread maps to its process");
        let parent = parent.expect("the test has a parent");
        // SAFETY: getppid has no failure mode.
        assert_eq!(parent.pid, unsafe { libc::getppid() } as u32, "a thread's process's parent");
    }

    /// One `git commit` in a TCG guest lasts about 400 ms and names its caller in dozens of
    /// requests: a caller named 100 ms ago is named again from memory, not from `/proc` (with
    /// the old 50 ms window this read two files again).
    #[test]
    fn a_caller_named_a_moment_ago_costs_no_proc_read() {
        std::thread::spawn(|| {
            // SAFETY: gettid has no failure mode.
            let tid = unsafe { libc::gettid() } as u32;
            let before = proc_reads();
            let first = Proc::of(tid);
            assert_eq!(proc_reads() - before, 2, "a new caller is named from its status and stat");
            std::thread::sleep(std::time::Duration::from_millis(100));
            let before = proc_reads();
            assert_eq!(Proc::of(tid), first);
            assert_eq!(proc_reads() - before, 0, "named again within the window from memory");
        })
        .join()
        .expect("thread");
    }

    #[test]
    fn a_proc_file_is_read_whole() {
        let status = read_proc("/proc/self/status").expect("read /proc/self/status");
        assert!(status.starts_with("Name:") && status.contains("\nTgid:") && status.ends_with('\n'), "{status}");
        let smaps = read_proc("/proc/self/smaps").expect("read /proc/self/smaps");
        assert!(smaps.len() > 4096 && smaps.ends_with('\n'), "a file longer than the first buffer is read to its end");
        assert_eq!(read_proc("/proc/4294967/stat"), None, "no such task");
    }

    extern "C" fn park(_: *mut libc::c_void) -> *mut libc::c_void {
        loop {
            // SAFETY: pause has no preconditions.
            unsafe { libc::pause() };
        }
    }

    /// A child whose leader thread exits alone (raw `exit`, as `pthread_exit` of main does) while
    /// its second thread runs: the leader is a zombie, the process alive. Old `alive` read the
    /// leader's Z and called it dead, so its locks were reaped while its thread held them.
    #[test]
    fn a_zombie_leader_with_a_running_thread_is_alive() {
        // SAFETY: the child only creates a thread and exits its own thread; no Rust runtime use.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
        if pid == 0 {
            // SAFETY: the child: a parked thread, then the leader leaves (SYS_exit, not exit_group).
            unsafe {
                let mut t: libc::pthread_t = 0;
                if libc::pthread_create(&mut t, std::ptr::null(), park, std::ptr::null_mut()) != 0 {
                    libc::_exit(1);
                }
                libc::syscall(libc::SYS_exit, 0);
            }
        }
        let p = Proc::of(pid as u32);
        let state = || std::fs::read_to_string(format!("/proc/{pid}/stat")).ok().as_deref().and_then(state_and_start).map(|(s, _)| s.to_string());
        let t0 = std::time::Instant::now();
        while state().as_deref() != Some("Z") && t0.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let (leader, threads) = (state(), std::fs::read_dir(format!("/proc/{pid}/task")).map(|d| d.count()).unwrap_or(0));
        let alive_with_thread = p.alive();
        // SAFETY: ending the child this test forked, by its pid, and reaping it.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        eprintln!("leader state {leader:?}, {threads} task(s); alive: {alive_with_thread}; after SIGKILL and wait: {}", p.alive());
        assert_eq!(leader.as_deref(), Some("Z"), "the leader never became a zombie: the test proves nothing");
        assert_eq!(threads, 2, "the second thread is not there: the test proves nothing");
        assert!(alive_with_thread, "a zombie leader whose thread runs counted as dead");
        assert!(!p.alive(), "the killed and reaped process still counts as alive");
    }
}
