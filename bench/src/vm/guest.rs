//! One booted guest: qemu (TCG; KVM on this machine cannot boot a stock kernel), virtiofsd for
//! the virtiofs modes, and the agent's channel, a virtio-serial port on a unix socket (this host
//! has no vhost-vsock). The guest has no network device at all. qemu and virtiofsd get SIGKILL
//! if the lab dies, and are ended by pid on drop.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use seam_box_agent::{Reply, Request};

use super::{Cache, ShareMode};
use crate::lab::LabError;

/// How long a boot may take before the run fails (TCG boots 6.1 in about 6 s when idle).
const BOOT_TIMEOUT: Duration = Duration::from_secs(180);
/// How long a first boot may take before it counts as hung and the guest is booted once more.
/// A CI run once met a guest that printed nothing and never answered in 180 s, while the same
/// boot takes 8-11 s on this machine under load: a hang of the emulated machine, not of what
/// the lab checks.
const FIRST_BOOT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one agent request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(600);
/// The guest's memory, MiB (also virtiofs's shared memory backend).
const MEM_MIB: u32 = 2048;

/// What to boot.
/// The host end of the guest's change-feed port, in the run dir: `seamd run --feed unix:…`.
pub const FEED_SOCK: &str = "feed.sock";
/// The guest end, as udev would name it (the init makes the link).
pub const GUEST_FEED: &str = "/dev/virtio-ports/seam.feed";

/// What to boot.
#[derive(Debug, Clone)]
pub struct BootSpec {
    /// The share mode.
    pub mode: ShareMode,
    /// The host directory the guest sees at `/share`.
    pub share_root: PathBuf,
    /// Where the console log, sockets and the initramfs live.
    pub run_dir: PathBuf,
    /// The initramfs to boot.
    pub initramfs: PathBuf,
    /// Virtual CPUs.
    pub cpus: u32,
    /// The share's server logs every request it serves into [`share_log`] (virtiofsd's
    /// `--log-level=debug`, qemu's `v9fs_*` trace events): how `vm counts` counts what each
    /// command cost the share.
    pub share_requests_logged: bool,
}

/// The share server's log in a run dir (virtiofsd's, or qemu's 9p trace).
pub fn share_log(run_dir: &Path, mode: ShareMode) -> PathBuf {
    run_dir.join(format!("virtiofsd-{}.log", mode.name()))
}

type Pending = Arc<Mutex<HashMap<u64, Sender<Reply>>>>;

/// A running guest.
#[derive(Debug)]
pub struct Guest {
    /// The share mode it booted with.
    pub mode: ShareMode,
    /// What the agent said at start (the guest's kernel release).
    pub info: String,
    /// The serial console's log.
    pub console: PathBuf,
    qemu: Child,
    virtiofsd: Option<Child>,
    tx: Mutex<UnixStream>,
    pending: Pending,
    next: AtomicU64,
}

/// A finished guest command.
#[derive(Debug, Clone)]
pub struct GuestRan {
    /// Exit code (-1 when a signal ended it).
    pub code: i32,
    /// The signal that ended it, or 0.
    pub signal: i32,
    /// The agent's SIGKILL reached it while it ran.
    pub killed: bool,
    /// Spawn to exit, by the guest's clock.
    pub elapsed: Duration,
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
}

