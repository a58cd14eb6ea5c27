//! `user.seamfs.status`: a virtual extended attribute of the mount root that says who serves
//! the mount and how, as `key=value` lines (`pid`, `version`, `lower`, `data_path`, `ttl`...).
//!
//! `seamfs mount` reads it to refuse a second mount naming the first one's pid, `seamfs umount`
//! to wait for the daemon, and `seamfs doctor` to report the data path the kernel agreed to.
//! Only the daemon knows these, and a getxattr is answered by the daemon itself, so an answer
//! also proves the mount is alive. Computed per call, never stored or listed.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::Ordering;

use super::Core;
use crate::inode::ROOT;
use crate::layer::Layer;

/// The attribute's name.
pub const NAME: &str = "user.seamfs.status";

impl<L: Layer> Core<L> {
    /// True when `name` on node `id` is the status attribute (the mount root of seamfs's own
    /// layer; the share emulator passes the name through like any other).
    pub(crate) fn is_status_xattr(&self, id: u64, name: &OsStr) -> bool {
        id == ROOT && self.layer.guards() && name.as_bytes() == NAME.as_bytes()
    }

    /// The value: the facts the mount was started with, then what the kernel agreed to.
    pub(crate) fn status_xattr(&self) -> Vec<u8> {
        let mut out = format!("pid={}\n", std::process::id());
        for (k, v) in &self.opts.status {
            out.push_str(&format!("{k}={v}\n"));
        }
        let data_path = if self.passthrough_on.load(Ordering::Relaxed) { "passthrough" } else { "plain" };
        out.push_str(&format!("data_path={data_path}\n"));
        out.push_str(&format!("killpriv={}\n", self.killpriv_on.load(Ordering::Relaxed)));
        out.push_str(&format!("refreshes={}\n", crate::lower::REFRESHES.load(Ordering::Relaxed)));
        out.push_str(&self.park_status());
        out.into_bytes()
    }
}
