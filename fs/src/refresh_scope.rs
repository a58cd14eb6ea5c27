//! One forced revalidation per name per FUSE request (ADR 0020).
//!
//! A lookup of a ref refreshes its name on the lower, then the guard reads the same ref, which
//! refreshed it again: in a guest each refresh is a round trip to the share's server, and half
//! of a commit's refreshes were such repeats. Within one request the first refresh of a name
//! stands for the rest; loops that wait for the share to change call `Lower::refresh_again`.
//! Outside a request (the reaper, seamd) every refresh is made.

use std::cell::RefCell;
use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::lower::Seen;
use crate::recent_refresh::{RecentRefresh, SizeKey};

/// One name refreshed in the current request.
struct Named {
    path: CString,
    /// What the refresh learned, and the name's generation before it (ADR 0037).
    seen: Seen,
    generation: u64,
    /// The bytes read from the server since that refresh, and the lower's cached stat they
    /// went with (ADR 0046; a lower that never revalidates only).
    read: Option<(SizeKey, Arc<[u8]>)>,
}

thread_local! {
    /// The names refreshed so far in this thread's current request; None outside a request.
    static REFRESHED: RefCell<Option<Vec<Named>>> = const { RefCell::new(None) };
    /// The process whose per-process memo spares refreshes made for it ([`as_process`]).
    static FOR_PROCESS: RefCell<Option<(u32, Arc<RecentRefresh>)>> = const { RefCell::new(None) };
    /// The operation state a git dir's listing showed in this request ([`ops_listed`]).
    static OPS_LISTED: RefCell<Option<(PathBuf, Vec<String>)>> = const { RefCell::new(None) };
}

/// Runs `f` with every `Lower::refresh` in it made as process `pid`'s own: one it made a moment
/// ago stands in (`crate::recent_refresh`, ADR 0033). For reads made on a process's behalf
/// outside its lock windows (the index lookup's heal check), never for the judge's.
pub fn as_process<T>(pid: u32, memo: &Arc<RecentRefresh>, f: impl FnOnce() -> T) -> T {
    /// Puts back the process an enclosing `as_process` ran for, if any.
    struct Reset(Option<(u32, Arc<RecentRefresh>)>);
    impl Drop for Reset {
        fn drop(&mut self) {
            let outer = self.0.take();
            FOR_PROCESS.with(|p| *p.borrow_mut() = outer);
        }
    }
    let outer = FOR_PROCESS.with(|p| p.borrow_mut().replace((pid, Arc::clone(memo))));
    let _reset = Reset(outer);
    f()
}

/// True when the process [`as_process`] runs for refreshed `rel` a moment ago (recorded as its
/// refresh otherwise); false outside `as_process`.
pub fn spared_for_process(rel: &CStr) -> bool {
    for_process(|pid, memo| !memo.needs(pid, rel)).unwrap_or(false)
}

/// Marks the current thread as serving one request until dropped.
pub struct RefreshScope(());

impl RefreshScope {
    /// Starts a request's scope (nested scopes end together with the outer one's names kept).
    pub fn begin() -> RefreshScope {
        REFRESHED.with(|r| {
            r.borrow_mut().get_or_insert_with(Vec::new).clear();
        });
        OPS_LISTED.with(|o| *o.borrow_mut() = None);
        RefreshScope(())
    }
}

impl Drop for RefreshScope {
    fn drop(&mut self) {
        REFRESHED.with(|r| *r.borrow_mut() = None);
        OPS_LISTED.with(|o| *o.borrow_mut() = None);
    }
}

/// The operation state in progress in `gitdir` (`rebase-merge`, `MERGE_HEAD`, ...): what a
/// listing made earlier in this request showed, else what `list` finds, kept for the rest of
/// it. A box ref rename asks twice (the guard's judge, then the sealed heal) within moments;
/// the second listing only added a round trip. Outside a request every call lists.
pub fn ops_listed(gitdir: &Path, list: impl FnOnce() -> Vec<String>) -> Vec<String> {
    let in_request = REFRESHED.with(|r| r.borrow().is_some());
    if in_request {
        if let Some(ops) = OPS_LISTED.with(|o| o.borrow().as_ref().filter(|(d, _)| d == gitdir).map(|(_, v)| v.clone())) {
            return ops;
        }
    }
    let ops = list();
    if in_request {
        OPS_LISTED.with(|o| *o.borrow_mut() = Some((gitdir.to_path_buf(), ops.clone())));
    }
    ops
}

