//! `race clients`: libgit2 and gitoxide stage and commit in the box, through the mount.
//!
//! Order: the box looks at the repository first (`git status`: on seamfs this seeds the box's own
//! index), then the host stages a file of its own, then each client stages one file (its own
//! process), then each commits (its own process). After the staging the host's shared index must
//! be byte-identical (no ref moved, so not even a heal may write it); after the commits the host's
//! staged file must still be staged and in no box commit, and `git fsck` clean. Whether the shared
//! index changed after the commits, and the host's `git status`, are reported: a heal rewrites the
//! shared index to follow the box's commits by design, and without one the host sees the box's
//! files as staged deletions.

use std::path::Path;
use std::process::{Command, Stdio};

use super::box_clients::Client;
use super::check::tree_paths;
use super::figures::Figures;
use super::repo::{seed_repo, Seed};
use super::rig::Rig;
use crate::lab::git::{git, write};
use crate::lab::LabError;

/// The file the host stages while the box's clients work.
pub const HOST_STAGED: &str = "host-staged.txt";

/// The host's repository (staging happens in `run`, after the box's first look).
pub fn prepare(host: &Path) -> Result<Seed, LabError> {
    seed_repo(host)
}

/// Runs one client step as its own process: `seam-lab box-client NAME STEP REPO [FILE]`;
/// its stdout, or why it failed.
fn run_client(client: Client, step: &str, repo: &Path, file: Option<&str>) -> Result<Result<String, String>, LabError> {
    let exe = std::env::current_exe().map_err(|e| LabError::new("locate current exe", repo, e))?;
    let mut cmd = Command::new(&exe);
    cmd.arg("box-client").arg(client.name()).arg(step).arg(repo);
    if let Some(f) = file {
        cmd.arg(f);
    }
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| LabError::new(format!("run box-client {} {step}", client.name()), repo, e))?;
    if out.status.success() {
        Ok(Ok(String::from_utf8_lossy(&out.stdout).trim().to_string()))
    } else {
        Ok(Err(format!("{}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim())))
    }
}

fn read(path: &Path) -> Result<Vec<u8>, LabError> {
    std::fs::read(path).map_err(|e| LabError::new("read", path, e))
}

/// Runs the scenario on a mounted rig.
pub fn run(rig: &Rig, _seed: &Seed) -> Result<Figures, LabError> {
    let box_status_first = git(&rig.box_dir, &["status", "--porcelain=v1"])?;
    write(&rig.host.join(HOST_STAGED), "staged on the host\n")?;
    git(&rig.host, &["add", HOST_STAGED])?;
    let index = rig.gitdir().join("index");
    let before = read(&index)?;

    let mut f = Figures::default();
    let clients = [Client::Git2, Client::Gix];
    let mut staged_ok = true;
    for client in clients {
        let rel = format!("box/{}.txt", client.name());
        if let Err(why) = run_client(client, "stage", &rig.box_dir, Some(&rel))? {
            staged_ok = false;
            f.note(format!("{} stage failed: {why}", client.name()));
        }
    }
    // Staging moves no ref: nothing may touch the shared index, healing included.
    let after_stage = read(&index)?;
    let box_ls = git(&rig.box_dir, &["ls-files", "box"])?;
    let box_index_has_both = clients.iter().all(|c| box_ls.lines().any(|l| l == format!("box/{}.txt", c.name())));
    let mut landed = Vec::new();
    for client in clients {
        match run_client(client, "commit", &rig.box_dir, None)? {
            Ok(id) => landed.push((client, id)),
            Err(why) => f.note(format!("{} commit failed: {why}", client.name())),
        }
    }
    let after_commit = read(&index)?;

    let host_staged = git(&rig.host, &["diff", "--cached", "--name-only"])?;
    let staging_kept = host_staged.lines().any(|l| l == HOST_STAGED);
    let mut swallowed = 0u64;
    let mut box_files_missing = 0u64;
    for (client, id) in &landed {
        let tree = tree_paths(&rig.host, id)?;
        if tree.contains(HOST_STAGED) {
            swallowed += 1;
            f.note(format!("{}'s commit {id} holds the host's staged {HOST_STAGED}", client.name()));
        }
        if !tree.contains(&format!("box/{}.txt", client.name())) {
            box_files_missing += 1;
        }
    }
    // Read last: `git status` refreshes (rewrites) the host's index.
    let host_status = git(&rig.host, &["status", "--porcelain=v1", "--untracked-files=no"])?;
    let only_own_staging = host_status.trim() == format!("A  {HOST_STAGED}");
    let box_status = git(&rig.box_dir, &["status", "--porcelain=v1"])?;
    let fsck = rig.fsck_problems()?;

    f.holds("clients_staged", "git2 and gix both staged", staged_ok);
    f.holds("shared_index_unchanged", "shared index bytes unchanged by staging", before == after_stage);
    f.holds("box_index_has_client_files", "box `git ls-files` shows both files", box_index_has_both);
    f.holds("clients_committed", "git2 and gix both committed", landed.len() == clients.len());
    f.holds("host_staging_kept", "host's staged file still staged", staging_kept);
    f.zero("host_staging_in_box_commits", "box commits holding host staging", swallowed);
    f.zero("box_files_missing", "client files missing from their commits", box_files_missing);
    f.zero("fsck_problems", "git fsck problems", fsck.len() as u64);
    f.flag("shared_index_unchanged_after_commits", "shared index bytes unchanged after commits", before == after_commit);
    f.flag("host_status_only_own_staging", "host status shows only its own staging", only_own_staging);
    f.text("host_status", "host `git status --porcelain`", host_status);
    f.text("box_status", "box `git status --porcelain`", box_status);
    f.text("box_status_first", "box status before (first look)", box_status_first);
    for p in fsck.iter().take(5) {
        f.note(format!("fsck: {p}"));
    }
    Ok(f)
}
