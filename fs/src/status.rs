//! Asking a mount who serves it: the root's `user.seamfs.status` attribute, with a timeout.
//!
//! The answer comes from the daemon itself, so it tells a live mount (with its pid and how it
//! runs) from a dead one (ENOTCONN) and from one whose daemon hangs (no answer in time).

use std::collections::BTreeMap;
use std::ffi::CString;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use crate::core::status_xattr::NAME;

/// What a mount said.
#[derive(Debug, Clone, PartialEq)]
pub enum Probe {
    /// It answered: its `key=value` facts (empty from a seamfs too old to have them).
    Alive(BTreeMap<String, String>),
    /// Its daemon is gone: "Transport endpoint is not connected".
    Dead,
    /// No answer within the timeout: the daemon hangs.
    Hung,
    /// Another error (the errno).
    Failed(i32),
}

impl Probe {
    /// The serving daemon's pid, when it said.
    pub fn pid(&self) -> Option<u32> {
        match self {
            Probe::Alive(m) => m.get("pid")?.parse().ok(),
            _ => None,
        }
    }

    /// "served by pid N" (or what is known), for messages.
    pub fn who(&self) -> String {
        match (self, self.pid()) {
            (_, Some(pid)) => format!("served by pid {pid}"),
            (Probe::Alive(_), None) => "served by a seamfs that does not say its pid".into(),
            (Probe::Dead, _) => "its daemon has died".into(),
            (Probe::Hung, _) => "its daemon does not answer".into(),
            (Probe::Failed(e), _) => format!("it answers {}", std::io::Error::from_raw_os_error(*e)),
        }
    }
}

/// Parses `key=value` lines.
pub fn parse(text: &str) -> BTreeMap<String, String> {
    text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn getxattr(path: &Path) -> Result<Vec<u8>, i32> {
    let p = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| libc::EINVAL)?;
    let name = CString::new(NAME).expect("no NUL in the name");
    let mut buf = vec![0u8; 4096];
    // SAFETY: valid C strings and a buffer of buf.len() bytes.
    let n = unsafe { libc::getxattr(p.as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO));
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// Asks the mount at `mnt`, waiting at most `timeout` (a hung daemon would block forever; the
/// asking thread is left behind then, and ends when the process does).
pub fn probe(mnt: &Path, timeout: Duration) -> Probe {
    let (tx, rx) = mpsc::channel();
    let path = mnt.to_path_buf();
    let spawned = crate::signals::spawn_blocked("seam-probe", move || {
        let _ = tx.send(getxattr(&path));
    });
    if spawned.is_err() {
        return Probe::Failed(libc::EAGAIN);
    }
    match rx.recv_timeout(timeout) {
        Ok(Ok(v)) => Probe::Alive(parse(&String::from_utf8_lossy(&v))),
        Ok(Err(libc::ENOTCONN)) => Probe::Dead,
        // Alive, but without the attribute (a seamfs from before it existed).
        Ok(Err(libc::ENODATA)) => Probe::Alive(BTreeMap::new()),
        Ok(Err(e)) => Probe::Failed(e),
        Err(_) => Probe::Hung,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_names_the_pid() {
        let p = Probe::Alive(parse("pid=42\nlower=/a=b\nnoise\n"));
        assert_eq!(p.pid(), Some(42));
        assert_eq!(p.who(), "served by pid 42");
        if let Probe::Alive(m) = &p {
            assert_eq!(m["lower"], "/a=b");
        }
        assert_eq!(Probe::Dead.who(), "its daemon has died");
    }
}
