//! The host's repository every race starts from: a handful of tracked files nobody deletes, so an
//! index read as empty or missing shows (those files go missing or staged as deleted).

use std::path::Path;

use crate::lab::git::{git, write};
use crate::lab::LabError;

/// Tracked files that no actor ever deletes.
pub const SEED_FILES: usize = 20;

/// What the race started from.
#[derive(Debug, Clone)]
pub struct Seed {
    /// The first commit (the only legitimate root commit).
    pub initial: String,
    /// The seed files' paths.
    pub files: Vec<String>,
}

/// The seed files' paths.
pub fn seed_paths() -> Vec<String> {
    (0..SEED_FILES).map(|i| format!("seed/f{i:02}.txt")).collect()
}

/// A new repository in `dir` (branch `main`) with the seed files, `host.txt` and `host-wip.txt`.
pub fn seed_repo(dir: &Path) -> Result<Seed, LabError> {
    git(dir, &["init", "-q", "-b", "main"])?;
    let seed = dir.join("seed");
    std::fs::create_dir(&seed).map_err(|e| LabError::new("create dir", &seed, e))?;
    let files = seed_paths();
    for (i, f) in files.iter().enumerate() {
        write(&dir.join(f), &format!("seed file {i}\n"))?;
    }
    write(&dir.join("host.txt"), "host\n")?;
    write(&dir.join("host-wip.txt"), "host work in progress\n")?;
    git(dir, &["add", "-A"])?;
    git(dir, &["commit", "-q", "-m", "initial"])?;
    Ok(Seed { initial: git(dir, &["rev-parse", "HEAD"])?, files })
}
