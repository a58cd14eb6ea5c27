//! Which names seamfs itself may have created through the lower since a moment ago (ADR 0037).
//!
//! A refresh that found a live name missing is the server's truth at that moment. It may stand
//! for the same process's next look (ADR 0020's window) only while nothing made through seamfs
//! could have created the name since: every create, link, symlink, mknod, mkdir and rename through
//! any handle on the mount's lower counts here. Names hash into buckets, so a write of an object
//! rarely costs a ref its memo; a rename counts for every name (it may move a directory).

use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, Ordering};

const BUCKETS: usize = 64;

/// Per-bucket change counters, shared by every handle on one lower root.
#[derive(Debug)]
pub struct NameChanges {
    all: AtomicU64,
    buckets: [AtomicU64; BUCKETS],
}

impl Default for NameChanges {
    fn default() -> Self {
        NameChanges { all: AtomicU64::new(0), buckets: std::array::from_fn(|_| AtomicU64::new(0)) }
    }
}

impl NameChanges {
    /// The generation of `rel`: it moves whenever a change that could create `rel` is counted.
    /// Read it before a refresh; compare it when the refresh's answer is recalled.
    pub fn generation(&self, rel: &CStr) -> u64 {
        // Both counters only grow, so their sum moves when either does.
        self.all.load(Ordering::Acquire) + self.buckets[bucket(rel)].load(Ordering::Acquire)
    }

    /// `rel` was (or may have been) created. Counted after the call that creates it.
    pub fn created(&self, rel: &CStr) {
        self.buckets[bucket(rel)].fetch_add(1, Ordering::AcqRel);
    }

    /// Any name may have appeared (a rename, which may move a whole directory).
    pub fn any(&self) {
        self.all.fetch_add(1, Ordering::AcqRel);
    }
}

/// FNV-1a over the path's bytes.
fn bucket(rel: &CStr) -> usize {
    let h = rel.to_bytes().iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    (h % BUCKETS as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_create_moves_its_names_generation_and_a_rename_moves_every_one() {
        let c = NameChanges::default();
        let (a, b) = (c".git/MERGE_HEAD", c".git/refs/heads/x");
        let (ga, gb) = (c.generation(a), c.generation(b));
        c.created(a);
        assert_ne!(c.generation(a), ga, "a create moves its own name's generation");
        if bucket(a) != bucket(b) {
            assert_eq!(c.generation(b), gb, "another bucket's name keeps its generation");
        }
        let gb = c.generation(b);
        c.any();
        assert_ne!(c.generation(b), gb, "a rename moves every name's generation");
    }
}
