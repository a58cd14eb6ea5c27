//! `seam-lab small`: everyday git commands in fresh repositories, per command, through each
//! layer. Small commands pay seamfs's fixed costs (a process's first look at every live name,
//! its locks) on every run, where the big-repo workloads hide them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::layers::{self, Layer, LayerKind};
use crate::lab::cleanup::{is_stopping, on_signal_cleanup, temp_dir, CleanupGuard};
use crate::lab::git::git_cmd;
use crate::lab::LabError;
use crate::vm::bench::median;

/// `seam-lab small` options.
#[derive(clap::Args, Debug, Clone)]
pub struct SmallArgs {
    /// Layers to measure, separated by commas; ratios are against the first.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "share,seamfs")]
    pub layers: Vec<LayerKind>,
    /// Fresh repositories per run.
    #[arg(long, default_value_t = 20)]
    pub repos: usize,
    /// Runs (the layer order rotated each run); medians are over runs.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// TTL given to the share and every layer above it.
    #[arg(long, default_value_t = 1.0)]
    pub ttl: f64,
    /// Print JSON instead of the markdown table.
    #[arg(long)]
    pub json: bool,
    /// Another seamfs binary, measured as one more layer (`seamfs-fast-baseline`, over its own
    /// fast share) in the same run: an A/B of two builds under the same noise.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
}

/// The script, in order; each entry is a command name and its git arguments (`{wt}` is the
/// worktree path). Files are written between steps by [`prepare`].
const SCRIPT: &[(&str, &[&str])] = &[
    ("init", &["init", "-q", "-b", "main", "."]),
    ("add", &["add", "-A"]),
    ("commit", &["commit", "-q", "-m", "one"]),
    ("branch", &["branch", "feat"]),
    ("checkout", &["checkout", "-q", "feat"]),
    ("commit-feat", &["commit", "-q", "-am", "feat"]),
    ("checkout-main", &["checkout", "-q", "main"]),
    ("commit-main", &["commit", "-q", "-am", "main"]),
    ("merge", &["merge", "-q", "--no-edit", "feat"]),
    ("log", &["log", "--oneline", "-n", "10"]),
    ("status", &["status", "--porcelain"]),
    ("tag", &["tag", "v1"]),
    ("worktree-add", &["worktree", "add", "-q", "{wt}"]),
    ("worktree-remove", &["worktree", "remove", "{wt}"]),
];

/// Runs `seam-lab small`; the process exit code.
pub fn main(args: SmallArgs) -> i32 {
    if args.runs == 0 || args.repos == 0 || args.layers.is_empty() {
        eprintln!("seam-lab small: --runs, --repos and --layers must each be at least 1");
        return 2;
    }
    on_signal_cleanup();
    let cleanup = CleanupGuard;
    let result = run(&args);
    drop(cleanup);
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("seam-lab small: {e}");
            1
        }
    }
}

fn run(args: &SmallArgs) -> Result<(), LabError> {
    let repo = super::gen::repo(100, 1)?;
    let big = super::gen::big_file(1)?;
    let root = temp_dir("seam-small")?;
    let mut kinds = args.layers.clone();
    if args.baseline.is_some() {
        kinds.push(LayerKind::SeamfsFastBaseline);
    }
    let mut up: Vec<Layer> = Vec::new();
    for &kind in &kinds {
        let dir = root.join(kind.name());
        std::fs::create_dir(&dir).map_err(|e| LabError::new("create dir", &dir, e))?;
        let bin = if kind == LayerKind::SeamfsFastBaseline { args.baseline.as_deref() } else { None };
        up.push(layers::setup_with(kind, &dir, &repo.dir, &big, args.ttl, bin)?);
    }
    // samples[(layer, command)] = one total per run (over all repos).
    let mut samples: BTreeMap<(LayerKind, &str), Vec<Duration>> = BTreeMap::new();
    for run in 0..args.runs {
        eprintln!("[small] run {}/{}", run + 1, args.runs);
        let mut totals: BTreeMap<(LayerKind, &'static str), Duration> = BTreeMap::new();
        // Each repository's script runs on every layer in turn, the order turning with the
        // repository, so a machine whose speed drifts within a run weighs on each layer alike.
        for r in 0..args.repos {
            for i in 0..up.len() {
                let l = &up[(i + r + run) % up.len()];
                if is_stopping() {
                    return Err(LabError::new("run the script", &root, "interrupted"));
                }
                for (cmd, d) in script_in(&l.dir.join(format!("small-{run}")), r)? {
                    *totals.entry((l.kind, cmd)).or_default() += d;
                }
            }
        }
        for (key, d) in totals {
            samples.entry(key).or_default().push(d);
        }
    }
    let table = Table::from(&kinds, samples);
    print!("{}", if args.json { table.json() } else { table.markdown(args) });
    Ok(())
}

/// The script in fresh repository number `r` under `base`: each command's time.
fn script_in(base: &Path, r: usize) -> Result<Vec<(&'static str, Duration)>, LabError> {
    std::fs::create_dir_all(base).map_err(|e| LabError::new("create dir", base, e))?;
    let dir = base.join(format!("r{r}"));
    std::fs::create_dir(&dir).map_err(|e| LabError::new("create dir", &dir, e))?;
    let wt = base.join(format!("w{r}"));
    let mut times = Vec::with_capacity(SCRIPT.len());
    for &(name, argv) in SCRIPT {
        prepare(name, &dir, r)?;
        let argv: Vec<String> = argv.iter().map(|a| a.replace("{wt}", &wt.to_string_lossy())).collect();
        let t = Instant::now();
        let out = git_cmd(&dir).args(&argv).output().map_err(|e| LabError::new(format!("run git {name}"), &dir, e))?;
        times.push((name, t.elapsed()));
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(LabError::new(format!("git {}", argv.join(" ")), &dir, format!("{}: {}", out.status, err.trim())));
        }
    }
    Ok(times)
}

