//! Running a command, and reporting everything about it when it fails.

use std::fmt;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};

/// A finished command: what ran, where, and what came out.
#[derive(Debug)]
pub struct Ran {
    /// Program and arguments, as given.
    pub argv: Vec<String>,
    /// Working directory (the test process's when the command did not set one).
    pub cwd: PathBuf,
    /// How it exited.
    pub status: ExitStatus,
    /// Standard output, lossily decoded.
    pub stdout: String,
    /// Standard error, lossily decoded.
    pub stderr: String,
}

impl Ran {
    /// True when it exited 0.
    pub fn success(&self) -> bool {
        self.status.success()
    }

    /// The exit code; None when killed by a signal.
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Panics with the full report unless it exited 0; returns self for chaining.
    #[track_caller]
    pub fn ok(self) -> Ran {
        if !self.success() {
            panic!("command failed:\n{self}");
        }
        self
    }
}

impl fmt::Display for Ran {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  command: {}", self.argv.join(" "))?;
        writeln!(f, "  cwd:     {}", self.cwd.display())?;
        writeln!(f, "  status:  {}", self.status)?;
        writeln!(f, "  stdout:\n{}", indent(&self.stdout))?;
        write!(f, "  stderr:\n{}", indent(&self.stderr))
    }
}

fn indent(s: &str) -> String {
    if s.is_empty() {
        return "    (empty)".into();
    }
    s.lines().map(|l| format!("    | {l}")).collect::<Vec<_>>().join("\n")
}

/// Runs `cmd` to completion with stdin closed, capturing stdout and stderr.
pub fn run(cmd: &mut Command) -> Ran {
    let mut argv = vec![cmd.get_program().to_string_lossy().into_owned()];
    argv.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    let cwd =
        cmd.get_current_dir().map(|p| p.to_path_buf()).unwrap_or_else(|| std::env::current_dir().unwrap_or_default());
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("could not start `{}` in {}: {e}", argv.join(" "), cwd.display()));
    Ran {
        argv,
        cwd,
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A process a test started, ended by its pid (SIGKILL, then reaped) when dropped, so a
/// failing test leaves none behind.
#[derive(Debug)]
pub struct Bg(pub std::process::Child);

impl Bg {
    /// Starts `cmd` with stdin, stdout and stderr closed or as set.
    #[track_caller]
    pub fn spawn(cmd: &mut Command) -> Bg {
        Bg(cmd.spawn().unwrap_or_else(|e| panic!("could not start {:?}: {e}", cmd.get_program())))
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Bg {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
