//! What /proc says: mounts, processes by argument, open fds and limits.

use std::path::{Path, PathBuf};

/// One line of /proc/mounts.
#[derive(Debug, Clone)]
pub struct MountLine {
    /// Source (`fsname=` for FUSE).
    pub source: String,
    /// Mountpoint.
    pub target: PathBuf,
    /// Filesystem type (`fuse.seamfs` for ours).
    pub fstype: String,
}

/// Undoes /proc/mounts' octal escapes (`\040` for a space...).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Every current mount.
pub fn mounts() -> Vec<MountLine> {
    let text = std::fs::read_to_string("/proc/mounts").expect("read /proc/mounts");
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(' ');
            let (source, target, fstype) = (f.next()?, f.next()?, f.next()?);
            Some(MountLine {
                source: unescape(source),
                target: PathBuf::from(unescape(target)),
                fstype: unescape(fstype),
            })
        })
        .collect()
}

/// The topmost mount at exactly `path`, if any.
pub fn mount_at(path: &Path) -> Option<MountLine> {
    mounts().into_iter().rev().find(|m| m.target == path)
}

/// True when something is mounted at exactly `path`.
pub fn is_mounted(path: &Path) -> bool {
    mount_at(path).is_some()
}

/// A process's arguments (empty when it is gone or a kernel thread).
pub fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|c| *c == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect()
        })
        .unwrap_or_default()
}

/// Pids of live processes one of whose arguments is exactly `arg` (zombies excluded).
pub fn pids_with_arg(arg: &str) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else { return out };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        if pid == std::process::id() || !alive(pid) {
            continue;
        }
        if cmdline(pid).iter().any(|a| a == arg) {
            out.push(pid);
        }
    }
    out
}

/// True while `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(s) => s.rsplit_once(')').map(|(_, rest)| !rest.trim_start().starts_with('Z')).unwrap_or(false),
        Err(_) => false,
    }
}

/// True once every thread of `pid` has exited (the process is gone or only its zombie leader
/// is left). A killed process's leader turns zombie before its other threads are done, and
/// its files (a FUSE device, say) are released only when the last thread exits.
pub fn fully_exited(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return true };
    let others = tasks.flatten().filter(|t| t.file_name().to_str() != Some(&pid.to_string())).count();
    others == 0 && !alive(pid)
}

/// Where each thread of `pid` is: name, state, kernel wait channel and kernel stack, one block
/// per thread. For a process that does not exit when it should: says which thread holds it.
pub fn threads_report(pid: u32) -> String {
    let read = |tid: &str, f: &str| std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/{f}")).unwrap_or_default();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return format!("/proc/{pid}/task is gone") };
    let mut out = String::new();
    for t in tasks.flatten() {
        let tid = t.file_name().to_string_lossy().into_owned();
        let state = read(&tid, "status").lines().find(|l| l.starts_with("State:")).unwrap_or("State: ?").to_string();
        out += &format!("  thread {tid} {} {state} wchan {}\n", read(&tid, "comm").trim(), read(&tid, "wchan"));
        for line in read(&tid, "stack").lines() {
            out += &format!("    {line}\n");
        }
    }
    out
}

/// Number of open fds of `pid`.
pub fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or_else(|e| panic!("list /proc/{pid}/fd: {e}"))
}

/// `(soft, hard)` open-file limit of `pid` from /proc/<pid>/limits (None = unlimited).
pub fn nofile_limit(pid: u32) -> (Option<u64>, Option<u64>) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/limits"))
        .unwrap_or_else(|e| panic!("read /proc/{pid}/limits: {e}"));
    let line = text.lines().find(|l| l.starts_with("Max open files")).expect("a `Max open files` line");
    let nums: Vec<&str> = line["Max open files".len()..].split_whitespace().collect();
    let parse = |s: &str| s.parse::<u64>().ok();
    (parse(nums[0]), parse(nums[1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescapes_octal() {
        assert_eq!(unescape(r"/tmp/a\040b"), "/tmp/a b");
        assert_eq!(unescape(r"tab\011x\134"), "tab\tx\\");
        assert_eq!(unescape(r"no\escape"), r"no\escape");
    }

    #[test]
    fn finds_own_mounts_and_limits() {
        assert!(mounts().iter().any(|m| m.target == Path::new("/")), "/ is always mounted");
        let (soft, _) = nofile_limit(std::process::id());
        assert!(soft.is_some_and(|s| s > 0));
        assert!(fd_count(std::process::id()) >= 3);
    }

    #[test]
    fn reports_every_thread_of_a_process() {
        // The thread names itself once it runs: wait for it to say so before reading /proc.
        let (started, running) = std::sync::mpsc::channel();
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let parked = std::thread::Builder::new()
            .name("seam-report".into())
            .spawn(move || {
                started.send(()).expect("send");
                let _ = stopped.recv();
            })
            .expect("spawn");
        running.recv().expect("the thread started");
        let report = threads_report(std::process::id());
        assert!(report.contains("seam-report") && report.contains("State:"), "{report}");
        assert!(report.lines().filter(|l| l.starts_with("  thread ")).count() >= 2, "{report}");
        drop(stop);
        parked.join().expect("join");
        assert!(threads_report(u32::MAX).contains("is gone"));
    }
}
