//! The container's cgroup: created from `linux.cgroupsPath`, limits from `linux.resources`,
//! frozen by pause, read by ps/events, removed by delete. cgroup v2 (one unified hierarchy
//! with controllers) or v1 (one directory per controller hierarchy; the hybrid layout of
//! this kind of host). Every resource cordon cannot write is an error naming the field.

use crate::limits::{MountInfo, ProcCgroup};
use oci_spec::runtime::LinuxResources;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("cannot {step} {path}: {source}")]
    Io {
        step: &'static str,
        path: String,
        source: std::io::Error,
    },
    /// A field of linux.resources (from config.json at `create`, from the command line or
    /// `--resources` at `update`) the cgroup does not take.
    #[error("`{field}` cannot be applied: {why}")]
    Resource { field: String, why: String },
    #[error(
        "cannot send signal {sig} to {count} process(es) of the container's cgroup (pid {pid}: {errno}); \
         run `kill --all` again, as the user that created the container"
    )]
    Signal {
        sig: libc::c_int,
        count: usize,
        pid: i32,
        errno: nix::errno::Errno,
    },
    #[error("cannot read the cgroup mounts (/proc/self/mountinfo): {0}")]
    Mounts(std::io::Error),
    #[error("cannot parse {path}: {why}")]
    Parse { path: &'static str, why: String },
}

/// This process's mounts (/proc/self/mountinfo), parsed.
fn own_mounts() -> Result<Vec<MountInfo>, CgroupError> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").map_err(CgroupError::Mounts)?;
    MountInfo::parse(&text).map_err(|why| CgroupError::Parse {
        path: "/proc/self/mountinfo",
        why,
    })
}

const PROC_SELF_CGROUP: &str = "/proc/self/cgroup";

/// This process's cgroups (/proc/self/cgroup), parsed.
fn own_cgroups() -> Result<ProcCgroup, CgroupError> {
    let path = Path::new(PROC_SELF_CGROUP);
    let text = std::fs::read_to_string(path).map_err(io("read", path))?;
    ProcCgroup::parse(&text).map_err(|why| CgroupError::Parse {
        path: PROC_SELF_CGROUP,
        why,
    })
}

fn io(step: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> CgroupError {
    let path = path.display().to_string();
    move |source| CgroupError::Io { step, path, source }
}

/// v1 controllers a container gets a directory in (and cpuset, which [`create`] seeds from
/// its parent: a new cpuset directory starts with no CPUs and refuses tasks). blkio: its
/// I/O is then the container's own in `blkio.*` (podman stats' BlockIO), not its caller's.
const V1_CONTROLLERS: &[&str] = &[
    "memory", "cpu", "cpuacct", "pids", "freezer", "devices", "blkio", "hugetlb",
];

/// The named v1 hierarchy a container also gets a directory in, as runc and crun place it:
/// systemd's own, with no controller. Left at its caller's place (conmon often sits at its
/// root), the container would see the host's whole tree as its own, and a systemd inside
/// (podman `--systemd always` binds the hierarchy writable) would build its units there.
const V1_NAMED: &str = "name=systemd";

/// One cgroup hierarchy: its mount point, and its controllers (v1) or `None` (v2).
pub type Hierarchy = (PathBuf, Option<Vec<String>>);

/// Mount points of the cgroup hierarchies.
pub fn hierarchies() -> Result<Vec<Hierarchy>, CgroupError> {
    Ok(hierarchies_of(&own_mounts()?))
}

/// The cgroup2 mounts and the v1 ones with a controller cordon uses (or cpuset), of `mounts`;
/// and systemd's named one ([`V1_NAMED`]) beside those v1 ones only: on a pure v2 host that
/// also mounts it (for containers of an old systemd), the host stays v2.
pub fn hierarchies_of(mounts: &[MountInfo]) -> Vec<Hierarchy> {
    let mut out = Vec::new();
    for m in mounts {
        match m.fs_type.as_str() {
            "cgroup2" => out.push((m.mount_point.clone(), None)),
            "cgroup" => {
                let ctrls: Vec<String> = m
                    .super_options
                    .iter()
                    .filter(|o| {
                        V1_CONTROLLERS.contains(&o.as_str()) || *o == "cpuset" || *o == V1_NAMED
                    })
                    .cloned()
                    .collect();
                if !ctrls.is_empty() {
                    out.push((m.mount_point.clone(), Some(ctrls)));
                }
            }
            _ => {}
        }
    }
    let named = |c: &Option<Vec<String>>| c.as_ref().is_some_and(|c| c == &[V1_NAMED]);
    if !out.iter().any(|(_, c)| c.is_some() && !named(c)) {
        out.retain(|(_, c)| !named(c));
    }
    out
}

/// What a `cgroup` mount shows on a cgroup v1 (or hybrid) host; empty elsewhere.
#[derive(Debug, Clone, Default)]
pub struct V1View {
    pub binds: Vec<V1Bind>,
    pub links: Vec<(String, String)>,
    /// The hierarchies left out of `binds` (see [`v1_mount_plan`]): in a read-only cgroup
    /// mount, an empty directory each, a mount point for a later mount of the config (podman binds the container's
    /// `name=systemd` cgroup at /sys/fs/cgroup/systemd for `--systemd always`).
    pub empty: Vec<String>,
}

/// [`V1View`] for a container whose own cgroups are `own`, read from this process's
/// /proc/self/mountinfo and /proc/self/cgroup (the init it clones starts in the same
/// cgroups, then moves into `own`).
pub fn v1_view(own: &[PathBuf]) -> Result<V1View, CgroupError> {
    let mounts = own_mounts()?;
    let binds = v1_mount_plan(&mounts, &own_cgroups()?, own);
    let empty = v1_left_out(&mounts, &binds);
    Ok(V1View {
        binds,
        links: v1_links(Path::new("/sys/fs/cgroup"))?,
        empty,
    })
}

/// One hierarchy of a `cgroup` mount on a cgroup v1 (or hybrid) host, as the container sees
/// it: at `<destination>/<name>`, the container's own cgroup of that hierarchy, not the
/// hierarchy's root (as runc: a tmpfs, and one bind per hierarchy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V1Bind {
    /// The mount point's name below /sys/fs/cgroup (`memory`, `cpu,cpuacct`, `unified`).
    pub name: String,
    /// The host directory bound there: the container's cgroup of that hierarchy.
    pub src: PathBuf,
    /// Whether that cgroup is the container's own (created for it). A hierarchy cordon
    /// does not place the container in leaves it in the caller's cgroup, which the
    /// container must not change: always bound read-only.
    pub own: bool,
}

/// The names of the cgroup hierarchies mounted directly below /sys/fs/cgroup that `binds`
/// leaves out.
fn v1_left_out(mountinfo: &[MountInfo], binds: &[V1Bind]) -> Vec<String> {
    let base = Path::new("/sys/fs/cgroup");
    let mut out: Vec<String> = mountinfo
        .iter()
        .filter(|m| m.fs_type == "cgroup" || m.fs_type == "cgroup2")
        .filter_map(|m| {
            m.mount_point
                .strip_prefix(base)
                .ok()
                .filter(|n| n.components().count() == 1)
                .and_then(|n| n.to_str())
                .map(str::to_string)
        })
        .filter(|n| !binds.iter().any(|b| &b.name == n))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// What a `cgroup` mount shows on a v1/hybrid host: per hierarchy mounted directly below
/// /sys/fs/cgroup (`mountinfo`), the cgroup the container's init is in: one of `own` (the
/// directories created for the container) when one lies in that hierarchy, else the
/// caller's (`self_cgroup`, /proc/self/cgroup). A hierarchy whose cgroup lies
/// outside what its mount shows (another cgroup namespace's), or is its root, is left out. `links`: the
/// host's symlinks in /sys/fs/cgroup (`cpu` → `cpu,cpuacct`), recreated as they are.
pub fn v1_mount_plan(
    mountinfo: &[MountInfo],
    self_cgroup: &ProcCgroup,
    own: &[PathBuf],
) -> Vec<V1Bind> {
    let base = Path::new("/sys/fs/cgroup");
    let mut out = Vec::new();
    for m in mountinfo {
        let mp = m.mount_point.as_path();
        let Some(name) = mp
            .strip_prefix(base)
            .ok()
            .filter(|n| n.components().count() == 1)
            .and_then(|n| n.to_str())
        else {
            continue;
        };
        // The /proc/self/cgroup line of this hierarchy: `0::` for cgroup2, else the one
        // whose controllers (or `name=`) are all options of this mount.
        let path = match m.fs_type.as_str() {
            "cgroup2" => self_cgroup.unified.as_deref(),
            "cgroup" => self_cgroup
                .v1
                .iter()
                .find(|l| {
                    !l.controllers.is_empty()
                        && l.controllers.iter().all(|c| m.super_options.contains(c))
                })
                .map(|l| l.path.as_str()),
            _ => None,
        };
        let Some(path) = path else { continue };
        if let Some(dir) = own
            .iter()
            .find(|d| d.parent().is_some() && d.starts_with(mp))
        {
            out.push(V1Bind {
                name: name.to_string(),
                src: dir.clone(),
                own: true,
            });
            continue;
        }
        let Ok(below) = Path::new(path).strip_prefix(&m.root) else {
            continue;
        };
        // The hierarchy's root (the caller sits there: conmon often does in `name=systemd`)
        // would show every host cgroup and its processes: left out.
        if below.as_os_str().is_empty()
            || below
                .components()
                .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            continue;
        }
        out.push(V1Bind {
            name: name.to_string(),
            src: mp.join(below),
            own: false,
        });
    }
    out
}

/// The symlinks directly in `dir`, the host's /sys/fs/cgroup (`cpu` → `cpu,cpuacct`), for
/// [`v1_mount_plan`]'s tmpfs: (name, target), targets that are plain names only. A directory
/// or link that cannot be read is an error naming it (the container's cgroup mount would
/// otherwise lack those names without a word).
pub fn v1_links(dir: &Path) -> Result<Vec<(String, String)>, CgroupError> {
    let listing = "list the cgroup hierarchies (for the container's cgroup mount) in";
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(io(listing, dir))? {
        let e = e.map_err(io(listing, dir))?;
        let path = e.path();
        let kind = e
            .file_type()
            .map_err(io("read the type of a cgroup hierarchy entry", &path))?;
        if !kind.is_symlink() {
            continue;
        }
        let t = std::fs::read_link(&path).map_err(io("read the cgroup hierarchy link", &path))?;
        let (Some(n), Some(t)) = (e.file_name().to_str().map(String::from), t.to_str()) else {
            continue;
        };
        if !t.contains('/') && !t.is_empty() && t != ".." && t != "." {
            out.push((n, t.to_string()));
        }
    }
    out.sort();
    Ok(out)
}

/// `linux.cgroupsPath` → a path below each hierarchy's root. `--systemd-cgroup` paths
/// (`slice:prefix:name`) become where systemd puts that unit ([`systemd_path`]; there is no
/// systemd to ask here).
/// An absolute path is below the hierarchy's root. Without one: `cordon/<id>` for root,
/// `cordon-<uid>/<id>` for another user on cgroup v1 (two users' containers may share an id).
///
/// On a pure cgroup v2 host (`v2_own`: cordon-oci's own cgroup, the `0::` line of
/// /proc/self/cgroup) a relative path is below the parent of cordon-oci's own cgroup, as runc
/// and crun place it; so is an unprivileged caller's default, `cordon-<id>`: a user may create
/// cgroups only in a subtree delegated to it, and a `systemd-run --user --scope -p
/// Delegate=yes` scope (or a user manager's app.slice) is such a subtree's child. The parent,
/// not the own cgroup: that one holds cordon-oci, so (no internal processes) it could not
/// hand controllers to a child.
pub fn relative_path(
    cgroups_path: Option<&str>,
    id: &str,
    systemd: bool,
    v2_own: Option<&Path>,
) -> Result<PathBuf, CgroupError> {
    relative_path_for(
        cgroups_path,
        id,
        systemd,
        nix::unistd::geteuid().as_raw(),
        v2_own,
    )
}

fn relative_path_for(
    cgroups_path: Option<&str>,
    id: &str,
    systemd: bool,
    uid: u32,
    v2_own: Option<&Path>,
) -> Result<PathBuf, CgroupError> {
    let beside_own = |name: &str| {
        let own = v2_own.unwrap_or(Path::new("/"));
        let parent = own.parent().unwrap_or(own);
        parent
            .strip_prefix("/")
            .unwrap_or(parent)
            .join(name.trim_start_matches('/'))
    };
    Ok(match cgroups_path {
        Some(p) if systemd && !p.is_empty() => {
            systemd_path(p).map_err(|why| CgroupError::Resource {
                field: "linux.cgroupsPath".into(),
                why: format!("{p:?} (--systemd-cgroup): {why}"),
            })?
        }
        Some(p) if !p.is_empty() && !p.starts_with('/') && v2_own.is_some() => beside_own(p),
        Some(p) if !p.is_empty() => PathBuf::from(p.trim_start_matches('/')),
        _ if uid == 0 => PathBuf::from(format!("cordon/{id}")),
        _ if v2_own.is_some() => beside_own(&format!("cordon-{id}")),
        _ => PathBuf::from(format!("cordon-{uid}/{id}")),
    })
}

/// A `--systemd-cgroup` cgroupsPath, `slice:prefix:name`, as the path of the unit's cgroup
/// below the hierarchy's root, as runc makes it: the slice expanded ([`expand_slice`]; an
/// empty one is `system.slice`), then the unit: `prefix-name.scope`, or `name` itself when it
/// is a slice (not expanded: runc's path). Anything else is refused, with why.
fn systemd_path(p: &str) -> Result<PathBuf, String> {
    let (slice, unit) = systemd_unit(p)?;
    Ok(expand_slice(&slice)?.join(unit))
}

/// A `--systemd-cgroup` cgroupsPath, `slice:prefix:name`, as the slice (an empty one is
/// `system.slice`) and the unit (`prefix-name.scope`, or `name` when it is a slice) it names.
pub fn systemd_unit(p: &str) -> Result<(String, String), String> {
    let [slice, prefix, name] = p.split(':').collect::<Vec<_>>()[..] else {
        return Err(
            "give it as slice:prefix:name (for example system.slice:cri-containerd:ID)".into(),
        );
    };
    let slice = if slice.is_empty() {
        "system.slice"
    } else {
        slice
    };
    if name.is_empty() || name.contains('/') || prefix.contains('/') || name == ".." {
        return Err(format!(
            "the prefix {prefix:?} and name {name:?} must be unit name parts: a name, and no `/`"
        ));
    }
    let unit = if name.ends_with(".slice") {
        name.to_string()
    } else {
        format!("{prefix}-{name}.scope")
    };
    expand_slice(slice)?;
    Ok((slice.to_string(), unit))
}

/// A systemd slice name as its path, as systemd (and runc's ExpandSlice) nests it: each
/// `-` opens a level, `a-b-c.slice` → `a.slice/a-b.slice/a-b-c.slice`; `-.slice` is the root.
/// Refused, as runc refuses them: no `.slice` suffix, a `/`, an empty part (`a--b.slice`,
/// `-a.slice`, `a-.slice`).
fn expand_slice(slice: &str) -> Result<PathBuf, String> {
    let bad = || format!("{slice:?} is not a systemd slice name (like kubepods-burstable.slice)");
    let base = slice.strip_suffix(".slice").ok_or_else(bad)?;
    if base.is_empty() || slice.contains('/') {
        return Err(bad());
    }
    if base == "-" {
        return Ok(PathBuf::new());
    }
    let mut path = PathBuf::new();
    let mut prefix = String::new();
    for part in base.split('-') {
        if part.is_empty() {
            return Err(bad());
        }
        prefix.push_str(part);
        path.push(format!("{prefix}.slice"));
        prefix.push('-');
    }
    Ok(path)
}

/// The mount point of systemd's named hierarchy ([`V1_NAMED`]) when the container gets a
/// directory there (beside v1 controller hierarchies). That directory is joined as runc joins
/// it, at best: a host where it cannot be made still runs the container.
pub fn named_hierarchy() -> Result<Option<PathBuf>, CgroupError> {
    Ok(hierarchies()?
        .into_iter()
        .find(|(_, c)| c.as_ref().is_some_and(|c| c == &[V1_NAMED]))
        .map(|(mp, _)| mp))
}

/// cordon-oci's own cgroup in the v2 hierarchy (the `0::` line of /proc/self/cgroup), when
/// the host is pure cgroup v2 (a cgroup2 mount and no v1 controller hierarchy).
pub fn own_v2_cgroup() -> Result<Option<PathBuf>, CgroupError> {
    let h = hierarchies()?;
    if h.iter().any(|(_, c)| c.is_some()) || !h.iter().any(|(_, c)| c.is_none()) {
        return Ok(None);
    }
    Ok(own_cgroups()?.unified.map(PathBuf::from))
}

/// The container's cgroup directories: the v2 one when the host is pure v2, else one per
/// v1 hierarchy with a controller cordon uses.
pub fn dirs_for(rel: &Path) -> Result<Vec<PathBuf>, CgroupError> {
    dirs_for_limits(rel, false)
}

/// [`dirs_for`], for a container whose limits include huge pages (`hugetlb`): on a hybrid
/// host that mounts no v1 hugetlb hierarchy but has the controller in its cgroup2 (unified)
/// hierarchy, the container gets a cgroup there too, after the v1 ones, as runc places
/// containers in the unified hierarchy of a hybrid host. Only then: moving a process into a
/// v2 cgroup costs an RCU grace period (see [`attach_self`]), which every other container is
/// spared.
pub fn dirs_for_limits(rel: &Path, hugetlb: bool) -> Result<Vec<PathBuf>, CgroupError> {
    let h = hierarchies()?;
    Ok(dirs_of(&h, rel, hugetlb, |mp| {
        std::fs::read_to_string(mp.join("cgroup.controllers")).unwrap_or_default()
    }))
}

