//! Reads that end at the first short read (ADR 0044).
//!
//! A regular file reads short only at its end. Asking once more only finds that end, and on a
//! share read `O_DIRECT` (9p `cache=loose`) every ask is a round trip to the server: 9p's client
//! already reads on until the server returns nothing, so one short read has found the end.

use std::io;

/// Fills `buf` from `read_at(part, offset)` calls starting at `offset`, stopping at a short or
/// empty read; the bytes read. EINTR is asked again.
pub fn read_at_until_short(
    buf: &mut [u8],
    offset: u64,
    mut read_at: impl FnMut(&mut [u8], u64) -> io::Result<usize>,
) -> io::Result<usize> {
    let mut done = 0usize;
    while done < buf.len() {
        let asked = buf.len() - done;
        let n = match read_at(&mut buf[done..], offset + done as u64) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        done += n;
        if n < asked {
            break;
        }
    }
    Ok(done)
}

/// Fills `buf` from `r`, stopping at a short or empty read; the bytes read.
pub fn read_until_short(mut r: impl io::Read, buf: &mut [u8]) -> io::Result<usize> {
    read_at_until_short(buf, 0, |part, _| r.read(part))
}

/// The number of bytes `r` yields to its end, read in chunks of `chunk` bytes, stopping at a
/// short read.
pub fn len_until_short(mut r: impl io::Read, chunk: usize) -> io::Result<u64> {
    let mut buf = vec![0u8; chunk.max(1)];
    let mut n = 0u64;
    loop {
        let k = match r.read(&mut buf) {
            Ok(k) => k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        n += k as u64;
        if k < buf.len() {
            return Ok(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of `len` bytes that counts the calls made on it.
    struct Counted {
        len: u64,
        pos: u64,
        calls: usize,
        interrupt_first: bool,
    }

    impl Counted {
        fn new(len: u64, interrupt_first: bool) -> Counted {
            Counted {
                len,
                pos: 0,
                calls: 0,
                interrupt_first,
            }
        }

        fn read_at(&mut self, buf: &mut [u8], off: u64) -> io::Result<usize> {
            self.calls += 1;
            if std::mem::take(&mut self.interrupt_first) {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let n = (self.len.saturating_sub(off) as usize).min(buf.len());
            buf[..n].fill(b'x');
            Ok(n)
        }
    }

    impl io::Read for Counted {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.read_at(buf, self.pos)?;
            self.pos += n as u64;
            Ok(n)
        }
    }

    #[test]
    fn a_buffer_is_filled_until_a_short_read() {
        let mut f = Counted::new(21, true);
        let mut buf = vec![0u8; 4096];
        assert_eq!(read_until_short(&mut f, &mut buf).unwrap(), 21);
        assert_eq!(f.calls, 2, "the interrupted call, then one read that found the end");
        let mut f = Counted::new(5000, false);
        assert_eq!(read_until_short(&mut f, &mut buf).unwrap(), 4096, "a full buffer stops without asking for more");
        assert_eq!(f.calls, 1);
    }

    #[test]
    fn a_short_read_is_the_end_of_a_read_at() {
        // A ref of 41 bytes asked with a page: one call, not a second that finds the end.
        let mut f = Counted::new(41, false);
        let mut buf = vec![0u8; 4096];
        assert_eq!(
            read_at_until_short(&mut buf, 0, |b, o| f.read_at(b, o)).unwrap(),
            41
        );
        assert_eq!(f.calls, 1);
        // At the end already: one empty read.
        let mut f = Counted::new(41, false);
        assert_eq!(
            read_at_until_short(&mut buf, 41, |b, o| f.read_at(b, o)).unwrap(),
            0
        );
        assert_eq!(f.calls, 1);
    }

    #[test]
    fn a_full_read_at_stops_when_the_buffer_is_full_and_eintr_is_asked_again() {
        let mut f = Counted::new(8192, true);
        let mut buf = vec![0u8; 4096];
        assert_eq!(
            read_at_until_short(&mut buf, 4096, |b, o| f.read_at(b, o)).unwrap(),
            4096
        );
        assert_eq!(f.calls, 2, "the interrupted call and one more");
    }

    #[test]
    fn a_length_ends_at_the_first_short_read() {
        let mut f = Counted::new(100, false);
        assert_eq!(len_until_short(&mut f, 64).unwrap(), 100);
        assert_eq!(
            f.calls, 2,
            "64 bytes, then 36: the end, without a third read that finds 0"
        );
        let mut f = Counted::new(128, true);
        assert_eq!(len_until_short(&mut f, 64).unwrap(), 128);
        assert_eq!(
            f.calls, 4,
            "interrupted, 64, 64, then the empty read that finds the end"
        );
    }
}
