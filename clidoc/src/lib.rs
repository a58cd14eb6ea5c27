//! Man pages and shell completions from a binary's own clap definition, so the binary's CLI
//! has one definition. `BIN generate man DIR` and `BIN generate completions SHELL DIR` are
//! taken before the binary's own parser sees them ([`intercept`]), so they stay out of its
//! help, pages and completions. `dist/man/` and `dist/completions/` are their output, checked
//! for staleness by the e2e test `clidoc`.

use std::ffi::OsString;

use std::path::{Path, PathBuf};

use clap::Command;
use clap_complete::Shell;

/// `BIN generate ...`: for packagers and the staleness test, not for users.
#[derive(clap::Parser, Debug)]
struct GenerateCli {
    #[command(subcommand)]
    what: Generate,
}

/// What `BIN generate` writes.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum Generate {
    /// Man pages into DIR: BIN.1 and BIN-SUBCOMMAND.1 for each subcommand.
    Man {
        /// The directory to write into (must exist).
        dir: PathBuf,
    },
    /// SHELL's completion script into DIR (bash: BIN.bash, zsh: _BIN, fish: BIN.fish).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: Shell,
        /// The directory to write into (must exist).
        dir: PathBuf,
    },
}

/// The shells whose scripts `dist/completions/` ships.
pub const SHIPPED_SHELLS: [Shell; 3] = [Shell::Bash, Shell::Zsh, Shell::Fish];

/// Writes what `what` asks for from `cmd` (the binary's `Cli::command()`); returns the files
/// written. The version is the crate's alone: `--version` names the commit, which would make
/// every shipped page stale at the next commit.
pub fn run(what: &Generate, cmd: Command) -> Result<Vec<PathBuf>, String> {
    let version = cmd.get_version().map(|v| v.split_whitespace().next().unwrap_or_default().to_string());
    let mut cmd = match version {
        // Once per process: a leaked string is the simplest 'static clap accepts without its
        // `string` feature.
        Some(v) => cmd.version(&*Box::leak(v.into_boxed_str())),
        None => cmd,
    };
    let name = cmd.get_name().to_string();
    match what {
        Generate::Man { dir } => {
            clap_mangen::generate_to(cmd, dir).map_err(|e| format!("write man pages into {}: {e}", dir.display()))?;
            Ok(listing(dir)?.into_iter().filter(|p| is_page_of(p, &name)).collect())
        }
        Generate::Completions { shell, dir } => {
            let path = clap_complete::generate_to(*shell, &mut cmd, &name, dir)
                .map_err(|e| format!("write {shell} completions for {name} into {}: {e}", dir.display()))?;
            Ok(vec![path])
        }
    }
}

/// When `args` (the whole argv) is `BIN generate ...`: writes what it asks for from `cmd()`
/// and returns the exit code (0, 1 when a file cannot be written, 2 bad arguments), the files
/// written on stdout. `None` for any other command line.
pub fn intercept(args: &[OsString], cmd: impl FnOnce() -> Command) -> Option<i32> {
    if args.get(1).is_none_or(|a| a != "generate") {
        return None;
    }
    let cmd = cmd();
    let name = cmd.get_name().to_string();
    let parsed = <GenerateCli as clap::CommandFactory>::command()
        .bin_name(format!("{name} generate"))
        .no_binary_name(true)
        .try_get_matches_from(&args[2..])
        .and_then(|m| <GenerateCli as clap::FromArgMatches>::from_arg_matches(&m));
    match parsed {
        Ok(g) => Some(generate_main(&g.what, cmd)),
        Err(e) => {
            let _ = e.print();
            Some(e.exit_code())
        }
    }
}

fn generate_main(what: &Generate, cmd: Command) -> i32 {
    let name = cmd.get_name().to_string();
    match run(what, cmd) {
        Ok(files) => {
            for f in files {
                println!("{}", f.display());
            }
            0
        }
        Err(e) => {
            eprintln!("{name}: {e}");
            1
        }
    }
}

/// True for `NAME.1` and `NAME-*.1`: the pages one binary owns in a shared directory.
pub fn is_page_of(path: &Path, name: &str) -> bool {
    path.file_name().and_then(|f| f.to_str()).and_then(|f| f.strip_suffix(".1")).is_some_and(|stem| {
        stem == name || stem.strip_prefix(name).is_some_and(|rest| rest.starts_with('-'))
    })
}

fn listing(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let rd = std::fs::read_dir(dir).map_err(|e| format!("read directory {}: {e}", dir.display()))?;
    let mut out: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    out.sort();
    Ok(out)
}
