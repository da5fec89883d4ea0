//! The file-name validator for inputs and outputs: what it accepts can never leave /workspace.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(name) = std::str::from_utf8(data) else {
        return;
    };
    if cordon::spec::check_relative_path(name).is_ok() {
        assert!(!name.is_empty() && !name.starts_with('/') && !name.contains('\0'));
        assert!(name.len() <= cordon::spec::MAX_PATH_LEN);
        for c in name.split('/') {
            assert!(
                !c.is_empty() && c != "." && c != ".." && c.len() <= cordon::spec::MAX_NAME_LEN
            );
        }
        let joined = std::path::Path::new("/workspace").join(name);
        assert!(joined.starts_with("/workspace/"));
    }
});
