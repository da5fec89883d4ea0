//! The JSON request: one object in, one result object out (`cordon run --request`), or one
//! per line (`--requests FILE.jsonl`). Field names are camelCase; an unknown field is an error
//! that names it.

use crate::profile::LimitOverrides;
use crate::run::{RunError, RunRequest};
use crate::spec::{InputFile, LimitNaming, StdinSource, check_relative_path};
use base64::Engine;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A file in a request: plain UTF-8 text, or `{content, encoding, executable}`; also the
/// request's `stdin` (without `executable`). Read by [`files`] and [`stdin`], whose errors name
/// the field and the key at fault (`files.NAME.encoding`, `stdin.encoding`).
#[derive(Debug, Clone)]
pub enum JsonFile {
    Text(String),
    Encoded(EncodedFile),
}

#[derive(Debug, Clone)]
pub struct EncodedFile {
    pub content: String,
    /// Default `utf8`.
    pub encoding: Encoding,
    /// Make the file executable (default false).
    pub executable: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Encoding {
    #[default]
    Utf8,
    Base64,
}

/// What a file object holds, for errors.
const FILE_OBJECT: &str =
    r#"{"content": "...", "encoding": "utf8" or "base64", "executable": true or false}"#;
/// What the `stdin` object holds, for errors.
const STDIN_OBJECT: &str = r#"{"content": "...", "encoding": "utf8" or "base64"}"#;

/// `files`: `{"NAME": FILE, ...}`, each FILE read with its name for errors (serde's
/// untagged enum said only "data did not match any variant").
fn files<'de, D: serde::Deserializer<'de>>(d: D) -> Result<BTreeMap<String, JsonFile>, D::Error> {
    struct Files;
    impl<'de> serde::de::Visitor<'de> for Files {
        type Value = BTreeMap<String, JsonFile>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("`files` as an object: {\"NAME\": \"text\" or {\"content\": ...}}")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut m: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some(name) = m.next_key::<String>()? {
                let file = m.next_value_seed(InputSeed {
                    field: &format!("files.{name}"),
                    file: true,
                })?;
                // Not "the last one wins": a validator reading the first would have checked
                // other code than what runs.
                if out.contains_key(&name) {
                    return Err(serde::de::Error::custom(format!(
                        "files.{name} is given twice; give each file once"
                    )));
                }
                out.insert(name, file);
            }
            Ok(out)
        }
    }
    d.deserialize_map(Files)
}

/// `stdin`: the program's input as text, or `{content, encoding}` as a file is given (base64
/// for bytes that are not UTF-8). `null` is no input, as leaving it out.
fn stdin<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<JsonFile>, D::Error> {
    struct Stdin;
    impl<'de> serde::de::Visitor<'de> for Stdin {
        type Value = Option<JsonFile>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "`stdin` as a string, or {STDIN_OBJECT}")
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            serde::de::DeserializeSeed::deserialize(
                InputSeed {
                    field: "stdin",
                    file: false,
                },
                d,
            )
            .map(Some)
        }
    }
    d.deserialize_option(Stdin)
}

/// `outputEncoding`: `"utf8"` or `"base64"`, named in its error (serde's says only "unknown
/// variant").
fn output_encoding<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<crate::outcome::OutputEncoding>, D::Error> {
    use crate::outcome::OutputEncoding;
    let v = serde_json::Value::deserialize(d)?;
    match v.as_str() {
        Some("utf8") => Ok(Some(OutputEncoding::Utf8)),
        Some("base64") => Ok(Some(OutputEncoding::Base64)),
        _ if v.is_null() => Ok(None),
        _ => Err(serde::de::Error::custom(format!(
            "outputEncoding is {v}: give \"utf8\" (the default: text, bytes that are not UTF-8 replaced) or \"base64\" (the exact bytes)"
        ))),
    }
}

/// The longest `id` a request may carry, in bytes.
pub const MAX_ID_BYTES: usize = 256;

/// `id`: a string of at most [`MAX_ID_BYTES`] bytes or an integer, kept as given.
fn request_id<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<serde_json::Value>, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    check_id(v).map_err(serde::de::Error::custom)
}

/// `v` as a request's id, or what is wrong with it.
fn check_id(v: serde_json::Value) -> Result<Option<serde_json::Value>, String> {
    use serde_json::Value;
    match &v {
        Value::Null => Ok(None),
        Value::String(s) if s.len() <= MAX_ID_BYTES => Ok(Some(v)),
        Value::String(s) => Err(format!(
            "id is a string of {} bytes: give at most {MAX_ID_BYTES}, or an integer",
            s.len()
        )),
        Value::Number(n) if n.is_i64() || n.is_u64() => Ok(Some(v)),
        _ => Err(format!(
            "id is {}: give a string of at most {MAX_ID_BYTES} bytes or an integer",
            short_json(&v)
        )),
    }
}

/// `v` as JSON, cut to 40 characters for an error message.
fn short_json(v: &serde_json::Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(40) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text,
    }
}

/// The `id` of a request text that may not parse as a request (an unknown field, a bad
/// value elsewhere), for its error result: None when the text is not a JSON object or its
/// `id` is missing or not one a request may carry.
/// The text is read as it streams by, keeping nothing but the id: an `id` (or any other
/// value) that is a huge array or object is skipped, not built (a refused request costs
/// cordon no more memory than an accepted one).
pub fn loose_id(text: &[u8]) -> Option<serde_json::Value> {
    /// A string or an integer, kept; anything else skipped as it is read.
    struct Scalar(Option<serde_json::Value>);
    impl<'de> Deserialize<'de> for Scalar {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> serde::de::Visitor<'de> for V {
                type Value = Scalar;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("any JSON value")
                }
                fn visit_str<E>(self, v: &str) -> Result<Scalar, E> {
                    Ok(Scalar(Some(v.into())))
                }
                fn visit_i64<E>(self, v: i64) -> Result<Scalar, E> {
                    Ok(Scalar(Some(v.into())))
                }
                fn visit_u64<E>(self, v: u64) -> Result<Scalar, E> {
                    Ok(Scalar(Some(v.into())))
                }
                fn visit_f64<E>(self, _: f64) -> Result<Scalar, E> {
                    Ok(Scalar(None))
                }
                fn visit_bool<E>(self, _: bool) -> Result<Scalar, E> {
                    Ok(Scalar(None))
                }
                fn visit_unit<E>(self) -> Result<Scalar, E> {
                    Ok(Scalar(None))
                }
                fn visit_seq<A: serde::de::SeqAccess<'de>>(
                    self,
                    mut a: A,
                ) -> Result<Scalar, A::Error> {
                    while a.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                    Ok(Scalar(None))
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut a: A,
                ) -> Result<Scalar, A::Error> {
                    while a
                        .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                        .is_some()
                    {}
                    Ok(Scalar(None))
                }
            }
            d.deserialize_any(V)
        }
    }
    #[derive(Deserialize)]
    struct OnlyId {
        id: Option<Scalar>,
    }
    let text = text.strip_prefix("\u{feff}".as_bytes()).unwrap_or(text);
    // An object only: serde would also read a struct from an array (`[1]`).
    let starts = text.iter().find(|b| !b.is_ascii_whitespace());
    if text.len() as u64 > crate::run::MAX_REQUEST_BYTES || starts != Some(&b'{') {
        return None;
    }
    let v: OnlyId = serde_json::from_slice(text).ok()?;
    check_id(v.id?.0?).ok().flatten()
}

/// The bytes a file (or `stdin`) stands for, and whether it is executable: its text, or its
/// `content` decoded. `field` names it in errors (`files.NAME`, `stdin`).
fn decode_input(field: &str, f: JsonFile) -> Result<(Vec<u8>, bool), RunError> {
    match f {
        JsonFile::Text(t) => Ok((t.into_bytes(), false)),
        JsonFile::Encoded(EncodedFile {
            content,
            encoding: Encoding::Utf8,
            executable,
        }) => Ok((content.into_bytes(), executable)),
        JsonFile::Encoded(EncodedFile {
            content,
            encoding: Encoding::Base64,
            executable,
        }) => {
            // `base64 FILE` breaks its output every 76 characters: line breaks and other
            // ASCII whitespace are not part of the data.
            let mut content = content.into_bytes();
            content.retain(|b| !b.is_ascii_whitespace());
            let b = base64::engine::general_purpose::STANDARD
                .decode(&content)
                .map_err(|e| {
                    bad(format!(
                        "invalid request: {field}: not valid base64: {}",
                        base64_error(&e)
                    ))
                })?;
            Ok((b, executable))
        }
    }
}

/// A base64 decoding error in words: the crate's names the byte by its number ("Invalid
/// symbol 46, offset 7"); offsets count the content without its whitespace.
fn base64_error(e: &base64::DecodeError) -> String {
    use base64::DecodeError as E;
    let shown = |b: u8| match b {
        0x21..=0x7e => format!("'{}'", b as char),
        _ => format!("byte 0x{b:02x}"),
    };
    match e {
        E::InvalidByte(at, b) => format!(
            "{} at offset {at} is not a base64 character (A-Z, a-z, 0-9, +, /, and = at the end)",
            shown(*b)
        ),
        E::InvalidLength(n) => format!(
            "{n} characters cannot be base64 (whole groups of 4, = padding included): is it cut short?"
        ),
        E::InvalidLastSymbol(at, b) => format!(
            "the last character, {} at offset {at}, leaves bits over: is it cut short?",
            shown(*b)
        ),
        E::InvalidPadding => {
            "the = padding at the end is wrong or missing: is it cut short?".to_string()
        }
    }
}

