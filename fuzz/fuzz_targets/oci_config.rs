//! The OCI config mapping: any config.json is an error naming a field, or a container whose
//! paths are absolute and free of `..`, and whose seccomp policy compiles to a BPF program the
//! kernel would accept.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::path::{Component, Path};

fn clean(p: &Path) -> bool {
    p.is_absolute() && !p.components().any(|c| c == Component::ParentDir)
}

fuzz_target!(|data: &[u8]| {
    if let Ok(c) = cordon::oci::config::Container::from_json(data, Path::new("/bundle")) {
        assert!(c.rootfs.is_absolute(), "rootfs {:?}", c.rootfs);
        assert!(clean(&c.cwd) || c.cwd.as_os_str().is_empty(), "cwd {:?}", c.cwd);
        for m in &c.mounts {
            assert!(clean(&m.dst), "mount destination {:?}", m.dst);
        }
        for p in c.masked.iter().chain(&c.readonly) {
            assert!(p.is_absolute(), "masked/readonly path {p:?}");
        }
        if let Some(s) = c.spec.linux().as_ref().and_then(|l| l.seccomp().as_ref())
            && let Ok(f) = cordon::oci::seccomp::compile(s)
        {
            assert!(!f.program.is_empty() && f.program.len() <= 4096, "{} instructions", f.program.len());
        }
    }
});
