//! `seam-lab vm counts`: where a box git command's time goes in the guest, by counting.
//!
//! The guest mounts seamfs with `SEAMFS_LOG=debug`, which logs the creation of every FUSE
//! operation's span: the requests the guest kernel sent seamfs for one command are the span
//! lines its run added to the log. Each command also runs on the raw share, timed by the guest's
//! clock beside seamfs's, so a count can be weighed against the time it costs. Over virtiofs,
//! virtiofsd logs every request it serves, so each command's cost to the share is counted too,
//! for the raw share and through seamfs alike: what seamfs adds on the share's side.

use std::collections::BTreeMap;
use std::path::Path;

use super::guest::{share_log, BootSpec, Guest, GUEST_ENV};
use super::bench::median;
use super::{initramfs, static_dir, Cache, ShareMode};
use crate::lab::cleanup::{on_signal_cleanup, temp_dir, CleanupGuard};
use crate::lab::git::{host_commit, init_repo};
use crate::lab::LabError;
use crate::race::boxshell::guest_git_ms;

/// seamfs's log in the guest.
const LOG: &str = "/tmp/seamfs-counts.log";

/// The commands counted, each after the step before (a box's add and commit, then reads), and
/// whether the host commits in the target's repository first (untimed): the box command then
/// meets a move by the host, which seamfs heals its index onto (the reverse heal) and the raw
/// share shows as it is.
const COMMANDS: [(bool, &[&str]); 8] = [
    (false, &["add", "box.txt"]),
    (false, &["commit", "-q", "-m", "box commit"]),
    (false, &["rev-parse", "HEAD"]),
    (false, &["status", "--porcelain"]),
    (false, &["log", "-n", "100", "--oneline"]),
    (false, &["reset", "-q", "--hard", "HEAD~"]),
    (true, &["status", "--porcelain"]),
    // The race's moment: a box commit on top of a host commit it has not seen (nothing staged).
    (true, &["commit", "-q", "--allow-empty", "-m", "box commit after a host commit"]),
];

/// What to run besides the raw share and seamfs.
#[derive(Debug, Default)]
pub struct CountsOptions {
    /// Rounds of the commands (times are medians).
    pub repeat: usize,
    /// The guest's virtual CPUs.
    pub cpus: u32,
    /// Another static seamfs to mount beside the one under test (A/B in one boot, same noise).
    pub baseline: Option<std::path::PathBuf>,
    /// Time only: no debug log, so seamfs's CPU is not inflated by it (no request counts).
    pub timing_only: bool,
    /// Count seamfs's own syscalls per command (`strace -c` attached in the guest; it slows
    /// seamfs, so times of such a run are not figures).
    pub syscalls: bool,
    /// Profile seamfs in the last round (`perf record` attached in the guest, per command); the
    /// report of the hottest symbols follows the table.
    pub perf: bool,
    /// Keep the last round's seamfs log lines and (with `syscalls`) full traces per command here.
    pub keep: Option<std::path::PathBuf>,
    /// Tags made in each repository, packed with the branch into `packed-refs` (0: refs loose).
    pub packed_tags: u32,
}

/// One box in the guest the commands run in.
struct Target {
    name: &'static str,
    dir: &'static str,
    /// seamfs's log when the target is a seamfs mount.
    log: Option<&'static str>,
}

impl Target {
    /// The daemon's process name.
    fn prog(&self) -> &'static str {
        if self.name == "baseline" { "seamfs-baseline" } else { "seamfs" }
    }
}

const TARGETS: [Target; 3] = [
    Target { name: "raw", dir: "/share/raw", log: None },
    Target { name: "baseline", dir: "/share/base", log: Some("/tmp/seamfs-baseline.log") },
    Target { name: "seamfs", dir: "/share/seam", log: Some(LOG) },
];

/// One command's figures, per target: samples in ms, and the last round's requests and CPU.
#[derive(Debug, Default)]
pub struct Counted {
    /// The git arguments.
    pub command: String,
    /// Guest times by target, ms.
    pub ms: BTreeMap<&'static str, Vec<f64>>,
    /// FUSE requests by target and operation (last round).
    pub requests: BTreeMap<&'static str, BTreeMap<String, u64>>,
    /// seamfs CPU by target, ms (samples).
    pub cpu_ms: BTreeMap<&'static str, Vec<f64>>,
    /// seamfs's syscalls by target and name (last round, `--syscalls`).
    pub syscalls: BTreeMap<&'static str, BTreeMap<String, u64>>,
    /// seamfs's hottest symbols by target (last round, `--perf`): `perf report`'s lines.
    pub profile: BTreeMap<&'static str, String>,
    /// Requests the share's server served by target and operation (last round, counted runs).
    pub share: BTreeMap<&'static str, BTreeMap<String, u64>>,
}

