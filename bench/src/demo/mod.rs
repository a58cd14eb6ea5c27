//! `seam-lab demo`: host commits seen from the box through the raw share and through seamfs.
//!
//! Everything is real: a sample repository made with the git CLI in a temp backing dir (the
//! host), the share emulator over it, seamfs over a second emulator on the same backing dir (so
//! seamfs's refreshes do not make the raw share look fresher than it is), and git in the box.
//! Every mount is removed on return, on error and on Ctrl-C; every temp dir too.

pub(crate) mod report;
mod scenario;

pub use report::{BoxCommitRow, DemoReport, Read, ReadRow};

use crate::lab::cleanup::{on_signal_cleanup, CleanupGuard};
use crate::lab::LabError;

/// How to run the demo.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Print JSON instead of tables.
    pub json: bool,
    /// The share's entry/attr/negative TTL in seconds.
    pub ttl: f64,
    /// Host commits in the read part.
    pub commits: usize,
}

/// Runs the demo and prints its report.
pub fn run(opts: &DemoOptions) -> Result<(), LabError> {
    if !(0.0..=60.0).contains(&opts.ttl) {
        return Err(LabError::new("parse --ttl", std::path::Path::new("-"), "must be between 0 and 60 seconds"));
    }
    on_signal_cleanup();
    let _cleanup = CleanupGuard;
    let report = scenario::run_all(opts)?;
    if opts.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_table());
    }
    Ok(())
}
