//! Continue tokens of paginated lists.
//!
//! The token is kube-apiserver's own format, so that tokens are
//! interchangeable with what clients have seen from a real API server: the
//! base64 URL alphabet without padding of a small JSON object
//! `{"v":"meta.k8s.io/v1","rv":<revision>,"start":"<key>"}` where `start` is
//! the key to continue from, relative to the key prefix of the list.
//!
//! Decoding is strict in the same places as kube-apiserver's: an unknown
//! version, a zero revision, an empty key and, most importantly, a key that is
//! not already in canonical path form are refused, so that a forged token can
//! never make a list range outside its own prefix (no `..`, no `//`, no `.`).
//! The error texts are kube-apiserver's (`continue key is not valid: ...`).

use crate::read::ContinueFrom;
use crate::status::{ListMeta, Status};
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine as _;
use serde_json::Value;

/// The only token version kube-apiserver has ever issued.
pub const TOKEN_VERSION: &str = "meta.k8s.io/v1";

/// Revision carried by a token that continues "at the latest revision", as
/// issued with a 410 after the revision of the first page was compacted.
pub const LATEST_REVISION: i64 = -1;

/// URL-safe alphabet, no padding on encode, padding refused on decode, and
/// (like Go's non-strict decoder) stray low bits in the last symbol tolerated.
const ENGINE: GeneralPurpose = GeneralPurpose::new(
    &alphabet::URL_SAFE,
    GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_padding_mode(DecodePaddingMode::RequireNone)
        .with_decode_allow_trailing_bits(true),
);

/// Why a continue token was refused. `Display` gives kube-apiserver's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContinueTokenError {
    /// Not base64 (URL alphabet, no padding).
    #[error("continue key is not valid: {0}")]
    Base64(String),
    /// Not a JSON object of the expected shape.
    #[error("continue key is not valid: {0}")]
    Json(String),
    /// `rv` missing or zero.
    #[error("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")]
    InvalidStartRevision,
    /// `start` missing or empty.
    #[error("continue key is not valid: encoded start key empty (version meta.k8s.io/v1)")]
    EmptyStartKey,
    /// `start` is not a canonical path (it contains `..`, `.`, `//` or ends
    /// with `/`); the offending key is carried as kube-apiserver prints it.
    #[error("continue key is not valid: {0}")]
    InvalidKey(String),
    /// `v` is not `meta.k8s.io/v1`.
    #[error("continue key is not valid: server does not recognize this encoded version {0}")]
    UnrecognizedVersion(String),
}

impl ContinueTokenError {
    /// The 400 kube-apiserver answers a list with a bad `continue` with.
    pub fn to_status(&self) -> Status {
        Status::bad_request(format!("invalid continue token: {self}"))
    }
}

impl From<ContinueTokenError> for Status {
    fn from(e: ContinueTokenError) -> Self {
        e.to_status()
    }
}

/// Encodes a token continuing at `start_key` (relative to the list's key
/// prefix, without a leading `/`) at `revision` (the revision of the first
/// page, or [`LATEST_REVISION`]).
///
/// kube-apiserver continues *after* the last returned item by encoding that
/// item's relative key followed by a NUL byte (`"ns/name\u{0}"`); callers that
/// want byte-identical tokens should do the same.
pub fn encode(start_key: &str, revision: i64) -> String {
    let mut json = String::with_capacity(start_key.len() + 48);
    json.push_str("{\"v\":");
    push_go_json_string(&mut json, TOKEN_VERSION);
    json.push_str(",\"rv\":");
    json.push_str(&revision.to_string());
    json.push_str(",\"start\":");
    push_go_json_string(&mut json, start_key);
    json.push('}');
    ENGINE.encode(json.as_bytes())
}

/// Decodes and validates a token. The start key returned is relative to the
/// list's key prefix, never starts with `/` and never contains `.`/`..`
/// segments or empty segments, so `prefix + start_key` stays inside the
/// prefix. The revision is non-zero: positive is the revision of the first
/// page, negative means "continue at the latest revision".
pub fn decode(token: &str) -> Result<ContinueFrom, ContinueTokenError> {
    // Go's base64 decoder skips CR and LF anywhere in the input.
    let cleaned: Vec<u8> = token
        .bytes()
        .filter(|b| *b != b'\r' && *b != b'\n')
        .collect();
    let data = ENGINE
        .decode(&cleaned)
        .map_err(|e| ContinueTokenError::Base64(base64_error_text(&e, &cleaned)))?;
    let fields = parse_fields(&data)?;

    if fields.version != TOKEN_VERSION {
        return Err(ContinueTokenError::UnrecognizedVersion(fields.version));
    }
    if fields.revision == 0 {
        return Err(ContinueTokenError::InvalidStartRevision);
    }
    if fields.start.is_empty() {
        return Err(ContinueTokenError::EmptyStartKey);
    }
    let rooted = fields.start.strip_prefix('/').unwrap_or(&fields.start);
    if !is_canonical_relative(rooted) {
        return Err(ContinueTokenError::InvalidKey(fields.start));
    }
    Ok(ContinueFrom {
        start_key: rooted.to_string(),
        revision: fields.revision,
    })
}