/// Boots a guest over `mode`, counts, and returns the table as markdown.
pub fn run(cache: &Cache, mode: ShareMode, opts: &CountsOptions) -> Result<String, LabError> {
    on_signal_cleanup();
    let _cleanup = CleanupGuard;
    let root = temp_dir(&format!("seam-lab-vm-counts-{}", mode.name()))?;
    if let Some(dir) = &opts.keep {
        std::fs::create_dir_all(dir).map_err(|e| LabError::new("create dir", dir, e))?;
    }
    let share = root.join("share");
    let targets: Vec<&Target> = TARGETS.iter().filter(|t| t.name != "baseline" || opts.baseline.is_some()).collect();
    for t in &targets {
        let p = share.join(t.dir.trim_start_matches("/share/"));
        std::fs::create_dir_all(&p).map_err(|e| LabError::new("create dir", &p, e))?;
        init_repo(&p)?;
        pack_tags(&p, opts.packed_tags)?;
    }
    let initrd = root.join("initramfs.cpio");
    let extra: Vec<(&str, &Path)> = opts.baseline.iter().map(|b| ("seamfs-baseline", b.as_path())).collect();
    let mut tools: Vec<&Path> = Vec::new();
    if opts.syscalls {
        tools.push(Path::new(STRACE));
    }
    if opts.perf {
        tools.push(Path::new(PERF));
    }
    initramfs::build_with_tools(&cache.kernel()?, &static_dir()?, &extra, &tools, &initrd)?;
    let share_logged = !opts.timing_only;
    let spec = BootSpec { mode, share_root: share.clone(), run_dir: root.clone(), initramfs: initrd, cpus: opts.cpus, share_requests_logged: share_logged };
    let g = Guest::boot(cache, &spec)?;
    let share_log = share_logged.then(|| share_log(&root, mode));
    // `SEAMFS_LOG_SPANS=close` on the host logs each request's busy time in the kept logs too.
    let env = if opts.timing_only { String::new() } else { format!("SEAMFS_LOG=debug {}", super::guest::forwarded_env(&["SEAMFS_LOG_SPANS"])) };
    for t in &targets {
        let Some(log) = t.log else { continue };
        let cmd = match t.name {
            "baseline" => format!("{env}seamfs-baseline mount --over {} --log {log}", t.dir),
            _ => format!("{env}seamfs-bootstrap up {} --log {log}", t.dir),
        };
        let up = g.sh(&cmd)?;
        if up.code != 0 {
            return Err(LabError::new("mount seamfs in the guest", Path::new(t.dir), String::from_utf8_lossy(&up.stderr)));
        }
    }
    let mut rows: Vec<Counted> = COMMANDS
        .iter()
        .map(|(host, a)| Counted { command: format!("{}{}", a.join(" "), if *host { " (after a host commit)" } else { "" }), ..Default::default() })
        .collect();
    let mut host_commits = 0;
    for round in 0..opts.repeat {
        for t in &targets {
            g.write(&Path::new(t.dir).join("box.txt"), format!("box change {round}\n").as_bytes(), false)?;
        }
        for (i, (host, args)) in COMMANDS.iter().enumerate() {
            // The order of the targets turns each round, so none always runs first.
            for k in 0..targets.len() {
                let t = targets[(k + round) % targets.len()];
                if *host {
                    // The guest's dirty pages reach the host first: over 9p `cache=loose` the raw
                    // share's host would otherwise read the box's last index short and fail.
                    g.sh("sync")?;
                    host_commits += 1;
                    host_commit(&share.join(t.dir.trim_start_matches("/share/")), host_commits)?;
                }
                let before = match (t.log, opts.timing_only) {
                    (Some(log), false) => Some(log_lines(&g, log)?),
                    _ => None,
                };
                let share_before = share_log.as_deref().map(log_len).transpose()?;
                let cpu_before = if t.log.is_some() { seamfs_cpu_ns(&g, t.prog())? } else { 0 };
                let last = t.log.is_some() && round + 1 == opts.repeat;
                if last && opts.syscalls {
                    strace_attach(&g, t.prog(), opts.keep.is_some())?;
                }
                if last && opts.perf {
                    perf_attach(&g, t.prog())?;
                }
                let ms = guest_git_ms(&g, Path::new(t.dir), args)?;
                if last && opts.perf {
                    rows[i].profile.insert(t.name, perf_detach(&g)?);
                }
                if last && opts.syscalls {
                    rows[i].syscalls.insert(t.name, strace_detach(&g)?);
                    if let Some(dir) = &opts.keep {
                        let to = dir.join(format!("{i:03}-{}.strace", t.name));
                        std::fs::write(&to, log_text(&g, STRACE_TRACE)?).map_err(|e| LabError::new("keep strace's trace", &to, e))?;
                    }
                }
                let r = &mut rows[i];
                r.ms.entry(t.name).or_default().push(ms);
                if t.log.is_some() {
                    let cpu = (seamfs_cpu_ns(&g, t.prog())? - cpu_before) as f64 / 1e6;
                    r.cpu_ms.entry(t.name).or_default().push(cpu);
                }
                if let (Some(log), Some(from)) = (t.log, before) {
                    let keep = opts.keep.as_ref().filter(|_| last).map(|d| d.join(format!("{i:03}-{}.log", t.name)));
                    r.requests.insert(t.name, spans_since(&g, log, from, keep.as_deref())?);
                }
                if let (Some(log), Some(from)) = (share_log.as_deref(), share_before) {
                    r.share.insert(t.name, share_requests_since(log, from)?);
                }
            }
        }
    }
    for t in targets.iter().rev() {
        let cmd = match t.name {
            "raw" => continue,
            "baseline" => format!("seamfs-baseline umount {}", t.dir),
            _ => format!("seamfs-bootstrap down {}", t.dir),
        };
        let down = g.sh(&cmd)?;
        if down.code != 0 {
            return Err(LabError::new("unmount seamfs in the guest", Path::new(t.dir), String::from_utf8_lossy(&down.stderr)));
        }
    }
    g.shutdown()?;
    Ok(markdown(mode, opts, &targets, &rows))
}

