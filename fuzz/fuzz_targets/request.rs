//! The JSON request parser: any input is an error or a request whose every file name is safe.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The bytes as a request arrives: a BOM, invalid UTF-8 and the rest are the parser's.
    if let Ok(req) = cordon::request::parse_bytes(data).and_then(|r| r.into_run()) {
        for f in &req.files {
            if !f.path.is_empty() {
                assert!(
                    cordon::spec::check_relative_path(&f.path).is_ok(),
                    "unsafe name accepted: {:?}",
                    f.path
                );
            }
        }
        if let Some(e) = &req.entry {
            assert!(cordon::spec::check_relative_path(e).is_ok());
        }
    }
});