fn die_with_parent(cmd: &mut Command) {
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Connects to qemu's listening chardev socket. qemu binds the socket before it listens on it,
/// so a connect in between is refused: tried again for up to 10 s while qemu runs.
fn connect_when_listening(p: &Path, qemu: &mut Child, log: &Path) -> Result<UnixStream, LabError> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match UnixStream::connect(p) {
            Ok(s) => return Ok(s),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused && Instant::now() < deadline => {
                if let Ok(Some(st)) = qemu.try_wait() {
                    return Err(LabError::new("connect to the agent's port", p, format!("qemu exited ({st}); its log {} ends:\n{}", log.display(), tail(log, 15))));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(LabError::new("connect to the agent's port", p, e)),
        }
    }
}

fn wait_for_path(p: &Path, child: &mut Child, what: &str, log: &Path) -> Result<(), LabError> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !p.exists() {
        if let Ok(Some(st)) = child.try_wait() {
            return Err(LabError::new(format!("start {what}"), p, format!("{what} exited ({st}); its log {} ends:\n{}", log.display(), tail(log, 15))));
        }
        if Instant::now() > deadline {
            return Err(LabError::new(format!("start {what}"), p, "socket did not appear within 30 s"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// The last `n` lines of a log file.
pub fn tail(p: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(p).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Why a boot failed: the guest never answered while qemu ran (worth one more boot), or anything else.
enum BootFailure {
    Hung(LabError),
    Failed(LabError),
}

impl From<LabError> for BootFailure {
    fn from(e: LabError) -> Self {
        BootFailure::Failed(e)
    }
}

impl Guest {
    /// Boots the guest and waits for its agent; a first boot that hangs (qemu running, no agent
    /// within [`FIRST_BOOT_TIMEOUT`]) is ended and the guest booted once more, saying so.
    pub fn boot(cache: &Cache, spec: &BootSpec) -> Result<Guest, LabError> {
        // `SEAM_LAB_FIRST_BOOT_S` shortens the first wait, to see the second boot work.
        let first = std::env::var("SEAM_LAB_FIRST_BOOT_S").ok().and_then(|v| v.parse().ok()).map_or(FIRST_BOOT_TIMEOUT, Duration::from_secs);
        match Self::boot_once(cache, spec, first) {
            Ok(g) => Ok(g),
            Err(BootFailure::Failed(e)) => Err(e),
            Err(BootFailure::Hung(e)) => {
                eprintln!("seam-lab: the {} guest hung at boot, booting it once more: {e}", spec.mode.name());
                match Self::boot_once(cache, spec, BOOT_TIMEOUT) {
                    Ok(g) => Ok(g),
                    Err(BootFailure::Hung(e) | BootFailure::Failed(e)) => Err(e),
                }
            }
        }
    }

    fn boot_once(cache: &Cache, spec: &BootSpec, timeout: Duration) -> Result<Guest, BootFailure> {
        let kernel = cache.kernel()?;
        let run = &spec.run_dir;
        let console = run.join(format!("console-{}.log", spec.mode.name()));
        let ctl = run.join("ctl.sock");
        let _ = std::fs::remove_file(&ctl);
        let mut virtiofsd = None;
        let mut qemu = Command::new("qemu-system-x86_64");
        qemu.args(["-accel", "tcg", "-cpu", "max", "-smp"]).arg(spec.cpus.to_string());
        qemu.args(["-m", &format!("{MEM_MIB}M"), "-display", "none", "-monitor", "none", "-nodefaults", "-no-reboot", "-nic", "none"]);
        qemu.arg("-serial").arg(format!("file:{}", console.display()));
        qemu.arg("-kernel").arg(&kernel.image).arg("-initrd").arg(&spec.initramfs);
        // The TSC, which the vDSO reads, as a real VM's clock is: under TCG the kernel would pick
        // the HPET and make every clock read a system call (lab.md, "The real box").
        qemu.arg("-append").arg(format!("console=ttyS0 panic=-1 loglevel=4 clocksource=tsc tsc=reliable seam.share={}", spec.mode.name()));
        qemu.args(["-device", "virtio-serial-pci", "-chardev"]).arg(format!("socket,id=ctl,path={},server=on,wait=off", ctl.display()));
        qemu.args(["-device", "virtserialport,chardev=ctl,name=seam.ctl"]);
        // The change feed's port: qemu connects (and reconnects) to seamd's `unix:` feed at
        // FEED_SOCK in the run dir; the guest reads `/dev/virtio-ports/seam.feed`.
        qemu.arg("-chardev").arg(format!("socket,id=feed,path={},reconnect=1", run.join(FEED_SOCK).display()));
        qemu.args(["-device", "virtserialport,chardev=feed,name=seam.feed"]);
        if spec.mode.is_virtiofs() {
            let sock = run.join("virtiofs.sock");
            let _ = std::fs::remove_file(&sock);
            let log = share_log(run, spec.mode);
            let out = std::fs::File::create(&log).map_err(|e| LabError::new("create log", &log, e))?;
            let err = out.try_clone().map_err(|e| LabError::new("clone log handle", &log, e))?;
            let bin = cache.virtiofsd();
            let mut v = Command::new(&bin);
            v.arg(format!("--socket-path={}", sock.display()))
                .arg(format!("--shared-dir={}", spec.share_root.display()))
                .args(["--cache=auto", "--sandbox=none"])
                .arg(if spec.mode == ShareMode::Virtiofs { "--inode-file-handles=mandatory" } else { "--inode-file-handles=never" })
                .args(spec.share_requests_logged.then_some("--log-level=debug"))
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err);
            die_with_parent(&mut v);
            let mut child = v.spawn().map_err(|e| LabError::new("start virtiofsd", &bin, format!("{e}: run `seam-lab vm setup`")))?;
            wait_for_path(&sock, &mut child, "virtiofsd", &log)?;
            virtiofsd = Some(child);
            qemu.arg("-chardev").arg(format!("socket,id=vfs,path={}", sock.display()));
            qemu.args(["-device", "vhost-user-fs-pci,chardev=vfs,tag=share"]);
            qemu.args(["-object", &format!("memory-backend-memfd,id=mem,size={MEM_MIB}M,share=on"), "-numa", "node,memdev=mem"]);
        } else {
            qemu.arg("-fsdev").arg(format!("local,id=fs0,path={},security_model=passthrough", spec.share_root.display()));
            qemu.args(["-device", "virtio-9p-pci,fsdev=fs0,mount_tag=share"]);
            if spec.share_requests_logged {
                // qemu's own 9p server traces every request it serves (the `log` trace backend).
                qemu.args(["-trace", "enable=v9fs_*"]).arg("-D").arg(share_log(run, spec.mode));
            }
        }
        let qlog = run.join(format!("qemu-{}.log", spec.mode.name()));
        let out = std::fs::File::create(&qlog).map_err(|e| LabError::new("create log", &qlog, e))?;
        let err = out.try_clone().map_err(|e| LabError::new("clone log handle", &qlog, e))?;
        qemu.stdin(Stdio::null()).stdout(out).stderr(err);
        die_with_parent(&mut qemu);
        let mut child = qemu.spawn().map_err(|e| LabError::new("start qemu-system-x86_64", run, format!("{e}: run `seam-lab vm setup`")))?;
        if let Err(e) = wait_for_path(&ctl, &mut child, "qemu", &qlog) {
            end(&mut child);
            if let Some(mut v) = virtiofsd {
                end(&mut v);
            }
            return Err(e.into());
        }
        let stream = match connect_when_listening(&ctl, &mut child, &qlog) {
            Ok(s) => s,
            Err(e) => {
                end(&mut child);
                if let Some(mut v) = virtiofsd {
                    end(&mut v);
                }
                return Err(e.into());
            }
        };
        let pending: Pending = Arc::new(Mutex::new(HashMap::new()));
        let (ready_tx, ready_rx) = channel();
        let rx = stream.try_clone().map_err(|e| LabError::new("clone socket", &ctl, e))?;
        {
            let pending = Arc::clone(&pending);
            std::thread::spawn(move || read_replies(rx, pending, ready_tx));
        }
        let mut g = Guest { mode: spec.mode, info: String::new(), console, qemu: child, virtiofsd, tx: Mutex::new(stream), pending, next: AtomicU64::new(1) };
        // On failure `g` is dropped here: qemu and virtiofsd are ended by pid.
        g.info = g.await_ready(&ready_rx, timeout, &qlog, &share_log(run, spec.mode))?;
        Ok(g)
    }

    fn await_ready(&mut self, ready: &Receiver<Vec<u8>>, timeout: Duration, qlog: &Path, slog: &Path) -> Result<String, BootFailure> {
        let deadline = Instant::now() + timeout;
        loop {
            match ready.recv_timeout(Duration::from_millis(200)) {
                Ok(info) => return Ok(String::from_utf8_lossy(&info).into_owned()),
                Err(_) if Instant::now() > deadline => {
                    let why = format!(
                        "no agent within {timeout:?}; console ends:\n{}\nqemu's log ends:\n{}\nthe share server's log ends:\n{}",
                        tail(&self.console, 25),
                        tail(qlog, 10),
                        tail(slog, 10)
                    );
                    return Err(BootFailure::Hung(LabError::new("boot guest", &self.console, why)));
                }
                Err(_) => {
                    if let Ok(Some(st)) = self.qemu.try_wait() {
                        let why = format!("qemu exited ({st}) before the agent answered; console ends:\n{}\nqemu's log ends:\n{}", tail(&self.console, 25), tail(qlog, 10));
                        return Err(BootFailure::Failed(LabError::new("boot guest", &self.console, why)));
                    }
                }
            }
        }
    }

    fn request(&self, make: impl FnOnce(u64) -> Request) -> Result<Reply, LabError> {
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = channel();
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).insert(id, tx);
        let mut line = make(id).to_line();
        line.push('\n');
        {
            let mut s = self.tx.lock().unwrap_or_else(|p| p.into_inner());
            s.write_all(line.as_bytes()).map_err(|e| LabError::new("send to the agent", &self.console, e))?;
        }
        rx.recv_timeout(REQUEST_TIMEOUT).map_err(|_| {
            self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
            LabError::new("await the agent", &self.console, format!("no answer to request {id}; console ends:\n{}", tail(&self.console, 15)))
        })
    }

    /// Runs `argv` in the guest in `cwd` with exactly `env`, killed after `kill_after` if given.
    pub fn run(&self, cwd: &Path, argv: &[&[u8]], env: &[(&str, &str)], kill_after: Option<Duration>) -> Result<GuestRan, LabError> {
        let req = |id| Request::Run {
            id,
            kill_us: kill_after.map(|d| d.as_micros().max(1) as u64).unwrap_or(0),
            cwd: cwd.as_os_str().as_bytes().to_vec(),
            argv: argv.iter().map(|a| a.to_vec()).collect(),
            env: env.iter().map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec())).collect(),
        };
        match self.request(req)? {
            Reply::Done { code, signal, killed, elapsed_us, stdout, stderr, .. } => {
                Ok(GuestRan { code, signal, killed, elapsed: Duration::from_micros(elapsed_us), stdout, stderr })
            }
            Reply::Err { why, .. } => Err(LabError::new("run in the guest", cwd, String::from_utf8_lossy(&why))),
            Reply::Ready(_) => Err(LabError::new("run in the guest", cwd, "the agent restarted")),
        }
    }

    /// A shell command in the guest (`sh -c`), in `/`.
    pub fn sh(&self, script: &str) -> Result<GuestRan, LabError> {
        self.run(Path::new("/"), &[b"/bin/sh", b"-c", script.as_bytes()], &GUEST_ENV, None)
    }

    /// Writes (or appends to) a guest file, creating its parent.
    pub fn write(&self, path: &Path, data: &[u8], append: bool) -> Result<(), LabError> {
        let req = |id| Request::Write { id, path: path.as_os_str().as_bytes().to_vec(), data: data.to_vec(), append };
        self.simple(req, "write in the guest", path)
    }

    /// Unlinks a guest file.
    pub fn remove(&self, path: &Path) -> Result<(), LabError> {
        self.simple(|id| Request::Remove { id, path: path.as_os_str().as_bytes().to_vec() }, "remove in the guest", path)
    }

    fn simple(&self, make: impl FnOnce(u64) -> Request, op: &str, path: &Path) -> Result<(), LabError> {
        match self.request(make)? {
            Reply::Done { .. } => Ok(()),
            Reply::Err { why, .. } => Err(LabError::new(op, path, String::from_utf8_lossy(&why))),
            Reply::Ready(_) => Err(LabError::new(op, path, "the agent restarted")),
        }
    }

    /// Ends the agent (init then unmounts the share and powers off) and waits for qemu.
    pub fn shutdown(mut self) -> Result<(), LabError> {
        let asked = self.request(|id| Request::Quit { id });
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut clean = false;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.qemu.try_wait() {
                clean = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.stop_children();
        asked?;
        if !clean {
            return Err(LabError::new("power off guest", &self.console, format!("qemu did not exit within 60 s; console ends:\n{}", tail(&self.console, 15))));
        }
        Ok(())
    }

    fn stop_children(&mut self) {
        end(&mut self.qemu);
        if let Some(v) = self.virtiofsd.as_mut() {
            end(v);
        }
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        self.stop_children();
    }
}

/// The environment of every guest command.
pub const GUEST_ENV: [(&str, &str); 2] = [("PATH", "/usr/local/sbin:/usr/local/bin:/usr/bin:/bin"), ("HOME", "/root")];

/// `K=V ` for each of the host's variables `keys` that is set to a value safe on a guest shell
/// line (letters, digits, `_,=:`): how the host's `SEAMFS_LOG` filter and `SEAMFS_LOG_SPANS`
/// reach the guest's seamfs.
pub fn forwarded_env(keys: &[&str]) -> String {
    keys.iter()
        .filter_map(|k| {
            let v = std::env::var(k).ok()?;
            v.bytes().all(|b| b.is_ascii_alphanumeric() || b"_,=:".contains(&b)).then(|| format!("{k}={v} "))
        })
        .collect()
}

/// SIGKILL by pid if still running, then reap.
fn end(c: &mut Child) {
    if let Ok(None) = c.try_wait() {
        let _ = c.kill();
    }
    let _ = c.wait();
}

fn read_replies(rx: UnixStream, pending: Pending, ready: Sender<Vec<u8>>) {
    let mut r = BufReader::with_capacity(1 << 20, rx);
    let mut line = String::new();
    loop {
        line.clear();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let reply = match Reply::parse(line.trim_end_matches('\n')) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("seam-lab vm: bad line from the agent: {e}");
                continue;
            }
        };
        let id = match &reply {
            Reply::Ready(info) => {
                let _ = ready.send(info.clone());
                continue;
            }
            Reply::Done { id, .. } | Reply::Err { id, .. } => *id,
        };
        if let Some(tx) = pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&id) {
            let _ = tx.send(reply);
        }
    }
    // The guest is gone: every waiter fails now rather than at its timeout.
    pending.lock().unwrap_or_else(|p| p.into_inner()).clear();
}
