//! Invalidations made a second time, once the replies in flight at the first have landed.
//!
//! A lookup that read the lower before a host change and replies after the feed's invalidation
//! of that name would otherwise leave the kernel an entry of the old file for `FEED_TTL` (the
//! kernel's attribute version drops stale attributes, but not a stale entry: an invalidation
//! finds no dentry while the lookup is still in flight). A second invalidation of the same name
//! once such a reply has surely arrived closes that window.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::time::{Duration, Instant};

/// Past this many names waiting, the second pass is of everything instead.
const MAX_NAMES: usize = 65_536;

/// What waits for its second invalidation.
#[derive(Debug, Default)]
pub(crate) struct Again {
    /// (when first invalidated, parent node, name), oldest first.
    names: VecDeque<(Instant, u64, OsString)>,
    /// When everything was last invalidated, if its second pass is still to come.
    all: Option<Instant>,
}

/// What is due now.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Due {
    /// Everything again.
    pub all: bool,
    /// These names again: (parent node, name).
    pub names: Vec<(u64, OsString)>,
}

impl Again {
    /// `name` in `parent` was just invalidated.
    pub(crate) fn name(&mut self, parent: u64, name: &OsStr) {
        if self.names.len() >= MAX_NAMES {
            self.everything();
            return;
        }
        self.names.push_back((Instant::now(), parent, name.to_owned()));
    }

    /// Everything was just invalidated (the names waiting are covered by its second pass).
    pub(crate) fn everything(&mut self) {
        self.all = Some(Instant::now());
        self.names.clear();
    }

    /// What was first invalidated at least `after` ago.
    pub(crate) fn due(&mut self, after: Duration) -> Due {
        let mut d = Due::default();
        if self.all.is_some_and(|t| t.elapsed() >= after) {
            self.all = None;
            d.all = true;
        }
        while self.names.front().is_some_and(|(t, _, _)| t.elapsed() >= after) {
            if let Some((_, p, n)) = self.names.pop_front() {
                d.names.push((p, n));
            }
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_due_once_and_everything_covers_them() {
        let mut a = Again::default();
        a.name(1, OsStr::new("x"));
        assert_eq!(a.due(Duration::from_secs(60)), Due::default(), "not yet");
        assert_eq!(a.due(Duration::ZERO).names, vec![(1, OsString::from("x"))]);
        assert_eq!(a.due(Duration::ZERO), Due::default(), "once");
        a.name(2, OsStr::new("y"));
        a.everything();
        assert_eq!(a.due(Duration::ZERO), Due { all: true, names: Vec::new() });
    }
}
