//! A small map whose entries are looked up again after a TTL: what parking learns about the
//! lower (which directory is a repository, its ignore rules, its index) holds for a burst, and
//! a change on either side is seen a moment later.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Entries older than the TTL are computed again; at most `max` are kept.
#[derive(Debug)]
pub struct TtlCache<K, V> {
    ttl: Duration,
    max: usize,
    map: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Eq + Hash + Clone, V: Clone> TtlCache<K, V> {
    /// An empty cache.
    pub fn new(ttl: Duration, max: usize) -> Self {
        TtlCache { ttl, max, map: Mutex::new(HashMap::new()) }
    }

    /// The cached value of `k` if fresh, computing nothing.
    pub fn peek<Q>(&self, k: &Q) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        self.map.lock().get(k).filter(|(at, _)| at.elapsed() < self.ttl).map(|(_, v)| v.clone())
    }

    /// Forgets every entry.
    pub fn clear(&self) {
        self.map.lock().clear();
    }

    /// The cached value of `k`, or `make()`'s (computed outside the lock).
    pub fn get_or(&self, k: K, make: impl FnOnce() -> V) -> V {
        if let Some((at, v)) = self.map.lock().get(&k) {
            if at.elapsed() < self.ttl {
                return v.clone();
            }
        }
        let v = make();
        let mut map = self.map.lock();
        if map.len() >= self.max {
            map.clear();
        }
        map.insert(k, (Instant::now(), v.clone()));
        v
    }
}
