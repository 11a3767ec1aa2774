//! Protobuf -> JSON, driven by the message table.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::{Map, Number, Value};

use crate::table::{table, Field, Kind, Message, Scalar, Special, Table, Ty};
use crate::timefmt;
use crate::wire::{Reader, WIRE_FIXED32, WIRE_FIXED64, WIRE_LEN, WIRE_VARINT};
use crate::{ProtoError, MAX_DEPTH};

/// Decodes `raw`, the protobuf encoding of the message `message` (fully
/// qualified, e.g. `k8s.io.api.core.v1.ConfigMap`), into the JSON kube
/// writes for the same object. See the crate documentation for the rules.
pub fn decode_to_json(message: &str, raw: &[u8]) -> Result<Value, ProtoError> {
    let t = table()?;
    let mi = t.lookup(message)?;
    decode_message(t, mi, &[raw], 0)
}

/// What was read for one field of a message.
enum Acc<'a> {
    Empty,
    /// A singular non-bytes scalar (the last occurrence wins).
    Scalar(Value),
    /// A singular bytes field (the last occurrence wins).
    Bytes(&'a [u8]),
    /// A singular message: every occurrence, merged in order.
    Message(Vec<&'a [u8]>),
    /// A repeated field.
    List(Vec<Value>),
    /// A map (the last entry for a key wins; keys sorted like Go's JSON).
    Map(BTreeMap<String, Value>),
}

fn wrong_wire(m: &Message, f: &Field, wire_type: u8) -> ProtoError {
    ProtoError::WrongWireType {
        message: m.name.clone(),
        field: f.name.clone(),
        wire_type,
    }
}

fn expected_wire(s: Scalar) -> u8 {
    match s {
        Scalar::Double | Scalar::Fixed64 | Scalar::Sfixed64 => WIRE_FIXED64,
        Scalar::Float | Scalar::Fixed32 | Scalar::Sfixed32 => WIRE_FIXED32,
        Scalar::String | Scalar::Bytes => WIRE_LEN,
        _ => WIRE_VARINT,
    }
}

fn float_value(field: &str, v: f64) -> Result<Value, ProtoError> {
    Number::from_f64(v)
        .map(Value::Number)
        .ok_or_else(|| ProtoError::invalid_value(field, "NaN or infinite number"))
}

/// Reads one scalar whose wire type has been checked.
fn read_scalar(r: &mut Reader<'_>, s: Scalar, field: &str) -> Result<Value, ProtoError> {
    Ok(match s {
        Scalar::Int32 => Value::from(r.varint()? as i32),
        Scalar::Int64 => Value::from(r.varint()? as i64),
        Scalar::Uint32 => Value::from(r.varint()? as u32),
        Scalar::Uint64 => Value::from(r.varint()?),
        Scalar::Sint32 => {
            let v = r.varint()? as u32;
            Value::from(((v >> 1) as i32) ^ -((v & 1) as i32))
        }
        Scalar::Sint64 => {
            let v = r.varint()?;
            Value::from(((v >> 1) as i64) ^ -((v & 1) as i64))
        }
        Scalar::Bool => Value::Bool(r.varint()? != 0),
        Scalar::Fixed32 => Value::from(r.fixed32()?),
        Scalar::Sfixed32 => Value::from(r.fixed32()? as i32),
        Scalar::Fixed64 => Value::from(r.fixed64()?),
        Scalar::Sfixed64 => Value::from(r.fixed64()? as i64),
        Scalar::Float => float_value(field, f64::from(f32::from_bits(r.fixed32()?)))?,
        Scalar::Double => float_value(field, f64::from_bits(r.fixed64()?))?,
        // Go keeps invalid UTF-8 in strings and its JSON encoder writes
        // U+FFFD for it; from_utf8_lossy does the same.
        Scalar::String => Value::String(crate::wire::lossy_string(r.bytes()?)),
        Scalar::Bytes => Value::String(STANDARD.encode(r.bytes()?)),
    })
}

fn zero_scalar(s: Scalar) -> Value {
    match s {
        Scalar::Bool => Value::Bool(false),
        Scalar::String | Scalar::Bytes => Value::String(String::new()),
        Scalar::Double | Scalar::Float => Value::from(0.0),
        _ => Value::from(0),
    }
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Null => true,
        _ => false,
    }
}

fn check_depth(depth: usize) -> Result<(), ProtoError> {
    if depth > MAX_DEPTH {
        Err(ProtoError::TooDeep(MAX_DEPTH))
    } else {
        Ok(())
    }
}

/// Decodes a message given as one or more encoded chunks (protobuf merges
/// repeated occurrences of a singular message field by concatenation).
pub(crate) fn decode_message(
    t: &Table,
    mi: usize,
    chunks: &[&[u8]],
    depth: usize,
) -> Result<Value, ProtoError> {
    check_depth(depth)?;
    let m = t.message(mi);
    let mut accs: Vec<Acc<'_>> = m.fields.iter().map(|_| Acc::Empty).collect();
    for chunk in chunks {
        read_fields(t, m, chunk, &mut accs, depth)?;
    }
    let nonempty = chunks.iter().any(|c| !c.is_empty());
    match m.special {
        Special::None => render_object(t, m, accs, depth),
        special => render_special(t, m, special, accs, nonempty, depth),
    }
}

