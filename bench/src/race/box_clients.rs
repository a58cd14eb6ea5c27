//! Box tools that are not the git CLI: libgit2 (git2) and gitoxide (gix) stage a file and commit
//! it, opened on the directory as a tool in the box opens it: no environment variables, no
//! wrapper. Each step runs as its own process (`seam-lab box-client CLIENT stage REPO FILE`,
//! `seam-lab box-client CLIENT commit REPO`), as a real tool would, so seamfs sees box processes
//! come and go.

use std::path::Path;

use crate::lab::LabError;

/// Which library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// libgit2 through the git2 crate.
    Git2,
    /// gitoxide through the gix crate.
    Gix,
}

impl Client {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Client::Git2 => "git2",
            Client::Gix => "gix",
        }
    }
}

impl std::str::FromStr for Client {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "git2" => Ok(Client::Git2),
            "gix" => Ok(Client::Gix),
            _ => Err(format!("unknown client {s:?}: expected git2 or gix")),
        }
    }
}

/// The identity the clients commit as.
const NAME: &str = "seam-lab box client";
const EMAIL: &str = "box@seamfs.invalid";

/// Writes `rel` in `repo` and stages it in the index with `client` (the index is written; nothing
/// is committed).
pub fn stage(client: Client, repo: &Path, rel: &str) -> Result<(), LabError> {
    let file = repo.join(rel);
    if let Some(parent) = file.parent() {
        std::fs::create_dir_all(parent).map_err(|e| LabError::new("create dir", parent, e))?;
    }
    std::fs::write(&file, format!("written by {} in the box\n", client.name()))
        .map_err(|e| LabError::new("write", &file, e))?;
    match client {
        Client::Git2 => git2_stage(repo, rel),
        Client::Gix => gix_stage(repo, rel),
    }
}

/// Commits the index onto HEAD with `client` (the tree is the index, as `git commit` makes it);
/// returns the new commit id.
pub fn commit(client: Client, repo: &Path, msg: &str) -> Result<String, LabError> {
    match client {
        Client::Git2 => git2_commit(repo, msg),
        Client::Gix => gix_commit(repo, msg),
    }
}

fn git2_err(repo: &Path, op: &str) -> impl Fn(git2::Error) -> LabError {
    let op = format!("libgit2: {op}");
    let repo = repo.to_path_buf();
    move |err| LabError::new(op.clone(), &repo, err)
}

/// Repository::open, not open_from_env: libgit2 then ignores GIT_INDEX_FILE, as tools do.
fn git2_open(repo: &Path) -> Result<git2::Repository, LabError> {
    git2::Repository::open(repo).map_err(git2_err(repo, "open"))
}

fn git2_stage(repo: &Path, rel: &str) -> Result<(), LabError> {
    let r = git2_open(repo)?;
    let mut index = r.index().map_err(git2_err(repo, "read the index"))?;
    index.add_path(Path::new(rel)).map_err(git2_err(repo, "stage"))?;
    index.write().map_err(git2_err(repo, "write the index"))
}

fn git2_commit(repo: &Path, msg: &str) -> Result<String, LabError> {
    let r = git2_open(repo)?;
    let mut index = r.index().map_err(git2_err(repo, "read the index"))?;
    let tree_id = index.write_tree().map_err(git2_err(repo, "write tree"))?;
    let tree = r.find_tree(tree_id).map_err(git2_err(repo, "find tree"))?;
    let sig = git2::Signature::now(NAME, EMAIL).map_err(git2_err(repo, "signature"))?;
    let parent = r.head().and_then(|h| h.peel_to_commit()).map_err(git2_err(repo, "read HEAD"))?;
    let id = r.commit(Some("HEAD"), &sig, &sig, msg, &tree, &[&parent]).map_err(git2_err(repo, "commit"))?;
    Ok(id.to_string())
}

fn gix_err(repo: &Path, op: &str) -> impl Fn(gix::Error) -> LabError {
    let op = format!("gitoxide: {op}");
    let repo = repo.to_path_buf();
    move |err| LabError::new(op.clone(), &repo, err)
}

fn gix_open(repo: &Path) -> Result<gix::Repository, LabError> {
    gix::open(repo).map_err(|err| LabError::new("gitoxide: open", repo, err))
}

fn gix_stage(repo: &Path, rel: &str) -> Result<(), LabError> {
    use gix::bstr::ByteSlice;
    use gix::index::entry::{Flags, Mode, Stat};

    let r = gix_open(repo)?;
    let path = repo.join(rel);
    let data = std::fs::read(&path).map_err(|err| LabError::new("read", &path, err))?;
    let blob = r.write_blob(&data).map_err(gix_err(repo, "write blob"))?.detach();
    let meta = gix::index::fs::Metadata::from_path_no_follow(&path).map_err(|err| LabError::new("stat", &path, err))?;
    let stat = Stat::from_fs(&meta).map_err(|err| LabError::new("convert stat", &path, err))?;
    let mut index = r.open_index().map_err(gix_err(repo, "read the index"))?;
    let rel_b = rel.as_bytes().as_bstr();
    index.remove_entries(|_, p, _| p == rel_b);
    index.dangerously_push_entry(stat, blob, Flags::empty(), Mode::FILE, rel_b);
    index.sort_entries();
    index
        .write(gix::index::write::Options::default())
        .map_err(|err| LabError::new("gitoxide: write the index", repo, err))
}

fn gix_commit(repo: &Path, msg: &str) -> Result<String, LabError> {
    use gix::index::entry::Mode;
    use gix::objs::tree::EntryKind;

    let r = gix_open(repo)?;
    let index = r.open_index().map_err(gix_err(repo, "read the index"))?;
    let mut editor = r.edit_tree(gix::ObjectId::empty_tree(r.object_hash())).map_err(gix_err(repo, "edit tree"))?;
    for entry in index.entries() {
        let kind = match entry.mode {
            Mode::FILE_EXECUTABLE => EntryKind::BlobExecutable,
            Mode::SYMLINK => EntryKind::Link,
            Mode::COMMIT => EntryKind::Commit,
            _ => EntryKind::Blob,
        };
        editor.upsert(entry.path(&index), kind, entry.id).map_err(gix_err(repo, "add tree entry"))?;
    }
    let tree = editor.write().map_err(gix_err(repo, "write tree"))?.detach();
    let head = r.head_id().map_err(gix_err(repo, "read HEAD"))?.detach();
    let sig = gix::actor::Signature { name: NAME.into(), email: EMAIL.into(), time: gix::date::Time::now_local_or_utc() };
    let (mut t1, mut t2) = (gix::date::parse::TimeBuf::default(), gix::date::parse::TimeBuf::default());
    let id = r
        .commit_as(sig.to_ref(&mut t1), sig.to_ref(&mut t2), "HEAD", msg, tree, [head])
        .map_err(gix_err(repo, "commit"))?;
    Ok(id.to_string())
}
