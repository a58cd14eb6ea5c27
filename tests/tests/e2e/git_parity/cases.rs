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

/// Git dirs removed or moved whole: a repository, a linked worktree's admin dir, a bare repo's
/// worktree, a separate git dir; names seamfs hides in them must go with them.
pub fn remove_git_dirs() -> Vec<&'static str> {
    vec![
        REPO,
        "cd r && git worktree add -q ../w && cd ../w && git status --short && echo w > w && git add w && git commit -qm w",
        "rm -rf w && cd r && git worktree prune && ls .git",
        "cd r && git worktree add -q ../w2 && cd ../w2 && git status --short && cd ../r && rm -rf .git/worktrees/w2 && ls .git",
        "cd r && git worktree add -q ../w3 && cd ../w3 && git status --short && cd ../r && git worktree remove ../w3 && ls .git",
        "git init -q --bare b.git && cd b.git && git worktree add -q --orphan ../bw && cd ../bw && git status --short && echo z > z && git add z && git commit -qm z",
        "rm -rf bw && cd b.git && git worktree prune && ls",
        "git init -q -b main e && cd e && git worktree add -q --orphan ../ew && cd ../ew && git status --short",
        "rm -rf ew && cd e && git worktree prune && ls .git",
        "git init -q s && cd s && echo s > s && git add s && git commit -qm s && git init -q --separate-git-dir ../sg && git status --short",
        "cd s && git init -q --separate-git-dir ../sg2 && git status --short && git log --oneline",
        "rm -rf sg2 s e && ls",
        "git clone -q r c && cd c && git status --short && cd .. && rm -rf c r && ls",
    ]
}

/// A repository copied into the mount by tools that are not git (`cp -R`, `cp -a`, `tar -x`):
/// each writes its files, `index` included, byte for byte; git then works in the copy.
pub fn copy_repo_in() -> Vec<&'static str> {
    vec![
        "S=$(mktemp -d) && cd $S && git init -q src && cd src && echo a > a && git add a && git commit -qm one && echo b > b && git add b \
         && cd \"$D\" && cp -R $S/src copy && cp -a $S/src copya && mkdir t && tar -C $S/src -cf - . | tar -C t -xf - \
         && cmp copy/.git/index $S/src/.git/index && cmp copya/.git/index $S/src/.git/index && cmp t/.git/index $S/src/.git/index; r=$?; rm -rf $S; exit $r",
        "for d in copy copya t; do (cd $d && git status --porcelain=v2 --branch && git fsck --strict --no-progress) || exit 1; done",
        "cp -R copy copy2 && cd copy2 && git status --short && git commit -qm two && git log --oneline && git status --short",
        // The reflog written before its branch (a copy tool's order): the branch is created, not
        // waited for as history hidden by a stale read.
        "mkdir r2 && tar -C copy -cf - .git/logs .git . | tar -C r2 -xf - && cd r2 && git log --oneline && git status --short",
        "rm -rf copy copya t copy2 r2 && ls",
    ]
}

/// Everyday porcelain beyond commits: stash in its forms, worktrees moved and repaired, gc and
/// repack, maintenance, notes, replace, bisect, sparse-checkout, an interactive rebase with exec,
/// submodules added, absorbed, deinitialised and updated again.
pub fn porcelain() -> Vec<&'static str> {
    [
        &[REPO][..],
        &[
            "cd r && echo c > a && git stash -q && git stash list && echo d > b && git stash push -q -m two b && git stash list && git stash show -p stash@{1}",
            "cd r && git stash pop -q && git stash apply -q && git stash drop -q && git status --short && git checkout -q -- . && git stash branch -q sb && git status --short && git checkout -q main",
            "cd r && git worktree add -q ../w1 && git worktree move ../w1 ../w2 && git worktree list --porcelain | grep -c worktree && mv ../w2 ../w3 && git worktree repair ../w3 && cd ../w3 && git status --short",
            "cd r && git worktree remove --force ../w3 && git worktree prune && git worktree list | wc -l",
            "cd r && git gc -q && git repack -q -a -d && git prune && git count-objects -v | grep -v size",
            "cd r && git notes add -m note HEAD && git notes show HEAD && git replace -f HEAD~1 HEAD && git replace -l && git replace -d HEAD~1",
            "cd r && git bisect start HEAD HEAD~1 && git bisect good && git bisect reset",
            "cd r && git sparse-checkout set --no-cone a && ls && git sparse-checkout disable && ls",
            "cd r && GIT_SEQUENCE_EDITOR=true git rebase -q -i --exec 'git log --oneline -1' HEAD~1",
            "git clone -q --separate-git-dir sep.git r cs && cd cs && git status --short && git log --oneline",
            "git clone -q --reference r r cr && cd cr && git log --oneline && cat .git/objects/info/alternates | sed 's|.*/||'",
            "cd r && git -c protocol.file.allow=always submodule add -q ../cr sub && git commit -qm sub && git submodule absorbgitdirs && cat sub/.git && git submodule status",
            "cd r && git submodule deinit -q -f sub && git submodule status && git -c protocol.file.allow=always submodule update -q --init && git submodule status && cat sub/.git",
            "cd r && git maintenance run --task=gc --task=commit-graph --task=loose-objects --task=pack-refs --quiet && git count-objects -v | grep -c pack && git fsck --strict --no-progress",
            "git init -q m && cd m && git init -q inner && cd inner && echo i > i && git add i && git commit -qm i && cd .. && git add inner && git commit -qm inner 2>&1 | tail -1; git mv inner moved && git status --short && ls moved/.git | head -3",
        ][..],
        STATE,
    ]
    .concat()
}

/// Repositories with the reftable ref backend: one the host made (its linked worktree without an
/// index: HEAD is a placeholder, so no stand-in index can come from it), one the box made, and
/// a migration between backends.
pub fn reftable() -> Vec<&'static str> {
    vec![
        "cd \"$L\" && git init -q --ref-format=reftable h && cd h && echo a > a && git add a && git commit -qm one \
         && git worktree add -q --no-checkout ../hw && echo 'gitdir: ../h/.git/worktrees/hw' > ../hw/.git",
        "cd hw && git status --short && git reset -q && git status --short && git checkout -q -- . && git status --short",
        "cd h && git status --short && echo b > b && git add b && git commit -qm two && git branch -m renamed && git log --oneline && git for-each-ref",
        "git init -q --ref-format=reftable r && cd r && echo a > a && git add a && git commit -qm one && git branch side && git branch -m main2 \
         && git refs migrate --ref-format=files && git for-each-ref && git refs migrate --ref-format=reftable && git for-each-ref && git status --short",
        "cd r && git fsck --strict --no-progress && ls .git | grep -v index",
    ]
}
