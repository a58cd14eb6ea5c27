//! Object databases opened once per thread and kept (ADR 0050).
//!
//! A heal opened the repository's object database afresh each time: in a TCG guest over
//! virtiofs, the open and loading the pack indexes again for the two commits it reads took about
//! 20 ms of a box commit's rename. gix's store notices what changed on disk by itself: a loose
//! object is looked up by its path each time, an id no loaded index has makes it read the pack
//! directory again, and a pack removed under it (the other side's `git gc`) makes it load the
//! indexes again. So a kept handle sees every object written since it was opened.
//!
//! The heal runs on the lower-view threads, which are kept (`lower_view`), so a thread-local
//! cache is one per such thread, and nothing is shared or locked.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

/// Object databases kept per thread: a box mounts one checkout, and its work trees share one.
const KEPT: usize = 4;

thread_local! {
    static KEPT_DBS: RefCell<Vec<(PathBuf, gix::hash::Kind, gix::odb::Handle)>> = const { RefCell::new(Vec::new()) };
}

/// A handle on the object database at `objects_dir` for ids of `kind`: the one this thread
/// opened before, else a new one, kept.
pub fn open(objects_dir: &Path, kind: gix::hash::Kind) -> std::io::Result<gix::odb::Handle> {
    KEPT_DBS.with(|k| {
        let mut kept = k.borrow_mut();
        if let Some(i) = kept.iter().position(|(d, k, _)| d == objects_dir && *k == kind) {
            // Most recently used last: the first is the one dropped when full.
            let e = kept.remove(i);
            let h = e.2.clone();
            kept.push(e);
            return Ok(h);
        }
        let h = gix::odb::at(objects_dir, kind)?;
        if kept.len() >= KEPT {
            kept.remove(0);
        }
        kept.push((objects_dir.to_path_buf(), kind, h.clone()));
        Ok(h)
    })
}

/// Drops what this thread keeps for `objects_dir` (a read through a kept handle failed: the
/// caller opens a new one to be sure the failure is the repository's).
pub fn forget(objects_dir: &Path) {
    KEPT_DBS.with(|k| k.borrow_mut().retain(|(d, _, _)| d != objects_dir));
}

#[cfg(test)]
mod tests {
    use super::*;
    use gix::objs::FindExt;
    use std::process::Command;

    /// A throwaway directory; removed on drop.
    struct Scratch(PathBuf);
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn git(dir: &Path, args: &[&str]) -> String {
        let o = Command::new("git")
            .current_dir(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .expect("run git");
        assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    fn commit(dir: &Path, n: u32) -> gix::ObjectId {
        std::fs::write(dir.join(format!("f{n}")), format!("{n}\n")).unwrap();
        git(dir, &["add", "-A"]);
        git(dir, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", &format!("c{n}")]);
        gix::ObjectId::from_hex(git(dir, &["rev-parse", "HEAD"]).as_bytes()).unwrap()
    }

    fn has_commit(h: &gix::odb::Handle, id: &gix::ObjectId) -> bool {
        let mut buf = Vec::new();
        let found = h.find_commit(id, &mut buf).is_ok();
        found
    }

    /// A kept handle is the same store, and it finds objects written after it was opened: a
    /// new loose object, objects moved into a new pack with the old pack removed (`git gc`),
    /// and a new pack fetched in beside the old.
    #[test]
    fn a_kept_handle_sees_what_git_wrote_since() {
        let t = Scratch(std::env::temp_dir().join(format!("seamfs-object-db-{}", std::process::id())));
        let _ = std::fs::remove_dir_all(&t.0);
        std::fs::create_dir_all(&t.0).unwrap();
        let dir = t.0.as_path();
        git(dir, &["init", "-q", "-b", "main"]);
        let c1 = commit(dir, 1);
        git(dir, &["gc", "-q", "--prune=now"]);
        let objects = dir.join(".git/objects");
        let h = open(&objects, gix::hash::Kind::Sha1).unwrap();
        assert!(has_commit(&h, &c1), "packed commit");
        let c2 = commit(dir, 2);
        let h = open(&objects, gix::hash::Kind::Sha1).unwrap();
        assert!(has_commit(&h, &c2), "loose commit written after the open");
        git(dir, &["gc", "-q", "--prune=now"]);
        let hex = c2.to_hex().to_string();
        assert!(!dir.join(".git/objects").join(&hex[..2]).join(&hex[2..]).exists(), "gc packed the loose commit");
        let c3 = commit(dir, 3);
        git(dir, &["repack", "-q"]);
        let h = open(&objects, gix::hash::Kind::Sha1).unwrap();
        assert!(has_commit(&h, &c1) && has_commit(&h, &c2), "commits in the pack that replaced the one loaded");
        assert!(has_commit(&h, &c3), "a commit in a second, new pack");
        KEPT_DBS.with(|k| assert_eq!(k.borrow().len(), 1, "one store kept for one directory"));
        forget(&objects);
        KEPT_DBS.with(|k| assert!(k.borrow().is_empty()));
    }
}
