//! Which ids of the caller's user namespace the sandbox's uid and gid map to.
//!
//! An unprivileged caller's sandbox maps to the caller's own ids (the only ones it may map).
//! A root caller's gets ids of its own, per run, that no user of the host has
//! ([`ROOT_CALLER_ID_BASE`]). Root of a *nested* user namespace (cordon run inside a rootless
//! container, `unshare --map-root-user`, `podman unshare`) has only the ids its namespace
//! maps: the per-run id is taken from those, in the upper half of the largest mapped range
//! (container users sit low), and where the namespace maps no id but root's own, the sandbox
//! maps to that id as an unprivileged caller's does, unless it is the parent namespace's root.

use super::{ROOT_CALLER_ID_BASE, ROOT_CALLER_ID_RANGE};

/// The sandbox's ids on the caller's side of its user namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostIds {
    /// A root caller: ids no one else has, made for this run. `host_root`: the caller is the
    /// host's root (its namespace maps every id to itself), which alone may set the limits
    /// of a sandbox namespace's SysV IPC (the kernel gives them to the host's root when the
    /// namespace maps no uid 0).
    Own { uid: u32, gid: u32, host_root: bool },
    /// The caller's own ids: an unprivileged caller, or root of a user namespace that maps
    /// no other id.
    Caller { uid: u32, gid: u32 },
}

impl HostIds {
    pub fn uid(self) -> u32 {
        match self {
            HostIds::Own { uid, .. } | HostIds::Caller { uid, .. } => uid,
        }
    }
    pub fn gid(self) -> u32 {
        match self {
            HostIds::Own { gid, .. } | HostIds::Caller { gid, .. } => gid,
        }
    }
    /// Whether cordon acts as root for the sandbox (it maps ids other than its own).
    pub fn root(self) -> bool {
        matches!(self, HostIds::Own { .. })
    }
    /// Whether cordon is the host's root ([`HostIds::Own`]'s `host_root`).
    pub fn host_root(self) -> bool {
        matches!(
            self,
            HostIds::Own {
                host_root: true,
                ..
            }
        )
    }
}

/// Why the sandbox's ids cannot be chosen: what was seen, and what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdsError {
    pub what: String,
    pub fix: &'static str,
}

impl std::fmt::Display for IdsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}; {}", self.what, self.fix)
    }
}

/// One line of /proc/PID/uid_map or gid_map: `count` ids from `inside` (this namespace's
/// numbering) are `outside` in the parent namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Range {
    inside: u32,
    outside: u32,
    count: u32,
}

fn parse_map(text: &str) -> Vec<Range> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_ascii_whitespace().map(|x| x.parse::<u32>().ok());
            Some(Range {
                inside: f.next()??,
                outside: f.next()??,
                count: f.next()??,
            })
        })
        .filter(|r| r.count > 0)
        .collect()
}

fn covers(map: &[Range], id: u32) -> bool {
    map.iter()
        .any(|r| id >= r.inside && u64::from(id) < u64::from(r.inside) + u64::from(r.count))
}

/// An id of `map` for the run of `pid`: [`ROOT_CALLER_ID_BASE`] + pid where the namespace
/// maps it (the initial namespace maps every id); else one of the largest mapped range above
/// 0, from its upper half where it can, never 0, 65534 (nobody) or 65535, different for different pids as
/// far as the range allows. None: no such id.
fn own_id(map: &[Range], pid: u32) -> Option<u32> {
    let want = ROOT_CALLER_ID_BASE + pid % ROOT_CALLER_ID_RANGE;
    if covers(map, want) {
        return Some(want);
    }
    // The ranges without id 0 and without nobody's ids.
    let (start, count) = map
        .iter()
        .map(|r| {
            let start = r.inside.max(1);
            let end = (u64::from(r.inside) + u64::from(r.count)).min(u64::from(u32::MAX));
            (u64::from(start), end.saturating_sub(u64::from(start)))
        })
        .max_by_key(|&(_, count)| count)?;
    let usable = |id: u64| id != 65534 && id != 65535;
    let half = count / 2;
    let (lo, span) = (start + half, count - half);
    let pid = u64::from(pid);
    (0..span)
        .map(|i| lo + (pid + i) % span)
        .chain((0..half).map(|i| start + (pid + i) % half))
        .find(|&id| usable(id))
        .and_then(|id| u32::try_from(id).ok())
}

