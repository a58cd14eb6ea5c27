//! Actors: git run on one side, timed, its exit status kept (a refusal is data, not an error),
//! and tallies of what was attempted, what landed and how long it took.

use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use crate::lab::git::git_cmd;
use crate::lab::LabError;

/// One finished git command.
#[derive(Debug, Clone)]
pub struct Ran {
    /// Exited 0.
    pub ok: bool,
    /// Exit status as text (`exit status: 128`, `signal: 9 (SIGKILL)`).
    pub status: String,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// Wall time from spawn to exit.
    pub elapsed: Duration,
}

impl Ran {
    fn from_output(out: Output, elapsed: Duration) -> Ran {
        Ran {
            ok: out.status.success(),
            status: out.status.to_string(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            elapsed,
        }
    }

    /// The line that says why it failed (for refusal samples): git's fatal or error line, else
    /// the first line of stderr, else of stdout (`nothing to commit` goes to stdout).
    pub fn why(&self) -> String {
        let line = self
            .stderr
            .lines()
            .find(|l| l.starts_with("fatal") || l.starts_with("error"))
            .or_else(|| self.stderr.lines().find(|l| !l.trim().is_empty()))
            .or_else(|| self.stdout.lines().find(|l| !l.trim().is_empty()))
            .unwrap_or("");
        format!("{} ({})", line.trim(), self.status)
    }
}

/// Runs `git ARGS` in `dir` (the lab's identity, no user config); `Err` only when git could not
/// be started.
pub fn git_run(dir: &Path, args: &[&str]) -> Result<Ran, LabError> {
    let started = Instant::now();
    let out = git_cmd(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| LabError::new(format!("run git {}", args.join(" ")), dir, e))?;
    Ok(Ran::from_output(out, started.elapsed()))
}

/// Starts `git ARGS` in `dir` without waiting (so it can be killed).
pub fn git_spawn(dir: &Path, args: &[&str]) -> Result<Child, LabError> {
    git_cmd(dir)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| LabError::new(format!("start git {}", args.join(" ")), dir, e))
}

/// What a spawned git came to: its result, and whether the lab killed it.
#[derive(Debug)]
pub struct Reaped {
    /// The finished command.
    pub ran: Ran,
    /// True when SIGKILL reached a running process.
    pub killed: bool,
}

/// Waits for `child`, sending it SIGKILL at `kill_at` after `started` if it is still running.
pub fn wait_or_kill(mut child: Child, started: Instant, kill_at: Duration, dir: &Path) -> Result<Reaped, LabError> {
    let mut killed = false;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() >= kill_at => {
                // Still running: kill -9, exactly what a crashed or OOM-killed tool looks like.
                killed = child.kill().is_ok();
                break;
            }
            Ok(None) => std::thread::sleep(Duration::from_micros(200)),
            Err(e) => return Err(LabError::new("wait for git", dir, e)),
        }
    }
    let out = child.wait_with_output().map_err(|e| LabError::new("collect git's output", dir, e))?;
    // A kill that raced a normal exit did not interrupt anything.
    let killed = killed && !out.status.success() && out.status.code().is_none();
    Ok(Reaped { ran: Ran::from_output(out, started.elapsed()), killed })
}

/// A tally of one kind of operation.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Tried.
    pub attempted: u64,
    /// Exited 0.
    pub landed: u64,
    /// Wall time of every attempt.
    pub latencies: Vec<Duration>,
    /// Distinct reasons for failures, with counts, in order of first appearance.
    pub reasons: Vec<(String, u64)>,
    /// Attempts that died of a signal the lab did not send (SIGBUS, SIGSEGV, SIGABRT): git
    /// crashed on what the filesystem gave it.
    pub crashed: u64,
}

impl Tally {
    /// Records one attempt (landed when `ok`), `why` when it did not land.
    pub fn record(&mut self, ok: bool, elapsed: Duration, why: impl FnOnce() -> String) {
        self.attempted += 1;
        self.latencies.push(elapsed);
        if ok {
            self.landed += 1;
        } else {
            let why = normalise(&why());
            match self.reasons.iter_mut().find(|(r, _)| *r == why) {
                Some((_, n)) => *n += 1,
                None => self.reasons.push((why, 1)),
            }
        }
    }

