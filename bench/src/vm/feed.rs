//! `seam-lab vm feed`: the change feed's latency in the real box. One boot; the host's share
//! holds two checkouts, `raw` (read by the guest straight off the share) and `seam` (seamfs over
//! it in the guest, `--feed` on the virtio-serial port that qemu connects to seamd's `unix:`
//! feed). For each edit a guest shell first polls the name with its `[ -e ]` builtin (a `stat`),
//! then the host creates or deletes the file, and the time from the host's syscall to the
//! guest's answer arriving is the figure. It includes the poll loop's exit and the agent's reply
//! (the run also reports the agent's round trip for a no-op, which bounds that overhead from
//! above). Creates and deletes only: a size check would need a process per poll in the guest.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::bench::{median, wait_feed_live};
use super::guest::{BootSpec, Guest, FEED_SOCK, GUEST_ENV, GUEST_FEED};
use super::{initramfs, static_dir, Cache, ShareMode};
use crate::lab::cleanup::{on_signal_cleanup, temp_dir, CleanupGuard};
use crate::lab::git::git;
use crate::lab::LabError;
use crate::race::actor::percentile_ms;
use crate::race::rig::{start_seamd, stop};

/// The edited files' directory in each checkout.
const DIR: &str = "lat";
/// How long the guest's poller runs before the host edits (it must be polling by then).
const LEAD: Duration = Duration::from_millis(400);
/// A poll that has not seen the edit by then is killed and the edit counted missed.
const GIVE_UP: Duration = Duration::from_secs(10);

/// What `vm feed` was asked.
#[derive(Debug, Clone)]
pub struct VmFeedOptions {
    /// Edits per layer (creates and deletes in turn).
    pub edits: usize,
    /// The share mode.
    pub mode: ShareMode,
    /// The cache `vm setup` filled.
    pub cache: Cache,
    /// The guest's virtual CPUs.
    pub cpus: u32,
}

/// One layer's latencies (None: missed), creates then deletes.
type Lat = (Vec<Option<Duration>>, Vec<Option<Duration>>);

/// Boots, measures both layers, powers off; the report (markdown).
pub fn run(opts: &VmFeedOptions) -> Result<String, LabError> {
    on_signal_cleanup();
    let _cleanup = CleanupGuard;
    let root = temp_dir(&format!("seam-lab-vm-feed-{}", opts.mode.name()))?;
    let share = root.join("share");
    for copy in ["raw", "seam"] {
        prepare(&share.join(copy), opts.edits)?;
    }
    let initrd = root.join("initramfs.cpio");
    initramfs::build(&opts.cache.kernel()?, &static_dir()?, &initrd)?;
    // seamd listens before the guest boots: qemu connects the feed port to it.
    let addr = format!("unix:{}", root.join(FEED_SOCK).display());
    let seamd = start_seamd(&share.join("seam"), &root.join("seamd.log"), &["--feed".into(), addr])?;
    let spec = BootSpec { mode: opts.mode, share_root: share.clone(), run_dir: root.clone(), initramfs: initrd, cpus: opts.cpus, share_requests_logged: false };
    let measured = Guest::boot(&opts.cache, &spec).and_then(|g| {
        let g = Arc::new(g);
        let r = measure(&g, &share, opts.edits);
        let down = g.sh("seamfs-bootstrap down /share/seam");
        Arc::try_unwrap(g).map_err(|_| LabError::new("power off guest", &root, "still in use"))?.shutdown()?;
        down?;
        r
    });
    stop(seamd, &share.join("seam"))?;
    let (noop, raw, seam) = measured?;
    Ok(report(opts, noop, &raw, &seam))
}

/// A checkout with the files the odd edits delete.
fn prepare(dir: &Path, edits: usize) -> Result<(), LabError> {
    let lat = dir.join(DIR);
    std::fs::create_dir_all(&lat).map_err(|e| LabError::new("create dir", &lat, e))?;
    git(dir, &["init", "-q", "-b", "main"])?;
    for i in (1..edits).step_by(2) {
        let p = lat.join(format!("f{i:04}"));
        std::fs::write(&p, "x\n").map_err(|e| LabError::new("write", &p, e))?;
    }
    Ok(())
}

