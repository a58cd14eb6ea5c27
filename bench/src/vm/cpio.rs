//! A `newc` cpio archive, the format the kernel unpacks as an initramfs. Written here rather than
//! by running cpio: the archive is rebuilt for every run (it carries the seamfs binary under
//! test) and the host may have no cpio.

use std::io::Write;
use std::path::Path;

use crate::lab::LabError;

/// An archive being written to memory.
#[derive(Debug, Default)]
pub struct Cpio {
    out: Vec<u8>,
    ino: u32,
}

impl Cpio {
    /// A directory.
    pub fn dir(&mut self, name: &str) {
        self.entry(name, 0o040755, b"");
    }

    /// A regular file with `mode`'s permission bits.
    pub fn file(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.entry(name, 0o100000 | (mode & 0o7777), data);
    }

    /// A symbolic link to `target`.
    pub fn symlink(&mut self, name: &str, target: &str) {
        self.entry(name, 0o120777, target.as_bytes());
    }

    /// A copy of the host file `from`, with its permission bits.
    pub fn copy(&mut self, name: &str, from: &Path) -> Result<(), LabError> {
        use std::os::unix::fs::PermissionsExt;
        let data = std::fs::read(from).map_err(|e| LabError::new("read for initramfs", from, e))?;
        let mode = std::fs::metadata(from).map_err(|e| LabError::new("stat for initramfs", from, e))?.permissions().mode();
        self.file(name, mode, &data);
        Ok(())
    }

    fn entry(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.ino += 1;
        let name = name.trim_start_matches('/');
        let head = format!(
            "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
            self.ino,
            mode,
            0, // uid
            0, // gid
            1, // nlink
            0, // mtime
            data.len(),
            0, // dev major, minor; rdev major, minor
            0,
            0,
            0,
            name.len() + 1,
            0, // checksum
        );
        self.out.extend_from_slice(head.as_bytes());
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(0);
        self.pad();
        self.out.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while self.out.len() % 4 != 0 {
            self.out.push(0);
        }
    }

    /// Closes the archive and writes it to `to`.
    pub fn finish(mut self, to: &Path) -> Result<(), LabError> {
        self.entry("TRAILER!!!", 0, b"");
        let mut f = std::fs::File::create(to).map_err(|e| LabError::new("create initramfs", to, e))?;
        f.write_all(&self.out).map_err(|e| LabError::new("write initramfs", to, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads back (name, mode, data) of every entry, checking magic and alignment.
    fn entries(a: &[u8]) -> Vec<(String, u32, Vec<u8>)> {
        let mut out = Vec::new();
        let mut at = 0;
        loop {
            assert_eq!(at % 4, 0);
            assert_eq!(&a[at..at + 6], b"070701");
            let field = |i: usize| u32::from_str_radix(std::str::from_utf8(&a[at + 6 + i * 8..at + 14 + i * 8]).unwrap(), 16).unwrap();
            let (mode, size, namesize) = (field(1), field(6) as usize, field(11) as usize);
            let name = String::from_utf8(a[at + 110..at + 110 + namesize - 1].to_vec()).unwrap();
            let data_at = (at + 110 + namesize).div_ceil(4) * 4;
            let data = a[data_at..data_at + size].to_vec();
            at = (data_at + size).div_ceil(4) * 4;
            if name == "TRAILER!!!" {
                assert_eq!(at, a.len());
                return out;
            }
            out.push((name, mode, data));
        }
    }

    #[test]
    fn entries_read_back_as_written() {
        let mut c = Cpio::default();
        c.dir("/bin");
        c.file("bin/x", 0o755, b"abcde");
        c.symlink("sh", "bin/x");
        let to = std::env::temp_dir().join(format!("seam-cpio-test-{}", std::process::id()));
        c.finish(&to).unwrap();
        let a = std::fs::read(&to).unwrap();
        std::fs::remove_file(&to).unwrap();
        let e = entries(&a);
        assert_eq!(e[0], ("bin".to_string(), 0o040755, Vec::new()));
        assert_eq!(e[1], ("bin/x".to_string(), 0o100755, b"abcde".to_vec()));
        assert_eq!(e[2], ("sh".to_string(), 0o120777, b"bin/x".to_vec()));
    }
}
