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
        // 0 lifts a limit, so a fraction of a byte must not quietly become 0.
        if v > 0.0 && bytes < 1.0 {
            return Err(ParseError::new(
                "size",
                s,
                "that is less than one byte, and 0 would mean no limit; give a unit (0.5G is 512M), or 0 to lift the limit",
            ));
        }
        Ok(bytes as u64)
    } else {
        let v: u64 = num.parse().map_err(|_| err())?;
        v.checked_mul(mult).ok_or_else(err)
    }
}

/// The smallest memory limit taken (other than 0, no limit): below it no interpreter starts,
/// and a bare number is bytes, so `512` is almost always a slip for `512M`.
pub const MIN_MEMORY: u64 = 1 << 20;

/// Parses a memory limit: a size as [`parse_size`] reads it, 0 (no limit) or at least
/// [`MIN_MEMORY`].
pub fn parse_memory(s: &str) -> Result<u64, ParseError> {
    let b = parse_size(s).map_err(|mut e| {
        e.what = "memory limit".into();
        e
    })?;
    if b != 0 && b < MIN_MEMORY {
        let t = s.trim();
        let hint = if t.chars().all(|c| c.is_ascii_digit() || c == '.') {
            format!(
                "a bare number is bytes, and a memory limit below 1 MiB would stop any program at its start; did you mean {t}M?"
            )
        } else {
            "a memory limit below 1 MiB would stop any program at its start; give at least 1M, or 0 for no limit".to_string()
        };
        return Err(ParseError::new("memory limit", s, &hint));
    }
    Ok(b)
}

/// The longest duration taken: 100 years (of 365.25 days). Longer ones would overflow the
/// clock arithmetic of a deadline (`Instant + Duration`), and no limit needs more.
pub const MAX_DURATION: Duration = Duration::from_secs(100 * 36_525 * 864);

/// Parses a duration: `30` (seconds), `1.5`, `500ms`, `30s`, `2m`, `1h`; at most
/// [`MAX_DURATION`], and a value above 0 never rounds down to 0 (which lifts a limit).
pub fn parse_duration(s: &str) -> Result<Duration, ParseError> {
    let err = || {
        ParseError::new(
            "duration",
            s,
            "use seconds or a unit: 30, 1.5s, 500ms, 2m, 1h, 1m30s",
        )
    };
    let t = s.trim();
    // Number-unit pairs, summed (`1m30s`, `1h30m`, as Go's durations); a bare number alone
    // is seconds.
    let mut rest = t;
    let mut secs = 0.0;
    let mut v = 0.0;
    let mut parts = 0;
    while !rest.is_empty() {
        let split = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, after) = rest.split_at(split);
        let after = after.trim_start();
        let unit_len = after
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let n: f64 = num.parse().map_err(|_| err())?;
        secs += match unit {
            "" if parts == 0 && next.is_empty() => n,
            "s" | "sec" => n,
            "ms" => n / 1000.0,
            "us" => n / 1_000_000.0,
            "m" | "min" => n * 60.0,
            "h" => n * 3600.0,
            _ => return Err(err()),
        };
        v += n;
        parts += 1;
        rest = next.trim_start();
    }
    if parts == 0 {
        return Err(err());
    }
    if !(secs.is_finite() && secs >= 0.0) {
        return Err(err());
    }
    if secs > MAX_DURATION.as_secs_f64() {
        return Err(ParseError::new(
            "duration",
            s,
            "that is longer than 100 years, the longest duration cordon takes; give a shorter one",
        ));
    }
    let d = Duration::try_from_secs_f64(secs).map_err(|_| err())?;
    if v > 0.0 && d.is_zero() {
        return Err(ParseError::new(
            "duration",
            s,
            "that is less than a nanosecond, and 0 would mean no limit; give a longer one",
        ));
    }
    Ok(d)
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
        // A fraction of a byte is not 0 (which lifts a limit).
        assert_eq!(parse_size("0").unwrap(), 0);
        assert_eq!(parse_size("0.0").unwrap(), 0);
        assert_eq!(parse_size("1.5").unwrap(), 1);
        let e = parse_size("0.4").unwrap_err();
        assert!(e.hint.contains("less than one byte"), "{e}");
        assert!(parse_size("0.0001k").is_err());
    }

    #[test]
    fn memory_limits_below_a_mebibyte_are_refused() {
        assert_eq!(parse_memory("0").unwrap(), 0);
        assert_eq!(parse_memory("1M").unwrap(), 1 << 20);
        assert_eq!(parse_memory("1048576").unwrap(), 1 << 20);
        let e = parse_memory("512").unwrap_err();
        assert!(e.hint.contains("did you mean 512M?"), "{e}");
        let e = parse_memory("512k").unwrap_err();
        assert!(e.hint.contains("at least 1M"), "{e}");
        assert!(parse_memory("0.4").is_err());
        assert!(parse_memory("0.4M").is_err());
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
        // Compound, as Go writes them; a bare number only alone.
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1h 30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(
            parse_duration("1s500ms").unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(parse_duration("30 s").unwrap(), Duration::from_secs(30));
        assert!(parse_duration("1m30").is_err());
        assert!(parse_duration("30 1m").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("m").is_err());
        assert!(parse_duration("1m-5s").is_err());
    }

    #[test]
    fn durations_are_capped_and_never_round_to_zero() {
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("100y").ok(), None);
        // Would overflow `Instant + Duration` once the clone is done.
        for huge in ["10000000000000000000", "3155760001", "1e400", "52596001m"] {
            let e = parse_duration(huge).unwrap_err();
            assert!(
                e.hint.contains("100 years") || e.hint.contains("use seconds"),
                "{huge}: {e}"
            );
        }
        assert!(
            parse_duration("10000000000000000000")
                .unwrap_err()
                .hint
                .contains("100 years")
        );
        assert_eq!(parse_duration("3155760000").unwrap(), MAX_DURATION);
        assert_eq!(
            parse_duration(&format!("{}ms", u64::MAX)).unwrap_err().hint,
            parse_duration("10000000000000000000").unwrap_err().hint
        );
        let e = parse_duration("0.0000000001").unwrap_err();
        assert!(e.hint.contains("less than a nanosecond"), "{e}");
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
