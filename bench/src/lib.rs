//! seam-lab: the share emulator, and the lab that measures seamfs against it.
//!
//! - [`share`]: `seam-lab share`, the seamfs passthrough core with a layer that caches like a
//!   guest's virtiofs/9p share and injects stale-old / stale-missing faults from a seed.
//! - [`fastshare`]: `seam-lab share --fast`, a virtiofsd-style passthrough (O_PATH fd per inode
//!   under a budget, TTL 1 s, readdirplus): the fair baseline the benchmarks compare against.
//! - [`lab`]: what every lab run needs: temp dirs, mounts that are removed on exit and on signals,
//!   git on the host side and in the box.
//! - [`demo`]: `seam-lab demo`, host commits seen through the raw share and through seamfs.
//! - [`race`]: `seam-lab race SCENARIO`, host and box actors racing, control beside seamfs.
//! - [`bench`]: `seam-lab bench`, git's speed through seamfs against the raw share, native and peers.
//! - [`feed`]: `seam-lab feed`, what the host change feed gives a box: latency, watchers, idle `git status`.
//! - [`vm`]: `seam-lab vm`, the real box: the same races and benchmarks in a qemu guest over real
//!   virtiofs and 9p.
#![deny(missing_docs)]

pub mod bench;
pub mod demo;
pub mod fastshare;
pub mod feed;
pub mod lab;
pub mod race;
pub mod share;
pub mod vm;
