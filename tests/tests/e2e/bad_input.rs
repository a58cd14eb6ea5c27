//! Bad input: the mount is refused with exit code 2 and a message naming the path, and
//! nothing is mounted; `--over` mounts on a non-empty directory and shows its own content.

use std::ffi::OsString;
use std::path::Path;

use seam_tests::mount::seamfs_cmd;
use seam_tests::run::Ran;
use seam_tests::{procfs, Git, Mount, TempDir};

/// Runs `seamfs ARGS`, which must be refused: exit 2, `path` named on stderr, `mnt` not
/// mounted (and unmounted again if it was, so a wrong success leaves nothing behind).
#[track_caller]
fn refused(args: &[&dyn AsRef<std::ffi::OsStr>], path: &Path, mnt: &Path) -> Ran {
    let args: Vec<OsString> = args.iter().map(|a| a.as_ref().to_os_string()).collect();
    let r = seamfs_cmd(&args);
    assert_not_mounted(mnt, &r);
    assert_eq!(r.code(), Some(2), "expected exit code 2:\n{r}");
    assert!(r.stderr.contains(&*path.to_string_lossy()), "stderr should name {}:\n{r}", path.display());
    assert!(r.stderr.lines().count() <= 3, "a short, clear message expected:\n{r}");
    r
}

/// Panics when `r` mounted `mnt` after all, unmounting it first so nothing is left behind.
#[track_caller]
fn assert_not_mounted(mnt: &Path, r: &Ran) {
    if procfs::is_mounted(mnt) {
        let _ = seamfs_cmd(&[OsString::from("umount"), mnt.as_os_str().to_os_string()]);
        panic!("seamfs mounted {} although it should have refused:\n{r}", mnt.display());
    }
}

#[test]
fn missing_lower() {
    let t = TempDir::new("bad-missing-lower");
    let lower = t.join("no-such-dir");
    let mnt = t.subdir("mnt");
    let r = refused(&[&"mount", &lower, &mnt], &lower, &mnt);
    assert!(r.stderr.contains("No such file"), "{r}");
}

#[test]
fn lower_is_a_file() {
    let t = TempDir::new("bad-file-lower");
    let lower = t.join("file");
    std::fs::write(&lower, "not a dir").expect("write");
    let mnt = t.subdir("mnt");
    let r = refused(&[&"mount", &lower, &mnt], &lower, &mnt);
    assert!(r.stderr.contains("not a directory"), "{r}");
}

#[test]
fn non_empty_mountpoint_without_over() {
    let t = TempDir::new("bad-nonempty-mnt");
    let lower = t.subdir("lower");
    let mnt = t.subdir("mnt");
    std::fs::write(mnt.join("precious"), "keep me").expect("write");
    let r = refused(&[&"mount", &lower, &mnt], &mnt, &mnt);
    assert!(r.stderr.contains("--over"), "the message should say how to mount over a directory:\n{r}");
    assert_eq!(std::fs::read_to_string(mnt.join("precious")).expect("still there"), "keep me");
}

#[test]
fn missing_mountpoint() {
    let t = TempDir::new("bad-missing-mnt");
    let lower = t.subdir("lower");
    let mnt = t.join("no-such-mnt");
    refused(&[&"mount", &lower, &mnt], &mnt, &mnt);
}

#[test]
fn missing_over_dir() {
    let t = TempDir::new("bad-missing-over");
    let dir = t.join("no-such-dir");
    refused(&[&"mount", &"--over", &dir], &dir, &dir);
}

#[test]
fn over_shows_the_dirs_own_content() {
    let t = TempDir::new("over");
    let dir = t.subdir("checkout");
    std::fs::write(dir.join("a.txt"), "A\n").expect("write");
    std::fs::create_dir(dir.join("sub")).expect("mkdir");
    std::fs::write(dir.join("sub/b.txt"), "B\n").expect("write");
    let git = Git::new();
    git.run(&dir, &["init", "-q"]);
    git.run(&dir, &["add", "-A"]);
    git.run(&dir, &["commit", "-q", "-m", "before the mount"]);
    let before = seam_tests::listing::walk(&dir);
    let head = git.run(&dir, &["rev-parse", "HEAD"]);

    let m = Mount::seamfs_over(&dir, &[]);
    assert_eq!(m.path(), dir.as_path());
    // The same path now goes through seamfs, and shows what was there.
    assert_eq!(std::fs::read_to_string(dir.join("a.txt")).expect("read through --over"), "A\n");
    assert_eq!(std::fs::read_to_string(dir.join("sub/b.txt")).expect("read through --over"), "B\n");
    let names: Vec<_> = seam_tests::listing::walk(&dir).into_iter().map(|n| n.rel).collect();
    // The host's commit message is its own: the box has none until it commits.
    let want: Vec<_> = before.iter().map(|n| n.rel.clone()).filter(|r| r != Path::new(".git/COMMIT_EDITMSG")).collect();
    assert_eq!(names, want, "the mount over the directory shows a different tree");
    assert_eq!(git.run(&dir, &["rev-parse", "HEAD"]), head);
    git.assert_clean(&dir);
    std::fs::write(dir.join("new.txt"), "N\n").expect("write through --over");
    git.run(&dir, &["add", "new.txt"]);
    git.run(&dir, &["commit", "-q", "-m", "through the mount"]);
    git.fsck(&dir);
    m.unmount();

    // What was written through the mount is in the directory's own content.
    assert!(!procfs::is_mounted(&dir));
    assert_eq!(std::fs::read_to_string(dir.join("new.txt")).expect("new.txt on the directory itself"), "N\n");
    assert_eq!(git.run(&dir, &["rev-list", "--count", "HEAD"]).trim(), "2");
    git.fsck(&dir);
}

#[test]
fn mountpoint_inside_the_lower() {
    let t = TempDir::new("bad-inside");
    let lower = t.subdir("lower");
    let mnt = t.subdir("lower/mnt");
    let r = refused(&[&"mount", &lower, &mnt], &mnt, &mnt);
    assert!(r.stderr.contains("inside the lower"), "{r}");
}

#[test]
fn bad_log_path_is_named() {
    let t = TempDir::new("bad-log");
    let lower = t.subdir("lower");
    let mnt = t.subdir("mnt");
    let log = t.join("no-such-dir/seamfs.log");
    let r = refused(&[&"mount", &lower, &mnt, &"--log", &log], &log, &mnt);
    assert!(r.stderr.contains("open log"), "{r}");
}

#[test]
fn zero_threads() {
    let t = TempDir::new("bad-threads");
    let lower = t.subdir("lower");
    let mnt = t.subdir("mnt");
    let args: Vec<OsString> = vec!["mount".into(), lower.into(), mnt.clone().into(), "--threads".into(), "0".into()];
    let r = seamfs_cmd(&args);
    assert_not_mounted(&mnt, &r);
    assert_eq!(r.code(), Some(2), "{r}");
    assert!(r.stderr.contains("--threads"), "{r}");
}

#[test]
fn not_root_says_why() {
    let t = TempDir::new("bad-nonroot");
    let lower = t.subdir("lower");
    let mnt = t.subdir("mnt");
    let r = seam_tests::run::run(
        std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"])
            .arg(seam_tests::bins::seamfs())
            .arg("mount")
            .args([&lower, &mnt]),
    );
    assert_not_mounted(&mnt, &r);
    assert_eq!(r.code(), Some(2), "{r}");
    assert!(r.stderr.contains("needs root") && r.stderr.contains(&*mnt.to_string_lossy()), "{r}");
}
