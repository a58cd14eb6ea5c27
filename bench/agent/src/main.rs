//! `seam-box-agent [PORT]`: runs in the lab's qemu guest, reads requests from a virtio-serial port
//! (default: the port named `seam.ctl`) and runs each in its own thread, so the host can keep
//! several box actors going and kill one at a chosen moment, timed by the guest's own clock.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use seam_box_agent::{Reply, Request, MAX_LINE};

/// The port's name as qemu's `virtserialport,name=` gives it.
const PORT_NAME: &str = "seam.ctl";

fn main() {
    let port = match std::env::args_os().nth(1) {
        Some(p) => PathBuf::from(p),
        None => match find_port(PORT_NAME) {
            Ok(p) => p,
            Err(e) => fail(&format!("find virtio-serial port {PORT_NAME}: {e}")),
        },
    };
    let rx = OpenOptions::new().read(true).write(true).open(&port).unwrap_or_else(|e| fail(&format!("open {}: {e}", port.display())));
    let tx = Arc::new(Mutex::new(rx.try_clone().unwrap_or_else(|e| fail(&format!("dup {}: {e}", port.display())))));
    send(&tx, &Reply::Ready(info().into_bytes()));
    let mut lines = BufReader::with_capacity(1 << 20, rx);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match lines.by_ref().take(MAX_LINE as u64 + 1).read_until(b'\n', &mut buf) {
            Ok(0) => std::thread::sleep(Duration::from_millis(50)), // host not connected yet
            Ok(_) if buf.last() != Some(&b'\n') => eprintln!("seam-box-agent: dropped a line over {MAX_LINE} bytes"),
            Ok(_) => {
                let line = String::from_utf8_lossy(&buf[..buf.len() - 1]).into_owned();
                match Request::parse(&line) {
                    Ok(Request::Quit { id }) => {
                        send(&tx, &Reply::Done { id, code: 0, signal: 0, killed: false, elapsed_us: 0, stdout: Vec::new(), stderr: Vec::new() });
                        std::process::exit(0);
                    }
                    Ok(req) => {
                        let tx = Arc::clone(&tx);
                        std::thread::spawn(move || send(&tx, &handle(req)));
                    }
                    Err(e) => eprintln!("seam-box-agent: bad request: {e}"),
                }
            }
            Err(e) => fail(&format!("read {}: {e}", port.display())),
        }
    }
}

fn fail(why: &str) -> ! {
    eprintln!("seam-box-agent: {why}");
    std::process::exit(1);
}

/// `/dev/vportNpM` of the port called `name` (udev's `/dev/virtio-ports/NAME` link is absent in
/// a busybox initramfs).
fn find_port(name: &str) -> std::io::Result<PathBuf> {
    for e in std::fs::read_dir("/sys/class/virtio-ports")? {
        let e = e?;
        if std::fs::read_to_string(e.path().join("name")).map(|n| n.trim() == name).unwrap_or(false) {
            return Ok(Path::new("/dev").join(e.file_name()));
        }
    }
    Err(std::io::Error::new(std::io::ErrorKind::NotFound, "no such port in /sys/class/virtio-ports"))
}

fn info() -> String {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("kernel {}", release.trim())
}

fn send(tx: &Mutex<File>, r: &Reply) {
    let mut line = r.to_line();
    line.push('\n');
    let mut f = tx.lock().unwrap_or_else(|p| p.into_inner());
    if let Err(e) = f.write_all(line.as_bytes()) {
        eprintln!("seam-box-agent: write reply: {e}");
    }
}

fn handle(req: Request) -> Reply {
    match req {
        Request::Run { id, kill_us, cwd, argv, env } => run(id, kill_us, &cwd, &argv, &env),
        Request::Write { id, path, data, append } => done(id, write_file(Path::new(std::ffi::OsStr::from_bytes(&path)), &data, append)),
        Request::Remove { id, path } => {
            let p = Path::new(std::ffi::OsStr::from_bytes(&path));
            done(id, std::fs::remove_file(p).map_err(|e| format!("remove {}: {e}", p.display())))
        }
        Request::Quit { id } => Reply::Err { id, why: b"quit is handled by the reader".to_vec() },
    }
}

fn done(id: u64, r: Result<(), String>) -> Reply {
    match r {
        Ok(()) => Reply::Done { id, code: 0, signal: 0, killed: false, elapsed_us: 0, stdout: Vec::new(), stderr: Vec::new() },
        Err(e) => Reply::Err { id, why: e.into_bytes() },
    }
}

fn run(id: u64, kill_us: u64, cwd: &[u8], argv: &[Vec<u8>], env: &[(Vec<u8>, Vec<u8>)]) -> Reply {
    let os = |b: &Vec<u8>| std::ffi::OsString::from(std::ffi::OsStr::from_bytes(b));
    let mut cmd = Command::new(os(&argv[0]));
    cmd.args(argv[1..].iter().map(os))
        .current_dir(std::ffi::OsStr::from_bytes(cwd))
        .env_clear()
        .envs(env.iter().map(|(k, v)| (os(k), os(v))))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Reply::Err { id, why: format!("spawn {}: {e}", String::from_utf8_lossy(&argv[0])).into_bytes() },
    };
    let mut killed = false;
    if kill_us > 0 {
        let kill_at = Duration::from_micros(kill_us);
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if started.elapsed() >= kill_at => {
                    // Still running: kill -9, what a crashed or OOM-killed tool looks like.
                    killed = child.kill().is_ok();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_micros(200)),
                Err(e) => return Reply::Err { id, why: format!("wait: {e}").into_bytes() },
            }
        }
    }
    match child.wait_with_output() {
        Ok(out) => {
            let signal = out.status.signal().unwrap_or(0);
            // A kill that raced a normal exit did not interrupt anything.
            let killed = killed && signal != 0;
            Reply::Done {
                id,
                code: out.status.code().unwrap_or(-1),
                signal,
                killed,
                elapsed_us: started.elapsed().as_micros() as u64,
                stdout: out.stdout,
                stderr: out.stderr,
            }
        }
        Err(e) => Reply::Err { id, why: format!("collect output: {e}").into_bytes() },
    }
}

/// Writes `path`, creating its parent first: another side's `reset --hard`, checkout or rebase
/// may remove the directory between the two steps (so a few tries).
fn write_file(path: &Path, data: &[u8], append: bool) -> Result<(), String> {
    let mut tries = 0;
    loop {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("create dir {}: {e}", parent.display()))?;
        }
        let written = std::fs::OpenOptions::new().create(true).write(true).append(append).truncate(!append).open(path).and_then(|mut f| f.write_all(data));
        match written {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < 5 => tries += 1,
            Err(e) => return Err(format!("write {}: {e}", path.display())),
        }
    }
}
