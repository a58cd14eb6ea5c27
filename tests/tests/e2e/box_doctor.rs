//! `seamfs doctor [PATH] [--json]` in the box: the mount up and answering (by pid), its data
//! path and share, seam-git as core.hooksPath, git's version and the index split, each row
//! with a recovery; a dead mount and a path off seamfs are errors saying what to do.

use std::path::Path;
use std::process::Command;

use seam_tests::run::{run, Ran};
use seam_tests::{bins, procfs, Git, Mount, TempDir};

fn doctor(git: &Git, path: &Path, global: &Path) -> (Ran, Vec<serde_json::Value>) {
    let mut c = Command::new(bins::seamfs());
    c.args(["doctor", "--json"]).arg(path);
    git.env(&mut c);
    c.env("GIT_CONFIG_GLOBAL", global);
    let r = run(&mut c);
    let doc: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap_or_else(|e| panic!("not JSON ({e}):\n{r}"));
    let rows = doc["rows"].as_array().expect("rows").clone();
    (r, rows)
}

fn row<'a>(rows: &'a [serde_json::Value], kind: &str) -> &'a serde_json::Value {
    rows.iter().find(|r| r["kind"] == kind).unwrap_or_else(|| panic!("no {kind} row: {rows:#?}"))
}

#[test]
fn doctor_reports_a_healthy_box_and_what_is_wrong() {
    let lower = TempDir::new("doctor-lower");
    let mnt = TempDir::new("doctor-mnt");
    let m = Mount::seamfs(lower.path(), mnt.path(), &["--ttl", "0.5"]);
    let git = Git::new();
    let repo = m.join("repo");
    std::fs::create_dir(&repo).expect("mkdir");
    git.run(&repo, &["init", "-q"]);
    let hooks = TempDir::new("doctor-hooks");
    run(Command::new(bins::seam_git()).arg("install-hooks").arg(hooks.path())).ok();
    let global = hooks.join("gitconfig");
    std::fs::write(&global, format!("[core]\n\thooksPath = {}\n", hooks.path().display())).expect("write config");

    let (r, rows) = doctor(&git, &repo, &global);
    assert_eq!(r.code(), Some(0), "{r}");
    let mount = row(&rows, "mount");
    assert_eq!(mount["severity"], "ok", "{mount}");
    assert!(mount["found"].as_str().unwrap().contains(&format!("pid {}", m.daemon_pid())), "{mount}");
    assert!(["passthrough", "through seamfs"].iter().any(|w| row(&rows, "data-path")["found"].as_str().unwrap().contains(w)));
    assert!(row(&rows, "share")["found"].as_str().unwrap().contains("TTL 0.5 s"), "{rows:#?}");
    for kind in ["index-split", "hooks", "git-version"] {
        assert_eq!(row(&rows, kind)["severity"], "ok", "{rows:#?}");
    }

    // No hooks: a warning with the commands to install them.
    let (_, rows) = doctor(&git, &repo, Path::new("/dev/null"));
    let h = row(&rows, "hooks");
    assert_eq!(h["severity"], "warn");
    assert!(h["recovery"].as_str().unwrap().contains("seam-git install-hooks"), "{h}");

    // Human output says the same.
    let mut c = Command::new(bins::seamfs());
    c.arg("doctor").arg(&repo);
    git.env(&mut c);
    let text = run(&mut c);
    assert!(text.stdout.contains("seamfs is up and answering") && text.stdout.contains("fix: seam-git install-hooks"), "{text}");

    // Dead: an error whose recovery clears it.
    let pid = m.daemon_pid();
    // SAFETY: kill(2) of the daemon this test started.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    while !procfs::fully_exited(pid) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let (r, rows) = doctor(&git, mnt.path(), &global);
    assert_eq!(r.code(), Some(1), "{r}");
    let d = row(&rows, "mount");
    assert_eq!(d["severity"], "error");
    assert!(d["recovery"].as_str().unwrap().contains(&format!("seamfs umount {}", mnt.path().display())), "{d}");
    drop(m);

    // Off seamfs.
    let (r, rows) = doctor(&git, lower.path(), &global);
    assert_eq!(r.code(), Some(1), "{r}");
    assert!(row(&rows, "mount")["found"].as_str().unwrap().contains("not on seamfs"));
}
