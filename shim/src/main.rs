//! `seam-git`, the reference-transaction shim. Not implemented yet: it arrives with the
//! ref-move issue; until then it refuses to pretend.

use clap::Parser;

/// seam-git: a thin shim for git's hook path (reference-transaction), delegating to the repo's
/// own hooks.
///
/// Exit codes: 2 bad arguments; 70 not implemented yet.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    /// The hook name git runs (e.g. reference-transaction).
    hook: Option<String>,
    /// Arguments git passes to the hook.
    args: Vec<String>,
}

fn main() {
    let _cli = Cli::parse();
    eprintln!("seam-git: not implemented yet (it arrives with the ref-move issue); nothing was done");
    std::process::exit(70);
}
