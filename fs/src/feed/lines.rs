//! Reading feed lines from an fd with a timeout, bounded: an over-long line is skipped whole.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use super::addr::wait_readable;
use super::proto::MAX_LINE;

/// What the next read gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// One line, without its newline.
    Line(Vec<u8>),
    /// A line longer than `MAX_LINE` was skipped.
    TooLong,
    /// Nothing within the timeout.
    Timeout,
    /// The other end closed.
    Eof,
}

/// Lines from one connection.
#[derive(Debug)]
pub struct LineReader {
    fd: OwnedFd,
    buf: Vec<u8>,
    skipping: bool,
}

impl LineReader {
    /// Reads from `fd` (blocking or not: every read waits with `poll` first).
    pub fn new(fd: OwnedFd) -> LineReader {
        LineReader { fd, buf: Vec::new(), skipping: false }
    }

    /// The next line, or why there is none within `timeout`.
    pub fn next(&mut self, timeout: Duration) -> io::Result<Next> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).take(i).collect();
                if std::mem::take(&mut self.skipping) {
                    return Ok(Next::TooLong);
                }
                return Ok(Next::Line(line));
            }
            if self.buf.len() > MAX_LINE {
                self.buf.clear();
                self.skipping = true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !wait_readable(self.fd.as_raw_fd(), left)? {
                return Ok(Next::Timeout);
            }
            let mut chunk = [0u8; 8192];
            // SAFETY: valid fd and buffer of the stated length.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), chunk.as_mut_ptr().cast(), chunk.len()) };
            match n {
                0 => return Ok(Next::Eof),
                n if n > 0 => self.buf.extend_from_slice(&chunk[..n as usize]),
                _ => {
                    let e = io::Error::last_os_error();
                    if !matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) {
                        return Err(e);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    #[test]
    fn lines_timeouts_and_long_lines() {
        let (mut w, r) = UnixStream::pair().expect("socketpair");
        let mut lr = LineReader::new(r.into());
        w.write_all(b"one\ntw").unwrap();
        assert_eq!(lr.next(Duration::from_millis(100)).unwrap(), Next::Line(b"one".to_vec()));
        assert_eq!(lr.next(Duration::from_millis(50)).unwrap(), Next::Timeout, "half a line is not a line");
        w.write_all(b"o\n").unwrap();
        assert_eq!(lr.next(Duration::from_millis(100)).unwrap(), Next::Line(b"two".to_vec()));
        w.write_all(&vec![b'x'; MAX_LINE * 2]).unwrap();
        w.write_all(b"\nthree\n").unwrap();
        assert_eq!(lr.next(Duration::from_millis(200)).unwrap(), Next::TooLong);
        assert_eq!(lr.next(Duration::from_millis(100)).unwrap(), Next::Line(b"three".to_vec()));
        drop(w);
        assert_eq!(lr.next(Duration::from_millis(100)).unwrap(), Next::Eof);
    }
}
