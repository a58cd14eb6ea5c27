//! Index validation of bytes the other side wrote (proposals, the shared index): never a
//! panic, never an allocation the input does not pay for.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = seamfs::index::validate::check(data);
});
