//! The share emulator's layer: a guest's virtiofs/9p cache in front of the backing directory.
//!
//! Every class gets the share's TTLs and nothing is refreshed. Names inside git dirs (but not
//! objects) are pinned by an O_PATH fd, as virtiofsd holds one per inode: a name the host replaced
//! keeps reading the old file through the kernel's cached entry. The work tree is not pinned (the
//! open-file limit), so a replaced work-tree file answers ESTALE and reads fresh at once.

use std::ffi::OsStr;
use std::time::{Duration, Instant};

use seamfs::layer::{Answer, Layer, LookupView};
use seamfs::policy::{CachePolicy, Class};

use super::fault::{FaultConfig, FaultModel};

/// The share's cache lifetimes.
#[derive(Debug, Clone, Copy)]
pub struct ShareTtls {
    /// Entry TTL (name → inode). Lima vz: 1 s; libkrun: 5 s.
    pub entry: Duration,
    /// Attribute TTL.
    pub attr: Duration,
    /// Negative entry TTL.
    pub negative: Duration,
}

impl Default for ShareTtls {
    fn default() -> Self {
        let s = Duration::from_secs(1);
        ShareTtls { entry: s, attr: s, negative: s }
    }
}

/// The emulator's decisions.
#[derive(Debug)]
pub struct ShareLayer {
    ttls: ShareTtls,
    faults: Option<FaultModel>,
}

impl ShareLayer {
    /// A layer with the given TTLs and optional fault injection.
    pub fn new(ttls: ShareTtls, fault: Option<FaultConfig>) -> Self {
        ShareLayer { ttls, faults: fault.map(FaultModel::new) }
    }
}

/// Names a guest holds an fd for, and that faults apply to: git-dir names outside objects.
fn held(class: Class) -> bool {
    !matches!(class, Class::WorkTree | Class::Objects)
}

impl Layer for ShareLayer {
    fn cache(&self, _class: Class) -> CachePolicy {
        CachePolicy {
            entry_ttl: self.ttls.entry,
            attr_ttl: self.ttls.attr,
            negative_ttl: self.ttls.negative,
            refresh: false,
            direct_io: false,
            passthrough: true,
        }
    }

    fn pin(&self, class: Class) -> bool {
        held(class)
    }

    fn answer(&self, view: &LookupView<'_>) -> (Answer, Option<Duration>) {
        match &self.faults {
            Some(f) if held(view.class) => f.decide(view.parent, view.name, view.fresh, Instant::now()),
            _ => (Answer::Fresh, None),
        }
    }

    fn answered(&self, parent: u64, name: &OsStr, node: Option<u64>, ttl: Duration) {
        if let Some(f) = &self.faults {
            f.answered(parent, name, node, ttl, Instant::now());
        }
    }
}
