//! What the latency and watch runs share: the host's edits made one by one in a shuffled order
//! (so no kind of edit always comes first after a quiet spell), each stamped the moment its
//! syscall returned, on a clock the box-side reader shares.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long the box side waits, after its warm-up, before the first edit.
pub const SETTLE: Duration = Duration::from_millis(200);

/// When each host edit was made.
#[derive(Debug)]
pub struct Stamps {
    base: Instant,
    /// Nanoseconds since `base`, plus one; 0 while not made.
    at: Vec<AtomicU64>,
    /// Whether each edit's syscall has been entered: news of it can come before it returns.
    begun: Vec<AtomicBool>,
}

impl Stamps {
    /// `n` edits, none made yet.
    pub fn new(n: usize) -> Stamps {
        Stamps { base: Instant::now(), at: (0..n).map(|_| AtomicU64::new(0)).collect(), begun: (0..n).map(|_| AtomicBool::new(false)).collect() }
    }

    /// The shared clock: time since the stamps were made.
    pub fn now(&self) -> Duration {
        self.base.elapsed()
    }

    /// Edit `i` was just made.
    pub fn mark(&self, i: usize) {
        self.at[i].store(self.now().as_nanos() as u64 + 1, Ordering::Release);
    }

    /// Edit `i` is about to be made.
    pub fn begin(&self, i: usize) {
        self.begun[i].store(true, Ordering::Release);
    }

    /// Whether edit `i` has been started (an event of it may arrive before its stamp).
    pub fn begun(&self, i: usize) -> bool {
        self.begun[i].load(Ordering::Acquire)
    }

    /// When edit `i` was made, if it was.
    pub fn made(&self, i: usize) -> Option<Duration> {
        match self.at[i].load(Ordering::Acquire) {
            0 => None,
            n => Some(Duration::from_nanos(n - 1)),
        }
    }
}

/// 0..n in a fixed pseudo-random order (Fisher-Yates on xorshift64, seed 1), the same every run.
pub fn order(n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
    v
}

/// Makes every edit (`edit(i)`), in `order`, `gap` apart, each stamped once it returned; the
/// first after [`SETTLE`]. An edit that fails stops the run with its error.
pub fn make_edits(stamps: &Stamps, gap: Duration, edit: impl Fn(usize) -> std::io::Result<()>) -> Result<(), String> {
    std::thread::sleep(SETTLE);
    for i in order(stamps.at.len()) {
        stamps.begin(i);
        edit(i).map_err(|e| format!("host edit {i}: {e}"))?;
        stamps.mark(i);
        std::thread::sleep(gap);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_a_fixed_permutation() {
        let o = order(1000);
        let mut s = o.clone();
        s.sort();
        assert_eq!(s, (0..1000).collect::<Vec<_>>());
        assert_eq!(o, order(1000));
        assert_ne!(o[..10], (0..10).collect::<Vec<_>>()[..]);
    }
}
