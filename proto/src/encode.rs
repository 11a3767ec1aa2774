//! JSON -> protobuf, driven by the message table (the inverse of
//! [`crate::decode_to_json`]).

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::{Map, Value};

use crate::table::{table, Field, Kind, Message, Scalar, Special, Table, Ty};
use crate::timefmt;
use crate::wire::{put_len, put_tag, put_varint, WIRE_FIXED32, WIRE_FIXED64, WIRE_VARINT};
use crate::{ProtoError, MAX_DEPTH};

/// Encodes a JSON object as the protobuf message `message` (fully
/// qualified). Keys that are not fields of the message (such as the
/// top-level `apiVersion` and `kind`, which travel in the envelope) are
/// ignored; `null` values are treated as absent. Values of the wrong JSON
/// type are errors.
pub fn encode_from_json(message: &str, value: &Value) -> Result<Vec<u8>, ProtoError> {
    let t = table()?;
    let mi = t.lookup(message)?;
    let mut out = Vec::new();
    encode_message(t, mi, value, &mut out, 0)?;
    Ok(out)
}

fn as_object<'v>(field: &str, v: &'v Value) -> Result<&'v Map<String, Value>, ProtoError> {
    v.as_object()
        .ok_or_else(|| ProtoError::invalid_json(field, "expected an object"))
}

fn int_in(field: &str, v: &Value, min: i64, max: i64) -> Result<i64, ProtoError> {
    v.as_i64()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| {
            ProtoError::invalid_json(field, format!("expected an integer in {min}..={max}"))
        })
}

fn uint_in(field: &str, v: &Value, max: u64) -> Result<u64, ProtoError> {
    v.as_u64()
        .filter(|n| *n <= max)
        .ok_or_else(|| ProtoError::invalid_json(field, format!("expected an integer in 0..={max}")))
}

fn put_scalar(
    out: &mut Vec<u8>,
    number: u32,
    s: Scalar,
    v: &Value,
    field: &str,
) -> Result<(), ProtoError> {
    let i32r = (i64::from(i32::MIN), i64::from(i32::MAX));
    match s {
        Scalar::Int32 => {
            let n = int_in(field, v, i32r.0, i32r.1)?;
            put_tag(out, number, WIRE_VARINT);
            // Negative int32 values are sign-extended to 64 bits on the wire.
            put_varint(out, n as u64);
        }
        Scalar::Int64 => {
            let n = int_in(field, v, i64::MIN, i64::MAX)?;
            put_tag(out, number, WIRE_VARINT);
            put_varint(out, n as u64);
        }
        Scalar::Uint32 => {
            let n = uint_in(field, v, u64::from(u32::MAX))?;
            put_tag(out, number, WIRE_VARINT);
            put_varint(out, n);
        }
        Scalar::Uint64 => {
            let n = uint_in(field, v, u64::MAX)?;
            put_tag(out, number, WIRE_VARINT);
            put_varint(out, n);
        }
        Scalar::Sint32 => {
            let n = int_in(field, v, i32r.0, i32r.1)? as i32;
            put_tag(out, number, WIRE_VARINT);
            put_varint(out, u64::from(((n << 1) ^ (n >> 31)) as u32));
        }
        Scalar::Sint64 => {
            let n = int_in(field, v, i64::MIN, i64::MAX)?;
            put_tag(out, number, WIRE_VARINT);
            put_varint(out, ((n << 1) ^ (n >> 63)) as u64);
        }
        Scalar::Fixed32 => {
            let n = uint_in(field, v, u64::from(u32::MAX))? as u32;
            put_tag(out, number, WIRE_FIXED32);
            out.extend_from_slice(&n.to_le_bytes());
        }
        Scalar::Sfixed32 => {
            let n = int_in(field, v, i32r.0, i32r.1)? as i32;
            put_tag(out, number, WIRE_FIXED32);
            out.extend_from_slice(&n.to_le_bytes());
        }
        Scalar::Fixed64 => {
            let n = uint_in(field, v, u64::MAX)?;
            put_tag(out, number, WIRE_FIXED64);
            out.extend_from_slice(&n.to_le_bytes());
        }
        Scalar::Sfixed64 => {
            let n = int_in(field, v, i64::MIN, i64::MAX)?;
            put_tag(out, number, WIRE_FIXED64);
            out.extend_from_slice(&n.to_le_bytes());
        }
        Scalar::Float | Scalar::Double => {
            let f = v
                .as_f64()
                .ok_or_else(|| ProtoError::invalid_json(field, "expected a number"))?;
            if s == Scalar::Float {
                put_tag(out, number, WIRE_FIXED32);
                out.extend_from_slice(&(f as f32).to_bits().to_le_bytes());
            } else {
                put_tag(out, number, WIRE_FIXED64);
                out.extend_from_slice(&f.to_bits().to_le_bytes());
            }
        }
        Scalar::Bool => {
            let b = v
                .as_bool()
                .ok_or_else(|| ProtoError::invalid_json(field, "expected a boolean"))?;
            put_tag(out, number, WIRE_VARINT);
            put_varint(out, u64::from(b));
        }
        Scalar::String => {
            let s = v
                .as_str()
                .ok_or_else(|| ProtoError::invalid_json(field, "expected a string"))?;
            put_len(out, number, s.as_bytes());
        }
        Scalar::Bytes => {
            let s = v
                .as_str()
                .ok_or_else(|| ProtoError::invalid_json(field, "expected a base64 string"))?;
            let data = STANDARD
                .decode(s)
                .map_err(|e| ProtoError::invalid_json(field, format!("base64: {e}")))?;
            put_len(out, number, &data);
        }
    }
    Ok(())
}

