//! The fault model: which lookups of a replaced name are answered stale, and for how long.
//!
//! See docs/decisions/0002-share-emulator-fault-model.md. Per `(parent, name)` the model keeps the
//! last answer the kernel was given (node or missing), when and with what entry TTL. A lookup that
//! arrives while that TTL still runs can only be a forced one (the kernel asks early only when a
//! caller forces revalidation, e.g. `link("/", name)`): it gets the truth and ends any fault. An
//! unforced lookup whose fresh node differs from the last one served starts a fault window, jittered
//! from the seed, during which unforced lookups read the old node or nothing. A negative answer to
//! a revalidation makes the kernel look the name up again at once; that follow-up is not forced
//! and gets the same fault.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use seamfs::layer::Answer;

use super::rng::{fnv1a, jitter};

/// Slack added to an answer's TTL when judging a lookup forced: the kernel's expiry (jiffies,
/// rounded up, counted from when it read the reply) is a little later than the one we record.
pub const FORCED_SLACK: Duration = Duration::from_millis(20);

/// How soon after a negative answer to a revalidation the kernel's own re-lookup arrives. A
/// negative answer makes the kernel drop its positive entry and look the name up again at once;
/// that second lookup is not forced by anyone and must get the same fault.
pub const FOLLOW_UP: Duration = Duration::from_millis(100);

/// What a replaced name reads during its window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// The node the name led to before (virtiofs: cached entry, fd held per inode).
    StaleOld,
    /// Nothing: ENOENT (9p and virtiofs revalidation races).
    StaleMissing,
}

impl std::str::FromStr for FaultKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "stale-old" => Ok(FaultKind::StaleOld),
            "stale-missing" => Ok(FaultKind::StaleMissing),
            _ => Err(format!("unknown fault {s:?}: expected stale-old or stale-missing")),
        }
    }
}

/// A fault to inject.
#[derive(Debug, Clone, Copy)]
pub struct FaultConfig {
    /// Old or missing.
    pub kind: FaultKind,
    /// The longest window; each event draws its own in `[window/2, window]`.
    pub window: Duration,
    /// Seed of the draws.
    pub seed: u64,
}

#[derive(Debug)]
struct KeyState {
    /// What the kernel was last told: a node id, or None for a negative answer.
    served: Option<u64>,
    /// When and for how long that answer may be cached by the kernel.
    sent_at: Instant,
    ttl: Duration,
    /// The fault window running for this name, if any.
    fault: Option<Window>,
    /// Events seen for this name so far, so each draws its own window.
    events: u64,
    /// A negative fault answer replaced a positive entry: the kernel's re-lookup is due.
    follow_up: bool,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    /// The node the kernel held before the change (served by stale-old).
    old: u64,
    /// The truth when the window started.
    new: Option<u64>,
    until: Instant,
}

/// The model's state for every name in a git dir (outside objects) the kernel has looked up.
#[derive(Debug)]
pub struct FaultModel {
    cfg: FaultConfig,
    keys: Mutex<HashMap<(u64, OsString), KeyState>>,
}

impl FaultModel {
    /// A model with no history.
    pub fn new(cfg: FaultConfig) -> Self {
        FaultModel { cfg, keys: Mutex::new(HashMap::new()) }
    }

    /// The answer to a lookup of `name` in `parent` whose truth is `fresh`, at `now`.
    pub fn decide(&self, parent: u64, name: &OsStr, fresh: Option<u64>, now: Instant) -> (Answer, Option<Duration>) {
        let mut keys = self.keys.lock();
        let st = keys.entry((parent, name.to_os_string())).or_insert_with(|| KeyState {
            served: fresh,
            sent_at: now,
            ttl: Duration::ZERO,
            fault: None,
            events: 0,
            follow_up: false,
        });
        if std::mem::take(&mut st.follow_up) && now < st.sent_at + FOLLOW_UP {
            if let Some(w) = st.fault.filter(|w| now < w.until) {
                return (Answer::Missing, Some(w.until - now));
            }
        }
        // Early means forced: the truth, and the kernel's entry now holds it.
        if !st.ttl.is_zero() && now < st.sent_at + st.ttl + FORCED_SLACK {
            st.fault = None;
            return (Answer::Fresh, None);
        }
        if let Some(w) = st.fault.take() {
            if now < w.until {
                st.fault = Some(w);
                return self.stale(st, w.old, w.until - now);
            }
            if fresh == w.new {
                // Over, and nothing changed since: the truth, not a new event for the same change.
                return (Answer::Fresh, None);
            }
            // Replaced again during the window: a new event, from the node the kernel holds.
            return self.start(st, name, w.old, fresh, now);
        }
        match st.served {
            Some(old) if fresh != Some(old) => self.start(st, name, old, fresh, now),
            _ => (Answer::Fresh, None),
        }
    }

