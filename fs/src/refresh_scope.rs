//! One forced revalidation per name per FUSE request (ADR 0020).
//!
//! A lookup of a ref refreshes its name on the lower, then the guard reads the same ref, which
//! refreshed it again: in a guest each refresh is a round trip to the share's server, and half
//! of a commit's refreshes were such repeats. Within one request the first refresh of a name
//! stands for the rest; loops that wait for the share to change call `Lower::refresh_again`.
//! Outside a request (the reaper, seamd) every refresh is made.

use std::cell::RefCell;
use std::ffi::{CStr, CString};

thread_local! {
    /// The names refreshed so far in this thread's current request; None outside a request.
    static REFRESHED: RefCell<Option<Vec<CString>>> = const { RefCell::new(None) };
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
}
