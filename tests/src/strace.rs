//! strace attached to a running daemon, for tests that count or inspect its syscalls. The
//! tracer is ended by its pid (SIGINT, so it writes its log) when stopped or dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// An strace attached to every thread of one process, logging to a file.
pub struct Strace {
    child: Option<Child>,
    log: PathBuf,
}

impl Strace {
    /// Attaches `strace -f ARGS -o LOG -p PID` and waits half a second for it to attach.
    #[track_caller]
    pub fn attach(pid: u32, args: &[&str], log: &Path) -> Strace {
        let child = Command::new("strace")
            .arg("-f")
            .args(args)
            .arg("-o")
            .arg(log)
            .arg("-p")
            .arg(pid.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run strace (CI installs it)");
        // strace attaches asynchronously.
        std::thread::sleep(Duration::from_millis(500));
        Strace { child: Some(child), log: log.to_path_buf() }
    }

    /// Stops the tracer and returns its log.
    pub fn stop(mut self) -> String {
        self.end();
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn end(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: signalling our own child by its pid.
            unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
            let _ = c.wait();
        }
    }
}

impl Drop for Strace {
    fn drop(&mut self) {
        self.end();
    }
}
