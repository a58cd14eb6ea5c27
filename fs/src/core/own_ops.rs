//! The box's own operation state (`rebase-merge/`, `MERGE_HEAD`... that box git made through
//! seamfs), kept durably in `<gitdir>/index.seam-ops` beside it, so a seamfs restarted during
//! the box's own rebase still knows the rebase is the box's and lets `rebase --continue` move
//! HEAD. One name a line after a first line naming this machine; a record another machine
//! wrote (a second box on the checkout) is not the box's, and names outside `OP_STATE` are
//! ignored. Hidden from the box like every `index.seam-*` name.

use std::io::Write;
use std::path::Path;

use tracing::warn;

use crate::gitdata::{cpath, read_lower};
use crate::judge::verdict::OP_STATE;
use crate::layer::Layer;

use super::held::machine;
use super::Core;

/// The record's name in a git dir.
pub const OWN_OPS: &str = "index.seam-ops";

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
        let Some(bytes) = read_lower(&self.lower, &gitdir.join(OWN_OPS)).ok().flatten() else { return };
        let text = String::from_utf8_lossy(&bytes);
        let mut lines = text.lines();
        if lines.next() != Some(&format!("machine {}", machine())) {
            return;
        }
        for name in lines.filter(|n| OP_STATE.contains(n)) {
            self.judge.tracker.own_op(gitdir, name, true);
        }
    }

    /// Writes the record in place (a torn one names fewer ops: the safe side), or removes it.
    fn save_own_ops(&self, gitdir: &Path) {
        let path = cpath(&gitdir.join(OWN_OPS));
        let ops = self.judge.tracker.own_ops(gitdir);
        if ops.is_empty() {
            let _ = self.lower.unlink(&path, false);
            return;
        }
        let text = format!("machine {}\n{}\n", machine(), ops.join("\n"));
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
