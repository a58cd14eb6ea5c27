//! Lower paths in reused buffers: a lookup builds one per request, and a per-thread pool of
//! buffers makes that allocation-free once the worker threads are warm.

use std::cell::RefCell;
use std::ffi::{CStr, CString};
use std::ops::Deref;

use fuser::Errno;

/// Buffers kept per thread, and the largest one kept (a deep path's buffer is let go).
const POOL: usize = 16;
const KEEP_BYTES: usize = 4096;

thread_local! {
    static FREE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// A NUL-terminated path relative to the lower's root, in a pooled buffer.
pub struct LowerPath {
    /// The bytes with their trailing NUL; no NUL inside.
    buf: Vec<u8>,
}

impl LowerPath {
    /// Builds a path from its components, joined with `/` ("." when there are none).
    pub fn join<'a>(parts: impl Iterator<Item = &'a [u8]> + Clone) -> Result<LowerPath, Errno> {
        let mut buf = FREE.with(|f| f.borrow_mut().pop()).unwrap_or_default();
        buf.clear();
        for p in parts {
            if p.contains(&0) {
                return Err(Errno::EINVAL);
            }
            if !buf.is_empty() {
                buf.push(b'/');
            }
            buf.extend_from_slice(p);
        }
        if buf.is_empty() {
            buf.push(b'.');
        }
        buf.push(0);
        Ok(LowerPath { buf })
    }

    /// The path as a C string.
    pub fn as_c_str(&self) -> &CStr {
        // SAFETY: `join` ends the buffer with its only NUL.
        unsafe { CStr::from_bytes_with_nul_unchecked(&self.buf) }
    }

    /// An owned copy, for paths kept beyond the request.
    pub fn to_c_string(&self) -> CString {
        self.as_c_str().to_owned()
    }
}

impl Deref for LowerPath {
    type Target = CStr;
    fn deref(&self) -> &CStr {
        self.as_c_str()
    }
}

impl AsRef<CStr> for LowerPath {
    fn as_ref(&self) -> &CStr {
        self.as_c_str()
    }
}

impl Clone for LowerPath {
    fn clone(&self) -> Self {
        LowerPath { buf: self.buf.clone() }
    }
}

impl std::fmt::Debug for LowerPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_c_str().fmt(f)
    }
}

impl Drop for LowerPath {
    fn drop(&mut self) {
        if self.buf.capacity() > KEEP_BYTES {
            return;
        }
        let buf = std::mem::take(&mut self.buf);
        // Dropped during thread teardown: the pool may be gone already.
        let _ = FREE.try_with(|f| {
            let mut f = f.borrow_mut();
            if f.len() < POOL {
                f.push(buf);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::LowerPath;

    #[test]
    fn joins_components_and_reuses_buffers() {
        let p = LowerPath::join(["a", "b", "c"].iter().map(|s| s.as_bytes())).expect("no NUL");
        assert_eq!(p.to_bytes(), b"a/b/c");
        let ptr = p.buf.as_ptr();
        drop(p);
        let q = LowerPath::join(["x"].iter().map(|s| s.as_bytes())).expect("no NUL");
        assert_eq!(q.to_bytes(), b"x");
        assert_eq!(q.buf.as_ptr(), ptr, "the dropped buffer is reused");
        let root = LowerPath::join(std::iter::empty()).expect("root");
        assert_eq!(root.to_bytes(), b".");
        assert!(LowerPath::join([b"a\0b".as_slice()].into_iter()).is_err());
    }
}