/// [`dirs_for_limits`] for the hierarchies `h`; `controllers` reads a cgroup2 mount's
/// root cgroup.controllers.
fn dirs_of(
    h: &[Hierarchy],
    rel: &Path,
    hugetlb: bool,
    controllers: impl Fn(&Path) -> String,
) -> Vec<PathBuf> {
    let v1: Vec<&Hierarchy> = h.iter().filter(|(_, c)| c.is_some()).collect();
    let unified = h.iter().find(|(_, c)| c.is_none()).map(|(mp, _)| mp);
    if v1.is_empty() {
        return unified.map(|mp| vec![mp.join(rel)]).unwrap_or_default();
    }
    let mut dirs: Vec<PathBuf> = v1.iter().map(|(mp, _)| mp.join(rel)).collect();
    let v1_hugetlb = v1
        .iter()
        .any(|(_, c)| c.iter().flatten().any(|c| c == "hugetlb"));
    if let Some(mp) = unified
        && hugetlb
        && !v1_hugetlb
        && controllers(mp).split_whitespace().any(|c| c == "hugetlb")
    {
        dirs.push(mp.join(rel));
    }
    dirs
}

/// Creates the directories (cpuset ones inherit their parent's cpus and mems). An existing
/// directory is reused only while no process is in it: a live one belongs to another
/// container, whose limits this one must not take over.
pub fn create(dirs: &[PathBuf]) -> Result<(), CgroupError> {
    for d in dirs {
        if d.exists() {
            if !pids(std::slice::from_ref(d)).is_empty() {
                return Err(CgroupError::Io {
                    step: "use the cgroup",
                    path: d.display().to_string(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::AlreadyExists,
                        "it already holds processes (of another container?); give linux.cgroupsPath",
                    ),
                });
            }
            continue;
        }
        // Walk down so that every new cpuset level is seeded from its parent.
        let mut cur = PathBuf::new();
        for comp in d.components() {
            cur.push(comp);
            if cur.exists() {
                continue;
            }
            // cgroup v2: a child has the controllers its parent delegates; delegate every
            // controller the parent has (memory, cpu, pids...) before creating the child.
            if let Some(parent) = cur.parent()
                && parent.join("cgroup.subtree_control").exists()
            {
                let have =
                    std::fs::read_to_string(parent.join("cgroup.controllers")).unwrap_or_default();
                let want: Vec<String> = have.split_whitespace().map(|c| format!("+{c}")).collect();
                if !want.is_empty() {
                    let p = parent.join("cgroup.subtree_control");
                    std::fs::write(&p, want.join(" "))
                        .map_err(io("enable the controllers in", &p))?;
                }
            }
            // Another create may make the same missing parent between the check above and
            // here (two containers below one new cgroupsPath parent): that parent is as
            // good as made by this one. The container's own directory is not: two creates
            // of one cgroup must not share it.
            let made = match std::fs::create_dir(&cur) {
                Ok(()) => true,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && cur != *d => false,
                Err(e) => return Err(io("create the cgroup", &cur)(e)),
            };
            for f in ["cpuset.cpus", "cpuset.mems"] {
                if let (Some(parent), true) = (cur.parent(), cur.join(f).exists()) {
                    // One the other create made may not be seeded yet: seed it if empty.
                    if !made
                        && !std::fs::read_to_string(cur.join(f))
                            .unwrap_or_default()
                            .trim()
                            .is_empty()
                    {
                        continue;
                    }
                    let v = std::fs::read_to_string(parent.join(f)).unwrap_or_default();
                    let _ = std::fs::write(cur.join(f), v.trim());
                }
            }
        }
    }
    Ok(())
}

/// The first directory that has `file`.
fn with_file(dirs: &[PathBuf], file: &str) -> Option<PathBuf> {
    dirs.iter().map(|d| d.join(file)).find(|p| p.exists())
}

fn write(dirs: &[PathBuf], field: &str, file: &str, value: &str) -> Result<(), CgroupError> {
    write_to(&find(dirs, field, file)?, field, value)
}

/// The directory of `dirs` that has `file`, as a path to it; an error for `field` if none has.
fn find(dirs: &[PathBuf], field: &str, file: &str) -> Result<PathBuf, CgroupError> {
    with_file(dirs, file).ok_or_else(|| CgroupError::Resource {
        field: field.into(),
        why: format!("this host's cgroups have no {file} (is that controller mounted, and is cordon-oci allowed to create cgroups?)"),
    })
}

fn write_to(path: &Path, field: &str, value: &str) -> Result<(), CgroupError> {
    std::fs::write(path, value).map_err(|e| {
        let file = path.file_name().and_then(|f| f.to_str()).unwrap_or("");
        let fix = match (e.raw_os_error(), file) {
            (Some(libc::EINVAL), "memory.limit_in_bytes" | "memory.memsw.limit_in_bytes") => {
                "; cgroup v1 keeps the memory limit at or below the memory+swap limit (memory.memsw.limit_in_bytes): give a swap limit (linux.resources.memory.swap, `update --memory-swap`) at least the memory limit, or -1"
            }
            (Some(libc::ENODEV), f) if f.starts_with("blkio.") || f.starts_with("io.") => {
                "; this host has no whole block device of that major:minor (limits apply to disks, not partitions; /sys/dev/block lists them)"
            }
            (Some(libc::EOPNOTSUPP), "blkio.bfq.weight_device" | "io.bfq.weight") => {
                "; a device's own weight needs the device to use the BFQ I/O scheduler (`echo bfq > /sys/dev/block/MAJOR:MINOR/queue/scheduler`)"
            }
            (Some(libc::EOPNOTSUPP), "io.weight") => {
                "; a device's own weight needs io.cost enabled for the device (the root cgroup's io.cost.qos) or the BFQ I/O scheduler"
            }
            (Some(libc::EINVAL | libc::ERANGE), _) => {
                "; the kernel refused the value: check its range and format"
            }
            (Some(libc::EBUSY), _) => {
                "; the cgroup's current usage or its children's settings are in the way: lower them first"
            }
            _ => "",
        };
        CgroupError::Resource {
            field: field.into(),
            why: format!("write {value:?} to {}: {e}{fix}", path.display()),
        }
    })
}

/// Whether these are cgroup v2 directories.
pub fn is_v2(dirs: &[PathBuf]) -> bool {
    with_file(dirs, "cgroup.controllers").is_some() && with_file(dirs, "tasks").is_none()
}

/// `r` with the values runc takes as not given left out: a memory limit, reservation or swap
/// limit of 0, and cpu shares, quota, period and real-time period or runtime of 0 (runc
/// writes none of them; written, they would be a limit of no memory at all, the lowest cpu
/// weight, or a period the kernel refuses: `ctr run --cpu-quota N` sends `"period": 0`).
pub(crate) fn zero_is_unset(r: &LinuxResources) -> LinuxResources {
    let mut r = r.clone();
    if let Some(mut m) = *r.memory() {
        let unset = |v: Option<i64>| v.filter(|&v| v != 0);
        m.set_limit(unset(m.limit()));
        m.set_reservation(unset(m.reservation()));
        m.set_swap(unset(m.swap()));
        m.set_kernel(unset(m.kernel()));
        r.set_memory(Some(m));
    }
    if let Some(mut c) = r.cpu().clone() {
        c.set_shares(c.shares().filter(|&s| s != 0));
        c.set_quota(c.quota().filter(|&q| q != 0));
        c.set_period(c.period().filter(|&p| p != 0));
        c.set_realtime_period(c.realtime_period().filter(|&p| p != 0));
        c.set_realtime_runtime(c.realtime_runtime().filter(|&r| r != 0));
        r.set_cpu(Some(c));
    }
    r
}

/// Writes `linux.resources`.
/// Every field cordon-oci cannot honour is refused, and `checkBeforeUpdate` checked, before
/// the first write: an `update` that fails leaves the cgroup as it was (a write the kernel
/// refuses can still fail part-way, as in runc).
pub fn apply(dirs: &[PathBuf], r: &LinuxResources) -> Result<(), CgroupError> {
    let r = &zero_is_unset(r);
    let v2 = is_v2(dirs);
    refuse_unsupported(r, v2)?;
    let mut late = match r.block_io() {
        Some(b) => block_io_writes(dirs, b, v2)?,
        None => Vec::new(),
    };
    late.extend(hugetlb_writes(
        dirs,
        r.hugepage_limits().as_deref().unwrap_or(&[]),
        v2,
        hugetlb_v1_mounted,
    )?);
    if let Some(m) = r.memory()
        && m.check_before_update() == Some(true)
    {
        check_memory_usage(dirs, m.limit(), m.swap(), v2)?;
    }
    let unsupported = |field: &str, why: &str| {
        Err(CgroupError::Resource {
            field: field.into(),
            why: why.into(),
        })
    };
    // Decided before any write, so that a refused update changes nothing.
    let v2_swap = match r.memory() {
        Some(m) if v2 => v2_swap_max(dirs, m)?,
        _ => None,
    };
    if let Some(m) = r.memory() {
        if let Some(t) = m.kernel_tcp() {
            write(
                dirs,
                "linux.resources.memory.kernelTCP",
                "memory.kmem.tcp.limit_in_bytes",
                &t.to_string(),
            )?;
            let back = read_u64(dirs, "memory.kmem.tcp.limit_in_bytes", None);
            if t >= 0 && back.is_some_and(|b| b > t as u64) {
                return unsupported(
                    "linux.resources.memory.kernelTCP",
                    "the kernel did not keep the value written to memory.kmem.tcp.limit_in_bytes",
                );
            }
        }
        let f = "linux.resources.memory";
        let limit_str = |v: i64| {
            if v < 0 {
                "max".to_string()
            } else {
                v.to_string()
            }
        };
        if v2 {
            if let Some(l) = m.reservation() {
                write(dirs, f, "memory.low", &limit_str(l))?;
            }
            if let Some(l) = m.limit() {
                write(dirs, f, "memory.max", &limit_str(l))?;
            }
            if let Some(v) = &v2_swap {
                write(dirs, f, "memory.swap.max", v)?;
            }
        } else {
            let v1 = |v: i64| {
                if v < 0 {
                    "-1".to_string()
                } else {
                    v.to_string()
                }
            };
            // The kernel keeps memory.limit_in_bytes at or below memory.memsw.limit_in_bytes
            // at every write: raising both writes memsw first, lowering both the limit first
            // (runc's order: memsw first when it becomes unlimited or exceeds the current
            // limit).
            let write_swap = |s: i64| {
                write(
                    dirs,
                    "linux.resources.memory.swap",
                    "memory.memsw.limit_in_bytes",
                    &v1(s),
                )
            };
            let swap_first = match (m.limit(), m.swap()) {
                (Some(_), Some(s)) => {
                    s < 0
                        || read_u64(dirs, "memory.limit_in_bytes", None)
                            .is_some_and(|cur| cur < s as u64)
                }
                _ => false,
            };
            if swap_first && let Some(s) = m.swap() {
                write_swap(s)?;
            }
            if let Some(l) = m.limit() {
                write(dirs, f, "memory.limit_in_bytes", &v1(l))?;
            }
            if let Some(l) = m.reservation() {
                write(dirs, f, "memory.soft_limit_in_bytes", &v1(l))?;
            }
            if !swap_first && let Some(s) = m.swap() {
                write_swap(s)?;
            }
            if let Some(s) = m.swappiness() {
                write(
                    dirs,
                    "linux.resources.memory.swappiness",
                    "memory.swappiness",
                    &s.to_string(),
                )?;
            }
            if m.disable_oom_killer() == Some(true) {
                write(
                    dirs,
                    "linux.resources.memory.disableOOMKiller",
                    "memory.oom_control",
                    "1",
                )?;
            }
        }
    }
    if let Some(c) = r.cpu() {
        let f = "linux.resources.cpu";
        // The kernel keeps the burst at or below the quota at every write (Linux 5.14), so
        // lowering both needs the burst first, raising both the quota first: as runc, the
        // burst is tried before the quota (a refusal there is not final) and written after.
        let burst_file = if v2 {
            "cpu.max.burst"
        } else {
            "cpu.cfs_burst_us"
        };
        if let Some(b) = c.burst()
            && let Some(p) = with_file(dirs, burst_file)
        {
            let _ = std::fs::write(p, b.to_string());
        }
        if v2 {
            if let Some(s) = c.shares() {
                // The conversion runc and crun use: [2, 262144] → [1, 10000].
                let w = 1 + ((s.clamp(2, 262144) - 2) * 9999) / 262142;
                write(dirs, f, "cpu.weight", &w.to_string())?;
            }
            if c.quota().is_some() || c.period().is_some() {
                // cpu.max holds both: what is not given (an `update` of one of them) keeps its
                // current value, as in v1's two files.
                let (cur_q, cur_p) = current_cpu_max(dirs);
                let q = match c.quota() {
                    Some(q) if q > 0 => q.to_string(),
                    Some(_) => "max".into(),
                    None => cur_q,
                };
                let p = c.period().unwrap_or(cur_p);
                write(dirs, f, "cpu.max", &format!("{q} {p}"))?;
            }
        } else {
            if let Some(s) = c.shares() {
                write(dirs, f, "cpu.shares", &s.to_string())?;
            }
            if let Some(p) = c.period() {
                write(dirs, f, "cpu.cfs_period_us", &p.to_string())?;
            }
            if let Some(q) = c.quota() {
                write(dirs, f, "cpu.cfs_quota_us", &q.to_string())?;
            }
            if let Some(p) = c.realtime_period() {
                write(
                    dirs,
                    "linux.resources.cpu.realtimePeriod",
                    "cpu.rt_period_us",
                    &p.to_string(),
                )?;
            }
            if let Some(rt) = c.realtime_runtime() {
                write(
                    dirs,
                    "linux.resources.cpu.realtimeRuntime",
                    "cpu.rt_runtime_us",
                    &rt.to_string(),
                )?;
            }
        }
        // After the quota, whichever version wrote it (see above).
        if let Some(b) = c.burst() {
            write(
                dirs,
                "linux.resources.cpu.burst",
                burst_file,
                &b.to_string(),
            )?;
        }
        // SCHED_IDLE for the group (Linux 5.15, v1 and v2 alike).
        if let Some(i) = c.idle() {
            write(dirs, "linux.resources.cpu.idle", "cpu.idle", &i.to_string())?;
        }
        if let Some(cpus) = c.cpus().as_ref().filter(|s| !s.is_empty()) {
            write(dirs, "linux.resources.cpu.cpus", "cpuset.cpus", cpus)?;
        }
        if let Some(mems) = c.mems().as_ref().filter(|s| !s.is_empty()) {
            write(dirs, "linux.resources.cpu.mems", "cpuset.mems", mems)?;
        }
    }
    if let Some(p) = r.pids() {
        let v = if p.limit() <= 0 {
            "max".to_string()
        } else {
            p.limit().to_string()
        };
        write(dirs, "linux.resources.pids", "pids.max", &v)?;
    }
    if let Some(rules) = r.devices() {
        apply_devices(dirs, rules)?;
    }
    for w in &late {
        write_to(&w.path, &w.field, &w.value)?;
    }
    // Last, as runc: the raw files it names have the final word over what the fields above
    // set (Kubernetes' memory.swap.max for its swap behaviour, over memory.swap's).
    if let Some(u) = r.unified() {
        for (k, v) in u {
            write(dirs, "linux.resources.unified", k, v)?;
        }
    }
    Ok(())
}

/// cgroup v2's `memory.swap.max` for `m.swap`, which is memory plus swap (v1's memsw): the
/// difference from the memory limit (given, or else the one in force, for an `update` of the
/// swap alone); `max` for -1. As runc, a figure without a memory limit, or below it, is an
/// error (v1's kernel refuses it too), not swap 0 or a swap-only figure.
fn v2_swap_max(
    dirs: &[PathBuf],
    m: &oci_spec::runtime::LinuxMemory,
) -> Result<Option<String>, CgroupError> {
    let field = "linux.resources.memory.swap";
    let refuse = |why: String| {
        Err(CgroupError::Resource {
            field: field.into(),
            why,
        })
    };
    let Some(s) = m.swap() else { return Ok(None) };
    if s < 0 {
        return Ok(Some("max".into()));
    }
    let limit = m
        .limit()
        .or_else(|| read_u64(dirs, "memory.max", None).and_then(|v| i64::try_from(v).ok()));
    match limit {
        Some(l) if l >= 0 && s >= l => Ok(Some((s - l).to_string())),
        Some(l) if l >= 0 => refuse(format!(
            "{s} is below the memory limit {l}: swap is memory plus swap, so it must be at least the memory limit (equal: no swap)"
        )),
        _ => refuse(
            "a memory plus swap limit needs a memory limit (linux.resources.memory.limit); give both, or -1 for no swap limit".into(),
        ),
    }
}

