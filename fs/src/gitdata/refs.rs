//! HEAD and refs as data: loose ref files, `packed-refs`, reflogs.

use std::fmt;
use std::path::Path;

use super::GitDirRef;

/// What HEAD says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Head {
    /// `ref: refs/heads/<name>`.
    Symbolic(String),
    /// A detached object id (hex).
    Detached(String),
}

/// Where a branch stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefState {
    /// It points at this object id (hex).
    At(String),
    /// No loose ref, no packed ref and no reflog entries: a branch that has never had a commit.
    Unborn,
    /// No loose or packed ref, but its reflog has entries: it has history and reads as absent
    /// (a host rewrite in flight, or a stale cache). Never to be treated as unborn.
    Hidden,
}

/// Why HEAD or a ref could not be read.
#[derive(Debug)]
pub enum RefError {
    /// Reading a file failed.
    Io {
        /// The file, relative to the git dir.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// A file is not what git writes.
    Malformed {
        /// The file or name.
        path: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

impl fmt::Display for RefError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RefError::Io { path, source } => write!(f, "read {path}: {source}"),
            RefError::Malformed { path, why } => write!(f, "parse {path}: {why}"),
        }
    }
}

impl std::error::Error for RefError {}

/// How many symbolic refs git follows before it gives up (`SYMREF_MAXDEPTH`).
const SYMREF_MAX_DEPTH: usize = 5;

/// The reason given for a chain of symbolic refs longer than [`SYMREF_MAX_DEPTH`].
const SYMREF_TOO_DEEP: &str = "symbolic refs nested deeper than 5 (a cycle?)";

