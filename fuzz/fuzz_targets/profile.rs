//! The profile parser: no panic; an accepted profile has a safe source file name and a run argv.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(p) = cordon::profile::Profile::parse(text, "fuzz") {
        assert!(cordon::spec::check_relative_path(&p.source).is_ok());
        assert!(!p.run.is_empty());
        if let Some(a) = &p.artifact {
            assert!(cordon::spec::check_relative_path(a).is_ok());
        }
    }
});
