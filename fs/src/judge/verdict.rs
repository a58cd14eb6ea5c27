//! The decision for a box rename of `<name>.lock` onto `<name>` in a git dir, as pure data.
//!
//! Git's compare-and-swap is sound on one kernel: it re-reads the ref under the lock. Across
//! kernels the box may have read a stale value, and a slow command re-reads only at the end
//! (`reset` reads its target, rewrites the index, then reads the value it replaces). So a move
//! is judged against what the process saw *when it started* (advanced by its own moves), under
//! the lock, against the lower's current value read as data.

/// What is being replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A ref file (`HEAD`, `refs/**`, `*_HEAD`): judged against the value first seen.
    Ref(String),
    /// A whole-file state (`config`, `packed-refs`): judged against the content last read.
    File(String),
    /// Anything else: not judged.
    Other,
}

/// The verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Let the rename through.
    Allow,
    /// Refuse: nothing changes; the message says what moved.
    Refuse(String),
}

/// Judges a ref move: `seen` is what the process saw (None: it never looked), `now` the value
/// on the lower under the lock (None: absent).
pub fn judge_ref(name: &str, seen: Option<&Option<String>>, now: &Option<String>) -> Verdict {
    match seen {
        None => Verdict::Allow,
        Some(seen) if seen == now => Verdict::Allow,
        Some(seen) => Verdict::Refuse(format!(
            "refused to move {name}: it was {} when this command started and is {} now (moved by the other side); nothing was changed, run the command again",
            show(seen),
            show(now)
        )),
    }
}

/// Judges a commit onto HEAD or the command's branch against the index the command read:
/// `read_at` is the commit its index was in sync with when it read it (None: it did not read it
/// since it last wrote it), `now` the ref's value under the lock, `on_now` whether the new value
/// is a commit with `now` among its parents (a commit or merge made on top: None when unknown).
///
/// Such a commit is the index's tree on top of `now`: an index in sync with another commit (the
/// other side moved the branch after the index was read, or the heal onto that move was refused
/// because the box's staging overlaps it) makes a commit that reverts everything between the
/// two. A move to an existing commit (`reset`, a rebase's last step) is not one. Only commit
/// ids are compared: a symbolic HEAD being re-pointed is not a commit.
pub fn judge_index_base(name: &str, read_at: Option<&str>, now: &Option<String>, on_now: impl FnOnce() -> Option<bool>) -> Verdict {
    let (Some(read_at), Some(now)) = (read_at.filter(|r| is_oid(r)), now.as_deref().filter(|n| is_oid(n))) else {
        return Verdict::Allow;
    };
    if read_at == now || on_now() != Some(true) {
        return Verdict::Allow;
    }
    Verdict::Refuse(format!(
        "refused to move {name}: this command's index is from commit {}, but {name} is at {} (moved by the other side, and the index could not follow: staged changes overlap that move); a commit now would undo the other side's work. Nothing was changed: run `git status` and stage again (`git reset -q` first if it still shows the other side's files), then commit",
        show(&Some(read_at.to_string())),
        show(&Some(now.to_string()))
    ))
}

