//! The shipped man pages and completions are what the binaries generate from their clap
//! definitions today, and the README's option table is `seamfs mount --help`'s.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use seam_tests::bins;
use seam_tests::run::run;
use seam_tests::TempDir;

const BINS: [&str; 3] = ["seamfs", "seamd", "seam-git"];
const SHELLS: [&str; 3] = ["bash", "zsh", "fish"];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ is in the workspace").to_path_buf()
}

/// Every file in `dir`, by name, with its contents.
fn files(dir: &Path) -> BTreeMap<String, String> {
    let rd = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read directory {}: {e}", dir.display()));
    rd.map(|e| {
        let e = e.expect("a directory entry");
        let text = std::fs::read_to_string(e.path()).unwrap_or_else(|e2| panic!("read {}: {e2}", e.path().display()));
        (e.file_name().to_string_lossy().into_owned(), text)
    })
    .collect()
}

/// `dist/man` and `dist/completions` hold exactly what `BIN generate` writes, file for file.
#[test]
fn shipped_pages_and_completions_are_current() {
    let fresh = TempDir::new("clidoc");
    let (man, comp) = (fresh.path().join("man"), fresh.path().join("completions"));
    std::fs::create_dir(&man).unwrap();
    std::fs::create_dir(&comp).unwrap();
    for b in BINS {
        run(Command::new(bins::bin(b)).arg("generate").arg("man").arg(&man)).ok();
        for sh in SHELLS {
            run(Command::new(bins::bin(b)).args(["generate", "completions", sh]).arg(&comp)).ok();
        }
    }
    let regen = "regenerate: for b in seamfs seamd seam-git; do target/release/$b generate man dist/man; \
                 for sh in bash zsh fish; do target/release/$b generate completions $sh dist/completions; done; done";
    for (fresh_dir, shipped) in [(&man, repo().join("dist/man")), (&comp, repo().join("dist/completions"))] {
        let (want, have) = (files(fresh_dir), files(&shipped));
        let names = |m: &BTreeMap<String, String>| m.keys().cloned().collect::<Vec<_>>();
        assert_eq!(names(&have), names(&want), "{}: the files differ from what the binaries generate; {regen}", shipped.display());
        for (name, text) in &want {
            assert!(have[name] == *text, "{}/{name} is stale; {regen}", shipped.display());
        }
    }
    assert!(files(&man).contains_key("seamfs-mount.1"), "a page per subcommand");
}

/// `generate` is the packagers' tool, not a user command: not in the help, the pages or the
/// completions; a bad directory is named with the operation.
#[test]
fn generate_stays_out_of_the_cli_and_names_a_bad_directory() {
    for b in BINS {
        let help = run(Command::new(bins::bin(b)).arg("--help")).ok();
        assert!(!help.stdout.contains("generate"), "{b} --help shows generate:\n{help}");
        let bad = run(Command::new(bins::bin(b)).args(["generate", "man", "/nonexistent-seam-dir"]));
        assert_eq!(bad.code(), Some(1), "{bad}");
        assert!(bad.stderr.contains("write man pages into /nonexistent-seam-dir"), "{bad}");
        let usage = run(Command::new(bins::bin(b)).args(["generate", "bogus"]));
        assert_eq!(usage.code(), Some(2), "{usage}");
    }
    for (name, text) in files(&repo().join("dist/completions")).into_iter().chain(files(&repo().join("dist/man"))) {
        assert!(!text.contains("generate"), "dist: {name} mentions the hidden generate command");
    }
}

/// `(flag, value name, default)` for each long flag: from `seamfs mount --help` lines such as
/// `      --ttl <S>` followed by a description ending `[default: 1]`.
fn help_flags(help: &str) -> BTreeMap<String, (Option<String>, Option<String>)> {
    let mut out = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in help.lines() {
        let t = line.trim_start();
        let flag_at = t.find("--").filter(|&i| i == 0 || t.starts_with("-h, ") || t[..i].ends_with(", "));
        // Flags sit at most 6 columns in; descriptions (which may mention a flag) further.
        if let (Some(i), true) = (flag_at, line.len() - t.len() <= 6) {
            let mut words = t[i..].split_whitespace();
            let flag = words.next().unwrap().to_string();
            let value = words.next().filter(|w| w.starts_with('<')).map(|w| w.trim_matches(['<', '>']).to_string());
            out.insert(flag.clone(), (value, None));
            current = Some(flag);
        }
        // The short layout has the description (and its default) on the flag's own line.
        if let (Some(f), Some(i)) = (&current, t.find("[default: ")) {
            let d = t[i + "[default: ".len()..].split(']').next().unwrap().to_string();
            out.get_mut(f).unwrap().1 = Some(d);
        }
    }
    out.remove("--help");
    out
}

/// The same from the README table under "Every option has one name": the first column's
/// `` `--flag VALUE` `` and the last column.
fn readme_flags(readme: &str) -> BTreeMap<String, (Option<String>, String)> {
    let table = readme.split("| flag | `-o` (mount(8), fstab) |").nth(1).expect("README has the option table");
    let mut out = BTreeMap::new();
    for row in table.lines().skip(2).take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
        let first = cells[0].trim_matches('`');
        let mut words = first.split_whitespace();
        let flag = words.next().unwrap().to_string();
        out.insert(flag, (words.next().map(String::from), cells.last().unwrap().to_string()));
    }
    out
}

/// The README's option table names the flags `seamfs mount --help` has, with the same value
/// names, and the defaults `--help` shows.
#[test]
fn readme_option_table_matches_mount_help() {
    let help = run(Command::new(bins::seamfs()).args(["mount", "--help"])).ok().stdout;
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("read README.md");
    let (h, r) = (help_flags(&help), readme_flags(&readme));
    assert!(h.len() >= 10, "parsed too few flags from seamfs mount --help:\n{help}\n{h:?}");
    assert_eq!(h.keys().collect::<Vec<_>>(), r.keys().collect::<Vec<_>>(), "README option table vs seamfs mount --help");
    for (flag, (value, default)) in &h {
        let (r_value, r_default) = &r[flag];
        assert_eq!(value, r_value, "{flag}: value name in --help vs README");
        if let Some(d) = default {
            assert_eq!(d, r_default, "{flag}: default in --help vs README");
        }
    }
}

/// Every command's `--help` says what its exit codes mean (the pages carry the same text).
#[test]
fn every_help_names_its_exit_codes() {
    let commands: [&[&str]; 10] = [
        &["seamfs"],
        &["seamfs", "mount"],
        &["seamfs", "umount"],
        &["seamfs", "doctor"],
        &["seamd"],
        &["seamd", "run"],
        &["seamd", "doctor"],
        &["seam-git"],
        &["seam-git", "install-hooks"],
        &["seam-git", "hook"],
    ];
    for c in commands {
        let help = run(Command::new(bins::bin(c[0])).args(&c[1..]).arg("--help")).ok();
        assert!(help.stdout.contains("Exit codes"), "{} --help says nothing of exit codes:\n{help}", c.join(" "));
    }
}
