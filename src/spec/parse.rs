//! Parsing of the human-written values that flags and files carry: sizes, durations, env pairs.

use std::time::Duration;

/// A value that could not be parsed: which option, what was given, what to give instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} `{given}`: {hint}")]
pub struct ParseError {
    pub what: String,
    pub given: String,
    pub hint: String,
}

impl ParseError {
    pub fn new(what: &str, given: &str, hint: &str) -> Self {
        ParseError {
            what: what.into(),
            given: given.into(),
            hint: hint.into(),
        }
    }
}

/// Parses a byte size: `1024`, `64k`, `512M`, `512MiB`, `1.5G`, `2GB`. Units are binary
/// (k = 1024) whether or not the `i` is written, as `ulimit`, Docker and podman read them.
pub fn parse_size(s: &str) -> Result<u64, ParseError> {
    let err = || {
        ParseError::new(
            "size",
            s,
            "use a number with an optional unit: 4096, 64K, 512M, 2G",
        )
    };
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(err());
    }
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return Err(err()),
    };
    if num.contains('.') {
        let v: f64 = num.parse().map_err(|_| err())?;
        let bytes = v * mult as f64;
        if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
            return Err(err());
        }
        Ok(bytes as u64)
    } else {
        let v: u64 = num.parse().map_err(|_| err())?;
        v.checked_mul(mult).ok_or_else(err)
    }
}

/// Parses a duration: `30` (seconds), `1.5`, `500ms`, `30s`, `2m`, `1h`.
pub fn parse_duration(s: &str) -> Result<Duration, ParseError> {
    let err = || {
        ParseError::new(
            "duration",
            s,
            "use seconds or a unit: 30, 1.5s, 500ms, 2m, 1h",
        )
    };
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| err())?;
    let secs = match unit.trim() {
        "" | "s" | "sec" => v,
        "ms" => v / 1000.0,
        "us" => v / 1_000_000.0,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => return Err(err()),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| err())
}

/// Parses `KEY=VALUE` for `--env`.
pub fn parse_env_pair(s: &str) -> Result<(String, String), ParseError> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| ParseError::new("--env", s, "write it as KEY=VALUE"))?;
    check_env_key(k)?;
    Ok((k.to_string(), v.to_string()))
}

pub(crate) fn check_env_key(k: &str) -> Result<(), ParseError> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-';
    if k.is_empty() || !k.chars().all(ok_char) || k.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(ParseError::new(
            "--env",
            k,
            "a name is letters, digits, `_`, `.` and `-`, not starting with a digit",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1024").unwrap(), 1024);
        assert_eq!(parse_size("64k").unwrap(), 64 * 1024);
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert_eq!(parse_size("512MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size("2 GB").unwrap(), 2 << 30);
        assert_eq!(parse_size("1.5g").unwrap(), 3 << 29);
        assert!(parse_size("").is_err());
        assert!(parse_size("M").is_err());
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("-5").is_err());
        assert!(parse_size("99999999999999999999T").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("5 fortnights").is_err());
    }

    #[test]
    fn env_pairs() {
        assert_eq!(parse_env_pair("A=b=c").unwrap(), ("A".into(), "b=c".into()));
        assert_eq!(parse_env_pair("A=").unwrap(), ("A".into(), "".into()));
        assert!(parse_env_pair("A").is_err());
        assert!(parse_env_pair("=x").is_err());
        assert!(parse_env_pair("A B=1").is_err());
        assert!(parse_env_pair("A\nB=1").is_err());
        assert!(parse_env_pair("1A=1").is_err());
        assert!(parse_env_pair("my.var-x=1").is_ok());
    }
}
