//! The wire protocol between `seam-lab vm` on the host and `seam-box-agent` in the guest.
//!
//! One message per line over a virtio-serial port; fields are separated by one space, and every
//! field that can hold arbitrary bytes (paths, arguments, output) is hex, so no byte of git's
//! output can break the framing. A line longer than [`MAX_LINE`] is refused by the reader.
//!
//! Host to guest:
//! - `run ID KILL_US CWD N ARG… M KEY VALUE…`: run ARG… in CWD with the environment cleared but
//!   for KEY=VALUE pairs; SIGKILL it KILL_US µs after spawn if still running (0: never).
//! - `write ID PATH DATA` / `append ID PATH DATA`: write (or append) DATA to PATH, creating its
//!   parent (a few tries, as another side may remove the directory in between).
//! - `remove ID PATH`: unlink PATH.
//! - `quit ID`: answer, then exit.
//!
//! Guest to host: `ready INFO` once, then `done ID CODE SIGNAL KILLED ELAPSED_US STDOUT STDERR`
//! (CODE -1 when a signal ended it) or `err ID WHY` for each request.

/// Longest line either side accepts (git's output for one lab command is far smaller).
pub const MAX_LINE: usize = 64 << 20;

/// Lowercase hex of `b`.
pub fn hex(b: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(b.len() * 2 + 1);
    for &x in b {
        s.push(D[(x >> 4) as usize] as char);
        s.push(D[(x & 15) as usize] as char);
    }
    if s.is_empty() {
        // An empty field must still be a token.
        s.push('-');
    }
    s
}

/// Bytes of a [`hex`] field.
pub fn unhex(s: &str) -> Result<Vec<u8>, String> {
    if s == "-" {
        return Ok(Vec::new());
    }
    let b = s.as_bytes();
    if b.len() % 2 != 0 {
        return Err(format!("odd-length hex field ({} chars)", b.len()));
    }
    let nib = |c: u8| match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        _ => Err(format!("not a hex digit: {:?}", c as char)),
    };
    b.chunks(2).map(|p| Ok(nib(p[0])? << 4 | nib(p[1])?)).collect()
}

/// A request to the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Run a program.
    Run {
        /// Request id.
        id: u64,
        /// SIGKILL after this many µs (0: never).
        kill_us: u64,
        /// Working directory.
        cwd: Vec<u8>,
        /// Program and arguments.
        argv: Vec<Vec<u8>>,
        /// The whole environment.
        env: Vec<(Vec<u8>, Vec<u8>)>,
    },
    /// Write a file.
    Write {
        /// Request id.
        id: u64,
        /// Absolute path in the guest.
        path: Vec<u8>,
        /// Contents.
        data: Vec<u8>,
        /// Append rather than replace.
        append: bool,
    },
    /// Unlink a file.
    Remove {
        /// Request id.
        id: u64,
        /// Absolute path in the guest.
        path: Vec<u8>,
    },
    /// Answer, then exit.
    Quit {
        /// Request id.
        id: u64,
    },
}

/// An answer from the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// The agent is up; INFO says what it runs on.
    Ready(Vec<u8>),
    /// A request finished.
    Done {
        /// Request id.
        id: u64,
        /// Exit code, or -1 when a signal ended it.
        code: i32,
        /// The signal that ended it (0: none).
        signal: i32,
        /// The agent's SIGKILL reached it while it ran.
        killed: bool,
        /// From spawn to exit, in the guest's clock.
        elapsed_us: u64,
        /// Standard output.
        stdout: Vec<u8>,
        /// Standard error.
        stderr: Vec<u8>,
    },
    /// A request could not be carried out.
    Err {
        /// Request id.
        id: u64,
        /// Why.
        why: Vec<u8>,
    },
}

impl Request {
    /// The request's line, without the newline.
    pub fn to_line(&self) -> String {
        match self {
            Request::Run { id, kill_us, cwd, argv, env } => {
                let mut s = format!("run {id} {kill_us} {} {}", hex(cwd), argv.len());
                for a in argv {
                    s.push(' ');
                    s.push_str(&hex(a));
                }
                s.push_str(&format!(" {}", env.len()));
                for (k, v) in env {
                    s.push_str(&format!(" {} {}", hex(k), hex(v)));
                }
                s
            }
            Request::Write { id, path, data, append } => {
                format!("{} {id} {} {}", if *append { "append" } else { "write" }, hex(path), hex(data))
            }
            Request::Remove { id, path } => format!("remove {id} {}", hex(path)),
            Request::Quit { id } => format!("quit {id}"),
        }
    }

