//! `seamd run`: passes over every git dir of the checkout, installing proposals.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::gitdirs::Checkout;
use crate::install::{proposals, prune_bases, Hooks, Install, Verdict};
use crate::quote;

/// How `run` works.
pub struct RunOptions {
    /// Pause between passes (default 250 ms).
    pub interval: Duration,
    /// One pass, then return (default false).
    pub once: bool,
    /// Test hooks (default none).
    pub hooks: Hooks,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions { interval: Duration::from_millis(250), once: false, hooks: Hooks::default() }
    }
}

/// What a pass did, for the caller's exit status.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PassReport {
    /// Every proposal seen, with its git dir and verdict.
    pub verdicts: Vec<(PathBuf, OsString, Verdict)>,
    /// Errors (operation and path in each).
    pub errors: Vec<String>,
}

impl PassReport {
    /// Whether something needs a human: an I/O error or a restore that could not be made.
    pub fn needs_attention(&self) -> bool {
        !self.errors.is_empty() || self.verdicts.iter().any(|(_, _, v)| matches!(v, Verdict::RestoreFailed(_)))
    }
}

/// Log lines already written for names that stay in place, so a loop logs each once.
#[derive(Default)]
pub struct Quiet {
    seen: HashSet<(PathBuf, OsString, String)>,
}

/// One pass over the main git dir and each registered worktree's. `log` gets one line per
/// event (an event repeated on later passes is logged once).
pub fn pass(c: &Checkout, hooks: &Hooks, quiet: &mut Quiet, log: &mut dyn FnMut(&str)) -> PassReport {
    let mut report = PassReport::default();
    let (dirs, skipped) = c.git_dirs();
    for s in skipped {
        let line = format!("{}: skipped: {} (seamd reaches worktrees only by name and never through a link)", quote::shown(&s.rel), s.why);
        if quiet.seen.insert((s.rel.clone(), OsString::new(), line.clone())) {
            log(&line);
        }
    }
    for g in &dirs {
        let names = match proposals(g) {
            Ok(n) => n,
            Err(e) => {
                let line = e.to_string();
                log(&line);
                report.errors.push(line);
                continue;
            }
        };
        let mut pruned = Vec::new();
        for name in names {
            let shown = g.rel.join(&name);
            match (Install { checkout: c, git: g, hooks }).run(&name) {
                Ok(v) => {
                    let line = format!("{}: {v}", quote::shown(&shown));
                    if !v.repeats() || quiet.seen.insert((g.rel.clone(), name.clone(), line.clone())) {
                        log(&line);
                    }
                    if !v.repeats() {
                        pruned.push(name.clone());
                    }
                    report.verdicts.push((g.rel.clone(), name, v));
                }
                Err(e) => {
                    let line = format!("{}: {e}", quote::shown(&shown));
                    log(&line);
                    report.errors.push(line);
                }
            }
        }
        if let Err(e) = prune_bases(g, &pruned) {
            let line = e.to_string();
            log(&line);
            report.errors.push(line);
        }
    }
    report
}

/// Passes until `stop` is set (or one, with `once`). Returns the last pass's report.
pub fn run(c: &Checkout, opts: &RunOptions, stop: &AtomicBool, log: &mut dyn FnMut(&str)) -> PassReport {
    let mut quiet = Quiet::default();
    loop {
        let report = pass(c, &opts.hooks, &mut quiet, log);
        if opts.once || stop.load(Ordering::Relaxed) {
            return report;
        }
        // Sleep in slices so a stop request is seen soon.
        let mut left = opts.interval;
        while !left.is_zero() && !stop.load(Ordering::Relaxed) {
            let step = left.min(Duration::from_millis(50));
            std::thread::sleep(step);
            left -= step;
        }
        if stop.load(Ordering::Relaxed) {
            return report;
        }
    }
}