/// `linux.resources.hugepageLimits` as the writes that apply them: per page size (`2MB`,
/// `1GB`, as the kernel names them) cgroup v1's `hugetlb.<size>.limit_in_bytes` or v2's
/// `hugetlb.<size>.max`, and the reservation limit beside it where the kernel has one
/// (`rsvd`, Linux 5.7; as runc 1.2), so that memory reserved at mmap counts too. Kubernetes
/// gives every page size of the node, 0 for those a pod did not ask for.
fn hugetlb_writes(
    dirs: &[PathBuf],
    limits: &[oci_spec::runtime::LinuxHugepageLimit],
    v2: bool,
    v1_mounted: impl Fn() -> bool,
) -> Result<Vec<LateWrite>, CgroupError> {
    let mut out = Vec::new();
    for (i, l) in limits.iter().enumerate() {
        let field = format!("linux.resources.hugepageLimits[{i}]");
        let size = l.page_size();
        let digits = size.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        let unit = &size[digits.len()..];
        if digits.is_empty()
            || !digits.bytes().all(|b| b.is_ascii_digit())
            || !matches!(unit, "KB" | "MB" | "GB")
        {
            return Err(CgroupError::Resource {
                field: format!("{field}.pageSize"),
                why: format!(
                    "{size:?} is not a huge page size: give it as the kernel names it, e.g. `2MB` or `1GB`"
                ),
            });
        }
        let v2_files = (
            format!("hugetlb.{size}.max"),
            format!("hugetlb.{size}.rsvd.max"),
        );
        let v1_files = (
            format!("hugetlb.{size}.limit_in_bytes"),
            format!("hugetlb.{size}.rsvd.limit_in_bytes"),
        );
        // The files' names say the version: on a hybrid host the container's hugetlb
        // cgroup may be its unified one ([`dirs_for_limits`]) beside v1 ones.
        let in_v2 = v2
            || (with_file(dirs, &v1_files.0).is_none() && with_file(dirs, &v2_files.0).is_some());
        let (limit_file, rsvd_file) = if in_v2 { v2_files } else { v1_files };
        let path = with_file(dirs, &limit_file).ok_or_else(|| CgroupError::Resource {
            field: field.clone(),
            why: format!(
                "this host's cgroups have no {limit_file}: {}",
                if hugetlb_anywhere(dirs) {
                    "the kernel has no huge pages of that size (/sys/kernel/mm/hugepages lists the sizes it has)".to_string()
                } else if v2 {
                    "the hugetlb controller is not enabled for the container's cgroup (its parent's cgroup.subtree_control)".to_string()
                } else if v1_mounted() {
                    "the container has no hugetlb cgroup, though this host mounts that hierarchy: it was created by an older cordon-oci, or before the hierarchy was mounted; recreate it".to_string()
                } else {
                    "the container has no hugetlb cgroup: this host mounts no cgroup v1 hugetlb hierarchy, and a container gets one in the unified hierarchy of a hybrid host only when created with hugepageLimits; recreate it with them".to_string()
                }
            ),
        })?;
        // v2 says `max` for no limit; v1 takes -1.
        let value = match l.limit() {
            n if n < 0 && in_v2 => "max".to_string(),
            n => n.to_string(),
        };
        // The limit first (as runc): if the kernel refuses it, the reservation limit is
        // left as it was.
        let rsvd = with_file(dirs, &rsvd_file);
        out.push(LateWrite {
            field: field.clone(),
            path,
            value: value.clone(),
        });
        if let Some(rsvd) = rsvd {
            out.push(LateWrite {
                field,
                path: rsvd,
                value,
            });
        }
    }
    Ok(out)
}

/// Whether this host mounts a cgroup v1 hierarchy with the hugetlb controller.
fn hugetlb_v1_mounted() -> bool {
    own_mounts().is_ok_and(|mounts| {
        mounts
            .iter()
            .any(|m| m.fs_type == "cgroup" && m.super_options.iter().any(|o| o == "hugetlb"))
    })
}

/// Whether any of `dirs` has a hugetlb file (the controller is there, whatever the sizes).
fn hugetlb_anywhere(dirs: &[PathBuf]) -> bool {
    dirs.iter().any(|d| {
        std::fs::read_dir(d).is_ok_and(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("hugetlb."))
        })
    })
}

/// One write of `linux.resources.blockIO` or `hugepageLimits`: `value` to the cgroup file at
/// `path`, found before the first write of `linux.resources`.
#[derive(Debug, PartialEq, Eq)]
struct LateWrite {
    field: String,
    path: PathBuf,
    value: String,
}

/// Whether `b` asks for anything: podman sends `"blockIO": {}` when it has dropped a weight
/// the kernel cannot take, and a weight of 0 is none.
pub fn block_io_asks(b: &oci_spec::runtime::LinuxBlockIo) -> bool {
    let listed = |v: &Option<Vec<oci_spec::runtime::LinuxThrottleDevice>>| {
        v.as_ref().is_some_and(|v| !v.is_empty())
    };
    b.weight().is_some_and(|w| w != 0)
        || b.leaf_weight().is_some_and(|w| w != 0)
        || b.weight_device().as_ref().is_some_and(|v| !v.is_empty())
        || listed(b.throttle_read_bps_device())
        || listed(b.throttle_write_bps_device())
        || listed(b.throttle_read_iops_device())
        || listed(b.throttle_write_iops_device())
}

/// `linux.resources.blockIO` as the writes that apply it, every file found and every value
/// checked before the first write. cgroup v1: the blkio files (weights in BFQ's
/// `blkio.bfq.weight*`, or CFQ's `blkio.weight*` on kernels before 5.0; throttles in
/// `blkio.throttle.*`). cgroup v2: BFQ's `io.bfq.weight` (the same 10-1000 scale), else
/// `io.weight` (1-10000, converted as runc and crun do); throttles in `io.max`. A weight of 0
/// is not given (as runc).
fn block_io_writes(
    dirs: &[PathBuf],
    b: &oci_spec::runtime::LinuxBlockIo,
    v2: bool,
) -> Result<Vec<LateWrite>, CgroupError> {
    let base = "linux.resources.blockIO";
    let bad = |field: String, why: String| CgroupError::Resource { field, why };
    let check_weight = |field: &str, w: u16| {
        if (10..=1000).contains(&w) {
            Ok(w)
        } else {
            Err(bad(
                field.into(),
                format!("{w} is not a block I/O weight: give 10 to 1000"),
            ))
        }
    };
    let device = |field: &str, major: i64, minor: i64| {
        if major < 0 || minor < 0 {
            return Err(bad(
                field.into(),
                format!(
                    "{major}:{minor} is not a device number: give the major and minor numbers of a block device (/sys/dev/block lists them)"
                ),
            ));
        }
        Ok(format!("{major}:{minor}"))
    };
    // The first of `files` the cgroup has; else an error saying what provides it.
    let pick = |field: &str,
                files: &[&'static str],
                why: &str|
     -> Result<(PathBuf, &'static str), CgroupError> {
        files
            .iter()
            .find_map(|f| with_file(dirs, f).map(|p| (p, *f)))
            .ok_or_else(|| bad(field.into(), why.into()))
    };
    let no_weight = if v2 {
        "this host's cgroup has neither io.bfq.weight nor io.weight (is the io controller enabled in the parent's cgroup.subtree_control, and the kernel built with BFQ group scheduling or io.cost?); remove the weight"
    } else {
        "this host's blkio cgroup has neither blkio.bfq.weight nor blkio.weight: load the BFQ I/O scheduler (`modprobe bfq`), whose group scheduling provides them, or remove the weight"
    };
    let no_leaf = if v2 {
        "cgroup v2 has no leaf weight: remove the field"
    } else {
        "this kernel has no blkio.leaf_weight (CFQ's, removed in Linux 5.0): remove the field"
    };
    // io.weight's scale is 1-10000 with 100 the default; blkio's 10-1000 with 500.
    let convert = |w: u16, file: &str| -> u32 {
        if file == "io.weight" {
            1 + (u32::from(w) - 10) * 9999 / 990
        } else {
            u32::from(w)
        }
    };
    let weight_files: &[&'static str] = if v2 {
        &["io.bfq.weight", "io.weight"]
    } else {
        &["blkio.bfq.weight", "blkio.weight"]
    };
    // v2's weight files take a device's weight too (`MAJOR:MINOR WEIGHT`).
    let device_weight_files: &[&'static str] = if v2 {
        weight_files
    } else {
        &["blkio.bfq.weight_device", "blkio.weight_device"]
    };
    let mut out = Vec::new();
    if let Some(w) = b.weight().filter(|&w| w != 0) {
        let field = format!("{base}.weight");
        let w = check_weight(&field, w)?;
        let (path, file) = pick(&field, weight_files, no_weight)?;
        let value = match file {
            "io.weight" => format!("default {}", convert(w, file)),
            _ => w.to_string(),
        };
        out.push(LateWrite { field, path, value });
    }
    if let Some(w) = b.leaf_weight().filter(|&w| w != 0) {
        let field = format!("{base}.leafWeight");
        let w = check_weight(&field, w)?;
        let files: &[&str] = if v2 { &[] } else { &["blkio.leaf_weight"] };
        let (path, _) = pick(&field, files, no_leaf)?;
        out.push(LateWrite {
            field,
            path,
            value: w.to_string(),
        });
    }
    for (i, d) in b.weight_device().iter().flatten().enumerate() {
        let field = format!("{base}.weightDevice[{i}]");
        let dev = device(&field, d.major(), d.minor())?;
        if let Some(w) = d.weight().filter(|&w| w != 0) {
            let w = check_weight(&format!("{field}.weight"), w)?;
            let (path, file) = pick(&field, device_weight_files, no_weight)?;
            let value = format!("{dev} {}", convert(w, file));
            out.push(LateWrite {
                field: format!("{field}.weight"),
                path,
                value,
            });
        }
        if let Some(w) = d.leaf_weight().filter(|&w| w != 0) {
            let leaf_field = format!("{field}.leafWeight");
            let w = check_weight(&leaf_field, w)?;
            let files: &[&str] = if v2 {
                &[]
            } else {
                &["blkio.leaf_weight_device"]
            };
            let (path, _) = pick(&leaf_field, files, no_leaf)?;
            out.push(LateWrite {
                field: leaf_field,
                path,
                value: format!("{dev} {w}"),
            });
        }
    }
    let throttles = [
        (
            "throttleReadBpsDevice",
            b.throttle_read_bps_device(),
            "read_bps_device",
            "rbps",
        ),
        (
            "throttleWriteBpsDevice",
            b.throttle_write_bps_device(),
            "write_bps_device",
            "wbps",
        ),
        (
            "throttleReadIOPSDevice",
            b.throttle_read_iops_device(),
            "read_iops_device",
            "riops",
        ),
        (
            "throttleWriteIOPSDevice",
            b.throttle_write_iops_device(),
            "write_iops_device",
            "wiops",
        ),
    ];
    for (name, list, v1_file, v2_key) in throttles {
        for (i, t) in list.iter().flatten().enumerate() {
            let field = format!("{base}.{name}[{i}]");
            let dev = device(&field, t.major(), t.minor())?;
            // A rate of 0 removes the device's limit (v1's own meaning; v2 says `max`).
            let (file, value) = if v2 {
                let rate = match t.rate() {
                    0 => "max".to_string(),
                    r => r.to_string(),
                };
                ("io.max".to_string(), format!("{dev} {v2_key}={rate}"))
            } else {
                (
                    format!("blkio.throttle.{v1_file}"),
                    format!("{dev} {}", t.rate()),
                )
            };
            let why = format!(
                "this host's cgroup has no {file}: the kernel needs block I/O throttling (CONFIG_BLK_DEV_THROTTLING){}",
                if v2 {
                    ", and the io controller enabled in the parent's cgroup.subtree_control"
                } else {
                    ""
                }
            );
            let path = with_file(dirs, &file).ok_or_else(|| bad(field.clone(), why))?;
            out.push(LateWrite { field, path, value });
        }
    }
    Ok(out)
}

/// The fields of `linux.resources` that cgroup v1 or v2 (`v2`) cannot take from cordon-oci.
fn refuse_unsupported(r: &LinuxResources, v2: bool) -> Result<(), CgroupError> {
    let unsupported = |field: &str, why: &str| {
        Err(CgroupError::Resource {
            field: field.into(),
            why: why.into(),
        })
    };
    if r.network().is_some() {
        return unsupported("linux.resources.network", "not implemented");
    }
    if r.rdma().is_some() {
        return unsupported("linux.resources.rdma", "not implemented");
    }
    if let Some(u) = r.unified()
        && !u.is_empty()
    {
        if !v2 {
            return unsupported("linux.resources.unified", "needs cgroup v2");
        }
        if u.keys().any(|k| k.contains('/') || k.starts_with('.')) {
            return unsupported("linux.resources.unified", "not a cgroup file name");
        }
    }
    if let Some(m) = r.memory() {
        // Kernel memory is charged to the memory cgroup's own counter (v2 always; v1 since
        // Linux 4.x with kmem accounting), and current kernels ignore a separate kmem limit.
        // So a `kernel` limit at or above `limit` is enforced by `limit`; a lower one cannot be.
        if let Some(k) = m.kernel() {
            let covered = matches!(m.limit(), Some(l) if l >= 0 && (k < 0 || k >= l));
            if !covered {
                return unsupported(
                    "linux.resources.memory.kernel",
                    "a kernel memory cap below linux.resources.memory.limit cannot be enforced (kernels since 5.16 ignore memory.kmem.limit_in_bytes); drop it or make it at least the memory limit",
                );
            }
        }
        if v2 && m.kernel_tcp().is_some() {
            return unsupported(
                "linux.resources.memory.kernelTCP",
                "cgroup v2 has no separate TCP buffer limit",
            );
        }
        if v2 && m.swappiness().is_some() {
            return unsupported("linux.resources.memory.swappiness", "cgroup v2 has none");
        }
        if v2 && m.disable_oom_killer() == Some(true) {
            return unsupported(
                "linux.resources.memory.disableOOMKiller",
                "cgroup v2 has none",
            );
        }
        // Always on since Linux 5.x: only `true` can be honoured.
        if m.use_hierarchy() == Some(false) {
            return unsupported(
                "linux.resources.memory.useHierarchy",
                "the kernel always uses the hierarchy",
            );
        }
    }
    if let Some(c) = r.cpu() {
        if v2 && c.realtime_runtime().is_some() {
            return unsupported(
                "linux.resources.cpu.realtimeRuntime",
                "cgroup v2 has no real-time group scheduling (no cpu.rt_runtime_us): remove the field",
            );
        }
        if v2 && c.realtime_period().is_some() {
            return unsupported(
                "linux.resources.cpu.realtimePeriod",
                "cgroup v2 has no real-time group scheduling (no cpu.rt_period_us): remove the field",
            );
        }
    }
    if v2 && r.devices().is_some() {
        // A second program would only narrow the container's; `update` replaces it.
        return unsupported(
            "linux.resources.devices",
            "on cgroup v2 they are the container's device program, which create attaches and update replaces, not written here (a bug in cordon-oci: please report it)",
        );
    }
    Ok(())
}

/// `linux.resources.memory.checkBeforeUpdate`, as runc: a memory limit at or below what the
/// cgroup uses now (or a memory+swap limit at or below memory and swap in use) is refused
/// before anything is written, instead of the kernel reclaiming or OOM-killing to meet it.
fn check_memory_usage(
    dirs: &[PathBuf],
    limit: Option<i64>,
    swap: Option<i64>,
    v2: bool,
) -> Result<(), CgroupError> {
    let field = "linux.resources.memory.checkBeforeUpdate";
    let (usage_file, memsw_file) = if v2 {
        ("memory.current", None)
    } else {
        ("memory.usage_in_bytes", Some("memory.memsw.usage_in_bytes"))
    };
    let read = |file: &str| {
        read_u64(dirs, file, None).ok_or_else(|| CgroupError::Resource {
            field: field.into(),
            why: format!(
                "cannot read the cgroup's {file} to compare the new limit with: remove the field to set the limit without the check"
            ),
        })
    };
    let usage = read(usage_file)?;
    if let Some(l) = limit.filter(|&l| l > 0)
        && usage >= l as u64
    {
        return Err(CgroupError::Resource {
            field: field.into(),
            why: format!(
                "the memory limit {l} is not above the container's current usage {usage} ({usage_file}): give a larger limit, or remove checkBeforeUpdate"
            ),
        });
    }
    if let Some(s) = swap.filter(|&s| s > 0) {
        let used = match memsw_file {
            Some(f) => read(f)?,
            None => usage + read("memory.swap.current").unwrap_or(0),
        };
        if used >= s as u64 {
            return Err(CgroupError::Resource {
                field: field.into(),
                why: format!(
                    "the memory+swap limit {s} is not above the container's current memory and swap usage {used}: give a larger one, or remove checkBeforeUpdate"
                ),
            });
        }
    }
    Ok(())
}

/// Device rules every container gets after the config's own (as runc): /dev/null, zero, full,
/// random, urandom, tty, ptmx, the ptys, and mknod of anything. Not the host's console (5:1:
/// the container's /dev/console is its pty, 136:N; a node of 5:1 it made would write to the
/// host's console), as runc; and not the tun device (10:200), which runc adds: a container
/// that needs it gets it from its config (`podman --device /dev/net/tun`), and a config that
/// denies it is obeyed.
const DEFAULT_ALLOW: &[&str] = &[
    "c *:* m",
    "b *:* m",
    "c 1:3 rwm",
    "c 1:5 rwm",
    "c 1:7 rwm",
    "c 1:8 rwm",
    "c 1:9 rwm",
    "c 5:0 rwm",
    "c 5:2 rwm",
    "c 136:* rwm",
];

/// The device rules a new container's cgroup holds: linux.resources.devices is an allowlist
/// (the runtime spec's word for it, and how runc, crun and youki read it), so every device
/// is denied first, then the config's rules apply in order, then [`DEFAULT_ALLOW`]. A config
/// without rules (`"devices": []`, as `cordon-oci spec` writes) gets the default devices
/// only, not every device of the host.
pub fn device_allowlist(
    rules: &[oci_spec::runtime::LinuxDeviceCgroup],
) -> Result<Vec<DeviceRule>, CgroupError> {
    let mut list = vec![DeviceRule::parse(false, "a").expect("`a` parses")];
    for r in rules {
        list.push(DeviceRule::from_oci(r)?);
    }
    for d in DEFAULT_ALLOW {
        list.push(DeviceRule::parse(true, d).expect("DEFAULT_ALLOW lines parse"));
    }
    Ok(list)
}

/// Enforces a new container's device rules ([`device_allowlist`]): the v1 devices files, or
/// on v2 an eBPF device program.
pub fn apply_device_allowlist(dirs: &[PathBuf], list: &[DeviceRule]) -> Result<(), CgroupError> {
    write_device_rules(dirs, list, is_v2(dirs))
}

/// What an `update`'s device rules add after the container's: its rules in order, then
/// [`DEFAULT_ALLOW`] again (as runc), so that no update takes the default devices away.
fn update_rules(
    rules: &[oci_spec::runtime::LinuxDeviceCgroup],
) -> Result<Vec<DeviceRule>, CgroupError> {
    let mut list = Vec::new();
    for r in rules {
        list.push(DeviceRule::from_oci(r)?);
    }
    for d in DEFAULT_ALLOW {
        list.push(DeviceRule::parse(true, d).expect("DEFAULT_ALLOW lines parse"));
    }
    Ok(list)
}

/// An `update`'s device rules on cgroup v1: written after the container's, which the
/// kernel's devices list keeps (on v2 see [`replace_device_program`]).
fn apply_devices(
    dirs: &[PathBuf],
    rules: &[oci_spec::runtime::LinuxDeviceCgroup],
) -> Result<(), CgroupError> {
    write_device_rules(dirs, &update_rules(rules)?, false)
}

/// The container's device rules after an `update` with `rules`, the same on v1 and v2:
/// `current` (what the container holds), then [`update_rules`]. The rules before the last
/// everything-rule are left out: it resets the list, so they decide nothing (see
/// [`device_program`]), and a container updated many times keeps a short list.
pub fn updated_device_list(
    current: &[DeviceRule],
    rules: &[oci_spec::runtime::LinuxDeviceCgroup],
) -> Result<Vec<DeviceRule>, CgroupError> {
    let mut list = current.to_vec();
    list.extend(update_rules(rules)?);
    let start = list
        .iter()
        .rposition(DeviceRule::is_everything)
        .unwrap_or(0);
    Ok(list.split_off(start))
}

fn write_device_rules(dirs: &[PathBuf], list: &[DeviceRule], v2: bool) -> Result<(), CgroupError> {
    let field = "linux.resources.devices";
    if v2 {
        return attach_device_program(dirs, list);
    }
    // Each file found once, not once per rule.
    let (mut allow, mut deny) = (None, None);
    for r in list {
        let (slot, file) = if r.allow {
            (&mut allow, "devices.allow")
        } else {
            (&mut deny, "devices.deny")
        };
        let path = match slot {
            Some(p) => p,
            None => slot.insert(find(dirs, field, file)?),
        };
        write_to(path, field, &r.v1_line())?;
    }
    Ok(())
}

/// One rule of linux.resources.devices (or of [`DEFAULT_ALLOW`]); the container's list is
/// kept in its state (`state::Stored::device_rules`) for `update`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeviceRule {
    pub allow: bool,
    /// `a` (every kind), `b` or `c`.
    pub kind: char,
    /// `None`: any.
    pub major: Option<u32>,
    pub minor: Option<u32>,
    /// Bits of [`ACC_MKNOD`], [`ACC_READ`], [`ACC_WRITE`].
    pub access: u32,
}

