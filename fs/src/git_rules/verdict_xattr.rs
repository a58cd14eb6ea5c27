//! `user.seamfs.verdict`: a virtual extended attribute of a lock file in a git dir that says
//! what seamfs would answer if the lock were committed now (`ok`, or `refused: <reason>`).
//!
//! A refusal reaches git only as EBUSY on its rename, and the box user sees git's "could not
//! rename"; the reason is in seamfs's log. `seam-git`, a reference-transaction hook, asks this
//! attribute in the `prepared` state and prints the reason instead. The hook runs as a child
//! of the git process holding the lock, so the verdict is judged for the caller's parent.
//! The value is computed per call, never stored, and never listed.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use fuser::Errno;

use crate::core::Core;
use crate::judge::procs::Proc;
use crate::judge::verdict::Verdict;
use crate::layer::Layer;
use crate::policy::Class;

/// The attribute's name.
pub(crate) const NAME: &str = "user.seamfs.verdict";

/// The value for a verdict.
fn value(v: &Verdict) -> Vec<u8> {
    match v {
        Verdict::Allow => b"ok".to_vec(),
        Verdict::Refuse(msg) => format!("refused: {msg}").into_bytes(),
    }
}

impl<L: Layer> Core<L> {
    /// True when `name` is the virtual attribute and this layer judges (the share emulator
    /// does not: there the name passes through like any other).
    pub(crate) fn is_verdict_xattr(&self, name: &OsStr) -> bool {
        self.layer.guards() && name.as_bytes() == NAME.as_bytes()
    }

    /// The attribute's value on node `id`, asked by request pid `pid`: ENODATA unless the node
    /// is a lock in a git dir and the caller has a parent (nothing to judge then).
    pub(crate) fn verdict_xattr(&self, id: u64, pid: u32) -> Result<Vec<u8>, Errno> {
        let (class, parent, name) = self.inodes.with(id, |n| (n.class, n.parent, n.name.clone()))?;
        if class != Class::Lock {
            return Err(Errno::ENODATA);
        }
        // The node keeps its lower name: `index.lock` is `index-box.lock`, judged as the
        // lower rename would be (not a ref: `ok`).
        let target = name.as_bytes().strip_suffix(b".lock").ok_or(Errno::ENODATA)?;
        let asker = Proc::parent_of(pid).ok_or(Errno::ENODATA)?;
        let judged = self.commit_verdict(parent, OsStr::from_bytes(target), asker).ok_or(Errno::ENODATA)?;
        tracing::debug!(pid = asker.pid, gitdir = %judged.gitdir.display(), verdict = ?judged.verdict, "verdict asked");
        Ok(value(&judged.verdict))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_say_ok_or_refused_with_the_reason() {
        assert_eq!(value(&Verdict::Allow), b"ok");
        assert_eq!(value(&Verdict::Refuse("refused to move HEAD: x".into())), b"refused: refused to move HEAD: x");
    }
}
