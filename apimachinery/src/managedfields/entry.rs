//! `metadata.managedFields` entries: decoding, encoding and ordering.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::fieldset::{write_go_string, FieldSet};

/// The `operation` of an entry written by server-side apply.
pub const OPERATION_APPLY: &str = "Apply";
/// The `operation` of an entry written by create, update and non-apply patch.
pub const OPERATION_UPDATE: &str = "Update";
/// The only `fieldsType` there is.
pub const FIELDS_V1: &str = "FieldsV1";

/// One entry of `metadata.managedFields`.
///
/// Serializes to (and from) the JSON kube-apiserver uses, with its key order
/// (`manager`, `operation`, `apiVersion`, `time`, `fieldsType`, `fieldsV1`,
/// `subresource`) and empty strings omitted.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ManagedFieldsEntry {
    pub manager: String,
    /// `Update` or `Apply`.
    pub operation: String,
    pub api_version: String,
    /// RFC 3339 in UTC with second precision, e.g. `2026-11-21T20:00:00Z`.
    pub time: Option<String>,
    /// `FieldsV1`.
    pub fields_type: String,
    pub fields_v1: FieldSet,
    /// `status`, `scale`, ...; `None` for the main resource.
    pub subresource: Option<String>,
}

impl ManagedFieldsEntry {
    /// The JSON object of this entry.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        let mut text = |k: &str, v: &str| {
            if !v.is_empty() {
                m.insert(k.to_string(), Value::String(v.to_string()));
            }
        };
        text("manager", &self.manager);
        text("operation", &self.operation);
        text("apiVersion", &self.api_version);
        if let Some(t) = &self.time {
            text("time", t);
        }
        text("fieldsType", &self.fields_type);
        m.insert("fieldsV1".to_string(), self.fields_v1.to_fields_v1());
        if let Some(s) = &self.subresource {
            if !s.is_empty() {
                m.insert("subresource".to_string(), Value::String(s.clone()));
            }
        }
        Value::Object(m)
    }

    /// The identity kube keys entries by: one entry per manager, operation,
    /// subresource and (for updates only) API version. This is the JSON text
    /// kube builds the identity from, which also decides tie-breaks.
    pub(crate) fn identifier(&self) -> String {
        identifier(
            &self.manager,
            &self.operation,
            &self.api_version,
            self.subresource.as_deref(),
        )
    }

    /// Seconds since the epoch of `time` (0 when unset or unparsable).
    pub(crate) fn unix_seconds(&self) -> i64 {
        self.time.as_deref().and_then(parse_rfc3339).unwrap_or(0)
    }
}

pub(crate) fn identifier(
    manager: &str,
    operation: &str,
    api_version: &str,
    subresource: Option<&str>,
) -> String {
    let mut out = String::from("{");
    let mut first = true;
    let mut field = |out: &mut String, k: &str, v: &str| {
        if v.is_empty() {
            return;
        }
        if !first {
            out.push(',');
        }
        first = false;
        write_go_string(out, k, true);
        out.push(':');
        write_go_string(out, v, true);
    };
    field(&mut out, "manager", manager);
    field(&mut out, "operation", operation);
    if operation != OPERATION_APPLY {
        field(&mut out, "apiVersion", api_version);
    }
    field(&mut out, "subresource", subresource.unwrap_or(""));
    out.push('}');
    out
}

impl Serialize for ManagedFieldsEntry {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

/// An entry as it appears on the wire, before any checks.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawEntry {
    #[serde(default)]
    manager: Option<String>,
    #[serde(default)]
    operation: Option<String>,
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    time: Option<String>,
    #[serde(default)]
    fields_type: Option<String>,
    #[serde(default)]
    fields_v1: Option<Value>,
    #[serde(default)]
    subresource: Option<String>,
}

impl RawEntry {
    /// The zero entry (`{}`), which clients send to reset managed fields.
    fn is_zero(&self) -> bool {
        let empty = |s: &Option<String>| s.as_deref().is_none_or(str::is_empty);
        empty(&self.manager)
            && empty(&self.operation)
            && empty(&self.api_version)
            && self.time.is_none()
            && empty(&self.fields_type)
            && self.fields_v1.is_none()
            && empty(&self.subresource)
    }
}

