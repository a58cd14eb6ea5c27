//! Daemonising: the parent returns only once the child's mount answers (or failed).
//!
//! Fork happens before any thread exists; the child reports over a pipe: a line `ok`, or the
//! exit code and the error message.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, RawFd};

/// The child's end of the readiness pipe.
#[derive(Debug)]
pub struct Notify(File);

impl Notify {
    /// Reports success.
    pub fn ok(mut self) {
        let _ = self.0.write_all(b"ok\n");
    }

    /// Reports a failure with its exit code and message.
    pub fn fail(mut self, code: i32, msg: &str) {
        let _ = writeln!(self.0, "{code} {msg}");
    }
}

/// Opens the daemon's log for appending, before the fork, so a bad path is the caller's
/// error (exit 2, naming the log) and not a daemon that dies unheard.
pub fn open_log(path: &std::path::Path) -> Result<File, crate::mount::MountError> {
    File::options().create(true).append(true).open(path).map_err(|e| {
        crate::mount::MountError::usage(
            "open log",
            path,
            format!("{e}: give --log a file in an existing, writable directory"),
        )
    })
}

/// In the parent: `Err(code)` after printing the child's error, or `Ok(None)` on success
/// (the parent should exit 0). In the child: `Ok(Some(notify))`, stdout and stderr on `log`.
pub fn daemonize(log: Option<File>) -> std::io::Result<Option<Notify>> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: out-array of two fds.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: no threads exist yet; fork is safe.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid > 0 {
        // The parent only waits: Ctrl-C must still end it.
        crate::signals::unblock();
        // SAFETY: the fds are ours.
        unsafe { libc::close(fds[1]) };
        let mut r = unsafe { File::from_raw_fd(fds[0]) };
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        let line = s.lines().next().unwrap_or("");
        if line == "ok" {
            std::process::exit(0);
        }
        let (code, msg) = line.split_once(' ').unwrap_or(("3", "the daemon exited before the mount answered"));
        eprintln!("seamfs: {msg}");
        std::process::exit(code.parse().unwrap_or(3));
    }
    // SAFETY: the fds are ours; setsid detaches from the terminal. Then "/" keeps no mount busy.
    unsafe {
        libc::close(fds[0]);
        libc::setsid();
    }
    redirect_stdio(log)?;
    // SAFETY: a constant C string.
    unsafe { libc::chdir(c"/".as_ptr()) };
    // SAFETY: the write end is ours.
    Ok(Some(Notify(unsafe { File::from_raw_fd(fds[1]) })))
}

fn redirect_stdio(log: Option<File>) -> std::io::Result<()> {
    let null = File::options().read(true).write(true).open("/dev/null")?;
    let out = match log {
        Some(f) => f,
        None => null.try_clone()?,
    };
    use std::os::fd::AsRawFd;
    // SAFETY: valid fds; dup2 onto the standard descriptors.
    unsafe {
        libc::dup2(null.as_raw_fd(), 0);
        libc::dup2(out.as_raw_fd(), 1);
        libc::dup2(out.as_raw_fd(), 2);
    }
    Ok(())
}
