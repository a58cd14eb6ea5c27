//! A trace of one case's steps and their outcomes, rendered so that equal behaviour gives
//! equal text (inode numbers, devices and times the case did not set are left out).

use std::fmt::Write as _;
use std::os::fd::OwnedFd;
use std::path::Path;

use seam_tests::listing::kind_char;
use seam_tests::sys::{self, Sys};

/// `(step, outcome)` pairs in order.
#[derive(Debug, Default)]
pub struct Trace {
    steps: Vec<(String, String)>,
}

/// How an `Ok` value is rendered.
pub trait Show {
    /// The rendering.
    fn show(&self) -> String;
}

impl Show for () {
    fn show(&self) -> String {
        "ok".into()
    }
}
impl Show for usize {
    fn show(&self) -> String {
        self.to_string()
    }
}
impl Show for i64 {
    fn show(&self) -> String {
        self.to_string()
    }
}
impl Show for OwnedFd {
    fn show(&self) -> String {
        "fd".into()
    }
}
impl Show for String {
    fn show(&self) -> String {
        self.clone()
    }
}
impl Show for Vec<String> {
    fn show(&self) -> String {
        format!("{self:?}")
    }
}
impl Show for Vec<u8> {
    fn show(&self) -> String {
        bytes(self)
    }
}
impl Show for Vec<(String, u8)> {
    fn show(&self) -> String {
        let items: Vec<String> = self.iter().map(|(n, t)| format!("{n}:{}", dtype(*t))).collect();
        if items.len() <= 12 {
            items.join(" ")
        } else {
            format!(
                "{} entries, hash {:016x}: {} ... {}",
                items.len(),
                fnv(items.join("\n").as_bytes()),
                items[..3].join(" "),
                items[items.len() - 3..].join(" ")
            )
        }
    }
}

fn dtype(t: u8) -> &'static str {
    match t {
        libc::DT_DIR => "dir",
        libc::DT_REG => "reg",
        libc::DT_LNK => "lnk",
        libc::DT_FIFO => "fifo",
        libc::DT_SOCK => "sock",
        libc::DT_CHR => "chr",
        libc::DT_BLK => "blk",
        _ => "unknown",
    }
}

/// FNV-1a, to name long contents compactly.
pub fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, c| (h ^ *c as u64).wrapping_mul(0x100_0000_01b3))
}

/// Short contents as escaped text, long ones as length and hash.
pub fn bytes(b: &[u8]) -> String {
    if b.len() <= 48 {
        format!("{:?}", String::from_utf8_lossy(b))
    } else {
        format!("{} bytes, hash {:016x}", b.len(), fnv(b))
    }
}

/// The stable part of a stat: kind, mode, links, size, blocks, owner (and rdev for devices).
pub fn show_stat(st: &libc::stat) -> String {
    let kind = kind_char(st.st_mode);
    let mut s = format!(
        "{kind} {:04o} nlink={} size={} blocks={} uid={} gid={}",
        st.st_mode & 0o7777,
        st.st_nlink,
        st.st_size,
        st.st_blocks,
        st.st_uid,
        st.st_gid
    );
    if kind == 'c' || kind == 'b' {
        let _ = write!(s, " rdev={}:{}", libc::major(st.st_rdev), libc::minor(st.st_rdev));
    }
    s
}

impl Trace {
    /// Number of steps.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Records a step's outcome and hands the result back.
    pub fn rec<T: Show>(&mut self, step: &str, r: Sys<T>) -> Sys<T> {
        let out = match &r {
            Ok(v) => v.show(),
            Err(e) => format!("Err({e})"),
        };
        self.steps.push((step.to_string(), out));
        r
    }

    /// Runs a step on an fd opened by an earlier step; records it as skipped when that open
    /// failed, so the two traces stay aligned step for step.
    pub fn on<T: Show>(&mut self, step: &str, fd: &Sys<OwnedFd>, f: impl FnOnce(&OwnedFd) -> Sys<T>) {
        match fd {
            Ok(fd) => {
                let r = f(fd);
                self.rec(step, r).ok();
            }
            Err(_) => self.note(step, "skipped: its open failed".into()),
        }
    }

    /// Records a rendering computed by the case.
    pub fn note(&mut self, step: &str, value: String) {
        self.steps.push((step.to_string(), value));
    }

    /// lstat(2), rendered.
    pub fn lstat(&mut self, step: &str, p: &Path) {
        let r = sys::lstat(p).map(|st| show_stat(&st));
        self.rec(step, r).ok();
    }

    /// stat(2) (following symlinks), rendered.
    pub fn stat(&mut self, step: &str, p: &Path) {
        let r = sys::stat(p).map(|st| show_stat(&st));
        self.rec(step, r).ok();
    }

    /// fstat(2), rendered.
    pub fn fstat(&mut self, step: &str, fd: &OwnedFd) {
        let r = sys::fstat(fd).map(|st| show_stat(&st));
        self.rec(step, r).ok();
    }

    /// Creates or truncates `p` (mode 0644) and writes `data`: one step.
    pub fn write_file(&mut self, step: &str, p: &Path, data: &[u8]) {
        let r =
            sys::open(p, libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC, 0o644).and_then(|fd| sys::write(&fd, data));
        self.rec(step, r).ok();
    }

    /// Reads all of `p`: one step.
    pub fn read_file(&mut self, step: &str, p: &Path) {
        let r = sys::open(p, libc::O_RDONLY, 0).and_then(|fd| {
            let mut all = Vec::new();
            loop {
                let chunk = sys::read(&fd, 1 << 16)?;
                if chunk.is_empty() {
                    return Ok(all);
                }
                all.extend_from_slice(&chunk);
            }
        });
        self.rec(step, r).ok();
    }

    /// None when equal; otherwise a table of every step, the differing ones marked.
    pub fn diff(reference: &Trace, through: &Trace) -> Option<String> {
        let n = reference.steps.len().max(through.steps.len());
        let mut table = String::new();
        let mut differs = false;
        let none = (String::from("-"), String::from("(no such step)"));
        for i in 0..n {
            let a = reference.steps.get(i).unwrap_or(&none);
            let b = through.steps.get(i).unwrap_or(&none);
            let same = a == b;
            differs |= !same;
            let mark = if same { "  " } else { ">>" };
            if a.0 == b.0 {
                let _ = writeln!(table, "{mark} {:>2} {:<44} backing: {}", i, a.0, a.1);
            } else {
                let _ = writeln!(table, "{mark} {:>2} {:<44} backing: {}", i, a.0, a.1);
                let _ = writeln!(table, "{mark}    {:<44}", format!("(through seamfs the step is `{}`)", b.0));
            }
            if !same {
                let _ = writeln!(table, "{mark}    {:<44} seamfs:  {}", "", b.1);
            }
        }
        differs.then_some(table)
    }
}
