//! What a passthrough layer decides: seamfs's git policies, or the share emulator's caching.
//!
//! The passthrough core (`core`) does the POSIX work; a `Layer` sorts every name into a class,
//! says how each class is cached, and may change a lookup's answer (the emulator's faults).

use std::ffi::OsStr;
use std::time::Duration;

use crate::index::names::BoxNames;
use crate::index::seed::SeedOptions;
use crate::policy::{cache_policy, classify, CachePolicy, Class, Ttls};

/// A lookup as the core found it on the lower.
#[derive(Debug)]
pub struct LookupView<'a> {
    /// Parent node id.
    pub parent: u64,
    /// Name looked up.
    pub name: &'a OsStr,
    /// Class of the name.
    pub class: Class,
    /// The node id the name leads to now, or None when it does not exist.
    pub fresh: Option<u64>,
}

/// What to answer a lookup with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// What the lower says now.
    Fresh,
    /// An older node this name used to lead to (it must still be known to the kernel).
    Old(u64),
    /// The name does not exist (negative entry).
    Missing,
}

/// A layer's decisions.
pub trait Layer: Send + Sync + 'static {
    /// Class of `name` in a directory of class `parent`.
    fn classify(&self, parent: Class, name: &OsStr, is_dir: bool) -> Class {
        classify(parent, name, is_dir)
    }

    /// How a class is cached.
    fn cache(&self, class: Class) -> CachePolicy;

    /// How long a listing of a directory of this class may be kept: its entry TTL unless the
    /// layer keeps entries longer than listings.
    fn listing_ttl(&self, class: Class) -> Duration {
        self.cache(class).entry_ttl
    }

    /// Keep an O_PATH fd for nodes of this class (served as they were looked up, like virtiofsd).
    fn pin(&self, _class: Class) -> bool {
        false
    }

    /// May replace the answer to a lookup; the second value overrides the entry TTL.
    fn answer(&self, _view: &LookupView<'_>) -> (Answer, Option<Duration>) {
        (Answer::Fresh, None)
    }

    /// Called after every reply to a lookup, with the node id (None: negative) and entry TTL.
    fn answered(&self, _parent: u64, _name: &OsStr, _node: Option<u64>, _ttl: Duration) {}

    /// Give the box its own index (`index-box`) in every git dir.
    fn index_split(&self) -> bool {
        false
    }

    /// This box's lower names (`index-box.<id>`...).
    fn names(&self) -> &BoxNames {
        &DEFAULT_NAMES
    }

    /// How the first touch seeds `index-box`.
    fn seed_options(&self) -> SeedOptions {
        SeedOptions::default()
    }

    /// Judge lock files and ref moves across kernels (`crate::judge`).
    fn guards(&self) -> bool {
        false
    }

    /// Keep work-tree listings for their TTL and refresh the lower's entries in bulk
    /// (`core::listing`): for a layer over a caching share, not for the share itself.
    fn listings(&self) -> bool {
        false
    }

    /// Smallest file that gets FUSE passthrough (smaller ones are read through the layer and
    /// the page cache). 0: every file, as on a local lower where a passthrough open is cheap.
    fn passthrough_min(&self) -> u64 {
        0
    }

    /// Keep a file's cached pages across opens while it is unchanged, and skip FLUSH for
    /// read-only opens (`core::data`).
    fn read_cache(&self) -> bool {
        false
    }

    /// How long a process's refresh of a live name stands for its next read of it, outside
    /// lock barriers (`crate::recent_refresh`, ADR 0033).
    fn refresh_window(&self) -> Duration {
        crate::recent_refresh::MIN_WINDOW
    }
}

/// seamfs's layer: the git path-policy table and the index split.
#[derive(Debug, Clone, Copy)]
pub struct GitLayer {
    /// TTLs the policy table is built from.
    pub ttls: Ttls,
    /// The box's index is `index-box` (default true).
    pub index_split: bool,
    /// Seeding of `index-box`.
    pub seed: SeedOptions,
    /// The host change feed's state, when one is configured (`crate::feed`).
    pub feed: Option<&'static crate::feed::FeedLive>,
    /// This box's id and the lower names it gives (one mount per process: leaked once).
    pub names: &'static BoxNames,
    /// Work-tree entries and attributes kept this long instead of `ttls.work_tree`: over a
    /// lower that never revalidates, when no TTL was given (ADR 0049).
    pub stale_lower_ttl: Option<Duration>,
}