/// The 410 `Expired` a paginated list answers when the revision of its first
/// page has been compacted away. It carries, in `metadata.continue`, a token
/// continuing at `start_key` at the latest revision, with kube-apiserver's
/// wording of that offer.
pub fn expired_status(start_key: &str) -> Status {
    let mut status = Status::expired(
        "The provided continue parameter is too old to display a consistent list result. \
         You can start a new list without the continue parameter, or use the continue token \
         in this response to retrieve the remainder of the results. Continuing with the \
         provided token results in an inconsistent list - objects that were created, \
         modified, or deleted between the time the first chunk was returned and now may \
         show up in the list.",
    );
    status.metadata = ListMeta {
        resource_version: String::new(),
        continue_: encode(start_key, LATEST_REVISION),
    };
    status
}

/// The fields of a token after JSON decoding, Go style: absent or `null`
/// fields keep their zero value.
struct Fields {
    version: String,
    revision: i64,
    start: String,
}

fn parse_fields(data: &[u8]) -> Result<Fields, ContinueTokenError> {
    let value: Value = serde_json::from_slice(data).map_err(|e| {
        ContinueTokenError::Json(if e.is_eof() {
            "unexpected end of JSON input".to_string()
        } else {
            e.to_string()
        })
    })?;
    let mut fields = Fields {
        version: String::new(),
        revision: 0,
        start: String::new(),
    };
    let map = match value {
        Value::Object(map) => map,
        // Go leaves the struct untouched when decoding `null`.
        Value::Null => return Ok(fields),
        other => {
            return Err(ContinueTokenError::Json(format!(
                "json: cannot unmarshal {} into Go value of type storage.continueToken",
                go_json_type(&other)
            )))
        }
    };
    // Go matches keys case-insensitively, keeps the last of duplicates and
    // reports the first type error after decoding the rest.
    let mut first_error: Option<ContinueTokenError> = None;
    for (key, value) in &map {
        let outcome = if key.eq_ignore_ascii_case("v") {
            set_string(value, "v", &mut fields.version)
        } else if key.eq_ignore_ascii_case("start") {
            set_string(value, "start", &mut fields.start)
        } else if key.eq_ignore_ascii_case("rv") {
            set_int(value, "rv", &mut fields.revision)
        } else if key.eq_ignore_ascii_case("rc") {
            let mut remaining = 0;
            set_int(value, "rc", &mut remaining)
        } else {
            Ok(())
        };
        if let Err(e) = outcome {
            first_error.get_or_insert(e);
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(fields),
    }
}

fn set_string(value: &Value, field: &str, out: &mut String) -> Result<(), ContinueTokenError> {
    match value {
        Value::String(s) => {
            out.clone_from(s);
            Ok(())
        }
        Value::Null => Ok(()),
        other => Err(type_error(other, field, "string")),
    }
}

fn set_int(value: &Value, field: &str, out: &mut i64) -> Result<(), ContinueTokenError> {
    match value {
        Value::Number(n) => match n.as_i64() {
            Some(i) => {
                *out = i;
                Ok(())
            }
            None => Err(ContinueTokenError::Json(format!(
                "json: cannot unmarshal number {n} into Go struct field continueToken.{field} of type int64"
            ))),
        },
        Value::Null => Ok(()),
        other => Err(type_error(other, field, "int64")),
    }
}

fn type_error(value: &Value, field: &str, go_type: &str) -> ContinueTokenError {
    ContinueTokenError::Json(format!(
        "json: cannot unmarshal {} into Go struct field continueToken.{field} of type {go_type}",
        go_json_type(value)
    ))
}

fn go_json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// True when `"/" + key` is already what Go's `path.Clean` would make of it:
/// the root itself, or non-empty segments none of which is `.` or `..`.
fn is_canonical_relative(key: &str) -> bool {
    key.is_empty()
        || key
            .split('/')
            .all(|segment| !segment.is_empty() && segment != "." && segment != "..")
}

/// Go's wording for a base64 failure, with the offset into the input.
fn base64_error_text(e: &base64::DecodeError, input: &[u8]) -> String {
    let offset = match *e {
        base64::DecodeError::InvalidByte(offset, _) => offset,
        base64::DecodeError::InvalidLastSymbol { offset, .. } => offset,
        base64::DecodeError::InvalidLength(len) => len.min(input.len()),
        base64::DecodeError::InvalidPadding => {
            input.iter().position(|b| *b == b'=').unwrap_or(input.len())
        }
    };
    format!("illegal base64 data at input byte {offset}")
}

/// Appends `s` as a JSON string the way Go's `encoding/json` writes it
/// (HTML-sensitive characters and U+2028/U+2029 escaped).
fn push_go_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn raw(json: &str) -> String {
        ENGINE.encode(json.as_bytes())
    }

    #[test]
    fn encodes_like_kube_apiserver() {
        // {"v":"meta.k8s.io/v1","rv":10245,"start":"default/web\u0000"}
        let token = encode("default/web\u{0}", 10245);
        let json = ENGINE.decode(token.as_bytes()).unwrap();
        assert_eq!(
            String::from_utf8(json).unwrap(),
            r#"{"v":"meta.k8s.io/v1","rv":10245,"start":"default/web\u0000"}"#
        );
        assert!(!token.contains('='));
        assert!(!token.contains('+') && !token.contains('/'));
    }

    #[test]
    fn escapes_html_characters_as_go_does() {
        let token = encode("a<b>&c", 1);
        let json = String::from_utf8(ENGINE.decode(token.as_bytes()).unwrap()).unwrap();
        assert!(
            json.contains(r#""start":"a\u003cb\u003e\u0026c""#),
            "{json}"
        );
        assert_eq!(decode(&token).unwrap().start_key, "a<b>&c");
    }

    #[test]
    fn decodes_a_token_issued_by_kube_apiserver() {
        // The shape kube-apiserver issues: start "kube-system/coredns\0", rv 1187.
        let token = raw(r#"{"v":"meta.k8s.io/v1","rv":1187,"start":"kube-system/coredns\u0000"}"#);
        assert_eq!(
            decode(&token).unwrap(),
            ContinueFrom {
                start_key: "kube-system/coredns\u{0}".into(),
                revision: 1187
            }
        );
    }

    #[test]
    fn latest_revision_round_trips() {
        let from = decode(&encode("ns/a", LATEST_REVISION)).unwrap();
        assert_eq!(from.revision, -1);
    }

    #[test]
    fn leading_slash_is_stripped() {
        let from = decode(&raw(r#"{"v":"meta.k8s.io/v1","rv":3,"start":"/ns/a"}"#)).unwrap();
        assert_eq!(from.start_key, "ns/a");
        // The root itself stays inside the prefix: it continues from its start.
        let from = decode(&raw(r#"{"v":"meta.k8s.io/v1","rv":3,"start":"/"}"#)).unwrap();
        assert_eq!(from.start_key, "");
    }

    #[test]
    fn rejects_bad_base64() {
        let e = decode("not base64!").unwrap_err();
        assert!(matches!(e, ContinueTokenError::Base64(_)));
        assert!(e
            .to_string()
            .starts_with("continue key is not valid: illegal base64 data at input byte"));
        // Padding is refused (RawURLEncoding).
        let padded = base64::engine::general_purpose::URL_SAFE.encode(b"{\"v\":1}");
        assert!(padded.ends_with('='));
        assert!(matches!(
            decode(&padded),
            Err(ContinueTokenError::Base64(_))
        ));
        // The standard alphabet's '+' and '/' are not URL-safe symbols.
        assert!(matches!(decode("ab+/"), Err(ContinueTokenError::Base64(_))));
    }

    #[test]
    fn newlines_are_ignored_like_go() {
        let token = encode("ns/a", 7);
        let (a, b) = token.split_at(5);
        assert_eq!(decode(&format!("{a}\r\n{b}")).unwrap().start_key, "ns/a");
    }

    #[test]
    fn rejects_bad_json() {
        let e = decode(&raw("{")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "continue key is not valid: unexpected end of JSON input"
        );
        assert!(matches!(
            decode(&raw("[1]")),
            Err(ContinueTokenError::Json(_))
        ));
        assert_eq!(
            decode(&raw(r#"{"v":"meta.k8s.io/v1","rv":"5","start":"a"}"#))
                .unwrap_err()
                .to_string(),
            "continue key is not valid: json: cannot unmarshal string into Go struct field continueToken.rv of type int64"
        );
        assert!(matches!(
            decode(&raw(r#"{"v":"meta.k8s.io/v1","rv":1.5,"start":"a"}"#)),
            Err(ContinueTokenError::Json(_))
        ));
        assert!(matches!(
            decode(&raw(r#"{"v":"meta.k8s.io/v1","rv":1,"start":7}"#)),
            Err(ContinueTokenError::Json(_))
        ));
    }

    #[test]
    fn rejects_unknown_version() {
        let e = decode(&raw(r#"{"v":"v2","rv":1,"start":"a"}"#)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "continue key is not valid: server does not recognize this encoded version v2"
        );
        // `null` decodes to an empty token, whose version is empty.
        let e = decode(&raw("null")).unwrap_err();
        assert_eq!(e, ContinueTokenError::UnrecognizedVersion(String::new()));
    }

    #[test]
    fn rejects_zero_revision_and_empty_key() {
        let e = decode(&raw(r#"{"v":"meta.k8s.io/v1","rv":0,"start":"a"}"#)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
        );
        let e = decode(&raw(r#"{"v":"meta.k8s.io/v1","start":"a"}"#)).unwrap_err();
        assert_eq!(e, ContinueTokenError::InvalidStartRevision);
        let e = decode(&raw(r#"{"v":"meta.k8s.io/v1","rv":4,"start":""}"#)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "continue key is not valid: encoded start key empty (version meta.k8s.io/v1)"
        );
    }

    #[test]
    fn rejects_path_traversal() {
        for key in [
            "..",
            "../secrets/x",
            "ns/../../x",
            "a/./b",
            "a//b",
            "//a",
            "a/",
            ".",
            "/..",
        ] {
            let token = raw(&format!(
                r#"{{"v":"meta.k8s.io/v1","rv":9,"start":"{key}"}}"#
            ));
            let e = decode(&token).unwrap_err();
            assert_eq!(e, ContinueTokenError::InvalidKey(key.to_string()), "{key}");
            assert_eq!(e.to_string(), format!("continue key is not valid: {key}"));
        }
        // Dots inside a segment are fine.
        let token = raw(r#"{"v":"meta.k8s.io/v1","rv":9,"start":"ns/a..b"}"#);
        assert_eq!(decode(&token).unwrap().start_key, "ns/a..b");
    }

    #[test]
    fn keys_match_case_insensitively_like_go() {
        let token = raw(r#"{"V":"meta.k8s.io/v1","RV":9,"Start":"ns/a","extra":true}"#);
        assert_eq!(
            decode(&token).unwrap(),
            ContinueFrom {
                start_key: "ns/a".into(),
                revision: 9
            }
        );
    }

    #[test]
    fn status_of_a_bad_token() {
        let s = decode("%%%").unwrap_err().to_status();
        assert_eq!(s.code, 400);
        assert_eq!(s.reason, "BadRequest");
        assert!(s
            .message
            .starts_with("invalid continue token: continue key is not valid: "));
    }

    #[test]
    fn expired_status_offers_a_latest_token() {
        let s = expired_status("ns/b\u{0}");
        assert_eq!(s.code, 410);
        assert_eq!(s.reason, "Expired");
        let from = decode(&s.metadata.continue_).unwrap();
        assert_eq!(from.start_key, "ns/b\u{0}");
        assert_eq!(from.revision, LATEST_REVISION);
    }

    fn segment() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9._<>&\"\\\\\u{0}\u{2028}é-]{1,12}"
            .prop_filter("not . or ..", |s| s != "." && s != "..")
    }

    fn clean_key() -> impl Strategy<Value = String> {
        prop::collection::vec(segment(), 1..5).prop_map(|segs| segs.join("/"))
    }

    proptest! {
        #[test]
        fn decode_never_panics(token in any::<String>()) {
            let _ = decode(&token);
        }

        #[test]
        fn decode_never_panics_on_encoded_json(json in any::<String>()) {
            let _ = decode(&raw(&json));
        }

        #[test]
        fn round_trips(key in clean_key(), rv in any::<i64>().prop_filter("non-zero", |r| *r != 0)) {
            let from = decode(&encode(&key, rv)).unwrap();
            prop_assert_eq!(from.start_key, key);
            prop_assert_eq!(from.revision, rv);
        }

        #[test]
        fn decoded_keys_stay_inside_the_prefix(
            parts in prop::collection::vec(
                prop_oneof![Just("..".to_string()), Just(".".to_string()), Just(String::new()), "[a-z]{1,3}"],
                1..6
            ),
            lead in any::<bool>(),
            rv in 1i64..1000,
        ) {
            let key = format!("{}{}", if lead { "/" } else { "" }, parts.join("/"));
            if let Ok(from) = decode(&encode(&key, rv)) {
                prop_assert!(!from.start_key.starts_with('/'));
                prop_assert!(from.start_key.split('/').all(|s| s != ".." && s != "."));
                prop_assert!(!from.start_key.contains("//"));
            }
        }
    }
}
