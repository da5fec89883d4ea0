//! Test servers on the host's loopback for the network tests: an HTTP and an HTTPS server
//! (a self-signed certificate for `localhost`, made with `openssl` at test time) and a static
//! file server (a package index), each a Debian python3 process the test kills at the end.
//! Every request they serve is appended to a log file the tests read.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The host's python (Debian's, not a user's pyenv shim).
pub const HOST_PY: &str = "/usr/bin/python3";

const SERVER: &str = r#"
import http.server, ssl, sys, threading, os
log, root, cert, key = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
class H(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *a, **kw):
        super().__init__(*a, directory=root, **kw)
    def do_GET(self):
        with open(log, "a") as f:
            f.write("%s %s %s\n" % (self.server.kind, self.headers.get("Host", "-"), self.path))
        if self.path.startswith("/hello"):
            body = ("hello over %s: %s\n" % (self.server.kind, self.path)).encode() * 20
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()
    def log_message(self, *a):
        pass
servers = []
http_s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H); http_s.kind = "http"
servers.append(http_s)
port_s = 0
if cert != "-":
    https_s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H); https_s.kind = "https"
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    https_s.socket = ctx.wrap_socket(https_s.socket, server_side=True)
    servers.append(https_s)
    port_s = https_s.server_port
print(http_s.server_port, port_s, flush=True)
for s in servers:
    threading.Thread(target=s.serve_forever, daemon=True).start()
sys.stdin.read()
"#;

/// The running servers; killed on drop.
pub struct Servers {
    child: Child,
    pub http: u16,
    /// 0 when no certificate could be made.
    pub https: u16,
    pub log: PathBuf,
    /// The CA (the self-signed certificate itself) in PEM, when there is one.
    pub ca_pem: Option<String>,
    _dir: tempfile::TempDir,
}

impl Drop for Servers {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Servers {
    /// Lines of the request log: "KIND HOST PATH".
    pub fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }
}

