//! Finding a FUSE daemon's process and reading its resident memory from /proc.

use std::path::Path;

/// The pid of a running process whose argv[0] ends in `program` and one of whose arguments is
/// `arg` exactly (a mountpoint or a log path unique to this run). Daemons fork away from the
/// command that started them, so their pid is found here rather than from the spawn.
pub fn find_pid(program: &str, arg: &Path) -> Option<i32> {
    let want = arg.as_os_str().as_encoded_bytes();
    let entries = std::fs::read_dir("/proc").ok()?;
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else { continue };
        let mut argv = cmdline.split(|&b| b == 0);
        let Some(argv0) = argv.next() else { continue };
        if !argv0.ends_with(program.as_bytes()) {
            continue;
        }
        if argv.any(|a| a == want) {
            return Some(pid);
        }
    }
    None
}

/// VmRSS of `pid` in KiB, or None when the process is gone.
pub fn vm_rss_kib(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_rss_is_readable() {
        let rss = vm_rss_kib(std::process::id() as i32).expect("our own /proc status");
        assert!(rss > 0);
    }
}
