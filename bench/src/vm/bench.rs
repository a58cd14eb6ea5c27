//! `seam-lab vm bench`: git's speed inside the guest, on the raw share against seamfs over it.
//!
//! One boot per share mode. The host puts two copies of the bench's generated repository on the
//! share (`raw` and `seam`), the guest mounts seamfs over `seam` with the box bootstrap, and each
//! run times every workload on both layers, interleaved, by the guest's own clock (the agent's
//! spawn-to-exit time of each git command). The steps are the one-kernel bench's: status warm
//! and after the share's TTL, `add -A` and `commit` of 1,000 appended files (then a reset),
//! `log -n 1000`, and a checkout of the other branch and back.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::guest::{BootSpec, Guest, FEED_SOCK, GUEST_FEED};
use crate::race::rig::{start_seamd, stop};
use super::{initramfs, static_dir, Cache, ShareMode};
use crate::bench::gen;
use crate::lab::cleanup::{on_signal_cleanup, temp_dir, CleanupGuard};
use crate::lab::git::git;
use crate::lab::LabError;
use crate::race::boxshell::guest_git_ms;

/// The workloads, in report order.
pub const WORKLOADS: [&str; 6] = ["git-status-warm", "git-status-expired", "git-add", "git-commit", "git-log", "git-checkout"];
/// Files the add step appends to.
const CHANGED: usize = 1000;
/// Longer than the shares' and seamfs's default TTL (1 s).
const EXPIRE: Duration = Duration::from_millis(1200);

/// What `vm bench` was asked.
#[derive(Debug, Clone)]
pub struct VmBenchOptions {
    /// Files in the generated repository.
    pub files: usize,
    /// Interleaved runs.
    pub runs: usize,
    /// Share modes.
    pub shares: Vec<ShareMode>,
    /// Where report.md and report.json go.
    pub out: PathBuf,
    /// The cache `vm setup` filled.
    pub cache: Cache,
    /// The guest's virtual CPUs.
    pub cpus: u32,
    /// Run seamd's change feed to the guest's seamfs (`seamd run --feed`, `seamfs --feed`).
    pub feed: bool,
}

/// One layer in the guest.
struct Layer {
    name: &'static str,
    dir: PathBuf,
}

/// Every sample of one share mode: `[workload][layer]` → ms per run.
type Samples = Vec<[Vec<f64>; 2]>;

/// Runs the bench and writes the report; the markdown it wrote.
pub fn run(opts: &VmBenchOptions) -> Result<String, LabError> {
    on_signal_cleanup();
    let _cleanup = CleanupGuard;
    let repo = gen::repo(opts.files, 1)?;
    let mut per_mode = Vec::new();
    for &mode in &opts.shares {
        per_mode.push((mode, run_mode(opts, mode, &repo.dir)?));
    }
    let md = markdown(opts, &per_mode);
    std::fs::create_dir_all(&opts.out).map_err(|e| LabError::new("create dir", &opts.out, e))?;
    let json = json!(per_mode
        .iter()
        .map(|(m, s)| json!({
            "share": m.name(),
            "files": opts.files,
            "runs": opts.runs,
            "workloads": WORKLOADS.iter().zip(s).map(|(w, l)| json!({
                "workload": w,
                "raw_ms": l[0], "seamfs_ms": l[1],
                "raw_median_ms": median(&l[0]), "seamfs_median_ms": median(&l[1]),
                "ratio": median(&l[1]) / median(&l[0]),
            })).collect::<Vec<_>>(),
        }))
        .collect::<Vec<_>>());
    for (name, text) in [("report.md", md.clone()), ("report.json", json.to_string())] {
        let p = opts.out.join(name);
        std::fs::write(&p, text).map_err(|e| LabError::new("write", &p, e))?;
    }
    Ok(md)
}