fn is_oid(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A ref name git could have written: no "..", no leading "/", printable.
fn is_refname(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('/')
        && !s.contains("..")
        && !s.contains("//")
        && s.bytes().all(|b| b > b' ' && b != 0x7f && b != b'\\')
}

impl Head {
    /// HEAD's content: `ref: <name>` or an object id.
    pub fn parse(bytes: &[u8]) -> Result<Head, RefError> {
        let text = String::from_utf8_lossy(bytes);
        let line = text.lines().next().unwrap_or("").trim();
        if let Some(r) = line.strip_prefix("ref:") {
            let r = r.trim();
            if is_refname(r) {
                return Ok(Head::Symbolic(r.to_string()));
            }
        } else if is_oid(line) {
            return Ok(Head::Detached(line.to_string()));
        }
        Err(RefError::Malformed { path: "HEAD".into(), why: "neither `ref: <name>` nor an object id" })
    }
}

impl GitDirRef<'_> {
    fn read(&self, name: &str, common: bool) -> Result<Option<Vec<u8>>, RefError> {
        self.read_file(Path::new(name), common)
            .map_err(|source| RefError::Io { path: name.to_string(), source })
    }

    /// Reads HEAD (per git dir: a linked worktree has its own).
    pub fn head(&self) -> Result<Option<Head>, RefError> {
        let Some(bytes) = self.read("HEAD", false)? else { return Ok(None) };
        Head::parse(&bytes).map(Some)
    }

    /// Where `refname` stands: loose file, else packed-refs, else unborn or hidden by its reflog.
    pub fn resolve(&self, refname: &str) -> Result<RefState, RefError> {
        self.resolve_within(refname, SYMREF_MAX_DEPTH, true)
    }

    /// The object id `refname` holds (loose file, else packed-refs); None when it holds none.
    /// Unlike [`Self::resolve`] the reflog is not read: absent is absent, hidden or unborn.
    pub fn value(&self, refname: &str) -> Result<Option<String>, RefError> {
        match self.resolve_within(refname, SYMREF_MAX_DEPTH, false)? {
            RefState::At(oid) => Ok(Some(oid)),
            _ => Ok(None),
        }
    }

    /// [`Self::resolve`] following at most `depth` more symbolic refs: a cycle the other side
    /// wrote (`a` -> `b` -> `a`) must end in an error, not a stack overflow. Without `reflog`
    /// an absent ref is Unborn whatever its reflog holds.
    fn resolve_within(&self, refname: &str, depth: usize, reflog: bool) -> Result<RefState, RefError> {
        if !is_refname(refname) {
            return Err(RefError::Malformed { path: refname.into(), why: "not a ref name" });
        }
        // Per-worktree refs live in the git dir, shared refs in the common dir.
        let common = refname.starts_with("refs/") && !refname.starts_with("refs/worktree/") && !refname.starts_with("refs/bisect/");
        if let Some(bytes) = self.read(refname, common)? {
            let text = String::from_utf8_lossy(&bytes);
            let line = text.lines().next().unwrap_or("").trim();
            if is_oid(line) {
                return Ok(RefState::At(line.to_string()));
            }
            if let Some(target) = line.strip_prefix("ref:") {
                // A symbolic ref below refs/, followed as deep as git follows one.
                let Some(left) = depth.checked_sub(1) else {
                    return Err(RefError::Malformed { path: refname.into(), why: SYMREF_TOO_DEEP });
                };
                match self.resolve_within(target.trim(), left, reflog) {
                    Ok(RefState::At(oid)) => return Ok(RefState::At(oid)),
                    Err(e @ RefError::Malformed { why: SYMREF_TOO_DEEP, .. }) => return Err(e),
                    _ => {}
                }
            }
            return Err(RefError::Malformed { path: refname.into(), why: "not an object id" });
        }
        if let Some(packed) = self.read("packed-refs", true)? {
            if let Some(oid) = find_packed(&packed, refname) {
                return Ok(RefState::At(oid));
            }
        }
        if !reflog {
            return Ok(RefState::Unborn);
        }
        let log = format!("logs/{refname}");
        match self.read(&log, common)? {
            Some(b) if !b.is_empty() => Ok(RefState::Hidden),
            _ => Ok(RefState::Unborn),
        }
    }

    /// What HEAD points at, through its branch; None for an unborn branch.
    pub fn head_oid(&self) -> Result<HeadOid, RefError> {
        self.oid_of_head(self.head()?)
    }

    /// [`Self::head_oid`] for a HEAD already read (`None`: missing), its branch read here.
    pub fn oid_of_head(&self, head: Option<Head>) -> Result<HeadOid, RefError> {
        match head {
            None => Err(RefError::Malformed { path: "HEAD".into(), why: "missing" }),
            Some(Head::Detached(oid)) => Ok(HeadOid::At(oid)),
            Some(Head::Symbolic(r)) => Ok(match self.resolve(&r)? {
                RefState::At(oid) => HeadOid::At(oid),
                RefState::Unborn => HeadOid::Unborn(r),
                RefState::Hidden => HeadOid::Hidden(r),
            }),
        }
    }
}

/// HEAD resolved to a commit, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadOid {
    /// HEAD's commit.
    At(String),
    /// HEAD's branch has never had a commit.
    Unborn(String),
    /// HEAD's branch reads as absent but has a reflog.
    Hidden(String),
}

/// Looks `refname` up in packed-refs content.
pub fn find_packed(packed: &[u8], refname: &str) -> Option<String> {
    let text = String::from_utf8_lossy(packed);
    for line in text.lines() {
        if line.starts_with('#') || line.starts_with('^') {
            continue;
        }
        if let Some((oid, name)) = line.split_once(' ') {
            if name.trim_end() == refname && is_oid(oid) {
                return Some(oid.to_string());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_refs_lookup() {
        let p = b"# pack-refs with: peeled fully-peeled sorted\n\
            1111111111111111111111111111111111111111 refs/heads/main\n\
            ^2222222222222222222222222222222222222222\n\
            3333333333333333333333333333333333333333 refs/tags/v1\n";
        assert_eq!(find_packed(p, "refs/heads/main").as_deref(), Some("1111111111111111111111111111111111111111"));
        assert_eq!(find_packed(p, "refs/heads/other"), None);
    }

    #[test]
    fn refnames() {
        assert!(is_refname("refs/heads/main"));
        assert!(!is_refname("../../etc/passwd"));
        assert!(!is_refname("/abs"));
        assert!(!is_refname("refs/heads/a b"));
    }
}
