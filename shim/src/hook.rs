//! One hook run: read git's input, ask seamfs about a prepared ref transaction, then run the
//! repository's own hook.

use std::ffi::OsString;
use std::io::Read;
use std::path::Path;

use crate::delegate;
use crate::gitdir::{self, GitDir};
use crate::verdict::{self, Opinion};

/// Exit status: nothing refused, and the repository's hook (if any) exited 0.
pub const EXIT_OK: i32 = 0;
/// Exit status: seamfs would refuse a move in this transaction.
pub const EXIT_REFUSED: i32 = 1;
/// Exit status: bad arguments, or no usable git dir (the message names the path).
pub const EXIT_USAGE: i32 = 2;
/// Exit status: the repository's hook exists but could not be run (as a shell says it).
pub const EXIT_CANNOT_RUN: i32 = 126;

/// The hook whose `prepared` state is judged.
pub const REFERENCE_TRANSACTION: &str = "reference-transaction";

/// The ref name of one line of a reference-transaction's input, `<old> <new> <refname>`.
pub fn refname_of(line: &[u8]) -> Option<&str> {
    let line = std::str::from_utf8(line).ok()?;
    let mut fields = line.splitn(3, ' ');
    let (_old, _new, name) = (fields.next()?, fields.next()?, fields.next()?);
    (!name.is_empty() && !name.contains(' ')).then_some(name)
}

/// seamfs's first refusal among the refs of a prepared transaction (`input` is its stdin).
/// A lock that cannot be asked about is reported and skipped: seamfs still judges the rename
/// itself, so the worst case is git's own "could not rename" without the reason.
pub fn refusal(gd: &GitDir, input: &[u8]) -> Option<String> {
    for line in input.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let Some(lock) = refname_of(line).and_then(|n| gd.lock_of(n)) else {
            eprintln!("seam-git: warning: not a reference-transaction line: {:?}", String::from_utf8_lossy(line));
            continue;
        };
        match verdict::ask(&lock) {
            Ok(Opinion::Refused(reason)) => return Some(reason),
            Ok(Opinion::Ok | Opinion::None) => {}
            Err(e) => eprintln!("seam-git: warning: {e}; seamfs still judges the rename itself"),
        }
    }
    None
}

/// Runs as hook `name` with git's `args`; returns the exit status. `me` is this binary.
///
/// Only a prepared reference transaction is judged, so only its input is read here (git writes
/// it whole, then waits); every other hook's stdin is the repository's hook's own, unread, so a
/// two-way protocol (`proc-receive`) works.
pub fn run(name: &str, args: &[OsString], me: &Path) -> i32 {
    let judged = name == REFERENCE_TRANSACTION && args.first().is_some_and(|a| a == "prepared");
    let mut input = Vec::new();
    if judged {
        if let Err(e) = std::io::stdin().read_to_end(&mut input) {
            eprintln!("seam-git: could not read the hook's input from stdin: {e}");
            return EXIT_USAGE;
        }
    }
    let gd = match std::env::current_dir()
        .map_err(|e| gitdir::FindError::Read { path: ".".into(), source: e })
        .and_then(|cwd| gitdir::find(std::env::var_os("GIT_DIR").as_deref(), std::env::var_os("GIT_COMMON_DIR").as_deref(), &cwd))
    {
        Ok(gd) => gd,
        Err(e) => {
            // Git found a repository to run this hook for; not finding it would skip the
            // repository's own hook, so stop rather than guess.
            eprintln!("seam-git: {e}");
            return EXIT_USAGE;
        }
    };
    if judged {
        if let Some(reason) = refusal(&gd, &input) {
            eprintln!("seam-git: {reason}");
            return EXIT_REFUSED;
        }
    }
    let Some(hook) = delegate::repo_hook(&gd.common, name, me) else { return EXIT_OK };
    match delegate::run(&hook, args, judged.then_some(&input[..])) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("seam-git: {e}");
            EXIT_CANNOT_RUN
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_transaction_lines() {
        let z = "0".repeat(40);
        assert_eq!(refname_of(format!("{z} {z} refs/heads/main").as_bytes()), Some("refs/heads/main"));
        assert_eq!(refname_of(b"ref:refs/heads/a ref:refs/heads/b HEAD"), Some("HEAD"));
        assert_eq!(refname_of(b"HEAD"), None);
        assert_eq!(refname_of(format!("{z} {z} ").as_bytes()), None);
        assert_eq!(refname_of(format!("{z} {z} a b").as_bytes()), None, "ref names hold no spaces");
    }
}
