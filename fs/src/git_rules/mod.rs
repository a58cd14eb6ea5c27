//! What seamfs does for git at the passthrough's operations, kept out of `core` so the core is
//! the passthrough alone: judging locks and ref moves (`guard`), the heal sealed to a ref move
//! (`heal_seal`) and the shared index lock it takes before the box's ref locks (`heal_lock`),
//! the reverse heal started at a process's first look at HEAD (`heal_early`), the kernel's
//! negative entry for a missing `packed-refs` and the waits that keep it harmless
//! (`missing_packed_refs`),
//! the box's own index (`index_split`), `.git` files naming git dirs elsewhere (`dotgit`), the
//! ref-store directories a lock need not refresh again (`ref_dirs`), the
//! `user.seamfs.verdict` attribute (`verdict_xattr`), the durable records of the locks seamfs
//! holds (`held`) and of the box's own operation state (`own_ops`).
//!
//! Each is an `impl Core` block the core calls at a named point (a lookup, a create, a rename,
//! a getxattr); none of them answers a FUSE request on its own.

mod dotgit;
mod guard;
mod heal_early;
mod heal_lock;
mod heal_seal;
mod heal_watch;
pub(crate) mod held;
mod index_split;
pub(crate) mod missing_packed_refs;
mod own_ops;
mod ref_dirs;
mod verdict_xattr;
