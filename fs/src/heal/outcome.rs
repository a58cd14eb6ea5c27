//! What a heal decided, and why it could not decide.

use std::fmt;

use gix::bstr::BString;

/// How a healed index came about; the last field of a proposal's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HealKind {
    /// Nothing was carried: the index was pure staleness (plus staging that already agrees
    /// with the move), now the new commit's tree.
    Ff,
    /// Staging disjoint from the move was carried onto the new commit's tree.
    Carry,
}

impl HealKind {
    /// The name used in proposal file names: `ff` or `carry`.
    pub fn as_str(self) -> &'static str {
        match self {
            HealKind::Ff => "ff",
            HealKind::Carry => "carry",
        }
    }
}

impl fmt::Display for HealKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an index is not healed. Nothing was built; the index stays as it is and the refusal is
/// reported (the staging is kept, never dropped or committed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The index has unmerged entries (stage > 0) at these paths: a conflict in progress is
    /// never carried (it would read as a deletion).
    Conflicted(Vec<BString>),
    /// Staging in the index touches paths the move changed too, differently.
    Overlap(Vec<BString>),
    /// A staged path is a file where the move made a directory, or the other way round
    /// (staged and moved paths, each a path prefix of the other).
    DirFileClash(Vec<BString>),
}

fn list(paths: &[BString]) -> String {
    const SHOWN: usize = 10;
    let mut s = paths.iter().take(SHOWN).map(|p| p.to_string()).collect::<Vec<_>>().join(", ");
    if paths.len() > SHOWN {
        s.push_str(&format!(" and {} more", paths.len() - SHOWN));
    }
    s
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Conflicted(p) => write!(
                f,
                "unmerged entries in the index ({}); resolve or reset them, then the heal runs again",
                list(p)
            ),
            Refusal::Overlap(p) => write!(
                f,
                "staged changes overlap the other side's commit ({}); commit, unstage or reset them to let the heal run",
                list(p)
            ),
            Refusal::DirFileClash(p) => write!(
                f,
                "a staged path and a committed one are a file and a directory of the same name ({}); unstage them to let the heal run",
                list(p)
            ),
        }
    }
}

/// The heal's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HealOutcome {
    /// The index already reflects the move: nothing to write.
    Unchanged,
    /// A healed index.
    Healed {
        /// The whole index file (header, entries, no extensions, trailing checksum).
        bytes: Vec<u8>,
        /// Whether staging was carried.
        kind: HealKind,
    },
    /// Not healed, and why.
    Refused(Refusal),
}

/// Why the heal could not be decided (input unreadable or unsupported); nothing was built.
#[derive(Debug)]
pub enum HealError {
    /// A commit id is not 40 or 64 hex digits.
    BadCommitId {
        /// The id as given.
        id: String,
    },
    /// The index bytes are not a whole index, or gix could not decode them.
    Index {
        /// What is wrong.
        cause: String,
    },
    /// The index uses a feature the heal does not rewrite (split index, sparse index).
    Unsupported {
        /// The feature.
        what: &'static str,
    },
    /// The object database could not be opened.
    Objects {
        /// The objects directory.
        dir: std::path::PathBuf,
        /// What went wrong.
        cause: String,
    },
    /// A commit or tree could not be read.
    Object {
        /// What was being read (`commit <id>`, `tree <id> at <path>`).
        what: String,
        /// What went wrong.
        cause: String,
    },
    /// The new commit's tree holds a path git would refuse to check out (`.git`, `..`).
    UnsafePath {
        /// The path.
        path: BString,
    },
    /// Encoding the healed index failed.
    Encode {
        /// What went wrong.
        cause: String,
    },
}

impl fmt::Display for HealError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HealError::BadCommitId { id } => write!(f, "heal: {id:?} is not a commit id (40 or 64 hex digits)"),
            HealError::Index { cause } => write!(f, "heal: read the index: {cause}"),
            HealError::Unsupported { what } => write!(f, "heal: the index is a {what}, which the heal does not rewrite"),
            HealError::Objects { dir, cause } => write!(f, "heal: open objects {}: {cause}", dir.display()),
            HealError::Object { what, cause } => write!(f, "heal: read {what}: {cause}"),
            HealError::UnsafePath { path } => write!(f, "heal: the new tree holds {path:?}, a path git refuses to check out"),
            HealError::Encode { cause } => write!(f, "heal: encode the healed index: {cause}"),
        }
    }
}

impl std::error::Error for HealError {}
