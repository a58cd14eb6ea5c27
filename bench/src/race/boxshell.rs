//! Where box actors act: on this kernel in a mount (the one-kernel lab), or in a qemu guest through
//! its agent (`seam-lab vm`). Scenarios call these instead of running git or touching files
//! themselves, so one scenario's code and its judging serve both labs.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::actor::{git_run, git_spawn, wait_or_kill, write_file, Ran, Reaped};
use crate::lab::git::{append, LAB_GIT_CONFIG, LAB_GIT_ENV};
use crate::lab::LabError;
use crate::vm::guest::{Guest, GuestRan, GUEST_ENV};

/// The box side of a rig.
#[derive(Debug, Clone)]
pub enum BoxShell {
    /// A directory on this kernel (the share emulator's mount, or seamfs over it).
    Local(PathBuf),
    /// A directory inside a guest.
    Guest(Arc<Guest>, PathBuf),
}

impl BoxShell {
    /// The box's checkout, as the box names it.
    pub fn dir(&self) -> &Path {
        match self {
            BoxShell::Local(d) | BoxShell::Guest(_, d) => d,
        }
    }

    /// `git ARGS` in the box's checkout (the lab's identity, no user config).
    pub fn git(&self, args: &[&str]) -> Result<Ran, LabError> {
        match self {
            BoxShell::Local(d) => git_run(d, args),
            BoxShell::Guest(g, d) => Ok(guest_git(g, d, args, None)?.ran),
        }
    }

    /// `git ARGS`, sent SIGKILL `kill_at` after it started if still running.
    pub fn git_killed_at(&self, args: &[&str], kill_at: Duration) -> Result<Reaped, LabError> {
        match self {
            BoxShell::Local(d) => wait_or_kill(git_spawn(d, args)?, Instant::now(), kill_at, d),
            BoxShell::Guest(g, d) => guest_git(g, d, args, Some(kill_at)),
        }
    }

    /// Writes `rel` below the checkout, creating its parent.
    pub fn write(&self, rel: &str, text: &str) -> Result<(), LabError> {
        match self {
            BoxShell::Local(d) => write_file(d, rel, text),
            BoxShell::Guest(g, d) => g.write(&d.join(rel), text.as_bytes(), false),
        }
    }

    /// Appends to `rel` below the checkout.
    pub fn append(&self, rel: &str, text: &str) -> Result<(), LabError> {
        match self {
            BoxShell::Local(d) => append(&d.join(rel), text),
            BoxShell::Guest(g, d) => g.write(&d.join(rel), text.as_bytes(), true),
        }
    }

    /// Waits (a few seconds at most) until seamfs under the checkout has committed what it
    /// parks in the background (`park_pending` of its `user.seamfs.status`, as `seamfs parked`
    /// waits): `git fsck` on the host while seamfs moves `refs/seam/parked` could list the
    /// objects before they are written and read the ref after, and report a commit missing
    /// that is not. Returns at once where no seamfs is mounted (the control).
    pub fn settle(&self) {
        match self {
            BoxShell::Local(d) => {
                use seamfs::park::cli::park_pending;
                let Some((root, _)) = park_pending(d) else { return };
                let deadline = Instant::now() + Duration::from_secs(8);
                while park_pending(root).is_some_and(|(_, n)| n > 0) && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            BoxShell::Guest(g, d) => {
                let _ = g.sh(&format!("seamfs parked '{}' >/dev/null 2>&1; true", d.display()));
            }
        }
    }

    /// Unlinks `rel` below the checkout.
    pub fn remove(&self, rel: &str) -> Result<(), LabError> {
        match self {
            BoxShell::Local(d) => {
                let p = d.join(rel);
                std::fs::remove_file(&p).map_err(|e| LabError::new("remove", &p, e))
            }
            BoxShell::Guest(g, d) => g.remove(&d.join(rel)),
        }
    }
}

/// `git ARGS` in the guest's `dir`, as the lab runs git (its identity, no user config).
pub fn guest_git(g: &Guest, dir: &Path, args: &[&str], kill_at: Option<Duration>) -> Result<Reaped, LabError> {
    let dir_s = dir.to_string_lossy();
    let mut argv: Vec<&[u8]> = vec![b"git", b"-C", dir_s.as_bytes()];
    argv.extend(LAB_GIT_CONFIG.iter().map(|a| a.as_bytes()));
    argv.extend(args.iter().map(|a| a.as_bytes()));
    let env: Vec<(&str, &str)> = GUEST_ENV.iter().chain(LAB_GIT_ENV.iter()).copied().collect();
    let r = g.run(dir, &argv, &env, kill_at)?;
    Ok(Reaped { killed: r.killed, ran: ran_of(r) })
}

/// `git ARGS` in the guest's `dir`: its spawn-to-exit time by the guest's clock in ms, or an
/// error when it failed (the benchmarks' timed step).
pub fn guest_git_ms(g: &Guest, dir: &Path, args: &[&str]) -> Result<f64, LabError> {
    let r = guest_git(g, dir, args, None)?.ran;
    if !r.ok {
        return Err(LabError::new(format!("git {} in the guest", args.join(" ")), dir, r.why()));
    }
    Ok(r.elapsed.as_secs_f64() * 1000.0)
}

/// A guest command's result in the form the scenarios judge.
pub fn ran_of(r: GuestRan) -> Ran {
    let status = if r.signal != 0 { format!("signal: {}", r.signal) } else { format!("exit status: {}", r.code) };
    Ran {
        ok: r.code == 0 && r.signal == 0,
        status,
        stdout: String::from_utf8_lossy(&r.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&r.stderr).into_owned(),
        elapsed: r.elapsed,
    }
}