/// `env`: `{"NAME": "VALUE", ...}`, each name at most once.
fn env<'de, D: serde::Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    d.deserialize_map(UniqueStrings("env"))
}

/// `config.networkResolve`: `{"NAME": "IP", ...}`, each name at most once.
fn network_resolve<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, String>, D::Error> {
    d.deserialize_map(UniqueStrings("config.networkResolve"))
}

/// An object of strings whose keys are unique, named by its field in errors. Not "the last
/// one wins", which serde_json's maps do: a validator that reads the first value would have
/// checked another environment, or another address, than the one cordon uses.
struct UniqueStrings(&'static str);

impl<'de> serde::de::Visitor<'de> for UniqueStrings {
    type Value = BTreeMap<String, String>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "`{}` as an object of strings", self.0)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
        let mut out = BTreeMap::new();
        while let Some(key) = m.next_key::<String>()? {
            let value = m.next_value::<String>()?;
            if out.contains_key(&key) {
                return Err(serde::de::Error::custom(format!(
                    "{}.{key} is given twice; give each name once",
                    self.0
                )));
            }
            out.insert(key, value);
        }
        Ok(out)
    }
}

/// One entry of `files` (`file`: it may be `executable`), or `stdin`, named by `field` in its
/// errors (`files.NAME`, `stdin`).
struct InputSeed<'a> {
    field: &'a str,
    file: bool,
}

impl InputSeed<'_> {
    /// What the object form holds, for errors.
    fn object(&self) -> &'static str {
        if self.file { FILE_OBJECT } else { STDIN_OBJECT }
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for InputSeed<'_> {
    type Value = JsonFile;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<JsonFile, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for InputSeed<'_> {
    type Value = JsonFile;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let what = if self.file {
            "the file's text"
        } else {
            "the text"
        };
        write!(
            f,
            "{} to be {what} as a string, or {}",
            self.field,
            self.object()
        )
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<JsonFile, E> {
        Ok(JsonFile::Text(v.to_owned()))
    }
    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<JsonFile, E> {
        Ok(JsonFile::Text(v))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<JsonFile, A::Error> {
        use serde::de::Error;
        use serde_json::Value;
        let name = self.field;
        let what = if self.file { "a file" } else { "`stdin`" };
        let object = self.object();
        let mut content = None;
        let mut encoding = None;
        let mut executable = None;
        while let Some(key) = m.next_key::<String>()? {
            let value: Value = m.next_value()?;
            let slot_taken = match key.as_str() {
                "content" => match value {
                    Value::String(s) => content.replace(s).is_some(),
                    other => {
                        return Err(A::Error::custom(format!(
                            "{name}.content is {other}: give the contents as a string"
                        )));
                    }
                },
                "encoding" => match value.as_str() {
                    Some("utf8") => encoding.replace(Encoding::Utf8).is_some(),
                    Some("base64") => encoding.replace(Encoding::Base64).is_some(),
                    _ => {
                        return Err(A::Error::custom(format!(
                            "{name}.encoding is {value}: give \"utf8\" (the default) or \"base64\""
                        )));
                    }
                },
                "executable" if self.file => match value {
                    Value::Bool(b) => executable.replace(b).is_some(),
                    other => {
                        return Err(A::Error::custom(format!(
                            "{name}.executable is {other}: give true or false"
                        )));
                    }
                },
                _ => {
                    return Err(A::Error::custom(format!(
                        "{name}.{key} is not a key of {what}; {what} is its text as a string, or {object}"
                    )));
                }
            };
            if slot_taken {
                return Err(A::Error::custom(format!("{name}.{key} is given twice")));
            }
        }
        let content = content.ok_or_else(|| {
            A::Error::custom(format!(
                "{name} has no `content`; {what} is its text as a string, or {object}"
            ))
        })?;
        Ok(JsonFile::Encoded(EncodedFile {
            content,
            encoding: encoding.unwrap_or_default(),
            executable: executable.unwrap_or(false),
        }))
    }
}

/// The unit of a whole-number `config` limit, for its errors.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Unit {
    Ms,
    MiB,
    Bytes,
    Count,
    /// `collectFiles`.
    Files,
    /// `collectSize`: bytes, at most [`crate::spec::MAX_COLLECT_BYTES`].
    CollectBytes,
}

/// What `config.collectSize` takes, in the request's unit (bytes), for its errors.
fn collect_size_range() -> String {
    format!(
        "give 1 to {} bytes (1 GiB; the default is {} bytes, 64 MiB); cordon holds the files it receives in memory before writing them, so this cap cannot be lifted or set above 1 GiB",
        crate::spec::MAX_COLLECT_BYTES,
        crate::spec::DEFAULT_COLLECT_BYTES,
    )
}

impl Unit {
    fn name(self) -> &'static str {
        match self {
            Unit::Ms => "milliseconds",
            Unit::MiB => "MiB",
            Unit::Bytes | Unit::CollectBytes => "bytes",
            Unit::Count => "processes and threads",
            Unit::Files => "files",
        }
    }
    /// The largest value a limit in this unit takes, and what it is, in words.
    fn max(self) -> (u64, String) {
        match self {
            Unit::Ms => {
                let ms = crate::spec::MAX_DURATION.as_millis() as u64;
                (
                    ms,
                    format!("a duration is at most 100 years ({ms} milliseconds)"),
                )
            }
            // In bytes, it must fit a u64.
            Unit::MiB => {
                let mib = u64::MAX >> 20;
                (mib, format!("give at most {mib} MiB (16 EiB)"))
            }
            Unit::Files => (
                crate::spec::MAX_COLLECT_FILES as u64,
                crate::spec::COLLECT_FILES_RANGE.to_string(),
            ),
            Unit::CollectBytes => (crate::spec::MAX_COLLECT_BYTES, collect_size_range()),
            _ => (u64::MAX, format!("give at most {}", u64::MAX)),
        }
    }
    fn example(self) -> &'static str {
        match self {
            Unit::Ms => "5000 (5 seconds)",
            Unit::MiB => "256 (256 MiB)",
            Unit::Bytes => "1048576 (1 MiB)",
            Unit::Count => "32",
            Unit::Files => "5000",
            Unit::CollectBytes => "104857600 (100 MiB)",
        }
    }
}

/// A whole-number limit of `config` (`config.FIELD`), in `unit`: a JSON integer, or a number
/// with no fraction (`5000.0`, `5e3`). Errors name the field and its unit: serde's said
/// "invalid type: floating point `5.5`, expected u64", and "floating point 1e20" for an
/// integer too large for one.
struct Whole {
    field: &'static str,
    unit: Unit,
}

impl Whole {
    fn error<E: serde::de::Error>(&self, why: String) -> E {
        E::custom(format!("config.{} {why}", self.field))
    }
}

impl<'de> serde::de::Visitor<'de> for Whole {
    type Value = Option<u64>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(
            f,
            "config.{} as a whole number of {}, such as {}",
            self.field,
            self.unit.name(),
            self.unit.example()
        )
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
        let (max, most) = self.unit.max();
        if v > max {
            return Err(self.error(format!("is {v}, too large: {most}")));
        }
        Ok(Some(v))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
        match u64::try_from(v) {
            Ok(v) => self.visit_u64(v),
            Err(_) => Err(self.error(format!(
                "is {v}: a limit is a positive whole number of {}, such as {}",
                self.unit.name(),
                self.unit.example()
            ))),
        }
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
        // 2^64: every whole f64 below it is a u64.
        const TOO_LARGE: f64 = 18_446_744_073_709_551_616.0;
        if v < 0.0 {
            return Err(self.error(format!(
                "is {v}: a limit is a positive whole number of {}, such as {}",
                self.unit.name(),
                self.unit.example()
            )));
        }
        if v >= TOO_LARGE {
            // An integer too large for a u64 arrives here, as a float.
            let (_, most) = self.unit.max();
            return Err(self.error(format!("is about {v:e}, too large: {most}")));
        }
        if v.fract() == 0.0 {
            return self.visit_u64(v as u64);
        }
        let hint = match self.unit {
            // Most likely meant in seconds.
            Unit::Ms if (v * 1000.0).fract() == 0.0 => {
                format!(" (for {v} seconds, give {})", v * 1000.0)
            }
            _ => String::new(),
        };
        Err(self.error(format!(
            "is {v}: give a whole number of {}{hint}",
            self.unit.name()
        )))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Err(self.error(format!(
            "is the string {v:?}: give a number of {}, such as {}; config's limits are numbers: timeout, cpuTime and compileTimeout in milliseconds, memoryLimit in MiB, cpuLimit in CPUs, pids and collectFiles counts, outputLimit and collectSize in bytes",
            self.unit.name(),
            self.unit.example()
        )))
    }
}

