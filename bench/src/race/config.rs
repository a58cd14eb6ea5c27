//! `race config`: host and box each write N distinct keys with `git config`, at the same time.
//!
//! A write git refuses (the other side holds `config.lock`) is retried a bounded number of times;
//! a key counts as lost only when its `git config` exited 0 and the key is not in the host's
//! `.git/config` at the end (`git config --list` in the backing dir).

use std::collections::HashSet;
use std::time::Duration;

use super::actor::Tally;
use super::boxshell::BoxShell;
use super::figures::Figures;
use super::rig::Rig;
use super::Params;
use crate::lab::git::git;
use crate::lab::LabError;

/// Default keys per side.
pub const DEFAULT_KEYS: usize = 1000;
/// Tries per key before the lab gives it up.
const TRIES: usize = 20;

#[derive(Debug, Default)]
struct Writer {
    writes: Tally,
    acknowledged: Vec<String>,
    given_up: u64,
}

/// Writes `section.kNNNN = vNNNN` for N in 0..n in `dir`.
fn writer(sh: &BoxShell, section: &str, n: usize) -> Result<Writer, LabError> {
    let mut w = Writer::default();
    for i in 0..n {
        let key = format!("{section}.k{i:04}");
        let mut done = false;
        for attempt in 0..TRIES {
            let r = sh.git(&["config", &key, &format!("v{i}")])?;
            w.writes.record_ran(&r);
            if r.ok {
                done = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(2 + attempt as u64 * 3));
        }
        if done {
            w.acknowledged.push(key.to_lowercase());
        } else {
            w.given_up += 1;
        }
    }
    Ok(w)
}

/// Runs the scenario on a mounted rig.
pub fn run(rig: &Rig, p: &Params) -> Result<Figures, LabError> {
    let n = p.ops_or(DEFAULT_KEYS);
    let (host, boxed) = std::thread::scope(|s| {
        let host_sh = BoxShell::Local(rig.host.clone());
        let host = s.spawn(move || writer(&host_sh, "host", n));
        let boxed = writer(&rig.boxed, "box", n);
        let host = host.join().unwrap_or_else(|_| Err(LabError::new("join host writer", &rig.host, "panicked")));
        (host, boxed)
    });
    let h = host?;
    let b = boxed?;
    let present: HashSet<String> = git(&rig.host, &["config", "--local", "--list", "--name-only"])?
        .lines()
        .map(|l| l.trim().to_lowercase())
        .collect();
    let lost_host = h.acknowledged.iter().filter(|k| !present.contains(*k)).count() as u64;
    let lost_box = b.acknowledged.iter().filter(|k| !present.contains(*k)).count() as u64;
    let core_kept = present.contains("core.repositoryformatversion");

    let mut f = Figures::default();
    f.zero("keys_lost", "keys lost (both sides)", lost_host + lost_box);
    f.count("keys_lost_host", "host keys lost", lost_host);
    f.count("keys_lost_box", "box keys lost", lost_box);
    f.holds("core_section_kept", "git's own [core] keys kept", core_kept);
    f.share("host_keys", "host keys written", h.acknowledged.len() as u64, n as u64);
    f.share("box_keys", "box keys written", b.acknowledged.len() as u64, n as u64);
    f.count("host_writes_refused", "host writes refused (retried)", h.writes.refused());
    f.count("box_writes_refused", "box writes refused (retried)", b.writes.refused());
    f.count("keys_given_up", "keys given up after 20 tries", h.given_up + b.given_up);
    f.zero("box_git_crashed", "box git config killed by a signal (SIGBUS…)", b.writes.crashed);
    f.ms("box_write_p50_ms", "box git config p50", b.writes.percentile_ms(50.0));
    f.ms("box_write_p99_ms", "box git config p99", b.writes.percentile_ms(99.0));
    for (t, what) in [(&h.writes, "host git config"), (&b.writes, "box git config")] {
        if let Some(n) = t.reasons_note(what, 2) {
            f.note(n);
        }
    }
    Ok(f)
}
