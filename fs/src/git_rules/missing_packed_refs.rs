//! A missing `packed-refs` kept by the kernel a moment (ADR 0060).
//!
//! Git stats `packed-refs` after every ref it finds missing: each guess at what `HEAD` names
//! (`refs/HEAD`, `refs/tags/HEAD`...), `CHERRY_PICK_HEAD`, `AUTO_MERGE`. In a repository that
//! never packed its refs each is a LOOKUP of a missing name (about twenty in one `git commit`),
//! a FUSE round trip that costs about a millisecond of TCG in a guest. So its absence is
//! answered with a negative entry the kernel keeps for a moment, never where a stale one could
//! do harm:
//! - none is given while the box holds or is creating a ref-store lock (any lock but an index's
//!   or the object store's): what git reads under one still asks seamfs;
//! - creating a ref-store lock, and a box process's first look at HEAD, wait out every negative
//!   the kernel may still keep when the share holds `packed-refs` by then (one refresh asks;
//!   only a host `pack-refs` or `clone` makes it appear): the next command sees the host's
//!   packed refs at once, and so does git under a lock;
//! - the judge notes a ref the process may have read through such an entry as absent
//!   (`value_as_the_kernel_may_show`): a move made from that stale view is refused.
//!
//! Both sides meet under one mutex: a negative being answered while a lock is created is
//! waited out by that create, or is not given.

use std::ffi::{CStr, CString, OsStr};
use std::path::Path;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::core::Core;
use crate::gitdata::cpath;
use crate::layer::Layer;
use crate::policy::Class;
// The shortest TTL: ADR 0020's window, as for a process's own refresh.
use crate::recent_refresh::MIN_WINDOW as MIN_TTL;

/// The longest the kernel keeps a negative `packed-refs` entry (the share's TTL when shorter):
/// long enough for git's bursts of guesses in a guest, short enough that the wait after a host's
/// first `pack-refs` (twice this at most) stalls a box command little.
pub(crate) const MAX_TTL: Duration = Duration::from_millis(250);

/// Negative `packed-refs` entries given to the kernel, and the waits that keep them harmless.
#[derive(Debug)]
pub(crate) struct MissingPackedRefs {
    ttl: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Lookups of `packed-refs` being answered that may give a negative entry.
    answering: usize,
    /// Lock creates and first looks waiting negatives out: no new one is given meanwhile.
    waiting: usize,
    /// `packed-refs` paths on the lower whose absence the kernel may keep, and when the last
    /// negative for each left seamfs.
    given: Vec<(CString, Instant)>,
}

impl MissingPackedRefs {
    /// Negatives kept for `window` (the share's TTL), within [`MIN_TTL`]..=[`MAX_TTL`].
    pub(crate) fn new(window: Duration) -> Self {
        MissingPackedRefs { ttl: window.clamp(MIN_TTL, MAX_TTL), state: Mutex::new(State::default()) }
    }

    /// How long after seamfs gave it the kernel may still keep a negative: twice its TTL, as
    /// the kernel counts the TTL from when the asking process runs again after the reply.
    fn kept_for(&self) -> Duration {
        self.ttl * 2
    }

    /// A lookup of `packed-refs` starts: it may give a negative unless a wait is under way.
    fn begin(&self) -> Answering<'_> {
        let mut s = self.state.lock();
        let may = s.waiting == 0;
        if may {
            s.answering += 1;
        }
        Answering { owner: self, may, given: None }
    }

    /// True when the kernel may still keep a negative entry for `packed` (a lower path).
    pub(crate) fn maybe_kept(&self, packed: &CStr) -> bool {
        let kept = self.kept_for();
        self.state.lock().given.iter().any(|(p, t)| p.as_c_str() == packed && t.elapsed() < kept)
    }

    /// No new negative from now until the returned guard drops.
    fn hold(&self) -> Waiting<'_> {
        self.state.lock().waiting += 1;
        Waiting(self)
    }

    /// How many answers that may give a negative are under way, and the `packed-refs` paths
    /// whose negatives the kernel may keep, with when each expires (expired ones forgotten).
    fn outstanding(&self) -> (usize, Vec<(CString, Instant)>) {
        let kept = self.kept_for();
        let mut s = self.state.lock();
        s.given.retain(|(_, t)| t.elapsed() < kept);
        (s.answering, s.given.iter().map(|(p, t)| (p.clone(), *t + kept)).collect())
    }
}

/// A lookup of `packed-refs` being answered; the negative it gave is noted when it drops.
#[derive(Debug)]
pub(crate) struct Answering<'a> {
    owner: &'a MissingPackedRefs,
    may: bool,
    given: Option<CString>,
}

impl Drop for Answering<'_> {
    fn drop(&mut self) {
        if !self.may {
            return;
        }
        let mut s = self.owner.state.lock();
        s.answering -= 1;
        if let Some(p) = self.given.take() {
            let now = Instant::now();
            match s.given.iter_mut().find(|(q, _)| *q == p) {
                Some(e) => e.1 = now,
                None => s.given.push((p, now)),
            }
        }
    }
}

/// A wait under way: no negative is given until it drops.
#[derive(Debug)]
pub(crate) struct Waiting<'a>(&'a MissingPackedRefs);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.state.lock().waiting -= 1;
    }
}

/// A lock under which git reads refs: any lock but an index's (`index.lock`, the box's
/// `index-box.ID.lock`), `config`'s, or one in the object store.
pub(crate) fn is_ref_store_lock(path: &[u8]) -> bool {
    let name = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
    let in_objects = path.starts_with(b"objects/") || path.windows(9).any(|w| w == b"/objects/");
    name.ends_with(b".lock") && !name.starts_with(b"index") && !name.starts_with(b"config") && !in_objects
}