/// `BPF_DEVCG_ACC_*` and `BPF_DEVCG_DEV_*` of include/uapi/linux/bpf.h.
pub const ACC_MKNOD: u32 = 1;
pub const ACC_READ: u32 = 2;
pub const ACC_WRITE: u32 = 4;
const DEV_BLOCK: i32 = 1;
const DEV_CHAR: i32 = 2;

impl DeviceRule {
    fn bad(why: String) -> CgroupError {
        CgroupError::Resource {
            field: "linux.resources.devices".into(),
            why,
        }
    }

    fn from_oci(r: &oci_spec::runtime::LinuxDeviceCgroup) -> Result<DeviceRule, CgroupError> {
        let kind = r
            .typ()
            .map(|t| {
                serde_json::to_value(t)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_else(|| "a".into())
            })
            .unwrap_or_else(|| "a".into());
        // `u` (unbuffered character device) is a character device to the kernel.
        let kind = match kind.as_str() {
            "a" => 'a',
            "b" => 'b',
            "c" | "u" => 'c',
            other => {
                return Err(Self::bad(format!(
                    "device type {other:?} is not a, b, c or u"
                )));
            }
        };
        let num = |v: Option<i64>, what: &str| -> Result<Option<u32>, CgroupError> {
            match v {
                None => Ok(None),
                Some(n) if (0..=i64::from(i32::MAX)).contains(&n) => Ok(Some(n as u32)),
                Some(n) => Err(Self::bad(format!("{what} {n} is not a device number"))),
            }
        };
        let access = Self::access_bits(r.access().as_deref().unwrap_or("rwm"))?;
        Ok(DeviceRule {
            allow: r.allow(),
            kind,
            major: num(r.major(), "major")?,
            minor: num(r.minor(), "minor")?,
            access,
        })
    }

    fn access_bits(s: &str) -> Result<u32, CgroupError> {
        let mut bits = 0;
        for ch in s.chars() {
            bits |= match ch {
                'm' => ACC_MKNOD,
                'r' => ACC_READ,
                'w' => ACC_WRITE,
                _ => return Err(Self::bad(format!("access {s:?} is not made of r, w and m"))),
            };
        }
        Ok(bits)
    }

    /// `c 1:3 rwm`, `a` (the v1 file syntax).
    fn parse(allow: bool, line: &str) -> Option<DeviceRule> {
        let f: Vec<&str> = line.split_whitespace().collect();
        let kind = f.first()?.chars().next()?;
        if kind == 'a' {
            return Some(DeviceRule {
                allow,
                kind,
                major: None,
                minor: None,
                access: ACC_MKNOD | ACC_READ | ACC_WRITE,
            });
        }
        let (maj, min) = f.get(1)?.split_once(':')?;
        let n = |s: &str| {
            if s == "*" {
                Some(None)
            } else {
                s.parse().ok().map(Some)
            }
        };
        Some(DeviceRule {
            allow,
            kind,
            major: n(maj)?,
            minor: n(min)?,
            access: Self::access_bits(f.get(2)?).ok()?,
        })
    }

    fn v1_line(&self) -> String {
        if self.kind == 'a' && self.major.is_none() && self.minor.is_none() {
            return "a".into();
        }
        let n = |v: Option<u32>| v.map(|x| x.to_string()).unwrap_or_else(|| "*".into());
        let mut acc = String::new();
        for (bit, ch) in [(ACC_READ, 'r'), (ACC_WRITE, 'w'), (ACC_MKNOD, 'm')] {
            if self.access & bit != 0 {
                acc.push(ch);
            }
        }
        format!("{} {}:{} {acc}", self.kind, n(self.major), n(self.minor))
    }

    /// Every device, every access: the rule that resets the list (v1's `a`).
    fn is_everything(&self) -> bool {
        self.kind == 'a'
            && self.major.is_none()
            && self.minor.is_none()
            && self.access == ACC_MKNOD | ACC_READ | ACC_WRITE
    }
}

/// One eBPF instruction (`struct bpf_insn`, little-endian): opcode, dst and src registers,
/// offset, immediate.
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    u64::from(code)
        | u64::from(dst & 0xf) << 8
        | u64::from(src & 0xf) << 12
        | u64::from(off as u16) << 16
        | u64::from(imm as u32) << 32
}

// Opcodes (include/uapi/linux/bpf.h, bpf_common.h).
const LDX_MEM_W: u8 = 0x61;
const ALU32_AND_K: u8 = 0x54;
const ALU32_RSH_K: u8 = 0x74;
const ALU32_MOV_K: u8 = 0xb4;
const ALU32_MOV_X: u8 = 0xbc;
const JMP_JEQ_K: u8 = 0x15;
const JMP_JNE_K: u8 = 0x55;
const EXIT: u8 = 0x95;

/// The `BPF_PROG_TYPE_CGROUP_DEVICE` program for `rules`, with the cgroup v1 controller's
/// meaning: the rules apply in order, a later one overriding an earlier one, and the
/// everything-rule (`a *:* rwm`, v1's `a`) resets the list to allow-all or deny-all; before
/// any such rule every device is allowed (a new v1 cgroup inherits its parent's allow-all).
/// So the program tests the rules from the last to the first and returns the first match:
/// 1 allows, 0 denies. A deny rule matches a request that asks for any access it denies; an
/// allow rule one whose every access it allows.
///
/// The context (`struct bpf_cgroup_dev_ctx`): `access_type` (access << 16 | type), `major`,
/// `minor`, each a u32. Registers: R2 type, R3 access, R4 major, R5 minor (as runc and crun).
pub fn device_program(rules: &[DeviceRule]) -> Vec<u64> {
    let (default_allow, rest) = effective_rules(rules);
    let mut p = vec![
        insn(LDX_MEM_W, 2, 1, 0, 0),
        insn(ALU32_AND_K, 2, 0, 0, 0xffff),
        insn(LDX_MEM_W, 3, 1, 0, 0),
        insn(ALU32_RSH_K, 3, 0, 0, 16),
        insn(LDX_MEM_W, 4, 1, 4, 0),
        insn(LDX_MEM_W, 5, 1, 8, 0),
    ];
    for r in rest.iter().rev() {
        // Each test jumps past the rest of the block when the rule does not match; the
        // offsets are filled in once the block's length is known.
        let mut block: Vec<(u8, u8, u8, i32, bool)> = Vec::new();
        match r.kind {
            'b' => block.push((JMP_JNE_K, 2, 0, DEV_BLOCK, true)),
            'c' => block.push((JMP_JNE_K, 2, 0, DEV_CHAR, true)),
            _ => {}
        }
        let all = ACC_MKNOD | ACC_READ | ACC_WRITE;
        if r.access & all != all {
            block.push((ALU32_MOV_X, 1, 3, 0, false));
            if r.allow {
                // Matches only if no requested bit lies outside the rule's.
                block.push((ALU32_AND_K, 1, 0, (all & !r.access) as i32, false));
                block.push((JMP_JNE_K, 1, 0, 0, true));
            } else {
                // Matches if any requested bit is one the rule denies.
                block.push((ALU32_AND_K, 1, 0, r.access as i32, false));
                block.push((JMP_JEQ_K, 1, 0, 0, true));
            }
        }
        if let Some(m) = r.major {
            block.push((JMP_JNE_K, 4, 0, m as i32, true));
        }
        if let Some(m) = r.minor {
            block.push((JMP_JNE_K, 5, 0, m as i32, true));
        }
        block.push((ALU32_MOV_K, 0, 0, i32::from(r.allow), false));
        let len = block.len() + 1;
        for (i, (code, dst, src, imm, jump)) in block.into_iter().enumerate() {
            let off = if jump { (len - i - 1) as i16 } else { 0 };
            p.push(insn(code, dst, src, off, imm));
        }
        p.push(insn(EXIT, 0, 0, 0, 0));
    }
    p.push(insn(ALU32_MOV_K, 0, 0, 0, i32::from(default_allow)));
    p.push(insn(EXIT, 0, 0, 0, 0));
    p
}

/// What is allowed before the rules that count, and those rules: the ones after the last
/// everything-rule (see [`device_program`]).
fn effective_rules(rules: &[DeviceRule]) -> (bool, &[DeviceRule]) {
    let start = rules.iter().rposition(DeviceRule::is_everything);
    let default_allow = start.is_none_or(|i| rules[i].allow);
    (default_allow, &rules[start.map_or(0, |i| i + 1)..])
}

/// Whether `rules` allow `access` (bits of [`ACC_MKNOD`], [`ACC_READ`], [`ACC_WRITE`]) to the
/// device `kind` (`b` or `c`) `major:minor`: what [`device_program`] answers, for a caller
/// that cannot load the program and must tell what the rules would have denied.
pub fn device_allowed(
    rules: &[DeviceRule],
    kind: char,
    access: u32,
    major: u32,
    minor: u32,
) -> bool {
    let (default_allow, rest) = effective_rules(rules);
    for r in rest.iter().rev() {
        let matches = (r.kind == 'a' || r.kind == kind)
            && r.major.is_none_or(|m| m == major)
            && r.minor.is_none_or(|m| m == minor)
            && if r.allow {
                access & !r.access == 0
            } else {
                access & r.access != 0
            };
        if matches {
            return r.allow;
        }
    }
    default_allow
}

/// Whether the rules allow every access to every device (no deny rule counts, and all is
/// allowed before them): a program would change nothing.
pub fn allows_everything(rules: &[DeviceRule]) -> bool {
    let (default_allow, rest) = effective_rules(rules);
    default_allow && rest.iter().all(|r| r.allow)
}

/// cgroup v2 has no devices controller: the rules become a device program attached to the
/// container's cgroup (as runc and crun do). Loading one takes CAP_BPF or CAP_SYS_ADMIN in
/// the host's user namespace, which an unprivileged caller lacks: a failure is an error
/// naming the field (an unprivileged cordon-oci does not come here: see `oci::create`).
fn attach_device_program(dirs: &[PathBuf], rules: &[DeviceRule]) -> Result<(), CgroupError> {
    let field = "linux.resources.devices";
    let bad = |why: String| CgroupError::Resource {
        field: field.into(),
        why,
    };
    // Nothing to enforce (`"devices": []`, say, as `cordon-oci spec` writes): no program, so
    // none is needed where none could be loaded.
    if allows_everything(rules) {
        return Ok(());
    }
    let dir = dirs
        .first()
        .ok_or_else(|| bad("the container has no cgroup to attach a device program to".into()))?;
    let prog = device_program(rules);
    let fd = match crate::sys::bpf_load_device_program(&prog) {
        Ok(fd) => fd,
        Err(e) => {
            return Err(bad(format!(
                "cgroup v2 enforces device rules with an eBPF program (BPF_PROG_TYPE_CGROUP_DEVICE), and the kernel refused to load it: {e} (it needs CAP_BPF or CAP_SYS_ADMIN in the host's user namespace and a kernel with CONFIG_CGROUP_BPF; run cordon-oci as root, or drop linux.resources.devices)"
            )));
        }
    };
    let cg = std::fs::File::open(dir).map_err(io("open the cgroup", dir))?;
    use std::os::fd::AsFd;
    crate::sys::bpf_attach_device_program(cg.as_fd(), fd.as_fd()).map_err(|e| {
        bad(format!(
            "cannot attach the device program to {}: {e}",
            dir.display()
        ))
    })
}

/// `update`'s device rules on cgroup v2: the container's device program is replaced by one
/// for `rules` (its whole new list, [`updated_device_list`]). The new program is attached
/// (`BPF_F_ALLOW_MULTI`) before every other device program attached directly to the cgroup
/// is detached, so while both are attached the kernel allows a device only where both
/// allow it: the container never holds fewer restrictions than the old and the new rules
/// each impose. When `rules` allow everything no new program is attached and the old ones
/// are detached: the cgroup then restricts nothing of its own, as a v1 cgroup given `a`
/// (the programs of its ancestors still apply: they are not attached to it). The caller
/// must keep other `update`s of the container out meanwhile (`state::lock`): one that
/// detached the other's new program could leave none.
pub fn replace_device_program(dirs: &[PathBuf], rules: &[DeviceRule]) -> Result<(), CgroupError> {
    use std::os::fd::AsFd;
    let bad = |why: String| CgroupError::Resource {
        field: "linux.resources.devices".into(),
        why,
    };
    let dir = dirs.first().ok_or_else(|| {
        bad("update: the container has no cgroup to attach a device program to".into())
    })?;
    let cg = std::fs::File::open(dir).map_err(io("open the cgroup", dir))?;
    let keep = if allows_everything(rules) {
        None
    } else {
        let fd = crate::sys::bpf_load_device_program(&device_program(rules)).map_err(|e| {
            bad(format!(
                "update: the kernel refused to load the new device program (BPF_PROG_LOAD): {e}; the container's device rules are unchanged (loading one needs CAP_BPF or CAP_SYS_ADMIN: run cordon-oci update as root)"
            ))
        })?;
        // Its id, known before it is attached, tells it from the old ones below.
        let id = crate::sys::bpf_prog_id(fd.as_fd()).map_err(|e| {
            bad(format!(
                "update: cannot read the id of the new device program (BPF_OBJ_GET_INFO_BY_FD): {e}; the container's device rules are unchanged"
            ))
        })?;
        crate::sys::bpf_attach_device_program(cg.as_fd(), fd.as_fd()).map_err(|e| {
            bad(format!(
                "update: cannot attach the new device program to {} (BPF_PROG_ATTACH): {e}; the container's device rules are unchanged",
                dir.display()
            ))
        })?;
        Some(id)
    };
    let still = if keep.is_some() {
        "the new rules are attached and the old ones still also apply (a device is allowed only where both allow it)"
    } else {
        "the old rules not yet detached still apply"
    };
    let ids = crate::sys::bpf_query_device_programs(cg.as_fd()).map_err(|e| {
        bad(format!(
            "update: cannot list the device programs attached to {} (BPF_PROG_QUERY): {e}; {still}: retry the update as root",
            dir.display()
        ))
    })?;
    // Detaching the others is safe only with the new program among those attached.
    if let Some(k) = keep.filter(|k| !ids.contains(k)) {
        return Err(bad(format!(
            "update: the new device program (id {k}) is not among those attached to {} ({ids:?}); {still}: retry the update as root",
            dir.display()
        )));
    }
    for id in ids.into_iter().filter(|id| Some(*id) != keep) {
        let detach = crate::sys::bpf_prog_fd_by_id(id)
            .map_err(|e| ("open (BPF_PROG_GET_FD_BY_ID)", e))
            .and_then(|old| {
                crate::sys::bpf_detach_device_program(cg.as_fd(), old.as_fd())
                    .map_err(|e| ("detach (BPF_PROG_DETACH)", e))
            });
        if let Err((step, e)) = detach {
            return Err(bad(format!(
                "update: cannot {step} the old device program {id} of {}: {e}; {still}: retry the update as root",
                dir.display()
            )));
        }
    }
    Ok(())
}