/// The `deserialize_with` function of a whole-number `config` field.
macro_rules! whole_field {
    ($name:ident, $field:literal, $unit:expr) => {
        fn $name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
            d.deserialize_option(Whole {
                field: $field,
                unit: $unit,
            })
        }
    };
}
whole_field!(timeout_ms, "timeout", Unit::Ms);
whole_field!(memory_mib, "memoryLimit", Unit::MiB);
whole_field!(pids_count, "pids", Unit::Count);
whole_field!(output_bytes, "outputLimit", Unit::Bytes);
whole_field!(compile_timeout_ms, "compileTimeout", Unit::Ms);
whole_field!(cpu_time_ms, "cpuTime", Unit::Ms);
whole_field!(collect_files_count, "collectFiles", Unit::Files);
whole_field!(collect_size_bytes, "collectSize", Unit::CollectBytes);

/// `config.cpuLimit`: a number of CPUs, named in its error when it is not one.
fn cpus<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::Null => Ok(None),
        serde_json::Value::Number(n) => Ok(n.as_f64()),
        other => Err(serde::de::Error::custom(format!(
            "config.cpuLimit is {other}: give a number of CPUs, such as 1 or 0.5"
        ))),
    }
}

/// `config`: limits in the units agent tools use (milliseconds, megabytes).
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JsonConfig {
    /// Wall-clock limit, ms.
    #[serde(default, deserialize_with = "timeout_ms")]
    pub timeout: Option<u64>,
    /// Memory limit, MB (MiB).
    #[serde(default, deserialize_with = "memory_mib")]
    pub memory_limit: Option<u64>,
    /// CPUs.
    #[serde(default, deserialize_with = "cpus")]
    pub cpu_limit: Option<f64>,
    #[serde(default, deserialize_with = "pids_count")]
    pub pids: Option<u64>,
    /// `false`/`"none"` (default), `"allow=HOST[:PORT],..."` or `"host"`.
    pub network: Option<serde_json::Value>,
    /// With `network: "allow=..."`: `{"NAME": "IP"}` answers of the proxy's resolver.
    #[serde(default, deserialize_with = "network_resolve")]
    pub network_resolve: BTreeMap<String, String>,
    /// Output limit per stream, bytes.
    #[serde(default, deserialize_with = "output_bytes")]
    pub output_limit: Option<u64>,
    /// Compile wall-clock limit, ms.
    #[serde(default, deserialize_with = "compile_timeout_ms")]
    pub compile_timeout: Option<u64>,
    /// CPU-time limit, ms.
    #[serde(default, deserialize_with = "cpu_time_ms")]
    pub cpu_time: Option<u64>,
    /// The most files collected from /workspace (listed, or brought to `outputDir`).
    #[serde(default, deserialize_with = "collect_files_count")]
    pub collect_files: Option<u64>,
    /// The most bytes of file contents brought to `outputDir`.
    #[serde(default, deserialize_with = "collect_size_bytes")]
    pub collect_size: Option<u64>,
}

/// One request.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JsonRequest {
    pub language: String,
    pub code: Option<String>,
    #[serde(default, deserialize_with = "files")]
    pub files: BTreeMap<String, JsonFile>,
    /// With `files` and no `code`: which file to run.
    pub entry_point: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// The program's stdin: text, or `{content, encoding}` as a file.
    #[serde(default, deserialize_with = "stdin")]
    pub stdin: Option<JsonFile>,
    #[serde(default, deserialize_with = "env")]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub config: JsonConfig,
    pub output_dir: Option<PathBuf>,
    /// Packages to install before the code runs (pip for python, npm for node).
    #[serde(default)]
    pub packages: Vec<String>,
    /// The package index URL (pip's --index-url, npm's --registry).
    pub package_index: Option<String>,
    /// A lock file's text (python: requirements with pins/hashes; node: package-lock.json).
    pub packages_lock: Option<String>,
    /// How the result holds `output` and `error` (default `utf8`); applied by the caller
    /// that prints the result ([`crate::Outcome::encode_output`]).
    #[serde(default, deserialize_with = "output_encoding")]
    pub output_encoding: Option<crate::outcome::OutputEncoding>,
    /// The caller's name for the request, echoed as the result's first key: a string of at
    /// most [`MAX_ID_BYTES`] bytes or an integer. Not the run's: it only tags the answer.
    #[serde(default, deserialize_with = "request_id")]
    pub id: Option<serde_json::Value>,
}

fn bad(msg: impl Into<String>) -> RunError {
    RunError::Request(msg.into())
}

/// A request's top-level fields, as [`JsonRequest`] names them.
pub const REQUEST_FIELDS: &[&str] = &[
    "language",
    "code",
    "files",
    "entryPoint",
    "args",
    "stdin",
    "env",
    "config",
    "outputDir",
    "packages",
    "packageIndex",
    "packagesLock",
    "outputEncoding",
    "id",
];

/// How many JSON values `text` holds (every string, number, literal, array and object), up
/// to `max + 1`: a scan that allocates nothing, made before parsing.
fn count_values(text: &str, max: usize) -> usize {
    let (mut n, mut in_string, mut escaped, mut in_scalar) = (0usize, false, false, false);
    for &b in text.as_bytes() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        let scalar_byte = b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.');
        if scalar_byte && !in_scalar {
            n += 1;
        }
        in_scalar = scalar_byte;
        if matches!(b, b'"' | b'[' | b'{') {
            n += 1;
            in_string = b == b'"';
        }
        if n > max {
            break;
        }
    }
    n
}

/// Parses one request, naming the field at fault in errors. A request over
/// [`MAX_REQUEST_BYTES`] or with more than [`MAX_REQUEST_VALUES`] JSON values is refused
/// before it is parsed.
///
/// [`MAX_REQUEST_BYTES`]: crate::run::MAX_REQUEST_BYTES
/// [`MAX_REQUEST_VALUES`]: crate::run::MAX_REQUEST_VALUES
pub fn parse(text: &str) -> Result<JsonRequest, RunError> {
    use crate::run::{MAX_REQUEST_BYTES, MAX_REQUEST_VALUES};
    // A byte order mark, which some editors and Windows tools write first, is no JSON.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.len() as u64 > MAX_REQUEST_BYTES {
        return Err(bad(format!(
            "invalid request: it is over {MAX_REQUEST_BYTES} bytes ({} MiB of input in base64, and 1 MiB for the rest); send less data in the request",
            crate::run::MAX_INPUT_BYTES >> 20
        )));
    }
    if count_values(text, MAX_REQUEST_VALUES) > MAX_REQUEST_VALUES {
        return Err(bad(format!(
            "invalid request: it holds more than {MAX_REQUEST_VALUES} JSON values (strings, numbers, arrays, objects); send fewer args, env entries, files or packages"
        )));
    }
    if text.trim().is_empty() {
        return Err(bad(
            r#"invalid request: it is empty; send one JSON object, such as {"language": "python", "code": "print(1)"}"#,
        ));
    }
    let other = other_json_value(text.trim_start());
    if let Some(other) = other {
        return Err(bad(format!(
            r#"invalid request: a request must be a JSON object, not {other}: {{"language": "python", "code": "print(1)", ...}}"#
        )));
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let parsed = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| (e.path().to_string(), e.into_inner()))
        .and_then(|r: JsonRequest| de.end().map(|()| r).map_err(|e| (".".into(), e)));
    parsed.map_err(|(path, e)| {
        // Where the error is (`args[1]`, `config.timeout`), unless the message says it.
        let msg = e.to_string();
        // serde_json's words for an unpaired surrogate escape say nothing of what is wrong.
        if (msg.starts_with("unexpected end of hex escape")
            || msg.starts_with("lone leading surrogate"))
            && let Some(lone) = unpaired_surrogate(text)
        {
            return bad(unpaired_surrogate_message(text, &path, &lone));
        }
        // serde_path_to_error says `?` where a syntax error left no path.
        let e = if path == "." || path == "?" || msg.contains(&path) {
            msg.clone()
        } else {
            format!("{path}: {msg}")
        };
        if msg.contains("unknown field")
            && let Some(said) = unknown_top_field(text)
        {
            return bad(format!("invalid request: {said}"));
        }
        let hint = if msg.contains("unknown field") {
            unknown_field_hint(text)
        } else if msg.contains("missing field") {
            "; `language` is required".to_string()
        } else if msg.contains("trailing characters") {
            "; a request is one JSON object (several go one per line in a --requests file)"
                .to_string()
        } else {
            String::new()
        };
        bad(format!("invalid request: {e}{hint}"))
    })
}

/// An escape `\uXXXX` of one half of a UTF-16 surrogate pair without its other half, found
/// in a JSON text's strings: it stands for no character (JavaScript's `JSON.stringify` writes
/// one for a string cut between the halves of an emoji).
#[derive(Debug, PartialEq, Eq)]
struct LoneSurrogate {
    /// The byte offset of its backslash.
    at: usize,
    /// The escape as written (`\ud800`).
    escape: String,
    /// A high (leading) half with no low one after it, else a low (trailing) half with no
    /// high one before it.
    high: bool,
}

