//! CBOR (RFC 8949) to and from the JSON values the server works with, by
//! kube's rules for `application/cbor`.
//!
//! Encoding (kube's encode mode):
//! * every top-level item is enclosed in the self-described CBOR tag 55799
//!   (the bytes `d9 d9 f7`), kube's "magic number" for CBOR;
//! * strings, map keys included, are byte strings (major type 2): kube
//!   writes Go strings so and leaves UTF-8 checking to decoders;
//! * the `[]byte` fields of built-in kinds (`format: byte` in the schema:
//!   Secret `data`, ConfigMap `binaryData`, `caBundle`, ...), base64 text
//!   in JSON, are their raw bytes in tag 22 ("expected later base64
//!   encoding"), as kube writes `[]byte` ([`encode_object`]); custom
//!   resources have no such fields (kube holds them as plain maps);
//! * integers and lengths in their shortest form, floats in the shortest
//!   width that keeps the value (half, single, double), no indefinite
//!   lengths.
//!
//! Map entries keep the value's order (kube writes `kind`, `apiVersion`,
//! then the fields; its responses shuffle map keys anyway, so no order can
//! be relied on).
//!
//! Decoding (kube's decode mode, as a value of `interface{}` sees it):
//! * exactly one data item, nothing after it; indefinite lengths allowed;
//! * maps with duplicate keys are refused (a text and a byte string with the
//!   same content are the same key), and keys must be strings;
//! * byte and text strings both become strings; a text string must be
//!   UTF-8; a byte string may hold any bytes (kube keeps them in a Go
//!   string), and those that are not UTF-8 become U+FFFD, as Go's JSON
//!   encoder writes such a string;
//! * tags: 0 (an RFC 3339 text string) and 1 (epoch seconds) become RFC 3339
//!   strings, 21, 22 and 23 around a byte string become its base64url,
//!   base64 and base16 text, 2 and 3 (bignums) are refused, any other tag
//!   (55799 included) stands for its content;
//! * integers outside int64, NaN, infinities and simple values other than
//!   false, true and null are refused;
//! * nesting deeper than [`MAX_DEPTH`] is refused (kube allows 10000; the
//!   server's JSON decoder stops at 128, and CBOR bodies get the same).
//!
//! The heads are read and written with `ciborium-ll`; the rules above are
//! this module's.

use crate::schema::{Shape, TypeRef};
use base64::Engine;
use ciborium_ll::{Decoder, Encoder, Header};
use serde_json::{Map, Number, Value};

/// The head of the self-described CBOR tag (55799) that starts every item
/// kube writes.
pub const SELF_DESCRIBED: [u8; 3] = [0xd9, 0xd9, 0xf7];

/// How deep arrays, maps and tags may nest in a decoded body.
pub const MAX_DEPTH: usize = 128;

/// Why a CBOR body does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("unexpected end of CBOR data")]
    Truncated,
    #[error("malformed CBOR data at offset {0}")]
    Malformed(usize),
    #[error("{0} bytes of extraneous data after the CBOR data item")]
    Extraneous(usize),
    #[error("duplicate map key {0:?}")]
    DuplicateKey(String),
    #[error("map key must be a string")]
    KeyNotString,
    #[error("invalid UTF-8 in a CBOR string")]
    InvalidUtf8,
    #[error("integer {0} overflows int64")]
    IntegerOverflow(String),
    #[error("floating-point NaN or infinity is not allowed")]
    NotFinite,
    #[error("simple value {0} is not allowed (only false, true and null)")]
    Simple(u8),
    #[error("tag {0} (bignum) is not allowed")]
    Bignum(u64),
    #[error("tag {tag}: {message}")]
    BadTag { tag: u64, message: String },
    #[error("exceeded the maximum nesting depth of {MAX_DEPTH}")]
    TooDeep,
}

/// `value` as one self-described CBOR item.
pub fn encode(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    encode_into(&mut out, value);
    out
}