/// Writes field `number` holding a value of type `ty`. `null` writes nothing
/// for scalars and an empty message for messages.
fn put_value(
    t: &Table,
    out: &mut Vec<u8>,
    number: u32,
    ty: Ty,
    v: &Value,
    field: &str,
    depth: usize,
) -> Result<(), ProtoError> {
    match ty {
        Ty::Scalar(s) => {
            if v.is_null() {
                return Ok(());
            }
            put_scalar(out, number, s, v, field)
        }
        Ty::Message(ci) => {
            let mut inner = Vec::new();
            encode_message(t, ci, v, &mut inner, depth + 1)?;
            put_len(out, number, &inner);
            Ok(())
        }
    }
}

fn map_key(key: Scalar, k: &str, field: &str) -> Result<Value, ProtoError> {
    Ok(match key {
        Scalar::String => Value::String(k.to_string()),
        Scalar::Bool => match k {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => {
                return Err(ProtoError::invalid_json(
                    field,
                    "map key: expected a boolean",
                ))
            }
        },
        _ => serde_json::from_str::<Value>(k)
            .ok()
            .filter(Value::is_number)
            .ok_or_else(|| ProtoError::invalid_json(field, "map key: expected a number"))?,
    })
}

fn encode_field(
    t: &Table,
    f: &Field,
    v: &Value,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<(), ProtoError> {
    let name = f.name.as_str();
    match f.kind {
        Kind::Single(ty) => {
            if v.is_null() {
                // The decoder writes null for these types when the message
                // is present but empty (a zero Go value struct), so null
                // encodes back to an empty message.
                if let Ty::Message(ci) = ty {
                    if matches!(
                        t.message(ci).special,
                        Special::Time
                            | Special::MicroTime
                            | Special::RawExtension
                            | Special::FieldsV1
                    ) {
                        put_len(out, f.number, b"");
                    }
                }
                return Ok(());
            }
            put_value(t, out, f.number, ty, v, name, depth)
        }
        Kind::Repeated(ty) => {
            if v.is_null() {
                return Ok(());
            }
            let items = v
                .as_array()
                .ok_or_else(|| ProtoError::invalid_json(name, "expected an array"))?;
            for item in items {
                if let (Ty::Scalar(_), Value::Null) = (ty, item) {
                    return Err(ProtoError::invalid_json(name, "null in a list of scalars"));
                }
                put_value(t, out, f.number, ty, item, name, depth)?;
            }
            Ok(())
        }
        Kind::Map(key, value) => {
            if v.is_null() {
                return Ok(());
            }
            for (k, item) in as_object(name, v)? {
                let mut entry = Vec::new();
                put_scalar(&mut entry, 1, key, &map_key(key, k, name)?, name)?;
                match (value, item) {
                    (Ty::Scalar(s), Value::Null) => {
                        // Go decodes null into the zero value.
                        put_scalar(&mut entry, 2, s, &zero_json(s), name)?;
                    }
                    _ => put_value(t, &mut entry, 2, value, item, name, depth)?,
                }
                put_len(out, f.number, &entry);
            }
            Ok(())
        }
    }
}

fn zero_json(s: Scalar) -> Value {
    match s {
        Scalar::Bool => Value::Bool(false),
        Scalar::String | Scalar::Bytes => Value::String(String::new()),
        Scalar::Float | Scalar::Double => Value::from(0.0),
        _ => Value::from(0),
    }
}

pub(crate) fn encode_message(
    t: &Table,
    mi: usize,
    v: &Value,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<(), ProtoError> {
    if depth > MAX_DEPTH {
        return Err(ProtoError::TooDeep(MAX_DEPTH));
    }
    let m = t.message(mi);
    if m.special != Special::None {
        return encode_special(m, v, out);
    }
    if v.is_null() {
        return Ok(());
    }
    let obj = as_object(&m.name, v)?;
    for &i in &m.write_order {
        let f = &m.fields[i];
        if f.inline {
            // The embedded struct's fields sit in this object.
            if let Kind::Single(Ty::Message(ci)) = f.kind {
                let mut inner = Vec::new();
                encode_message(t, ci, v, &mut inner, depth + 1)?;
                put_len(out, f.number, &inner);
            }
            continue;
        }
        if let Some(fv) = obj.get(&f.name) {
            encode_field(t, f, fv, out, depth)?;
        }
    }
    Ok(())
}

fn field_number(m: &Message, name: &str) -> u32 {
    m.fields
        .iter()
        .find(|f| f.name == name)
        .map_or(1, |f| f.number)
}

fn encode_special(m: &Message, v: &Value, out: &mut Vec<u8>) -> Result<(), ProtoError> {
    let name = m.name.as_str();
    match m.special {
        Special::IntOrString => {
            // Go writes all three fields of the struct.
            let (ty, int_val, str_val) = match v {
                Value::Null => (0, 0, ""),
                Value::String(s) => (1, 0, s.as_str()),
                Value::Number(_) => (
                    0,
                    int_in(name, v, i64::from(i32::MIN), i64::from(i32::MAX))?,
                    "",
                ),
                _ => {
                    return Err(ProtoError::invalid_json(
                        name,
                        "expected an integer or a string",
                    ))
                }
            };
            put_tag(out, 1, WIRE_VARINT);
            put_varint(out, ty);
            put_tag(out, 2, WIRE_VARINT);
            put_varint(out, int_val as u64);
            put_len(out, 3, str_val.as_bytes());
        }
        Special::Quantity => {
            let s = match v {
                Value::Null => return Ok(()),
                Value::String(s) => s.trim().to_string(),
                Value::Number(n) => n.to_string(),
                _ => return Err(ProtoError::invalid_json(name, "expected a quantity string")),
            };
            put_len(out, 1, s.as_bytes());
        }
        Special::Time | Special::MicroTime => {
            let s = match v {
                Value::Null => return Ok(()),
                Value::String(s) if s.is_empty() => return Ok(()),
                Value::String(s) => s,
                _ => {
                    return Err(ProtoError::invalid_json(
                        name,
                        "expected an RFC 3339 string",
                    ))
                }
            };
            let (seconds, nanos) = timefmt::parse_rfc3339(s).ok_or_else(|| {
                ProtoError::invalid_json(name, format!("bad RFC 3339 time {s:?}"))
            })?;
            if seconds == timefmt::GO_ZERO_TIME_SECONDS && nanos == 0 {
                return Ok(());
            }
            put_tag(out, 1, WIRE_VARINT);
            put_varint(out, seconds as u64);
            put_tag(out, 2, WIRE_VARINT);
            put_varint(out, u64::from(nanos));
        }
        Special::Duration => {
            let d = match v {
                Value::Null => return Ok(()),
                Value::String(s) => timefmt::parse_duration(s)
                    .ok_or_else(|| ProtoError::invalid_json(name, format!("bad duration {s:?}")))?,
                _ => return Err(ProtoError::invalid_json(name, "expected a duration string")),
            };
            put_tag(out, 1, WIRE_VARINT);
            put_varint(out, d as u64);
        }
        Special::RawExtension | Special::FieldsV1 => {
            if v.is_null() {
                return Ok(());
            }
            let raw =
                serde_json::to_vec(v).map_err(|e| ProtoError::invalid_json(name, e.to_string()))?;
            put_len(out, 1, &raw);
        }
        Special::StringList => {
            if v.is_null() {
                return Ok(());
            }
            let items = v
                .as_array()
                .ok_or_else(|| ProtoError::invalid_json(name, "expected an array of strings"))?;
            let number = field_number(m, "items");
            for item in items {
                let s = item.as_str().ok_or_else(|| {
                    ProtoError::invalid_json(name, "expected an array of strings")
                })?;
                put_len(out, number, s.as_bytes());
            }
        }
        Special::None => {}
    }
    Ok(())
}
