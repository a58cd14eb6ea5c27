//! The one end-to-end test binary: real seamfs mounts, the real git CLI, real syscalls.
//!
//! Run `cargo build` first: the tests use `target/<profile>/seamfs` (and `seam-lab`).
//! Every test mounts in its own temp dirs, so the tests run in parallel; every mount is a
//! `seam_tests::Mount` guard, unmounted even when a test fails.

mod bad_input;
mod clidoc;
mod box_doctor;
mod boxes;
mod crash;
mod fast_share;
mod feed;
mod freshness;
mod git_parity;
mod git_workflows;
mod ownership;
mod posix;
mod scale;
mod hostbox;
mod index_split;
mod lifecycle;
mod locks;
mod lower_view;
mod mount_helper;
mod refmoves;
mod round_trips;
mod shim;
mod static_bins;
mod units;
mod heal;
mod hostile;
mod races;
mod parking;
