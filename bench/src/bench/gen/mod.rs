//! Generated repos and the big file, cached under /tmp/seam-bench-cache by their parameters so
//! repeated runs do not regenerate them. Each is built under a `.partial` name and renamed into
//! place when complete, so an interrupted generation is never taken for a finished one.

pub mod content;
pub mod history;
pub mod layout;

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::lab::git::git;
use crate::lab::LabError;

/// Where generated repos and big files are kept between runs.
pub const CACHE_DIR: &str = "/tmp/seam-bench-cache";
/// Bump when the generator changes, so old caches are not reused.
const GEN_VERSION: u32 = 1;
/// Commits on `main` after the initial one (`git log -n 1000` needs at least 1000).
pub const HISTORY: usize = 1100;
/// The big file's name in every layer's copy (listed in `.git/info/exclude`).
pub const BIG_NAME: &str = "bench-big.bin";

/// A generated repo in the cache.
#[derive(Debug, Clone)]
pub struct Repo {
    /// The repo's directory (work tree with `.git`).
    pub dir: PathBuf,
    /// The layout it was made from.
    pub layout: layout::Layout,
}

/// The cached repo of `files` files for `seed`, generated first if missing.
pub fn repo(files: usize, seed: u64) -> Result<Repo, LabError> {
    let cache = cache_dir()?;
    let dir = cache.join(format!("repo-v{GEN_VERSION}-files{files}-history{HISTORY}-seed{seed}"));
    let layout = layout::layout(files, seed);
    if dir.join(".git").is_dir() {
        eprintln!("[bench] using cached repo {}", dir.display());
        return Ok(Repo { dir, layout });
    }
    let partial = with_suffix(&dir, ".partial");
    remove_if_present(&partial)?;
    std::fs::create_dir(&partial).map_err(|e| LabError::new("create dir", &partial, e))?;
    eprintln!("[bench] generating {files}-file repo with {HISTORY} commits in {}", partial.display());
    let t = std::time::Instant::now();
    git(&partial, &["init", "-q", "-b", "main"])?;
    history::import(&partial, &layout, HISTORY, seed)?;
    git(&partial, &["reset", "-q", "--hard", "main"])?;
    let exclude = partial.join(".git/info/exclude");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&exclude)
        .map_err(|e| LabError::new("open for append", &exclude, e))?;
    writeln!(f, "/{BIG_NAME}").map_err(|e| LabError::new("append", &exclude, e))?;
    std::fs::rename(&partial, &dir).map_err(|e| LabError::new(format!("rename {} to", partial.display()), &dir, e))?;
    eprintln!("[bench] generated in {:.1} s", t.elapsed().as_secs_f64());
    Ok(Repo { dir, layout })
}

/// The cached big file of `mib` MiB (random bytes, outside git), written first if missing.
pub fn big_file(mib: usize) -> Result<PathBuf, LabError> {
    let path = cache_dir()?.join(format!("big-v{GEN_VERSION}-{mib}MiB.bin"));
    if path.is_file() {
        return Ok(path);
    }
    let partial = with_suffix(&path, ".partial");
    eprintln!("[bench] writing {mib} MiB file {}", partial.display());
    let mut f = std::fs::File::create(&partial).map_err(|e| LabError::new("create", &partial, e))?;
    let mut rng = content::Rng::new(mib as u64);
    for _ in 0..mib {
        f.write_all(&content::binary(&mut rng, 1 << 20)).map_err(|e| LabError::new("write", &partial, e))?;
    }
    f.sync_all().map_err(|e| LabError::new("fsync", &partial, e))?;
    std::fs::rename(&partial, &path)
        .map_err(|e| LabError::new(format!("rename {} to", partial.display()), &path, e))?;
    Ok(path)
}

fn cache_dir() -> Result<PathBuf, LabError> {
    let dir = PathBuf::from(CACHE_DIR);
    std::fs::create_dir_all(&dir).map_err(|e| LabError::new("create dir", &dir, e))?;
    Ok(dir)
}

fn with_suffix(p: &Path, suffix: &str) -> PathBuf {
    let mut s = p.as_os_str().to_os_string();
    s.push(suffix);
    PathBuf::from(s)
}

fn remove_if_present(p: &Path) -> Result<(), LabError> {
    match std::fs::remove_dir_all(p) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(LabError::new("remove leftover", p, e)),
        _ => Ok(()),
    }
}
