//! `seam-lab park`: what parking (ADR 0029) costs the box commands it watches: `git checkout
//! -- .` over many host-modified files (each one read and kept) and `rm -rf` of a large ignored
//! tree (each unlink asked, none read), on two seamfs mounts of one backing dir that differ only
//! in `--no-park`. seamfs sits on the backing dir itself, so the figures are parking's own cost,
//! not a share's.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::lab::cleanup::{is_stopping, on_signal_cleanup, temp_dir, unmount_now, CleanupGuard};
use crate::lab::git::{git, git_cmd};
use crate::lab::mounts::mount_seamfs_with;
use crate::lab::LabError;
use crate::vm::bench::median;

/// `seam-lab park` options.
#[derive(clap::Args, Debug, Clone)]
pub struct ParkArgs {
    /// Runs per mode (modes alternate); medians are over runs.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Tracked files the host modifies before each `git checkout -- .`.
    #[arg(long, default_value_t = 1000)]
    pub modified: usize,
    /// Files in the ignored tree removed by `rm -rf`.
    #[arg(long, default_value_t = 20_000)]
    pub ignored: usize,
}

/// Runs `seam-lab park`; the process exit code.
pub fn main(args: ParkArgs) -> i32 {
    if args.runs == 0 || args.modified == 0 || args.ignored == 0 {
        eprintln!("seam-lab park: --runs, --modified and --ignored must each be at least 1");
        return 2;
    }
    on_signal_cleanup();
    let cleanup = CleanupGuard;
    let result = run(&args);
    drop(cleanup);
    match result {
        Ok(table) => {
            print!("{table}");
            0
        }
        Err(e) => {
            eprintln!("seam-lab park: {e}");
            1
        }
    }
}

const MODES: [(&str, &[&str]); 2] = [("no-park", &["--no-park"]), ("park", &[])];

fn run(a: &ParkArgs) -> Result<String, LabError> {
    let root = temp_dir("seam-park")?;
    let backing = root.join("backing");
    let repo = backing.join("repo");
    std::fs::create_dir_all(repo.join("src")).map_err(|e| LabError::new("create dir", &repo, e))?;
    git(&repo, &["init", "-q", "-b", "main"])?;
    for i in 0..a.modified {
        write(&repo.join(format!("src/f{i:05}.txt")), &format!("base {i}\n"))?;
    }
    write(&repo.join(".gitignore"), "build/\n")?;
    git(&repo, &["add", "-A"])?;
    git(&repo, &["commit", "-q", "-m", "base"])?;
    let mut mnts = Vec::new();
    for (name, extra) in MODES {
        let mnt = root.join(format!("mnt-{name}"));
        std::fs::create_dir(&mnt).map_err(|e| LabError::new("create dir", &mnt, e))?;
        let mut args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        args.extend(["--log".into(), root.join(format!("{name}.log")).display().to_string()]);
        mount_seamfs_with(&backing, &mnt, &args)?;
        mnts.push((name, mnt));
    }
    let mut checkout = vec![Vec::new(); MODES.len()];
    let mut rm = vec![Vec::new(); MODES.len()];
    for run in 0..a.runs {
        for (m, (name, mnt)) in mnts.iter().enumerate() {
            if is_stopping() {
                return Err(LabError::new("run", &root, "interrupted"));
            }
            eprintln!("[park] run {}/{} {name}", run + 1, a.runs);
            checkout[m].push(time_checkout(&repo, &mnt.join("repo"), a.modified, run)?);
            // Let the burst's commit land before the next timing.
            std::thread::sleep(Duration::from_millis(1500));
            rm[m].push(time_rm(&repo, &mnt.join("repo"), a.ignored)?);
        }
    }
    for (_, mnt) in &mnts {
        unmount_now(mnt)?;
    }
    let _ = std::fs::remove_dir_all(&root);
    Ok(table(a, &checkout, &rm))
}

fn write(p: &Path, text: &str) -> Result<(), LabError> {
    std::fs::write(p, text).map_err(|e| LabError::new("write", p, e))
}

/// The host modifies every tracked file; the box times `git checkout -- .`.
fn time_checkout(host: &Path, boxed: &Path, n: usize, run: usize) -> Result<f64, LabError> {
    for i in 0..n {
        write(&host.join(format!("src/f{i:05}.txt")), &format!("host edit {i} run {run}\n"))?;
    }
    let t = Instant::now();
    let out = git_cmd(boxed).args(["checkout", "--", "."]).output().map_err(|e| LabError::new("run git checkout", boxed, e))?;
    let secs = t.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(LabError::new("git checkout -- .", boxed, String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(secs)
}

/// The host makes an ignored tree of `n` files (1,000 a directory); the box times `rm -rf`.
fn time_rm(host: &Path, boxed: &Path, n: usize) -> Result<f64, LabError> {
    for i in 0..n {
        let dir = host.join(format!("build/d{:03}", i / 1000));
        if i % 1000 == 0 {
            std::fs::create_dir_all(&dir).map_err(|e| LabError::new("create dir", &dir, e))?;
        }
        write(&dir.join(format!("o{i}.o")), "object\n")?;
    }
    let t = Instant::now();
    let out = Command::new("rm").arg("-rf").arg(boxed.join("build")).output().map_err(|e| LabError::new("run rm", boxed, e))?;
    let secs = t.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(LabError::new("rm -rf build", boxed, String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(secs)
}

fn table(a: &ParkArgs, checkout: &[Vec<f64>], rm: &[Vec<f64>]) -> String {
    let mut out = format!(
        "# seam-lab park: median of {} runs (ms), seamfs over the backing dir\n\n| workload | no-park | park | ratio |\n|---|---:|---:|---:|\n",
        a.runs
    );
    let rows = [(format!("`git checkout -- .` over {} modified files", a.modified), checkout), (format!("`rm -rf` of {} ignored files", a.ignored), rm)];
    for (name, v) in rows {
        let (off, on) = (median(&v[0]) * 1000.0, median(&v[1]) * 1000.0);
        out.push_str(&format!("| {name} | {off:.0} | {on:.0} | {:.2}x |\n", on / off));
    }
    out
}