/// The length of a host-side log so far.
/// Makes `n` tags on HEAD in the repository at `dir` (one `update-ref --stdin`) and packs every
/// ref into `packed-refs`, the branch too, as a fresh clone has them.
fn pack_tags(dir: &Path, n: u32) -> Result<(), LabError> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    if n == 0 {
        return Ok(());
    }
    let head = crate::lab::git::git(dir, &["rev-parse", "HEAD"])?;
    let lines: String = (0..n).map(|i| format!("create refs/tags/t{i} {head}\n")).collect();
    let mut child = Command::new("git")
        .args(["update-ref", "--stdin"])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .spawn()
        .map_err(|e| LabError::new("run git update-ref --stdin in", dir, e))?;
    let fed = child.stdin.take().map(|mut i| i.write_all(lines.as_bytes()));
    let status = child.wait().map_err(|e| LabError::new("wait for git update-ref in", dir, e))?;
    match fed {
        Some(Ok(())) if status.success() => {}
        _ => return Err(LabError::new("make tags with git update-ref --stdin in", dir, status)),
    }
    crate::lab::git::git(dir, &["pack-refs", "--all"]).map(|_| ())
}

fn log_len(p: &Path) -> Result<u64, LabError> {
    std::fs::metadata(p).map(|m| m.len()).map_err(|e| LabError::new("stat the share's log", p, e))
}

/// The requests virtiofsd logged past byte `from` of its log, by operation (`Received request:
/// opcode=Lookup (1), …`). Asynchronous ones (a RELEASE, a FORGET) may land in the next
/// command's count.
fn share_requests_since(p: &Path, from: u64) -> Result<BTreeMap<String, u64>, LabError> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(p).map_err(|e| LabError::new("open the share's log", p, e))?;
    let mut text = Vec::new();
    f.seek(SeekFrom::Start(from)).and_then(|_| f.read_to_end(&mut text)).map_err(|e| LabError::new("read the share's log", p, e))?;
    let mut out = BTreeMap::new();
    for line in String::from_utf8_lossy(&text).lines() {
        if let Some(op) = share_request_op(line) {
            *out.entry(op).or_insert(0) += 1;
        }
    }
    Ok(out)
}

