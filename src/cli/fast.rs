//! The fast path of `cordon exec`'s command line.
//!
//! clap builds every argument of `exec` before it parses one, which took about 0.2 ms of each
//! sandbox's start (an interleaved A/B of `cordon exec -- /bin/true`: 0.26 ms). This parser
//! reads the ordinary forms of the same options — `--name VALUE`, `--name=VALUE`, `-e VALUE`,
//! the flags, then the command, with or without `--` before it — into the same [`ExecArgs`],
//! with the same value parsers and defaults. On anything else it gives up (`None`) and clap
//! parses the whole command line, with its help and its messages: an unknown, repeated or
//! misspelt option, a value that fails to parse or starts with `-`, a missing command, a
//! command that starts with `-` or is empty, non-UTF-8 text.
//! A test compares both parsers on thousands of command lines.

use super::{
    BackendArg, DegradeArg, EXEC_COLLECT_FILES, EXEC_COLLECT_SIZE, EXEC_FILE_SIZE, EXEC_OPEN_FILES,
    EXEC_OUTPUT_LIMIT, EXEC_PIDS, EXEC_ROOTFS, EXEC_TIMEOUT, EXEC_TMP_SIZE, EXEC_WORKSPACE_INODES,
    EXEC_WORKSPACE_SIZE, ExecArgs, LIMITS_BACKEND, NetArgs,
};
use crate::spec;
use clap::ValueEnum;
use std::ffi::OsString;
use std::path::PathBuf;

/// Options that may be given more than once (clap appends them).
const REPEATABLE: &[&str] = &["env", "file", "ro-bind", "allow-degraded", "net-resolve"];

/// Every long option this parser reads (a test checks they are exactly clap's).
#[cfg(test)]
const KNOWN: &[&str] = &[
    "json",
    "stream",
    "timeout",
    "cpu-time",
    "memory",
    "cpus",
    "pids",
    "output-limit",
    "file-size",
    "open-files",
    "workspace-size",
    "workspace-inodes",
    "tmp-size",
    "collect-files",
    "collect-size",
    "env",
    "stdin",
    "file",
    "ro-bind",
    "output-dir",
    "rootfs",
    "allow-degraded",
    "limits-backend",
    "hostname",
    "net",
    "net-resolve",
    "net-log",
    "output-encoding",
];

/// The options of `exec` that set a limit or the isolation: one of these meant for cordon
/// but written after the command would silently leave the sandbox looser than asked. The
/// others (`--json`, `--env`/`-e`, `--file`, `--stdin`...) are common options of programs
/// too (`node -e`, `grep -e`, `tool --json`), and a warning for them would be noise.
const LIMIT_OPTIONS: &[&str] = &[
    "timeout",
    "cpu-time",
    "memory",
    "cpus",
    "pids",
    "output-limit",
    "file-size",
    "open-files",
    "workspace-size",
    "workspace-inodes",
    "tmp-size",
    "collect-files",
    "collect-size",
    "ro-bind",
    "rootfs",
    "allow-degraded",
    "limits-backend",
    "net",
    "net-resolve",
];

/// The arguments of `command` that name one of `exec`'s limit or isolation options
/// ([`LIMIT_OPTIONS`]: `--memory`, `--timeout=5s`), when `args` (those after `exec`) hold no
/// `--`: the command started before them, so they are the command's, which its author may
/// not have meant (`cordon exec python3 x.py --memory 64M` runs under the default memory
/// limit). Empty when `--` is there: the line says where the command starts.
pub(super) fn options_after_command(args: &[OsString], command: &[String]) -> Vec<String> {
    if args.iter().any(|a| a == "--") {
        return Vec::new();
    }
    command
        .iter()
        .skip(1)
        .filter(|a| {
            a.strip_prefix("--")
                .map(|n| n.split_once('=').map_or(n, |(n, _)| n))
                .is_some_and(|n| LIMIT_OPTIONS.contains(&n))
        })
        .cloned()
        .collect()
}

