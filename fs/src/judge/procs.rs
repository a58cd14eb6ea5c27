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

/// The start time of `pid`, or None when it is gone.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The parent process id of `pid` (field 4 of `/proc/<pid>/stat`), or None when it is gone.
pub fn parent_pid(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The thread-group id (the process) of a thread id; FUSE requests carry the thread's id.
pub fn tgid(tid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("Tgid:")).and_then(|v| v.trim().parse().ok())
}

impl Proc {
    /// The process behind a request's pid (a thread id: a lock taken by a worker thread
    /// belongs to its process), now.
    pub fn of(tid: u32) -> Proc {
        let pid = tgid(tid).unwrap_or(tid);
        Proc { pid, start: start_time(pid).unwrap_or(0) }
    }

    /// The parent of the process behind a request's pid: a git hook asking about the lock its
    /// git holds runs as that git's child.
    pub fn parent_of(tid: u32) -> Option<Proc> {
        let pid = tgid(tid).unwrap_or(tid);
        parent_pid(pid).filter(|&pp| pp != 0).map(Proc::of)
    }

    /// True while this very process runs (a zombie counts as gone: it will never rename).
    pub fn alive(&self) -> bool {
        if self.pid == 0 {
            return false;
        }
        match std::fs::read_to_string(format!("/proc/{}/stat", self.pid)) {
            Ok(stat) => {
                let Some(i) = stat.rfind(')') else { return false };
                let mut fields = stat[i + 1..].split_whitespace();
                let state = fields.next().unwrap_or("Z");
                let start = fields.nth(18).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
                state != "Z" && state != "X" && (self.start == 0 || start == self.start)
            }
            Err(_) => false,
        }
    }
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
}