/// The operation a line of the share server's log received, if it logs one: virtiofsd's
/// `Received request: opcode=Lookup (1), …`, or qemu's 9p trace `v9fs_walk tag 0 id 110 …`
/// (its replies, `*_return` and `v9fs_rerror`, are not requests).
fn share_request_op(line: &str) -> Option<String> {
    if let Some(rest) = line.split("Received request: opcode=").nth(1) {
        return Some(rest.split([' ', ',']).next().unwrap_or("?").to_ascii_lowercase());
    }
    let at = line.find("v9fs_")?;
    let op = line[at + 5..].split([' ', ':']).next()?;
    (!op.is_empty() && !op.ends_with("_return") && op != "rerror").then(|| op.to_string())
}

/// Nanoseconds on CPU of the daemon named `prog` so far, threads that ended included
/// (`utime` + `stime` of `/proc/PID/stat`, in clock ticks of 10 ms).
fn seamfs_cpu_ns(g: &Guest, prog: &str) -> Result<i64, LabError> {
    let r = g.sh(&format!(
        "for p in /proc/[0-9]*; do [ \"$(cat $p/comm 2>/dev/null)\" = {prog} ] && cat $p/stat; done | awk '{{ s += $14 + $15 }} END {{ print s + 0 }}'"
    ))?;
    // Ticks, multiplied here: awk's printf %d stops at 2^31-1, which a daemon's nanoseconds pass
    // within a few seconds of CPU (every figure came out as 0 ms).
    let text = String::from_utf8_lossy(&r.stdout);
    let ticks: f64 = text.trim().parse().map_err(|_| LabError::new("read seamfs's CPU time in the guest", Path::new("/proc"), format!("{text:?}")))?;
    Ok((ticks * 10_000_000.0) as i64)
}

/// Where strace is on the host and in the guest (`--syscalls`).
const STRACE: &str = "/usr/bin/strace";
/// strace's summary file and pid file in the guest.
const STRACE_OUT: &str = "/tmp/seamfs-strace.txt";
/// strace's full trace with `--keep`, in the guest's own memory: one on the share would sit in a
/// 9p `cache=loose` guest's page cache, unseen by the host. The agent carries it back.
const STRACE_TRACE: &str = "/tmp/seamfs-strace-full.txt";
const STRACE_PID: &str = "/tmp/seamfs-strace.pid";

/// Attaches `strace -c -f` to every thread of the daemon named `prog`, in the background, and
/// waits until it has attached (its summary counts only what follows).
fn strace_attach(g: &Guest, prog: &str, full: bool) -> Result<(), LabError> {
    // `-C`: the summary follows the whole trace in one file.
    // `-tt -T -y` in the full trace: when each call started, how long it took (a share's round
    // trips show there) and the file behind each fd.
    let (flag, out) = if full { ("-C -tt -T -y", STRACE_TRACE.to_string()) } else { ("-c", STRACE_OUT.to_string()) };
    let link = if full { format!("ln -s {out} {STRACE_OUT};") } else { String::new() };
    let r = g.sh(&format!(
        "pid=$(for p in /proc/[0-9]*; do [ \"$(cat $p/comm 2>/dev/null)\" = {prog} ] && echo ${{p#/proc/}}; done | head -n1); \
         [ -n \"$pid\" ] || exit 3; rm -f {out} {STRACE_OUT}; {link} \
         setsid {STRACE} {flag} -f -o {out} -p $pid </dev/null >/dev/null 2>&1 & echo $! > {STRACE_PID}; \
         n=0; while [ $n -lt 200 ] && grep -qs 'TracerPid:[[:space:]]*0$' /proc/$pid/task/*/status; do sleep 0.05; n=$((n+1)); done; sleep 0.2"
    ))?;
    if r.code != 0 {
        return Err(LabError::new("attach strace in the guest", Path::new(STRACE), String::from_utf8_lossy(&r.stderr)));
    }
    Ok(())
}

/// Stops the strace started by [`strace_attach`] and reads its summary: calls by syscall.
fn strace_detach(g: &Guest) -> Result<BTreeMap<String, u64>, LabError> {
    let r = g.sh(&format!(
        "kill -INT $(cat {STRACE_PID}); n=0; while [ $n -lt 200 ] && kill -0 $(cat {STRACE_PID}) 2>/dev/null; do sleep 0.05; n=$((n+1)); done; tail -n 100 {STRACE_OUT}"
    ))?;
    let text = String::from_utf8_lossy(&r.stdout);
    let calls = strace_summary(&text);
    if calls.is_empty() {
        return Err(LabError::new("read strace's summary in the guest", Path::new(STRACE_OUT), format!("{text:?}")));
    }
    Ok(calls)
}

