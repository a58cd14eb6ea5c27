//! `.git` files and `commondir` as both sides parse them: never a panic; a parsed path comes
//! from the bytes after `gitdir:` and holds no NUL or newline.
#![no_main]

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = seamfs::gitdata::parse_gitdir_file(data) {
        assert!(!p.as_os_str().is_empty());
        assert!(!p.as_os_str().as_bytes().contains(&0));
    }
    for parsed in [seam_git::gitdir::parse_gitdir_file(data, Path::new("/w")), seam_git::gitdir::parse_commondir(data, Path::new("/w/.git"))] {
        if let Ok(p) = parsed {
            let b = p.as_os_str().as_bytes();
            assert!(!b.contains(&b'\n') && !b.contains(&0), "{p:?}");
        }
    }
});
