//! `seam-lab bench`: how much slower git feels through seamfs than through the raw share, next
//! to native disk and the peer FUSE layers, all in one run.
//!
//! - [`gen`]: generated repos (cached by parameters) and the big file.
//! - `layers`: native, the share emulator, seamfs (with and without the index split), bindfs and
//!   fuse-overlayfs, each over its own copy and its own share mount; `fast` (the fast share alone,
//!   ADR 0024) and `seamfs-fast` (seamfs over its own fast-share mount).
//! - `workloads`: the timed git commands and reads, each leaving the repo as it found it.
//! - `runner`: interleaves layers (order rotated each run) and samples seamfs's RSS.
//! - `report`, `svg`: report.md, report.json, ratios.svg.
//! - [`small`]: `seam-lab small`, everyday commands in fresh repositories, per command.

pub mod gen;
pub(crate) mod layers;
mod peers;
mod procfs;
mod report;
mod results;
mod runner;
pub mod park;
pub mod small;
mod svg;
mod workloads;

use std::path::{Path, PathBuf};

pub use layers::LayerKind;
pub use workloads::Workload;

use crate::lab::cleanup::{is_stopping, on_signal_cleanup, CleanupGuard};
use crate::lab::mounts::seamfs_bin;
use crate::lab::LabError;
use results::BenchReport;

/// `seam-lab bench` options.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Files in the generated repo; several sizes separated by commas (e.g. 20000,100000).
    #[arg(long, value_delimiter = ',', default_value = "20000")]
    pub files: Vec<usize>,
    /// Layers to measure, separated by commas.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "native,share,seamfs,seamfs-nosplit,bindfs,fuse-overlayfs"
    )]
    pub layers: Vec<LayerKind>,
    /// Workloads to run, separated by commas (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub workloads: Vec<Workload>,
    /// Runs of every workload on every layer.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Print the JSON report on stdout instead of the markdown table.
    #[arg(long)]
    pub json: bool,
    /// Where to write report.md, report.json and ratios.svg.
    #[arg(long, default_value = "seam-bench-report")]
    pub out: PathBuf,
    /// Entry/attr/negative TTL of the share emulator, and the TTL given to every layer above it.
    #[arg(long, default_value_t = 1.0)]
    pub ttl: f64,
    /// Size of the big sequentially-read file, in MiB.
    #[arg(long, default_value_t = 1024)]
    pub big_mib: usize,
    /// Drop the page cache before each read workload (measures the disk; affects the whole
    /// machine). Default: warm cache.
    #[arg(long)]
    pub drop_caches: bool,
    /// Seed of the generated repo.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Runs the bench; the process exit code (0, or 1 when it failed, 2 for bad arguments).
pub fn main(args: BenchArgs) -> i32 {
    if let Err(e) = check_args(&args) {
        eprintln!("seam-lab bench: {e}");
        return 2;
    }
    // Before any other thread: the signal thread unmounts everything on Ctrl-C.
    on_signal_cleanup();
    let cleanup = CleanupGuard;
    let result = run(&args);
    if is_stopping() {
        // The signal thread is unmounting and removing everything, then exits 130; what failed
        // here failed because of that.
        loop {
            std::thread::park();
        }
    }
    // Say what failed before the (slow, with many files) unmounts and removals.
    if let Err(e) = &result {
        eprintln!("seam-lab bench: {e}");
        eprintln!("[bench] unmounting and removing the copies");
    }
    drop(cleanup);
    if result.is_ok() {
        0
    } else {
        1
    }
}

/// Bad arguments, as "--flag: why".
fn check_args(a: &BenchArgs) -> Result<(), String> {
    if a.runs == 0 {
        return Err("--runs: must be at least 1".into());
    }
    if a.files.iter().any(|&n| !(100..=1_000_000).contains(&n)) {
        return Err("--files: each size must be between 100 and 1,000,000".into());
    }
    if !(0.0..=60.0).contains(&a.ttl) {
        return Err("--ttl: must be between 0 and 60 seconds".into());
    }
    if a.big_mib == 0 {
        return Err("--big-mib: must be at least 1".into());
    }
    if a.layers.is_empty() {
        return Err("--layers: name at least one layer".into());
    }
    Ok(())
}

fn run(args: &BenchArgs) -> Result<(), LabError> {
    seamfs_bin()?;
    let mut notes = Vec::new();
    let mut layers: Vec<LayerKind> = LayerKind::ALL.iter().copied().filter(|l| args.layers.contains(l)).collect();
    layers.retain(|l| match l.package() {
        Some((program, package)) => match peers::ensure(program, package) {
            Ok(()) => true,
            Err(note) => {
                eprintln!("[bench] {note}");
                notes.push(note);
                false
            }
        },
        None => true,
    });
    let workloads: Vec<Workload> = if args.workloads.is_empty() {
        Workload::ALL.to_vec()
    } else {
        Workload::ALL.iter().copied().filter(|w| args.workloads.contains(w)).collect()
    };
    let mut report = BenchReport {
        runs: args.runs,
        ttl: args.ttl,
        big_mib: args.big_mib,
        drop_caches: args.drop_caches,
        machine: machine(),
        notes,
        sizes: Vec::new(),
    };
    for &files in &args.files {
        report.sizes.push(runner::bench_size(args, files, &layers, &workloads)?);
        // Unmount and delete this size's copies before the next size makes its own.
        crate::lab::cleanup::cleanup_all();
    }
    write_reports(&report, &args.out)?;
    if args.json {
        print!("{}", report::json(&report));
    } else {
        print!("{}", report::markdown(&report));
    }
    eprintln!("[bench] report in {}", args.out.display());
    Ok(())
}

fn write_reports(r: &BenchReport, out: &Path) -> Result<(), LabError> {
    std::fs::create_dir_all(out).map_err(|e| LabError::new("create dir", out, e))?;
    let write = |name: &str, text: &str| {
        let p = out.join(name);
        std::fs::write(&p, text).map_err(|e| LabError::new("write", &p, e))
    };
    write("report.md", &report::markdown(r))?;
    write("report.json", &report::json(r))?;
    for (i, z) in r.sizes.iter().enumerate() {
        let Some(svg) = svg::ratios_svg(z, r.ttl) else { continue };
        // ratios.svg is the first size; every size also gets its own file.
        if i == 0 {
            write("ratios.svg", &svg)?;
        }
        write(&format!("ratios-{}.svg", z.files), &svg)?;
    }
    Ok(())
}

/// Kernel release and CPU count, for the report header.
fn machine() -> String {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into());
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let git = std::process::Command::new("git")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|_| "git ?".into());
    format!("Linux {kernel}, {cpus} CPUs, {git}")
}
