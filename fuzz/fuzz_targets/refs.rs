//! HEAD and packed-refs content as seamfs and seamd read it: never a panic; what parses is
//! what git writes (a ref name that stays below refs/, or an object id).
#![no_main]

use libfuzzer_sys::fuzz_target;
use seamfs::gitdata::{find_packed, Head};

fuzz_target!(|data: &[u8]| {
    match Head::parse(data) {
        Ok(Head::Symbolic(r)) => assert!(!r.contains("..") && !r.starts_with('/') && !r.is_empty(), "{r:?}"),
        Ok(Head::Detached(oid)) => assert!(oid.len() == 40 || oid.len() == 64, "{oid:?}"),
        Err(_) => {}
    }
    // The first line names the ref looked up in the rest.
    let (name, packed) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (String::from_utf8_lossy(&data[..i]).into_owned(), &data[i + 1..]),
        None => ("refs/heads/main".to_string(), data),
    };
    if let Some(oid) = find_packed(packed, &name) {
        assert!(oid.bytes().all(|b| b.is_ascii_hexdigit()) && (oid.len() == 40 || oid.len() == 64), "{oid:?}");
    }
});
