//! The demo's results, as a short table or as JSON.

use std::fmt::Write;

/// What one read of HEAD returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// A commit id.
    Value(String),
    /// git failed (the ref read missing or torn).
    Error(String),
}

impl Read {
    fn fresh(&self, truth: &str) -> bool {
        matches!(self, Read::Value(v) if v == truth)
    }
}

/// One host commit and what each side read right after it.
#[derive(Debug, Clone)]
pub struct ReadRow {
    /// Commit number.
    pub n: usize,
    /// HEAD in the backing dir.
    pub truth: String,
    /// HEAD through the raw share.
    pub raw: Read,
    /// HEAD through seamfs.
    pub seamfs: Read,
    /// Milliseconds from the host commit to the end of both reads.
    pub after_ms: u64,
}

/// A box commit made right after a host commit, through one side.
#[derive(Debug, Clone)]
pub struct BoxCommitRow {
    /// "raw share" or "seamfs".
    pub through: &'static str,
    /// The commit both sides started from.
    pub base: String,
    /// The host's commit.
    pub host_commit: String,
    /// The box's commit, if it was made.
    pub box_commit: Option<String>,
    /// Why the box commit failed.
    pub box_error: Option<String>,
    /// The host branch afterwards.
    pub branch: String,
    /// Its parent.
    pub branch_parent: Option<String>,
    /// Whether the host's commit is still in the branch's history.
    pub host_commit_kept: bool,
}

/// Everything the demo measured.
#[derive(Debug, Clone)]
pub struct DemoReport {
    /// Share TTL in seconds.
    pub ttl: f64,
    /// Part 1.
    pub reads: Vec<ReadRow>,
    /// Part 2.
    pub box_commits: Vec<BoxCommitRow>,
}

fn short(id: &str) -> &str {
    id.get(..10).unwrap_or(id)
}

fn cell(r: &Read, truth: &str) -> String {
    match r {
        Read::Value(v) if v == truth => format!("{}  fresh", short(v)),
        Read::Value(v) => format!("{}  STALE", short(v)),
        Read::Error(_) => "error      STALE".to_string(),
    }
}

impl DemoReport {
    /// Stale reads (raw share, seamfs).
    pub fn stale_counts(&self) -> (usize, usize) {
        let raw = self.reads.iter().filter(|r| !r.raw.fresh(&r.truth)).count();
        let sfs = self.reads.iter().filter(|r| !r.seamfs.fresh(&r.truth)).count();
        (raw, sfs)
    }

    /// The human-readable report.
    pub fn to_table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "seam-lab demo: share TTL {} s (Lima vz uses 1 s, libkrun 5 s)\n", self.ttl);
        let _ = writeln!(s, "1. The host commits; right after, `git rev-parse HEAD` on each side:");
        let _ = writeln!(s, "   #  host (truth)  raw share          seamfs over share  (read after)");
        for r in &self.reads {
            let _ = writeln!(
                s,
                "  {:>2}  {:<12}  {:<17}  {:<17}  {} ms",
                r.n,
                short(&r.truth),
                cell(&r.raw, &r.truth),
                cell(&r.seamfs, &r.truth),
                r.after_ms
            );
        }
        let (raw, sfs) = self.stale_counts();
        let total = self.reads.len();
        let _ = writeln!(s, "   stale reads: raw share {raw}/{total}, seamfs {sfs}/{total}\n");
        let _ = writeln!(s, "2. The box reads HEAD, the host commits, the box commits at once (each side in its own");
        let _ = writeln!(s, "   new repository, so both start from the same state):");
        let _ = writeln!(s, "   through    host commit  box commit   box's parent           host's commit");
        for b in &self.box_commits {
            let parent = b.branch_parent.as_deref().map(short).unwrap_or("-");
            let who = match b.branch_parent.as_deref() {
                Some(p) if p == b.host_commit => "(host's)",
                Some(p) if p == b.base => "(old)",
                _ => "",
            };
            let box_c = match (&b.box_commit, &b.box_error) {
                (Some(c), _) => short(c).to_string(),
                (None, _) => "failed".to_string(),
            };
            let verdict = if b.host_commit_kept { "kept" } else { "LOST: branch rewound" };
            let _ = writeln!(
                s,
                "   {:<9}  {:<11}  {:<11}  {:<21}  {verdict}",
                b.through,
                short(&b.host_commit),
                box_c,
                format!("{parent} {who}")
            );
            if let Some(e) = &b.box_error {
                let _ = writeln!(s, "      box commit failed: {e}");
            }
        }
        s
    }

    /// The machine-readable report.
    pub fn to_json(&self) -> String {
        let (raw, sfs) = self.stale_counts();
        let reads: Vec<String> = self
            .reads
            .iter()
            .map(|r| {
                format!(
                    "{{\"commit\":{},\"truth\":{},\"raw_share\":{},\"raw_share_fresh\":{},\"seamfs\":{},\"seamfs_fresh\":{},\"read_after_ms\":{}}}",
                    r.n,
                    json_str(&r.truth),
                    read_json(&r.raw),
                    r.raw.fresh(&r.truth),
                    read_json(&r.seamfs),
                    r.seamfs.fresh(&r.truth),
                    r.after_ms
                )
            })
            .collect();
        let commits: Vec<String> = self
            .box_commits
            .iter()
            .map(|b| {
                format!(
                    "{{\"through\":{},\"base\":{},\"host_commit\":{},\"box_commit\":{},\"box_error\":{},\"branch\":{},\"branch_parent\":{},\"host_commit_kept\":{}}}",
                    json_str(b.through),
                    json_str(&b.base),
                    json_str(&b.host_commit),
                    opt_json(b.box_commit.as_deref()),
                    opt_json(b.box_error.as_deref()),
                    json_str(&b.branch),
                    opt_json(b.branch_parent.as_deref()),
                    b.host_commit_kept
                )
            })
            .collect();
        format!(
            "{{\"ttl_s\":{},\"reads\":[{}],\"stale_reads\":{{\"total\":{},\"raw_share\":{raw},\"seamfs\":{sfs}}},\"box_commits\":[{}]}}",
            self.ttl,
            reads.join(","),
            self.reads.len(),
            commits.join(",")
        )
    }
}

fn read_json(r: &Read) -> String {
    match r {
        Read::Value(v) => json_str(v),
        Read::Error(e) => format!("{{\"error\":{}}}", json_str(e)),
    }
}

fn opt_json(s: Option<&str>) -> String {
    s.map(json_str).unwrap_or_else(|| "null".into())
}

/// A JSON string literal (seamfs's doctor reports write them too).
pub use seamfs::report::json_str;

#[cfg(test)]
mod tests {
    use super::json_str;

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_str("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
    }
}
