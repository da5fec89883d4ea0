//! The seccomp policy compiler: no panic on any policy text; an accepted policy compiles to a
//! non-empty program.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(c) = cordon::security::seccomp::compile_policy_str(text) {
        assert!(!c.name.is_empty());
    }
});
