//! POSIX parity: every operation gives the same result and errno through seamfs as on the
//! backing directory.
//!
//! Each case is a function run twice against a fresh directory: once on the backing dir
//! (the reference: the kernel's own filesystem) and once through the mount. Each records a
//! trace of `(step, outcome)`, where an outcome is an `Ok` rendering (only what must be equal:
//! no inode numbers, devices or unset times) or an errno name. The traces must be equal, and
//! the two trees must end up equal on the backing dir. Every case runs with FUSE passthrough
//! and with `--no-passthrough`, one test each.

mod data;
mod deep;
mod meta;
mod names;
mod trace;

use seam_tests::mount::mode_name;
use seam_tests::{listing, sys, Mount, TempDir};
use trace::Trace;

/// FUSE's `f_type`.
const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;

/// Runs `case` on the backing dir and through a seamfs mount started with `extra`, and
/// panics with a side-by-side table when the traces or the resulting trees differ.
fn compare(name: &str, case: fn(&std::path::Path, &mut Trace), extra: &[&str]) {
    let backing = TempDir::new(&format!("posix-{name}-backing"));
    let mnt = TempDir::new(&format!("posix-{name}-mnt"));
    let native = backing.subdir("native");
    backing.subdir("viafs");
    let m = Mount::seamfs(backing.path(), mnt.path(), extra);
    let via = m.join("viafs");

    // The comparison means nothing unless the second run really goes through FUSE, in the
    // mode asked for.
    let fs = sys::statfs(&via).expect("statfs through the mount");
    assert_eq!(fs.f_type as i64, FUSE_SUPER_MAGIC, "{} is not served by FUSE", via.display());
    let want = if extra.contains(&"--no-passthrough") { "passthrough=false" } else { "passthrough=true" };
    assert!(m.log().contains(want), "the daemon's init line should say {want}; log:\n{}", m.log());

    let mut reference = Trace::default();
    case(&native, &mut reference);
    let mut through = Trace::default();
    case(&via, &mut through);
    assert!(reference.len() > 2, "case {name} recorded almost nothing: {reference:?}");

    if let Some(table) = Trace::diff(&reference, &through) {
        panic!("posix case `{name}` ({}) differs through seamfs:\n{table}", mode_name(extra));
    }
    // What the mount did must be what landed on the lower.
    let (a, b) = (listing::walk(&native), listing::walk(&backing.join("viafs")));
    assert_eq!(a, b, "case {name}: the tree made through seamfs differs on the backing dir");
    m.unmount();
}

/// One test per case and mode: `posix::passthrough::<case>`, `posix::no_passthrough::<case>`.
macro_rules! cases {
    ($($module:ident :: $case:ident),* $(,)?) => {
        mod passthrough {
            $( #[test] fn $case() { super::compare(stringify!($case), super::$module::$case, &[]) } )*
        }
        mod no_passthrough {
            $( #[test] fn $case() { super::compare(stringify!($case), super::$module::$case, &["--no-passthrough"]) } )*
        }
    };
}

cases!(
    meta::lookup_stat,
    meta::chmod,
    meta::chown,
    meta::truncate,
    meta::utimens,
    meta::access,
    meta::statfs,
    meta::xattrs,
    names::symlink_readlink,
    names::mknod_fifo,
    names::mkdir,
    names::unlink,
    names::rmdir,
    names::rename,
    names::rename_noreplace,
    names::rename_exchange,
    names::link,
    names::readdir,
    data::open_create_excl,
    data::read_write,
    data::fsync_fsyncdir,
    data::fallocate,
    data::seek_data_hole,
    data::copy_file_range,
    data::open_twice,
    data::unlink_while_open,
    data::gone_while_open_by_fd,
    deep::deep_paths,
);
