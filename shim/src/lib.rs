//! `seam-git`: a hook shim for git's `core.hooksPath` in the box.
//!
//! seamfs refuses a box ref move that would lose the other side's work with EBUSY on git's
//! rename, and git then only says "could not rename ... Device or resource busy". As git's
//! `reference-transaction` hook, in the `prepared` state (every lock taken, nothing committed),
//! this shim asks seamfs for its verdict on each lock (`user.seamfs.verdict`) and, on a refusal,
//! prints seamfs's reason and fails the hook, so git aborts the transaction. Every hook it is
//! run as then delegates to the repository's own hook of that name.
//!
//! - [`gitdir`]: which git dir the hook runs for, and its common dir.
//! - [`verdict`]: asking seamfs about one lock.
//! - [`delegate`]: running the repository's own hook.
//! - [`install`]: the hooks dir of links to this binary.
//! - [`hook`]: the whole hook run.
//!
//! # Limitations
//! - The verdict is asked in `prepared`, before git commits: the other side can still move
//!   things before the rename, which seamfs then refuses with EBUSY as before (no reason shown).
//! - Not on seamfs (a plain directory, the host): no opinion, the hook only delegates.
//! - One process per hook run: git runs the hook once per state of every ref transaction
//!   (`prepared`, then `committed` or `aborted`; git 2.48 adds `preparing`), each a fork and
//!   exec, and only `prepared` asks seamfs anything.

#![deny(missing_docs)]

pub mod delegate;
pub mod gitdir;
pub mod hook;
pub mod install;
pub mod verdict;

/// The hooks git runs from its hooks dir by name (githooks(5)); `install-hooks` links each one,
/// since a `core.hooksPath` replaces the repository's hooks dir for every hook, not just the
/// ones this shim judges.
pub const HOOKS: &[&str] = &[
    "applypatch-msg",
    "pre-applypatch",
    "post-applypatch",
    "pre-commit",
    "pre-merge-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-rebase",
    "post-checkout",
    "post-merge",
    "pre-push",
    "pre-receive",
    "update",
    "proc-receive",
    "post-receive",
    "post-update",
    "reference-transaction",
    "push-to-checkout",
    "pre-auto-gc",
    "post-rewrite",
    "sendemail-validate",
    "post-index-change",
];

/// True when `name` is a hook git may run by that name.
pub fn is_hook(name: &str) -> bool {
    HOOKS.contains(&name)
}
