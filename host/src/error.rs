//! seamd's errors: each names the operation and the path (relative to the checkout).

use std::fmt;
use std::io;
use std::path::PathBuf;

/// A system call on a path failed.
#[derive(Debug)]
pub struct IoError {
    /// What was being done (`open`, `read`, `rename`, …).
    pub op: &'static str,
    /// The path, relative to the checkout.
    pub path: PathBuf,
    /// The error.
    pub source: io::Error,
}

impl IoError {
    /// An error of `op` on `path`.
    pub fn new(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> IoError {
        IoError { op, path: path.into(), source }
    }
}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.op, crate::quote::shown(&self.path), self.source)
    }
}

impl std::error::Error for IoError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Why seamd cannot work on a checkout at all.
#[derive(Debug)]
pub enum CheckoutError {
    /// The checkout directory could not be opened.
    Open {
        /// The checkout as given.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// `<checkout>/.git` is not a directory seamd may use (missing, a file, a symlink).
    NotMain {
        /// The checkout as given.
        path: PathBuf,
        /// What `.git` is.
        what: &'static str,
    },
}

impl fmt::Display for CheckoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckoutError::Open { path, source } => write!(f, "open checkout {}: {source}", path.display()),
            CheckoutError::NotMain { path, what } => write!(
                f,
                "{}/.git is {what}: seamd needs the main checkout, whose .git is a real directory (never a link)",
                path.display()
            ),
        }
    }
}

impl std::error::Error for CheckoutError {}