impl<L: Layer> Core<L> {
    /// A lookup of `name` in a directory of class `parent`: `Some` when it is `packed-refs` in a
    /// git dir, whose absence may be answered with a kept negative entry.
    pub(crate) fn packed_refs_lookup(&self, parent: Class, name: &OsStr) -> Option<Answering<'_>> {
        (self.layer.guards() && parent == Class::GitDir && name == "packed-refs").then(|| self.missing_packed_refs.begin())
    }

    /// The TTL of the negative entry for the missing `packed-refs` at `path`, when one may be
    /// given now: no wait under way, and no ref-store lock held by the box.
    pub(crate) fn packed_refs_negative_ttl(&self, a: &mut Answering<'_>, path: &CStr) -> Option<Duration> {
        if !a.may || self.judge.locks.any_held(|p| is_ref_store_lock(p.to_bytes())) {
            return None;
        }
        a.given = Some(path.to_owned());
        Some(a.owner.ttl)
    }

    /// Before a box lock at `path` is created: a ref-store lock waits out the negatives the
    /// kernel may keep for a `packed-refs` the share now holds, and holds new ones off until
    /// the returned guard drops (after the create has recorded the lock as the box's).
    pub(crate) fn packed_refs_lock_barrier(&self, path: &CStr) -> Option<Waiting<'_>> {
        (self.layer.guards() && is_ref_store_lock(path.to_bytes())).then(|| self.wait_out_missing_packed_refs())
    }

    /// Waits until the kernel keeps no negative entry for a `packed-refs` the share holds.
    /// Answers still being given are waited for first (a few ms: none starts meanwhile).
    pub(crate) fn wait_out_missing_packed_refs(&self) -> Waiting<'_> {
        let m = &self.missing_packed_refs;
        let waiting = m.hold();
        loop {
            let (answering, live) = m.outstanding();
            if answering > 0 {
                crate::refresh_scope::pause(Duration::from_millis(1));
                continue;
            }
            let until = live.iter().filter(|(p, _)| self.share_holds(p)).map(|(_, t)| *t).max();
            let now = Instant::now();
            match until {
                Some(t) if t > now => {
                    tracing::debug!(wait_ms = (t - now).as_millis() as u64, "waiting out a kept negative entry of a packed-refs the share now holds");
                    crate::refresh_scope::pause(t - now);
                }
                _ => return waiting,
            }
        }
    }

    /// Whether the share's server holds `path` now (a forced revalidation first).
    fn share_holds(&self, path: &CStr) -> bool {
        self.stat_after(self.lower.refresh_again(path), path).is_ok()
    }

    /// A ref's value `v` (read from the share) as the process may have read it: absent when its
    /// loose file is missing and the kernel may keep a negative entry for the `packed-refs` of
    /// `common`, where it was found.
    pub(super) fn value_as_the_kernel_may_show(&self, common: &Path, rel: &str, v: Option<String>) -> Option<String> {
        if v.is_none() || !rel.starts_with("refs/") || !self.missing_packed_refs.maybe_kept(&cpath(&common.join("packed-refs"))) {
            return v;
        }
        self.lower.stat(&cpath(&common.join(rel))).is_ok().then_some(v).flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_negative_is_noted_when_its_answer_ends_and_expires_after_twice_the_ttl() {
        let m = MissingPackedRefs::new(Duration::from_millis(60));
        let mut a = m.begin();
        assert!(a.may);
        a.given = Some(c".git/packed-refs".to_owned());
        assert!(!m.maybe_kept(c".git/packed-refs"), "noted once answered");
        drop(a);
        assert!(m.maybe_kept(c".git/packed-refs"));
        assert!(!m.maybe_kept(c"sub/.git/packed-refs"), "another git dir's is not");
        std::thread::sleep(Duration::from_millis(125));
        assert!(!m.maybe_kept(c".git/packed-refs"), "past twice the TTL");
        assert_eq!(m.outstanding().1.len(), 0, "forgotten once past");
    }

    #[test]
    fn no_negative_is_given_while_a_wait_is_under_way() {
        let m = MissingPackedRefs::new(Duration::from_millis(100));
        let answering = m.begin();
        let w = m.hold();
        assert_eq!(m.outstanding().0, 1, "the answer begun before the wait is waited for");
        assert!(!m.begin().may, "none begun during the wait may give a negative");
        drop(answering);
        drop(w);
        assert!(m.begin().may);
        assert_eq!(m.outstanding().0, 0);
    }

    #[test]
    fn the_ttl_stays_within_its_bounds() {
        assert_eq!(MissingPackedRefs::new(Duration::ZERO).ttl, MIN_TTL);
        assert_eq!(MissingPackedRefs::new(Duration::from_secs(60)).ttl, MAX_TTL);
    }

    #[test]
    fn ref_store_locks_are_every_lock_but_the_index_config_and_objects() {
        for p in [".git/HEAD.lock", ".git/refs/heads/main.lock", ".git/packed-refs.lock", ".git/AUTO_MERGE.lock", ".git/worktrees/w/HEAD.lock"] {
            assert!(is_ref_store_lock(p.as_bytes()), "{p}");
        }
        for p in [".git/index.lock", ".git/index-box.a.lock", ".git/config.lock", ".git/objects/maintenance.lock", ".git/refs/heads/main"] {
            assert!(!is_ref_store_lock(p.as_bytes()), "{p}");
        }
    }
}
