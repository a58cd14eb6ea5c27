//! Where a feed runs: `unix:PATH`, `vsock:CID:PORT`, or the path of a character device (a
//! virtio-serial port such as `/dev/virtio-ports/seam.feed`). seamd listens on the first two and
//! writes to the third; seamfs connects to the first two and reads the third.

use std::io;
use std::os::fd::{OwnedFd, RawFd};
#[cfg(target_os = "linux")]
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::PathBuf;
use std::time::Duration;

/// A feed address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FeedAddr {
    /// A unix stream socket.
    Unix(PathBuf),
    /// An AF_VSOCK stream socket (Linux).
    Vsock {
        /// Context id (seamfs: the host's, 2; seamd: any, `u32::MAX`).
        cid: u32,
        /// Port.
        port: u32,
    },
    /// A character device (or FIFO) the feed is written to and read from.
    Device(PathBuf),
}

impl std::str::FromStr for FeedAddr {
    type Err = String;

    fn from_str(s: &str) -> Result<FeedAddr, String> {
        if let Some(p) = s.strip_prefix("unix:") {
            if p.is_empty() {
                return Err("unix: needs a socket path (unix:/run/seamd.feed)".into());
            }
            return Ok(FeedAddr::Unix(PathBuf::from(p)));
        }
        if let Some(rest) = s.strip_prefix("vsock:") {
            let (cid, port) = rest.split_once(':').ok_or("vsock: needs CID:PORT (vsock:2:7070)")?;
            let cid = cid.parse().map_err(|_| format!("vsock: CID `{cid}` is not a number"))?;
            let port = port.parse().map_err(|_| format!("vsock: port `{port}` is not a number"))?;
            return Ok(FeedAddr::Vsock { cid, port });
        }
        if s.starts_with('/') {
            return Ok(FeedAddr::Device(PathBuf::from(s)));
        }
        Err(format!("`{s}` is not a feed address: unix:PATH, vsock:CID:PORT or /dev/... (a character device)"))
    }
}

impl std::fmt::Display for FeedAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FeedAddr::Unix(p) => write!(f, "unix:{}", p.display()),
            FeedAddr::Vsock { cid, port } => write!(f, "vsock:{cid}:{port}"),
            FeedAddr::Device(p) => write!(f, "{}", p.display()),
        }
    }
}

/// Opens the reading end: connects a socket, or opens the device for reading.
pub fn connect(addr: &FeedAddr) -> io::Result<OwnedFd> {
    match addr {
        FeedAddr::Unix(p) => Ok(std::os::unix::net::UnixStream::connect(p)?.into()),
        FeedAddr::Vsock { cid, port } => vsock_connect(*cid, *port),
        FeedAddr::Device(p) => {
            use std::os::unix::fs::OpenOptionsExt;
            let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY).open(p)?;
            Ok(f.into())
        }
    }
}

/// A listening vsock socket (seamd's side).
pub fn vsock_listen(cid: u32, port: u32) -> io::Result<OwnedFd> {
    vsock::listen(cid, port)
}

fn vsock_connect(cid: u32, port: u32) -> io::Result<OwnedFd> {
    vsock::connect(cid, port)
}

/// AF_VSOCK, Linux's host-guest socket.
#[cfg(target_os = "linux")]
mod vsock {
    use super::*;

    fn socket() -> io::Result<OwnedFd> {
        // SAFETY: plain socket(2); the fd is owned at once.
        let fd = unsafe { libc::socket(libc::AF_VSOCK, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh socket we own.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    fn addr(cid: u32, port: u32) -> libc::sockaddr_vm {
        // SAFETY: sockaddr_vm is plain data.
        let mut a: libc::sockaddr_vm = unsafe { std::mem::zeroed() };
        a.svm_family = libc::AF_VSOCK as libc::sa_family_t;
        a.svm_cid = cid;
        a.svm_port = port;
        a
    }

    pub(super) fn connect(cid: u32, port: u32) -> io::Result<OwnedFd> {
        let s = socket()?;
        let a = addr(cid, port);
        // SAFETY: valid socket and address of the stated size.
        let r = unsafe { libc::connect(s.as_raw_fd(), &a as *const _ as *const libc::sockaddr, std::mem::size_of_val(&a) as u32) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(s)
    }

    pub(super) fn listen(cid: u32, port: u32) -> io::Result<OwnedFd> {
        let s = socket()?;
        let a = addr(cid, port);
        // SAFETY: valid socket and address of the stated size.
        let r = unsafe { libc::bind(s.as_raw_fd(), &a as *const _ as *const libc::sockaddr, std::mem::size_of_val(&a) as u32) };
        // SAFETY: valid socket.
        if r < 0 || unsafe { libc::listen(s.as_raw_fd(), 16) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(s)
    }
}

/// No AF_VSOCK off Linux (a macOS host reaches a box over a unix socket its VM exposes, or a
/// serial device): said plainly, so `--feed vsock:...` fails at start, not later.
#[cfg(not(target_os = "linux"))]
mod vsock {
    use super::*;

    fn unsupported(cid: u32, port: u32) -> io::Error {
        io::Error::new(io::ErrorKind::Unsupported, format!("vsock:{cid}:{port}: vsock is not available on this host"))
    }

    pub(super) fn connect(cid: u32, port: u32) -> io::Result<OwnedFd> {
        Err(unsupported(cid, port))
    }

    pub(super) fn listen(cid: u32, port: u32) -> io::Result<OwnedFd> {
        Err(unsupported(cid, port))
    }
}

/// Waits up to `timeout` for `fd` to be readable; false on timeout.
pub fn wait_readable(fd: RawFd, timeout: Duration) -> io::Result<bool> {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    loop {
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, ms) };
        if r >= 0 {
            return Ok(r > 0);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse() {
        assert_eq!("unix:/run/f".parse(), Ok(FeedAddr::Unix("/run/f".into())));
        assert_eq!("vsock:2:7070".parse(), Ok(FeedAddr::Vsock { cid: 2, port: 7070 }));
        assert_eq!("/dev/virtio-ports/seam.feed".parse(), Ok(FeedAddr::Device("/dev/virtio-ports/seam.feed".into())));
        for bad in ["unix:", "vsock:2", "vsock:x:1", "tcp:1.2.3.4:5", "relative/path"] {
            assert!(bad.parse::<FeedAddr>().is_err(), "{bad}");
        }
    }
}
