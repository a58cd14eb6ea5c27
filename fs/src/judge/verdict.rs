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

/// The operation-state names whose appearance stops a box HEAD move.
pub const OP_STATE: &[&str] = &["rebase-merge", "rebase-apply", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "BISECT_LOG"];

/// Judges a move of HEAD or the checked-out branch against operation state: `at_start` are the
/// names present when the command started, `now` those present now, `own` those the box made.
pub fn judge_ops(at_start: &[String], now: &[String], own: &[String]) -> Verdict {
    for n in now {
        if !at_start.contains(n) && !own.contains(n) {
            return Verdict::Refuse(format!(
                "refused to move HEAD: the other side started an operation ({n} appeared) while this command ran; nothing was changed, run it again once that operation is done"
            ));
        }
    }
    Verdict::Allow
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
    fn new_operations_stop_head_moves_but_own_and_old_ones_do_not() {
        let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(judge_ops(&v(&[]), &v(&[]), &v(&[])), Verdict::Allow);
        assert!(matches!(judge_ops(&v(&[]), &v(&["rebase-merge"]), &v(&[])), Verdict::Refuse(_)));
        assert_eq!(judge_ops(&v(&["MERGE_HEAD"]), &v(&["MERGE_HEAD"]), &v(&[])), Verdict::Allow);
        assert_eq!(judge_ops(&v(&[]), &v(&["rebase-merge"]), &v(&["rebase-merge"])), Verdict::Allow);
        assert!(matches!(leftover_autostash("rebase-merge"), Verdict::Refuse(m) if m.contains("git stash store")));
    }
}