/// What the current request knows of a name's refresh.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InRequest {
    /// Not serving a request: every refresh is made.
    Outside,
    /// The name's first refresh in this request (now recorded as made).
    First,
    /// Refreshed earlier in this request: what that refresh learned, and the name's generation
    /// read before it (ADR 0037).
    Again(Seen, u64),
}

/// Whether `rel` was refreshed in this request already; records it as refreshed when not.
pub fn in_request(rel: &CStr) -> InRequest {
    REFRESHED.with(|r| match &mut *r.borrow_mut() {
        None => InRequest::Outside,
        Some(seen) => match seen.iter().find(|s| s.path.as_c_str() == rel) {
            Some(s) => InRequest::Again(s.seen, s.generation),
            None => {
                seen.push(Named { path: rel.to_owned(), seen: Seen::Unknown, generation: 0, read: None });
                InRequest::First
            }
        },
    })
}

/// Waits `d` inside a request that polls the share: what the request learned before the wait is
/// forgotten, so every look after it refreshes again (a name found missing may be back).
pub fn pause(d: std::time::Duration) {
    std::thread::sleep(d);
    REFRESHED.with(|r| {
        if let Some(seen) = r.borrow_mut().as_mut() {
            seen.clear();
        }
    });
    OPS_LISTED.with(|o| *o.borrow_mut() = None);
}

/// What the refresh of `rel` in this request found (`generation`: read before it).
pub fn learned(rel: &CStr, seen: Seen, generation: u64) {
    with_named(rel, |s| (s.seen, s.generation) = (seen, generation));
}

/// Runs `f` on this request's entry for `rel`, if it refreshed `rel`.
fn with_named(rel: &CStr, f: impl FnOnce(&mut Named)) {
    REFRESHED.with(|r| {
        if let Some(s) = r.borrow_mut().as_mut().and_then(|v| v.iter_mut().find(|s| s.path.as_c_str() == rel)) {
            f(s);
        }
    })
}

/// Runs `f` with the process [`as_process`] runs for and its memo; None outside it.
fn for_process<T>(f: impl FnOnce(u32, &RecentRefresh) -> T) -> Option<T> {
    FOR_PROCESS.with(|p| p.borrow().as_ref().map(|(pid, memo)| f(*pid, memo)))
}

/// The bytes of `rel` read from the server since the refresh that stands for it, in this
/// request or for the process [`as_process`] runs for, while the lower's cached stat of it is
/// still `key` (nothing this kernel did replaced or wrote it since). ADR 0046: a read after a
/// spared refresh sees the name as that refresh left it, as ADR 0020 and 0033 say of lookups.
pub fn recalled_bytes(rel: &CStr, key: SizeKey) -> Option<Arc<[u8]>> {
    let in_request = REFRESHED.with(|r| {
        let r = r.borrow();
        let s = r.as_ref()?.iter().find(|s| s.path.as_c_str() == rel)?;
        s.read.as_ref().filter(|(k, _)| *k == key).map(|(_, b)| Arc::clone(b))
    });
    if let Some(b) = &in_request {
        // Read in this request after the process's refresh, they stand for the process too: its
        // open of the name a moment later is served them (ADR 0048) instead of reading again.
        for_process(|pid, memo| memo.note_bytes(pid, rel, key, b));
        return in_request;
    }
    let recalled = for_process(|pid, memo| memo.bytes(pid, rel, key)).flatten();
    if let Some(b) = &recalled {
        note_in_request(rel, key, b);
    }
    recalled
}

/// Remembers `bytes`, just read from the server under the lower's cached stat `key`, for the
/// rest of this request (when it refreshed `rel`) and for the process [`as_process`] runs for
/// (while its refresh of `rel` stands).
pub fn note_bytes(rel: &CStr, key: SizeKey, bytes: &Arc<[u8]>) {
    note_in_request(rel, key, bytes);
    for_process(|pid, memo| memo.note_bytes(pid, rel, key, bytes));
}