/// Makes a self-signed certificate for `localhost` in `dir`; `None` without openssl.
fn make_cert(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let ok = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args([
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    ok.then_some((cert, key))
}

/// Starts the servers; `root` is the directory the static file server serves (`None`: an
/// empty one). `None` (after a SKIP line) when the host's python3 is missing.
pub fn start(test: &str, root: Option<&Path>, https: bool) -> Option<Servers> {
    if !Path::new(HOST_PY).exists() {
        skip_unless_required!("SKIP: {test}: {HOST_PY} is missing (apt-get install python3)");
        return None;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("requests.log");
    std::fs::write(&log, "").unwrap();
    let cert = if https { make_cert(dir.path()) } else { None };
    if https && cert.is_none() {
        skip_unless_required!(
            "SKIP: {test}: HTTPS part: openssl could not make a certificate (apt-get install openssl)"
        );
    }
    let served = root
        .map(Path::to_path_buf)
        .unwrap_or_else(|| dir.path().to_path_buf());
    let (c, k) = match &cert {
        Some((c, k)) => (c.display().to_string(), k.display().to_string()),
        None => ("-".into(), "-".into()),
    };
    let mut child = Command::new(HOST_PY)
        .args(["-c", SERVER])
        .arg(&log)
        .arg(&served)
        .args([&c, &k])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the test servers");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("read the servers' ports");
    let mut ports = line.split_whitespace().map(|p| p.parse::<u16>().unwrap());
    let (http, https_port) = (ports.next().unwrap(), ports.next().unwrap());
    let ca_pem = cert.map(|(c, _)| std::fs::read_to_string(c).unwrap());
    Some(Servers {
        child,
        http,
        https: https_port,
        log,
        ca_pem,
        _dir: dir,
    })
}

/// Writes a PEP 503 simple index under `root` holding `cordon-dep` 1.0, a wheel whose
/// `cordon_dep.VALUE` is "installed from the local index".
pub fn write_pypi_index(root: &Path) {
    write_pypi_wheel(
        root,
        "cordon-dep",
        &[(
            "cordon_dep/__init__.py",
            "VALUE = 'installed from the local index'\n",
        )],
    );
}

/// Adds a pure-Python wheel of project `name`, version 1.0, holding `files` (path in the
/// wheel, text), to the PEP 503 simple index under `root`.
pub fn write_pypi_wheel(root: &Path, name: &str, files: &[(&str, &str)]) {
    write_pypi_wheel_with(root, name, "1.0", files, 0);
}

/// [`write_pypi_wheel`] with a version, and `filler` random (incompressible) bytes in
/// `NAME/filler.bin` (0: none), for a wheel of a given size.
pub fn write_pypi_wheel_with(
    root: &Path,
    name: &str,
    version: &str,
    files: &[(&str, &str)],
    filler: usize,
) {
    let script = r#"
import zipfile, hashlib, base64, json, os, sys
os.chdir(sys.argv[1])
project, ver = sys.argv[2], sys.argv[4]
name = project.replace("-", "_")
files = {p: c.encode() for p, c in json.loads(sys.argv[3])}
if int(sys.argv[5]):
    files[f"{name}/filler.bin"] = os.urandom(int(sys.argv[5]))
files[f"{name}-{ver}.dist-info/METADATA"] = f"Metadata-Version: 2.1\nName: {project}\nVersion: {ver}\n".encode()
files[f"{name}-{ver}.dist-info/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: cordon-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
rec = []
for p, c in files.items():
    d = base64.urlsafe_b64encode(hashlib.sha256(c).digest()).rstrip(b"=").decode()
    rec.append(f"{p},sha256={d},{len(c)}")
rec.append(f"{name}-{ver}.dist-info/RECORD,,")
files[f"{name}-{ver}.dist-info/RECORD"] = ("\n".join(rec) + "\n").encode()
os.makedirs("files", exist_ok=True); os.makedirs(f"simple/{project}", exist_ok=True)
whl = f"files/{name}-{ver}-py3-none-any.whl"
with zipfile.ZipFile(whl, "w") as z:
    for p, c in files.items(): z.writestr(p, c)
open(f"simple/{project}/index.html", "w").write(f'<html><body><a href="../../{whl}">{os.path.basename(whl)}</a></body></html>')
"#;
    let files: Vec<[&str; 2]> = files.iter().map(|(p, c)| [*p, *c]).collect();
    let ok = Command::new(HOST_PY)
        .args(["-c", script])
        .arg(root)
        .arg(name)
        .arg(serde_json::to_string(&files).unwrap())
        .arg(version)
        .arg(filler.to_string())
        .status()
        .expect("run python3")
        .success();
    assert!(ok, "building the test wheel {name} failed");
}

/// Writes a one-package npm registry (`cordon-dep` 1.0.0, exporting the string
/// "installed from the local registry") under `root`, for a server at `localhost:port`.
pub fn write_npm_registry(root: &Path, port: u16) {
    write_npm_package(root, port, "cordon-dep", "");
}

/// Adds `name` 1.0.0 to the registry under `root` (as [`write_npm_registry`] does), with
/// `postinstall` as its install script when not empty: npm runs it, as the package's author
/// wrote it, in the install sandbox.
pub fn write_npm_package(root: &Path, port: u16, name: &str, postinstall: &str) {
    let script = r#"
import tarfile, io, json, hashlib, base64, os, sys
os.chdir(sys.argv[1]); port = int(sys.argv[2])
name, ver = sys.argv[3], "1.0.0"
pkg = {"name": name, "version": ver, "main": "index.js"}
if sys.argv[4]:
    pkg["scripts"] = {"postinstall": sys.argv[4]}
files = {"package/package.json": json.dumps(pkg), "package/index.js": "module.exports = 'installed from the local registry';\n"}
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w:gz") as t:
    for p, c in files.items():
        data = c.encode(); ti = tarfile.TarInfo(p); ti.size = len(data); ti.mode = 0o644
        t.addfile(ti, io.BytesIO(data))
tgz = buf.getvalue()
open(f"{name}-{ver}.tgz", "wb").write(tgz)
integrity = "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()
doc = {"name": name, "dist-tags": {"latest": ver}, "versions": {ver: dict(pkg, dist={"tarball": f"http://localhost:{port}/{name}-{ver}.tgz", "shasum": hashlib.sha1(tgz).hexdigest(), "integrity": integrity})}}
open(name, "w").write(json.dumps(doc))
"#;
    let ok = Command::new(HOST_PY)
        .args(["-c", script])
        .arg(root)
        .arg(port.to_string())
        .args([name, postinstall])
        .status()
        .expect("run python3")
        .success();
    assert!(ok, "building the test npm registry failed");
}