fn read_fields<'a>(
    t: &Table,
    m: &Message,
    chunk: &'a [u8],
    accs: &mut [Acc<'a>],
    depth: usize,
) -> Result<(), ProtoError> {
    let mut r = Reader::new(chunk);
    while !r.is_empty() {
        let (number, wire_type) = r.tag()?;
        let Some((i, f)) = m.field(number) else {
            r.skip(wire_type)?;
            continue;
        };
        let acc = &mut accs[i];
        match f.kind {
            Kind::Single(Ty::Scalar(s)) => {
                if wire_type != expected_wire(s) {
                    return Err(wrong_wire(m, f, wire_type));
                }
                *acc = if s == Scalar::Bytes {
                    Acc::Bytes(r.bytes()?)
                } else {
                    Acc::Scalar(read_scalar(&mut r, s, &f.name)?)
                };
            }
            Kind::Single(Ty::Message(_)) => {
                if wire_type != WIRE_LEN {
                    return Err(wrong_wire(m, f, wire_type));
                }
                let data = r.bytes()?;
                match acc {
                    Acc::Message(v) => v.push(data),
                    _ => *acc = Acc::Message(vec![data]),
                }
            }
            Kind::Repeated(ty) => {
                if !matches!(acc, Acc::List(_)) {
                    *acc = Acc::List(Vec::new());
                }
                let Acc::List(list) = acc else {
                    continue;
                };
                match ty {
                    Ty::Scalar(s) if s.packable() && wire_type == WIRE_LEN => {
                        let mut packed = Reader::new(r.bytes()?);
                        while !packed.is_empty() {
                            list.push(read_scalar(&mut packed, s, &f.name)?);
                        }
                    }
                    Ty::Scalar(s) => {
                        if wire_type != expected_wire(s) {
                            return Err(wrong_wire(m, f, wire_type));
                        }
                        list.push(read_scalar(&mut r, s, &f.name)?);
                    }
                    Ty::Message(ci) => {
                        if wire_type != WIRE_LEN {
                            return Err(wrong_wire(m, f, wire_type));
                        }
                        let data = r.bytes()?;
                        list.push(decode_message(t, ci, &[data], depth + 1)?);
                    }
                }
            }
            Kind::Map(key, value) => {
                if wire_type != WIRE_LEN {
                    return Err(wrong_wire(m, f, wire_type));
                }
                let entry = r.bytes()?;
                let (k, v) = read_map_entry(t, m, f, key, value, entry, depth)?;
                if !matches!(acc, Acc::Map(_)) {
                    *acc = Acc::Map(BTreeMap::new());
                }
                if let Acc::Map(map) = acc {
                    map.insert(k, v);
                }
            }
        }
    }
    Ok(())
}

fn read_map_entry(
    t: &Table,
    m: &Message,
    f: &Field,
    key: Scalar,
    value: Ty,
    entry: &[u8],
    depth: usize,
) -> Result<(String, Value), ProtoError> {
    let mut r = Reader::new(entry);
    let mut k: Option<Value> = None;
    let mut v: Option<Value> = None;
    let mut v_chunks: Vec<&[u8]> = Vec::new();
    while !r.is_empty() {
        let (number, wire_type) = r.tag()?;
        match number {
            1 => {
                if wire_type != expected_wire(key) {
                    return Err(wrong_wire(m, f, wire_type));
                }
                k = Some(read_scalar(&mut r, key, &f.name)?);
            }
            2 => match value {
                Ty::Scalar(s) => {
                    if wire_type != expected_wire(s) {
                        return Err(wrong_wire(m, f, wire_type));
                    }
                    v = Some(read_scalar(&mut r, s, &f.name)?);
                }
                Ty::Message(_) => {
                    if wire_type != WIRE_LEN {
                        return Err(wrong_wire(m, f, wire_type));
                    }
                    v_chunks.push(r.bytes()?);
                }
            },
            _ => r.skip(wire_type)?,
        }
    }
    let key = match k.unwrap_or_else(|| zero_scalar(key)) {
        Value::String(s) => s,
        other => other.to_string(),
    };
    let value = match value {
        Ty::Scalar(s) => v.unwrap_or_else(|| zero_scalar(s)),
        Ty::Message(ci) => decode_message(t, ci, &v_chunks, depth + 1)?,
    };
    Ok((key, value))
}

