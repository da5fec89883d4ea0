//! PLACEHOLDER for the rootfs builder (replaced by the real module at merge).
use std::path::PathBuf;
pub struct BuiltRootfs {
    pub language: String,
    pub path: PathBuf,
    pub toolchain: Option<String>,
}
pub fn find(_lang: &str) -> Option<BuiltRootfs> {
    None
}
