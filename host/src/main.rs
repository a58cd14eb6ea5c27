//! `seamd`, the host daemon: a thin CLI over the `seamd` library.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand};

use seamd::doctor::{self, doctor, DoctorOptions, Level};
use seamd::gitdirs::Checkout;
use seamd::run::{run, RunOptions};

/// seamd: the host side of seamfs. It never starts a process (no git) and never follows a link
/// out of the checkout.
///
/// Exit codes: 0 success (doctor: nothing to warn about); 1 doctor found something to look at;
/// 2 bad arguments; 3 the checkout cannot be used (not openable, `.git` missing, a file or a
/// link); 4 run hit an I/O error or could not restore an index (the log line says which).
#[derive(Parser, Debug)]
#[command(version = env!("SEAM_VERSION"), about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Install healed index proposals in CHECKOUT's git dirs, pass after pass.
    #[command(after_help = "Exit codes: 0 stopped by a signal, or --once with nothing left to look at; 2 bad \
                            arguments; 3 the checkout cannot be used; 4 an I/O error, or --once left something \
                            that needs attention (the log line says which).")]
    Run {
        /// The host's main checkout.
        checkout: PathBuf,
        /// One pass, then exit.
        #[arg(long)]
        once: bool,
        /// Milliseconds between passes.
        #[arg(long, default_value_t = 250, value_parser = clap::value_parser!(u64).range(10..=600_000))]
        interval_ms: u64,
        /// Also serve the change feed at ADDR: unix:PATH or vsock:CID:PORT (listened on), or a
        /// character device path (written to). The boxes' seamfs mounts take `--feed`.
        #[arg(long, value_name = "ADDR")]
        feed: Option<seamfs::feed::FeedAddr>,
    },
    /// Report the checkout's cross-kernel state: proposals, autostashes, old locks, index-box.
    #[command(after_help = "Exit codes: 0 nothing to warn about; 1 a row to look at (warn or worse); 2 bad \
                            arguments; 3 the checkout cannot be used.")]
    Doctor {
        /// The host's main checkout.
        checkout: PathBuf,
        /// Report lock files older than this many seconds.
        #[arg(long, default_value_t = 60)]
        lock_age_s: u64,
        /// One JSON document: {"tool", "path", "worst", "rows": [{"kind", "severity", "at",
        /// "found", "recovery"}]} (docs/box-setup.md, "Doctor output").
        #[arg(long)]
        json: bool,
    },
    /// What seamfs parked before box processes destroyed it: list (newest first), restore, prune.
    /// Runs no git and writes nothing outside CHECKOUT.
    #[command(after_help = "Exit codes: 0 done; 1 refused or failed (the message names the path and the next step); 2 bad arguments.")]
    Parked(seamfs::park::cli::HostParkedArgs),
}

const EXIT_FINDINGS: u8 = 1;
const EXIT_CHECKOUT: u8 = 3;
const EXIT_IO: u8 = 4;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// SIGTERM/SIGINT/SIGHUP end `run` between installs, so no lock is left behind.
fn stop_on_signals() {
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { libc::signal(sig, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t) };
    }
}

fn open(path: &std::path::Path) -> Result<Checkout, ExitCode> {
    Checkout::open(path).map_err(|e| {
        eprintln!("seamd: {e}");
        ExitCode::from(EXIT_CHECKOUT)
    })
}

fn main() -> ExitCode {
    if let Some(code) = seam_clidoc::intercept(&std::env::args_os().collect::<Vec<_>>(), Cli::command) {
        return ExitCode::from(code as u8);
    }
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Run { checkout, once, interval_ms, feed } => {
            let c = match open(&checkout) {
                Ok(c) => c,
                Err(code) => return code,
            };
            stop_on_signals();
            if let Some(addr) = feed {
                seamd::feed::ignore_sigpipe();
                if let Err(e) = seamd::feed::serve(&checkout, &addr, &STOP, |line| eprintln!("seamd: {line}")) {
                    eprintln!("seamd: change feed {addr} for {}: {e}", checkout.display());
                    return ExitCode::from(EXIT_IO);
                }
            }
            let opts = RunOptions { interval: Duration::from_millis(interval_ms), once, ..Default::default() };
            let report = run(&c, &opts, &STOP, &mut |line| eprintln!("seamd: {line}"));
            if once && report.needs_attention() {
                ExitCode::from(EXIT_IO)
            } else {
                ExitCode::SUCCESS
            }
        }
        Cmd::Doctor { checkout, lock_age_s, json } => {
            let c = match open(&checkout) {
                Ok(c) => c,
                Err(code) => return code,
            };
            let rows = doctor(&c, DoctorOptions { lock_age: Duration::from_secs(lock_age_s) });
            if json {
                println!("{}", doctor::json(&c.path, &rows));
            } else {
                print!("{}", doctor::human(&rows));
            }
            if rows.iter().any(|r| r.severity >= Level::Warn) {
                ExitCode::from(EXIT_FINDINGS)
            } else {
                ExitCode::SUCCESS
            }
        }
        Cmd::Parked(a) => ExitCode::from(seamfs::park::cli::host_main(&a) as u8),
    }
}
