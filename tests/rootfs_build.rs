//! Builds the python rootfs with the embedded builder (`cordon::rootfs::build`) and runs code on
//! it with `cordon exec --rootfs`, as root and as the unprivileged test user.
//!
//! Building takes minutes and needs Debian's mirror, so it runs only when asked:
//! - `CORDON_TEST_BUILD_ROOTFS=1`: build (or rebuild) it, then test it (CI sets this);
//! - `CORDON_TEST_BUILD_ROOTFS=reuse`: test the rootfs already built, building it only if absent;
//! - otherwise every test here prints `SKIP:` and passes.
//!
//! The rootfs goes where `cordon rootfs build python` puts it: /var/lib/cordon/rootfs/python
//! when the tests run as root (it must then be readable by the unprivileged test user too).

#[macro_use]
mod common;
mod net_support;

use common::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const LANG: &str = "python";

/// The built python rootfs, or None (after a SKIP line) when building was not asked for.
/// Built once per test binary; a failed build fails every test that needs it.
fn python_rootfs(test: &str) -> Option<PathBuf> {
    let mode = std::env::var("CORDON_TEST_BUILD_ROOTFS").unwrap_or_default();
    if mode != "1" && mode != "reuse" {
        skip!(
            "SKIP: {test}: set CORDON_TEST_BUILD_ROOTFS=1 to build the python rootfs (minutes) \
             and test it, or =reuse to test an already built one"
        );
        return None;
    }
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        if mode == "reuse"
            && let Some(r) = cordon::rootfs::find(LANG)
        {
            println!("reusing {}", r.path.display());
            return Ok(r.path);
        }
        let start = Instant::now();
        let r = cordon::rootfs::build(LANG, true).map_err(|e| e.to_string())?;
        println!(
            "built {} in {:?}: {:?}, {:?} bytes",
            r.path.display(),
            start.elapsed(),
            r.toolchain,
            r.size_bytes
        );
        Ok(r.path)
    });
    match built {
        Ok(p) => Some(p.clone()),
        Err(e) => panic!("{test}: building the python rootfs failed: {e}"),
    }
}

const NUMPY_PANDAS: &str = "\
import numpy, pandas, matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt
df = pandas.DataFrame({'x': numpy.arange(10), 'y': numpy.arange(10) ** 2})
plt.plot(df.x, df.y)
plt.savefig('/workspace/chart.png')
import os
print(int(df.y.sum()), numpy.__version__.split('.')[0], os.path.getsize('/workspace/chart.png') > 1000)
";

both!(fn numpy_pandas_matplotlib_run_on_the_built_rootfs(who) {
    let Some(root) = python_rootfs("numpy_pandas_matplotlib_run_on_the_built_rootfs") else { return };
    let root = root.to_str().expect("utf-8 path");
    let r = Cordon::exec(
        who,
        &["--json", "--rootfs", root, "--timeout", "120s"],
        &["python3", "-c", NUMPY_PANDAS],
    )
    .deadline(Duration::from_secs(180))
    .run_json();
    let out = r.expect_ok();
    assert_eq!(out, "285 1 True\n", "{}", r.describe());

    let r = exec_json_run(who, &["--rootfs", root], &["id", "-un"]);
    assert_eq!(r.expect_ok(), "sandbox\n", "{}", r.describe());

    // The rootfs's own files, not the host's: Debian bookworm's python, read-only.
    let r = exec_json_run(
        who,
        &["--rootfs", root],
        &["/bin/sh", "-c", "python3 --version; grep ^sandbox: /etc/passwd; touch /usr/x 2>/dev/null || echo ro"],
    );
    let out = r.expect_ok();
    assert!(out.starts_with("Python 3."), "{}", r.describe());
    assert!(out.contains("sandbox:x:1000:1000:cordon sandbox:/workspace:"), "{}", r.describe());
    assert!(out.ends_with("ro\n"), "the rootfs must be read-only:\n{}", r.describe());
});