/// The first unpaired surrogate escape in `text`'s strings, if any.
fn unpaired_surrogate(text: &str) -> Option<LoneSurrogate> {
    let b = text.as_bytes();
    let hex_escape = |i: usize| -> Option<u16> {
        let digits = b
            .get(i..i + 6)
            .filter(|e| e.starts_with(b"\\u") && e[2..].iter().all(u8::is_ascii_hexdigit))?;
        u16::from_str_radix(std::str::from_utf8(&digits[2..]).ok()?, 16).ok()
    };
    let (mut i, mut in_string) = (0, false);
    while i < b.len() {
        match b[i] {
            b'"' => in_string = !in_string,
            b'\\' if in_string => match hex_escape(i) {
                Some(0xd800..=0xdbff) => {
                    if matches!(hex_escape(i + 6), Some(0xdc00..=0xdfff)) {
                        i += 12;
                        continue;
                    }
                    return Some(LoneSurrogate {
                        at: i,
                        escape: text[i..i + 6].to_string(),
                        high: true,
                    });
                }
                Some(0xdc00..=0xdfff) => {
                    return Some(LoneSurrogate {
                        at: i,
                        escape: text[i..i + 6].to_string(),
                        high: false,
                    });
                }
                // Any other escape is six bytes (`\u0041`) or two (`\"`, `\\`): skip all
                // but its last byte here, that one below.
                Some(_) => i += 5,
                None => i += 1,
            },
            _ => {}
        }
        i += 1;
    }
    None
}

/// What is wrong with a request holding `lone` and what to send instead. `path` is where
/// serde found it (`code`, `env.A`, `env.?` for a name in `env`), when it says.
fn unpaired_surrogate_message(text: &str, path: &str, lone: &LoneSurrogate) -> String {
    let before = &text[..lone.at];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    let field = match path {
        "" | "." | "?" => String::new(),
        p => match p.strip_suffix(".?") {
            Some(map) => format!("a name in `{map}`: "),
            None => format!("{p}: "),
        },
    };
    let half = if lone.high {
        "the first half of a UTF-16 surrogate pair with no second half after it"
    } else {
        "the second half of a UTF-16 surrogate pair with no first half before it"
    };
    format!(
        r#"invalid request: {field}the escape `{}` at line {line}, column {column} is {half}, which is not a character (JavaScript's JSON.stringify writes one for a string cut inside an emoji); send the text as UTF-8, or a character above U+FFFF as both halves (`\ud83d\ude00`), and bytes that are not text in a file or stdin as base64 ({{"content": "...", "encoding": "base64"}})"#,
        lone.escape
    )
}

/// What JSON value other than an object `text` starts with, if it plainly starts with one:
/// the literals only when spelt out (`nope` is a syntax error, not `null`).
fn other_json_value(text: &str) -> Option<&'static str> {
    let literal = |word: &str| {
        text.strip_prefix(word)
            .is_some_and(|rest| !rest.starts_with(|c: char| c.is_ascii_alphanumeric()))
    };
    match text.chars().next()? {
        '[' => Some("an array"),
        '"' => Some("a string"),
        '0'..='9' => Some("a number"),
        '-' if text[1..].starts_with(|c: char| c.is_ascii_digit()) => Some("a number"),
        _ if literal("true") || literal("false") => Some("true or false"),
        _ if literal("null") => Some("null"),
        _ => None,
    }
}

/// Parses one request from its bytes (see [`parse`]): text that is not UTF-8 is refused with
/// the offset of the first byte that is not.
pub fn parse_bytes(bytes: &[u8]) -> Result<JsonRequest, RunError> {
    match std::str::from_utf8(bytes) {
        Ok(text) => parse(text),
        Err(e) => {
            let at = e.valid_up_to();
            let what = match e.error_len() {
                Some(_) => format!("byte 0x{:02x} at offset {at}", bytes[at]),
                None => format!("the text ends inside a character that starts at offset {at}"),
            };
            Err(bad(format!(
                r#"invalid request: it is not UTF-8 ({what}; offsets count bytes from 0): JSON text is UTF-8; send bytes that are not as base64 (a file's or stdin's {{"content": "...", "encoding": "base64"}})"#
            )))
        }
    }
}

/// A request's unknown top-level field, said in place of serde's message (whose list of
/// expected fields would repeat the list given here): which it is, the field it is likely a
/// misspelling of, or the `config` field of that name, and the request's fields. None when
/// every top-level field is known (the unknown one is inside `config` or `files`).
fn unknown_top_field(text: &str) -> Option<String> {
    use serde::de::IgnoredAny;
    let top = serde_json::from_str::<BTreeMap<String, IgnoredAny>>(text).ok()?;
    let k = top.keys().find(|k| !REQUEST_FIELDS.contains(&k.as_str()))?;
    let config: Vec<String> = match serde_json::to_value(JsonConfig::default()) {
        Ok(serde_json::Value::Object(m)) => m.keys().cloned().collect(),
        _ => Vec::new(),
    };
    let near = |known: &str| edit_distance(&k.to_lowercase(), &known.to_lowercase()) <= 2;
    let guess = if let Some(c) = config.iter().find(|c| *c == k) {
        format!(" (`{c}` is a field of `config`: {{\"config\": {{\"{c}\": ...}}}})")
    } else if let Some(f) = REQUEST_FIELDS.iter().find(|f| near(f)) {
        format!(" (did you mean `{f}`?)")
    } else if let Some(c) = config.iter().find(|c| near(c)) {
        format!(" (did you mean `config.{c}`?)")
    } else {
        String::new()
    };
    Some(format!(
        "unknown field `{k}`{guess}; a request's fields are: {}",
        REQUEST_FIELDS.join(", ")
    ))
}

/// Levenshtein distance between `a` and `b` (in chars): how many insertions, deletions
/// and substitutions make one the other.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == *cb {
                prev
            } else {
                1 + prev.min(cur).min(row[j])
            };
            prev = cur;
        }
    }
    row[b.len()]
}

/// Where an unknown field below the top level is, for the hint after serde's message: serde
/// lists the fields expected where the unknown one is, but not where that is. One inside
/// `config` is named as `config.NAME` (serde's list is the right one there). A top-level one
/// is said by [`unknown_top_field`].
fn unknown_field_hint(text: &str) -> String {
    use serde::de::IgnoredAny;
    // Keys only: the values are skipped, never built.
    #[derive(Deserialize)]
    struct ConfigKeys {
        config: Option<BTreeMap<String, IgnoredAny>>,
    }
    if let Ok(ConfigKeys {
        config: Some(config),
    }) = serde_json::from_str::<ConfigKeys>(text)
    {
        let known = serde_json::to_value(JsonConfig::default()).ok();
        if let Some(serde_json::Value::Object(known)) = known
            && let Some(k) = config.keys().find(|k| !known.contains_key(k.as_str()))
        {
            return format!("; `config.{k}` is not a config field (the list above is config's)");
        }
    }
    String::new()
}

