//! `race packed-refs`: the host tags and repacks its refs (`git pack-refs --all`) while the box
//! lists them (`git show-ref --tags`).
//!
//! Each repack replaces `packed-refs` by rename with a longer file. Git sizes its read of
//! `packed-refs` by `fstat` and dies on a short read ("couldn't read ... packed-refs"), so a box
//! that is handed one generation's size and another's bytes fails outright. A listing that
//! succeeds but lacks a tag the host had packed before the listing started read an old
//! generation: a stale view. Both must be zero.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::actor::{Cadence, Tally};
use super::boxshell::BoxShell;
use super::figures::Figures;
use super::rig::Rig;
use super::Params;
use crate::lab::LabError;

/// Default host repacks.
pub const DEFAULT_REPACKS: usize = 60;
/// Default time between the host's repacks (`--host-period-ms`): a box listing in a guest takes
/// a few hundred milliseconds, and each should meet a few repacks.
pub const DEFAULT_PERIOD: Duration = Duration::from_millis(200);

/// The host's side: tag `tNNNN` and repack, `n` times, one every `period`; when each tag was
/// packed. A refused tag or repack ends the run (the scenario's premise is gone).
fn host(sh: &BoxShell, n: usize, period: Duration, packed: &Mutex<Vec<Instant>>) -> Result<u64, LabError> {
    let mut cadence = Cadence::new(period);
    for i in 0..n {
        cadence.wait();
        for args in [&["tag", &format!("t{i:04}")][..], &["pack-refs", "--all"]] {
            let r = sh.git(args)?;
            if !r.ok {
                return Err(LabError::new("host tag and pack-refs", sh.dir(), r.why()));
            }
        }
        packed.lock().unwrap_or_else(|e| e.into_inner()).push(Instant::now());
    }
    Ok(n as u64)
}

#[derive(Debug, Default)]
struct Reads {
    listings: Tally,
    /// Listings that lacked a tag packed before they started.
    stale: u64,
    /// A few failures' messages.
    failed_samples: Vec<String>,
}

/// The box's side: list the tags until the host is done.
fn reader(sh: &BoxShell, done: &AtomicBool, packed: &Mutex<Vec<Instant>>) -> Result<Reads, LabError> {
    let mut r = Reads::default();
    while !done.load(Ordering::Acquire) {
        let started = Instant::now();
        // Every tag packed before the listing started (the host's pack-refs had returned).
        let before = packed.lock().unwrap_or_else(|e| e.into_inner()).iter().filter(|t| **t < started).count();
        let ls = sh.git(&["show-ref", "--tags"])?;
        // show-ref exits 1 when there is no tag yet: a listing of nothing, not a failure.
        let ok = ls.ok || (before == 0 && ls.stderr.trim().is_empty());
        r.listings.record(ok, started.elapsed(), || ls.why());
        if !ok {
            if r.failed_samples.len() < 2 {
                r.failed_samples.push(ls.why());
            }
            continue;
        }
        let listed: std::collections::HashSet<&str> = ls.stdout.lines().filter_map(|l| l.split_once(" refs/tags/").map(|(_, t)| t)).collect();
        if (0..before).any(|i| !listed.contains(format!("t{i:04}").as_str())) {
            r.stale += 1;
        }
    }
    Ok(r)
}

/// Runs the scenario on a mounted rig.
pub fn run(rig: &Rig, p: &Params) -> Result<Figures, LabError> {
    let n = p.ops_or(DEFAULT_REPACKS);
    let period = p.host_period.unwrap_or(DEFAULT_PERIOD);
    let packed = Mutex::new(Vec::new());
    let done = AtomicBool::new(false);
    let (host, reads) = std::thread::scope(|s| {
        let host_sh = BoxShell::Local(rig.host.clone());
        let (packed, done) = (&packed, &done);
        let h = s.spawn(move || {
            let r = host(&host_sh, n, period, packed);
            done.store(true, Ordering::Release);
            r
        });
        let reads = reader(&rig.boxed, done, packed);
        let h = h.join().unwrap_or_else(|_| Err(LabError::new("join host packer", &rig.host, "panicked")));
        (h, reads)
    });
    let host = host?;
    let reads = reads?;
    let mut f = Figures::default();
    f.zero("packed_refs_read_failed", "box listings that failed", reads.listings.refused());
    f.zero("packed_refs_stale", "box listings missing a tag packed before them", reads.stale);
    f.share("box_listings", "box listings that succeeded", reads.listings.landed, reads.listings.attempted);
    f.count("host_repacks", "host repacks (tag + pack-refs)", host);
    f.ms("box_listing_p50_ms", "box show-ref p50", reads.listings.percentile_ms(50.0));
    for s in &reads.failed_samples {
        f.note(format!("box listing failed: {s}"));
    }
    Ok(f)
}
