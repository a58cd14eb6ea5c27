//! Where the binaries under test are: `<workspace>/target/<profile>/<name>`.
//!
//! Integration tests run from `target/<profile>/deps/`, so the profile directory is the
//! parent of the test executable's directory. The tests do not build the binaries themselves
//! (a nested cargo would fight the outer one for the target dir's lock).
//!
//! `SEAM_BIN_DIR=<dir>` points the tests at binaries elsewhere (another build or profile).

use std::path::PathBuf;

/// `target/<profile>/`, derived from the running test executable.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the path of the running test executable");
    let deps = exe.parent().expect("the test executable lives in a directory");
    // Integration tests are in target/<profile>/deps; a binary run directly is in target/<profile>.
    if deps.file_name().is_some_and(|n| n == "deps") {
        deps.parent().expect("deps/ has a parent").to_path_buf()
    } else {
        deps.to_path_buf()
    }
}

/// Where the binaries are looked up: `$SEAM_BIN_DIR`, or the profile directory.
pub fn bin_dir() -> PathBuf {
    match std::env::var_os("SEAM_BIN_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => profile_dir(),
    }
}

/// The path of binary `name`; panics when it was not built.
pub fn bin(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    if !p.is_file() {
        panic!(
            "{} not found at {}: run `cargo build` first (the e2e tests use the built binaries; \
             for a release test run, `cargo build --release`)",
            name,
            p.display()
        );
    }
    p
}

/// The seamfs binary.
pub fn seamfs() -> PathBuf {
    bin("seamfs")
}

/// The lab binary (`seam-lab share ...` is the share emulator).
pub fn seam_lab() -> PathBuf {
    bin("seam-lab")
}

/// The hook shim (`seam-git`).
pub fn seam_git() -> PathBuf {
    bin("seam-git")
}

/// True when the lab binary has been built (tests that need the emulator may skip without it).
pub fn seam_lab_available() -> bool {
    bin_dir().join("seam-lab").is_file()
}
