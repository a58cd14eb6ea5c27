//! The repository's ignore rules, as git applies them to an untracked file: `core.excludesFile`,
//! then `info/exclude`, then every `.gitignore` from the top down to the file's directory, the
//! deeper one winning; a file under an ignored directory is ignored (git never looks inside).
//! Parsing and matching are gix-ignore's; the files are read through the lower, and cached.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use gix::bstr::ByteSlice;
use gix_ignore::glob::pattern::Case;
use gix_ignore::glob::search::pattern::List;
use gix_ignore::search::{pattern_matching_relative_path, Ignore};

use super::cache::TtlCache;
use super::repo::Repo;
use crate::gitdata::read_lower;
use crate::lower::Lower;

type Lists = Arc<Vec<List<Ignore>>>;

/// Cached ignore lists: per git common dir (the static ones) and per directory (`.gitignore`).
#[derive(Debug)]
pub struct Ignores {
    statics: TtlCache<PathBuf, Lists>,
    dirs: TtlCache<PathBuf, Lists>,
    /// Lists of `.gitignore` files just removed (a tree being removed still obeys them).
    going: TtlCache<PathBuf, Lists>,
    /// Where box processes see the lower: an excludes file below it is read through the lower,
    /// never through seamfs's own mount from inside a request.
    mountpoint: Option<PathBuf>,
}

impl Ignores {
    /// Ignore rules for a mount at `mountpoint`.
    pub fn new(mountpoint: Option<PathBuf>) -> Self {
        Ignores { mountpoint, ..Ignores::default() }
    }
}

impl Default for Ignores {
    fn default() -> Self {
        Ignores {
            mountpoint: None,
            statics: TtlCache::new(Duration::from_secs(1), 256),
            dirs: TtlCache::new(Duration::from_secs(1), 16384),
            going: TtlCache::new(Duration::from_secs(60), 4096),
        }
    }
}

/// Patterns of `source`, relative to its directory (`per_dir`, a `.gitignore`) or the top.
fn parse(bytes: &[u8], source: &Path, per_dir: bool) -> Option<List<Ignore>> {
    let root = per_dir.then_some(Path::new(""));
    List::from_bytes(bytes, source.to_path_buf(), root, Ignore { support_precious: false }).ok()
}

impl Ignores {
    /// True when `rel` (relative to the repo's work tree, a file) is ignored.
    pub fn is_ignored(&self, lower: &Lower, repo: &Repo, rel: &[u8]) -> bool {
        let mut lists: Vec<Lists> = vec![self.statics.get_or(repo.common.clone(), || Arc::new(static_lists(lower, repo, self.mountpoint.as_deref())))];
        lists.push(self.dir_list(lower, repo, b""));
        let mut at = 0;
        while let Some(slash) = rel[at..].find_byte(b'/') {
            let dir = &rel[..at + slash];
            if matches(&lists, dir, true) == Some(true) {
                return true;
            }
            lists.push(self.dir_list(lower, repo, dir));
            at += slash + 1;
        }
        matches(&lists, rel, false) == Some(true)
    }

    /// The `.gitignore` of `dir` (work-tree relative) is about to be removed: keep its rules
    /// for a minute, for the files removed after it.
    pub fn going(&self, lower: &Lower, repo: &Repo, dir: &[u8]) {
        let lists = self.load(lower, repo, Path::new(OsStr::from_bytes(dir)));
        self.going.get_or(repo.work_tree.join(OsStr::from_bytes(dir)), || lists);
    }

    fn dir_list(&self, lower: &Lower, repo: &Repo, dir: &[u8]) -> Lists {
        let dir = Path::new(OsStr::from_bytes(dir));
        let lower_dir = repo.work_tree.join(dir);
        if let Some(l) = self.going.peek(&lower_dir) {
            return l;
        }
        self.dirs.get_or(lower_dir, || self.load(lower, repo, dir))
    }

    fn load(&self, lower: &Lower, repo: &Repo, dir: &Path) -> Lists {
        let lower_dir = repo.work_tree.join(dir);
        {
            let bytes = read_lower(lower, &lower_dir.join(".gitignore")).ok().flatten();
            Arc::new(bytes.and_then(|b| parse(&b, &dir.join(".gitignore"), true)).into_iter().collect())
        }
    }
}

/// Some(true) ignored, Some(false) re-included by a `!` pattern, None no rule says.
fn matches(lists: &[Lists], path: &[u8], is_dir: bool) -> Option<bool> {
    let basename = path.rfind_byte(b'/').map(|p| p + 1);
    lists.iter().rev().flat_map(|l| l.iter().rev()).find_map(|list| {
        pattern_matching_relative_path(list, path.as_bstr(), basename, Some(is_dir), Case::Sensitive)
            .map(|m| !m.pattern.is_negative())
    })
}

/// `core.excludesFile` (an absolute path in the box, or one below the lower) and `info/exclude`.
fn static_lists(lower: &Lower, repo: &Repo, mountpoint: Option<&Path>) -> Vec<List<Ignore>> {
    let mut out = Vec::new();
    if let Some(file) = excludes_file(lower, &repo.common) {
        let bytes = match mountpoint.and_then(|m| file.strip_prefix(m).ok()) {
            Some(rel) => read_lower(lower, rel).ok().flatten(),
            None => std::fs::read(&file).ok(),
        };
        if let Some(bytes) = bytes {
            out.extend(parse(&bytes, Path::new(".excludesfile"), false));
        }
    }
    let info = repo.common.join("info/exclude");
    if let Some(b) = read_lower(lower, &info).ok().flatten() {
        out.extend(parse(&b, Path::new(".git/info/exclude"), false));
    }
    out
}

/// The repo config's `core.excludesFile`, when it is an absolute path (`~` is the box user's
/// home, which the daemon does not know: not followed).
fn excludes_file(lower: &Lower, common: &Path) -> Option<PathBuf> {
    let config = read_lower(lower, &common.join("config")).ok().flatten()?;
    let text = String::from_utf8_lossy(&config);
    let mut in_core = false;
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            in_core = l.to_ascii_lowercase().starts_with("[core]");
        } else if let Some((k, v)) = l.split_once('=') {
            if in_core && k.trim().eq_ignore_ascii_case("excludesfile") {
                let v = v.trim().trim_matches('"');
                return Path::new(v).is_absolute().then(|| PathBuf::from(v));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_gits_precedence_and_directories() {
        let dir = std::env::temp_dir().join(format!("seamfs-park-ignore-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("w/.git/info")).unwrap();
        std::fs::create_dir_all(dir.join("w/sub")).unwrap();
        std::fs::write(dir.join("w/.git/info/exclude"), "*.tmp\n").unwrap();
        std::fs::write(dir.join("w/.gitignore"), "build/\n*.log\n!keep.log\n").unwrap();
        std::fs::write(dir.join("w/sub/.gitignore"), "local.txt\n!*.tmp\n").unwrap();
        let lower = Lower::open(&dir).unwrap();
        let repo = Repo { work_tree: "w".into(), git_dir: "w/.git".into(), common: "w/.git".into(), tree: ".".into() };
        let ig = Ignores::default();
        let is = |p: &str| ig.is_ignored(&lower, &repo, p.as_bytes());
        assert!(is("build/out/a.o"), "under an ignored directory");
        assert!(is("a.log") && !is("keep.log"), "a negation re-includes");
        assert!(is("x.tmp"), "info/exclude");
        assert!(!is("sub/x.tmp"), "a deeper .gitignore wins over info/exclude");
        assert!(is("sub/local.txt") && !is("local.txt"), "a .gitignore applies below its directory only");
        assert!(!is("src/main.rs"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