    /// Parses a request line.
    pub fn parse(line: &str) -> Result<Request, String> {
        let mut t = Tokens(line.split(' '));
        match t.word()? {
            "run" => {
                let id = t.num()?;
                let kill_us = t.num()?;
                let cwd = t.bytes()?;
                let n = t.num()? as usize;
                let argv = (0..n).map(|_| t.bytes()).collect::<Result<Vec<_>, _>>()?;
                if argv.is_empty() {
                    return Err("run with no program".into());
                }
                let m = t.num()? as usize;
                let env = (0..m).map(|_| Ok((t.bytes()?, t.bytes()?))).collect::<Result<Vec<_>, String>>()?;
                t.end()?;
                Ok(Request::Run { id, kill_us, cwd, argv, env })
            }
            w @ ("write" | "append") => {
                let r = Request::Write { id: t.num()?, path: t.bytes()?, data: t.bytes()?, append: w == "append" };
                t.end()?;
                Ok(r)
            }
            "remove" => {
                let r = Request::Remove { id: t.num()?, path: t.bytes()? };
                t.end()?;
                Ok(r)
            }
            "quit" => {
                let r = Request::Quit { id: t.num()? };
                t.end()?;
                Ok(r)
            }
            other => Err(format!("unknown request {other:?}")),
        }
    }
}

impl Reply {
    /// The reply's line, without the newline.
    pub fn to_line(&self) -> String {
        match self {
            Reply::Ready(info) => format!("ready {}", hex(info)),
            Reply::Done { id, code, signal, killed, elapsed_us, stdout, stderr } => {
                format!("done {id} {code} {signal} {} {elapsed_us} {} {}", u8::from(*killed), hex(stdout), hex(stderr))
            }
            Reply::Err { id, why } => format!("err {id} {}", hex(why)),
        }
    }

    /// Parses a reply line.
    pub fn parse(line: &str) -> Result<Reply, String> {
        let mut t = Tokens(line.split(' '));
        let r = match t.word()? {
            "ready" => Reply::Ready(t.bytes()?),
            "done" => Reply::Done {
                id: t.num()?,
                code: t.int()?,
                signal: t.int()?,
                killed: t.num()? != 0,
                elapsed_us: t.num()?,
                stdout: t.bytes()?,
                stderr: t.bytes()?,
            },
            "err" => Reply::Err { id: t.num()?, why: t.bytes()? },
            other => return Err(format!("unknown reply {other:?}")),
        };
        t.end()?;
        Ok(r)
    }
}

struct Tokens<'a>(std::str::Split<'a, char>);

impl<'a> Tokens<'a> {
    fn word(&mut self) -> Result<&'a str, String> {
        self.0.next().filter(|w| !w.is_empty()).ok_or_else(|| "line ends early".to_string())
    }
    fn num(&mut self) -> Result<u64, String> {
        let w = self.word()?;
        w.parse().map_err(|_| format!("not a number: {w:?}"))
    }
    fn int(&mut self) -> Result<i32, String> {
        let w = self.word()?;
        w.parse().map_err(|_| format!("not a number: {w:?}"))
    }
    fn bytes(&mut self) -> Result<Vec<u8>, String> {
        unhex(self.word()?)
    }
    fn end(&mut self) -> Result<(), String> {
        match self.0.next() {
            None => Ok(()),
            Some(w) => Err(format!("trailing field {w:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_replies_round_trip() {
        let r = Request::Run {
            id: 7,
            kill_us: 1500,
            cwd: b"/share/a b".to_vec(),
            argv: vec![b"git".to_vec(), b"commit".to_vec(), b"-m".to_vec(), b"x\ny \xff".to_vec(), Vec::new()],
            env: vec![(b"HOME".to_vec(), b"/root".to_vec()), (b"E".to_vec(), Vec::new())],
        };
        assert_eq!(Request::parse(&r.to_line()), Ok(r));
        for append in [false, true] {
            let w = Request::Write { id: 1, path: b"/x".to_vec(), data: Vec::new(), append };
            assert_eq!(Request::parse(&w.to_line()), Ok(w));
        }
        let rm = Request::Remove { id: 2, path: b"/y".to_vec() };
        assert_eq!(Request::parse(&rm.to_line()), Ok(rm));
        let d = Reply::Done { id: 3, code: -1, signal: 9, killed: true, elapsed_us: 12, stdout: b"[main 0a] x\n".to_vec(), stderr: Vec::new() };
        assert_eq!(Reply::parse(&d.to_line()), Ok(d));
        assert_eq!(Reply::parse(&Reply::Ready(b"6.1".to_vec()).to_line()), Ok(Reply::Ready(b"6.1".to_vec())));
    }

    #[test]
    fn malformed_lines_are_refused() {
        for bad in ["", "run", "run 1 0 2f 0 0", "write 1 2f", "write 1 2f 0g", "remove 1", "remove 1 2f 2f", "quit 1 2", "done x", "nope 1", "write 1 2f 123"] {
            assert!(Request::parse(bad).is_err() && Reply::parse(bad).is_err(), "{bad:?} parsed");
        }
    }
}
