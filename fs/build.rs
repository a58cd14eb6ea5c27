// Sets `SEAM_VERSION` for `--version`: the crate version and the commit it was built from
// (`+dirty` with tracked changes), or a plain word when not built in a git checkout (a source
// tarball, a vendored copy). Shared by seamd and seam-git (`include!`).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).filter(|c| !c.is_empty());
    let described = match commit {
        Some(c) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
            format!("{version} (commit {c}{})", if dirty { "+dirty" } else { "" })
        }
        None => format!("{version} (commit unknown: not built from a git checkout)"),
    };
    println!("cargo:rustc-env=SEAM_VERSION={described}");
    // Rebuild when the commit moves or tracked files change, not on every build.
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        for f in ["HEAD", "index", "logs/HEAD"] {
            println!("cargo:rerun-if-changed={dir}/{f}");
        }
    }
    println!("cargo:rerun-if-changed=src");
}
