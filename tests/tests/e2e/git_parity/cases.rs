//! The cases: shell steps, each compared on its own (see `super`).

/// A repository `r` with two commits on `main`.
const REPO: &str = "git init -q r && cd r && echo a > a && git add a && git commit -qm one && echo b > b && git add b && git commit -qm two";

/// The state a repository `r` is compared by after a case.
const STATE: &[&str] = &[
    "cd r && git for-each-ref --format='%(refname) %(objectname) %(symref)'",
    "cd r && git symbolic-ref -q HEAD; git status --porcelain=v2 --branch",
    "cd r && git reflog show --all --format='%gd %H %gs'",
    "cd r && git fsck --strict --no-progress",
];

/// `branch -m` of the checked-out branch renames its reflog before it creates the new ref; then
/// copies, forced renames and a delete, and the same in a clone made inside the mount.
pub const BRANCH_RENAME: &[&str] = &[
    REPO,
    "cd r && git branch -m renamed",
    "cd r && git branch -c renamed copy && git branch -m copy moved && git branch -M moved renamed2",
    "cd r && git branch side && git branch -M side renamed2 && git branch -D renamed2",
    "cd r && git checkout -q -b other && git branch -m renamed other2 && git branch -m other2 renamed",
    "git clone -q r c && cd c && git branch -m cloned && git branch -m main2 && git log --oneline -g main2",
];

pub fn branch_rename() -> Vec<&'static str> {
    [BRANCH_RENAME, STATE].concat()
}