/// `exec`'s arguments (those after `exec`), or `None` for clap to parse.
pub(super) fn exec(args: &[OsString]) -> Option<ExecArgs> {
    let mut a = defaults()?;
    let mut it = args.iter();
    let mut seen: Vec<&str> = Vec::new();
    loop {
        let arg = it.next()?.to_str()?;
        if arg == "--" {
            let command = it
                .map(|s| s.to_str().map(String::from))
                .collect::<Option<Vec<String>>>()?;
            if command.is_empty() {
                return None;
            }
            a.command = command;
            return collects_only_with_output_dir(a, &seen);
        }
        // The command without `--` before it: from its first word on, everything is its.
        if !arg.is_empty() && !arg.starts_with('-') {
            let rest = it
                .map(|s| s.to_str().map(String::from))
                .collect::<Option<Vec<String>>>()?;
            a.command = std::iter::once(arg.to_string()).chain(rest).collect();
            return collects_only_with_output_dir(a, &seen);
        }
        let (name, inline) = match arg.strip_prefix("--") {
            Some(long) => match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            },
            None if arg == "-e" => ("env", None),
            None => return None,
        };
        if !REPEATABLE.contains(&name) {
            if seen.contains(&name) {
                return None;
            }
            seen.push(name);
        }
        if matches!(name, "json" | "stream" | "net-log") {
            if inline.is_some() {
                return None;
            }
            match name {
                "json" => a.json = true,
                "stream" => a.stream = true,
                _ => a.net.net_log = true,
            }
            continue;
        }
        let value = match inline {
            Some(v) => v,
            None => it.next()?.to_str()?,
        };
        if value.is_empty() || value.starts_with('-') {
            return None;
        }
        match name {
            "timeout" => a.timeout = spec::parse_duration(value).ok()?,
            "cpu-time" => a.cpu_time = Some(spec::parse_duration(value).ok()?),
            "memory" => a.memory = Some(spec::parse_memory(value).ok()?),
            "cpus" => a.cpus = Some(value.parse().ok()?),
            "pids" => a.pids = value.parse().ok()?,
            "output-limit" => a.output_limit = spec::parse_size(value).ok()?,
            "file-size" => a.file_size = spec::parse_size(value).ok()?,
            "open-files" => a.open_files = value.parse().ok()?,
            "workspace-size" => a.workspace_size = spec::parse_size(value).ok()?,
            "workspace-inodes" => a.workspace_inodes = value.parse().ok()?,
            "tmp-size" => a.tmp_size = spec::parse_size(value).ok()?,
            "collect-files" => a.collect_files = spec::parse_collect_files(value).ok()?,
            "collect-size" => a.collect_size = spec::parse_collect_size(value).ok()?,
            "env" => a.env.push(spec::parse_env_pair(value).ok()?),
            "stdin" => a.stdin = Some(PathBuf::from(value)),
            "file" => a.files.push(value.to_string()),
            "ro-bind" => a.ro_binds.push(value.to_string()),
            "output-dir" => a.output_dir = Some(PathBuf::from(value)),
            "rootfs" => a.rootfs = value.to_string(),
            "allow-degraded" => {
                for v in value.split(',') {
                    a.allow_degraded.push(DegradeArg::from_str(v, false).ok()?);
                }
            }
            "limits-backend" => a.limits_backend = BackendArg::from_str(value, false).ok()?,
            "hostname" => a.hostname = value.to_string(),
            "net" => a.net.net = Some(crate::net::parse_network(value).ok()?),
            "net-resolve" => a.net.resolve.push(crate::net::parse_override(value).ok()?),
            "output-encoding" => {
                a.output_encoding =
                    Some(crate::outcome::OutputEncoding::from_str(value, false).ok()?)
            }
            _ => return None,
        }
    }
}

/// The collection caps without --output-dir are clap's error to give (`requires`).
fn collects_only_with_output_dir(a: ExecArgs, seen: &[&str]) -> Option<ExecArgs> {
    let caps = seen
        .iter()
        .any(|n| matches!(*n, "collect-files" | "collect-size"));
    (a.output_dir.is_some() || !caps).then_some(a)
}

