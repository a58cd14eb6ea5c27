//! `seam-git`: a thin CLI over the `seam_git` library. Run by git as a hook (through a link
//! named after the hook, in the dir `core.hooksPath` names) or as `seam-git hook NAME ARGS`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::exit;

use clap::{CommandFactory, Parser, Subcommand};

use seam_git::hook::{self, EXIT_USAGE};
use seam_git::{install, is_hook, HOOKS};

/// seam-git: a hook shim for git's core.hooksPath in a seamfs box. As reference-transaction, in
/// the `prepared` state, it asks seamfs whether each ref move would be refused and, if so,
/// prints seamfs's reason and fails, so git aborts the transaction. Every hook it runs as then
/// runs the repository's own hook of that name (same arguments, input and environment).
///
/// Install: `seam-git install-hooks DIR && git config --global core.hooksPath DIR`.
///
/// Exit codes (as a hook): 0 ok; 1 refused (the reason is on stderr); 2 bad arguments or no
/// usable git dir; 126 the repository's hook could not be run; any other: the repository's
/// hook's (128+N when a signal N ended it). install-hooks: 0 done; 1 something is in the way
/// or a filesystem call failed (the message names the path); 2 bad arguments.
#[derive(Parser, Debug)]
#[command(version = env!("SEAM_VERSION"), about, long_about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Create DIR (for core.hooksPath) with a link to this binary for every hook git runs by
    /// name; links already there are kept, anything else there is refused.
    #[command(after_help = "Exit codes: 0 done; 1 something is in the way or a filesystem call failed (the \
                            message names the path); 2 bad arguments.")]
    InstallHooks {
        /// The hooks dir (made absolute: git resolves a relative core.hooksPath per repository).
        dir: PathBuf,
        /// The binary the links point to [default: this one]; name the installed copy when
        /// running from a build tree.
        #[arg(long)]
        exe: Option<PathBuf>,
    },
    /// Run as hook NAME with git's arguments (what a link named NAME does).
    #[command(after_help = "Exit codes: 0 ok; 1 refused (the reason is on stderr); 2 bad arguments or no usable \
                            git dir; 126 the repository's hook could not be run; any other: the repository's \
                            hook's (128+N when a signal N ended it).")]
    Hook {
        /// The hook's name, e.g. reference-transaction.
        name: String,
        /// The arguments git passes to the hook.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
}

fn me() -> PathBuf {
    std::env::current_exe().unwrap_or_else(|e| {
        eprintln!("seam-git: could not find this binary's path (/proc/self/exe): {e}");
        exit(EXIT_USAGE)
    })
}

/// `install-hooks`: an absolute dir, links to an absolute binary, and the config line to run.
fn install_hooks(dir: &std::path::Path, exe: Option<PathBuf>) {
    let absolute = |p: &std::path::Path| {
        std::path::absolute(p).unwrap_or_else(|e| {
            eprintln!("seam-git: could not make {} absolute: {e}", p.display());
            exit(EXIT_USAGE)
        })
    };
    let (dir, exe) = (absolute(dir), absolute(&exe.unwrap_or_else(me)));
    if exe.components().any(|c| c.as_os_str() == "target") {
        eprintln!("seam-git: note: the links point to {}, a build tree's binary; pass --exe with the installed one", exe.display());
    }
    match install::install_hooks(&dir, &exe, HOOKS) {
        Ok(made) => {
            eprintln!("seam-git: {} ready ({made} links made to {}); now:", dir.display(), exe.display());
            println!("git config --system core.hooksPath {}", dir.display());
        }
        Err(e) => {
            eprintln!("seam-git: {e}");
            exit(1)
        }
    }
}

fn main() {
    // Git runs the link by its hook name and passes the hook's own arguments: no CLI parsing.
    let argv0 = std::env::args_os().next().unwrap_or_default();
    let called = PathBuf::from(argv0).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if is_hook(&called) {
        // As bytes: a hook's argument may be a path that is not UTF-8.
        let args: Vec<OsString> = std::env::args_os().skip(1).collect();
        exit(hook::run(&called, &args, &me()));
    }
    if let Some(code) = seam_clidoc::intercept(&std::env::args_os().collect::<Vec<_>>(), Cli::command) {
        exit(code);
    }
    match Cli::parse().cmd {
        Cmd::InstallHooks { dir, exe } => install_hooks(&dir, exe),
        Cmd::Hook { name, args } => {
            if !is_hook(&name) {
                eprintln!("seam-git: {name:?} is not a hook git runs (known: {})", HOOKS.join(", "));
                exit(EXIT_USAGE)
            }
            exit(hook::run(&name, &args, &me()))
        }
    }
}