/// The file edits a step needs before it runs (not timed).
fn prepare(step: &str, dir: &Path, r: usize) -> Result<(), LabError> {
    let write = |rel: &str, text: String| {
        let p: PathBuf = dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| LabError::new("create dir", parent, e))?;
        }
        std::fs::write(&p, text).map_err(|e| LabError::new("write", &p, e))
    };
    match step {
        "add" => {
            for f in ["a", "b", "c", "d", "e"] {
                write(&format!("{f}.txt"), format!("{f} {r}\n"))?;
            }
            write("src/main.rs", "fn main() {}\n".into())
        }
        "commit-feat" => write("a.txt", format!("a {r}\nfeat\n")),
        "commit-main" => write("b.txt", format!("b {r}\nmain\n")),
        _ => Ok(()),
    }
}

/// Medians per layer and command, in ms.
struct Table {
    layers: Vec<LayerKind>,
    rows: Vec<(&'static str, Vec<f64>)>,
}

impl Table {
    fn from(layers: &[LayerKind], samples: BTreeMap<(LayerKind, &'static str), Vec<Duration>>) -> Table {
        let median_ms = |l: LayerKind, cmd: &str| {
            let ms: Vec<f64> = samples.get(&(l, cmd)).map_or(&[][..], |v| v).iter().map(|d| d.as_secs_f64() * 1e3).collect();
            median(&ms)
        };
        let mut rows: Vec<(&'static str, Vec<f64>)> =
            SCRIPT.iter().map(|&(cmd, _)| (cmd, layers.iter().map(|&l| median_ms(l, cmd)).collect())).collect();
        let total = (0..layers.len()).map(|i| rows.iter().map(|r| r.1[i]).sum()).collect();
        rows.push(("total", total));
        Table { layers: layers.to_vec(), rows }
    }

    fn markdown(&self, a: &SmallArgs) -> String {
        let mut s = format!(
            "# seam-lab small: {} fresh repositories, median of {} runs (ms; ratio to {})\n\n| command |",
            a.repos,
            a.runs,
            self.layers[0].name()
        );
        for l in &self.layers {
            s += &format!(" {} |", l.name());
        }
        s += "\n|---|";
        s += &"---|".repeat(self.layers.len());
        s += "\n";
        for (cmd, row) in &self.rows {
            s += &format!("| {cmd} | {:.0} |", row[0]);
            for ms in &row[1..] {
                s += &format!(" {ms:.0} ({:.2}x) |", ms / row[0].max(1e-6));
            }
            s += "\n";
        }
        s
    }

    fn json(&self) -> String {
        let rows: Vec<_> = self.rows.iter().map(|(cmd, ms)| serde_json::json!({ "command": cmd, "ms": ms })).collect();
        let layers: Vec<_> = self.layers.iter().map(|l| l.name()).collect();
        format!("{}\n", serde_json::json!({ "layers": layers, "rows": rows }))
    }
}
