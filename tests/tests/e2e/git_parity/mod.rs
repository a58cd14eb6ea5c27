//! Git parity: everyday git and shell tools give the same result through seamfs as on the
//! backing directory itself, with no host around.
//!
//! Each case is a list of shell steps run twice in a fresh directory: once on the backing dir
//! (the reference) and once through the mount. Every step's exit status, stdout and stderr
//! (with the directory's path written `$D`) must be equal, and so must the trees as the box
//! sees them (names, kinds and modes). Commit dates are fixed, so object ids are equal too.
//! Every case runs with FUSE passthrough and with `--no-passthrough`.

mod cases;

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use seam_tests::mount::mode_name;
use seam_tests::{listing, run::run, Git, Mount, TempDir};

/// Fixed dates: the same commits get the same ids on both sides.
const DATE: &str = "2005-04-07T22:13:13 +0000";

/// What one step gave.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs each step with `sh -c` in `dir`, in git's clean environment; `$L` is the same
/// directory on the lower (where a step plays the host).
fn play(git: &Git, dir: &Path, lower: &Path, steps: &[&str]) -> Vec<Outcome> {
    let d = dir.to_str().expect("a UTF-8 temp path");
    let l = lower.to_str().expect("a UTF-8 temp path");
    steps
        .iter()
        .map(|step| {
            let mut c = Command::new("sh");
            c.arg("-c").arg(step).current_dir(dir);
            git.env(&mut c);
            c.env("GIT_AUTHOR_DATE", DATE).env("GIT_COMMITTER_DATE", DATE).env("D", d).env("L", l);
            let r = run(&mut c);
            let norm = |s: &str| s.replace(d, "$D").replace(l, "$D");
            Outcome { code: r.code(), stdout: norm(&r.stdout), stderr: norm(&r.stderr) }
        })
        .collect()
}

/// Runs `steps` on the backing dir and through a seamfs mount started with `extra`, and
/// panics with every differing step when they differ. Parking is off: it adds
/// `refs/seam/parked` and its objects on purpose (ADR 0029), and a blob parked a moment before
/// its burst's commit reads as dangling to an `fsck` run at once.
fn compare(name: &str, steps: &[&str], extra: &[&str]) {
    let mut args = extra.to_vec();
    args.push("--no-park");
    compare_on(name, steps, &format!("seamfs, {}", mode_name(extra)), |b, m| Mount::seamfs(b, m, &args))
}

/// `compare` through whatever mount `mount(BACKING, MNT)` starts (`what` names it in reports):
/// the fast share's test runs the same comparison through `seam-lab share --fast`.
pub fn compare_on(name: &str, steps: &[&str], what: &str, mount: impl FnOnce(&Path, &Path) -> Mount) {
    let backing = TempDir::new(&format!("gitp-{name}-backing"));
    let mnt = TempDir::new(&format!("gitp-{name}-mnt"));
    let native = backing.subdir("native");
    backing.subdir("viafs");
    let m = mount(backing.path(), mnt.path());
    let via = m.join("viafs");
    let git = Git::new();

    let want = play(&git, &native, &native, steps);
    let got = play(&git, &via, &backing.join("viafs"), steps);
    let mut report = String::new();
    for ((step, w), g) in steps.iter().zip(&want).zip(&got) {
        if w != g {
            let _ = writeln!(report, "step `{step}`:\n  on the lower:   {w:?}\n  through the mount: {g:?}");
        }
    }
    if !report.is_empty() {
        panic!("git parity case `{name}` differs through the mount ({what}):\n{report}");
    }
    let (a, b) = (stable(listing::walk(&native)), stable(listing::walk(&via)));
    if a != b {
        let only = |x: &[listing::Node], y: &[listing::Node]| -> Vec<String> {
            x.iter().filter(|n| !y.contains(n)).map(|n| format!("{} {} {:o}", n.rel.display(), n.kind, n.mode)).collect()
        };
        panic!(
            "git parity case `{name}` ({what}): the trees differ\n  only on the lower:   {:?}\n  only through the mount: {:?}",
            only(&a, &b),
            only(&b, &a)
        );
    }
    m.unmount();
}

/// A listing without what differs between two equal runs: a reftable table's name ends in a
/// random suffix (`0x...-0x...-<random>.ref`).
fn stable(mut nodes: Vec<listing::Node>) -> Vec<listing::Node> {
    for n in &mut nodes {
        let name = n.rel.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        let in_reftable = n.rel.parent().and_then(|p| p.file_name()).is_some_and(|p| p == "reftable");
        if let (true, Some((stem, _))) = (in_reftable && name.ends_with(".ref"), name.rsplit_once('-')) {
            n.rel.set_file_name(format!("{stem}-*.ref"));
        }
    }
    nodes.sort();
    nodes
}

/// One test per case and mode: `git_parity::passthrough::<case>`, `..::no_passthrough::<case>`.
macro_rules! cases {
    ($($case:ident),* $(,)?) => {
        mod passthrough {
            $( #[test] fn $case() { super::compare(stringify!($case), &super::cases::$case(), &[]) } )*
        }
        mod no_passthrough {
            $( #[test] fn $case() { super::compare(stringify!($case), &super::cases::$case(), &["--no-passthrough"]) } )*
        }
    };
}

cases!(branch_rename, remove_git_dirs, copy_repo_in, porcelain, reftable);