/// Where perf is on the host and in the guest (`--perf`), and its files there.
const PERF: &str = "/usr/bin/perf";
const PERF_DATA: &str = "/tmp/seamfs-perf.data";
const PERF_PID: &str = "/tmp/seamfs-perf.pid";

/// Starts `perf record` (cpu-clock, call graphs) on every thread of the daemon named `prog`.
fn perf_attach(g: &Guest, prog: &str) -> Result<(), LabError> {
    let r = g.sh(&format!(
        "echo 0 > /proc/sys/kernel/kptr_restrict; echo -1 > /proc/sys/kernel/perf_event_paranoid; \
         pid=$(for p in /proc/[0-9]*; do [ \"$(cat $p/comm 2>/dev/null)\" = {prog} ] && echo ${{p#/proc/}}; done | head -n1); \
         [ -n \"$pid\" ] || exit 3; rm -f {PERF_DATA}; \
         setsid {PERF} record -q -e cpu-clock -F 2000 -g -p $pid -o {PERF_DATA} </dev/null >/tmp/seamfs-perf.log 2>&1 & echo $! > {PERF_PID}; sleep 1"
    ))?;
    if r.code != 0 {
        return Err(LabError::new("start perf in the guest", Path::new(PERF), String::from_utf8_lossy(&r.stderr)));
    }
    Ok(())
}

/// Stops the `perf record` of [`perf_attach`]; its report: the hottest symbols, self time.
fn perf_detach(g: &Guest) -> Result<String, LabError> {
    let r = g.sh(&format!(
        "kill -INT $(cat {PERF_PID}); n=0; while [ $n -lt 400 ] && kill -0 $(cat {PERF_PID}) 2>/dev/null; do sleep 0.05; n=$((n+1)); done; \
         {PERF} report -i {PERF_DATA} --stdio --no-children --sort dso,sym -g none --percent-limit 1 2>&1 | grep -v '^#' | grep -v '^$' | head -n 40"
    ))?;
    Ok(String::from_utf8_lossy(&r.stdout).into_owned())
}

/// Calls by syscall from `strace -c`'s table (`% time seconds usecs/call calls errors syscall`).
fn strace_summary(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    // With `-C` the trace comes first: the summary starts at its header.
    let from = text.find("% time").unwrap_or(0);
    for line in text[from..].lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 5 || f[0].parse::<f64>().is_err() || f.last() == Some(&"total") {
            continue;
        }
        if let Ok(calls) = f[3].parse::<u64>() {
            out.insert(f[f.len() - 1].to_string(), calls);
        }
    }
    out
}

fn log_text(g: &Guest, log: &str) -> Result<String, LabError> {
    let r = g.run(Path::new("/"), &[b"/bin/cat", log.as_bytes()], &GUEST_ENV, None)?;
    Ok(String::from_utf8_lossy(&r.stdout).into_owned())
}

fn log_lines(g: &Guest, log: &str) -> Result<usize, LabError> {
    Ok(log_text(g, log)?.lines().count())
}

/// FUSE operations whose spans were created after line `from` of the log, by name, and the
/// forced revalidations seamfs made of the share (under [`REFRESH_KEY`]) and the files it sized
/// by reading them from the server (under [`SIZED_KEY`]).
fn spans_since(g: &Guest, log: &str, from: usize, keep: Option<&Path>) -> Result<BTreeMap<String, u64>, LabError> {
    let mut out = BTreeMap::new();
    let text = log_text(g, log)?;
    if let Some(to) = keep {
        let lines: Vec<&str> = text.lines().skip(from).collect();
        std::fs::write(to, lines.join("\n") + "\n").map_err(|e| LabError::new("keep seamfs's log", to, e))?;
    }
    for line in text.lines().skip(from) {
        if let Some(op) = span_name(line) {
            *out.entry(op.to_string()).or_insert(0) += 1;
        } else if line.contains("seamfs::lower: refreshed") {
            *out.entry(REFRESH_KEY.to_string()).or_insert(0) += 1;
        } else if line.contains("seamfs::lower: sized by the server") || line.contains("seamfs::lower_read: sized by the server") {
            *out.entry(SIZED_KEY.to_string()).or_insert(0) += 1;
        }
    }
    Ok(out)
}

