//! The box's own operation state (`rebase-merge/`, `MERGE_HEAD`... that box git made through
//! seamfs), kept durably in `<gitdir>/index-box.<id>.seam-ops` beside it, so a seamfs restarted
//! during the box's own rebase still knows the rebase is the box's and lets `rebase --continue`
//! move HEAD. One record per box: another box's rebase is the other side's, as the host's is
//! (ADR 0028). One name a line after a first line naming the box; names outside `OP_STATE`
//! are ignored. An older seamfs's `index.seam-ops` (one per machine) is read when this box has
//! no record of its own yet, and removed at the next save. Hidden from the box.

use std::io::Write;
use std::path::Path;

use tracing::warn;

use crate::gitdata::{cpath, read_lower};
use crate::judge::verdict::OP_STATE;
use crate::layer::Layer;

use super::held::machine;
use crate::core::Core;
use crate::index::names::LEGACY_OWN_OPS;

impl<L: Layer> Core<L> {
    /// Records that the box made (`present`) or removed operation state `name` in `gitdir`.
    pub(crate) fn set_own_op(&self, gitdir: &Path, name: &str, present: bool) {
        self.load_own_ops(gitdir);
        self.judge.tracker.own_op(gitdir, name, present);
        self.save_own_ops(gitdir);
    }

    /// The box's own operation state in `gitdir`, read from its record after a restart.
    pub(crate) fn own_ops(&self, gitdir: &Path) -> Vec<String> {
        self.load_own_ops(gitdir);
        self.judge.tracker.own_ops(gitdir)
    }

    fn load_own_ops(&self, gitdir: &Path) {
        if self.judge.tracker.knows_own_ops(gitdir) {
            return;
        }
        self.judge.tracker.know_own_ops(gitdir);
        let read = |name: &str| read_lower(&self.lower, &gitdir.join(name)).ok().flatten();
        let (bytes, first) = match read(self.layer.names().own_ops()) {
            Some(b) => (b, self.own_ops_header()),
            None => match read(LEGACY_OWN_OPS) {
                Some(b) => (b, format!("machine {}", machine())),
                None => return,
            },
        };
        let text = String::from_utf8_lossy(&bytes);
        let mut lines = text.lines();
        if lines.next() != Some(&first) {
            return;
        }
        for name in lines.filter(|n| OP_STATE.contains(n)) {
            self.judge.tracker.own_op(gitdir, name, true);
        }
    }

    /// The record's first line: the box it belongs to.
    fn own_ops_header(&self) -> String {
        format!("box {}", self.layer.names().id())
    }

    /// Writes the record in place (a torn one names fewer ops: the safe side), or removes it.
    fn save_own_ops(&self, gitdir: &Path) {
        let path = cpath(&gitdir.join(self.layer.names().own_ops()));
        // This box's record replaces the older one this machine wrote (not another machine's).
        let legacy = gitdir.join(LEGACY_OWN_OPS);
        let ours = format!("machine {}\n", machine());
        if read_lower(&self.lower, &legacy).ok().flatten().is_some_and(|b| b.starts_with(ours.as_bytes())) {
            let _ = self.lower.unlink(&cpath(&legacy), false);
        }
        let ops = self.judge.tracker.own_ops(gitdir);
        if ops.is_empty() {
            let _ = self.lower.unlink(&path, false);
            return;
        }
        let text = format!("{}\n{}\n", self.own_ops_header(), ops.join("\n"));
        let written = self.lower.open_at(&path, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC, 0o644).and_then(|fd| {
            let mut f = std::fs::File::from(fd);
            f.write_all(text.as_bytes())?;
            f.sync_all()
        });
        if let Err(e) = written {
            warn!(gitdir = %gitdir.display(), error = %e, "could not record the box's own operation state; after a restart it counts as the other side's");
        }
    }
}
