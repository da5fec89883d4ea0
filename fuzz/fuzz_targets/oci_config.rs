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
    if let Ok(c) = cordon::spec::oci::Container::from_json(data, Path::new("/bundle")) {
        // What cordon-oci's launcher accepts as a container spec.
        cordon::spec::ContainerSetup::check_container_spec(&c.sandbox).unwrap();
        assert!(c.rootfs().is_absolute(), "rootfs {:?}", c.rootfs());
        let s = c.setup();
        assert!(clean(&s.cwd) || s.cwd.as_os_str().is_empty(), "cwd {:?}", s.cwd);
        for m in &s.mounts {
            assert!(clean(&m.dst), "mount destination {:?}", m.dst);
        }
        for p in s.masked.iter().chain(&s.readonly) {
            assert!(p.is_absolute(), "masked/readonly path {p:?}");
        }
        // Every environment entry comes back as execve gets it.
        for e in c.env_strings() {
            assert!(e.contains('=') && !e.starts_with('=') && !e.contains('\0'), "env {e:?}");
        }
        if let Some(sc) = &s.seccomp
            && let Ok(f) = cordon::security::seccomp::oci::compile(sc)
        {
            assert!(!f.program.is_empty() && f.program.len() <= 4096, "{} instructions", f.program.len());
        }
    }
});
