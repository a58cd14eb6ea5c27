//! A live name found at an inode number seamfs knows under another name (ADR 0057): over a
//! share whose guest keeps entries, a look spared by a recent refresh can show the host's old
//! branch file, whose number the host's filesystem has since given to a file the box made.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::core::{Core, CoreOptions};
use crate::layer::GitLayer;
use crate::lower::{Lower, REFRESHED_HERE};
use crate::policy::Class;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A checkout with one commit on `main` and one more loose object; the object's id.
fn repo() -> (PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("seamfs-reused-number-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    git(&dir, &["commit", "-q", "--allow-empty", "-m", "one"]);
    std::fs::write(dir.join("blob.txt"), "a blob\n").unwrap();
    let oid = git(&dir, &["hash-object", "-w", "blob.txt"]);
    (dir, oid)
}

fn refreshed(name: &std::ffi::CStr) -> bool {
    REFRESHED_HERE.with(|v| v.borrow().iter().any(|r| r.as_c_str() == name))
}

#[test]
fn a_branch_at_a_number_known_as_an_object_is_asked_again_and_is_another_file() {
    let (dir, oid) = repo();
    let c = Core::new(Lower::open(&dir).unwrap(), GitLayer::default(), Class::WorkTree, CoreOptions { passthrough: false, ..CoreOptions::default() }).unwrap();
    let pid = std::process::id();
    let look = |parent: u64, name: &str| c.lookup(parent, OsStr::new(name), pid).unwrap();
    let gitdir = look(1, ".git").attr.ino.0;
    let heads = look(look(gitdir, "refs").attr.ino.0, "heads").attr.ino.0;
    look(heads, "main");
    let fan = look(look(gitdir, "objects").attr.ino.0, &oid[..2]).attr.ino.0;
    let object = look(fan, &oid[2..]);

    // The process's refresh of a moment ago stands for its next look (ADR 0033).
    REFRESHED_HERE.with(|v| v.borrow_mut().clear());
    look(heads, "main");
    assert!(!refreshed(c".git/refs/heads/main"), "a second look at once was asked again: the test shows nothing");

    // The branch now names the object's inode number (a hard link stands in for the number
    // the host's filesystem reused, which a stale entry would show).
    let main = dir.join(".git/refs/heads/main");
    let obj = dir.join(".git/objects").join(&oid[..2]).join(&oid[2..]);
    std::fs::hard_link(&obj, dir.join(".git/refs/heads/main.new")).unwrap();
    std::fs::rename(dir.join(".git/refs/heads/main.new"), &main).unwrap();
    REFRESHED_HERE.with(|v| v.borrow_mut().clear());
    let branch = look(heads, "main");
    assert!(refreshed(c".git/refs/heads/main"), "the branch at a number known as the object was not asked again");
    assert_eq!(branch.attr.ino.0, object.attr.ino.0, "the lower gives both names one number");
    assert_ne!(branch.generation, object.generation, "the kernel would serve the branch's bytes under the object's name");
    let _ = std::fs::remove_dir_all(&dir);
}
