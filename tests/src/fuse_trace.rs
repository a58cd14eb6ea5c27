//! FUSE requests counted by the kernel: the `fuse:fuse_request_send` tracepoint, in a tracefs
//! instance of the test's own (so tests in parallel do not share a buffer), filtered to one
//! connection (one mount). Counts what a share's server is asked, which its daemon cannot
//! report for seamfs: the requests seamfs's own syscalls on the share cause.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

const TRACEFS: &str = "/sys/kernel/tracing";

/// A tracing instance recording one mount's FUSE requests; removed on drop.
pub struct FuseRequests {
    dir: PathBuf,
}

impl FuseRequests {
    /// Starts recording the requests the kernel sends the FUSE server of the mount at `mnt`.
    /// Mounts tracefs if it is not mounted yet.
    #[track_caller]
    pub fn of(mnt: &Path, name: &str) -> FuseRequests {
        let root = Path::new(TRACEFS);
        if !root.join("instances").exists() {
            let ran = std::process::Command::new("mount").args(["-t", "tracefs", "nodev", TRACEFS]).output();
            assert!(
                root.join("instances").exists(),
                "tracefs is not mounted at {TRACEFS} and `mount -t tracefs` failed ({ran:?}): these counts need it"
            );
        }
        let event = root.join("events/fuse/fuse_request_send");
        assert!(event.exists(), "no fuse:fuse_request_send tracepoint at {}: the kernel lacks FUSE tracing", event.display());
        let dir = root.join("instances").join(format!("seam-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("create tracing instance {}: {e}", dir.display()));
        let t = FuseRequests { dir };
        let dev = std::fs::metadata(mnt).unwrap_or_else(|e| panic!("stat {}: {e}", mnt.display())).dev();
        // The tracepoint prints the kernel's dev_t: major << 20 | minor (FUSE's are major 0).
        let conn = (libc::major(dev) << 20) | libc::minor(dev);
        t.write("buffer_size_kb", "4096");
        t.write("events/fuse/fuse_request_send/filter", &format!("connection == {conn}"));
        t.write("events/fuse/fuse_request_send/enable", "1");
        t.write("tracing_on", "1");
        t
    }

    #[track_caller]
    fn write(&self, file: &str, value: &str) {
        let p = self.dir.join(file);
        std::fs::write(&p, value).unwrap_or_else(|e| panic!("write {value:?} to {}: {e}", p.display()));
    }

    /// Forgets what was recorded so far.
    pub fn clear(&self) {
        self.write("trace", "");
    }

    /// Requests recorded since the start or the last [`FuseRequests::clear`], by opcode name
    /// (`FUSE_LOOKUP`...); fails if the buffer lost events.
    #[track_caller]
    pub fn counts(&self) -> BTreeMap<String, u64> {
        let p = self.dir.join("trace");
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
        assert!(!text.contains("LOST"), "the tracing buffer lost events: the counts would be short");
        let mut counts = BTreeMap::new();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            // "... opcode 1 (FUSE_LOOKUP) len 40"
            let after = line.split(" opcode ").nth(1).unwrap_or_default();
            if let Some(op) = after.split('(').nth(1).and_then(|r| r.split(')').next()) {
                *counts.entry(op.to_string()).or_insert(0) += 1;
            }
        }
        counts
    }

    /// The recorded requests of one opcode (`"FUSE_LOOKUP"`), and of all.
    pub fn count(&self, op: &str) -> (u64, u64) {
        let c = self.counts();
        (c.get(op).copied().unwrap_or(0), c.values().sum())
    }
}

impl Drop for FuseRequests {
    fn drop(&mut self) {
        let _ = std::fs::write(self.dir.join("tracing_on"), "0");
        let _ = std::fs::write(self.dir.join("events/fuse/fuse_request_send/enable"), "0");
        let _ = std::fs::remove_dir(&self.dir);
    }
}