/// `exec`'s arguments when none is given: clap's defaults, from the same constants.
fn defaults() -> Option<ExecArgs> {
    Some(ExecArgs {
        json: false,
        output_encoding: None,
        stream: false,
        timeout: spec::parse_duration(EXEC_TIMEOUT).ok()?,
        cpu_time: None,
        memory: None,
        cpus: None,
        pids: EXEC_PIDS,
        output_limit: spec::parse_size(EXEC_OUTPUT_LIMIT).ok()?,
        file_size: spec::parse_size(EXEC_FILE_SIZE).ok()?,
        open_files: EXEC_OPEN_FILES,
        workspace_size: spec::parse_size(EXEC_WORKSPACE_SIZE).ok()?,
        workspace_inodes: EXEC_WORKSPACE_INODES,
        tmp_size: spec::parse_size(EXEC_TMP_SIZE).ok()?,
        collect_files: EXEC_COLLECT_FILES,
        collect_size: spec::parse_collect_size(EXEC_COLLECT_SIZE).ok()?,
        env: Vec::new(),
        stdin: None,
        files: Vec::new(),
        ro_binds: Vec::new(),
        output_dir: None,
        rootfs: EXEC_ROOTFS.to_string(),
        allow_degraded: Vec::new(),
        limits_backend: BackendArg::from_str(LIMITS_BACKEND, false).ok()?,
        hostname: spec::DEFAULT_HOSTNAME.to_string(),
        net: NetArgs::default(),
        command: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::{ExecCommand, OneCli};
    use clap::Parser;
    use std::ffi::OsString;

    /// The fast path's result, or `None`; clap's result as text (its arguments, or its error).
    fn both<T: AsRef<str>>(tokens: &[T]) -> (Option<String>, Result<String, String>) {
        let args: Vec<OsString> = tokens.iter().map(|t| OsString::from(t.as_ref())).collect();
        let fast = super::exec(&args).map(|a| format!("{a:?}"));
        let argv = ["cordon", "exec"]
            .into_iter()
            .chain(tokens.iter().map(AsRef::as_ref));
        let clap = OneCli::<ExecCommand>::try_parse_from(argv)
            .map(|c| {
                let ExecCommand::Exec(a) = c.command;
                format!("{a:?}")
            })
            .map_err(|e| e.to_string());
        (fast, clap)
    }

    #[test]
    fn ordinary_command_lines_take_the_fast_path_and_parse_as_clap_does() {
        let lines: &[&[&str]] = &[
            &["--", "/bin/true"],
            &["--json", "--", "python3", "-c", "print(1)"],
            &["--json", "--output-encoding", "base64", "--", "cat"],
            &["--output-encoding=utf8", "--json", "cat"],
            &[
                "--timeout",
                "2s",
                "--memory",
                "64M",
                "--cpus",
                "0.5",
                "--pids",
                "8",
                "--",
                "sh",
                "-c",
                "echo hi",
            ],
            &[
                "--timeout=1.5s",
                "--cpu-time=1",
                "--output-limit=1k",
                "--file-size=0",
                "--open-files=64",
                "--workspace-size=1M",
                "--workspace-inodes=10",
                "--tmp-size=2M",
                "--collect-files=5000",
                "--collect-size=100M",
                "--output-dir=/tmp/out",
                "--",
                "true",
            ],
            &["-e", "A=1", "--env", "B=2", "--env=C=3", "--", "env"],
            &[
                "--file",
                "in.csv=/etc/hostname",
                "--ro-bind",
                "/usr/share:/data",
                "--",
                "ls",
            ],
            &[
                "--stdin",
                "/etc/hostname",
                "--output-dir",
                "/tmp/out",
                "--",
                "cat",
            ],
            &["--rootfs", "/srv/rootfs", "--hostname", "box", "--", "true"],
            &[
                "--allow-degraded",
                "landlock,overlay",
                "--allow-degraded=socket-memory",
                "--",
                "true",
            ],
            &["--limits-backend", "rlimit", "--", "true"],
            &[
                "--net",
                "allow=example.org",
                "--net-resolve",
                "example.org=192.0.2.1",
                "--net-log",
                "--",
                "curl",
            ],
            &["--net=host", "--", "true"],
            &["--", "--json", "--", "-e"],
            // The command without `--`: from its first word on, options and `--` are its.
            &["python3", "-c", "print(1)"],
            &["--json", "sh", "-c", "echo --json", "--timeout", "1s"],
            &["--memory", "64M", "true", "--", "x"],
            &["env", "-e", "A=1"],
        ];
        for tokens in lines {
            let (fast, clap) = both(tokens);
            let clap = clap.unwrap_or_else(|e| panic!("{tokens:?}: clap refused it: {e}"));
            assert_eq!(fast.as_ref(), Some(&clap), "{tokens:?}");
        }
    }

    /// Random command lines of valid and invalid parts: wherever the fast path answers, clap
    /// accepts the line and reads the same arguments from it.
    #[test]
    fn the_fast_path_agrees_with_clap_or_leaves_the_line_to_it() {
        let dur: &[&str] = &[
            "30", "1.5s", "500ms", "2m", "0", "", "x", "-1", "+5", "1e3", " 5",
        ];
        let size: &[&str] = &[
            "64M",
            "1G",
            "0",
            "512k",
            "10",
            "x",
            "-1",
            "1.5M",
            "+5",
            "18446744073709551615",
            "99999999999999999999",
        ];
        let count: &[&str] = &[
            "64",
            "0",
            "+5",
            "05",
            "-1",
            "x",
            " 5",
            "18446744073709551616",
        ];
        let options: &[(&str, &[&str])] = &[
            ("timeout", dur),
            ("cpu-time", dur),
            ("memory", size),
            ("output-limit", size),
            ("file-size", size),
            ("workspace-size", size),
            ("tmp-size", size),
            (
                "cpus",
                &["1", "0.5", "0", "inf", "NaN", "1e3", "-1", "x", "+2", ".5"],
            ),
            ("pids", count),
            ("open-files", count),
            (
                "collect-files",
                &["3", "1500", "100000", "100001", "0", "+5", "-1", "x", "1k"],
            ),
            (
                "collect-size",
                &["1", "100M", "1G", "1.5G", "0", "0.4", "x", "-1", "1025M"],
            ),
            ("workspace-inodes", count),
            (
                "env",
                &[
                    "A=1",
                    "A=",
                    "=1",
                    "A",
                    "A=b=c",
                    "-x=1",
                    "PATH=/bin",
                    "A B=1",
                ],
            ),
            ("stdin", &["/etc/hostname", "rel", "-", ""]),
            ("output-dir", &["/tmp/out", "-o"]),
            ("file", &["a=/etc/hostname", "x", "="]),
            ("ro-bind", &["/usr/share:/data", "x"]),
            ("rootfs", &["host", "/srv/rootfs", "Host"]),
            (
                "allow-degraded",
                &[
                    "landlock",
                    "overlay,landlock",
                    "socket-memory",
                    "Landlock",
                    "landlock,",
                    "bogus",
                    "",
                ],
            ),
            (
                "limits-backend",
                &["auto", "cgroup-v2", "cgroup-v1", "rlimit", "Auto", "v3"],
            ),
            ("hostname", &["box", "", "-h", "a b"]),
            (
                "net",
                &[
                    "none",
                    "host",
                    "allow=example.org",
                    "allow=",
                    "bogus",
                    "allow=*.example.org:443",
                ],
            ),
            ("net-resolve", &["example.org=192.0.2.1", "x", "a=::1"]),
            ("json", &[]),
            ("stream", &[]),
            ("net-log", &[]),
            ("output-encoding", &["base64", "utf8", "Base64", "hex", ""]),
        ];
        let odd: &[&str] = &[
            "-h", "--help", "--bogus", "--json=1", "word", "--tim", "-V", "-", "-eA=1", "-e=A=1",
        ];
        let commands: &[&[&str]] = &[
            &["true"],
            &["sh", "-c", "echo hi"],
            &["--json"],
            &["--", "x"],
            &[],
        ];
        let mut rand = crate::test_rand::xorshift(0x9e37_79b9_7f4a_7c15);
        let (mut fast_taken, mut total) = (0, 0);
        for _ in 0..6000 {
            let mut tokens: Vec<String> = Vec::new();
            for _ in 0..rand(5) {
                if rand(20) == 0 {
                    tokens.push(odd[rand(odd.len())].into());
                    continue;
                }
                let (name, values) = options[rand(options.len())];
                if values.is_empty() {
                    tokens.push(format!("--{name}"));
                    continue;
                }
                let value = values[rand(values.len())];
                match (rand(3), name) {
                    (0, _) => tokens.push(format!("--{name}={value}")),
                    (1, "env") => tokens.extend(["-e".into(), value.into()]),
                    _ => tokens.extend([format!("--{name}"), value.into()]),
                }
            }
            if rand(12) != 0 {
                tokens.push("--".into());
            }
            tokens.extend(commands[rand(commands.len())].iter().map(|c| c.to_string()));
            let (fast, clap) = both(&tokens);
            total += 1;
            if let Some(f) = fast {
                fast_taken += 1;
                assert_eq!(Ok(f), clap, "{tokens:?}");
            }
        }
        // The generator must reach the fast path often, and leave clap real work too.
        assert!(
            fast_taken * 4 > total,
            "fast path taken {fast_taken} times of {total}"
        );
        assert!(
            fast_taken * 10 < total * 9,
            "fast path taken {fast_taken} times of {total}"
        );
    }

    /// The fast path knows exactly clap's options of `exec`, and none of them has a setting
    /// it does not model (a requirement, a conflict, a group; values from the environment
    /// need clap's `env` feature, which cordon does not enable): an option added to
    /// ExecArgs, or such a setting, must be looked at here too.
    #[test]
    fn the_fast_path_knows_exactly_claps_options() {
        use clap::CommandFactory;
        let cli = OneCli::<ExecCommand>::command();
        let exec = cli.find_subcommand("exec").unwrap();
        let mut longs: Vec<&str> = Vec::new();
        for arg in exec.get_arguments() {
            let id = arg.get_id().as_str();
            if arg.is_positional() {
                assert_eq!(id, "command");
                continue;
            }
            if matches!(id, "help") {
                continue;
            }
            let long = arg
                .get_long()
                .unwrap_or_else(|| panic!("{id} has no long name"));
            longs.push(long);
            assert!(!arg.is_required_set(), "--{long} is required");
            assert!(
                exec.get_arg_conflicts_with(arg).is_empty(),
                "--{long} conflicts"
            );
            let short = arg.get_short();
            assert!(
                short.is_none() || (long == "env" && short == Some('e')),
                "--{long}: -{short:?}"
            );
            let repeatable = matches!(arg.get_action(), clap::ArgAction::Append);
            assert_eq!(
                repeatable,
                super::REPEATABLE.contains(&long),
                "--{long} repeatable?"
            );
            assert_eq!(
                !arg.get_action().takes_values(),
                matches!(long, "json" | "stream" | "net-log"),
                "--{long}: flag?"
            );
        }
        // clap's derive makes one group per struct (ExecArgs, NetArgs): optional, any number
        // of its members. Any other kind constrains lines the fast path would accept.
        for group in exec.get_groups() {
            assert!(
                !group.is_required_set() && group.clone().is_multiple(),
                "exec has an argument group the fast path does not model: {}",
                group.get_id()
            );
        }
        longs.sort();
        let mut known = super::KNOWN.to_vec();
        known.sort();
        assert_eq!(longs, known);
    }

    #[test]
    fn options_after_the_command_are_named_unless_a_double_dash_says_where_it_starts() {
        let os = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let cmd = s(&[
            "sh",
            "-c",
            "x",
            "--memory",
            "64M",
            "--timeout=1s",
            "-e",
            "--mem",
            "--",
        ]);
        let args = os(&[
            "--json",
            "sh",
            "-c",
            "x",
            "--memory",
            "64M",
            "--timeout=1s",
            "-e",
            "--mem",
        ]);
        assert_eq!(
            super::options_after_command(&args, &cmd[..8]),
            ["--memory", "--timeout=1s"]
        );
        // Options programs have too are not warned about: `node -e`, `tool --json`.
        let node = s(&["node", "-e", "1", "--json", "--env=x"]);
        assert!(super::options_after_command(&os(&["node", "-e", "1"]), &node).is_empty());
        // Every option warned about is one of exec's.
        assert!(
            super::LIMIT_OPTIONS
                .iter()
                .all(|o| super::KNOWN.contains(o))
        );
        let with_dash = os(&["--json", "--", "sh", "-c", "x", "--memory", "64M"]);
        assert!(super::options_after_command(&with_dash, &cmd).is_empty());
        // The command's own name is never taken for an option.
        assert!(super::options_after_command(&os(&["env"]), &s(&["env"])).is_empty());
    }

    #[test]
    fn what_is_not_utf8_is_left_to_clap() {
        use std::os::unix::ffi::OsStringExt;
        let odd = OsString::from_vec(vec![b'a', 0xff]);
        for args in [
            vec![OsString::from("--"), odd.clone()],
            vec![
                OsString::from("--stdin"),
                odd,
                OsString::from("--"),
                OsString::from("true"),
            ],
        ] {
            assert!(super::exec(&args).is_none(), "{args:?}");
        }
    }
}
