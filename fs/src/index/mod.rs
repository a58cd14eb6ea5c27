//! The per-kernel index: in every git dir the box's `index` is the lower's `index-box`.
//!
//! - [`names`]: the name mapping (box `index` ↔ lower `index-box`), and what the box never sees.
//! - [`validate`]: is an index file whole (header, version, trailing checksum)?
//! - [`seed`]: the first touch seeds `index-box` from the shared index, else from HEAD's tree,
//!   else nothing for a truly unborn branch; published only if still absent (the mount's:
//!   feature `fuse`).

pub mod names;
#[cfg(feature = "fuse")]
pub mod seed;
pub mod validate;