    /// Starts a fault window for a change from `old` to `fresh`.
    fn start(&self, st: &mut KeyState, name: &OsStr, old: u64, fresh: Option<u64>, now: Instant) -> (Answer, Option<Duration>) {
        let window = jitter(self.cfg.seed ^ fnv1a(name.as_bytes()), st.events, self.cfg.window);
        st.events += 1;
        st.fault = Some(Window { old, new: fresh, until: now + window });
        self.stale(st, old, window)
    }

    /// Records what the kernel was told (called after every lookup reply).
    pub fn answered(&self, parent: u64, name: &OsStr, node: Option<u64>, ttl: Duration, now: Instant) {
        let mut keys = self.keys.lock();
        // Only names `decide` saw (git-dir names outside objects) are tracked.
        if let Some(st) = keys.get_mut(&(parent, name.to_os_string())) {
            st.served = node;
            st.sent_at = now;
            st.ttl = ttl;
        }
    }

    fn stale(&self, st: &mut KeyState, old: u64, left: Duration) -> (Answer, Option<Duration>) {
        match self.cfg.kind {
            FaultKind::StaleOld => (Answer::Old(old), Some(left)),
            FaultKind::StaleMissing => {
                // The kernel held a positive entry: it drops it and asks again at once.
                st.follow_up = st.served.is_some();
                (Answer::Missing, Some(left))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(1);

    fn model(kind: FaultKind) -> FaultModel {
        FaultModel::new(FaultConfig { kind, window: Duration::from_millis(1000), seed: 7 })
    }

    /// Looks up, records the reply like the core does, and returns the answer.
    fn lookup(m: &FaultModel, fresh: Option<u64>, at: Instant) -> (Answer, Option<Duration>) {
        let (a, ttl) = m.decide(1, OsStr::new("HEAD"), fresh, at);
        let node = match a {
            Answer::Fresh => fresh,
            Answer::Old(o) => Some(o),
            Answer::Missing => None,
        };
        m.answered(1, OsStr::new("HEAD"), node, ttl.unwrap_or(TTL), at);
        (a, ttl)
    }

    #[test]
    fn replaced_name_reads_old_for_the_window_then_fresh() {
        let m = model(FaultKind::StaleOld);
        let t0 = Instant::now();
        assert_eq!(lookup(&m, Some(10), t0).0, Answer::Fresh);
        // Replaced on the backing side; the next unforced lookup comes after the TTL.
        let t1 = t0 + TTL + Duration::from_millis(100);
        let (a, ttl) = lookup(&m, Some(11), t1);
        assert_eq!(a, Answer::Old(10));
        let w = ttl.expect("a window");
        assert!(w >= Duration::from_millis(500) && w <= Duration::from_millis(1000), "{w:?}");
        // After the window: the truth, and no new event for the same change.
        let t2 = t1 + w + FORCED_SLACK + Duration::from_millis(1);
        assert_eq!(lookup(&m, Some(11), t2).0, Answer::Fresh);
        let t3 = t2 + TTL + FORCED_SLACK + Duration::from_millis(1);
        assert_eq!(lookup(&m, Some(11), t3).0, Answer::Fresh);
    }

    #[test]
    fn a_name_replaced_again_during_its_window_starts_another() {
        let m = model(FaultKind::StaleOld);
        let t0 = Instant::now();
        lookup(&m, Some(10), t0);
        let t1 = t0 + TTL + Duration::from_millis(100);
        let w = lookup(&m, Some(11), t1).1.expect("a window");
        // Replaced again (11 -> 12) before the window ended: the kernel still holds 10.
        let t2 = t1 + w + FORCED_SLACK + Duration::from_millis(1);
        assert_eq!(lookup(&m, Some(12), t2).0, Answer::Old(10));
    }

    #[test]
    fn forced_lookup_gets_the_truth_and_ends_the_fault() {
        let m = model(FaultKind::StaleMissing);
        let t0 = Instant::now();
        lookup(&m, Some(10), t0);
        let t1 = t0 + TTL + Duration::from_millis(100);
        assert_eq!(lookup(&m, Some(11), t1).0, Answer::Missing);
        // The kernel's own re-lookup after dropping its positive entry: still missing.
        assert_eq!(lookup(&m, Some(11), t1 + Duration::from_micros(50)).0, Answer::Missing);
        // Within the stale answer's TTL: only a forced lookup can arrive.
        let t2 = t1 + Duration::from_millis(10);
        assert_eq!(lookup(&m, Some(11), t2).0, Answer::Fresh);
        let t3 = t2 + TTL + FORCED_SLACK + Duration::from_millis(1);
        assert_eq!(lookup(&m, Some(11), t3).0, Answer::Fresh);
    }

    #[test]
    fn windows_are_deterministic_from_the_seed() {
        let draw = |seed| {
            let m = FaultModel::new(FaultConfig { kind: FaultKind::StaleOld, window: Duration::from_secs(1), seed });
            let t0 = Instant::now();
            lookup(&m, Some(10), t0);
            lookup(&m, Some(11), t0 + TTL * 2).1
        };
        assert_eq!(draw(1), draw(1));
        assert_ne!(draw(1), draw(2));
    }
}
