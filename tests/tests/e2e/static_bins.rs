//! `cargo build-static` yields binaries for any box: seamfs, seam-git and seamd run in a
//! chroot that holds nothing but them (no libc, no loader), `ldd` calls them not dynamic, and
//! `--version` names the commit they were built from.

use std::path::PathBuf;
use std::process::Command;

use seam_tests::run::run;
use seam_tests::{bins, TempDir};

const NAMES: [&str; 3] = ["seamfs", "seam-git", "seamd"];

/// `target/x86_64-unknown-linux-gnu/release/`, where `cargo build-static` puts them.
fn static_dir() -> PathBuf {
    bins::profile_dir().parent().expect("target/").join("x86_64-unknown-linux-gnu/release")
}

#[test]
fn static_binaries_run_in_an_empty_chroot() {
    let dir = static_dir();
    if let Some(missing) = NAMES.iter().find(|n| !dir.join(n).is_file()) {
        // CI runs `cargo build-static` before the tests (.ci/run); a plain checkout may not.
        eprintln!("SKIPPED static_binaries_run_in_an_empty_chroot: {} is absent: run `cargo build-static` first", dir.join(missing).display());
        return;
    }
    let root = TempDir::new("static-chroot");
    for n in NAMES {
        std::fs::copy(dir.join(n), root.join(n)).unwrap_or_else(|e| panic!("copy {n}: {e}"));
    }
    assert_eq!(std::fs::read_dir(root.path()).expect("list the chroot").count(), NAMES.len(), "the chroot holds only the binaries");
    for n in NAMES {
        assert!(!has_interpreter(&root.join(n)), "{n} names a program interpreter (ld.so): it is dynamic");
        // glibc's ldd says "statically linked" for a static-pie, "not a dynamic executable" for
        // a static non-PIE; either way, no library is listed.
        let ldd = run(Command::new("ldd").arg(root.join(n)));
        let said = format!("{}{}", ldd.stdout, ldd.stderr);
        assert!(said.contains("not a dynamic executable") || said.contains("statically linked"), "{n} is dynamic:\n{ldd}");
        let r = run(Command::new("chroot").arg(root.path()).arg(format!("/{n}")).arg("--version"));
        assert!(r.success(), "{n} --version in an empty chroot:\n{r}");
        let words: Vec<&str> = r.stdout.split_whitespace().collect();
        let commit = words.iter().position(|w| *w == "(commit").and_then(|i| words.get(i + 1)).expect("names a commit");
        let hex = commit.trim_end_matches(')').trim_end_matches("+dirty");
        assert!(hex.len() == 12 && hex.bytes().all(|b| b.is_ascii_hexdigit()), "{n}: `{}` names no commit", r.stdout.trim());
    }
}

/// True when the ELF file has a PT_INTERP program header (64-bit little-endian only).
fn has_interpreter(p: &std::path::Path) -> bool {
    let b = std::fs::read(p).expect("read the binary");
    assert_eq!(&b[..5], b"\x7fELF\x02", "{} is not a 64-bit ELF", p.display());
    let u = |o: usize, n: usize| b[o..o + n].iter().rev().fold(0u64, |a, x| a << 8 | u64::from(*x)) as usize;
    let (phoff, phentsize, phnum) = (u(0x20, 8), u(0x36, 2), u(0x38, 2));
    (0..phnum).any(|i| u(phoff + i * phentsize, 4) == 3)
}

#[test]
fn version_names_the_commit() {
    let head = run(Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).current_dir(env!("CARGO_MANIFEST_DIR")));
    for n in NAMES {
        let r = run(Command::new(bins::bin(n)).arg("--version")).ok();
        if head.success() {
            assert!(r.stdout.contains(&format!("(commit {}", head.stdout.trim())), "{n} --version does not name HEAD {}:\n{r}", head.stdout.trim());
        } else {
            assert!(r.stdout.contains("(commit unknown"), "{r}");
        }
    }
}