/// Appends `value` as one self-described CBOR item.
pub fn encode_into(out: &mut Vec<u8>, value: &Value) {
    out.extend_from_slice(&SELF_DESCRIBED);
    encode_item(out, value);
}

/// An object as kube writes it: [`encode`], except that the `[]byte` fields
/// of a built-in kind (found by its `apiVersion` and `kind` in the schema
/// facts) are tag 22 byte strings of the bytes their base64 text holds.
pub fn encode_object(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(&SELF_DESCRIBED);
    match builtin_type(value) {
        Some(ty) => encode_typed(&mut out, value, ty),
        None => encode_item(&mut out, value),
    }
    out
}

/// The schema of a built-in kind's object, from its `apiVersion` and `kind`.
fn builtin_type(value: &Value) -> Option<TypeRef<'static>> {
    let api_version = value.get("apiVersion")?.as_str()?;
    let kind = value.get("kind")?.as_str()?;
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    crate::schema::builtin().by_gvk(group, version, kind)
}

fn encode_typed(out: &mut Vec<u8>, value: &Value, ty: TypeRef<'_>) {
    match value {
        Value::String(s) if ty.format() == Some("byte") => {
            match base64::engine::general_purpose::STANDARD.decode(s) {
                Ok(raw) => {
                    push(out, Header::Tag(22));
                    push(out, Header::Bytes(Some(raw.len())));
                    out.extend_from_slice(&raw);
                }
                // Not base64 (validation should have refused it): as text.
                Err(_) => write_str(out, s),
            }
        }
        Value::Array(items) => match ty.items() {
            Some(item_ty) => {
                write_array_head(out, items.len());
                for item in items {
                    encode_typed(out, item, item_ty);
                }
            }
            None => encode_item(out, value),
        },
        Value::Object(map) if matches!(ty.shape(), Shape::Object | Shape::Map) => {
            write_map_head(out, map.len());
            for (k, v) in map {
                write_str(out, k);
                match ty.child(k) {
                    Some(child) => encode_typed(out, v, child),
                    None => encode_item(out, v),
                }
            }
        }
        _ => encode_item(out, value),
    }
}

/// Appends `value` without the self-described tag (an item inside another).
pub fn encode_item(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.push(0xf6),
        Value::Bool(false) => out.push(0xf4),
        Value::Bool(true) => out.push(0xf5),
        Value::Number(n) => {
            let header = if let Some(u) = n.as_u64() {
                Header::Positive(u)
            } else if let Some(i) = n.as_i64() {
                // i < 0 here: CBOR stores -1 - i.
                Header::Negative(!(i as u64))
            } else {
                Header::Float(n.as_f64().unwrap_or_default())
            };
            push(out, header);
        }
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            write_array_head(out, items.len());
            for item in items {
                encode_item(out, item);
            }
        }
        Value::Object(map) => {
            write_map_head(out, map.len());
            for (k, v) in map {
                write_str(out, k);
                encode_item(out, v);
            }
        }
    }
}

/// Appends a string the way kube writes Go strings: a byte string.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    push(out, Header::Bytes(Some(s.len())));
    out.extend_from_slice(s.as_bytes());
}

/// Appends the head of a map of `len` entries.
pub fn write_map_head(out: &mut Vec<u8>, len: usize) {
    push(out, Header::Map(Some(len)));
}

/// Appends the head of an array of `len` items.
pub fn write_array_head(out: &mut Vec<u8>, len: usize) {
    push(out, Header::Array(Some(len)));
}

fn push(out: &mut Vec<u8>, header: Header) {
    // Writing to a Vec cannot fail.
    let _ = Encoder::from(&mut *out).push(header);
}

/// Decodes one CBOR data item (kube's rules, see the module docs) into the
/// JSON value it stands for.
pub fn decode(input: &[u8]) -> Result<Value, Error> {
    let mut d = Reader {
        input,
        dec: Decoder::from(input),
    };
    let value = d.item(0)?;
    let rest = input.len() - d.offset();
    if rest != 0 {
        return Err(Error::Extraneous(rest));
    }
    Ok(value)
}

