//! Deterministic draws for the fault windows: splitmix64 over the seed, the name and the event.

use std::time::Duration;

/// FNV-1a of a byte string (stable across runs, unlike node ids).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3))
}

/// splitmix64's output function.
pub fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Event `n` of a stream keyed by `key`: a duration uniform in `[max/2, max]` (microseconds).
pub fn jitter(key: u64, n: u64, max: Duration) -> Duration {
    let max_us = max.as_micros() as u64;
    let lo = max_us / 2;
    let span = max_us - lo + 1;
    Duration::from_micros(lo + splitmix64(key ^ splitmix64(n)) % span)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_in_range() {
        let max = Duration::from_millis(1000);
        for n in 0..1000 {
            let d = jitter(42, n, max);
            assert!(d >= max / 2 && d <= max, "{d:?}");
        }
    }
}
