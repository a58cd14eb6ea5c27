//! The shape of a generated repo: which directories and files, how big, how deep.
//!
//! Directories form a random recursive tree capped at depth 5 (so a file path has 2 to 6
//! components, as in real source trees); files land in directories uniformly, a handful sit at
//! the root, and a few are large binary assets.

use super::content::{self, Rng, WORDS};

/// Deepest directory level below the root.
const MAX_DIR_DEPTH: usize = 5;
/// Large assets per repo, and their size range in MiB.
const LARGE_FILES: usize = 6;
const LARGE_MIB: (usize, usize) = (1, 8);

/// One file of the generated tree.
#[derive(Debug, Clone)]
pub struct FileSpec {
    /// Path relative to the repo root, `/`-separated.
    pub path: String,
    /// Size in bytes.
    pub size: usize,
    /// Whether it is a binary asset (random bytes) rather than text.
    pub binary: bool,
}

/// Every file of a generated repo, in a stable order.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The files.
    pub files: Vec<FileSpec>,
}

impl Layout {
    /// Paths of ordinary (text, small) files, in order: the ones workloads change.
    pub fn small_files(&self) -> impl Iterator<Item = &FileSpec> {
        self.files.iter().filter(|f| !f.binary)
    }
}

/// The layout of an `n`-file repo for `seed`.
pub fn layout(n: usize, seed: u64) -> Layout {
    let mut rng = Rng::new(seed ^ 0x6c61_796f_7574);
    let dirs = dir_tree(&mut rng, (n / 16).max(8));
    let mut files = Vec::with_capacity(n);
    let roots = ["README.md", "Cargo.toml", "Makefile", "LICENSE", ".gitignore"];
    for name in roots.iter().take(n.min(roots.len())) {
        files.push(FileSpec { path: (*name).to_string(), size: content::file_size(&mut rng), binary: false });
    }
    let large = if n >= 1000 { LARGE_FILES } else { 0 };
    for i in 0..large {
        let mib = LARGE_MIB.0 + rng.below(LARGE_MIB.1 - LARGE_MIB.0 + 1);
        files.push(FileSpec { path: format!("assets/blob{i}.bin"), size: mib << 20, binary: true });
    }
    let mut i = 0;
    while files.len() < n {
        // Skip the root (index 0): files at the root are the few above.
        let dir = &dirs[1 + rng.below(dirs.len() - 1)];
        let path = format!("{dir}/{}_{i}.{}", rng.pick(WORDS), content::ext(&mut rng));
        files.push(FileSpec { path, size: content::file_size(&mut rng), binary: false });
        i += 1;
    }
    Layout { files }
}

/// `count` directories (index 0 is the root, ""): each new one hangs below a uniformly drawn
/// existing one that is shallower than the cap. Names carry their index, so they are unique.
fn dir_tree(rng: &mut Rng, count: usize) -> Vec<String> {
    let mut dirs: Vec<(String, usize)> = vec![(String::new(), 0)];
    let mut parents: Vec<usize> = vec![0];
    for i in 1..count {
        let p = *rng.pick(&parents);
        let (ppath, pdepth) = dirs[p].clone();
        let name = format!("{}{i}", rng.pick(WORDS));
        let path = if ppath.is_empty() { name } else { format!("{ppath}/{name}") };
        if pdepth + 1 < MAX_DIR_DEPTH {
            parents.push(dirs.len());
        }
        dirs.push((path, pdepth + 1));
    }
    dirs.into_iter().map(|d| d.0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn layout_has_n_unique_files_within_depth() {
        let l = layout(5000, 1);
        assert_eq!(l.files.len(), 5000);
        let unique: HashSet<_> = l.files.iter().map(|f| &f.path).collect();
        assert_eq!(unique.len(), 5000);
        let deepest = l.files.iter().map(|f| f.path.split('/').count()).max().expect("files exist");
        assert!((4..=MAX_DIR_DEPTH + 1).contains(&deepest), "{deepest}");
        assert_eq!(l.files.iter().filter(|f| f.binary).count(), LARGE_FILES);
    }

    #[test]
    fn layout_is_deterministic() {
        let (a, b) = (layout(300, 9), layout(300, 9));
        assert!(a.files.iter().zip(&b.files).all(|(x, y)| x.path == y.path && x.size == y.size));
    }
}