fn note_in_request(rel: &CStr, key: SizeKey, bytes: &Arc<[u8]>) {
    with_named(rel, |s| s.read = Some((key, Arc::clone(bytes))));
}

/// A forced refresh of `rel` (a wait on the share, a verified read): bytes read before it stand
/// for nothing after it.
pub fn forget_bytes(rel: &CStr) {
    with_named(rel, |s| s.read = None);
    for_process(|pid, memo| memo.forget_bytes(pid, rel));
}

/// Records `rel` as refreshed in this request without refreshing it: the process's refresh of a
/// moment ago stands in (`crate::recent_refresh`), so the guard's read of the same name in this
/// request sees what the lookup saw instead of forcing the round trip the memo spared.
pub fn spare(rel: &CStr, seen: Seen, generation: u64) {
    if in_request(rel) == InRequest::First {
        learned(rel, seen, generation);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// True when `rel` must be refreshed now: outside a request, or its first refresh in this one.
    fn first_in_request(rel: &CStr) -> bool {
        !matches!(in_request(rel), InRequest::Again(..))
    }

    #[test]
    fn operation_state_is_listed_once_per_request_and_git_dir() {
        let lists = std::cell::Cell::new(0);
        let list = || {
            lists.set(lists.get() + 1);
            vec!["MERGE_HEAD".to_string()]
        };
        let (a, b) = (Path::new("a/.git"), Path::new("b/.git"));
        ops_listed(a, list);
        ops_listed(a, list);
        assert_eq!(lists.get(), 2, "outside a request every call lists");
        {
            let _r = RefreshScope::begin();
            assert_eq!(ops_listed(a, list), ["MERGE_HEAD"]);
            assert_eq!(ops_listed(a, list), ["MERGE_HEAD"]);
            assert_eq!(lists.get(), 3, "the request's first listing stands for the second");
            ops_listed(b, list);
            assert_eq!(lists.get(), 4, "another git dir is listed");
            pause(std::time::Duration::ZERO);
            ops_listed(b, list);
            assert_eq!(lists.get(), 5, "a request that waited on the share lists again");
        }
        let _r = RefreshScope::begin();
        ops_listed(b, list);
        assert_eq!(lists.get(), 6, "a new request lists again");
    }

    #[test]
    fn one_refresh_per_name_per_request() {
        assert!(first_in_request(c"a"), "outside a request every refresh is made");
        assert!(first_in_request(c"a"));
        {
            let _r = RefreshScope::begin();
            assert!(first_in_request(c"a"));
            assert!(!first_in_request(c"a"));
            assert!(first_in_request(c"b"));
        }
        assert!(first_in_request(c"a"), "the scope ended with the request");
        let _r = RefreshScope::begin();
        assert!(first_in_request(c"a"), "a new request refreshes again");
        spare(c"c", Seen::Missing, 4);
        assert!(!first_in_request(c"c"), "a spared name is not refreshed again in its request");
        assert_eq!(in_request(c"c"), InRequest::Again(Seen::Missing, 4), "what the memo learned is recalled");
        learned(c"a", Seen::Present, 2);
        assert_eq!(in_request(c"a"), InRequest::Again(Seen::Present, 2));
        pause(std::time::Duration::ZERO);
        assert_eq!(in_request(c"c"), InRequest::First, "after a pause the request refreshes again");
    }

    #[test]
    fn a_process_memo_spares_only_inside_as_process() {
        let memo = Arc::new(RecentRefresh::new(std::time::Duration::from_secs(1)));
        assert!(!spared_for_process(c"h"), "outside as_process nothing is spared");
        assert!(!as_process(7, &memo, || spared_for_process(c"h")), "the process's first read refreshes");
        assert!(as_process(7, &memo, || spared_for_process(c"h")), "its next within the window is spared");
        assert!(!as_process(8, &memo, || spared_for_process(c"h")), "another process refreshes for itself");
        assert!(!spared_for_process(c"h"), "the scope ended");
        memo.barrier();
        assert!(!as_process(7, &memo, || spared_for_process(c"h")), "a lock barrier makes it refresh again");
    }
}