    /// Records a finished git command.
    pub fn record_ran(&mut self, r: &Ran) {
        self.record(r.ok, r.elapsed, || r.why());
        self.note_crash(r);
    }

    /// Counts `r` as crashed when a signal the lab did not send ended it: for an attempt of
    /// several commands, recorded once with [`Tally::record`].
    pub fn note_crash(&mut self, r: &Ran) {
        if crash_signal(&r.status) {
            self.crashed += 1;
        }
    }

    /// Attempts that did not land.
    pub fn refused(&self) -> u64 {
        self.attempted - self.landed
    }

    /// Merges another tally in (for totals over kinds).
    pub fn merge(&mut self, o: &Tally) {
        self.attempted += o.attempted;
        self.landed += o.landed;
        self.latencies.extend_from_slice(&o.latencies);
        self.crashed += o.crashed;
        for (r, n) in &o.reasons {
            match self.reasons.iter_mut().find(|(x, _)| x == r) {
                Some((_, m)) => *m += n,
                None => self.reasons.push((r.clone(), *n)),
            }
        }
    }

    /// The `p`-th percentile latency in milliseconds (0 when nothing ran).
    pub fn percentile_ms(&self, p: f64) -> f64 {
        percentile_ms(&self.latencies, p)
    }

    /// The most frequent reasons, as one note.
    pub fn reasons_note(&self, what: &str, max: usize) -> Option<String> {
        if self.reasons.is_empty() {
            return None;
        }
        let mut r = self.reasons.clone();
        r.sort_by_key(|x| std::cmp::Reverse(x.1));
        let parts: Vec<String> = r.iter().take(max).map(|(why, n)| format!("{n}x {why}")).collect();
        Some(format!("{what} refused: {}", parts.join("; ")))
    }
}

/// True for an exit status (`signal: 7`, `signal: 7 (SIGBUS)`) that says the process died of a
/// signal other than the ones the lab itself sends to end processes (SIGKILL, SIGTERM).
fn crash_signal(status: &str) -> bool {
    let Some(rest) = status.strip_prefix("signal: ") else { return false };
    let n: String = rest.chars().take_while(char::is_ascii_digit).collect();
    !matches!(n.parse::<i32>(), Ok(9) | Ok(15) | Err(_))
}

/// Object ids, pids and temp names differ per failure; without them equal reasons group.
fn normalise(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for word in s.split(' ') {
        if !out.is_empty() {
            out.push(' ');
        }
        let hexish = word.len() >= 7 && word.trim_matches(|c: char| !c.is_ascii_hexdigit()).len() >= 7
            && word.chars().filter(|c| c.is_ascii_hexdigit()).count() * 10 >= word.len() * 8;
        if hexish {
            out.push_str("<id>");
        } else {
            out.push_str(word);
        }
    }
    out.chars().take(200).collect()
}

/// The `p`-th percentile (0..=100) of `v` in milliseconds, nearest rank; 0 for no samples.
pub fn percentile_ms(v: &[Duration], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s: Vec<Duration> = v.to_vec();
    s.sort();
    let rank = ((p / 100.0) * s.len() as f64).ceil().max(1.0) as usize;
    s[rank.min(s.len()) - 1].as_secs_f64() * 1000.0
}

/// A fixed cadence: `wait()` sleeps until the next tick (never sleeping to catch up on missed ones).
#[derive(Debug)]
pub struct Cadence {
    period: Duration,
    next: Instant,
}

impl Cadence {
    /// Ticks every `period`, the first one now.
    pub fn new(period: Duration) -> Cadence {
        Cadence { period, next: Instant::now() }
    }

    /// Sleeps until the next tick.
    pub fn wait(&mut self) {
        let now = Instant::now();
        if self.next > now {
            std::thread::sleep(self.next - now);
        }
        self.next = self.next.max(now) + self.period;
    }
}