/// Decodes a CBOR sequence (RFC 8742), such as a watch stream: the items one
/// after another, each by [`decode`]'s rules.
pub fn decode_sequence(input: &[u8]) -> Result<Vec<Value>, Error> {
    let mut d = Reader {
        input,
        dec: Decoder::from(input),
    };
    let mut items = Vec::new();
    while d.offset() < input.len() {
        items.push(d.item(0)?);
    }
    Ok(items)
}

struct Reader<'a> {
    input: &'a [u8],
    dec: Decoder<&'a [u8]>,
}

/// What a head stands for once tags are read.
enum Item {
    Value(Value),
    Break,
}

impl Reader<'_> {
    fn offset(&mut self) -> usize {
        self.dec.offset()
    }

    fn remaining(&mut self) -> usize {
        self.input.len() - self.dec.offset()
    }

    fn pull(&mut self) -> Result<Header, Error> {
        let at = self.offset();
        match self.dec.pull() {
            Ok(Header::Simple(v)) if v < 32 && self.input.get(at) == Some(&0xf8) => {
                // A one-byte simple value in the two-byte form is not
                // well-formed (RFC 8949 section 3.3).
                Err(Error::Malformed(at))
            }
            Ok(h) => Ok(h),
            Err(ciborium_ll::Error::Io(_)) => Err(Error::Truncated),
            Err(ciborium_ll::Error::Syntax(at)) => Err(Error::Malformed(at)),
        }
    }

    fn item(&mut self, depth: usize) -> Result<Value, Error> {
        match self.next(depth)? {
            Item::Value(v) => Ok(v),
            Item::Break => Err(Error::Malformed(self.offset() - 1)),
        }
    }

    fn next(&mut self, depth: usize) -> Result<Item, Error> {
        if depth > MAX_DEPTH {
            return Err(Error::TooDeep);
        }
        let at = self.offset();
        let header = self.pull()?;
        self.value_from(header, at, depth)
    }

    /// The item whose head, read at `at`, is `header`.
    fn value_from(&mut self, header: Header, at: usize, depth: usize) -> Result<Item, Error> {
        if depth > MAX_DEPTH {
            return Err(Error::TooDeep);
        }
        Ok(Item::Value(match header {
            Header::Positive(u) => match i64::try_from(u) {
                Ok(i) => Value::from(i),
                Err(_) => return Err(Error::IntegerOverflow(u.to_string())),
            },
            Header::Negative(n) => match i64::try_from(n) {
                Ok(i) => Value::from(-1 - i),
                Err(_) => return Err(Error::IntegerOverflow(format!("-1-{n}"))),
            },
            Header::Float(f) => Value::Number(Number::from_f64(f).ok_or(Error::NotFinite)?),
            Header::Simple(20) => Value::Bool(false),
            Header::Simple(21) => Value::Bool(true),
            Header::Simple(22) => Value::Null,
            Header::Simple(v) => return Err(Error::Simple(v)),
            Header::Break => return Ok(Item::Break),
            Header::Bytes(len) => {
                let bytes = self.string(len, false, at)?;
                Value::String(match String::from_utf8(bytes) {
                    Ok(s) => s,
                    Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
                })
            }
            Header::Text(len) => Value::String(utf8(self.string(len, true, at)?)?),
            Header::Array(len) => {
                let mut items = Vec::with_capacity(len.unwrap_or(0).min(self.remaining()));
                match len {
                    Some(n) => {
                        for _ in 0..n {
                            items.push(self.item(depth + 1)?);
                        }
                    }
                    None => {
                        while let Item::Value(v) = self.next(depth + 1)? {
                            items.push(v);
                        }
                    }
                }
                Value::Array(items)
            }
            Header::Map(len) => {
                let mut map = Map::new();
                let mut entry = |r: &mut Self, key: Value| -> Result<(), Error> {
                    let Value::String(key) = key else {
                        return Err(Error::KeyNotString);
                    };
                    let value = r.item(depth + 1)?;
                    if map.contains_key(&key) {
                        return Err(Error::DuplicateKey(key));
                    }
                    map.insert(key, value);
                    Ok(())
                };
                match len {
                    Some(n) => {
                        for _ in 0..n {
                            let key = self.item(depth + 1)?;
                            entry(self, key)?;
                        }
                    }
                    None => {
                        while let Item::Value(key) = self.next(depth + 1)? {
                            entry(self, key)?;
                        }
                    }
                }
                Value::Object(map)
            }
            Header::Tag(tag) => self.tagged(tag, depth)?,
        }))
    }

    /// The bytes of a byte (`text == false`) or text string whose head was
    /// just read; an indefinite-length string is the concatenation of its
    /// definite chunks of the same major type.
    fn string(&mut self, len: Option<usize>, text: bool, at: usize) -> Result<Vec<u8>, Error> {
        match len {
            Some(n) => self.chunk(n),
            None => {
                let mut out = Vec::new();
                loop {
                    let chunk_at = self.offset();
                    match self.pull()? {
                        Header::Break => return Ok(out),
                        Header::Bytes(Some(n)) if !text => out.extend(self.chunk(n)?),
                        Header::Text(Some(n)) if text => {
                            let chunk = self.chunk(n)?;
                            // Each chunk of a text string is text itself.
                            std::str::from_utf8(&chunk).map_err(|_| Error::InvalidUtf8)?;
                            out.extend(chunk);
                        }
                        _ => return Err(Error::Malformed(chunk_at.max(at))),
                    }
                }
            }
        }
    }

    fn chunk(&mut self, n: usize) -> Result<Vec<u8>, Error> {
        // Checked before allocating: a head may claim any length.
        if n > self.remaining() {
            return Err(Error::Truncated);
        }
        let mut buf = vec![0; n];
        ciborium_io::Read::read_exact(&mut self.dec, &mut buf).map_err(|_| Error::Truncated)?;
        Ok(buf)
    }

    /// The value of tag `tag` whose head was just read.
    fn tagged(&mut self, tag: u64, depth: usize) -> Result<Value, Error> {
        let bad = |message: &str| Error::BadTag {
            tag,
            message: message.to_string(),
        };
        match tag {
            2 | 3 => Err(Error::Bignum(tag)),
            0 => {
                let at = self.offset();
                match self.pull()? {
                    Header::Text(len) => {
                        let s = utf8(self.string(len, true, at)?)?;
                        chrono::DateTime::parse_from_rfc3339(&s)
                            .map_err(|e| bad(&format!("{s:?} is not an RFC 3339 time: {e}")))?;
                        Ok(Value::String(s))
                    }
                    _ => Err(bad("must be followed by a text string")),
                }
            }
            1 => match self.item(depth + 1)? {
                Value::Number(n) => epoch_to_rfc3339(&n).ok_or_else(|| {
                    bad("the time cannot be written in RFC 3339 (year outside 0-9999)")
                }),
                _ => Err(bad("must be followed by an integer or a float")),
            },
            21..=23 => {
                let at = self.offset();
                match self.pull()? {
                    Header::Bytes(len) => {
                        let raw = self.string(len, false, at)?;
                        Ok(Value::String(match tag {
                            21 => base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw),
                            22 => base64::engine::general_purpose::STANDARD.encode(raw),
                            _ => raw.iter().map(|b| format!("{b:02x}")).collect(),
                        }))
                    }
                    // Only a byte string is converted; anything else stands
                    // for itself.
                    other => match self.value_from(other, at, depth + 1)? {
                        Item::Value(v) => Ok(v),
                        Item::Break => Err(Error::Malformed(at)),
                    },
                }
            }
            _ => self.item(depth + 1),
        }
    }
}

