//! The `parked` command of both binaries: `seamfs parked [PATH] [restore|prune]` in the box and
//! `seamd parked CHECKOUT [restore|prune]` on the host. The same code: neither runs git.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::manifest::Kept;
use super::restore::{parse_duration, Checkout, ParkError, Row, RETENTION};

/// `seamfs parked`.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = false, subcommand_precedence_over_arg = true)]
pub struct ParkedArgs {
    /// A directory in the checkout (default: the current one); a path inside it lists only
    /// what was parked under it.
    pub path: Option<PathBuf>,
    /// Restore or prune instead of listing.
    #[command(subcommand)]
    pub action: Option<Action>,
}

/// `seamd parked`.
#[derive(clap::Args, Debug)]
pub struct HostParkedArgs {
    /// The checkout (its main work tree, with the .git directory).
    pub checkout: PathBuf,
    /// Restore or prune instead of listing.
    #[command(subcommand)]
    pub action: Option<Action>,
}

/// What to do with the park log.
#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Write an entry back, byte-exact with its mode (ID from the list, or a path: its newest).
    Restore {
        /// The entry's ID (`1a2b3c4d.0`) or its path in the work tree.
        what: String,
        /// Replace the file even if it changed since and its bytes are in no object.
        #[arg(long)]
        force: bool,
        /// Write into this directory instead (for an entry from a removed linked worktree).
        #[arg(long, value_name = "DIR")]
        to: Option<PathBuf>,
    },
    /// Drop park commits older than DURATION (14d, 12h, 30m...) [default: 14d].
    Prune {
        /// Age past which parked bytes are dropped.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        older_than: Option<Duration>,
    },
}

/// Runs `seamfs parked`; the exit code.
pub fn main(a: &ParkedArgs) -> i32 {
    let path = a.path.clone().unwrap_or_else(|| PathBuf::from("."));
    let dir = if path.is_dir() { path.clone() } else { path.parent().map(Path::to_path_buf).filter(|p| !p.as_os_str().is_empty()).unwrap_or(".".into()) };
    finish(Checkout::find(&dir, false).and_then(|c| {
        wait_for_pending(&c.here);
        let filter = a.path.as_ref().map(|p| c.rel_path(p)).filter(|p| !p.as_os_str().is_empty());
        act(&c, a.action.as_ref(), filter.as_deref())
    }))
}

/// Runs `seamd parked`; the exit code.
pub fn host_main(a: &HostParkedArgs) -> i32 {
    finish(Checkout::find(&a.checkout, true).and_then(|c| act(&c, a.action.as_ref(), None)))
}

fn finish(r: Result<(), ParkError>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("parked: {e}");
            1
        }
    }
}

/// In the box: parks the mount above `dir` has not committed yet (its root's
/// `user.seamfs.status`, `park_pending`) are waited for, up to a burst's longest life.
fn wait_for_pending(dir: &Path) {
    let Some((root, _)) = park_pending(dir) else { return };
    let deadline = std::time::Instant::now() + Duration::from_secs(7);
    let mut said = false;
    while let Some(n) = pending_at(root).filter(|&n| n > 0) {
        if std::time::Instant::now() > deadline {
            eprintln!("parked: {n} park(s) still not committed by seamfs; listing what is");
            return;
        }
        if !said {
            eprintln!("parked: waiting for seamfs to commit {n} park(s)");
            said = true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The root of the seamfs mount holding `dir` (its nearest ancestor with a
/// `user.seamfs.status`) and the parks that mount has not committed yet (`park_pending`); None
/// where no seamfs mount holds it. Found once, the root is polled alone.
pub fn park_pending(dir: &Path) -> Option<(&Path, u64)> {
    dir.ancestors().find_map(|d| pending_at(d).map(|n| (d, n)))
}

/// `park_pending` of the seamfs mount rooted at `dir`, if it is one (seamfs is Linux's).
#[cfg(not(target_os = "linux"))]
fn pending_at(_dir: &Path) -> Option<u64> {
    None
}

/// `park_pending` of the seamfs mount rooted at `dir`, if it is one.
#[cfg(target_os = "linux")]
fn pending_at(dir: &Path) -> Option<u64> {
    let c = crate::gitdata::cpath(dir);
    let mut buf = vec![0u8; 8192];
    // SAFETY: valid C strings and buffer.
    let n = unsafe { libc::getxattr(c.as_ptr(), c"user.seamfs.status".as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return None;
    }
    let text = String::from_utf8_lossy(&buf[..n as usize]).into_owned();
    text.lines().find_map(|l| l.strip_prefix("park_pending=")).and_then(|v| v.parse().ok())
}

fn act(c: &Checkout, action: Option<&Action>, filter: Option<&Path>) -> Result<(), ParkError> {
    match action {
        None => list(c, filter),
        Some(Action::Restore { what, force, to }) => {
            let row = c.find_entry(what)?;
            let at = c.restore(&row, *force, to.as_deref())?;
            println!("restored {} ({} bytes, parked {} by {}) to {}", row.id, row.rec.size, when(row.rec.time_ms), row.rec.op.as_str(), at.display());
            Ok(())
        }
        Some(Action::Prune { older_than }) => {
            let (kept, dropped) = c.prune(older_than.unwrap_or(RETENTION))?;
            println!("pruned {dropped} park commit(s), kept {kept}");
            Ok(())
        }
    }
}

fn list(c: &Checkout, filter: Option<&Path>) -> Result<(), ParkError> {
    let (rows, skipped) = c.list()?;
    let under = |r: &Row| filter.is_none_or(|f| Path::new(OsStr::from_bytes(&r.rec.path)).starts_with(f));
    println!("{:<11}  {:<20}  {:>9}  {:<11}  {:<40}  COMMAND", "ID", "TIME (UTC)", "SIZE", "OP", "PATH");
    for r in rows.iter().filter(|r| under(r)) {
        let mut path = String::from_utf8_lossy(&r.rec.path).into_owned();
        if r.rec.tree != "." {
            path = format!("[{}] {path}", r.rec.tree);
        }
        if r.rec.kept != Kept::Parked {
            path = format!("{path} (not parked: {})", r.rec.kept.as_str());
        }
        if let Some(why) = &r.refused {
            path = format!("{path} (refused: {why})");
        }
        println!("{:<11}  {:<20}  {:>9}  {:<11}  {:<40}  {}", r.id, when(r.rec.time_ms), r.rec.size, r.rec.op.as_str(), path, String::from_utf8_lossy(&r.rec.cmd));
    }
    for s in skipped {
        eprintln!("parked: skipped park commit {}: {} (not trusted; `prune` drops it once old)", s.commit, s.why);
    }
    Ok(())
}

/// `YYYY-MM-DD HH:MM:SS` in UTC.
pub fn when(ms: u64) -> String {
    let s = ms / 1000;
    let (days, rem) = (s / 86400, s % 86400);
    // Howard Hinnant's civil_from_days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_times() {
        assert_eq!(super::when(0), "1970-01-01 00:00:00");
        assert_eq!(super::when(1_709_210_096_000), "2024-02-29 12:34:56");
    }
}
