//! Deterministic content for generated repos: a seeded generator, file sizes, and source-like
//! text. Text (not random bytes) so git's zlib compresses it as it would real code, keeping the
//! object store's size realistic.

use crate::share::rng::splitmix64;

/// A seeded generator (splitmix64 over a counter): the same seed gives the same repo, so a cached
/// repo is valid across runs.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng { state: splitmix64(seed) }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        splitmix64(self.state)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// One item of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Words for names and text.
pub const WORDS: &[&str] = &[
    "core", "net", "util", "parse", "render", "store", "cache", "model", "view", "http", "auth", "index", "query",
    "event", "queue", "config", "driver", "shell", "graph", "token", "buffer", "stream", "frame", "codec", "image",
    "audio", "crypt", "hash", "table", "vector", "matrix", "layout", "widget", "theme", "client", "server", "proto",
    "schema", "report", "metric", "trace", "log", "test", "bench", "doc", "build", "plugin", "module", "handle",
    "state", "error", "result", "option", "string", "number", "return", "struct", "impl", "match", "value", "self",
    "const", "static", "async",
];

/// Extensions with weights (a mixed source tree).
const EXTS: &[(&str, u32)] =
    &[("rs", 30), ("c", 10), ("h", 10), ("py", 12), ("js", 12), ("ts", 8), ("md", 8), ("json", 5), ("txt", 5)];

/// A file extension drawn by weight.
pub fn ext(rng: &mut Rng) -> &'static str {
    let total: u32 = EXTS.iter().map(|e| e.1).sum();
    let mut x = rng.below(total as usize) as u32;
    for (e, w) in EXTS {
        if x < *w {
            return e;
        }
        x -= w;
    }
    "txt"
}

/// Smallest and largest ordinary file, in bytes.
pub const MIN_SIZE: f64 = 256.0;
/// See [`MIN_SIZE`].
pub const MAX_SIZE: f64 = 48.0 * 1024.0;

/// An ordinary file's size: log-uniform between 256 B and 48 KiB (median ~3.5 KiB, mean ~9 KiB),
/// as source trees are: many small files, a long tail of larger ones.
pub fn file_size(rng: &mut Rng) -> usize {
    let (lo, hi) = (MIN_SIZE.ln(), MAX_SIZE.ln());
    (lo + rng.unit() * (hi - lo)).exp() as usize
}

/// Source-like text of exactly `size` bytes: lines of words with indentation.
pub fn text(rng: &mut Rng, size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(size + 64);
    while out.len() < size {
        let indent = rng.below(4) * 4;
        out.extend(std::iter::repeat_n(b' ', indent));
        let words = 2 + rng.below(9);
        for w in 0..words {
            if w > 0 {
                out.push(b' ');
            }
            out.extend_from_slice(rng.pick(WORDS).as_bytes());
        }
        out.extend_from_slice(if rng.below(3) == 0 { b";\n" } else { b"\n" });
    }
    out.truncate(size);
    out
}

/// Incompressible bytes (assets: images, archives).
pub fn binary(rng: &mut Rng, size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(size + 8);
    while out.len() < size {
        out.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    out.truncate(size);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_stay_in_range_and_text_is_exact() {
        let mut rng = Rng::new(7);
        for _ in 0..1000 {
            let s = file_size(&mut rng);
            assert!((MIN_SIZE as usize..=MAX_SIZE as usize).contains(&s), "{s}");
        }
        assert_eq!(text(&mut rng, 1234).len(), 1234);
        assert_eq!(binary(&mut rng, 13).len(), 13);
    }

    #[test]
    fn same_seed_same_draws() {
        let (mut a, mut b) = (Rng::new(3), Rng::new(3));
        assert_eq!(text(&mut a, 500), text(&mut b, 500));
    }
}
