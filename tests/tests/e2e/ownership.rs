//! Ownership: what a non-root user creates through seamfs belongs to that user on the backing
//! dir (seamfs creates as root, then gives the node away), exactly as if the user had created
//! it there directly; and a group-shared repository gets the same modes either way.

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use seam_tests::listing::{self, Node};
use seam_tests::run::{run, Ran};
use seam_tests::{Git, Mount, TempDir};

const UID: u32 = 1000;
const GID: u32 = 1000;
/// A group the user is not in, for set-group-ID directories.
const OTHER_GID: u32 = 2000;

/// Runs `sh -c script` in `cwd` as UID:GID with no supplementary groups.
fn as_user(cwd: &Path, script: &str, git: Option<&Git>) -> Ran {
    let mut c = Command::new("/bin/sh");
    c.arg("-c").arg(script).current_dir(cwd);
    match git {
        Some(g) => g.env(&mut c),
        None => {
            c.env_clear().env("PATH", "/usr/bin:/bin");
            c.uid(UID).gid(GID);
        }
    }
    run(&mut c).ok()
}

/// A backing dir with `native/` and `viafs/`, both owned by the user, and a mount over it.
fn setup(name: &str) -> (TempDir, TempDir, Mount) {
    let backing = TempDir::new(&format!("own-{name}-backing"));
    let mnt = TempDir::new(&format!("own-{name}-mnt"));
    for d in ["native", "viafs"] {
        let p = backing.subdir(d);
        std::os::unix::fs::chown(&p, Some(UID), Some(GID)).expect("chown on the backing dir");
    }
    let m = Mount::seamfs(backing.path(), mnt.path(), &[]);
    (backing, mnt, m)
}

#[test]
fn nodes_made_by_a_user_belong_to_that_user() {
    let (backing, _mnt, m) = setup("nodes");
    // A set-group-ID directory of another group, made by root, in both places.
    for d in [backing.join("native/sg"), backing.join("viafs/sg")] {
        std::fs::create_dir(&d).expect("mkdir sg");
        std::os::unix::fs::chown(&d, Some(0), Some(OTHER_GID)).expect("chown sg");
        std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o2777)).expect("chmod sg");
    }
    let script = "umask 022; echo x > file; mkdir dir; echo y > dir/nested; ln -s file link; mkfifo fifo; \
                  ln file hard; echo z > sg/f; mkdir sg/d; chmod 0750 dir";
    as_user(&backing.join("native"), script, None);
    as_user(&m.join("viafs"), script, None);

    let viafs = backing.join("viafs");
    for name in ["file", "dir", "dir/nested", "link", "fifo", "hard"] {
        let md = std::fs::symlink_metadata(viafs.join(name)).unwrap_or_else(|e| panic!("lstat {name}: {e}"));
        assert_eq!((md.uid(), md.gid()), (UID, GID), "{name} made through seamfs by {UID}:{GID} on the backing dir");
    }
    for name in ["sg/f", "sg/d"] {
        let md = std::fs::symlink_metadata(viafs.join(name)).expect("lstat");
        assert_eq!((md.uid(), md.gid()), (UID, OTHER_GID), "{name} should take the set-group-ID parent's group");
    }
    let sgd = std::fs::symlink_metadata(viafs.join("sg/d")).expect("lstat sg/d");
    assert_ne!(sgd.mode() & libc::S_ISGID, 0, "sg/d should inherit the set-group-ID bit");
    let (a, b): (Vec<Node>, Vec<Node>) = (listing::walk(&backing.join("native")), listing::walk(&viafs));
    assert_eq!(a, b, "the user's tree made through seamfs differs from the one made directly");

    // And the user can remove all of it again through the mount.
    as_user(&m.join("viafs"), "rm -rf file dir link fifo hard sg/f sg/d", None);
    assert_eq!(listing::walk(&viafs).len(), 1, "only sg should be left");
}

