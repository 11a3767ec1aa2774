//! The `k8s\0` + runtime.Unknown envelope of the Kubernetes protobuf
//! encoding, and whole-object helpers built on it.

use serde_json::{Map, Value};

use crate::table::{table, Table};
use crate::wire::{put_len, Reader, WIRE_LEN};
use crate::{decode, gvk, ProtoError, MAGIC};

/// The media type of the Kubernetes protobuf encoding.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// A decoded runtime.Unknown envelope. `raw` borrows from the body.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Unknown<'a> {
    /// `typeMeta.apiVersion`, e.g. `v1` or `apps/v1`.
    pub api_version: String,
    /// `typeMeta.kind`, e.g. `ConfigMap`.
    pub kind: String,
    /// The protobuf encoding of the object (no prefix of its own).
    pub raw: &'a [u8],
    /// Empty for kube's own bodies.
    pub content_encoding: String,
    /// Empty (meaning protobuf) for kube's own bodies.
    pub content_type: String,
}

fn string_field(
    r: &mut Reader<'_>,
    wire_type: u8,
    what: &'static str,
) -> Result<String, ProtoError> {
    if wire_type != WIRE_LEN {
        return Err(ProtoError::WrongWireType {
            message: "k8s.io.apimachinery.pkg.runtime.Unknown".into(),
            field: what.into(),
            wire_type,
        });
    }
    Ok(crate::wire::lossy_string(r.bytes()?))
}

/// Decodes a request/response body of content type
/// `application/vnd.kubernetes.protobuf`: the 4-byte [`MAGIC`] followed by a
/// runtime.Unknown message (typeMeta = 1 {apiVersion = 1, kind = 2},
/// raw = 2, contentEncoding = 3, contentType = 4). Unknown fields are skipped.
pub fn decode_unknown(body: &[u8]) -> Result<Unknown<'_>, ProtoError> {
    let rest = body.strip_prefix(MAGIC).ok_or(ProtoError::MissingMagic)?;
    let mut out = Unknown::default();
    let mut r = Reader::new(rest);
    while !r.is_empty() {
        let (number, wire_type) = r.tag()?;
        match number {
            1 => {
                let tm = match wire_type {
                    WIRE_LEN => r.bytes()?,
                    _ => {
                        return Err(ProtoError::WrongWireType {
                            message: "k8s.io.apimachinery.pkg.runtime.Unknown".into(),
                            field: "typeMeta".into(),
                            wire_type,
                        })
                    }
                };
                // Protobuf merges repeated occurrences field by field.
                let mut tr = Reader::new(tm);
                while !tr.is_empty() {
                    let (n, wt) = tr.tag()?;
                    match n {
                        1 => out.api_version = string_field(&mut tr, wt, "apiVersion")?,
                        2 => out.kind = string_field(&mut tr, wt, "kind")?,
                        _ => tr.skip(wt)?,
                    }
                }
            }
            2 => {
                if wire_type != WIRE_LEN {
                    return Err(ProtoError::WrongWireType {
                        message: "k8s.io.apimachinery.pkg.runtime.Unknown".into(),
                        field: "raw".into(),
                        wire_type,
                    });
                }
                out.raw = r.bytes()?;
            }
            3 => out.content_encoding = string_field(&mut r, wire_type, "contentEncoding")?,
            4 => out.content_type = string_field(&mut r, wire_type, "contentType")?,
            _ => r.skip(wire_type)?,
        }
    }
    Ok(out)
}

/// Encodes `raw` (a protobuf-encoded object) in the envelope, as kube's
/// protobuf serializer writes it: [`MAGIC`], then runtime.Unknown with
/// typeMeta, raw, and empty contentEncoding and contentType.
pub fn encode_unknown(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = Vec::with_capacity(api_version.len() + kind.len() + 4);
    put_len(&mut type_meta, 1, api_version.as_bytes());
    put_len(&mut type_meta, 2, kind.as_bytes());
    let mut out = Vec::with_capacity(MAGIC.len() + type_meta.len() + raw.len() + 16);
    out.extend_from_slice(MAGIC);
    put_len(&mut out, 1, &type_meta);
    put_len(&mut out, 2, raw);
    put_len(&mut out, 3, b"");
    put_len(&mut out, 4, b"");
    out
}