/// Whether `dir` is a cgroup v2 directory (not one of a v1 hierarchy, which has `tasks`).
fn is_v2_dir(dir: &Path) -> bool {
    dir.join("cgroup.controllers").exists() && !dir.join("tasks").exists()
}

/// The container's cgroup v2 directory among `dirs` (on a pure v2 host the only one; on a
/// hybrid host the unified one, when it has one), opened for
/// [`crate::sys::clone_into_cgroup`], and the others, which a process born there must still
/// join. None without one, or when it cannot be opened (the move then says why).
pub fn born_into(dirs: &[PathBuf]) -> Option<(std::os::fd::OwnedFd, Vec<PathBuf>)> {
    let v2 = dirs.iter().find(|d| is_v2_dir(d))?;
    let fd = nix::fcntl::open(
        v2,
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .ok()?;
    Some((fd, dirs.iter().filter(|d| *d != v2).cloned().collect()))
}

/// A child process, a clone with the namespace `flags` (a fork with none), born in the
/// container's cgroup v2 directory among `dirs` (see [`born_into`]) when the kernel lets it
/// be; with the directories the child must still join: the v1 ones left after a birth in
/// place, all of them after the plain clone that is the fallback. That fallback is taken
/// without a v2 directory, and when clone3 fails (an older kernel, a seccomp filter that
/// hides it, or no right to the directory, which the move then reports); `why_not` is told
/// the clone3 error.
pub fn clone_into(
    dirs: &[PathBuf],
    flags: libc::c_int,
    why_not: &mut dyn FnMut(nix::errno::Errno),
) -> (
    Result<crate::sys::CloneResult, nix::errno::Errno>,
    Vec<PathBuf>,
) {
    use std::os::fd::AsFd;
    if let Some((fd, rest)) = born_into(dirs) {
        match crate::sys::clone_into_cgroup(flags, fd.as_fd()) {
            Ok(r) => return (Ok(r), rest),
            Err(errno) => why_not(errno),
        }
    }
    (crate::sys::clone_namespaces(flags), dirs.to_vec())
}

/// Moves `pid` into every directory.
pub fn attach(dirs: &[PathBuf], pid: i32) -> Result<(), CgroupError> {
    for d in dirs {
        let p = d.join("cgroup.procs");
        std::fs::write(&p, pid.to_string()).map_err(io("move the container into", &p))?;
    }
    Ok(())
}

/// Moves the calling process, which must be single-threaded, into the directories: on
/// cgroup v1 through `tasks`, where a thread moving itself skips the kernel-wide lock that
/// every move through `cgroup.procs` (or of another process) takes, whose first taker
/// waits for an RCU grace period (5 to 15 ms here); on v2 through `cgroup.procs` ("0":
/// the writer itself).
pub fn attach_self(dirs: &[PathBuf]) -> Result<(), CgroupError> {
    for d in dirs {
        let tasks = d.join("tasks");
        let p = if tasks.exists() {
            tasks
        } else {
            d.join("cgroup.procs")
        };
        std::fs::write(&p, "0").map_err(io("move the container into", &p))?;
    }
    Ok(())
}

/// `dir` and every cgroup below it, each child before its parent (the order `rmdir` needs).
/// A container whose cgroup is delegated to it (v2, or a writable v1 hierarchy) can make
/// sub-cgroups and move its processes there, out of `dir`'s own cgroup.procs.
fn subtree(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), false)];
    while let Some((d, children_done)) = stack.pop() {
        if children_done {
            out.push(d);
            continue;
        }
        stack.push((d.clone(), true));
        if let Ok(entries) = std::fs::read_dir(&d) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push((e.path(), false));
                }
            }
        }
    }
    out
}