fn run_mode(opts: &VmBenchOptions, mode: ShareMode, repo: &Path) -> Result<Samples, LabError> {
    let root = temp_dir(&format!("seam-lab-vm-bench-{}", mode.name()))?;
    let share = root.join("share");
    std::fs::create_dir_all(&share).map_err(|e| LabError::new("create dir", &share, e))?;
    for copy in ["raw", "seam"] {
        let to = share.join(copy);
        let st = std::process::Command::new("cp").arg("-a").arg(repo).arg(&to).status();
        if !st.map(|s| s.success()).unwrap_or(false) {
            return Err(LabError::new("copy the bench repository", &to, "cp -a failed"));
        }
    }
    let base = git(&share.join("raw"), &["rev-parse", "HEAD"])?;
    let changed = changed_files(&share.join("raw"))?;
    let list = share.join("changed.txt");
    std::fs::write(&list, changed.join("\n") + "\n").map_err(|e| LabError::new("write", &list, e))?;
    let initrd = root.join("initramfs.cpio");
    initramfs::build(&opts.cache.kernel()?, &static_dir()?, &initrd)?;
    // seamd listens before the guest boots: qemu connects the feed port to it.
    let seamd = match opts.feed {
        true => {
            let addr = format!("unix:{}", root.join(FEED_SOCK).display());
            Some(start_seamd(&share.join("seam"), &root.join("seamd.log"), &["--feed".into(), addr])?)
        }
        false => None,
    };
    let spec = BootSpec { mode, share_root: share.clone(), run_dir: root.clone(), initramfs: initrd, cpus: opts.cpus, share_requests_logged: false };
    let g = Arc::new(Guest::boot(&opts.cache, &spec)?);
    let layers = [Layer { name: "raw", dir: "/share/raw".into() }, Layer { name: "seamfs", dir: "/share/seam".into() }];
    let feed = if opts.feed { format!(" --feed {GUEST_FEED}") } else { String::new() };
    let up = g.sh(&format!("seamfs-bootstrap up /share/seam --log /tmp/seamfs-bench.log{feed}"))?;
    if opts.feed {
        wait_feed_live(&g)?;
    }
    if up.code != 0 {
        return Err(LabError::new("mount seamfs in the guest", Path::new("/share/seam"), String::from_utf8_lossy(&up.stderr)));
    }
    let mut samples: Samples = WORKLOADS.iter().map(|_| [Vec::new(), Vec::new()]).collect();
    for run in 0..opts.runs {
        // Alternate which layer goes first, so neither always inherits the other's cache state.
        let order: [usize; 2] = if run % 2 == 0 { [0, 1] } else { [1, 0] };
        for li in order {
            let l = &layers[li];
            for (wi, ms) in one_run(&g, &l.dir, &base)?.into_iter().enumerate() {
                samples[wi][li].push(ms);
            }
            eprintln!("[vm bench] {} run {} {} done", mode.name(), run + 1, l.name);
        }
    }
    // The guest's own account of the feed (live, down, lost messages), kept beside the report.
    let log = g.sh("grep -i 'feed' /tmp/seamfs-bench.log | tail -50")?;
    let keep = opts.out.join(format!("seamfs-feed-{}.log", mode.name()));
    std::fs::create_dir_all(&opts.out).map_err(|e| LabError::new("create dir", &opts.out, e))?;
    std::fs::write(&keep, &log.stdout).map_err(|e| LabError::new("write", &keep, e))?;
    let down = g.sh("seamfs-bootstrap down /share/seam")?;
    if down.code != 0 {
        return Err(LabError::new("unmount seamfs in the guest", Path::new("/share/seam"), String::from_utf8_lossy(&down.stderr)));
    }
    Arc::try_unwrap(g).map_err(|_| LabError::new("power off guest", &root, "still in use"))?.shutdown()?;
    if let Some(s) = seamd {
        stop(s, &share.join("seam"))?;
    }
    Ok(samples)
}

/// Waits (up to 30 s) for the guest's seamfs to log that the change feed is live.
pub(crate) fn wait_feed_live(g: &Guest) -> Result<(), LabError> {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let r = g.sh("grep -c 'change feed live' /tmp/seamfs-bench.log")?;
        if r.code == 0 {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            let log = g.sh("tail -5 /tmp/seamfs-bench.log")?;
            return Err(LabError::new("wait for the change feed in the guest", Path::new(GUEST_FEED), String::from_utf8_lossy(&log.stdout)));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The first [`CHANGED`] tracked files, in path order.
fn changed_files(repo: &Path) -> Result<Vec<String>, LabError> {
    Ok(git(repo, &["ls-files"])?.lines().take(CHANGED).map(str::to_string).collect())
}

/// One run of every workload on one layer; ms in [`WORKLOADS`] order.
fn one_run(g: &Guest, dir: &Path, base: &str) -> Result<Vec<f64>, LabError> {
    let t = |args: &[&str]| guest_git_ms(g, dir, args);
    t(&["status"])?;
    let warm = t(&["status"])?;
    std::thread::sleep(EXPIRE);
    let expired = t(&["status"])?;
    let append = g.sh(&format!("cd '{}' && while read -r f; do echo bench >> \"$f\"; done < /share/changed.txt", dir.display()))?;
    if append.code != 0 {
        return Err(LabError::new("append to the changed files", dir, String::from_utf8_lossy(&append.stderr)));
    }
    let add = t(&["add", "-A"])?;
    let commit = t(&["commit", "-q", "--no-verify", "-m", "bench commit"])?;
    t(&["reset", "-q", "--hard", base])?;
    let log = t(&["log", "-n", "1000"])?;
    let checkout = t(&["checkout", "-q", "other"])? + t(&["checkout", "-q", "main"])?;
    Ok(vec![warm, expired, add, commit, log, checkout])
}

pub(crate) fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

fn markdown(opts: &VmBenchOptions, per_mode: &[(ShareMode, Samples)]) -> String {
    let mut s = format!(
        "# seam-lab vm bench\n\n{} files, {} interleaved runs, medians by the guest's clock (TCG, {} vCPU); ratio = seamfs / raw share.\n\n",
        opts.files, opts.runs, opts.cpus
    );
    for (mode, samples) in per_mode {
        s.push_str(&format!("## {}\n\n| workload | raw share ms | seamfs ms | ratio |\n|---|---|---|---|\n", mode.name()));
        for (w, l) in WORKLOADS.iter().zip(samples) {
            let (a, b) = (median(&l[0]), median(&l[1]));
            s.push_str(&format!("| {w} | {a:.1} | {b:.1} | {:.2} |\n", b / a));
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn medians() {
        assert_eq!(super::median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(super::median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(super::median(&[]).is_nan());
    }
}
