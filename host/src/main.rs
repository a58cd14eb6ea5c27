//! `seamd`, the host daemon. Its work (installing healed indexes, `doctor`) arrives with the
//! healing issue; until then every command says plainly that it is not implemented.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// seamd: the host side of seamfs. It never runs git in the checkout and never follows a link
/// out of it.
///
/// Exit codes: 0 success; 2 bad arguments; 70 the command is not implemented yet.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Install healed index proposals in CHECKOUT (not implemented yet).
    Run {
        /// The host checkout.
        checkout: PathBuf,
    },
    /// Report the checkout's cross-kernel health (not implemented yet).
    Doctor {
        /// The host checkout.
        checkout: PathBuf,
    },
}

fn main() {
    let cli = Cli::parse();
    let name = match cli.cmd {
        Cmd::Run { .. } => "run",
        Cmd::Doctor { .. } => "doctor",
    };
    eprintln!("seamd: `{name}` is not implemented yet (it arrives with the healing issue); nothing was done");
    std::process::exit(70);
}
