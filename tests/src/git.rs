//! The real git CLI in a clean environment: git itself is the reference.
//!
//! No system or global config is read (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`,
//! `HOME` an empty temp dir); identity and the default branch are given as command-line-level
//! config through `GIT_CONFIG_COUNT`, which git passes on to the git processes it starts
//! (submodule clones, rebase helpers). Editors and pagers are disabled.

use std::ffi::OsStr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use crate::run::{run, Ran};
use crate::tmp::TempDir;

/// Config every git call gets, as `-c` would give it.
const CONFIG: &[(&str, &str)] = &[
    ("user.name", "Seam Tester"),
    ("user.email", "tester@seam.invalid"),
    ("init.defaultBranch", "main"),
    // Deterministic, quiet runs: no background maintenance, no advice.
    ("gc.autoDetach", "false"),
    ("maintenance.auto", "false"),
    ("advice.detachedHead", "false"),
];

/// A git runner with its own empty HOME; optionally as another user.
#[derive(Debug)]
pub struct Git {
    home: TempDir,
    user: Option<(u32, u32)>,
}

impl Default for Git {
    fn default() -> Self {
        Git::new()
    }
}

impl Git {
    /// A runner as the test's own user (root).
    pub fn new() -> Git {
        Git { home: TempDir::new("git-home"), user: None }
    }

    /// A runner whose processes switch to `uid`/`gid` (and no supplementary groups).
    pub fn as_user(uid: u32, gid: u32) -> Git {
        Git { home: TempDir::new("git-home"), user: Some((uid, gid)) }
    }

    /// The HOME directory git sees.
    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// A `git ARGS` command in `cwd`, with the clean environment, ready to run.
    pub fn cmd<S: AsRef<OsStr>>(&self, cwd: &Path, args: &[S]) -> Command {
        let mut c = Command::new("git");
        c.args(args).current_dir(cwd);
        self.env(&mut c);
        c
    }

    /// Gives any command (e.g. `sh -c` around git) the clean git environment and user.
    pub fn env(&self, c: &mut Command) {
        c.env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", self.home.path())
            .env("LC_ALL", "C")
            .env("TZ", "UTC")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_PAGER", "cat")
            .env("GIT_EDITOR", "true")
            .env("GIT_MERGE_AUTOEDIT", "no")
            .env("GIT_CONFIG_COUNT", CONFIG.len().to_string());
        for (i, (k, v)) in CONFIG.iter().enumerate() {
            c.env(format!("GIT_CONFIG_KEY_{i}"), k).env(format!("GIT_CONFIG_VALUE_{i}"), v);
        }
        if let Some((uid, gid)) = self.user {
            // std drops supplementary groups (setgroups(0)) before setuid when started by root.
            c.uid(uid).gid(gid);
        }
    }

    /// Runs git and returns the finished command, whatever its exit status.
    pub fn try_run<S: AsRef<OsStr>>(&self, cwd: &Path, args: &[S]) -> Ran {
        run(&mut self.cmd(cwd, args))
    }

    /// Runs git, panics with the full report unless it exits 0, and returns its stdout.
    #[track_caller]
    pub fn run<S: AsRef<OsStr>>(&self, cwd: &Path, args: &[S]) -> String {
        let r = self.try_run(cwd, args);
        if !r.success() {
            panic!("git failed:\n{r}");
        }
        r.stdout
    }

    /// `git fsck --strict` (dangling objects are not errors) must exit 0 and report nothing bad.
    #[track_caller]
    pub fn fsck(&self, repo: &Path) {
        let r = self.try_run(repo, &["fsck", "--strict", "--no-dangling", "--no-progress"]);
        let bad = ["error", "missing", "broken", "corrupt", "bad ", "fatal", "warning"];
        let text = format!("{}\n{}", r.stdout, r.stderr).to_lowercase();
        if !r.success() || bad.iter().any(|b| text.contains(b)) {
            panic!("git fsck is not clean in {}:\n{r}", repo.display());
        }
    }

    /// `git status --porcelain` must be empty.
    #[track_caller]
    pub fn assert_clean(&self, repo: &Path) {
        let out = self.run(repo, &["status", "--porcelain=v1", "--untracked-files=all"]);
        assert!(out.is_empty(), "git status is not clean in {}:\n{out}", repo.display());
    }
}
