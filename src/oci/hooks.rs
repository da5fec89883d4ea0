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

/// Runs every hook of `hooks` in order, whatever the others did (poststart, poststop: the
/// runtime spec has a failure there logged as a warning, and the rest still run).
pub fn run_each(kind: &'static str, hooks: &[Hook], state_json: &[u8]) -> Vec<HookError> {
    let mut errors = Vec::new();
    for (i, h) in hooks.iter().enumerate() {
        if let Err(mut e) = run(kind, std::slice::from_ref(h), state_json) {
            e.index = i;
            errors.push(e);
        }
    }
    errors
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
        // config.json's hooks were checked when it was loaded; refused here too, never
        // dropped or run without a limit.
        for e in h.env().iter().flatten() {
            let (k, v) = crate::spec::oci::env_entry(e).map_err(|why| {
                fail(format!(
                    "was not run: an entry of its env is invalid: {why}"
                ))
            })?;
            cmd.env(k, v);
        }
        if let Some(t) = h.timeout().filter(|&t| t <= 0) {
            return Err(fail(format!(
                "was not run: its timeout {t} is not a number of seconds above 0"
            )));
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| fail(format!("could not start: {e}")))?;
        // The state goes in without blocking, a pipe's worth at a time, so a hook that
        // never reads a large state still meets its timeout. A hook that does not read its
        // stdin at all must not fail the container.
        let mut stdin = child.stdin.take();
        if let Some(s) = &stdin {
            let fl = nix::fcntl::fcntl(s, nix::fcntl::FcntlArg::F_GETFL)
                .map(nix::fcntl::OFlag::from_bits_truncate)
                .unwrap_or(nix::fcntl::OFlag::empty());
            let _ = nix::fcntl::fcntl(
                s,
                nix::fcntl::FcntlArg::F_SETFL(fl | nix::fcntl::OFlag::O_NONBLOCK),
            );
        }
        let mut pending = state_json;
        let deadline = h
            .timeout()
            .map(|t| Instant::now() + Duration::from_secs(t.unsigned_abs()));
        let status = loop {
            if let Some(s) = stdin.as_mut() {
                match s.write(pending) {
                    Ok(n) => pending = &pending[n..],
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => pending = &[],
                }
                if pending.is_empty() {
                    stdin = None;
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(script: &str, timeout: Option<i64>) -> Hook {
        let mut h = Hook::default();
        h.set_path("/bin/sh".into());
        h.set_args(Some(vec!["sh".into(), "-c".into(), script.into()]));
        h.set_timeout(timeout);
        h
    }

    #[test]
    fn a_failing_poststop_hook_does_not_stop_the_next() {
        let d = tempfile::tempdir().unwrap();
        let mark = d.path().join("ran");
        let hooks = [
            hook("exit 3", None),
            hook(&format!("cat > {}", mark.display()), None),
        ];
        let errs = run_each("poststop", &hooks, b"{\"id\":\"x\"}");
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].index, 0);
        assert_eq!(std::fs::read_to_string(&mark).unwrap(), "{\"id\":\"x\"}");
        // `run` (the hooks before start) stops at the first failure.
        std::fs::remove_file(&mark).unwrap();
        assert!(run("createRuntime", &hooks, b"{}").is_err());
        assert!(!mark.exists());
    }

    #[test]
    fn a_timeout_below_one_second_or_an_env_entry_without_equals_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let mark = d.path().join("ran");
        let script = format!("touch {}", mark.display());
        for t in [0, -1] {
            let e = run("prestart", &[hook(&script, Some(t))], b"{}").unwrap_err();
            assert!(e.what.contains("timeout"), "{e}");
        }
        let mut h = hook(&script, None);
        h.set_env(Some(vec!["A=1".into(), "NOEQUALS".into()]));
        let e = run("prestart", &[h], b"{}").unwrap_err();
        assert!(e.what.contains("NOEQUALS"), "{e}");
        assert!(!mark.exists(), "a refused hook ran");
    }

    #[test]
    fn the_timeout_holds_while_the_state_is_not_read() {
        // 1 MiB of state, a hook that never reads it nor exits: killed at its timeout.
        let big = vec![b' '; 1 << 20];
        let t = Instant::now();
        let e = run("prestart", &[hook("sleep 30", Some(1))], &big).unwrap_err();
        assert!(e.what.contains("timed out"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    }
}
