//! `seamfs.toml`: the few settings a box bootstrap may want to pin in a file.
//!
//! A deliberately small subset of TOML: `key = value` lines, `#` comments, booleans, numbers and
//! quoted strings. Unknown keys and malformed lines are errors that name the file and line.
//!
//! ```toml
//! index_split = false        # the box uses the shared index (default true)
//! ttl = 1.0                  # work-tree cache TTL in seconds (default 1)
//! feed = unix:/run/seamd.feed # host change feed (unix:PATH, vsock:CID:PORT or a device path)
//! shared_index_wait_ms = 2000  # how long a first touch retries a missing shared index
//! ```

use std::fmt;
use std::path::{Path, PathBuf};

/// Settings from the file; None where the file is silent.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct FileConfig {
    /// `index_split`.
    pub index_split: Option<bool>,
    /// `ttl` (seconds).
    pub ttl: Option<f64>,
    /// `shared_index_wait_ms`.
    pub shared_index_wait_ms: Option<u64>,
    /// `feed`: the host change feed's address (`crate::feed::FeedAddr`).
    pub feed: Option<crate::feed::FeedAddr>,
}

/// A config file problem, with the file and line.
#[derive(Debug)]
pub struct ConfigError {
    /// The file.
    pub path: PathBuf,
    /// 1-based line (0: the file as a whole).
    pub line: usize,
    /// What is wrong.
    pub why: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "read {}: {}", self.path.display(), self.why)
        } else {
            write!(f, "parse {}:{}: {}", self.path.display(), self.line, self.why)
        }
    }
}

impl std::error::Error for ConfigError {}

/// Reads and parses a config file.
pub fn load(path: &Path) -> Result<FileConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError { path: path.into(), line: 0, why: e.to_string() })?;
    parse(&text).map_err(|(line, why)| ConfigError { path: path.into(), line, why })
}

/// Parses config text; errors carry the line number.
pub fn parse(text: &str) -> Result<FileConfig, (usize, String)> {
    let mut c = FileConfig::default();
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = strip_comment(raw).trim();
        if line.is_empty() {
            continue;
        }
        let (k, v) = line.split_once('=').ok_or((n, format!("expected `key = value`, found `{line}`")))?;
        let (k, v) = (k.trim(), v.trim());
        match k {
            "index_split" => c.index_split = Some(v.parse().map_err(|_| (n, format!("index_split must be true or false, not `{v}`")))?),
            "ttl" => {
                let t: f64 = v.parse().map_err(|_| (n, format!("ttl must be a number of seconds, not `{v}`")))?;
                if !(0.0..=3600.0).contains(&t) {
                    return Err((n, "ttl must be between 0 and 3600 seconds".into()));
                }
                c.ttl = Some(t);
            }
            "shared_index_wait_ms" => {
                c.shared_index_wait_ms = Some(v.parse().map_err(|_| (n, format!("shared_index_wait_ms must be a whole number, not `{v}`")))?)
            }
            "feed" => c.feed = Some(v.trim_matches('"').parse().map_err(|e| (n, format!("feed: {e}")))?),
            _ => return Err((n, format!("unknown key `{k}` (known: index_split, ttl, shared_index_wait_ms, feed)"))),
        }
    }
    Ok(c)
}

fn strip_comment(line: &str) -> &str {
    match line.find('#') {
        Some(i) => &line[..i],
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_known_keys_and_refuses_the_rest() {
        let c = parse("# box\nindex_split = false\nttl = 0.5 # short\n\nshared_index_wait_ms = 100\n").unwrap();
        assert_eq!(c, FileConfig { index_split: Some(false), ttl: Some(0.5), shared_index_wait_ms: Some(100), feed: None });
        let c = parse("feed = unix:/run/seamd.feed\n").unwrap();
        assert_eq!(c.feed, Some(crate::feed::FeedAddr::Unix("/run/seamd.feed".into())));
        assert!(parse("feed = tcp:1:2").is_err());
        assert_eq!(parse("index_split = maybe").unwrap_err().0, 1);
        assert_eq!(parse("\nfoo = 1").unwrap_err().0, 2);
        assert!(parse("ttl = 99999").is_err());
        assert!(parse("just words").is_err());
    }
}
