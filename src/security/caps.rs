//! Capabilities: every set emptied in the payload, then checked.
//!
//! The payload's uid inside the user namespace is not 0, but the process that created the
//! namespace holds every capability in it until it drops them; and uid 0 inside would regain
//! them on `execve`. So: the bounding set first (that needs CAP_SETPCAP, still held), then
//! ambient, inheritable, permitted and effective. `no_new_privs` is set separately.

use caps::CapSet;

#[derive(Debug, thiserror::Error)]
#[error(
    "cannot drop capability {cap} from the {set} set: {reason}; the sandbox will not run with capabilities it cannot drop"
)]
pub struct CapsError {
    pub cap: String,
    pub set: &'static str,
    pub reason: String,
}

fn err(cap: impl std::fmt::Display, set: &'static str, e: impl std::fmt::Display) -> CapsError {
    CapsError {
        cap: cap.to_string(),
        set,
        reason: e.to_string(),
    }
}

/// Empties every capability set of the calling thread and verifies they are empty.
pub fn drop_all() -> Result<(), CapsError> {
    let supported = caps::runtime::thread_all_supported();
    for cap in &supported {
        caps::drop(None, CapSet::Bounding, *cap).map_err(|e| err(cap, "bounding", e))?;
    }
    // Ambient first: the kernel drops ambient caps that leave permitted/inheritable anyway,
    // but clearing it explicitly makes the intent and the check below independent of that.
    for (set, name) in [
        (CapSet::Ambient, "ambient"),
        (CapSet::Inheritable, "inheritable"),
        (CapSet::Effective, "effective"),
        (CapSet::Permitted, "permitted"),
    ] {
        caps::clear(None, set).map_err(|e| err("all", name, e))?;
    }
    for (set, name) in [
        (CapSet::Bounding, "bounding"),
        (CapSet::Ambient, "ambient"),
        (CapSet::Inheritable, "inheritable"),
        (CapSet::Effective, "effective"),
        (CapSet::Permitted, "permitted"),
    ] {
        let left = caps::read(None, set).map_err(|e| err("all", name, e))?;
        if let Some(cap) = left.iter().next() {
            return Err(err(cap, name, "still present after dropping"));
        }
    }
    Ok(())
}