/// The count of seamfs's forced revalidations (each a share round trip), kept apart from FUSE
/// operations: `Lower::refresh_again`'s debug event.
const REFRESH_KEY: &str = "(share refreshes)";

/// The count of live files seamfs sized by an `O_DIRECT` read (9p `cache=loose` only, where each
/// is an open, a read and a close on the server): `Lower::fresh_size`'s debug event.
const SIZED_KEY: &str = "(server sizes)";

/// The span name of a `FmtSpan::NEW` line (`… DEBUG lookup{parent=1 name="x"}: seamfs::filesystem: new`).
fn span_name(line: &str) -> Option<&str> {
    if !line.ends_with(": new") {
        return None;
    }
    let rest = line.split(" DEBUG ").nth(1)?;
    let name = &rest[..rest.find(['{', ':'])?];
    (!name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_')).then_some(name)
}

fn markdown(mode: ShareMode, opts: &CountsOptions, targets: &[&Target], rows: &[Counted]) -> String {
    let names: Vec<&str> = targets.iter().map(|t| t.name).collect();
    let seams: Vec<&str> = targets.iter().filter(|t| t.log.is_some()).map(|t| t.name).collect();
    let mut s = format!(
        "## {}{} (medians of {} rounds{}; requests of the last)\n\n| command |{}{}{}\n|---|{}\n",
        mode.name(),
        if opts.packed_tags > 0 { format!(", {} tags and the branch in packed-refs", opts.packed_tags) } else { String::new() },
        opts.repeat,
        if opts.timing_only { ", no debug log" } else { ", seamfs logging every request" },
        names.iter().map(|n| format!(" {n} ms |")).collect::<String>(),
        seams.iter().map(|n| format!(" {n}/raw | {n} CPU ms |")).collect::<String>(),
        if opts.timing_only { String::new() } else { seams.iter().map(|n| format!(" {n} requests |")).collect() },
        "---|".repeat(names.len() + seams.len() * if opts.timing_only { 2 } else { 3 }),
    );
    for r in rows {
        let med = |n: &str| r.ms.get(n).map_or(f64::NAN, |v| median(v));
        s.push_str(&format!("| `git {}` |", r.command));
        for n in &names {
            s.push_str(&format!(" {:.1} |", med(n)));
        }
        for n in &seams {
            let cpu = r.cpu_ms.get(n).map_or(f64::NAN, |v| median(v));
            s.push_str(&format!(" {:.2} | {cpu:.1} |", med(n) / med("raw")));
        }
        if !opts.timing_only {
            for n in &seams {
                s.push_str(&format!(" {} |", by_op(r.requests.get(n))));
            }
        }
        s.push('\n');
    }
    if rows.iter().any(|r| !r.share.is_empty()) {
        s.push_str("\nRequests the share's server served per command (virtiofsd's debug log or qemu's 9p trace, last round), by target:\n\n| command |");
        s.push_str(&names.iter().map(|n| format!(" {n} |")).collect::<String>());
        s.push_str(&format!("\n|---|{}\n", "---|".repeat(names.len())));
        for r in rows {
            s.push_str(&format!("| `git {}` |", r.command));
            for n in &names {
                s.push_str(&format!(" {} |", r.share.get(n).map_or_else(|| "-".into(), by_count)));
            }
            s.push('\n');
        }
    }
    if opts.syscalls {
        s.push_str("\nseamfs's syscalls per command (`strace -c -f`, last round):\n\n| command | target | syscalls |\n|---|---|---|\n");
        for r in rows {
            for (n, calls) in &r.syscalls {
                s.push_str(&format!("| `git {}` | {n} | {} |\n", r.command, by_count(calls)));
            }
        }
    }
    if opts.perf {
        for r in rows {
            for (n, report) in &r.profile {
                s.push_str(&format!("\n`git {}`, {n} (`perf record -e cpu-clock -g -p`, self time):\n\n```\n{report}```\n", r.command));
            }
        }
    }
    s
}

/// `total: name n, …` (the ten largest).
fn by_count(calls: &BTreeMap<String, u64>) -> String {
    let total: u64 = calls.values().sum();
    let mut v: Vec<(&String, &u64)> = calls.iter().collect();
    v.sort_by_key(|(_, n)| std::cmp::Reverse(**n));
    let by: Vec<String> = v.iter().take(10).map(|(o, n)| format!("{o} {n}")).collect();
    format!("{total}: {}", by.join(", "))
}

/// `total: op n, op n, …` (the eight largest), then the share refreshes seamfs forced and the
/// server sizes it read, when there were any.
fn by_op(requests: Option<&BTreeMap<String, u64>>) -> String {
    let Some(req) = requests else { return "-".into() };
    let refreshes = req.get(REFRESH_KEY).copied().unwrap_or(0);
    let sized = match req.get(SIZED_KEY) {
        Some(n) => format!("; server sizes {n}"),
        None => String::new(),
    };
    let mut ops: Vec<(&String, &u64)> = req.iter().filter(|(k, _)| ![REFRESH_KEY, SIZED_KEY].contains(&k.as_str())).collect();
    let total: u64 = ops.iter().map(|(_, n)| **n).sum();
    ops.sort_by_key(|(_, n)| std::cmp::Reverse(**n));
    let by: Vec<String> = ops.iter().take(8).map(|(o, n)| format!("{o} {n}")).collect();
    format!("{total}: {}; share refreshes {refreshes}{sized}", by.join(", "))
}

#[cfg(test)]
mod tests {
    #[test]
    fn server_sizes_are_shown_beside_refreshes_when_there_are_any() {
        let mut m = std::collections::BTreeMap::new();
        m.insert("lookup".to_string(), 3u64);
        m.insert(super::REFRESH_KEY.to_string(), 2);
        assert_eq!(super::by_op(Some(&m)), "3: lookup 3; share refreshes 2");
        m.insert(super::SIZED_KEY.to_string(), 4);
        assert_eq!(super::by_op(Some(&m)), "3: lookup 3; share refreshes 2; server sizes 4");
    }

    #[test]
    fn share_requests_are_read_from_either_server() {
        use super::share_request_op;
        let v = "[2026-12-03T21:27:43Z DEBUG virtiofsd::server] Received request: opcode=Lookup (1), inode=1, unique=4, pid=120";
        assert_eq!(share_request_op(v).as_deref(), Some("lookup"));
        assert_eq!(share_request_op("1234@1701234567.123456:v9fs_walk tag 0 id 110 fid 0 newfid 1 nwnames 1").as_deref(), Some("walk"));
        assert_eq!(share_request_op("v9fs_lcreate tag 1 id 14 fid 2 flags 32962 mode 420 gid 0").as_deref(), Some("lcreate"));
        assert_eq!(share_request_op("1234@1701234567.1:v9fs_walk_return tag 0 id 110 nwnames 1 qids 0x5"), None);
        assert_eq!(share_request_op("v9fs_rerror tag 0 id 110 err 2"), None);
        assert_eq!(share_request_op("qemu-system-x86_64: terminating on signal 15"), None);
    }

    #[test]
    fn strace_summaries_are_read() {
        let t = "% time     seconds  usecs/call     calls    errors syscall\n\
                 ------ ----------- ----------- --------- --------- ----------------\n\
                  40.00    0.004000          10       400           read\n\
                  30.00    0.003000          15       200        12 openat2\n\
                 ------ ----------- ----------- --------- --------- ----------------\n\
                 100.00    0.007000                   600        12 total\n";
        let m = super::strace_summary(t);
        assert_eq!(m.get("read"), Some(&400));
        assert_eq!(m.get("openat2"), Some(&200));
        assert_eq!(m.len(), 2);
        // `--keep` traces with `-C`: the calls come first, and none is read as a count.
        let traced = format!(
            "126   close(11)                         = 0\n125   <... read resumed>\"x\", 16781312) = 56\n\
             127   21:27:43.123456 close(12</tmp/f>) = 0 <0.000012>\n{t}"
        );
        assert_eq!(super::strace_summary(&traced), m);
    }

    #[test]
    fn span_lines_are_recognised() {
        let l = "2026-12-01T13:00:00.1Z DEBUG lookup{parent=1 name=\"HEAD\"}: seamfs::filesystem: new";
        assert_eq!(super::span_name(l), Some("lookup"));
        assert_eq!(super::span_name("2026 DEBUG release{ino=3}: seamfs::filesystem: new"), Some("release"));
        assert_eq!(super::span_name("2026 INFO seamfs::mount: serving"), None);
        assert_eq!(super::span_name("2026 DEBUG getattr{ino=1}: seamfs::core: refreshed"), None);
    }
}