impl<'de> Deserialize<'de> for ManagedFieldsEntry {
    /// Reads the wire form without kube's semantic checks (those are in
    /// [`decode_managed_fields`]); `time` is normalized to UTC seconds.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = RawEntry::deserialize(deserializer)?;
        let fields_v1 = match &raw.fields_v1 {
            Some(v) => FieldSet::from_fields_v1(v).map_err(serde::de::Error::custom)?,
            None => FieldSet::new(),
        };
        let time = match raw.time.as_deref() {
            Some(t) => normalize_time(t).map_err(serde::de::Error::custom)?,
            None => None,
        };
        Ok(ManagedFieldsEntry {
            manager: raw.manager.unwrap_or_default(),
            operation: raw.operation.unwrap_or_default(),
            api_version: raw.api_version.unwrap_or_default(),
            time,
            fields_type: raw.fields_type.unwrap_or_default(),
            fields_v1,
            subresource: raw.subresource.filter(|s| !s.is_empty()),
        })
    }
}

/// `metadata.managedFields` of `meta`, which may be the metadata object or a
/// whole object (then its `metadata` is used). `None` when the field is
/// absent or `null`.
pub(crate) fn managed_fields_value(meta: &Value) -> Option<&Value> {
    let obj = meta.as_object()?;
    let mf = match obj.get("managedFields") {
        Some(v) => Some(v),
        None => obj
            .get("metadata")
            .and_then(Value::as_object)
            .and_then(|m| m.get("managedFields")),
    };
    mf.filter(|v| !v.is_null())
}

fn raw_entries(list: &Value) -> Result<Vec<RawEntry>, String> {
    let Value::Array(items) = list else {
        return Err(format!(
            "json: cannot unmarshal {} into Go struct field ObjectMeta.metadata.managedFields of type []v1.ManagedFieldsEntry",
            json_type_name(list)
        ));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            RawEntry::deserialize(item).map_err(|e| format!("metadata.managedFields[{i}]: {e}"))
        })
        .collect()
}

fn json_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether a client's `managedFields` asks for a reset: an empty list, or a
/// list of one empty entry.
pub(crate) fn is_reset(meta: &Value) -> bool {
    let Some(list) = managed_fields_value(meta) else {
        return false;
    };
    match list {
        Value::Array(items) if items.is_empty() => true,
        Value::Array(items) if items.len() == 1 => {
            RawEntry::deserialize(&items[0]).is_ok_and(|e| e.is_zero())
        }
        _ => false,
    }
}

/// Decodes and checks `metadata.managedFields` as kube's `DecodeManagedFields`
/// does. `meta` is the metadata object (a whole object is accepted too).
/// An absent or `null` list is empty.
///
/// Errors carry kube's messages: ``operation must be `Apply` or `Update` ``,
/// `apiVersion must not be empty`, `missing fieldsType in managed fields entry
/// N`, `invalid fieldsType "X" in managed fields entry N`, and
/// `error decoding versioned set from ...: error decoding set: ...` for a
/// malformed `fieldsV1`.
pub fn decode_managed_fields(meta: &Value) -> Result<Vec<ManagedFieldsEntry>, String> {
    let Some(list) = managed_fields_value(meta) else {
        return Ok(Vec::new());
    };
    let raws = raw_entries(list)?;
    let mut out = Vec::with_capacity(raws.len());
    for (i, raw) in raws.into_iter().enumerate() {
        let operation = raw.operation.clone().unwrap_or_default();
        if operation != OPERATION_APPLY && operation != OPERATION_UPDATE {
            return Err("operation must be `Apply` or `Update`".to_string());
        }
        let api_version = raw.api_version.clone().unwrap_or_default();
        if api_version.is_empty() {
            return Err("apiVersion must not be empty".to_string());
        }
        let fields_type = raw.fields_type.clone().unwrap_or_default();
        if fields_type.is_empty() {
            return Err(format!("missing fieldsType in managed fields entry {i}"));
        }
        if fields_type != FIELDS_V1 {
            let mut quoted = String::new();
            write_go_string(&mut quoted, &fields_type, false);
            return Err(format!(
                "invalid fieldsType {quoted} in managed fields entry {i}"
            ));
        }
        let time = match raw.time.as_deref() {
            Some(t) => normalize_time(t)?,
            None => None,
        };
        let fields_v1 = match &raw.fields_v1 {
            Some(v) => FieldSet::from_fields_v1(v).map_err(|e| {
                format!(
                    "error decoding versioned set from {{{} {} {} {} {} {} {}}}: error decoding set: {e}",
                    raw.manager.as_deref().unwrap_or(""),
                    operation,
                    api_version,
                    time.as_deref().unwrap_or("<nil>"),
                    fields_type,
                    v,
                    raw.subresource.as_deref().unwrap_or(""),
                )
            })?,
            None => FieldSet::new(),
        };
        out.push(ManagedFieldsEntry {
            manager: raw.manager.unwrap_or_default(),
            operation,
            api_version,
            time,
            fields_type,
            fields_v1,
            subresource: raw.subresource.filter(|s| !s.is_empty()),
        });
    }
    Ok(out)
}

