//! The per-kernel index: in every git dir the box's `index` is the lower's `index-box.<id>`.
//!
//! - [`names`]: the name mapping (box `index` ↔ lower `index-box.<id>`), and what the box
//!   never sees (the host's index, other boxes' files, seamfs's own).
//! - [`migrate`]: an older seamfs's `index-box` taken over by the first box that touches it.
//! - [`validate`]: is an index file whole (header, version, trailing checksum)?
//! - [`seed`]: the first touch seeds `index-box` from the shared index, else from HEAD's tree,
//!   else nothing for a truly unborn branch; published only if still absent (the mount's:
//!   feature `fuse`).

#[cfg(feature = "fuse")]
pub mod migrate;
pub mod names;
#[cfg(feature = "fuse")]
pub mod seed;
pub mod validate;
