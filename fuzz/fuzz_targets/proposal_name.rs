//! Proposal names (box-chosen): never a panic; a name that parses is rebuilt to itself, so
//! seamd acts on exactly the name it listed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use seamfs::heal::proposal::{looks_like_proposal, ProposalName};

fuzz_target!(|data: &[u8]| {
    let _ = looks_like_proposal(data);
    if let Ok(p) = ProposalName::parse(data) {
        assert_eq!(p.file_name().as_bytes(), data, "a parsed name rebuilds to another");
        assert!(looks_like_proposal(data));
    }
});