// `--packages` on the built rootfs, where Debian's matplotlib keeps `mpl_toolkits` as a
// regular package that a `-nspkg.pth` file imports at start-up: a package that installs a
// module into that namespace (as pip's matplotlib 3.7+ does with its own mpl_toolkits) must
// be importable beside the rootfs's own modules of it, not hidden by them.
both!(fn a_package_set_reaches_into_a_namespace_the_rootfs_holds(who) {
    let test = "a_package_set_reaches_into_a_namespace_the_rootfs_holds";
    let Some(root) = python_rootfs(test) else { return };
    let site = root.join("usr/lib/python3/dist-packages");
    assert!(
        site.join("mpl_toolkits/__init__.py").is_file()
            && std::fs::read_dir(&site).unwrap().flatten().any(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.starts_with("matplotlib-") && n.ends_with("-nspkg.pth")
            }),
        "{test}: the built rootfs no longer has Debian's regular mpl_toolkits with its -nspkg.pth: \
         this test needs another namespace that the rootfs hides"
    );
    let index_dir = tempfile::tempdir().unwrap();
    // Each test's index has a port of its own, part of the set's cache key: installed anew.
    let marker = "cordon_ns_module";
    net_support::write_pypi_wheel(
        index_dir.path(),
        "cordon-ns",
        &[(&format!("mpl_toolkits/{marker}.py"), "VALUE = 'from the set'\n")],
    );
    let Some(srv) = net_support::start(test, Some(index_dir.path()), false) else { return };
    let index = format!("http://localhost:{}/simple", srv.http);
    let code = format!(
        "import mpl_toolkits.{marker} as m, mpl_toolkits.mplot3d as d\nprint(m.VALUE, d.__name__)\n"
    );
    let r = Cordon::new(who)
        .args([
            "run", "--lang", "python", "--rootfs", root.to_str().unwrap(), "--no-history",
            "--json", "--timeout", "60s", "--packages", "cordon-ns", "--package-index", &index,
            "-c", &code,
        ])
        .deadline(Duration::from_secs(240))
        .run_json();
    assert_eq!(r.expect_ok(), "from the set mpl_toolkits.mplot3d\n", "{}", r.describe());
    let said = r.get("/dependencies/error").as_str().unwrap_or_default();
    assert!(
        said.contains("regular package(s) that also reach into the root filesystem's own")
            && said.contains("mpl_toolkits"),
        "the dependencies report must name the joined namespace:\n{}",
        r.describe()
    );
});

// `--packages numpy` on the python rootfs: the set's numpy comes first on the path, and the
// rootfs's pandas, compiled against the rootfs's numpy, fails to import ("numpy.dtype size
// changed, may indicate binary incompatibility"). The set's report names the shadowed
// distribution and the rootfs packages that depend on it (dpkg knows pandas does; Debian
// removed numpy from pandas' Python metadata), and the failure's message points at it. A
// local index serves a stand-in numpy 1.0 that fails the way numpy 2 does.
both!(fn a_package_set_that_shadows_the_rootfs_numpy_is_reported(who) {
    let test = "a_package_set_that_shadows_the_rootfs_numpy_is_reported";
    let Some(root) = python_rootfs(test) else { return };
    let site = root.join("usr/lib/python3/dist-packages");
    let rootfs_numpy = std::fs::read_dir(&site)
        .unwrap()
        .flatten()
        .find_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let stem = n.strip_suffix(".egg-info").or_else(|| n.strip_suffix(".dist-info"))?;
            Some(stem.strip_prefix("numpy-")?.split('-').next()?.to_string())
        })
        .unwrap_or_else(|| panic!("{test}: the built rootfs has no numpy metadata in {}", site.display()));
    let index_dir = tempfile::tempdir().unwrap();
    net_support::write_pypi_wheel_with(
        index_dir.path(),
        "numpy",
        "1.0",
        &[(
            "numpy/__init__.py",
            "raise ValueError('numpy.dtype size changed, may indicate binary incompatibility. Expected 96 from C header, got 88 from PyObject')\n",
        )],
        0,
    );
    let Some(srv) = net_support::start(test, Some(index_dir.path()), false) else { return };
    let index = format!("http://localhost:{}/simple", srv.http);
    let run = |code: &str| {
        Cordon::new(who)
            .args([
                "run", "--lang", "python", "--rootfs", root.to_str().unwrap(), "--no-history",
                "--json", "--timeout", "60s", "--packages", "numpy", "--package-index", &index,
                "-c", code,
            ])
            .deadline(Duration::from_secs(240))
            .run_json()
    };
    let r = run("import pandas");
    assert_eq!(r.status(), "runtime_error", "{}", r.describe());
    let shadowed = r.get("/dependencies/shadowed");
    assert_eq!(shadowed[0]["name"], "numpy", "{}", r.describe());
    assert_eq!(shadowed[0]["version"], "1.0", "{}", r.describe());
    assert_eq!(shadowed[0]["rootfsVersion"], rootfs_numpy.as_str(), "{}", r.describe());
    let dependents: Vec<&str> = shadowed[0]["dependents"].as_array().map(|a| a.iter().filter_map(|d| d.as_str()).collect()).unwrap_or_default();
    assert!(dependents.contains(&"pandas") && dependents.contains(&"matplotlib"), "{}", r.describe());
    let said = r.get("/dependencies/error").as_str().unwrap_or_default();
    assert!(
        said.contains(&format!("numpy 1.0 from --packages shadows the root filesystem's numpy {rootfs_numpy}; the root filesystem's packages that depend on it ("))
            && said.contains(&format!("or pin `numpy=={rootfs_numpy}` in --packages")),
        "the dependencies report must say what the set shadows:\n{}",
        r.describe()
    );
    let msg = r.get("/message").as_str().unwrap_or_default();
    assert!(
        msg.starts_with("the program failed on a binary incompatibility (\"ValueError: numpy.dtype size changed")
            && msg.contains(&format!("numpy 1.0 from --packages shadows the root filesystem's numpy {rootfs_numpy}, which the root filesystem's "))
            && msg.contains("pandas")
            && msg.contains(&format!("or pin numpy=={rootfs_numpy} in --packages")),
        "the failure must point at the shadowing:\n{}",
        r.describe()
    );
    // A program that does not meet it runs as it is; the report still says it (cached set).
    let r = run("print('ran')");
    assert_eq!(r.expect_ok(), "ran\n", "{}", r.describe());
    assert_eq!(r.get("/dependencies/cached"), true, "{}", r.describe());
    assert_eq!(r.get("/dependencies/shadowed/0/name"), "numpy", "{}", r.describe());
    assert!(r.get("/message").is_null(), "{}", r.describe());
});

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
}