fn is_oid(v: &str) -> bool {
    (v.len() == 40 || v.len() == 64) && v.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Judges a whole-file replace: `read` is (a hash of) the content the process last read
/// (None: never read it).
pub fn judge_file(name: &str, read: Option<&Option<u64>>, now: &Option<u64>) -> Verdict {
    match read {
        None => Verdict::Allow,
        Some(read) if read == now => Verdict::Allow,
        Some(_) => Verdict::Refuse(format!(
            "refused to replace {name}: the other side changed it after this command read it; nothing was changed, run the command again"
        )),
    }
}

fn show(v: &Option<String>) -> String {
    match v {
        Some(v) => v.chars().take(12).collect(),
        None => "absent".into(),
    }
}

/// The operation-state names that stop a box HEAD move unless the box made them.
/// `sequencer` is a multi-commit cherry-pick or revert between its steps.
pub const OP_STATE: &[&str] =
    &["rebase-merge", "rebase-apply", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "BISECT_LOG", "sequencer"];

/// Judges a move of HEAD or the checked-out branch against operation state: `now` are the
/// names present under the lock, `own` those the box made.
///
/// Any operation of the other side refuses the move, present at the start or not: a box commit
/// made during a host rebase lands on the rebase's detached HEAD and is lost when the host
/// aborts or finishes it.
pub fn judge_ops(now: &[String], own: &[String]) -> Verdict {
    match now.iter().find(|n| !own.contains(n)) {
        Some(n) => Verdict::Refuse(format!(
            "refused to move HEAD: the other side has an operation in progress ({n} is present); nothing was changed, run the command again once that operation is done"
        )),
        None => Verdict::Allow,
    }
}

/// A rebase dir that holds only `autostash` and is older than this is a leftover.
pub const LEFTOVER_AGE_SECS: u64 = 30;

/// The refusal for a leftover autostash dir, naming the recovery.
pub fn leftover_autostash(dir: &str) -> Verdict {
    Verdict::Refuse(format!(
        "refused to move HEAD: .git/{dir} holds only `autostash`, the leftover of a `pull --rebase --autostash` that failed; there is no rebase to finish. Recover on the host: `git stash store -m autostash $(cat .git/{dir}/autostash)` and then remove .git/{dir}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Option<String> {
        Some(x.to_string())
    }

    #[test]
    fn a_move_from_an_index_of_another_commit_is_refused() {
        let (a, b) = ("a".repeat(40), "b".repeat(40));
        let on = || Some(true);
        assert_eq!(judge_index_base("refs/heads/main", Some(&a), &s(&a), on), Verdict::Allow);
        assert_eq!(judge_index_base("refs/heads/main", None, &s(&a), on), Verdict::Allow, "index not read");
        assert_eq!(judge_index_base("refs/heads/main", Some(&a), &None, on), Verdict::Allow, "unborn branch");
        assert_eq!(judge_index_base("HEAD", Some(&a), &s("ref: refs/heads/main"), on), Verdict::Allow, "a symref is not a commit");
        assert_eq!(judge_index_base("HEAD", Some(""), &s(&a), on), Verdict::Allow, "no sync point");
        assert_eq!(judge_index_base("refs/heads/main", Some(&a), &s(&b), || Some(false)), Verdict::Allow, "a move to an existing commit");
        assert_eq!(judge_index_base("refs/heads/main", Some(&a), &s(&b), || None), Verdict::Allow, "the new value unreadable");
        let Verdict::Refuse(msg) = judge_index_base("refs/heads/main", Some(&a), &s(&b), on) else { panic!("allowed") };
        assert!(msg.contains("aaaaaaaaaaaa") && msg.contains("bbbbbbbbbbbb") && msg.contains("git status"), "{msg}");
    }

    #[test]
    fn refs_are_held_to_what_was_seen() {
        assert_eq!(judge_ref("refs/heads/main", None, &s("b")), Verdict::Allow, "never looked: not second-guessed");
        assert_eq!(judge_ref("refs/heads/main", Some(&s("a")), &s("a")), Verdict::Allow, "unchanged, or rewritten to the same value");
        assert!(matches!(judge_ref("refs/heads/main", Some(&s("a")), &s("b")), Verdict::Refuse(m) if m.contains("moved")));
        assert!(matches!(judge_ref("refs/heads/main", Some(&None), &s("b")), Verdict::Refuse(_)), "created meanwhile");
        assert!(matches!(judge_ref("refs/heads/main", Some(&s("a")), &None), Verdict::Refuse(_)), "deleted meanwhile");
    }

    #[test]
    fn files_are_held_to_the_last_read() {
        let a = Some(1u64);
        assert_eq!(judge_file("config", Some(&a), &a), Verdict::Allow);
        assert!(matches!(judge_file("config", Some(&a), &Some(2)), Verdict::Refuse(_)));
        assert_eq!(judge_file("config", None, &a), Verdict::Allow);
    }

    #[test]
    fn operations_of_the_other_side_stop_head_moves_but_own_ones_do_not() {
        let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(judge_ops(&v(&[]), &v(&[])), Verdict::Allow);
        assert!(matches!(judge_ops(&v(&["rebase-merge"]), &v(&[])), Verdict::Refuse(m) if m.contains("rebase-merge")));
        assert!(matches!(judge_ops(&v(&["MERGE_HEAD", "sequencer"]), &v(&["MERGE_HEAD"])), Verdict::Refuse(m) if m.contains("sequencer")));
        assert_eq!(judge_ops(&v(&["rebase-merge"]), &v(&["rebase-merge"])), Verdict::Allow);
        assert!(matches!(leftover_autostash("rebase-merge"), Verdict::Refuse(m) if m.contains("git stash store")));
    }
}