/// How long work-tree entries and attributes are kept over a lower that never revalidates (9p
/// `cache=loose`) when the mount is given no TTL (ADR 0049): the objects' TTL.
pub const STALE_LOWER_WORK_TREE_TTL: Duration = Duration::from_secs(60);

/// The names of a layer nobody gave an id (library use; `seamfs mount` always gives one).
static DEFAULT_NAMES: std::sync::LazyLock<BoxNames> =
    std::sync::LazyLock::new(|| BoxNames::new(crate::box_id::BoxId::parse("box").expect("a valid id")));

impl Default for GitLayer {
    fn default() -> Self {
        GitLayer {
            ttls: Ttls::default(),
            index_split: true,
            seed: SeedOptions::default(),
            feed: None,
            names: &DEFAULT_NAMES,
            stale_lower_ttl: None,
        }
    }
}

/// Why work-tree entries and attributes are kept past the TTL.
enum KeptPastTtl {
    /// The feed is live: it, not the clock, keeps work-tree names fresh (ADR 0021).
    Feed,
    /// The lower never revalidates a file it has seen, so a shorter TTL buys nothing but
    /// lookups (ADR 0049).
    StaleLower(Duration),
}

impl GitLayer {
    /// Whether, and why, work-tree entries are kept past the TTL now.
    fn work_tree_kept(&self) -> Option<KeptPastTtl> {
        match (self.feed, self.stale_lower_ttl) {
            (Some(f), _) if f.is_live() => Some(KeptPastTtl::Feed),
            (_, Some(t)) => Some(KeptPastTtl::StaleLower(t)),
            _ => None,
        }
    }
}

impl Layer for GitLayer {
    fn cache(&self, class: Class) -> CachePolicy {
        let p = cache_policy(class, &self.ttls);
        if class != Class::WorkTree {
            return p;
        }
        // Negative entries stay on the share's TTL either way: a feed's fallback cannot
        // enumerate them to invalidate, and a lower that never revalidates does show a new name.
        match self.work_tree_kept() {
            Some(KeptPastTtl::Feed) => CachePolicy { entry_ttl: crate::feed::FEED_TTL, attr_ttl: crate::feed::FEED_TTL, ..p },
            Some(KeptPastTtl::StaleLower(t)) => CachePolicy { entry_ttl: t, attr_ttl: t, ..p },
            None => p,
        }
    }

    // Over a lower that never revalidates a listing still reaches the server (9p's `Treaddir`),
    // so new names show: listings stay on the TTL when only entries are kept longer.
    fn listing_ttl(&self, class: Class) -> Duration {
        if class == Class::WorkTree && matches!(self.work_tree_kept(), Some(KeptPastTtl::StaleLower(_))) {
            return self.ttls.work_tree;
        }
        self.cache(class).entry_ttl
    }

    fn index_split(&self) -> bool {
        self.index_split
    }

    // The share's own cache shows a name this old; the memo shows none older (ADR 0033).
    fn refresh_window(&self) -> Duration {
        self.ttls.work_tree
    }

    fn names(&self) -> &BoxNames {
        self.names
    }

    fn seed_options(&self) -> SeedOptions {
        self.seed
    }

    fn guards(&self) -> bool {
        true
    }

    fn listings(&self) -> bool {
        true
    }

    fn passthrough_min(&self) -> u64 {
        crate::policy::PASSTHROUGH_MIN
    }

    fn read_cache(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::cache_policy;

    #[test]
    fn over_a_lower_that_never_revalidates_work_tree_entries_are_kept_longer() {
        let plain = GitLayer::default();
        let stale = GitLayer { stale_lower_ttl: Some(STALE_LOWER_WORK_TREE_TTL), ..GitLayer::default() };
        let ttl = plain.ttls.work_tree;
        let w = stale.cache(Class::WorkTree);
        assert_eq!((w.entry_ttl, w.attr_ttl), (STALE_LOWER_WORK_TREE_TTL, STALE_LOWER_WORK_TREE_TTL));
        assert_eq!(w.negative_ttl, ttl, "a name the host creates shows through the lower: negatives stay on the TTL");
        assert_eq!(stale.listing_ttl(Class::WorkTree), ttl, "so do listings, which reach the server");
        for class in [Class::LiveRef, Class::GitOther, Class::GitDir, Class::Index, Class::Objects] {
            assert_eq!(stale.cache(class), cache_policy(class, &stale.ttls), "{class:?} is not the work tree");
        }
        let p = plain.cache(Class::WorkTree);
        assert_eq!((p.entry_ttl, p.attr_ttl, plain.listing_ttl(Class::WorkTree)), (ttl, ttl, ttl), "elsewhere nothing changes");
    }
}
