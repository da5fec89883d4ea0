//! OCI hooks: each runs with the container's state JSON on its stdin, its own `args` and
//! `env` only, and its `timeout` (seconds) enforced with SIGKILL.

use oci_spec::runtime::Hook;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
#[error("the {kind}[{index}] hook {path} {what}")]
pub struct HookError {
    pub kind: &'static str,
    pub index: usize,
    pub path: String,
    pub what: String,
}

/// Runs `hooks` in order; the first failure stops the rest.
pub fn run(kind: &'static str, hooks: &[Hook], state_json: &[u8]) -> Result<(), HookError> {
    for (index, h) in hooks.iter().enumerate() {
        let fail = |what: String| HookError {
            kind,
            index,
            path: h.path().display().to_string(),
            what,
        };
        let args = h.args().clone().unwrap_or_default();
        let mut cmd = Command::new(h.path());
        if let Some(a0) = args.first() {
            cmd.arg0(a0);
        }
        cmd.args(args.iter().skip(1))
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::null());
        for e in h.env().iter().flatten() {
            if let Some((k, v)) = e.split_once('=') {
                cmd.env(k, v);
            }
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| fail(format!("could not start: {e}")))?;
        if let Some(mut stdin) = child.stdin.take() {
            // A hook that does not read its stdin must not fail the container.
            let _ = stdin.write_all(state_json);
        }
        let deadline = h
            .timeout()
            .filter(|&t| t > 0)
            .map(|t| Instant::now() + Duration::from_secs(t as u64));
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) => {}
                Err(e) => return Err(fail(format!("could not be waited for: {e}"))),
            }
            if deadline.is_some_and(|d| Instant::now() > d) {
                let _ = child.kill();
                let _ = child.wait();
                return Err(fail(format!(
                    "timed out after {} s",
                    h.timeout().unwrap_or(0)
                )));
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        if !status.success() {
            return Err(fail(format!("failed: {status}")));
        }
    }
    Ok(())
}