#[test]
fn shared_group_repo_has_the_same_modes() {
    let (backing, _mnt, m) = setup("shared");
    let git = Git::as_user(UID, GID);
    // Fixed dates, so both runs write the same objects under the same names.
    // The tag too: a tag made a second later would change the pack's name.
    let script = "umask 002 && export GIT_AUTHOR_DATE=2020-01-01T00:00:00Z GIT_COMMITTER_DATE=2020-01-01T00:00:00Z && \
                  git init -q --shared=group repo && cd repo && echo a > a && mkdir -p d/e && echo b > d/e/b && \
                  git add -A && git commit -q -m one && \
                  git tag -a -m t t1 && git gc -q && echo c > c && git add c";
    as_user(&backing.join("native"), script, Some(&git));
    as_user(&m.join("viafs"), script, Some(&git));

    let native = listing::walk(&backing.join("native/repo/.git"));
    let through = listing::walk(&m.join("viafs/repo/.git"));
    assert!(
        native.iter().any(|n| n.kind == 'd' && n.mode & libc::S_ISGID != 0),
        "--shared=group should make set-group-ID dirs"
    );
    assert_eq!(native, through, "modes of .git made through seamfs differ (as seen through seamfs)");
    // On the backing dir, the same, apart from seamfs's own files: the box index (compared
    // separately) and its sync point (`index-box.<id>.seam-base`); the box's commit message is
    // `COMMIT_EDITMSG-box.<id>` there.
    let on_backing: Vec<Node> = listing::walk(&backing.join("viafs/repo/.git"))
        .into_iter()
        .filter(|n| n.rel.file_name().is_none_or(|f| !f.to_string_lossy().starts_with("index-box")))
        .map(|mut n| {
            if n.rel.to_string_lossy().starts_with("COMMIT_EDITMSG-box.") {
                n.rel = "COMMIT_EDITMSG".into();
            }
            n
        })
        .collect();
    assert_eq!(native, on_backing, "modes of .git made through seamfs differ on the backing dir");
    let idx = |p: &Path| std::fs::symlink_metadata(p).map(|m| (m.mode() & 0o7777, m.uid(), m.gid()));
    let native_index = idx(&backing.join("native/repo/.git/index")).expect("the native index");
    let boxed = idx(&backing.join("viafs/repo/.git").join(m.index_box())).expect("the box's index-box on the backing dir");
    assert_eq!(boxed, native_index, "index-box should have the mode and owner git gave its index");
}

/// A user's write, truncation and `O_TRUNC` open clear set-user-ID (and set-group-ID where
/// group execute is set) through seamfs exactly as natively (seamfs clears them itself, with
/// `FUSE_HANDLE_KILLPRIV_V2`); root's keep them.
#[test]
fn set_id_bits_are_cleared_by_a_users_writes_as_natively() {
    use std::os::unix::fs::PermissionsExt;
    let (backing, _mnt, m) = setup("setid");
    let files = [("w-6755", 0o6755), ("w-2644", 0o2644), ("t-4755", 0o4755), ("o-6755", 0o6755), ("r-6755", 0o6755)];
    for dir in ["native", "viafs"] {
        for (name, mode) in files {
            let p = backing.join(dir).join(name);
            std::fs::write(&p, "data\n").expect("write a file");
            std::os::unix::fs::chown(&p, Some(UID), Some(GID)).expect("chown to the user");
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
        }
    }
    let script = "echo more >> w-6755; echo more >> w-2644; truncate -s 2 t-4755; echo new > o-6755";
    as_user(&backing.join("native"), script, None);
    as_user(&m.join("viafs"), script, None);
    for dir in [backing.join("native"), m.join("viafs")] {
        std::fs::OpenOptions::new().append(true).open(dir.join("r-6755")).and_then(|mut f| {
            std::io::Write::write_all(&mut f, b"root\n")
        }).expect("root appends");
    }
    let modes = |dir: &Path| -> Vec<(String, u32)> {
        files.iter().map(|(n, _)| (n.to_string(), std::fs::metadata(dir.join(n)).expect("stat").mode() & 0o7777)).collect()
    };
    let native = modes(&backing.join("native"));
    assert_eq!(native.iter().filter(|(_, m)| m & (libc::S_ISUID | libc::S_ISGID) == 0).count(), 3, "native clears three: {native:?}");
    assert_eq!(modes(&backing.join("viafs")), native, "modes through seamfs (on the backing dir) against native");
    assert_eq!(modes(&m.join("viafs")), native, "modes as the box sees them");
}