fn utf8(bytes: Vec<u8>) -> Result<String, Error> {
    String::from_utf8(bytes).map_err(|_| Error::InvalidUtf8)
}

/// Epoch seconds as kube writes a time: RFC 3339 in UTC, fractional
/// seconds without trailing zeros.
fn epoch_to_rfc3339(n: &Number) -> Option<Value> {
    let (secs, nanos) = if let Some(i) = n.as_i64() {
        (i, 0)
    } else {
        let f = n.as_f64()?;
        let secs = f.floor();
        if !(-1e15..=1e15).contains(&secs) {
            return None;
        }
        (
            secs as i64,
            ((f - secs) * 1e9).round().min(999_999_999.0) as u32,
        )
    };
    let t = chrono::DateTime::from_timestamp(secs, nanos)?;
    if !(0..=9999).contains(&chrono::Datelike::year(&t)) {
        return None;
    }
    let mut s = t.format("%Y-%m-%dT%H:%M:%S").to_string();
    if nanos != 0 {
        let frac = format!("{nanos:09}");
        s.push('.');
        s.push_str(frac.trim_end_matches('0'));
    }
    s.push('Z');
    Some(Value::String(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn encodes_as_kube_does() {
        // 55799({h'kind': h'Pod', h'n': 1, h'f': 1.5, h'l': [null, true]})
        let v = json!({"kind": "Pod", "n": 1, "f": 1.5, "l": [null, true], "neg": -2});
        assert_eq!(
            encode(&v),
            hex("d9d9f7a5446b696e6443506f64416e014166f93e00416c82f6f5436e656721")
        );
        // Floats in their shortest exact width.
        let mut out = Vec::new();
        encode_item(&mut out, &json!(100000.5));
        assert_eq!(out, hex("fa47c35040"));
        out.clear();
        encode_item(&mut out, &json!(0.1));
        assert_eq!(out, hex("fb3fb999999999999a"));
        out.clear();
        encode_item(&mut out, &json!(u64::MAX));
        assert_eq!(out, hex("1bffffffffffffffff"));
    }

    #[test]
    fn byte_fields_of_built_in_kinds_are_tagged_bytes() {
        let secret = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s"}, "data": {"k": "aGVsbG8="}, "type": "Opaque"});
        let bytes = encode_object(&secret);
        // 22(h'hello') where the JSON has "aGVsbG8=".
        let tagged = hex("d64568656c6c6f");
        assert!(bytes.windows(tagged.len()).any(|w| w == tagged));
        assert_eq!(decode(&bytes).unwrap(), secret);
        // Other strings of the kind stay byte strings of their text.
        assert!(bytes.windows(7).any(|w| w == hex("464f7061717565")));
        // A custom resource with the same shape is written as it is.
        let cr = json!({"apiVersion": "example.com/v1", "kind": "Secret",
            "data": {"k": "aGVsbG8="}});
        assert_eq!(encode_object(&cr), encode(&cr));
        // Text that is not base64 stays text rather than failing.
        let odd = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "binaryData": {"k": "not base64!"}});
        assert_eq!(decode(&encode_object(&odd)).unwrap(), odd);
    }

    #[test]
    fn decodes_strings_tags_and_numbers() {
        // Text and byte strings, indefinite lengths, the self-described tag.
        let v = decode(&hex("d9d9f7bf616161624262637f6178617affff")).unwrap();
        assert_eq!(v, json!({"a": "b", "bc": "xz"}));
        // Tag 22 around bytes is their base64, 21 base64url, 23 base16.
        assert_eq!(decode(&hex("d64568656c6c6f")).unwrap(), json!("aGVsbG8="));
        assert_eq!(decode(&hex("d54268ff")).unwrap(), json!("aP8"));
        assert_eq!(decode(&hex("d74268ff")).unwrap(), json!("68ff"));
        // Tag 0 must hold an RFC 3339 text string; tag 1 epoch seconds.
        assert_eq!(
            decode(&hex("c074323030362d30312d30325431353a30343a30355a")).unwrap(),
            json!("2006-01-02T15:04:05Z")
        );
        assert!(decode(&hex("c054323030362d30312d30325431353a30343a30355a")).is_err());
        assert!(decode(&hex("c06474657874")).is_err());
        assert_eq!(
            decode(&hex("c11a43b940e5")).unwrap(),
            json!("2006-01-02T15:04:05Z")
        );
        assert_eq!(
            decode(&hex("c1f93e00")).unwrap(),
            json!("1970-01-01T00:00:01.5Z")
        );
        assert!(decode(&hex("c11b0000003afff44181")).is_err());
        // Unknown tags stand for their content.
        assert_eq!(decode(&hex("c48221196ab3")).unwrap(), json!([-2, 27315]));
        // int64 bounds.
        assert_eq!(decode(&hex("1b7fffffffffffffff")).unwrap(), json!(i64::MAX));
        assert!(decode(&hex("1b8000000000000000")).is_err());
        assert_eq!(decode(&hex("3b7fffffffffffffff")).unwrap(), json!(i64::MIN));
        assert!(decode(&hex("3b8000000000000000")).is_err());
        assert_eq!(decode(&hex("f93c00")).unwrap(), json!(1.0));
    }

    #[test]
    fn refuses_what_kube_refuses() {
        for (input, why) in [
            ("a2416101416102", "duplicate byte string keys"),
            ("a2616101416102", "text and bytes, same key"),
            ("a2010102", "integer keys"),
            ("f7", "undefined"),
            ("f0", "simple value 16"),
            ("f814", "two-byte form of false"),
            ("f97e00", "NaN"),
            ("f97c00", "infinity"),
            ("fa7f800000", "single infinity"),
            ("c249010000000000000000", "bignum"),
            ("c349010000000000000000", "negative bignum"),
            ("6261ff", "invalid UTF-8 text"),
            ("a1", "truncated map"),
            ("5a00010000", "length past the end"),
            ("9b00ffffffffffffff", "huge array"),
            ("ff", "lone break"),
            ("1c", "reserved additional info"),
            ("0000", "two items"),
            ("", "empty"),
            ("5f4161616162ff", "text chunk in a byte string"),
        ] {
            assert!(decode(&hex(input)).is_err(), "{why} must be refused");
        }
        assert_eq!(
            decode(&hex("a2416101416102")).unwrap_err(),
            Error::DuplicateKey("a".into())
        );
        // A byte string is not checked: its odd bytes become U+FFFD.
        assert_eq!(decode(&hex("4261ff")).unwrap(), json!("a\u{fffd}"));
        let deep = [vec![0x81; MAX_DEPTH + 1], vec![0]].concat();
        assert_eq!(decode(&deep).unwrap_err(), Error::TooDeep);
        let ok = [vec![0x81; MAX_DEPTH], vec![0]].concat();
        assert!(decode(&ok).is_ok());
    }

    #[test]
    fn sequences_decode_item_by_item() {
        let mut seq = encode(&json!({"type": "ADDED"}));
        seq.extend(encode(&json!({"type": "DELETED"})));
        let items = decode_sequence(&seq).unwrap();
        assert_eq!(
            items,
            vec![json!({"type": "ADDED"}), json!({"type": "DELETED"})]
        );
        assert!(decode_sequence(&seq[..seq.len() - 1]).is_err());
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            ".{0,40}".prop_map(Value::String),
        ];
        leaf.prop_recursive(6, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::hash_map(".{0,12}", inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode(&bytes);
            let _ = decode_sequence(&bytes);
        }

        #[test]
        fn arbitrary_prefixed_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let input = [SELF_DESCRIBED.to_vec(), bytes].concat();
            let _ = decode(&input);
        }

        #[test]
        fn json_values_roundtrip(v in json_value()) {
            let bytes = encode(&v);
            prop_assert!(bytes.starts_with(&SELF_DESCRIBED));
            prop_assert_eq!(decode(&bytes).unwrap(), v);
        }

        #[test]
        fn truncated_encodings_are_errors(v in json_value(), cut in any::<prop::sample::Index>()) {
            let bytes = encode(&v);
            let cut = cut.index(bytes.len());
            // Any proper prefix is an error, never a panic or a value.
            prop_assert!(decode(&bytes[..cut]).is_err());
        }
    }
}