/// The sandbox's host ids for a caller with effective ids `euid`/`egid`, in a namespace whose
/// maps read `uid_map`/`gid_map`, for the run of `pid`. Err: the caller is root of a namespace
/// that maps nothing but the parent's root, which cordon does not run untrusted code as.
pub fn choose(
    euid: u32,
    egid: u32,
    uid_map: &str,
    gid_map: &str,
    pid: u32,
) -> Result<HostIds, IdsError> {
    if euid != 0 {
        return Ok(HostIds::Caller {
            uid: euid,
            gid: egid,
        });
    }
    let (uids, gids) = (parse_map(uid_map), parse_map(gid_map));
    if let (Some(uid), Some(gid)) = (own_id(&uids, pid), own_id(&gids, pid)) {
        let identity = |m: &[Range]| {
            m == [Range {
                inside: 0,
                outside: 0,
                count: u32::MAX,
            }]
        };
        return Ok(HostIds::Own {
            uid,
            gid,
            host_root: identity(&uids) && identity(&gids),
        });
    }
    // The caller's own ids are mapped in its own namespace, always: maps that do not show them
    // were not read, and a guess could be the host's root.
    if !covers(&uids, euid) || !covers(&gids, egid) {
        return Err(IdsError {
            what: format!(
                "cannot choose the sandbox's ids: /proc/self/uid_map and gid_map do not show this process's own uid {euid} and gid {egid} (uid_map: {:?}, gid_map: {:?})",
                uid_map.trim(),
                gid_map.trim()
            ),
            fix: "cordon reads them to tell a nested user namespace's root from the host's: mount /proc (`mount -t proc proc /proc`), or run cordon where it is mounted",
        });
    }
    // Where the caller's id sits in its parent namespace.
    let outside = |map: &[Range], id: u32| {
        map.iter()
            .find(|r| covers(&[**r], id))
            .and_then(|r| r.outside.checked_add(id - r.inside))
    };
    let parent_root = outside(&uids, euid) == Some(0) || outside(&gids, egid) == Some(0);
    if parent_root {
        return Err(IdsError {
            what: format!(
                "cannot choose the sandbox's ids: cordon runs as root of a user namespace that maps no id but its parent's root (uid_map: {}; or its group to the parent's root group): the sandbox has no unprivileged id to run as there, and cordon never runs a program as its caller's parent's root",
                uid_map
                    .split_ascii_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            fix: "run cordon outside this namespace, or give the namespace a range of ids (`unshare --map-auto --map-root-user`, a subuid range in /etc/subuid)",
        });
    }
    Ok(HostIds::Caller {
        uid: euid,
        gid: egid,
    })
}

/// The sandbox's host ids for this process (read once: the pid and the namespace's maps do
/// not change).
pub fn host_ids() -> Result<HostIds, IdsError> {
    static IDS: std::sync::OnceLock<Result<HostIds, IdsError>> = std::sync::OnceLock::new();
    IDS.get_or_init(|| {
        let euid = nix::unistd::geteuid().as_raw();
        let egid = nix::unistd::getegid().as_raw();
        if euid != 0 {
            return choose(euid, egid, "", "", 0);
        }
        // Unreadable: empty, which `choose` refuses.
        let read = |f| std::fs::read_to_string(format!("/proc/self/{f}")).unwrap_or_default();
        choose(
            euid,
            egid,
            &read("uid_map"),
            &read("gid_map"),
            std::process::id(),
        )
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    const INITIAL: &str = "         0          0 4294967295\n";

    #[test]
    fn root_of_the_initial_namespace_gets_a_per_run_id_far_above_users() {
        let ids = choose(0, 0, INITIAL, INITIAL, 4242).unwrap();
        assert_eq!(
            ids,
            HostIds::Own {
                uid: ROOT_CALLER_ID_BASE + 4242,
                gid: ROOT_CALLER_ID_BASE + 4242,
                host_root: true
            }
        );
        assert!(ids.root() && ids.host_root());
    }

    #[test]
    fn an_unprivileged_caller_maps_to_itself_whatever_the_maps() {
        assert_eq!(
            choose(1001, 1002, INITIAL, INITIAL, 7).unwrap(),
            HostIds::Caller {
                uid: 1001,
                gid: 1002
            }
        );
    }

    #[test]
    fn root_of_a_rootless_container_gets_an_id_high_in_its_subordinate_range() {
        // podman / unshare --map-auto: root is the user, 1..65536 its subordinate ids.
        let map = "0 1001 1\n1 100000 65536\n";
        let mut seen = std::collections::BTreeSet::new();
        for pid in [1, 2, 3, 32767, 32768, 65533, 65534, 4_000_000] {
            let ids = choose(0, 0, map, map, pid).unwrap();
            let HostIds::Own {
                uid,
                gid,
                host_root: false,
            } = ids
            else {
                panic!("{ids:?}")
            };
            assert_eq!(uid, gid);
            assert!(
                uid >= 32768 && uid != 65534 && uid != 65535 && uid <= 65536,
                "{uid}"
            );
            seen.insert(uid);
        }
        assert!(
            seen.len() >= 6,
            "different runs get different ids: {seen:?}"
        );
    }

    #[test]
    fn nobody_and_root_are_never_chosen() {
        // A range of exactly 0, 65534 and 65535 besides root's id: nothing usable.
        let map = "0 1001 1\n65534 200000 2\n";
        assert_eq!(
            choose(0, 0, map, map, 9).unwrap(),
            HostIds::Caller { uid: 0, gid: 0 }
        );
        // Two usable ids: one of them, for any pid.
        let map = "0 1001 1\n65532 200000 4\n";
        for pid in 0..10 {
            let uid = choose(0, 0, map, map, pid).unwrap().uid();
            assert!(uid == 65532 || uid == 65533, "{uid}");
        }
    }

    #[test]
    fn root_mapped_alone_to_a_user_runs_the_sandbox_as_that_user() {
        // `unshare --map-root-user` by an unprivileged user.
        let map = "0 1001 1\n";
        assert_eq!(
            choose(0, 0, map, "0 1002 1\n", 5).unwrap(),
            HostIds::Caller { uid: 0, gid: 0 }
        );
    }

    #[test]
    fn root_mapped_alone_to_the_parents_root_is_refused() {
        // `unshare --map-root-user` by root: ns uid 0 is the host's root.
        let e = choose(0, 0, "0 0 1\n", "0 0 1\n", 5)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("parent's root") && e.contains("--map-auto"),
            "{e}"
        );
    }

    #[test]
    fn maps_that_were_not_read_are_refused_not_guessed() {
        // Unread maps would otherwise fall through to the caller's own ids: host uid 0.
        for (u, g) in [("", ""), ("", INITIAL), (INITIAL, "")] {
            let e = choose(0, 0, u, g, 5).unwrap_err().to_string();
            assert!(
                e.contains("do not show this process's own uid 0") && e.contains("/proc"),
                "{e}"
            );
        }
    }

    #[test]
    fn root_whose_group_alone_is_the_parents_root_group_is_refused() {
        let e = choose(0, 0, "0 1001 1\n", "0 0 1\n", 5)
            .unwrap_err()
            .to_string();
        assert!(e.contains("parent's root"), "{e}");
    }

    #[test]
    fn uid_and_gid_ranges_are_chosen_each_from_its_own_map() {
        let ids = choose(
            0,
            0,
            "0 1001 1\n1 100000 1000\n",
            "0 1001 1\n1 300000 10\n",
            3,
        )
        .unwrap();
        let HostIds::Own { uid, gid, .. } = ids else {
            panic!("{ids:?}")
        };
        assert!((501..1001).contains(&uid), "{uid}");
        assert!((6..11).contains(&gid), "{gid}");
    }

    #[test]
    fn maps_are_parsed_as_the_kernel_prints_them() {
        assert_eq!(
            parse_map("         0       1001          1\n         1     100000      65535\nbad\n"),
            vec![
                Range {
                    inside: 0,
                    outside: 1001,
                    count: 1
                },
                Range {
                    inside: 1,
                    outside: 100000,
                    count: 65535
                }
            ]
        );
    }
}