/// The build's promises about the tree itself: metadata, users, hosts, CA bundle, no setuid
/// bit, locked passwords, world-readable, nothing half-built left next to it.
#[test]
fn built_rootfs_is_clean() {
    let Some(root) = python_rootfs("built_rootfs_is_clean") else {
        return;
    };
    let meta = cordon::rootfs::find(LANG).expect("find() sees the built rootfs");
    assert_eq!(meta.path, root);
    let toolchain = meta.toolchain.clone().unwrap_or_default();
    assert!(toolchain.starts_with("Python 3."), "{meta:?}");
    assert!(
        meta.built.is_some() && meta.size_bytes.unwrap_or(0) > 10_000_000,
        "{meta:?}"
    );
    assert!(cordon::rootfs::list().iter().any(|r| r.language == LANG));
    let json: serde_json::Value =
        serde_json::from_str(&read(&root, ".cordon-rootfs.json")).expect("metadata is JSON");
    assert_eq!(json["suite"], "bookworm");
    assert!(
        json["packages"]
            .as_array()
            .is_some_and(|p| p.iter().any(|x| x == "python3-pandas")),
        "{json}"
    );

    let passwd = read(&root, "etc/passwd");
    for want in [
        "root:x:0:0:",
        "nobody:x:65534:",
        "sandbox:x:1000:1000:cordon sandbox:/workspace:",
    ] {
        assert!(
            passwd.lines().any(|l| l.starts_with(want)),
            "passwd lacks {want}:\n{passwd}"
        );
    }
    assert_eq!(
        passwd
            .lines()
            .filter(|l| l.split(':').nth(2) == Some("1000"))
            .count(),
        1
    );
    let group = read(&root, "etc/group");
    for want in ["root:x:0:", "nogroup:x:65534:", "sandbox:x:1000:"] {
        assert!(
            group.lines().any(|l| l.starts_with(want)),
            "group lacks {want}:\n{group}"
        );
    }
    assert!(read(&root, "etc/hosts").contains("localhost"));
    assert!(
        root.join("etc/ssl/certs/ca-certificates.crt").is_file(),
        "no CA bundle"
    );
    // The CAs the host's administrator added are in the bundle (on a host that has some).
    let bundle = read(&root, "etc/ssl/certs/ca-certificates.crt");
    let added = std::fs::read_dir("/usr/local/share/ca-certificates")
        .map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>())
        .unwrap_or_default();
    for crt in added
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "crt"))
    {
        let pem = std::fs::read_to_string(crt).unwrap();
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        let in_bundle: String = bundle.lines().filter(|l| !l.starts_with("-----")).collect();
        assert!(
            in_bundle.contains(&body),
            "{} is trusted on the host but not in the rootfs's CA bundle",
            crt.display()
        );
    }
    if let Ok(shadow) = std::fs::read_to_string(root.join("etc/shadow")) {
        for l in shadow.lines() {
            let pw = l.split(':').nth(1).unwrap_or("");
            assert!(
                pw == "*" || pw == "!" || pw.starts_with('!') || pw.starts_with('*'),
                "unlocked: {l}"
            );
        }
    }

    // Walk the whole tree: no setuid/setgid file; the top and /usr world-readable.
    let mut stack = vec![root.clone()];
    let mut files = 0u64;
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .flatten()
        {
            let m = e.path().symlink_metadata().unwrap();
            assert_eq!(
                m.mode() & 0o6000,
                0,
                "setuid/setgid bit on {}",
                e.path().display()
            );
            if m.is_dir() && m.mode() & 0o005 == 0o005 {
                stack.push(e.path());
            }
            files += 1;
        }
    }
    assert!(files > 1000, "only {files} entries");
    for d in ["", "usr", "usr/bin", "usr/lib/python3/dist-packages", "etc"] {
        let mode = std::fs::metadata(root.join(d))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o005, 0o005, "/{d} is not world-readable: {mode:o}");
    }
    let parent = root.parent().unwrap();
    let leftovers: Vec<_> = std::fs::read_dir(parent)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".building.") || n.contains(".old."))
        .collect();
    assert!(
        leftovers.is_empty(),
        "left next to the rootfs: {leftovers:?}"
    );
}