/// Parses the full commit id from `git -c core.abbrev=no commit`'s summary line
/// (`[main 0123…] subject`, `[main (root-commit) 0123…] subject`, `[detached HEAD 0123…] subject`).
pub fn commit_id(stdout: &str) -> Option<String> {
    let line = stdout.lines().find(|l| l.starts_with('['))?;
    let inside = &line[1..line.find(']')?];
    let id = inside.rsplit(' ').next()?;
    (id.len() >= 40 && id.chars().all(|c| c.is_ascii_hexdigit())).then(|| id.to_string())
}

/// The subject from `git commit`'s summary line (`[main 0123…] subject`).
pub fn commit_subject(stdout: &str) -> Option<&str> {
    let line = stdout.lines().find(|l| l.starts_with('['))?;
    Some(line[line.find("] ")? + 2..].trim_end())
}

/// Writes `dir/rel`, creating its parent first: another side's `reset --hard`, checkout or
/// rebase may have removed the directory since the last write, even between the two steps (so
/// a few tries).
pub fn write_file(dir: &Path, rel: &str, text: &str) -> Result<(), LabError> {
    let path = dir.join(rel);
    let mut tries = 0;
    loop {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| LabError::new("create dir", parent, e))?;
        }
        match std::fs::write(&path, text) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < 5 => tries += 1,
            Err(e) => return Err(LabError::new("write", &path, e)),
        }
    }
}

/// A random number in `[0, n)` from a splitmix64 state (seeded runs repeat their choices).
pub fn draw(state: &mut u64, n: u64) -> u64 {
    let out = crate::share::rng::splitmix64(*state);
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    out % n.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_ids_are_parsed_from_the_summary() {
        let id = "acc9c3eddde392687103919cb26c1d203094a713";
        assert_eq!(commit_id(&format!("[main (root-commit) {id}] x y\n 1 file changed")), Some(id.into()));
        assert_eq!(commit_id(&format!("[main {id}] z\n")), Some(id.into()));
        assert_eq!(commit_id(&format!("[detached HEAD {id}] z\n")), Some(id.into()));
        assert_eq!(commit_id("nothing to commit\n"), None);
        assert_eq!(commit_subject(&format!("[main {id}] box commit 3\n 1 file changed")), Some("box commit 3"));
    }

    #[test]
    fn a_crash_is_a_signal_the_lab_did_not_send() {
        assert!(crash_signal("signal: 7"));
        assert!(crash_signal("signal: 11 (SIGSEGV) (core dumped)"));
        assert!(!crash_signal("signal: 9 (SIGKILL)"), "the lab's own kill");
        assert!(!crash_signal("signal: 15"));
        assert!(!crash_signal("exit status: 128"));
        let mut t = Tally::default();
        let ran = |status: &str| Ran { ok: false, status: status.into(), stdout: String::new(), stderr: String::new(), elapsed: Duration::ZERO };
        t.record_ran(&ran("signal: 7"));
        t.record_ran(&ran("exit status: 255"));
        assert_eq!((t.crashed, t.refused()), (1, 2));
        // An attempt of two commands (add, then commit) recorded once: a crash of either counts.
        let mut pair = Tally::default();
        let (add, commit) = (ran("signal: 7 (SIGBUS)"), ran("exit status: 0"));
        pair.record(false, add.elapsed + commit.elapsed, || add.why());
        pair.note_crash(&add);
        pair.note_crash(&commit);
        assert_eq!((pair.attempted, pair.crashed), (1, 1));
    }

    #[test]
    fn percentiles_and_reasons() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile_ms(&v, 50.0), 50.0);
        assert_eq!(percentile_ms(&v, 99.0), 99.0);
        assert_eq!(percentile_ms(&[], 50.0), 0.0);
        let mut t = Tally::default();
        t.record(false, Duration::ZERO, || "fatal: cannot lock ref 'HEAD': is at 0123456789abcdef but expected fedcba9876543210".into());
        t.record(false, Duration::ZERO, || "fatal: cannot lock ref 'HEAD': is at 1111111111111111 but expected 2222222222222222".into());
        t.record(true, Duration::ZERO, String::new);
        assert_eq!((t.attempted, t.landed, t.refused(), t.reasons.len()), (3, 1, 2, 1));
    }
}