impl JsonRequest {
    /// Turns the request into a [`RunRequest`], checking every name and value.
    pub fn into_run(self) -> Result<RunRequest, RunError> {
        if self.language.trim().is_empty() {
            return Err(bad("invalid request: `language` is empty"));
        }
        let mut files = Vec::new();
        if let Some(code) = self.code {
            files.push(InputFile {
                path: String::new(),
                contents: code.into_bytes(),
                mode: 0o644,
            });
        }
        for (name, f) in self.files {
            check_relative_path(&name).map_err(|e| bad(format!("invalid request: files: {e}")))?;
            let (contents, exec) = decode_input(&format!("files.{name}"), f)?;
            files.push(InputFile {
                path: name,
                contents,
                mode: if exec { 0o755 } else { 0o644 },
            });
        }
        if files.is_empty() {
            return Err(bad(
                "invalid request: give `code`, or `files` with an `entryPoint`",
            ));
        }
        let has_code = files.iter().any(|f| f.path.is_empty());
        if has_code && self.entry_point.is_some() {
            return Err(bad(
                "invalid request: give `code`, or `files` with an `entryPoint`, not both (`code` would run and `entryPoint` be ignored)",
            ));
        }
        if !has_code && self.entry_point.is_none() {
            return Err(bad(
                "invalid request: without `code`, name the file to run in `entryPoint`",
            ));
        }
        if let Some(e) = &self.entry_point {
            check_relative_path(e)
                .map_err(|err| bad(format!("invalid request: entryPoint: {err}")))?;
            if !files.iter().any(|f| f.path == *e) {
                let mut names: Vec<&str> = files.iter().map(|f| f.path.as_str()).take(10).collect();
                if files.len() > names.len() {
                    names.push("...");
                }
                return Err(bad(format!(
                    "invalid request: entryPoint is `{e}`, which is not one of the request's files ({}); name one of them, or give the program as `code`",
                    names.join(", ")
                )));
            }
        }
        let mut network = match &self.config.network {
            None | Some(serde_json::Value::Bool(false)) | Some(serde_json::Value::Null) => {
                crate::net::Network::None
            }
            Some(serde_json::Value::String(s)) => crate::net::parse_network(s)
                .map_err(|e| bad(format!("invalid request: config.network: {e}")))?,
            Some(other) => {
                return Err(bad(format!(
                    "invalid request: config.network {other}: give false, \"none\", \"allow=HOST[:PORT],...\" or \"host\""
                )));
            }
        };
        match &mut network {
            crate::net::Network::Allow(a) => {
                for (name, ip) in &self.config.network_resolve {
                    a.overrides
                        .push(crate::net::parse_override(&format!("{name}={ip}")).map_err(
                            |e| {
                                bad(format!(
                                    "invalid request: config.networkResolve: {}",
                                    e.reason
                                ))
                            },
                        )?);
                }
            }
            _ if !self.config.network_resolve.is_empty() => {
                return Err(bad(
                    "invalid request: config.networkResolve needs config.network \"allow=...\"",
                ));
            }
            _ => {}
        }
        let c = &self.config;
        // 0 lifts a limit on the command line; a request can only set one (the operator lifts
        // limits, with cordon run's flags or a profile).
        for (name, v) in [
            ("timeout", c.timeout),
            ("memoryLimit", c.memory_limit),
            ("pids", c.pids),
            ("outputLimit", c.output_limit),
            ("compileTimeout", c.compile_timeout),
            ("cpuTime", c.cpu_time),
        ] {
            if v == Some(0) {
                return Err(bad(format!(
                    "invalid request: config.{name} is 0, which would lift the limit; a request can only set a limit (give a positive value); the operator lifts limits with cordon run's flags or a profile"
                )));
            }
        }
        if c.cpu_limit.is_some_and(|v| !(v > 0.0 && v.is_finite())) {
            return Err(bad(
                "invalid request: config.cpuLimit must be a positive number of CPUs; a request cannot lift the CPU limit",
            ));
        }
        // The collection's caps are bounded (cordon holds what it collects in memory), and
        // 0 lifts neither.
        if let Some(n) = c.collect_files {
            crate::spec::check_collect_files(n).map_err(|e| {
                bad(format!(
                    "invalid request: config.collectFiles is {n}: {}",
                    e.hint
                ))
            })?;
        }
        if let Some(b) = c.collect_size {
            crate::spec::check_collect_size(b, &b.to_string()).map_err(|_| {
                bad(format!(
                    "invalid request: config.collectSize is {b}: {}",
                    collect_size_range()
                ))
            })?;
        }
        let ms = |v: Option<u64>| v.map(|v| format!("{v}ms"));
        let limits = LimitOverrides {
            timeout: ms(c.timeout),
            cpu_time: ms(c.cpu_time),
            memory: c.memory_limit.map(|m| format!("{m}M")),
            cpus: c.cpu_limit,
            pids: c.pids,
            output_limit: c.output_limit.map(|b| b.to_string()),
            collect_files: c.collect_files,
            collect_size: c.collect_size.map(|b| b.to_string()),
            naming: LimitNaming::Request,
            ..LimitOverrides::default()
        };
        let compile_limits = LimitOverrides {
            timeout: ms(c.compile_timeout),
            naming: LimitNaming::CompileRequest,
            ..LimitOverrides::default()
        };
        for (k, v) in &self.env {
            crate::spec::check_env_key(k).map_err(|e| {
                bad(format!(
                    "invalid request: env: {k:?} is not a variable name: {}",
                    e.hint
                ))
            })?;
            if v.contains('\0') {
                return Err(bad(format!(
                    "invalid request: env.{k}: the value contains a NUL byte (\\u0000), which no environment variable can hold"
                )));
            }
        }
        if let Some(i) = self.args.iter().position(|a| a.contains('\0')) {
            return Err(bad(format!(
                "invalid request: args[{i}] (counted from 0) contains a NUL byte (\\u0000), which no program argument can hold: {:?}",
                self.args[i]
            )));
        }
        Ok(RunRequest {
            // A request cannot name host paths: only `cordon run --ro-bind` binds.
            binds: Vec::new(),
            language: self.language,
            // The caller's default may still ask for it (commands::run_json_text).
            exact_output: self.output_encoding == Some(crate::outcome::OutputEncoding::Base64),
            files,
            entry: if has_code { None } else { self.entry_point },
            code_name: None,
            args: self.args,
            stdin: match self.stdin {
                Some(s) => StdinSource::Bytes(decode_input("stdin", s)?.0),
                None => StdinSource::Null,
            },
            env: self.env.into_iter().collect(),
            limits,
            compile_limits,
            output_dir: self.output_dir,
            network,
            packages: self.packages,
            package_index: self.package_index,
            packages_lock: self.packages_lock.map(String::into_bytes),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_counted_without_strings_fooling_the_count() {
        // The object, its key, the array and its five members.
        assert_eq!(
            count_values(r#"{"a": [1, -2.5e3, true, null, "x,[{"]}"#, 100),
            8
        );
        assert_eq!(count_values(r#"["\"[", "\\", []]"#, 100), 4);
        assert_eq!(count_values("[1,2,3,4,5]", 3), 4, "stops past the bound");
    }

    /// A request's size and number of values are bounded before parsing: 10 million empty
    /// args in 30 MB once cost cordon 1.1 GB.
    #[test]
    fn oversized_and_overfull_requests_are_refused_before_parsing() {
        let many = format!(
            r#"{{"language": "python", "code": "", "args": [{}""]}}"#,
            "\"\",".repeat(crate::run::MAX_REQUEST_VALUES)
        );
        let e = parse(&many).unwrap_err().to_string();
        assert!(e.contains("more than 1048576 JSON values"), "{e}");
        let big = format!(
            r#"{{"language": "python", "code": "{}"}}"#,
            "x".repeat(crate::run::MAX_REQUEST_BYTES as usize)
        );
        let e = parse(&big).unwrap_err().to_string();
        assert!(
            e.contains(&format!("over {} bytes", crate::run::MAX_REQUEST_BYTES)),
            "{e}"
        );
        // Unknown fields are still named, with values that are never built.
        let e = parse(r#"{"languag": "python", "code": ""}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("invalid request: unknown field `languag` (did you mean `language`?); a request's fields are: language, code,")
                && !e.contains("expected one of"),
            "{e}"
        );
        let e = parse(r#"{"language": "python", "code": "", "timeout": 5}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("(`timeout` is a field of `config`: {\"config\": {\"timeout\": ...}})"),
            "{e}"
        );
        let e = parse(r#"{"language": "python", "code": "", "memoryLimt": 5}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("(did you mean `config.memoryLimit`?)"), "{e}");
        assert_eq!(
            (edit_distance("kitten", "sitting"), edit_distance("", "ab")),
            (3, 2)
        );
        let e = parse(r#"{"language": "python", "bogus": [[[]]], "config": {"x": 1}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("a request's fields are"), "{e}");
        let e = parse(r#"{"language": "python", "files": {"a.py": "1", "a.py": "2"}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("files.a.py is given twice"), "{e}");
        // The same for the other objects a validator reads: not "the last one wins".
        let e = parse(r#"{"language": "python", "code": "x", "env": {"K": "a", "K": "b"}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("env.K is given twice"), "{e}");
        let e = parse(
            r#"{"language": "python", "code": "x", "config": {"network": "allow=a.test", "networkResolve": {"a.test": "127.0.0.1", "a.test": "10.0.0.1"}}}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("config.networkResolve.a.test is given twice"),
            "{e}"
        );
        let e = parse(r#"{"language": "python", "code": "x", "env": {"K": 1}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid type") && e.contains("string"), "{e}");
        // Distinct keys still pass, all of them kept.
        let r =
            parse(r#"{"language": "python", "code": "x", "env": {"K": "a", "L": "b"}}"#).unwrap();
        assert_eq!(r.env.len(), 2);
        let e = parse(r#"{"language": "python", "config": {"x": [1]}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`config.x` is not a config field"), "{e}");
        // Common mistakes get what to do.
        let e = parse(" \n").unwrap_err().to_string();
        assert!(
            e.contains("it is empty") && e.contains(r#""language""#),
            "{e}"
        );
        let e = parse("{\"language\": \"python\", \"code\": \"1\"}\n{\"language\": \"python\"}")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("trailing characters") && e.contains("--requests"),
            "{e}"
        );
        // Another JSON value is named; text that only starts like one is a syntax error, with
        // no stray path before it.
        for (text, said) in [
            ("null", "not null"),
            (" true\n", "not true or false"),
            ("[1]", "not an array"),
            ("-1", "not a number"),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(said), "{text}: {e}");
        }
        for text in [
            "not json",
            "nope",
            "-foo",
            "nul",
            "falsey",
            "{'language': 'python'}",
            "{\"a\":",
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(
                !e.contains("must be a JSON object")
                    && !e.contains("?:")
                    && (e.contains("line 1 column") || e.contains("EOF")),
                "{text}: {e}"
            );
        }
        let e = parse(r#"{"language": "python", "code": "1", "config": {"timeout": "5s"}}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("timeout, cpuTime and compileTimeout in milliseconds"),
            "{e}"
        );
        // A number of the wrong kind is not told that limits are numbers.
        let e = parse(r#"{"language": "python", "code": "1", "config": {"pids": -1}}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("config.pids is -1: a limit is a positive whole number")
                && !e.contains("are numbers"),
            "{e}"
        );
    }

    /// config's whole-number limits: a fraction is refused with its unit (and, for a time,
    /// what it is in seconds), a number too large says so, a whole float is taken.
    #[test]
    fn config_numbers_are_named_with_their_unit() {
        let config = |c: &str| {
            parse(&format!(
                r#"{{"language":"bash","code":"x","config":{{{c}}}}}"#
            ))
            .map(|r| r.config)
            .map_err(|e| e.to_string())
        };
        for (c, want) in [
            (
                r#""timeout": 5.5"#,
                "config.timeout is 5.5: give a whole number of milliseconds (for 5.5 seconds, give 5500)",
            ),
            (
                r#""cpuTime": 0.25"#,
                "config.cpuTime is 0.25: give a whole number of milliseconds (for 0.25 seconds, give 250)",
            ),
            (
                r#""memoryLimit": 0.5"#,
                "config.memoryLimit is 0.5: give a whole number of MiB",
            ),
            (
                r#""timeout": 99999999999999999999"#,
                "config.timeout is about 1e20, too large: a duration is at most 100 years (3155760000000 milliseconds)",
            ),
            (
                r#""compileTimeout": 18446744073709551615"#,
                "config.compileTimeout is 18446744073709551615, too large: a duration is at most 100 years",
            ),
            (
                r#""memoryLimit": 17592186044416"#,
                "config.memoryLimit is 17592186044416, too large: give at most 17592186044415 MiB",
            ),
            (
                r#""outputLimit": 1e30"#,
                "config.outputLimit is about 1e30, too large: give at most 18446744073709551615",
            ),
            (
                r#""pids": "8""#,
                r#"config.pids is the string "8": give a number of processes and threads"#,
            ),
            (
                r#""timeout": true"#,
                "expected config.timeout as a whole number of milliseconds",
            ),
            (
                r#""cpuLimit": "1""#,
                r#"config.cpuLimit is "1": give a number of CPUs"#,
            ),
        ] {
            let e = config(c).unwrap_err();
            assert!(e.contains(want), "{c}: {e}");
            assert!(
                !e.contains("floating point") && !e.contains("u64"),
                "{c}: {e}"
            );
        }
        let c = config(r#""timeout": 5e3, "pids": 8.0, "memoryLimit": 64, "cpuLimit": 1"#).unwrap();
        assert_eq!(
            (c.timeout, c.pids, c.memory_limit, c.cpu_limit),
            (Some(5000), Some(8), Some(64), Some(1.0))
        );
        let c = config(r#""timeout": null"#).unwrap();
        assert_eq!(c.timeout, None);
    }

    /// Errors about a request's fields name the field (`env`, `args[1]`), not the command
    /// line's flag; anything but an object is refused as such; a byte order mark is skipped,
    /// and text that is not UTF-8 is refused with the offset of the first bad byte.
    #[test]
    fn request_errors_name_the_request_not_the_command_line() {
        let run = |text: &str| {
            parse(text)
                .and_then(JsonRequest::into_run)
                .map_err(|e| e.to_string())
        };
        let e = run(r#"{"language":"bash","code":"x","env":{"A=B":"1"}}"#).unwrap_err();
        assert!(
            e.contains(r#"env: "A=B" is not a variable name"#) && !e.contains("--env"),
            "{e}"
        );
        let e = run(r#"{"language":"bash","code":"x","env":{"A":"x\u0000y"}}"#).unwrap_err();
        assert!(e.contains("env.A: the value contains a NUL byte"), "{e}");
        let e = run(r#"{"language":"bash","code":"x","args":["x","a\u0000b"]}"#).unwrap_err();
        assert!(
            e.contains("args[1] (counted from 0) contains a NUL byte") && !e.contains("command"),
            "{e}"
        );
        let e = run(r#"{"language":"bash","code":"x","args":["x",1]}"#).unwrap_err();
        assert!(e.contains("args[1]: invalid type: integer"), "{e}");
        for (text, what) in [
            ("[]", "an array"),
            (r#"["python","print(1)"]"#, "an array"),
            (r#" "x""#, "a string"),
            ("42", "a number"),
            ("null", "null"),
            ("true", "true or false"),
        ] {
            let e = run(text).unwrap_err();
            assert!(
                e.contains(&format!("a request must be a JSON object, not {what}"))
                    && !e.contains("JsonRequest"),
                "{text}: {e}"
            );
        }
        let r = parse("\u{feff}{\"language\":\"bash\",\"code\":\"x\"}").unwrap();
        assert_eq!(r.language, "bash");
        let e = parse_bytes(b"{\"language\":\"bash\",\"code\":\"\xff\"}")
            .map(drop)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not UTF-8 (byte 0xff at offset 27"), "{e}");
        let e = parse_bytes(b"{\"code\":\"\xc3")
            .map(drop)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("the text ends inside a character that starts at offset 9"),
            "{e}"
        );
        assert!(parse_bytes("{\"language\":\"bash\",\"code\":\"é\"}".as_bytes()).is_ok());
    }

    #[test]
    fn minimal_and_full_requests() {
        let r = parse(r#"{"language":"python","code":"print(1)"}"#)
            .unwrap()
            .into_run()
            .unwrap();
        assert_eq!(r.files.len(), 1);
        assert_eq!(r.files[0].path, "");
        let r = parse(
            r#"{"language":"python","files":{"a.py":"x","d/b.bin":{"content":"AAE=","encoding":"base64"}},
                "entryPoint":"a.py","args":["-v"],"stdin":"in","env":{"K":"V"},
                "config":{"timeout":1500,"memoryLimit":64,"cpuLimit":0.5,"pids":8,"network":false,"outputLimit":100,"compileTimeout":9000}}"#,
        )
        .unwrap()
        .into_run()
        .unwrap();
        assert_eq!(r.entry.as_deref(), Some("a.py"));
        assert_eq!(
            r.files
                .iter()
                .find(|f| f.path == "d/b.bin")
                .unwrap()
                .contents,
            vec![0, 1]
        );
        assert_eq!(r.limits.timeout.as_deref(), Some("1500ms"));
        assert_eq!(r.limits.memory.as_deref(), Some("64M"));
        assert_eq!(r.compile_limits.timeout.as_deref(), Some("9000ms"));
        assert_eq!(r.stdin, StdinSource::Bytes(b"in".to_vec()));
    }

    /// config.collectFiles and config.collectSize set the run's collection caps; out of
    /// range (0 included: it lifts no cap), a fraction or a string is refused, naming the
    /// field, the value and the range.
    #[test]
    fn collection_caps_are_config_fields_with_bounds() {
        let run = |c: &str| {
            parse(&format!(
                r#"{{"language":"bash","code":"x","config":{{{c}}}}}"#
            ))
            .and_then(JsonRequest::into_run)
            .map_err(|e| e.to_string())
        };
        let r = run(r#""collectFiles": 1500, "collectSize": 104857600"#).unwrap();
        assert_eq!(r.limits.collect_files, Some(1500));
        assert_eq!(r.limits.collect_size.as_deref(), Some("104857600"));
        assert!(!r.compile_limits.sets_collect());
        let mut c = crate::spec::Collect::default();
        r.limits.apply_collect(&mut c).unwrap();
        assert_eq!((c.max_files, c.max_bytes), (1500, 100 << 20));
        let r = run(r#""collectFiles": 1e5, "collectSize": 1"#).unwrap();
        assert_eq!(
            (r.limits.collect_files, r.limits.collect_size.as_deref()),
            (Some(100_000), Some("1"))
        );
        let r = run("").unwrap();
        assert!(!r.limits.sets_collect());
        for (c, want) in [
            (
                r#""collectFiles": 0"#,
                "config.collectFiles is 0: give 1 to 100000 files",
            ),
            (
                r#""collectFiles": 100001"#,
                "config.collectFiles is 100001, too large: give 1 to 100000 files",
            ),
            (
                r#""collectFiles": 2.5"#,
                "config.collectFiles is 2.5: give a whole number of files",
            ),
            (
                r#""collectFiles": "10""#,
                r#"config.collectFiles is the string "10": give a number of files"#,
            ),
            (
                r#""collectSize": 0"#,
                "config.collectSize is 0: give 1 to 1073741824 bytes",
            ),
            (
                r#""collectSize": 1073741825"#,
                "config.collectSize is 1073741825, too large: give 1 to 1073741824 bytes",
            ),
            (
                r#""collectSize": 1e30"#,
                "config.collectSize is about 1e30, too large: give 1 to 1073741824 bytes",
            ),
            (
                r#""collectSize": "64M""#,
                r#"config.collectSize is the string "64M": give a number of bytes"#,
            ),
        ] {
            let e = run(c).unwrap_err();
            assert!(e.contains(want), "{c}: {e}");
            assert!(
                !e.contains("--collect"),
                "{c}: a request's error names its field: {e}"
            );
        }
        let e = run(r#""collectSize": 2147483648"#).unwrap_err();
        assert!(e.contains("in memory"), "{e}");
    }

    #[test]
    fn a_request_cannot_lift_a_limit() {
        for field in [
            "timeout",
            "memoryLimit",
            "pids",
            "outputLimit",
            "compileTimeout",
            "cpuTime",
            "cpuLimit",
        ] {
            let text = format!(r#"{{"language":"python","code":"x","config":{{"{field}":0}}}}"#);
            let e = parse(&text).unwrap().into_run().unwrap_err().to_string();
            assert!(e.contains(&format!("config.{field}")), "{field}: {e}");
        }
        let e = parse(r#"{"language":"python","code":"x","config":{"cpuLimit":-1}}"#)
            .unwrap()
            .into_run()
            .unwrap_err()
            .to_string();
        assert!(e.contains("cpuLimit"), "{e}");
    }

    #[test]
    fn code_and_an_entry_point_are_not_both_taken() {
        let e = parse(
            r#"{"language":"bash","code":"echo a","files":{"b.sh":"echo b"},"entryPoint":"b.sh"}"#,
        )
        .unwrap()
        .into_run()
        .unwrap_err()
        .to_string();
        assert!(e.contains("not both"), "{e}");
    }

    #[test]
    fn output_dir_is_confined_to_the_output_root() {
        use crate::run::confine_output_dir;
        use std::path::Path;
        let root = Path::new("/srv/out");
        assert_eq!(
            confine_output_dir(Path::new("job1"), root).unwrap(),
            Path::new("/srv/out/job1")
        );
        assert_eq!(
            confine_output_dir(Path::new("/srv/out/a/b"), root).unwrap(),
            Path::new("/srv/out/a/b")
        );
        for outside in [
            "/root/.ssh",
            "/srv/outer",
            "../x",
            "/srv/out/../../etc",
            "a/../../b",
        ] {
            let e = confine_output_dir(Path::new(outside), root)
                .unwrap_err()
                .to_string();
            assert!(e.contains("--output-root"), "{outside}: {e}");
        }
    }

    /// `--request-net public` refuses what reaches past the public internet (loopback,
    /// private, metadata, this host's own addresses, `localhost`, a resolve answer among
    /// them, the host network) and `none` any network or package install; `any` takes all.
    #[test]
    fn request_network_is_confined_to_the_operators_scope() {
        use crate::run::{RequestNet, confine_request_network};
        use clap::ValueEnum;
        // The name passed to the batch mode's children is the one clap parses.
        for v in RequestNet::value_variants() {
            assert_eq!(v.to_possible_value().unwrap().get_name(), v.name());
        }
        let req = |extra: &str| {
            parse(&format!(r#"{{"language":"python","code":"x"{extra}}}"#))
                .unwrap()
                .into_run()
                .unwrap()
        };
        let own = crate::net::proxy::local_addresses()
            .unwrap()
            .into_iter()
            .find(|a| crate::net::policy::classify(*a).is_none())
            .map(|a| a.to_string());
        let mut refused_public = vec![
            r#","config":{"network":"allow=127.0.0.1:9090"}"#.to_string(),
            r#","config":{"network":"allow=[::ffff:127.0.0.1]:80"}"#.into(),
            r#","config":{"network":"allow=169.254.169.254"}"#.into(),
            r#","config":{"network":"allow=10.1.2.3:443"}"#.into(),
            r#","config":{"network":"allow=localhost:8080"}"#.into(),
            r#","config":{"network":"host"}"#.into(),
            r#","config":{"network":"allow=api.test","networkResolve":{"api.test":"192.168.1.1"}}"#
                .into(),
            r#","packages":["x"],"packageIndex":"http://127.0.0.1:9090/simple/""#.into(),
            r#","packages":["x"],"packageIndex":"http://localhost/simple/""#.into(),
        ];
        if let Some(own) = own {
            // This host's own public address reaches its services on every interface.
            refused_public.push(format!(r#","config":{{"network":"allow={own}:22"}}"#));
        }
        for extra in &refused_public {
            let e = confine_request_network(&req(extra), RequestNet::Public)
                .unwrap_err()
                .to_string();
            assert!(e.contains("--request-net public"), "{extra}: {e}");
            confine_request_network(&req(extra), RequestNet::Any).unwrap();
        }
        let fine_public = [
            r#","config":{"network":"allow=pypi.org,*.example.org:8443"}"#,
            r#","config":{"network":"allow=93.184.216.34:443"}"#,
            r#","packages":["x"],"packageIndex":"https://mirror.example.org/simple/""#,
            r#","packages":["x"]"#,
            "",
        ];
        for extra in fine_public {
            confine_request_network(&req(extra), RequestNet::Public)
                .unwrap_or_else(|e| panic!("{extra}: {e}"));
        }
        for extra in [
            r#","config":{"network":"allow=pypi.org"}"#,
            r#","packages":["x"]"#,
            r#","packagesLock":"a==1\n""#,
        ] {
            let e = confine_request_network(&req(extra), RequestNet::None)
                .unwrap_err()
                .to_string();
            assert!(e.contains("--request-net none"), "{extra}: {e}");
        }
        confine_request_network(&req(r#","config":{"network":false}"#), RequestNet::None).unwrap();
    }

    #[test]
    fn packages_lock_is_carried_as_bytes() {
        let r = parse(r#"{"language":"python","code":"x","packagesLock":"a==1\n"}"#)
            .unwrap()
            .into_run()
            .unwrap();
        assert_eq!(r.packages_lock.as_deref(), Some(&b"a==1\n"[..]));
        assert!(r.packages.is_empty());
    }

    /// The hint after an unknown field is the list of the level it is at: a request's
    /// fields for a top-level one, not for one inside `config`.
    #[test]
    fn an_unknown_field_is_hinted_at_by_its_level() {
        let e = parse(r#"{"language":"python","code":"x","config":{"memory":64}}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`memoryLimit`"),
            "serde's list of config's fields: {e}"
        );
        assert!(e.contains("config.memory"), "{e}");
        assert!(!e.contains("entryPoint"), "not a request's fields: {e}");
        let e = parse(r#"{"language":"python","code":"x","colour":1}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("a request's fields are"), "{e}");
    }

    /// A malformed entry of `files` is named with its key and what is expected, not
    /// "data did not match any variant of untagged enum JsonFile".
    #[test]
    fn a_bad_file_entry_names_the_file_and_the_key() {
        let file = |f: &str| {
            parse(&format!(
                r#"{{"language":"bash","files":{{"a.sh":{f}}},"entryPoint":"a.sh"}}"#
            ))
            .map(drop)
            .unwrap_err()
            .to_string()
        };
        for (entry, want) in [
            (
                r#"{"content":"x","mode":"755"}"#,
                "files.a.sh.mode is not a key",
            ),
            (
                r#"{"content":"x","encoding":"BASE64"}"#,
                r#"files.a.sh.encoding is "BASE64": give "utf8""#,
            ),
            (
                r#"{"content":"x","executable":"yes"}"#,
                r#"files.a.sh.executable is "yes": give true or false"#,
            ),
            (r#"{"content":5}"#, "files.a.sh.content is 5"),
            (r#"{"encoding":"base64"}"#, "files.a.sh has no `content`"),
            (
                r#"{"content":"x","content":"y"}"#,
                "files.a.sh.content is given twice",
            ),
            ("5", "files.a.sh to be the file's text"),
        ] {
            let e = file(entry);
            assert!(e.contains(want), "{entry}: {e}");
            assert!(!e.contains("untagged"), "{entry}: {e}");
        }
        let r = parse(r#"{"language":"bash","files":{"a.sh":{"content":"echo","executable":true},"b":"t"},"entryPoint":"a.sh"}"#)
            .unwrap()
            .into_run()
            .unwrap();
        let a = r.files.iter().find(|f| f.path == "a.sh").unwrap();
        assert_eq!((a.contents.as_slice(), a.mode), (&b"echo"[..], 0o755));
        let b = r.files.iter().find(|f| f.path == "b").unwrap();
        assert_eq!((b.contents.as_slice(), b.mode), (&b"t"[..], 0o644));
    }

    /// `stdin` is text, or `{content, encoding}` as a file (without `executable`), with
    /// errors that name it; `null` is no input.
    #[test]
    fn stdin_is_text_or_an_encoded_object() {
        let stdin = |v: &str| {
            parse(&format!(
                r#"{{"language":"bash","code":"cat","stdin":{v}}}"#
            ))
            .and_then(JsonRequest::into_run)
            .map(|r| r.stdin)
            .map_err(|e| e.to_string())
        };
        assert_eq!(
            stdin(r#""a\u00ffb""#),
            Ok(StdinSource::Bytes("a\u{ff}b".into()))
        );
        assert_eq!(
            stdin(r#"{"content":"/wA=","encoding":"base64"}"#),
            Ok(StdinSource::Bytes(vec![0xff, 0]))
        );
        assert_eq!(
            stdin(r#"{"content":"x y","encoding":"utf8"}"#),
            Ok(StdinSource::Bytes(b"x y".to_vec()))
        );
        assert_eq!(
            stdin(r#"{"content":"hi"}"#),
            Ok(StdinSource::Bytes(b"hi".to_vec()))
        );
        assert_eq!(stdin("null"), Ok(StdinSource::Null));
        for (v, want) in [
            (
                r#"{"content":"/wA=","executable":true}"#,
                "stdin.executable is not a key of `stdin`",
            ),
            (
                r#"{"content":"!!","encoding":"base64"}"#,
                "stdin: not valid base64: '!'",
            ),
            (
                r#"{"content":"x","encoding":"hex"}"#,
                r#"stdin.encoding is "hex""#,
            ),
            (r#"{"encoding":"base64"}"#, "stdin has no `content`"),
            (
                "5",
                "expected stdin to be the text as a string, or {\"content\"",
            ),
        ] {
            let e = stdin(v).unwrap_err();
            assert!(e.contains(want), "{v}: {e}");
        }
    }

    #[test]
    fn output_encoding_is_read_and_named_in_its_error() {
        use crate::outcome::OutputEncoding;
        let enc = |v: &str| {
            parse(&format!(
                r#"{{"language":"bash","code":"x","outputEncoding":{v}}}"#
            ))
            .map(|r| r.output_encoding)
            .map_err(|e| e.to_string())
        };
        assert_eq!(enc(r#""base64""#), Ok(Some(OutputEncoding::Base64)));
        assert_eq!(enc(r#""utf8""#), Ok(Some(OutputEncoding::Utf8)));
        assert_eq!(enc("null"), Ok(None));
        let e = enc(r#""hex""#).unwrap_err();
        assert!(e.contains(r#"outputEncoding is "hex": give "utf8""#), "{e}");
        let r = parse(r#"{"language":"bash","code":"x"}"#).unwrap();
        assert_eq!(r.output_encoding, None);
    }

    /// A request's id as its error result reads it from a text that may not be a request:
    /// only an object's `id` of a kind a request may carry.
    #[test]
    fn an_id_is_read_loosely_for_errors() {
        use serde_json::json;
        let id = |t: &str| loose_id(t.as_bytes());
        assert_eq!(
            id(r#"{"id": "a", "bogus": [1, {"x": 2}]}"#),
            Some(json!("a"))
        );
        assert_eq!(
            id(" \u{feff}{\"language\": 3, \"id\": -4}"),
            None,
            "a mark after blanks is no JSON"
        );
        assert_eq!(
            id("\u{feff} {\"language\": 3, \"id\": -4}"),
            Some(json!(-4))
        );
        assert_eq!(id(r#"[1]"#), None, "an array is not a request");
        assert_eq!(id(r#"{"id": 1.5}"#), None);
        assert_eq!(id(r#"{"id": null}"#), None);
        assert_eq!(id(r#"{"id": "a", "id": "b"}"#), None, "two ids name no one");
        assert_eq!(id(r#"{"id": "a""#), None, "not JSON");
        assert_eq!(
            id(&format!(r#"{{"id": "{}"}}"#, "é".repeat(128))),
            Some(json!("é".repeat(128)))
        );
        assert_eq!(
            id(&format!(r#"{{"id": "{}é"}}"#, "x".repeat(255))),
            None,
            "257 bytes"
        );
        let r = parse(r#"{"language":"bash","code":"x","id":"q"}"#).unwrap();
        assert_eq!(r.id, Some(json!("q")));
    }

    /// What `base64 FILE` prints (lines of 76 characters, a final newline) decodes.
    #[test]
    fn base64_with_line_breaks_decodes() {
        let data: Vec<u8> = (0..=255u8).collect();
        let encoded = base64::engine::general_purpose::STANDARD.encode(&data);
        let wrapped: Vec<String> = encoded
            .as_bytes()
            .chunks(76)
            .map(|c| String::from_utf8(c.to_vec()).unwrap())
            .collect();
        let content = format!("{}\n", wrapped.join("\n")) + " \r\n\t";
        let req = serde_json::json!({"language": "bash", "entryPoint": "d",
            "files": {"d": {"content": content, "encoding": "base64"}}});
        let r = parse(&req.to_string()).unwrap().into_run().unwrap();
        assert_eq!(r.files[0].contents, data);
    }

    #[test]
    fn unpaired_surrogates_are_found_in_strings_only() {
        let at = |t: &str| unpaired_surrogate(t).map(|l| (l.at, l.escape, l.high));
        assert_eq!(
            at(r#"{"a": "x\ud800y"}"#),
            Some((8, r"\ud800".into(), true))
        );
        assert_eq!(at(r#"{"a": "\uDC00"}"#), Some((7, r"\uDC00".into(), false)));
        // A high half followed by another high half: the first is the lone one.
        assert_eq!(
            at(r#"{"a": "\ud800\ud800"}"#),
            Some((7, r"\ud800".into(), true))
        );
        // A pair, an escaped backslash before `ud800`, other escapes: nothing.
        assert_eq!(at(r#"{"a": "\ud83d\ude00 \\ud800 \u0041\" \n"}"#), None);
        assert_eq!(at(r#"{"a": "\ud83d\ude00\udc00"}"#).map(|l| l.0), Some(19));
    }

    /// `"code": "print('\ud800')"` (JSON.stringify of a string cut inside an emoji) is
    /// refused, saying what the escape is, where, in which field, and what to send instead.
    #[test]
    fn an_unpaired_surrogate_is_refused_saying_what_it_is() {
        let e = parse("{\"language\": \"python\",\n \"code\": \"print('\\ud800')\"}")
            .unwrap_err()
            .to_string();
        for part in [
            "invalid request: code: the escape `\\ud800` at line 2, column 18",
            "first half of a UTF-16 surrogate pair",
            "not a character",
            "send the text as UTF-8",
            "\"encoding\": \"base64\"",
        ] {
            assert!(e.contains(part), "{part:?} in {e}");
        }
        let e = parse(r#"{"language": "python", "code": "1", "env": {"A": "x\udc00"}}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("invalid request: env.A: the escape `\\udc00` at line 1, column 52")
                && e.contains("second half"),
            "{e}"
        );
        let e = parse(r#"{"language": "python", "code": "1", "env": {"\ud800": "1"}}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("invalid request: a name in `env`: the escape"),
            "{e}"
        );
        let e = parse(r#"{"language": "python", "files": {"a.py": {"content": "\ud800"}}, "entryPoint": "a.py"}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("invalid request: files.a.py.content: the escape"),
            "{e}"
        );
        // A pair is a character.
        parse(r#"{"language": "python", "code": "print('\ud83d\ude00')"}"#).unwrap();
    }

    #[test]
    fn errors_name_the_problem() {
        let e = parse(r#"{"language":"python","code":"x","colour":1}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("colour"), "{e}");
        assert!(e.contains("a request's fields are: language"), "{e}");
        let e = parse(r#"{"code":"x"}"#).unwrap_err().to_string();
        assert!(e.contains("language"), "{e}");
        assert!(parse("{not json").is_err());
        for name in ["../x", "/abs", "a\u{0}b", &"n".repeat(300)] {
            let req =
                serde_json::json!({"language": "python", "files": {name: "x"}, "entryPoint": "x"})
                    .to_string();
            let e = parse(&req).unwrap().into_run().unwrap_err().to_string();
            assert!(e.contains("file name"), "{name:?}: {e}");
        }
        let e = parse(r#"{"language":"python","files":{"a.py":"x"}}"#)
            .unwrap()
            .into_run()
            .unwrap_err()
            .to_string();
        assert!(e.contains("entryPoint"), "{e}");
        let e =
            parse(r#"{"language":"python","files":{"a.py":"x","c.py":""},"entryPoint":"b.py"}"#)
                .unwrap()
                .into_run()
                .unwrap_err()
                .to_string();
        assert_eq!(
            e,
            "invalid request: entryPoint is `b.py`, which is not one of the request's files (a.py, c.py); name one of them, or give the program as `code`"
        );
        let r = parse(r#"{"language":"python","code":"x","config":{"network":"allow=pypi.org,*.example.org:8443","networkResolve":{"a.test":"127.0.0.1"}}}"#)
            .unwrap()
            .into_run()
            .unwrap();
        let crate::net::Network::Allow(a) = r.network else {
            panic!("allow expected")
        };
        assert_eq!(a.entries.len(), 2);
        assert_eq!(a.overrides.len(), 1);
        let e = parse(r#"{"language":"python","code":"x","config":{"network":"none","networkResolve":{"a":"1.2.3.4"}}}"#)
            .unwrap()
            .into_run()
            .unwrap_err();
        assert!(e.to_string().contains("networkResolve"), "{e}");
        let e = parse(r#"{"language":"python","code":"x","config":{"network":true}}"#)
            .unwrap()
            .into_run()
            .unwrap_err();
        assert!(e.to_string().contains("network"));
        let e = parse(r#"{"language":"python","files":{"a":{"content":"%%%","encoding":"base64"}},"entryPoint":"a"}"#)
            .unwrap()
            .into_run()
            .unwrap_err();
        assert!(e.to_string().contains("base64"));
        // The character and where it is, in words.
        let bad64 = |content: &str| {
            parse(&format!(
                r#"{{"language":"python","files":{{"a":{{"content":"{content}","encoding":"base64"}}}},"entryPoint":"a"}}"#
            ))
            .unwrap()
            .into_run()
            .unwrap_err()
            .to_string()
        };
        let e = bad64("iVBORw0...");
        assert!(
            e.contains("'.' at offset 7 is not a base64 character"),
            "{e}"
        );
        let e = bad64("iVBORw0");
        assert!(e.contains("cut short"), "{e}");
        let ok = parse(r#"{"language":"python","files":{"a":{"content":"iVBORw0KGgo=","encoding":"base64"}},"entryPoint":"a"}"#)
            .unwrap()
            .into_run();
        assert!(ok.is_ok());
    }
}