/// Sorts entries as kube does before writing them: by operation (`Apply`
/// first), time, manager, API version and subresource.
pub fn sort_entries(entries: &mut [ManagedFieldsEntry]) {
    entries.sort_by(|p, q| {
        p.operation
            .cmp(&q.operation)
            .then_with(|| p.unix_seconds().cmp(&q.unix_seconds()))
            .then_with(|| p.manager.cmp(&q.manager))
            .then_with(|| p.api_version.cmp(&q.api_version))
            .then_with(|| {
                p.subresource
                    .as_deref()
                    .unwrap_or("")
                    .cmp(q.subresource.as_deref().unwrap_or(""))
            })
    });
}

/// The JSON list for `metadata.managedFields`, sorted as kube sorts it.
pub fn encode_managed_fields(entries: &[ManagedFieldsEntry]) -> Value {
    let mut sorted = entries.to_vec();
    sort_entries(&mut sorted);
    Value::Array(sorted.iter().map(ManagedFieldsEntry::to_json).collect())
}

/// Entries keyed by identity, the way kube holds them between decoding and
/// encoding (a later entry with the same identity replaces an earlier one).
pub(crate) type Managed = BTreeMap<String, ManagedFieldsEntry>;

pub(crate) fn to_managed(entries: Vec<ManagedFieldsEntry>) -> Managed {
    entries.into_iter().map(|e| (e.identifier(), e)).collect()
}

// ---------------------------------------------------------------------------
// Time

/// Parses an RFC 3339 time (fractional seconds and offsets allowed, as Go's
/// `time.Parse(time.RFC3339, ...)` accepts) into seconds since the epoch.
pub(crate) fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let digits = |from: usize, n: usize| -> Option<i64> {
        let part = b.get(from..from + n)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(
            part.iter()
                .fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0')),
        )
    };
    let year = digits(0, 4)?;
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') || b.get(10) != Some(&b'T') {
        return None;
    }
    let month = digits(5, 2)?;
    let day = digits(8, 2)?;
    if b.get(13) != Some(&b':') || b.get(16) != Some(&b':') {
        return None;
    }
    let hour = digits(11, 2)?;
    let minute = digits(14, 2)?;
    let second = digits(17, 2)?;
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let mut i = 19;
    if matches!(b.get(i), Some(b'.') | Some(b',')) {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
    }
    let offset = match b.get(i) {
        Some(b'Z') if i + 1 == b.len() => 0,
        Some(sign @ (b'+' | b'-')) if i + 6 == b.len() && b.get(i + 3) == Some(&b':') => {
            let oh = digits(i + 1, 2)?;
            let om = digits(i + 4, 2)?;
            if oh > 23 || om > 59 {
                return None;
            }
            let o = oh * 3600 + om * 60;
            if *sign == b'-' {
                -o
            } else {
                o
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    Some(days * 86_400 + hour * 3600 + minute * 60 + second - offset)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Formats seconds since the epoch as RFC 3339 in UTC, seconds precision.
pub(crate) fn format_rfc3339(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A client-supplied `time` as kube re-encodes it (UTC, whole seconds). The
/// zero time reads as unset.
fn normalize_time(t: &str) -> Result<Option<String>, String> {
    match parse_rfc3339(t) {
        Some(secs) if secs == ZERO_TIME => Ok(None),
        Some(secs) => Ok(Some(format_rfc3339(secs))),
        None => Err(format!(
            "parsing time \"{t}\" as \"2006-01-02T15:04:05Z07:00\": cannot parse \"{t}\" as RFC 3339"
        )),
    }
}

/// `0001-01-01T00:00:00Z`, Go's zero time.
const ZERO_TIME: i64 = -62_135_596_800;
