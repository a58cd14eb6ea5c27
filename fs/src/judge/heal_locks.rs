//! Shared `index.lock`s taken for a box ref transaction before its first ref lock (ADR 0054).
//!
//! The sealed heal (ADR 0005) needs the shared `index.lock` at the rename that moves a branch,
//! when box git already holds `HEAD.lock` and `refs/heads/<b>.lock`. Host git takes the same two
//! locks the other way round: `index.lock` first, then the ref locks, which it retries for
//! `core.filesRefLockTimeout` (100 ms) while it keeps `index.lock`. A host committing again and
//! again then held `index.lock` nearly all the time the heal waited for it. So seamfs takes the
//! shared lock for the box process before the box's ref lock is made, in git's order, and the
//! heal at the rename uses it. This records which box ref lock each such shared lock was taken
//! for, so it goes when that ref lock goes (committed, removed, or never made).

use std::ffi::{CStr, CString};
use std::time::Duration;

use dashmap::DashMap;

use super::procs::Proc;

/// One shared lock taken for a box process: its lower path and the git dir it belongs to.
#[derive(Debug, Clone)]
pub struct Taken {
    /// `<gitdir>/index.lock`, lower-relative.
    pub shared: CString,
    /// The git dir, lower-relative.
    pub gitdir: std::path::PathBuf,
    /// The box process it is held for.
    pub owner: Proc,
}

/// The registry: by the box ref lock the shared locks were taken for.
#[derive(Debug, Default)]
pub struct HealLocks {
    taken: DashMap<CString, Vec<Taken>>,
    /// Git dirs whose shared lock a box process waited the whole bound for and did without:
    /// its heal tries once more and does not wait again.
    gave_up: DashMap<(Proc, std::path::PathBuf), ()>,
}

impl HealLocks {
    /// Records the shared locks taken before box ref lock `trigger` is made.
    pub fn taken(&self, trigger: CString, taken: Vec<Taken>) {
        if !taken.is_empty() {
            self.taken.insert(trigger, taken);
        }
    }

    /// Whether process `p` holds a shared lock taken for one of its ref locks.
    pub fn holds_any(&self, p: Proc) -> bool {
        self.taken.iter().any(|e| e.value().iter().any(|t| t.owner == p))
    }

    /// Forgets what was taken for box ref lock `trigger` (only process `only`'s, when given: a
    /// create that failed must not release what another process took for the same name); the
    /// caller releases it.
    pub fn remove(&self, trigger: &CStr, only: Option<Proc>) -> Vec<Taken> {
        self.taken
            .remove_if(trigger, |_, v| only.is_none_or(|p| v.iter().all(|t| t.owner == p)))
            .map(|(_, v)| v)
            .unwrap_or_default()
    }

    /// Notes that `p` waited the whole bound for `gitdir`'s shared lock.
    pub fn gave_up(&self, p: Proc, gitdir: std::path::PathBuf) {
        self.gave_up.insert((p, gitdir), ());
    }

    /// How long the heal may still wait for `gitdir`'s lock for process `p`: nothing once the
    /// process waited the bound out before its ref lock (the host is not letting go).
    pub fn heal_wait(&self, p: Proc, gitdir: &std::path::Path, bound: Duration) -> Duration {
        if self.gave_up.remove(&(p, gitdir.to_path_buf())).is_some() {
            Duration::ZERO
        } else {
            bound
        }
    }

    /// Drops entries of processes that are gone (a killed box git's locks are reaped by
    /// `Locks::reap`; only the registry's memory is left to free).
    pub fn prune_dead(&self) {
        self.taken.retain(|_, v| v.iter().any(|t| t.owner.alive()));
        self.gave_up.retain(|(p, _), _| p.alive());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taken_locks_are_found_by_owner_and_removed_by_their_ref_lock() {
        let me = Proc { pid: std::process::id(), start: 0 };
        let other = Proc { pid: 1, start: 0 };
        let r = HealLocks::default();
        assert!(!r.holds_any(me));
        let t = Taken { shared: c"r/.git/index.lock".to_owned(), gitdir: "r/.git".into(), owner: me };
        r.taken(c"r/.git/HEAD.lock".to_owned(), vec![t]);
        assert!(r.holds_any(me) && !r.holds_any(other));
        assert!(r.remove(c"r/.git/refs/heads/main.lock", None).is_empty(), "another ref lock releases nothing");
        assert!(r.remove(c"r/.git/HEAD.lock", Some(other)).is_empty(), "a failed create of another process releases nothing");
        assert_eq!(r.remove(c"r/.git/HEAD.lock", Some(me)).len(), 1);
        assert!(!r.holds_any(me));
    }

    #[test]
    fn a_process_that_gave_up_waits_no_more_once() {
        let me = Proc { pid: std::process::id(), start: 0 };
        let r = HealLocks::default();
        let bound = Duration::from_secs(1);
        assert_eq!(r.heal_wait(me, "g".as_ref(), bound), bound);
        r.gave_up(me, "g".into());
        assert_eq!(r.heal_wait(me, "g".as_ref(), bound), Duration::ZERO);
        assert_eq!(r.heal_wait(me, "g".as_ref(), bound), bound, "only the heal right after is spared the wait");
    }
}
