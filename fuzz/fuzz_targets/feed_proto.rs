//! The change feed's lines as seamfs and seamd read them (either side may be hostile): never a
//! panic; what decodes names a checked path and encodes back to a line that decodes the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use seamfs::feed::proto::{checked_path, Message, MAX_PATH};
use std::os::unix::ffi::OsStrExt;

fn assert_checked(p: &[u8]) {
    assert!(!p.is_empty() && p.len() <= MAX_PATH && !p.contains(&0), "{p:?}");
    assert!(p.split(|&b| b == b'/').all(|c| !c.is_empty() && c != b"." && c != b".."), "{p:?}");
}

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Message::decode(data) {
        if let Message::Change { path, .. } = &m {
            assert_checked(path.as_os_str().as_bytes());
        }
        // Round trip: the writer's line for what the reader accepted reads back the same.
        let line = m.encode();
        assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1, "{line:?}");
        assert_eq!(Message::decode(&line[..line.len() - 1]).as_ref(), Ok(&m), "{line:?}");
    }
    if let Ok(p) = checked_path(data) {
        assert_checked(p.as_os_str().as_bytes());
        assert_eq!(p.as_os_str().as_bytes(), data);
    }
});