fn measure(g: &Arc<Guest>, share: &Path, edits: usize) -> Result<(f64, Lat, Lat), LabError> {
    let up = g.sh(&format!("seamfs-bootstrap up /share/seam --log /tmp/seamfs-bench.log --feed {GUEST_FEED}"))?;
    if up.code != 0 {
        return Err(LabError::new("mount seamfs in the guest", Path::new("/share/seam"), String::from_utf8_lossy(&up.stderr)));
    }
    wait_feed_live(g)?;
    let mut rtt = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        g.sh("true")?;
        rtt.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let raw = layer(g, &share.join("raw"), Path::new("/share/raw"), edits)?;
    let seam = layer(g, &share.join("seam"), Path::new("/share/seam"), edits)?;
    Ok((median(&rtt), raw, seam))
}

/// Every edit on one layer: `host` is the checkout here, `guest` the same one in the guest.
fn layer(g: &Arc<Guest>, host: &Path, guest: &Path, edits: usize) -> Result<Lat, LabError> {
    let gdir = guest.join(DIR);
    // The guest has looked at every name first, so its kernel holds the entries (negative ones
    // for the names to be created).
    g.sh(&format!("cd '{}' && i=0; while [ $i -lt {edits} ]; do [ -e f$(printf %04d $i) ]; i=$((i+1)); done", gdir.display()))?;
    let (mut creates, mut deletes) = (Vec::new(), Vec::new());
    for i in 0..edits {
        let name = format!("f{i:04}");
        let create = i % 2 == 0;
        let poll: PathBuf = gdir.join(&name);
        let script = if create { format!("while [ ! -e '{}' ]; do :; done", poll.display()) } else { format!("while [ -e '{}' ]; do :; done", poll.display()) };
        let gg = Arc::clone(g);
        let waiter = std::thread::spawn(move || {
            let r = gg.run(Path::new("/"), &[b"/bin/sh", b"-c", script.as_bytes()], &GUEST_ENV, Some(GIVE_UP));
            (r, Instant::now())
        });
        std::thread::sleep(LEAD);
        let p = host.join(DIR).join(&name);
        let made = if create { std::fs::write(&p, "created\n") } else { std::fs::remove_file(&p) };
        let t0 = Instant::now();
        made.map_err(|e| LabError::new("host edit", &p, e))?;
        let (r, t1) = waiter.join().map_err(|_| LabError::new("poll in the guest", &poll, "the waiting thread panicked"))?;
        let r = r?;
        let lat = (!r.killed && r.code == 0).then(|| t1.saturating_duration_since(t0));
        if create { creates.push(lat) } else { deletes.push(lat) }
    }
    Ok((creates, deletes))
}

fn row(out: &mut String, layer: &str, kind: &str, v: &[Option<Duration>]) {
    let seen: Vec<Duration> = v.iter().flatten().copied().collect();
    let ms = |p| if seen.is_empty() { "-".to_string() } else { format!("{:.1}", percentile_ms(&seen, p)) };
    out.push_str(&format!("| {layer} | {kind} | {} | {} | {} | {} | {} |\n", v.len(), v.len() - seen.len(), ms(50.0), ms(99.0), ms(100.0)));
}

fn report(opts: &VmFeedOptions, noop_ms: f64, raw: &Lat, seam: &Lat) -> String {
    let mut out = format!(
        "vm feed: {} share, {} edits per layer (creates and deletes in turn), {} vCPUs; agent round trip of a no-op: {noop_ms:.1} ms (median of 10)\n\n",
        opts.mode.name(),
        opts.edits,
        opts.cpus
    );
    out.push_str("| layer | edit | n | missed | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|---|---|\n");
    for (name, (c, d)) in [("raw share", raw), ("seamfs --feed", seam)] {
        row(&mut out, name, "create", c);
        row(&mut out, name, "delete", d);
        let all: Vec<Option<Duration>> = c.iter().chain(d).copied().collect();
        row(&mut out, name, "all", &all);
    }
    out
}