/// Pids in the container's cgroups and their sub-cgroups, in every hierarchy, each once.
pub fn pids(dirs: &[PathBuf]) -> Vec<i32> {
    let mut out = Vec::new();
    for d in dirs {
        for sub in subtree(d).iter().rev() {
            let text = std::fs::read_to_string(sub.join("cgroup.procs")).unwrap_or_default();
            for p in text.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
    }
    out
}

/// What [`signal_all`] did: the pids it signalled, and those it could not (their error).
#[derive(Debug, Default)]
pub struct Signalled {
    pub pids: Vec<i32>,
    pub missed: Vec<(i32, nix::errno::Errno)>,
}

impl Signalled {
    /// An error naming the processes that could not be signalled, if any.
    pub fn check(&self, sig: libc::c_int) -> Result<(), CgroupError> {
        let Some((pid, errno)) = self.missed.first() else {
            return Ok(());
        };
        Err(CgroupError::Signal {
            sig,
            count: self.missed.len(),
            pid: *pid,
            errno: *errno,
        })
    }
}

/// Sends `sig` to every process in the container's cgroups and their sub-cgroups. Each is
/// pinned first (a pidfd) and signalled only if a cgroup still lists it after that: a pid
/// that left the cgroup and was reused by another process of the host is never signalled.
/// SIGKILL goes through cgroup v2's `cgroup.kill` where the kernel has it (5.14+), which
/// takes the whole subtree at once, forks in flight included; elsewhere it is repeated
/// until no new process shows up (a child forked before its parent died).
pub fn signal_all(dirs: &[PathBuf], sig: libc::c_int) -> Signalled {
    let mut done = Signalled::default();
    if sig == libc::SIGKILL
        && let Some(p) = with_file(dirs, "cgroup.kill")
    {
        let listed = pids(dirs);
        if std::fs::write(&p, "1").is_ok() {
            done.pids = listed;
            return done;
        }
    }
    // SIGKILL without cgroup.kill (v1): rounds until the cgroups are empty, frozen meanwhile
    // where a freezer is (as runc), so that a fork loop cannot outrun them; a frozen process
    // dies of its SIGKILL once thawed. Every listed process is signalled in every round: a
    // pid signalled before may since name a new process the cgroup forked.
    let kill = sig == libc::SIGKILL;
    let frozen = kill && freeze(dirs, true).is_ok();
    let rounds = if kill { 100 } else { 1 };
    for _ in 0..rounds {
        let mut pinned = Vec::new();
        for p in pids(dirs) {
            if done.missed.iter().any(|(m, _)| *m == p) {
                continue;
            }
            match crate::sys::pidfd_open(nix::unistd::Pid::from_raw(p)) {
                Ok(fd) => pinned.push((p, fd)),
                Err(nix::errno::Errno::ESRCH) => {}
                Err(e) => done.missed.push((p, e)),
            }
        }
        if pinned.is_empty() {
            break;
        }
        let listed = pids(dirs);
        for (p, fd) in pinned {
            if !listed.contains(&p) {
                continue;
            }
            match crate::sys::pidfd_kill(std::os::fd::AsFd::as_fd(&fd), sig) {
                Ok(()) | Err(nix::errno::Errno::ESRCH) => {
                    if !done.pids.contains(&p) {
                        done.pids.push(p);
                    }
                }
                Err(e) => done.missed.push((p, e)),
            }
        }
        if frozen {
            // The killed die only once thawed: thaw, and freeze again for the next round.
            let _ = freeze(dirs, false);
            if pids(dirs).is_empty() {
                return done;
            }
            let _ = freeze(dirs, true);
        }
    }
    if frozen {
        let _ = freeze(dirs, false);
    }
    done
}

/// Freezes or thaws (v2 cgroup.freeze, v1 freezer.state).
pub fn freeze(dirs: &[PathBuf], frozen: bool) -> Result<(), CgroupError> {
    if let Some(p) = with_file(dirs, "cgroup.freeze") {
        std::fs::write(&p, if frozen { "1" } else { "0" }).map_err(io("write", &p))?;
        // The kernel freezes asynchronously: wait until cgroup.events says `frozen 1` (or 0),
        // so that a paused container has stopped running when pause returns.
        let events = p.with_file_name("cgroup.events");
        let want = if frozen { 1 } else { 0 };
        for _ in 0..2500 {
            let text = std::fs::read_to_string(&events).map_err(io("read", &events))?;
            if crate::limits::keyed_value(&text, "frozen") == Some(want) {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        return Err(CgroupError::Io {
            step: "wait for the freeze state in",
            path: events.display().to_string(),
            source: std::io::Error::from(std::io::ErrorKind::TimedOut),
        });
    }
    if let Some(p) = with_file(dirs, "freezer.state") {
        std::fs::write(&p, if frozen { "FROZEN" } else { "THAWED" }).map_err(io("write", &p))?;
        // Wait until the kernel reports the state (FREEZING → FROZEN).
        for _ in 0..500 {
            let s = std::fs::read_to_string(&p).unwrap_or_default();
            if s.trim() == if frozen { "FROZEN" } else { "THAWED" } {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        return Err(CgroupError::Io {
            step: "wait for the freezer in",
            path: p.display().to_string(),
            source: std::io::Error::from(std::io::ErrorKind::TimedOut),
        });
    }
    Err(CgroupError::Resource {
        field: "pause".into(),
        why: "the container has no freezer cgroup (rootless containers without a cgroup cannot be paused)".into(),
    })
}

pub fn is_frozen(dirs: &[PathBuf]) -> bool {
    if let Some(p) = with_file(dirs, "cgroup.freeze") {
        return std::fs::read_to_string(p).is_ok_and(|s| s.trim() == "1");
    }
    if let Some(p) = with_file(dirs, "freezer.state") {
        return std::fs::read_to_string(p).is_ok_and(|s| s.trim() == "FROZEN");
    }
    false
}

/// Removes the directories and every sub-cgroup the container made in them, deepest first
/// (retrying briefly while the last processes leave).
pub fn remove(dirs: &[PathBuf]) -> Result<(), CgroupError> {
    for top in dirs {
        for d in subtree(top) {
            let mut last = None;
            for _ in 0..100 {
                match std::fs::remove_dir(&d) {
                    Ok(()) => {
                        last = None;
                        break;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        last = None;
                        break;
                    }
                    Err(e) => last = Some(e),
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            if let Some(e) = last {
                return Err(io("remove the cgroup", &d)(e));
            }
        }
    }
    Ok(())
}

/// The quota (`max` or microseconds) and period of `cpu.max`; the kernel's defaults when it
/// cannot be read.
fn current_cpu_max(dirs: &[PathBuf]) -> (String, u64) {
    let text = with_file(dirs, "cpu.max")
        .and_then(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
    let mut f = text.split_whitespace();
    let q = f.next().unwrap_or("max").to_string();
    let p = f.next().and_then(|p| p.parse().ok()).unwrap_or(100_000);
    (q, p)
}

/// The OOM kills the container's memory cgroup has counted (v1 memory.oom_control, v2
/// memory.events: `oom_kill N`); 0 without one.
pub fn oom_kills(dirs: &[PathBuf]) -> u64 {
    read_u64(dirs, "memory.oom_control", Some("oom_kill"))
        .or_else(|| read_u64(dirs, "memory.events", Some("oom_kill")))
        .unwrap_or(0)
}

/// Reads one number from the first directory that has `file` (first line, or a `key value`);
/// cgroup v2's `max` (no limit) reads as `u64::MAX`, as runc reports it.
pub fn read_u64(dirs: &[PathBuf], file: &str, key: Option<&str>) -> Option<u64> {
    let text = std::fs::read_to_string(with_file(dirs, file)?).ok()?;
    match key {
        None if text.trim() == "max" => Some(u64::MAX),
        None => text.trim().parse().ok(),
        Some(k) => crate::limits::keyed_value(&text, k),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake cgroup directory holding `files` (empty), and `tasks` (v1) or
    /// `cgroup.controllers` (v2).
    fn fake_cgroup(v2: bool, files: &[&str]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let kind = if v2 { "cgroup.controllers" } else { "tasks" };
        for f in files.iter().chain([&kind]) {
            std::fs::write(d.path().join(f), "").unwrap();
        }
        d
    }

    fn block_io(json: &str) -> oci_spec::runtime::LinuxBlockIo {
        serde_json::from_str(json).unwrap()
    }

    /// (file name, value) of each write.
    fn writes_of(
        d: &tempfile::TempDir,
        v2: bool,
        json: &str,
    ) -> Result<Vec<(String, String)>, String> {
        block_io_writes(&[d.path().to_path_buf()], &block_io(json), v2)
            .map(|ws| {
                ws.into_iter()
                    .map(|w| {
                        assert_eq!(w.path.parent(), Some(d.path()));
                        (
                            w.path.file_name().unwrap().to_string_lossy().into_owned(),
                            w.value,
                        )
                    })
                    .collect()
            })
            .map_err(|e| e.to_string())
    }

    const V1_BFQ: &[&str] = &[
        "blkio.bfq.weight",
        "blkio.bfq.weight_device",
        "blkio.throttle.read_bps_device",
        "blkio.throttle.write_bps_device",
        "blkio.throttle.read_iops_device",
        "blkio.throttle.write_iops_device",
    ];

    #[test]
    fn block_io_on_cgroup_v1_writes_bfq_weights_and_throttles() {
        let d = fake_cgroup(false, V1_BFQ);
        let all = r#"{"weight": 500, "weightDevice": [{"major": 254, "minor": 0, "weight": 300}],
            "throttleReadBpsDevice": [{"major": 254, "minor": 0, "rate": 1048576}],
            "throttleWriteBpsDevice": [{"major": 254, "minor": 0, "rate": 0}],
            "throttleReadIOPSDevice": [{"major": 8, "minor": 16, "rate": 100}],
            "throttleWriteIOPSDevice": [{"major": 8, "minor": 16, "rate": 50}]}"#;
        let w = |f: &str, v: &str| (f.to_string(), v.to_string());
        assert_eq!(
            writes_of(&d, false, all).unwrap(),
            [
                w("blkio.bfq.weight", "500"),
                w("blkio.bfq.weight_device", "254:0 300"),
                w("blkio.throttle.read_bps_device", "254:0 1048576"),
                w("blkio.throttle.write_bps_device", "254:0 0"),
                w("blkio.throttle.read_iops_device", "8:16 100"),
                w("blkio.throttle.write_iops_device", "8:16 50"),
            ]
        );
        // Nothing asked (podman's `"blockIO": {}`), or a weight of 0: no write, and no
        // cgroup needed for it.
        for none in [r#"{}"#, r#"{"weight": 0, "weightDevice": []}"#] {
            assert_eq!(writes_of(&d, false, none).unwrap(), []);
            assert!(!block_io_asks(&block_io(none)));
        }
        assert!(block_io_asks(&block_io(all)));
        // CFQ's files, on a kernel older than 5.0.
        let cfq = fake_cgroup(false, &["blkio.weight", "blkio.leaf_weight"]);
        assert_eq!(
            writes_of(&cfq, false, r#"{"weight": 10, "leafWeight": 20}"#).unwrap(),
            [w("blkio.weight", "10"), w("blkio.leaf_weight", "20")]
        );
    }

    #[test]
    fn block_io_on_cgroup_v2_converts_io_weight_and_writes_io_max() {
        let d = fake_cgroup(true, &["io.weight", "io.max"]);
        let w = |f: &str, v: &str| (f.to_string(), v.to_string());
        // io.weight's 1-10000 from blkio's 10-1000, as runc and crun convert it.
        for (blkio, io) in [
            (10, "default 1"),
            (500, "default 4950"),
            (1000, "default 10000"),
        ] {
            assert_eq!(
                writes_of(&d, true, &format!(r#"{{"weight": {blkio}}}"#)).unwrap(),
                [w("io.weight", io)]
            );
        }
        let json = r#"{"weightDevice": [{"major": 1, "minor": 0, "weight": 1000}],
            "throttleReadBpsDevice": [{"major": 1, "minor": 0, "rate": 1048576}],
            "throttleWriteIOPSDevice": [{"major": 1, "minor": 0, "rate": 0}]}"#;
        assert_eq!(
            writes_of(&d, true, json).unwrap(),
            [
                w("io.weight", "1:0 10000"),
                w("io.max", "1:0 rbps=1048576"),
                w("io.max", "1:0 wiops=max"),
            ]
        );
        // BFQ's io.bfq.weight, when there, takes blkio's scale as it is.
        let bfq = fake_cgroup(true, &["io.bfq.weight", "io.weight"]);
        assert_eq!(
            writes_of(
                &bfq,
                true,
                r#"{"weight": 300, "weightDevice": [{"major": 1, "minor": 0, "weight": 20}]}"#
            )
            .unwrap(),
            [w("io.bfq.weight", "300"), w("io.bfq.weight", "1:0 20")]
        );
    }

    #[test]
    fn block_io_that_cannot_be_applied_is_refused_naming_the_field() {
        for (v2, files, json, want) in [
            (false, V1_BFQ, r#"{"weight": 5}"#, "blockIO.weight`"),
            (false, V1_BFQ, r#"{"weight": 1001}"#, "give 10 to 1000"),
            (
                false,
                V1_BFQ,
                r#"{"leafWeight": 300}"#,
                "removed in Linux 5.0",
            ),
            (
                true,
                &["io.weight", "io.max"][..],
                r#"{"leafWeight": 300}"#,
                "cgroup v2 has no leaf weight",
            ),
            (
                false,
                &["blkio.throttle.read_bps_device"][..],
                r#"{"weight": 300}"#,
                "modprobe bfq",
            ),
            (
                true,
                &["io.max"][..],
                r#"{"weight": 300}"#,
                "neither io.bfq.weight nor io.weight",
            ),
            (
                false,
                V1_BFQ,
                r#"{"weightDevice": [{"major": 254, "minor": 0, "weight": 3}]}"#,
                "weightDevice[0].weight`",
            ),
            (
                false,
                V1_BFQ,
                r#"{"throttleReadBpsDevice": [{"major": 254, "minor": 0, "rate": 1}, {"major": -1, "minor": 0, "rate": 1}]}"#,
                "throttleReadBpsDevice[1]`",
            ),
            (
                false,
                &["blkio.bfq.weight"][..],
                r#"{"throttleWriteIOPSDevice": [{"major": 254, "minor": 0, "rate": 1}]}"#,
                "no blkio.throttle.write_iops_device",
            ),
            (
                true,
                &["io.weight"][..],
                r#"{"throttleReadBpsDevice": [{"major": 254, "minor": 0, "rate": 1}]}"#,
                "io controller enabled",
            ),
        ] {
            let d = fake_cgroup(v2, files);
            let e = writes_of(&d, v2, json).unwrap_err();
            assert!(
                e.contains("linux.resources.blockIO") && e.contains(want),
                "{json}: {e}"
            );
        }
    }

    /// A v1 cgroup directory without hugetlb files.
    fn v1_plain() -> tempfile::TempDir {
        fake_cgroup(false, &["memory.limit_in_bytes"])
    }

    // A hybrid host: the unified hierarchy only for a container with huge page limits, only
    // when no v1 hierarchy has the controller and the unified one does; never on a pure v1
    // or v2 layout's account.
    #[test]
    fn the_unified_hierarchy_of_a_hybrid_host_only_for_huge_pages_it_alone_has() {
        let v1 = |c: &[&str]| {
            (
                PathBuf::from(format!("/sys/fs/cgroup/{}", c.join(","))),
                Some(c.iter().map(|s| s.to_string()).collect::<Vec<_>>()),
            )
        };
        let unified: Hierarchy = (PathBuf::from("/sys/fs/cgroup/unified"), None);
        let hybrid = [v1(&["memory"]), v1(&["pids"]), unified.clone()];
        let rel = Path::new("cordon/c1");
        let has = |_: &Path| "hugetlb".to_string();
        let lacks = |_: &Path| String::new();
        let v1_dirs = vec![
            PathBuf::from("/sys/fs/cgroup/memory/cordon/c1"),
            PathBuf::from("/sys/fs/cgroup/pids/cordon/c1"),
        ];
        assert_eq!(dirs_of(&hybrid, rel, false, has), v1_dirs);
        assert_eq!(dirs_of(&hybrid, rel, true, lacks), v1_dirs);
        let mut with = v1_dirs.clone();
        with.push(PathBuf::from("/sys/fs/cgroup/unified/cordon/c1"));
        assert_eq!(dirs_of(&hybrid, rel, true, has), with);
        // A v1 hugetlb hierarchy holds it there.
        let v1_hugetlb = [v1(&["memory"]), v1(&["hugetlb"]), unified.clone()];
        assert_eq!(dirs_of(&v1_hugetlb, rel, true, has).len(), 2);
        // Pure v2: its one directory, whatever is asked.
        assert_eq!(
            dirs_of(&[unified], rel, true, has),
            [PathBuf::from("/sys/fs/cgroup/unified/cordon/c1")]
        );
    }

    #[test]
    fn hugepage_limits_write_the_limit_and_the_reservation_limit() {
        let lim = |json: &str| -> Vec<oci_spec::runtime::LinuxHugepageLimit> {
            serde_json::from_str(json).unwrap()
        };
        let two = r#"[{"pageSize": "2MB", "limit": 4194304}, {"pageSize": "1GB", "limit": 0}]"#;
        let names = |ws: Vec<LateWrite>| -> Vec<(String, String)> {
            ws.into_iter()
                .map(|w| {
                    (
                        w.path.file_name().unwrap().to_string_lossy().into_owned(),
                        w.value,
                    )
                })
                .collect()
        };
        let w = |f: &str, v: &str| (f.to_string(), v.to_string());
        let v2 = fake_cgroup(
            true,
            &["hugetlb.2MB.max", "hugetlb.2MB.rsvd.max", "hugetlb.1GB.max"],
        );
        assert_eq!(
            names(hugetlb_writes(&[v2.path().to_path_buf()], &lim(two), true, || false).unwrap()),
            [
                w("hugetlb.2MB.max", "4194304"),
                w("hugetlb.2MB.rsvd.max", "4194304"),
                w("hugetlb.1GB.max", "0"),
            ]
        );
        let v1 = fake_cgroup(
            false,
            &[
                "hugetlb.2MB.limit_in_bytes",
                "hugetlb.1GB.limit_in_bytes",
                "hugetlb.1GB.rsvd.limit_in_bytes",
            ],
        );
        assert_eq!(
            names(hugetlb_writes(&[v1.path().to_path_buf()], &lim(two), false, || false).unwrap()),
            [
                w("hugetlb.2MB.limit_in_bytes", "4194304"),
                w("hugetlb.1GB.limit_in_bytes", "0"),
                w("hugetlb.1GB.rsvd.limit_in_bytes", "0"),
            ]
        );
        // No limit: -1 on v1, `max` on v2.
        let none = r#"[{"pageSize": "2MB", "limit": -1}]"#;
        assert_eq!(
            names(hugetlb_writes(&[v2.path().to_path_buf()], &lim(none), true, || false).unwrap()),
            [
                w("hugetlb.2MB.max", "max"),
                w("hugetlb.2MB.rsvd.max", "max")
            ]
        );
        assert_eq!(
            names(hugetlb_writes(&[v1.path().to_path_buf()], &lim(none), false, || false).unwrap()),
            [w("hugetlb.2MB.limit_in_bytes", "-1")]
        );
        for (dir, json, want) in [
            (
                &v2,
                r#"[{"pageSize": "2M", "limit": 1}]"#,
                "hugepageLimits[0].pageSize` cannot be applied: \"2M\" is not a huge page size",
            ),
            (
                &v2,
                r#"[{"pageSize": "../2MB", "limit": 1}]"#,
                "is not a huge page size",
            ),
            (
                &v2,
                r#"[{"pageSize": "2MB", "limit": 1}, {"pageSize": "16GB", "limit": 1}]"#,
                "hugepageLimits[1]` cannot be applied: this host's cgroups have no hugetlb.16GB.max: the kernel has no huge pages of that size",
            ),
        ] {
            let e = hugetlb_writes(&[dir.path().to_path_buf()], &lim(json), true, || false)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{json}: {e}");
        }
        let none = fake_cgroup(false, &["memory.limit_in_bytes"]);
        let e = hugetlb_writes(&[none.path().to_path_buf()], &lim(two), false, || false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("mounts no cgroup v1 hugetlb hierarchy")
                && e.contains("recreate it with them"),
            "{e}"
        );
        // A hybrid host's container: v1 cgroups, and a unified one with the controller
        // (dirs_for_limits): the v2 files there, in v2's words.
        let plain = v1_plain();
        let mixed = [
            plain.path().to_path_buf(),
            fake_cgroup(true, &["hugetlb.2MB.max", "hugetlb.2MB.rsvd.max"]).keep(),
        ];
        assert_eq!(
            names(
                hugetlb_writes(
                    &mixed,
                    &lim(r#"[{"pageSize": "2MB", "limit": -1}]"#),
                    false,
                    || false
                )
                .unwrap()
            ),
            [
                w("hugetlb.2MB.max", "max"),
                w("hugetlb.2MB.rsvd.max", "max")
            ]
        );
        let _ = std::fs::remove_dir_all(&mixed[1]);
        // A container of a cordon-oci without huge page limits, on a host that mounts the
        // hierarchy: it has no hugetlb cgroup, and only a new container gets one.
        let e = hugetlb_writes(&[none.path().to_path_buf()], &lim(two), false, || true)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("the container has no hugetlb cgroup") && e.contains("recreate it"),
            "{e}"
        );
        let none = fake_cgroup(true, &["memory.max"]);
        let e = hugetlb_writes(&[none.path().to_path_buf()], &lim(two), true, || false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("cgroup.subtree_control"), "{e}");
    }

    // A blockIO that cannot be applied is refused before anything is written: the memory limit
    // given with it is not applied either.
    #[test]
    fn a_refused_block_io_writes_nothing_else() {
        let d = fake_cgroup(
            false,
            &["memory.limit_in_bytes", "blkio.throttle.read_bps_device"],
        );
        let r: LinuxResources =
            serde_json::from_str(r#"{"memory": {"limit": 1048576}, "blockIO": {"weight": 500}}"#)
                .unwrap();
        let e = apply(&[d.path().to_path_buf()], &r)
            .unwrap_err()
            .to_string();
        assert!(e.contains("linux.resources.blockIO.weight"), "{e}");
        let limit = std::fs::read_to_string(d.path().join("memory.limit_in_bytes")).unwrap();
        assert_eq!(
            limit, "",
            "the memory limit was written before blockIO was refused"
        );
    }

    // Item 8 of the second OCI review: two creates making the same missing parent raced,
    // and the loser failed with EEXIST. Many threads, each making its own cgroup below one
    // new parent, at once.
    #[test]
    fn creates_sharing_a_new_parent_do_not_race() {
        for round in 0..30 {
            let d = tempfile::tempdir().unwrap();
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
            let handles: Vec<_> = (0..8)
                .map(|i| {
                    let leaf = d.path().join(format!("a{round}/b/c{i}"));
                    let barrier = barrier.clone();
                    std::thread::spawn(move || {
                        barrier.wait();
                        create(std::slice::from_ref(&leaf))
                    })
                })
                .collect();
            for h in handles {
                let r = h.join().unwrap();
                assert!(r.is_ok(), "round {round}: {r:?}");
            }
        }
    }

    #[test]
    fn v1_mount_plan_binds_the_containers_own_cgroups() {
        let mi = "\
30 25 0:26 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw shared:10 - cgroup2 cgroup2 rw,nsdelegate
32 30 0:28 / /sys/fs/cgroup/systemd rw shared:11 - cgroup cgroup rw,xattr,name=systemd
33 30 0:29 / /sys/fs/cgroup/memory rw shared:13 - cgroup cgroup rw,memory
34 30 0:30 / /sys/fs/cgroup/cpu,cpuacct rw shared:14 - cgroup cgroup rw,cpu,cpuacct
35 30 0:31 /../.. /sys/fs/cgroup/blkio rw shared:15 - cgroup cgroup rw,blkio
36 30 0:32 /outer /sys/fs/cgroup/pids rw shared:16 - cgroup cgroup rw,pids
37 25 0:33 / /elsewhere/freezer rw shared:17 - cgroup cgroup rw,freezer
38 30 0:34 / /sys/fs/cgroup/devices rw shared:18 - cgroup cgroup rw,devices
";
        let me = "\
10:devices:/
9:freezer:/user.slice
8:pids:/outer/inner
7:blkio:/user.slice
4:memory:/user.slice
3:cpu,cpuacct:/user.slice
1:name=systemd:/user.slice/session-1.scope
0::/user.slice/session-1.scope
";
        let own = [
            PathBuf::from("/sys/fs/cgroup/memory/cordon/c1"),
            PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/cordon/c1"),
        ];
        let plan = v1_mount_plan(
            &MountInfo::parse(mi).unwrap(),
            &ProcCgroup::parse(me).unwrap(),
            &own,
        );
        let b = |name: &str, src: &str, own: bool| V1Bind {
            name: name.into(),
            src: src.into(),
            own,
        };
        assert_eq!(
            plan,
            [
                b(
                    "unified",
                    "/sys/fs/cgroup/unified/user.slice/session-1.scope",
                    false
                ),
                b(
                    "systemd",
                    "/sys/fs/cgroup/systemd/user.slice/session-1.scope",
                    false
                ),
                b("memory", "/sys/fs/cgroup/memory/cordon/c1", true),
                b("cpu,cpuacct", "/sys/fs/cgroup/cpu,cpuacct/cordon/c1", true),
                // blkio's mount shows another namespace's root: left out; freezer is not
                // below /sys/fs/cgroup; devices would be the hierarchy's root (the caller
                // is there): left out.
                b("pids", "/sys/fs/cgroup/pids/inner", false),
            ]
        );
    }

    #[test]
    fn v1_links_lists_plain_name_links_and_names_a_directory_it_cannot_read() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("cpu,cpuacct")).unwrap();
        std::os::unix::fs::symlink("cpu,cpuacct", d.path().join("cpu")).unwrap();
        std::os::unix::fs::symlink("/etc", d.path().join("abs")).unwrap();
        std::fs::write(d.path().join("file"), "").unwrap();
        assert_eq!(
            v1_links(d.path()).unwrap(),
            [("cpu".to_string(), "cpu,cpuacct".to_string())]
        );
        let missing = d.path().join("missing");
        let e = v1_links(&missing).unwrap_err().to_string();
        assert!(
            e.contains("list the cgroup hierarchies")
                && e.contains(&missing.display().to_string())
                && e.contains("No such file"),
            "{e}"
        );
    }

    #[test]
    fn mountinfo_hybrid() {
        let text = "\
30 25 0:26 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw shared:10 - cgroup2 cgroup2 rw,nsdelegate
33 30 0:29 / /sys/fs/cgroup/memory rw shared:13 - cgroup cgroup rw,memory
34 30 0:30 / /sys/fs/cgroup/cpu,cpuacct rw shared:14 - cgroup cgroup rw,cpu,cpuacct
35 30 0:31 / /sys/fs/cgroup/net_cls rw shared:15 - cgroup cgroup rw,net_cls
36 30 0:32 / /sys/fs/cgroup/systemd rw shared:16 - cgroup cgroup rw,xattr,name=systemd
37 30 0:33 / /sys/fs/cgroup/elogind rw shared:17 - cgroup cgroup rw,name=elogind
";
        let h = hierarchies_of(&MountInfo::parse(text).unwrap());
        assert_eq!(h.len(), 4, "{h:?}");
        assert_eq!(
            h[3],
            (
                PathBuf::from("/sys/fs/cgroup/systemd"),
                Some(vec!["name=systemd".to_string()])
            )
        );
        assert_eq!(h[0], (PathBuf::from("/sys/fs/cgroup/unified"), None));
        assert_eq!(
            h[2],
            (
                PathBuf::from("/sys/fs/cgroup/cpu,cpuacct"),
                Some(vec!["cpu".to_string(), "cpuacct".to_string()])
            )
        );
        // A pure v2 host with systemd's v1 hierarchy mounted beside it stays a v2 host.
        let text = "\
30 25 0:26 / /sys/fs/cgroup rw shared:9 - cgroup2 cgroup2 rw,nsdelegate
36 30 0:32 / /sys/fs/cgroup/systemd rw shared:16 - cgroup cgroup rw,xattr,name=systemd
";
        let h = hierarchies_of(&MountInfo::parse(text).unwrap());
        assert_eq!(h, vec![(PathBuf::from("/sys/fs/cgroup"), None)]);
    }

    #[test]
    fn cgroups_path_forms() {
        assert_eq!(
            relative_path_for(None, "c1", false, 0, None).unwrap(),
            Path::new("cordon/c1")
        );
        assert_eq!(
            relative_path_for(None, "c1", false, 1001, None).unwrap(),
            Path::new("cordon-1001/c1")
        );
        assert_eq!(
            relative_path(Some("/a/b"), "c1", false, None).unwrap(),
            Path::new("a/b")
        );
        assert_eq!(
            relative_path(Some("a/b"), "c1", false, None).unwrap(),
            Path::new("a/b")
        );
        assert_eq!(
            relative_path(Some("machine.slice:libpod:abc"), "c1", true, None).unwrap(),
            Path::new("machine.slice/libpod-abc.scope")
        );
    }

    // Item 12 of the second OCI review: `--systemd-cgroup` put `slice:prefix:name` at
    // `slice/prefix-name.scope`, without nesting the slice as systemd does (and runc's
    // ExpandSlice): a Kubernetes pod's cgroup landed beside, not inside, its QoS slices.
    #[test]
    fn systemd_cgroups_paths_expand_the_slice() {
        let sd = |p: &str| relative_path_for(Some(p), "c1", true, 0, None);
        assert_eq!(
            sd("kubepods-burstable-pod123.slice:cri-containerd:abc").unwrap(),
            Path::new(
                "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod123.slice/cri-containerd-abc.scope"
            )
        );
        assert_eq!(
            sd(":libpod:abc").unwrap(),
            Path::new("system.slice/libpod-abc.scope")
        );
        assert_eq!(sd("-.slice:p:abc").unwrap(), Path::new("p-abc.scope"));
        assert_eq!(
            sd("user.slice::abc").unwrap(),
            Path::new("user.slice/-abc.scope")
        );
        assert_eq!(
            sd("system.slice:p:my-app.slice").unwrap(),
            Path::new("system.slice/my-app.slice")
        );
        for bad in [
            "kubepods--burstable.slice:p:abc",
            "-kubepods.slice:p:abc",
            "kubepods-.slice:p:abc",
            "kubepods:p:abc",
            ".slice:p:abc",
            "a/b.slice:p:abc",
            "system.slice:p:../x",
            "system.slice:p:",
            "system.slice:abc",
            "/a/b",
        ] {
            let e = sd(bad).unwrap_err().to_string();
            assert!(e.contains("linux.cgroupsPath"), "{bad}: {e}");
        }
    }

    #[test]
    fn cgroups_path_forms_on_v2() {
        let own = Some(Path::new(
            "/user.slice/user@1001.service/app.slice/run-7.scope",
        ));
        // Root's default and absolute paths stay below the hierarchy's root.
        assert_eq!(
            relative_path_for(None, "c1", false, 0, own).unwrap(),
            Path::new("cordon/c1")
        );
        assert_eq!(
            relative_path_for(Some("/a/b"), "c1", false, 1001, own).unwrap(),
            Path::new("a/b")
        );
        // A user's default and relative paths go next to cordon-oci's own cgroup.
        assert_eq!(
            relative_path_for(None, "c1", false, 1001, own).unwrap(),
            Path::new("user.slice/user@1001.service/app.slice/cordon-c1")
        );
        assert_eq!(
            relative_path_for(Some("a/b"), "c1", false, 0, own).unwrap(),
            Path::new("user.slice/user@1001.service/app.slice/a/b")
        );
        // In the root cgroup there is no parent: the root it is.
        assert_eq!(
            relative_path_for(None, "c1", false, 1001, Some(Path::new("/"))).unwrap(),
            Path::new("cordon-c1")
        );
        assert_eq!(
            relative_path_for(None, "c1", false, 1001, Some(Path::new("/x"))).unwrap(),
            Path::new("cordon-c1")
        );
    }
}

#[cfg(test)]
mod device_program_tests {
    use super::*;

    /// Runs a device program the way the kernel would, for the instructions
    /// [`device_program`] emits; panics on any other.
    fn run(prog: &[u64], kind: i32, access: u32, major: u32, minor: u32) -> u64 {
        let ctx = [(access << 16) | kind as u32, major, minor];
        let mut r = [0u64; 11];
        let mut pc = 0usize;
        loop {
            let i = prog[pc];
            let code = (i & 0xff) as u8;
            let dst = ((i >> 8) & 0xf) as usize;
            let src = ((i >> 12) & 0xf) as usize;
            let off = ((i >> 16) & 0xffff) as u16 as i16;
            let imm = (i >> 32) as u32 as i32;
            pc += 1;
            match code {
                LDX_MEM_W => {
                    assert_eq!(src, 1, "loads come from the context");
                    r[dst] = u64::from(ctx[off as usize / 4]);
                }
                ALU32_AND_K => r[dst] = u64::from(r[dst] as u32 & imm as u32),
                ALU32_RSH_K => r[dst] = u64::from((r[dst] as u32) >> imm),
                ALU32_MOV_K => r[dst] = u64::from(imm as u32),
                ALU32_MOV_X => r[dst] = u64::from(r[src] as u32),
                JMP_JEQ_K if r[dst] == imm as i64 as u64 => pc += off as usize,
                JMP_JNE_K if r[dst] != imm as i64 as u64 => pc += off as usize,
                JMP_JEQ_K | JMP_JNE_K => {}
                EXIT => return r[0],
                _ => panic!("unexpected opcode {code:#x}"),
            }
        }
    }

    fn rules(list: &[(bool, &str)]) -> Vec<DeviceRule> {
        list.iter()
            .map(|(a, l)| DeviceRule::parse(*a, l).unwrap())
            .collect()
    }

    const R: u32 = ACC_READ;
    const W: u32 = ACC_WRITE;
    const M: u32 = ACC_MKNOD;

    #[test]
    fn deny_all_then_the_defaults() {
        let mut list = rules(&[(false, "a")]);
        list.extend(
            DEFAULT_ALLOW
                .iter()
                .map(|l| DeviceRule::parse(true, l).unwrap()),
        );
        let p = device_program(&list);
        assert_eq!(run(&p, DEV_CHAR, R | W, 1, 3), 1, "/dev/null");
        assert_eq!(run(&p, DEV_CHAR, R | W, 136, 5), 1, "a pty");
        assert_eq!(run(&p, DEV_CHAR, M, 10, 200), 1, "mknod of any char device");
        assert_eq!(run(&p, DEV_CHAR, R, 1, 11), 0, "/dev/kmsg");
        assert_eq!(run(&p, DEV_CHAR, R | M, 10, 200), 0, "read of /dev/net/tun");
        assert_eq!(run(&p, DEV_BLOCK, R, 8, 0), 0, "a disk");
        assert_eq!(run(&p, DEV_BLOCK, R, 1, 3), 0, "block 1:3 is not /dev/null");
    }

    #[test]
    fn later_rules_override_earlier_ones() {
        // No everything-rule: all is allowed but what is denied.
        let p = device_program(&rules(&[(false, "c 1:11 w")]));
        assert_eq!(run(&p, DEV_CHAR, R, 1, 11), 1);
        assert_eq!(run(&p, DEV_CHAR, R | W, 1, 11), 0);
        assert_eq!(run(&p, DEV_CHAR, W, 1, 11), 0);
        assert_eq!(run(&p, DEV_BLOCK, W, 1, 11), 1);
        // An allow-all after a deny resets the list.
        let p = device_program(&rules(&[(false, "c 1:11 rwm"), (true, "a")]));
        assert_eq!(run(&p, DEV_CHAR, R, 1, 11), 1);
        // A deny after an allow wins; an allow covers only the access it names.
        let p = device_program(&rules(&[
            (false, "a"),
            (true, "c 1:* rw"),
            (false, "c 1:4 rwm"),
        ]));
        assert_eq!(run(&p, DEV_CHAR, R | W, 1, 5), 1);
        assert_eq!(run(&p, DEV_CHAR, M, 1, 5), 0);
        assert_eq!(run(&p, DEV_CHAR, R | M, 1, 5), 0);
        assert_eq!(run(&p, DEV_CHAR, R, 1, 4), 0);
        assert_eq!(run(&p, DEV_CHAR, R, 2, 4), 0);
    }

    #[test]
    fn allow_everything_needs_no_program() {
        let defaults: Vec<DeviceRule> = DEFAULT_ALLOW
            .iter()
            .map(|l| DeviceRule::parse(true, l).unwrap())
            .collect();
        assert!(allows_everything(&defaults));
        let mut deny_all = rules(&[(false, "a")]);
        deny_all.extend(defaults.iter().cloned());
        assert!(!allows_everything(&deny_all));
        let mut one_denied = rules(&[(false, "c 1:11 r")]);
        one_denied.extend(defaults.iter().cloned());
        assert!(!allows_everything(&one_denied));
        let reset = rules(&[(false, "a"), (false, "c 1:11 r"), (true, "a")]);
        assert!(allows_everything(&reset));
    }

    #[test]
    fn the_allowlist_denies_what_no_rule_allows() {
        // `"devices": []` (cordon-oci spec): the default devices, nothing else.
        let list = device_allowlist(&[]).unwrap();
        assert!(!allows_everything(&list));
        let p = device_program(&list);
        assert_eq!(run(&p, DEV_CHAR, R | W, 1, 3), 1, "/dev/null");
        assert_eq!(run(&p, DEV_CHAR, R | W, 10, 200), 0, "/dev/net/tun");
        assert_eq!(run(&p, DEV_CHAR, W, 5, 1), 0, "the host's console");
        assert_eq!(run(&p, DEV_CHAR, R | W, 5, 0), 1, "/dev/tty");
        assert_eq!(run(&p, DEV_BLOCK, R, 8, 0), 0, "a disk");
        // A config's own allow-all still allows all.
        let all: Vec<oci_spec::runtime::LinuxDeviceCgroup> =
            serde_json::from_str(r#"[{"allow": true, "access": "rwm"}]"#).unwrap();
        assert!(allows_everything(&device_allowlist(&all).unwrap()));
    }

    fn oci_rules(json: &str) -> Vec<oci_spec::runtime::LinuxDeviceCgroup> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn an_update_appends_its_rules_then_the_defaults() {
        let created = device_allowlist(&[]).unwrap();
        let tun = oci_rules(r#"[{"allow": true, "type": "c", "major": 10, "minor": 200}]"#);
        let list = updated_device_list(&created, &tun).unwrap();
        // The container's list, the update's rule, the defaults again: nothing dropped.
        assert_eq!(list[..created.len()], created[..]);
        assert_eq!(list[created.len()], rules(&[(true, "c 10:200 rwm")])[0]);
        assert_eq!(list.len(), created.len() + 1 + DEFAULT_ALLOW.len());
        let p = device_program(&list);
        assert_eq!(run(&p, DEV_CHAR, R | W, 10, 200), 1, "/dev/net/tun now");
        assert_eq!(run(&p, DEV_CHAR, R | W, 1, 3), 1, "/dev/null still");
        assert_eq!(run(&p, DEV_BLOCK, R, 8, 0), 0, "a disk still denied");
        // A second update denying it again: denied, the rest as before.
        let deny = oci_rules(r#"[{"allow": false, "type": "c", "major": 10, "minor": 200}]"#);
        let again = updated_device_list(&list, &deny).unwrap();
        assert_eq!(again[..list.len()], list[..]);
        let p = device_program(&again);
        assert_eq!(
            run(&p, DEV_CHAR, R, 10, 200),
            0,
            "/dev/net/tun denied again"
        );
        assert_eq!(run(&p, DEV_CHAR, R | W, 1, 3), 1, "/dev/null still");
        // An update's rule cannot take the defaults away: they come after it.
        let null = oci_rules(r#"[{"allow": false, "type": "c", "major": 1, "minor": 3}]"#);
        let p = device_program(&updated_device_list(&created, &null).unwrap());
        assert_eq!(run(&p, DEV_CHAR, R | W, 1, 3), 1, "/dev/null");
    }

    #[test]
    fn an_update_with_an_everything_rule_drops_what_it_resets() {
        let created = device_allowlist(&[]).unwrap();
        let all = oci_rules(r#"[{"allow": true, "access": "rwm"}]"#);
        let list = updated_device_list(&created, &all).unwrap();
        assert_eq!(list[0], rules(&[(true, "a")])[0]);
        assert_eq!(list.len(), 1 + DEFAULT_ALLOW.len());
        assert!(allows_everything(&list));
        // Then a deny-all and one device: the list starts at the deny-all.
        let tun = oci_rules(
            r#"[{"allow": false}, {"allow": true, "type": "c", "major": 10, "minor": 200, "access": "r"}]"#,
        );
        let again = updated_device_list(&list, &tun).unwrap();
        assert_eq!(again[0], rules(&[(false, "a")])[0]);
        assert_eq!(again.len(), 2 + DEFAULT_ALLOW.len());
        assert!(!allows_everything(&again));
        let p = device_program(&again);
        assert_eq!(run(&p, DEV_CHAR, R, 10, 200), 1);
        assert_eq!(run(&p, DEV_CHAR, W, 10, 200), 0);
        assert_eq!(run(&p, DEV_BLOCK, R, 8, 0), 0);
        // Without an everything-rule anywhere nothing is dropped.
        let none = rules(&[(false, "c 1:11 w")]);
        assert_eq!(updated_device_list(&none, &[]).unwrap()[0], none[0]);
        // A bad rule is an error naming the field.
        let bad = oci_rules(r#"[{"allow": true, "access": "x"}]"#);
        let e = updated_device_list(&created, &bad).unwrap_err().to_string();
        assert!(e.contains("linux.resources.devices"), "{e}");
    }

    #[test]
    fn device_rules_survive_the_state_file() {
        let list = device_allowlist(&oci_rules(
            r#"[{"allow": true, "type": "b", "major": 8, "access": "r"}]"#,
        ))
        .unwrap();
        let json = serde_json::to_string(&list).unwrap();
        let back: Vec<DeviceRule> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, list);
    }

    #[test]
    fn device_allowed_answers_as_the_program() {
        let lists = [
            rules(&[(false, "a"), (true, "c 1:* rw"), (false, "c 1:4 rwm")]),
            rules(&[(false, "c 1:11 w"), (true, "b 8:* r")]),
            rules(&[
                (false, "a"),
                (true, "c *:5 m"),
                (false, "b *:* r"),
                (true, "c 10:200 rw"),
            ]),
            device_allowlist(&[]).unwrap(),
        ];
        for list in &lists {
            let p = device_program(list);
            for kind in [DEV_BLOCK, DEV_CHAR] {
                let k = if kind == DEV_BLOCK { 'b' } else { 'c' };
                for access in 1..=7 {
                    for (major, minor) in
                        [(1, 3), (1, 4), (1, 5), (1, 11), (8, 0), (10, 200), (136, 2)]
                    {
                        assert_eq!(
                            u64::from(device_allowed(list, k, access, major, minor)),
                            run(&p, kind, access, major, minor),
                            "{list:?}: {k} {major}:{minor} access {access}"
                        );
                    }
                }
            }
        }
    }

    /// The variable that makes the re-run of
    /// [`the_kernel_runs_the_program_as_the_interpreter_does`] the process inside the cgroup.
    const KERNEL_CHILD: &str = "CORDON_TEST_DEVICE_PROGRAM_CGROUP";

    /// (name, type, access, major, minor, allowed) for the rules of the kernel test.
    const KERNEL_CHECKS: &[(&str, i32, u32, u32, u32, bool)] = &[
        ("read+write /dev/null", DEV_CHAR, R | W, 1, 3, true),
        ("read /dev/full", DEV_CHAR, R, 1, 7, true),
        ("write /dev/full", DEV_CHAR, W, 1, 7, false),
        ("read /dev/zero", DEV_CHAR, R, 1, 5, false),
        ("read /dev/urandom", DEV_CHAR, R, 1, 9, false),
        ("mknod c 1:3", DEV_CHAR, M, 1, 3, true),
        ("mknod b 7:0", DEV_BLOCK, M, 7, 0, false),
    ];

    /// The process in the cgroup: tries each of [`KERNEL_CHECKS`], prints `devprog I ERRNO`.
    fn kernel_child(dir: &str) {
        std::fs::write(
            format!("{dir}/cgroup.procs"),
            std::process::id().to_string(),
        )
        .expect("move the test's re-run into the cgroup");
        let node = std::env::temp_dir().join(format!("cordon-devprog-{}", std::process::id()));
        for (i, (_, kind, access, major, minor, _)) in KERNEL_CHECKS.iter().enumerate() {
            let path = match (major, minor) {
                (1, 3) => "/dev/null",
                (1, 5) => "/dev/zero",
                (1, 7) => "/dev/full",
                _ => "/dev/urandom",
            };
            let r = if *access == M {
                let _ = std::fs::remove_file(&node);
                let t = if *kind == DEV_BLOCK {
                    nix::sys::stat::SFlag::S_IFBLK
                } else {
                    nix::sys::stat::SFlag::S_IFCHR
                };
                let r = nix::sys::stat::mknod(
                    &node,
                    t,
                    nix::sys::stat::Mode::from_bits_truncate(0o600),
                    libc::makedev(*major, *minor),
                )
                .map_err(|e| e as i32);
                let _ = std::fs::remove_file(&node);
                r
            } else {
                std::fs::OpenOptions::new()
                    .read(access & R != 0)
                    .write(access & W != 0)
                    .open(path)
                    .map(drop)
                    .map_err(|e| e.raw_os_error().unwrap_or(-1))
            };
            println!("devprog {i} {}", r.err().unwrap_or(0));
        }
    }

    /// A new cgroup `cordon-TAG-PID` under this process's own cgroup of the cgroup2 hierarchy
    /// (pure v2, or the unified mount of a hybrid host); None without a cgroup2 mount.
    fn test_cgroup2_dir(tag: &str) -> Option<std::path::PathBuf> {
        let mount = hierarchies()
            .expect("mountinfo")
            .into_iter()
            .find_map(|(m, c)| c.is_none().then_some(m))?;
        let own = own_cgroups()
            .expect("/proc/self/cgroup")
            .unified
            .expect("a cgroup2 line in /proc/self/cgroup");
        let dir = mount
            .join(own.trim_start_matches('/'))
            .join(format!("cordon-{tag}-{}", std::process::id()));
        std::fs::create_dir(&dir).expect("create a test cgroup");
        Some(dir)
    }

    // Without a cgroup v2 directory (a v1 host's container) the child is a plain fork,
    // clone3 is not tried, and every directory is left for it to join.
    #[test]
    fn without_a_v2_directory_the_child_joins_every_cgroup() {
        let dirs = vec![
            PathBuf::from("/sys/fs/cgroup/memory/not-v2"),
            PathBuf::from("/sys/fs/cgroup/pids/not-v2"),
        ];
        let mut tried = false;
        let (cloned, left) = clone_into(&dirs, 0, &mut |_| tried = true);
        match cloned.expect("a fork") {
            crate::sys::CloneResult::Child => crate::sys::exit_now(0),
            crate::sys::CloneResult::Parent(pid) => {
                let _ = nix::sys::wait::waitpid(pid, None);
            }
        }
        assert!(!tried, "clone3 was tried without a v2 directory");
        assert_eq!(left, dirs);
    }

    // A process from `clone_into` is in the cgroup v2 directory from its first instruction
    // (clone3 CLONE_INTO_CGROUP), and the other directories are left for it to join.
    #[test]
    fn a_clone_into_a_cgroup_is_born_there() {
        use crate::sys::CloneResult;
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIP: a_clone_into_a_cgroup_is_born_there: creating the cgroup needs root");
            return;
        }
        let Some(dir) = test_cgroup2_dir("born") else {
            eprintln!("SKIP: a_clone_into_a_cgroup_is_born_there: no cgroup2 mount");
            return;
        };
        let v1 = PathBuf::from("/sys/fs/cgroup/memory/not-v2");
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let mut why_not = None;
        let (cloned, left) = clone_into(&[v1.clone(), dir.clone()], 0, &mut |e| why_not = Some(e));
        let child = match cloned {
            Ok(CloneResult::Child) => {
                drop(w);
                let mut b = [0u8; 1];
                let _ = nix::unistd::read(&r, &mut b);
                crate::sys::exit_now(0)
            }
            Ok(CloneResult::Parent(pid)) => pid,
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                panic!("no child at all: {e}");
            }
        };
        if let Some(e) = why_not {
            drop(w);
            let _ = nix::sys::wait::waitpid(child, None);
            let _ = std::fs::remove_dir(&dir);
            // The fallback leaves every directory to join.
            assert_eq!(left, vec![v1, dir.clone()]);
            assert!(
                matches!(e, nix::errno::Errno::ENOSYS | nix::errno::Errno::E2BIG),
                "clone3 CLONE_INTO_CGROUP: {e}"
            );
            eprintln!(
                "SKIP: a_clone_into_a_cgroup_is_born_there: no clone3 CLONE_INTO_CGROUP here ({e}: a kernel before 5.7, or a seccomp filter); cordon-oci falls back to a move"
            );
            return;
        }
        // Born in the v2 directory: only the v1 one is left to join.
        assert_eq!(left, vec![v1]);
        drop(r);
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap();
        drop(w);
        let _ = nix::sys::wait::waitpid(child, None);
        let _ = std::fs::remove_dir(&dir);
        assert_eq!(procs.trim(), child.to_string(), "{}", dir.display());
    }

    /// The program as the kernel runs it: through the verifier, attached to a new cgroup of
    /// the cgroup2 hierarchy (pure v2, or the unified mount of a hybrid host, where the
    /// device hook runs too), with a process in that cgroup opening and making device nodes;
    /// and the interpreter above agrees on each. A caller without CAP_BPF is refused the
    /// load (what cordon-oci reports as an error), never given a program that does nothing.
    #[test]
    fn the_kernel_runs_the_program_as_the_interpreter_does() {
        if let Ok(dir) = std::env::var(KERNEL_CHILD) {
            return kernel_child(&dir);
        }
        let list = rules(&[
            (false, "a"),
            (true, "c 1:3 rw"),
            (true, "c 1:7 r"),
            (true, "c *:* m"),
            (false, "c 1:9 r"),
        ]);
        let prog = device_program(&list);
        for (name, kind, access, major, minor, allowed) in KERNEL_CHECKS {
            assert_eq!(
                run(&prog, *kind, *access, *major, *minor),
                u64::from(*allowed),
                "interpreter: {name}"
            );
        }
        let loaded = crate::sys::bpf_load_device_program(&prog);
        if !nix::unistd::geteuid().is_root() {
            assert_eq!(loaded.err(), Some(nix::errno::Errno::EPERM));
            return;
        }
        let fd = loaded.expect("the kernel loads the device program (verifier)");
        let Some(dir) = test_cgroup2_dir("devprog") else {
            eprintln!("no cgroup2 mount: the program was loaded, not attached");
            return;
        };
        let cg = std::fs::File::open(&dir).expect("open the test cgroup");
        use std::os::fd::AsFd;
        let attached = crate::sys::bpf_attach_device_program(cg.as_fd(), fd.as_fd());
        let out = attached.map(|()| {
            std::process::Command::new(std::env::current_exe().expect("test binary"))
                .args([
                    "--exact",
                    "oci::cgroup::device_program_tests::the_kernel_runs_the_program_as_the_interpreter_does",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(KERNEL_CHILD, &dir)
                .output()
                .expect("re-run the test in the cgroup")
        });
        let _ = std::fs::remove_dir(&dir);
        let out = out.expect("attach the program to the test cgroup");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let got: Vec<i32> = stdout
            .lines()
            // (The first may follow the harness's `test NAME ... ` on its line.)
            .filter_map(|l| l.split_once("devprog ").map(|(_, r)| r))
            .map(|l| l.split(' ').nth(1).unwrap().parse().unwrap())
            .collect();
        assert_eq!(got.len(), KERNEL_CHECKS.len(), "re-run's output: {stdout}");
        for ((name, .., allowed), errno) in KERNEL_CHECKS.iter().zip(got) {
            let want = if *allowed { 0 } else { libc::EPERM };
            assert_eq!(errno, want, "kernel: {name}");
        }
    }

    #[test]
    fn an_update_swaps_the_attached_programs() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIP: an_update_swaps_the_attached_programs: attaching needs root");
            return;
        }
        let Some(dir) = test_cgroup2_dir("devswap") else {
            eprintln!("SKIP: an_update_swaps_the_attached_programs: no cgroup2 mount");
            return;
        };
        let dirs = vec![dir.clone()];
        let checks = std::panic::catch_unwind(|| {
            use std::os::fd::AsFd;
            let cg = std::fs::File::open(&dir).expect("open the test cgroup");
            let attached = || crate::sys::bpf_query_device_programs(cg.as_fd()).expect("query");
            assert_eq!(attached(), Vec::<u32>::new());
            let created = device_allowlist(&[]).unwrap();
            attach_device_program(&dirs, &created).expect("attach at create");
            let first = attached();
            assert_eq!(first.len(), 1, "{first:?}");
            // Another program attached directly to the cgroup goes too.
            let other = crate::sys::bpf_load_device_program(&device_program(&rules(&[(
                false, "c 1:11 r",
            )])))
            .expect("load");
            crate::sys::bpf_attach_device_program(cg.as_fd(), other.as_fd()).expect("attach");
            let other_id = crate::sys::bpf_prog_id(other.as_fd()).expect("id");
            assert!(
                attached().contains(&other_id),
                "{other_id} not in {:?}",
                attached()
            );
            let tun = oci_rules(r#"[{"allow": true, "type": "c", "major": 10, "minor": 200}]"#);
            let list = updated_device_list(&created, &tun).unwrap();
            replace_device_program(&dirs, &list).expect("replace");
            let second = attached();
            assert_eq!(second.len(), 1, "{second:?}");
            assert!(!second.contains(&first[0]) && !second.contains(&other_id));
            // An update that allows everything leaves the cgroup no program of its own.
            let all = oci_rules(r#"[{"allow": true, "access": "rwm"}]"#);
            let list = updated_device_list(&list, &all).unwrap();
            assert!(allows_everything(&list));
            replace_device_program(&dirs, &list).expect("replace with none");
            assert_eq!(attached(), Vec::<u32>::new());
        });
        let _ = std::fs::remove_dir(&dir);
        if let Err(p) = checks {
            std::panic::resume_unwind(p);
        }
    }

    /// A directory that reads as a cgroup v2 one ([`is_v2`]) with `files`.
    fn fake_v2(files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("cgroup.controllers"), "cpu memory pids").unwrap();
        for (f, v) in files {
            std::fs::write(d.path().join(f), v).unwrap();
        }
        d
    }

    fn resources(json: &str) -> LinuxResources {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn a_process_that_could_not_be_signalled_is_an_error_naming_it() {
        let mut done = Signalled {
            pids: vec![10],
            missed: Vec::new(),
        };
        assert!(done.check(libc::SIGTERM).is_ok());
        done.missed = vec![
            (11, nix::errno::Errno::EMFILE),
            (12, nix::errno::Errno::EPERM),
        ];
        let msg = done.check(libc::SIGTERM).unwrap_err().to_string();
        for want in [
            "signal 15",
            "2 process(es)",
            "pid 11",
            "Too many open files",
            "kill --all",
        ] {
            assert!(msg.contains(want), "{want:?} not in {msg:?}");
        }
    }

    #[test]
    fn pids_and_remove_cover_sub_cgroups() {
        let d = tempfile::tempdir().unwrap();
        let top = d.path().join("c");
        let deep = top.join("a").join("b");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::create_dir_all(top.join("z")).unwrap();
        std::fs::write(top.join("cgroup.procs"), "1\n").unwrap();
        std::fs::write(deep.join("cgroup.procs"), "3\n1\n").unwrap();
        std::fs::write(top.join("z").join("cgroup.procs"), "4\n").unwrap();
        let dirs = [top.clone()];
        let mut got = pids(&dirs);
        assert_eq!(got[0], 1, "the top cgroup's processes come first");
        got.sort();
        assert_eq!(got, vec![1, 3, 4]);
        let order = subtree(&top);
        assert_eq!(order.last(), Some(&top), "the top is removed last");
        let pos = |p: &Path| order.iter().position(|x| x == p).unwrap();
        assert!(
            pos(&deep) < pos(&top.join("a")),
            "a child before its parent: {order:?}"
        );
        assert_eq!(order.len(), 4);
    }

    #[test]
    fn signal_all_signals_only_what_the_cgroup_still_lists() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let d = tempfile::tempdir().unwrap();
        let dirs = [d.path().to_path_buf()];
        std::fs::write(d.path().join("cgroup.procs"), "").unwrap();
        assert_eq!(signal_all(&dirs, libc::SIGKILL).pids, Vec::<i32>::new());
        assert!(
            child.try_wait().unwrap().is_none(),
            "an unlisted pid was signalled"
        );
        std::fs::write(d.path().join("cgroup.procs"), format!("{pid}\n")).unwrap();
        assert_eq!(signal_all(&dirs, libc::SIGKILL).pids, vec![pid]);
        let status = child.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL)
        );
    }

    #[test]
    fn real_time_cpu_fields_are_refused_on_v2() {
        let d = fake_v2(&[("cpu.max", "max 100000"), ("cpu.weight", "100")]);
        let dirs = [d.path().to_path_buf()];
        for (json, field) in [
            (r#"{"cpu": {"realtimeRuntime": 1000}}"#, "realtimeRuntime"),
            (r#"{"cpu": {"realtimePeriod": 100000}}"#, "realtimePeriod"),
        ] {
            let e = apply(&dirs, &resources(json)).unwrap_err().to_string();
            assert!(e.contains(&format!("linux.resources.cpu.{field}")), "{e}");
        }
    }

    #[test]
    fn a_refused_field_leaves_the_cgroup_unwritten() {
        // An `update` with a field v2 cannot take is refused before the memory, pids or
        // unified writes that come before it in the apply order.
        let d = fake_v2(&[
            ("memory.max", "max"),
            ("pids.max", "max"),
            ("cpu.max", "max 100000"),
            ("memory.high", "max"),
        ]);
        let dirs = [d.path().to_path_buf()];
        let read = |f: &str| std::fs::read_to_string(d.path().join(f)).unwrap();
        for (json, field) in [
            (
                r#"{"memory": {"limit": 1048576}, "pids": {"limit": 5}, "cpu": {"realtimeRuntime": 1}}"#,
                "realtimeRuntime",
            ),
            (
                r#"{"unified": {"memory.high": "1000"}, "memory": {"limit": 1048576, "swappiness": 10}}"#,
                "swappiness",
            ),
            (
                r#"{"memory": {"limit": 1048576}, "devices": [{"allow": false, "access": "rwm"}]}"#,
                "devices",
            ),
        ] {
            let e = apply(&dirs, &resources(json)).unwrap_err().to_string();
            assert!(e.contains(field), "{e}");
            assert_eq!(
                (read("memory.max"), read("pids.max"), read("memory.high")),
                ("max".into(), "max".into(), "max".into()),
                "{json}"
            );
        }
    }

    // Item 9 of the second OCI review: a memory limit of 0 was written as memory.max 0 (the
    // container killed at once) and cpu shares of 0 as the weight 1; runc takes 0 as unset.
    // So is a cpu period, quota or real-time setting of 0: `ctr run --cpu-quota N` sends `"period": 0`,
    // which the kernel refuses.
    #[test]
    fn zero_memory_and_cpu_shares_are_unset() {
        for v2 in [true, false] {
            let d = if v2 {
                fake_v2(&[
                    ("memory.max", "max"),
                    ("memory.low", "0"),
                    ("memory.swap.max", "max"),
                    ("cpu.weight", "100"),
                    ("cpu.max", "max 100000"),
                ])
            } else {
                let d = tempfile::tempdir().unwrap();
                for (f, v) in [
                    ("tasks", ""),
                    ("memory.limit_in_bytes", "9223372036854771712"),
                    ("memory.soft_limit_in_bytes", "9223372036854771712"),
                    ("memory.memsw.limit_in_bytes", "9223372036854771712"),
                    ("cpu.shares", "1024"),
                    ("cpu.cfs_quota_us", "-1"),
                    ("cpu.cfs_period_us", "100000"),
                    ("cpu.rt_period_us", "1000000"),
                    ("cpu.rt_runtime_us", "0"),
                ] {
                    std::fs::write(d.path().join(f), v).unwrap();
                }
                d
            };
            let dirs = [d.path().to_path_buf()];
            let before = std::fs::read_dir(d.path())
                .unwrap()
                .map(|e| {
                    let p = e.unwrap().path();
                    (p.clone(), std::fs::read_to_string(p).unwrap())
                })
                .collect::<Vec<_>>();
            apply(
                &dirs,
                &resources(
                    r#"{"memory": {"limit": 0, "reservation": 0, "swap": 0, "kernel": 0}, "cpu": {"shares": 0, "quota": 0, "period": 0, "realtimePeriod": 0, "realtimeRuntime": 0}}"#,
                ),
            )
            .unwrap();
            for (p, v) in before {
                assert_eq!(
                    std::fs::read_to_string(&p).unwrap(),
                    v,
                    "v2 {v2}: {}",
                    p.display()
                );
            }
        }
    }

    // memory.swap is memory plus swap on both versions: on v2 memory.swap.max gets the
    // difference; a figure below the limit, or with no limit to take it from, is refused
    // before anything is written (it was written as swap 0, or as a swap-only figure).
    #[test]
    fn swap_on_cgroup_v2_is_memory_plus_swap_or_refused() {
        let d = fake_v2(&[("memory.max", "max\n"), ("memory.swap.max", "max\n")]);
        let dirs = [d.path().to_path_buf()];
        let read = |f: &str| {
            std::fs::read_to_string(d.path().join(f))
                .unwrap()
                .trim()
                .to_string()
        };
        for json in [
            r#"{"memory": {"swap": 1000000}}"#,
            r#"{"memory": {"limit": -1, "swap": 1000000}}"#,
        ] {
            let e = apply(&dirs, &resources(json)).unwrap_err().to_string();
            assert!(
                e.contains("memory.swap") && e.contains("needs a memory limit"),
                "{json}: {e}"
            );
            assert_eq!(
                (read("memory.max"), read("memory.swap.max")),
                ("max".into(), "max".into()),
                "{json}"
            );
        }
        let e = apply(
            &dirs,
            &resources(r#"{"memory": {"limit": 2000000, "swap": 1000000}}"#),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("below the memory limit 2000000"), "{e}");
        assert_eq!(
            read("memory.max"),
            "max",
            "a refused update wrote the limit"
        );
        apply(
            &dirs,
            &resources(r#"{"memory": {"limit": 2000000, "swap": 3000000}}"#),
        )
        .unwrap();
        assert_eq!(
            (read("memory.max"), read("memory.swap.max")),
            ("2000000".into(), "1000000".into())
        );
        // An update of the swap alone takes the limit in force; -1 lifts it.
        apply(&dirs, &resources(r#"{"memory": {"swap": 2000000}}"#)).unwrap();
        assert_eq!(read("memory.swap.max"), "0");
        apply(&dirs, &resources(r#"{"memory": {"swap": -1}}"#)).unwrap();
        assert_eq!(read("memory.swap.max"), "max");
        // A refused swap leaves the unified files unwritten too; `unified` is written last
        // (runc's order), so its memory.swap.max has the final word, as Kubernetes needs.
        std::fs::write(d.path().join("memory.high"), "max").unwrap();
        let e = apply(
            &dirs,
            &resources(
                r#"{"unified": {"memory.high": "5000"}, "memory": {"limit": 2000000, "swap": 1}}"#,
            ),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("below the memory limit"), "{e}");
        assert_eq!(read("memory.high"), "max");
        apply(
            &dirs,
            &resources(r#"{"unified": {"memory.swap.max": "0"}, "memory": {"limit": 2000000, "swap": 4000000}}"#),
        )
        .unwrap();
        assert_eq!(read("memory.swap.max"), "0");
    }

    #[test]
    fn check_before_update_refuses_a_limit_below_the_usage() {
        let d = fake_v2(&[
            ("memory.current", "1000000\n"),
            ("memory.swap.current", "0\n"),
            ("memory.max", "max\n"),
            ("memory.swap.max", "max\n"),
        ]);
        let dirs = [d.path().to_path_buf()];
        let max = || std::fs::read_to_string(d.path().join("memory.max")).unwrap();
        let e = apply(
            &dirs,
            &resources(r#"{"memory": {"limit": 500000, "checkBeforeUpdate": true}}"#),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("checkBeforeUpdate") && e.contains("1000000"),
            "{e}"
        );
        assert_eq!(max(), "max\n", "written despite the check");
        // Above the usage it is written; without the check, below too.
        apply(
            &dirs,
            &resources(r#"{"memory": {"limit": 2000000, "checkBeforeUpdate": true}}"#),
        )
        .unwrap();
        assert_eq!(max(), "2000000");
        apply(&dirs, &resources(r#"{"memory": {"limit": 500000}}"#)).unwrap();
        assert_eq!(max(), "500000");
    }

    #[test]
    fn v1_lines_round_trip() {
        for l in ["a", "c 1:3 rwm", "b *:* m", "c 136:* rw"] {
            assert_eq!(DeviceRule::parse(true, l).unwrap().v1_line(), l);
        }
    }
}