fn render_object(
    t: &Table,
    m: &Message,
    accs: Vec<Acc<'_>>,
    depth: usize,
) -> Result<Value, ProtoError> {
    let mut out = Map::new();
    for (f, acc) in m.fields.iter().zip(accs) {
        match acc {
            Acc::Empty => {}
            Acc::Scalar(v) => {
                if f.keep_zero || !is_zero(&v) {
                    out.insert(f.name.clone(), v);
                }
            }
            Acc::Bytes(b) => {
                if f.keep_zero || !b.is_empty() {
                    out.insert(f.name.clone(), Value::String(STANDARD.encode(b)));
                }
            }
            Acc::Message(chunks) => {
                let Kind::Single(Ty::Message(ci)) = f.kind else {
                    continue;
                };
                let v = decode_message(t, ci, &chunks, depth + 1)?;
                match (f.inline, v) {
                    (true, Value::Object(inner)) => {
                        for (k, v) in inner {
                            out.insert(k, v);
                        }
                    }
                    (_, v) => {
                        out.insert(f.name.clone(), v);
                    }
                }
            }
            Acc::List(list) => {
                if !list.is_empty() {
                    out.insert(f.name.clone(), Value::Array(list));
                }
            }
            Acc::Map(map) => {
                if !map.is_empty() {
                    out.insert(f.name.clone(), Value::Object(map.into_iter().collect()));
                }
            }
        }
    }
    Ok(Value::Object(out))
}

/// The value read for field `number`, if any.
fn take_field<'a>(m: &Message, accs: &mut [Acc<'a>], number: u32) -> Acc<'a> {
    match m.field(number) {
        Some((i, _)) => std::mem::replace(&mut accs[i], Acc::Empty),
        None => Acc::Empty,
    }
}

fn int_of(acc: &Acc<'_>) -> i64 {
    match acc {
        Acc::Scalar(v) => v.as_i64().unwrap_or(0),
        _ => 0,
    }
}

fn string_of(acc: Acc<'_>) -> Option<String> {
    match acc {
        Acc::Scalar(Value::String(s)) => Some(s),
        _ => None,
    }
}

fn bytes_of<'a>(acc: &Acc<'a>) -> Option<&'a [u8]> {
    match acc {
        Acc::Bytes(b) => Some(b),
        _ => None,
    }
}

/// Embedded JSON (RawExtension, FieldsV1); an embedded protobuf object
/// (RawExtension carrying a `k8s\0` envelope) is decoded to its JSON form.
fn embedded_json(t: &Table, name: &str, raw: &[u8], depth: usize) -> Result<Value, ProtoError> {
    if raw.starts_with(crate::MAGIC) {
        return crate::envelope::decode_object_at(t, raw, depth + 1);
    }
    serde_json::from_slice(raw)
        .map_err(|e| ProtoError::invalid_value(name, format!("embedded JSON: {e}")))
}

fn render_special(
    t: &Table,
    m: &Message,
    special: Special,
    mut accs: Vec<Acc<'_>>,
    nonempty: bool,
    depth: usize,
) -> Result<Value, ProtoError> {
    let name = m.name.as_str();
    match special {
        Special::IntOrString => {
            let ty = int_of(&take_field(m, &mut accs, 1));
            match ty {
                0 => Ok(Value::from(int_of(&take_field(m, &mut accs, 2)))),
                1 => Ok(Value::String(
                    string_of(take_field(m, &mut accs, 3)).unwrap_or_default(),
                )),
                other => Err(ProtoError::invalid_value(
                    name,
                    format!("IntOrString type {other}"),
                )),
            }
        }
        Special::Quantity => {
            let s = string_of(take_field(m, &mut accs, 1)).unwrap_or_else(|| "0".to_string());
            // kube's Quantity.Unmarshal parses the string and fails the
            // whole decode when it is no quantity (no trimming, unlike JSON).
            if !quantity_pattern().is_match(&s) {
                return Err(ProtoError::invalid_value(name, QUANTITY_FORMAT));
            }
            Ok(Value::String(s))
        }
        Special::Time | Special::MicroTime => {
            if !nonempty {
                return Ok(Value::Null);
            }
            let seconds = int_of(&take_field(m, &mut accs, 1));
            // metav1.Time drops the nanoseconds when decoding protobuf.
            let nanos = if special == Special::MicroTime {
                int_of(&take_field(m, &mut accs, 2))
            } else {
                0
            };
            let (s, n) = timefmt::normalize(seconds, nanos)
                .ok_or_else(|| ProtoError::invalid_value(name, "time out of range"))?;
            if s == timefmt::GO_ZERO_TIME_SECONDS && n == 0 {
                return Ok(Value::Null);
            }
            timefmt::format_rfc3339(s, n, special == Special::MicroTime)
                .map(Value::String)
                .ok_or_else(|| ProtoError::invalid_value(name, "year outside 0000-9999"))
        }
        Special::Duration => Ok(Value::String(timefmt::format_duration(int_of(
            &take_field(m, &mut accs, 1),
        )))),
        Special::RawExtension | Special::FieldsV1 => match bytes_of(&take_field(m, &mut accs, 1)) {
            Some(raw) if !raw.is_empty() => embedded_json(t, name, raw, depth),
            _ => Ok(Value::Null),
        },
        Special::StringList => match take_field(m, &mut accs, 1) {
            Acc::List(items) => Ok(Value::Array(items)),
            _ => Ok(Value::Array(Vec::new())),
        },
        Special::None => render_object(t, m, accs, depth),
    }
}

/// `resource.ErrFormatWrong`.
const QUANTITY_FORMAT: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

fn quantity_pattern() -> &'static regex::Regex {
    static P: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    P.get_or_init(|| {
        regex::Regex::new(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")
            .expect("quantity pattern")
    })
}
