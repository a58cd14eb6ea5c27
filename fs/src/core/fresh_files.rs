//! Files this mount just created, asked for `security.capability`.
//!
//! Before the first write to an inode the kernel asks whether it carries file capabilities
//! (to drop them), once per inode (it then marks the inode as having none). For a file that did
//! not exist a moment before, the answer is known: none. So the first such question about a
//! file CREATE made is answered with the lower's own "no such attribute" errno, learned from
//! the first question that did reach the lower, instead of one more share round trip per new
//! file (six in a box `git commit`; ADR 0056).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use fuser::Errno;
use parking_lot::Mutex;

/// The attribute the kernel asks about before a write.
pub(crate) const CAPS: &[u8] = b"security.capability";

/// Files kept at most: past this the set starts over (a file forgotten is only asked the
/// lower about, as before).
const MAX: usize = 4096;

/// Node ids of files CREATE made whose capabilities nobody has asked about or set since.
#[derive(Debug, Default)]
pub(crate) struct FreshFiles {
    ids: Mutex<HashSet<u64>>,
    /// Whether `ids` may hold anything (spares FORGET the lock).
    any: AtomicBool,
    /// The errno the lower answers for an attribute a file lacks (ENODATA, or EOPNOTSUPP where
    /// it keeps none); 0 until a question reached it.
    absent: AtomicI32,
}

impl FreshFiles {
    /// CREATE made the file behind `id`.
    pub(crate) fn made(&self, id: u64) {
        let mut ids = self.ids.lock();
        if ids.len() >= MAX {
            ids.clear();
        }
        ids.insert(id);
        self.any.store(true, Ordering::Relaxed);
    }

    /// `id`'s attributes were set or removed, or the kernel forgot it (its id may name another
    /// file later): ask the lower from now on.
    pub(crate) fn changed(&self, id: u64) {
        if self.any.load(Ordering::Relaxed) {
            self.ids.lock().remove(&id);
        }
    }

    /// The answer to `security.capability` of `id` without the lower: once, for a fresh file,
    /// when the lower's errno for a missing attribute is known.
    pub(crate) fn no_caps(&self, id: u64) -> Option<Errno> {
        let e = self.absent.load(Ordering::Relaxed);
        (e != 0 && self.any.load(Ordering::Relaxed) && self.ids.lock().remove(&id)).then(|| Errno::from_i32(e))
    }

    /// What the lower answered for `security.capability` of some file.
    pub(crate) fn learn<T>(&self, answer: &Result<T, Errno>) {
        if let Err(e) = answer {
            let code = e.code();
            if code == libc::ENODATA || code == libc::EOPNOTSUPP {
                self.absent.store(code, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_file_is_answered_once_and_only_after_the_lower_said_how() {
        let f = FreshFiles::default();
        f.made(7);
        assert_eq!(f.no_caps(7), None, "the lower's errno is not known yet: ask it");
        f.learn::<()>(&Ok(()));
        assert_eq!(f.no_caps(7), None, "a file that has the attribute teaches nothing");
        f.learn::<()>(&Err(Errno::ENODATA));
        assert_eq!(f.no_caps(7), Some(Errno::ENODATA));
        assert_eq!(f.no_caps(7), None, "answered once: a later question goes to the lower");
        assert_eq!(f.no_caps(8), None, "a file CREATE did not make is never answered here");
    }

    #[test]
    fn a_set_or_forgotten_file_is_asked_of_the_lower() {
        let f = FreshFiles::default();
        f.learn::<()>(&Err(Errno::EOPNOTSUPP));
        f.made(1);
        f.made(2);
        f.changed(1);
        assert_eq!(f.no_caps(1), None);
        assert_eq!(f.no_caps(2), Some(Errno::EOPNOTSUPP));
        f.learn::<()>(&Err(Errno::EACCES));
        f.made(3);
        assert_eq!(f.no_caps(3), Some(Errno::EOPNOTSUPP), "only a missing-attribute errno is learned");
    }

    #[test]
    fn the_set_stays_bounded() {
        let f = FreshFiles::default();
        f.learn::<()>(&Err(Errno::ENODATA));
        for id in 0..(MAX as u64 + 10) {
            f.made(id);
        }
        assert!(f.ids.lock().len() <= MAX);
        assert_eq!(f.no_caps(MAX as u64 + 9), Some(Errno::ENODATA), "the newest is kept");
    }
}
