//! One forced revalidation per name per FUSE request (ADR 0020).
//!
//! A lookup of a ref refreshes its name on the lower, then the guard reads the same ref, which
//! refreshed it again: in a guest each refresh is a round trip to the share's server, and half
//! of a commit's refreshes were such repeats. Within one request the first refresh of a name
//! stands for the rest; loops that wait for the share to change call `Lower::refresh_again`.
//! Outside a request (the reaper, seamd) every refresh is made.

use std::cell::RefCell;
use std::ffi::{CStr, CString};
use std::sync::Arc;

use crate::recent_refresh::RecentRefresh;

thread_local! {
    /// The names refreshed so far in this thread's current request; None outside a request.
    static REFRESHED: RefCell<Option<Vec<CString>>> = const { RefCell::new(None) };
    /// The process whose per-process memo spares refreshes made for it ([`as_process`]).
    static FOR_PROCESS: RefCell<Option<(u32, Arc<RecentRefresh>)>> = const { RefCell::new(None) };
}

/// Runs `f` with every `Lower::refresh` in it made as process `pid`'s own: one it made a moment
/// ago stands in (`crate::recent_refresh`, ADR 0033). For reads made on a process's behalf
/// outside its lock windows (the index lookup's heal check), never for the judge's.
pub fn as_process<T>(pid: u32, memo: &Arc<RecentRefresh>, f: impl FnOnce() -> T) -> T {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            FOR_PROCESS.with(|p| *p.borrow_mut() = None);
        }
    }
    FOR_PROCESS.with(|p| *p.borrow_mut() = Some((pid, Arc::clone(memo))));
    let _reset = Reset;
    f()
}

/// True when the process [`as_process`] runs for refreshed `rel` a moment ago (recorded as its
/// refresh otherwise); false outside `as_process`.
pub fn spared_for_process(rel: &CStr) -> bool {
    FOR_PROCESS.with(|p| p.borrow().as_ref().is_some_and(|(pid, memo)| !memo.needs(*pid, rel)))
}

/// Marks the current thread as serving one request until dropped.
pub struct RefreshScope(());

impl RefreshScope {
    /// Starts a request's scope (nested scopes end together with the outer one's names kept).
    pub fn begin() -> RefreshScope {
        REFRESHED.with(|r| {
            r.borrow_mut().get_or_insert_with(Vec::new).clear();
        });
        RefreshScope(())
    }
}

impl Drop for RefreshScope {
    fn drop(&mut self) {
        REFRESHED.with(|r| *r.borrow_mut() = None);
    }
}

/// True when `rel` must be refreshed now: outside a request, or its first refresh in this one.
pub fn first_in_request(rel: &CStr) -> bool {
    REFRESHED.with(|r| match &mut *r.borrow_mut() {
        None => true,
        Some(seen) if seen.iter().any(|s| s.as_c_str() == rel) => false,
        Some(seen) => {
            seen.push(rel.to_owned());
            true
        }
    })
}

/// Records `rel` as refreshed in this request without refreshing it: the process's refresh of a
/// moment ago stands in (`crate::recent_refresh`), so the guard's read of the same name in this
/// request sees what the lookup saw instead of forcing the round trip the memo spared.
pub fn spare(rel: &CStr) {
    first_in_request(rel);
}

#[cfg(test)]
mod tests {
    use super::*;

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
        spare(c"c");
        assert!(!first_in_request(c"c"), "a spared name is not refreshed again in its request");
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
