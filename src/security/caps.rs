//! Capabilities: every set emptied in the payload, then checked.
//!
//! The payload's uid inside the user namespace is not 0, but the process that created the
//! namespace holds every capability in it until it drops them; and uid 0 inside would regain
//! them on `execve`. So: the bounding set first (that needs CAP_SETPCAP, still held), then
//! ambient, inheritable, permitted and effective. `no_new_privs` is set separately.
//!
//! The bounding set is emptied by the sandbox's init, while it waits for its first go
//! ([`drop_bounding`]): one `prctl` per capability, each a new set of credentials, which the
//! payload's start then does not wait for. init keeps its own capabilities (the bounding set
//! limits only what an `execve` or `capset` could add, and init does neither); the payload
//! inherits the empty set, and [`drop_all`] reads it again (dropping, and checking, anything
//! still there) before it empties the others.

use caps::CapSet;

/// Highest capability number tried: the kernel answers EINVAL past its last one (40 on Linux
/// 6.x); a kernel with more than 64 would be refused rather than half-handled.
const MAX_CAP: u32 = 63;

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

/// Empties the calling thread's bounding set: every capability number the kernel knows, not
/// only those the `caps` crate names, so one added by a newer kernel goes too.
pub fn drop_bounding() -> Result<(), CapsError> {
    drop_bounding_except(&caps::CapsHashSet::new())
}

/// Drops from the calling thread's bounding set every capability number the kernel knows but
/// `keep` (an OCI container's `process.capabilities.bounding`), numbers the `caps` crate
/// cannot name included: a capability a newer kernel adds is dropped, never kept by default.
pub fn drop_bounding_except(keep: &caps::CapsHashSet) -> Result<(), CapsError> {
    let kept: u64 = keep.iter().fold(0, |m, c| m | (1u64 << c.index()));
    for cap in 0..=MAX_CAP {
        if kept & (1u64 << cap) != 0 {
            continue;
        }
        match crate::sys::capbset_read(cap) {
            Ok(true) => {
                crate::sys::capbset_drop(cap).map_err(|e| err(cap, "bounding", e))?;
                if crate::sys::capbset_read(cap) != Ok(false) {
                    return Err(err(cap, "bounding", "still present after dropping"));
                }
            }
            Ok(false) => {}
            // Past the kernel's last capability.
            Err(nix::errno::Errno::EINVAL) if cap > 0 => return Ok(()),
            Err(e) => return Err(err(cap, "bounding", e)),
        }
    }
    // Capability 64 exists: this kernel has more than cordon checks.
    match crate::sys::capbset_read(MAX_CAP + 1) {
        Err(nix::errno::Errno::EINVAL) => Ok(()),
        _ => Err(err(
            MAX_CAP + 1,
            "bounding",
            "this kernel has more capabilities than cordon knows how to drop",
        )),
    }
}

/// Empties every capability set of the calling thread and verifies they are empty.
pub fn drop_all() -> Result<(), CapsError> {
    // Normally already empty (init emptied it before forking the payload): then this only
    // reads it, once per capability, and checks each one it drops.
    drop_bounding()?;
    // Ambient first: the kernel drops ambient caps that leave permitted/inheritable anyway,
    // but clearing it explicitly makes the intent independent of that.
    for (set, name) in [
        (CapSet::Ambient, "ambient"),
        (CapSet::Inheritable, "inheritable"),
        (CapSet::Effective, "effective"),
        (CapSet::Permitted, "permitted"),
    ] {
        caps::clear(None, set).map_err(|e| err("all", name, e))?;
    }
    // Checked with capget. The ambient set is not read back (one prctl per capability): the
    // kernel keeps no capability ambient that is not both permitted and inheritable
    // (capabilities(7)), and both are checked empty here.
    for (set, name) in [
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
