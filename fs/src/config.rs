//! `seamfs.toml`: the few settings a box bootstrap may want to pin in a file.
//!
//! A deliberately small subset of TOML: `key = value` lines, `#` comments, booleans, numbers and
//! quoted strings. Unknown keys and malformed lines are errors that name the file and line.
//!
//! Each key is one `seamfs mount` flag and one `-o` option (`options::OPTIONS`); a flag wins.
//!
//! ```toml
//! index_split = false        # the box uses the shared index (default true)
//! ttl = 1.0                  # work-tree cache TTL in seconds (default 1)
//! feed = "unix:/run/seamd.feed"  # host change feed (unix:PATH, vsock:CID:PORT or a device)
//! shared_index_wait_ms = 2000  # how long a first touch retries a missing shared index
//! lock_wait_ms = 1000        # wait behind a host-held lock (default 1000)
//! passthrough = false        # never use FUSE passthrough (default true)
//! park = false               # do not park what box ops destroy (default true, ADR 0029)
//! park_max_bytes = 16777216  # larger files are logged, not parked (default 16 MiB)
//! park_burst_cap = 10000     # parks past this many in one burst are logged, not read
//! threads = 4                # FUSE worker threads (default 4)
//! log = "/var/log/seamfs.log"  # the daemon's log (default none)
//! box_id = "agent-1"         # this box's id (default: from /etc/machine-id)
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
    /// `lock_wait_ms`.
    pub lock_wait_ms: Option<u64>,
    /// `passthrough`.
    pub passthrough: Option<bool>,
    /// `park`: keep what box ops destroy (ADR 0029).
    pub park: Option<bool>,
    /// `park_max_bytes`.
    pub park_max_bytes: Option<u64>,
    /// `park_burst_cap`.
    pub park_burst_cap: Option<u64>,
    /// `threads` (1 to 256).
    pub threads: Option<usize>,
    /// `log`.
    pub log: Option<PathBuf>,
    /// `feed`: the host change feed's address (`crate::feed::FeedAddr`).
    pub feed: Option<crate::feed::FeedAddr>,
    /// `box_id`: which box this mount is (`crate::box_id`).
    pub box_id: Option<crate::box_id::BoxId>,
}

const KEYS: &str =
    "index_split, ttl, shared_index_wait_ms, lock_wait_ms, passthrough, park, park_max_bytes, park_burst_cap, threads, log, feed, box_id";

fn boolean(n: usize, k: &str, v: &str) -> Result<bool, (usize, String)> {
    v.parse().map_err(|_| (n, format!("{k} must be true or false, not `{v}`")))
}

fn whole(n: usize, k: &str, v: &str) -> Result<u64, (usize, String)> {
    v.parse().map_err(|_| (n, format!("{k} must be a whole number, not `{v}`")))
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
            "index_split" => c.index_split = Some(boolean(n, k, v)?),
            "passthrough" => c.passthrough = Some(boolean(n, k, v)?),
            "park" => c.park = Some(boolean(n, k, v)?),
            "park_max_bytes" => c.park_max_bytes = Some(whole(n, k, v)?),
            "park_burst_cap" => c.park_burst_cap = Some(whole(n, k, v)?),
            "lock_wait_ms" => c.lock_wait_ms = Some(whole(n, k, v)?),
            "threads" => match whole(n, k, v)? {
                t @ 1..=256 => c.threads = Some(t as usize),
                _ => return Err((n, "threads must be between 1 and 256".into())),
            },
            "log" => match v.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
                Some(p) if !p.is_empty() => c.log = Some(PathBuf::from(p)),
                _ => return Err((n, format!("log must be a quoted path, not `{v}`"))),
            },
            "ttl" => {
                let t: f64 = v.parse().map_err(|_| (n, format!("ttl must be a number of seconds, not `{v}`")))?;
                if !(0.0..=3600.0).contains(&t) {
                    return Err((n, "ttl must be between 0 and 3600 seconds".into()));
                }
                c.ttl = Some(t);
            }
            "shared_index_wait_ms" => c.shared_index_wait_ms = Some(whole(n, k, v)?),
            "feed" => match v.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
                Some(a) => c.feed = Some(a.parse().map_err(|e| (n, format!("feed: {e}")))?),
                None => return Err((n, format!("feed must be a quoted address (\"unix:/run/seamd.feed\"), not `{v}`"))),
            },
            "box_id" => match v.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
                Some(id) => c.box_id = Some(crate::box_id::BoxId::parse(id).map_err(|e| (n, e))?),
                None => return Err((n, format!("box_id must be a quoted id (\"agent-1\"), not `{v}`"))),
            },
            _ => return Err((n, format!("unknown key `{k}` (known: {KEYS})"))),
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
        assert_eq!(c, FileConfig { index_split: Some(false), ttl: Some(0.5), shared_index_wait_ms: Some(100), ..Default::default() });
        let c = parse("lock_wait_ms = 300\npassthrough = false\nthreads = 2\nlog = \"/var/log/s.log\"\n").unwrap();
        assert_eq!((c.lock_wait_ms, c.passthrough, c.threads), (Some(300), Some(false), Some(2)));
        assert_eq!(c.log.as_deref(), Some(Path::new("/var/log/s.log")));
        assert!(parse("threads = 0").is_err());
        assert!(parse("log = /unquoted").is_err());
        let c = parse("feed = \"unix:/run/seamd.feed\"\n").unwrap();
        assert_eq!(c.feed, Some(crate::feed::FeedAddr::Unix("/run/seamd.feed".into())));
        assert!(parse("feed = \"tcp:1:2\"").is_err());
        assert_eq!(parse("box_id = \"b-2\"\n").unwrap().box_id.map(|b| b.to_string()), Some("b-2".into()));
        assert!(parse("box_id = \"B/2\"").is_err());
        assert!(parse("box_id = b2").is_err());
        assert_eq!(parse("index_split = maybe").unwrap_err().0, 1);
        assert_eq!(parse("\nfoo = 1").unwrap_err().0, 2);
        assert!(parse("ttl = 99999").is_err());
        assert!(parse("just words").is_err());
    }
}