/// Splits `apps/v1` into (`apps`, `v1`) and `v1` into (``, `v1`).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

/// Decodes a whole protobuf body (envelope included) into the JSON object
/// kube would write: `kind` and `apiVersion` first, then the object's fields.
pub fn decode_object(body: &[u8]) -> Result<Value, ProtoError> {
    decode_object_at(table()?, body, 0)
}

/// The table index of the message an envelope holds, once its encoding
/// and content type are kube's plain protobuf.
fn object_message(t: &Table, unk: &Unknown<'_>) -> Result<usize, ProtoError> {
    if !unk.content_encoding.is_empty() {
        return Err(ProtoError::UnsupportedEnvelope {
            what: "contentEncoding",
            value: unk.content_encoding.clone(),
        });
    }
    if !unk.content_type.is_empty() && unk.content_type != CONTENT_TYPE {
        return Err(ProtoError::UnsupportedEnvelope {
            what: "contentType",
            value: unk.content_type.clone(),
        });
    }
    let (group, version) = split_api_version(&unk.api_version);
    let message =
        gvk::message_in(t, group, version, &unk.kind).ok_or_else(|| ProtoError::UnknownKind {
            api_version: unk.api_version.clone(),
            kind: unk.kind.clone(),
        })?;
    t.lookup(message)
}

pub(crate) fn decode_object_at(t: &Table, body: &[u8], depth: usize) -> Result<Value, ProtoError> {
    if depth > crate::MAX_DEPTH {
        return Err(ProtoError::TooDeep(crate::MAX_DEPTH));
    }
    let unk = decode_unknown(body)?;
    let mi = object_message(t, &unk)?;
    let body = decode::decode_message(t, mi, &[unk.raw], depth)?;
    let mut out = Map::new();
    out.insert("kind".into(), Value::String(unk.kind));
    out.insert("apiVersion".into(), Value::String(unk.api_version));
    if let Value::Object(fields) = body {
        for (k, v) in fields {
            out.insert(k, v);
        }
    }
    Ok(Value::Object(out))
}

/// The `metadata` of a whole protobuf body (envelope included), as the JSON
/// [`decode_object`] gives for it, without decoding the rest of the
/// object: for readers of metadata alone (the garbage collector's graph
/// sees every stored object). An object without metadata gives `{}`.
pub fn decode_object_metadata(body: &[u8]) -> Result<Value, ProtoError> {
    use crate::table::{Kind, Ty};
    let t = table()?;
    let unk = decode_unknown(body)?;
    let m = t.message(object_message(t, &unk)?);
    let Some(field) = m.fields.iter().find(|f| f.name == "metadata") else {
        return Ok(Value::Object(Map::new()));
    };
    let Kind::Single(Ty::Message(meta)) = field.kind else {
        return Err(ProtoError::invalid_json("metadata", "not a message"));
    };
    // Protobuf merges repeated occurrences of a message field.
    let mut chunks = Vec::with_capacity(1);
    let mut r = Reader::new(unk.raw);
    while !r.is_empty() {
        let (number, wire_type) = r.tag()?;
        if number == field.number && wire_type == WIRE_LEN {
            chunks.push(r.bytes()?);
        } else {
            r.skip(wire_type)?;
        }
    }
    decode::decode_message(t, meta, &chunks, 1)
}

/// Encodes a JSON object carrying `apiVersion` and `kind` as a whole
/// protobuf body (envelope included).
pub fn encode_object(object: &Value) -> Result<Vec<u8>, ProtoError> {
    let raw = crate::compose::encode_raw(object)?;
    // `encode_raw` checked both fields.
    let field = |k: &str| object.get(k).and_then(Value::as_str).unwrap_or("");
    Ok(encode_unknown(field("apiVersion"), field("kind"), &raw))
}
