//! The host change feed (issue #11): seamd watches the checkout and streams the names that
//! changed; seamfs refreshes exactly those names and tells the box kernel, so host edits show at
//! once, box watchers fire, and the work tree can stay cached until something really changes.
//!
//! Correctness never rests on the feed: live refs, locks, the index and the judge read the
//! share as without it. A feed that stalls, drops or overflows puts the work tree back on the
//! share's TTLs at once, everything cached on its word invalidated (ADR 0021).
//!
//! [`addr`] and [`proto`] are both sides' (seamd builds them without the overlay, ADR 0023);
//! [`consume`], [`lines`] and the mount's feed state are seamfs's (feature `fuse`).

pub mod addr;
#[cfg(feature = "fuse")]
mod again;
#[cfg(feature = "fuse")]
pub mod consume;
#[cfg(feature = "fuse")]
pub mod lines;
pub mod proto;
#[cfg(feature = "fuse")]
mod state;

pub use addr::FeedAddr;
#[cfg(feature = "fuse")]
pub use state::{box_touched, is_poke, touch, FeedLive, ECHO_WINDOW, FEED_TTL};
#[cfg(feature = "fuse")]
use state::{mark_poker, track_touches};
