//! YAML request bodies, converted to JSON the way `sigs.k8s.io/yaml` does it
//! (goyaml v2, YAML 1.1 plain scalars), with goyaml's duplicate-key errors.
//!
//! serde_yaml_ng parses (it is libyaml, like goyaml, so syntax errors carry
//! the same problems and marks); our visitor builds the JSON value. Plain
//! scalars that YAML 1.2 leaves as strings but goyaml resolves (`yes`, `on`,
//! `0755`, `1_000`, `08`) are recognised by where the scalar sits in the
//! input: serde_yaml_ng hands out plain scalars borrowed from the input
//! without quotes around them.
//!
//! A duplicate's line is the line of its value (goyaml's `n.line+1`). The
//! visitor cannot see positions, so each line is found by decoding again and
//! stopping with an error at that duplicate's value: the error carries the
//! value's mark.

use super::gofmt::{format_float_g, quote};
use super::{interpret, DecodeError, Decoded, MAX_DUPLICATES};
use serde::de::{
    DeserializeSeed, Deserializer, EnumAccess, IgnoredAny, MapAccess, SeqAccess, VariantAccess,
    Visitor,
};
use serde_json::{Map, Number, Value};
use std::fmt::{self, Write as _};

/// How many bytes of YAML may be decoded again to find duplicate lines.
const LINE_LOOKUP_BUDGET: usize = 4 << 20;

pub(super) fn decode(body: &[u8]) -> Result<Decoded, DecodeError> {
    let outcome =
        run(body, None).map_err(|e| DecodeError::unrecognized(yaml_error_message(&e, body)))?;
    if let Some(problem) = outcome.problem {
        return Err(DecodeError::unrecognized(problem));
    }
    let value = interpret(outcome.value)?;
    let mut budget = LINE_LOOKUP_BUDGET;
    let duplicates = outcome
        .duplicates
        .iter()
        .map(|dup| {
            let line = dup.line.or_else(|| {
                // Past the budget the line is left out.
                let cost = body.len().max(1);
                if budget < cost {
                    return None;
                }
                budget -= cost;
                duplicate_line(body, dup.index)
            });
            let key = &dup.key;
            match line {
                Some(line) => format!("line {line}: key {key} already set in map"),
                None => format!("key {key} already set in map"),
            }
        })
        .collect();
    Ok(Decoded { value, duplicates })
}

/// A repeated key.
struct Dup {
    /// The key as goyaml prints it (`%#v`).
    key: String,
    /// The line of its value, when the input told.
    line: Option<usize>,
    /// Which duplicate of the document it is (for `fail_at`).
    index: usize,
}

struct Outcome {
    value: Value,
    duplicates: Vec<Dup>,
    /// The first conversion problem (a key or value JSON cannot hold).
    problem: Option<String>,
}

/// Decodes the first document; with `fail_at`, stops with an error at the
/// value of that duplicate.
fn run(body: &[u8], fail_at: Option<usize>) -> Result<Outcome, serde_yaml_ng::Error> {
    let mut ctx = Ctx {
        input: body,
        path: String::new(),
        duplicates: Vec::new(),
        seen: 0,
        fail_at,
        problem: None,
        key_end: None,
        breaks: None,
    };
    let value = match serde_yaml_ng::Deserializer::from_slice(body).next() {
        None => Value::Null,
        Some(doc) => match (ValueSeed { ctx: &mut ctx }).deserialize(doc) {
            Ok(v) => v,
            // A stream without a document is `null` to goyaml.
            Err(e) if e.to_string().starts_with("EOF while parsing a value") => Value::Null,
            Err(e) => return Err(e),
        },
    };
    Ok(Outcome {
        value,
        duplicates: ctx.duplicates,
        problem: ctx.problem,
    })
}

/// The line of the `n`th duplicate's value.
fn duplicate_line(body: &[u8], n: usize) -> Option<usize> {
    match run(body, Some(n)) {
        Err(e) if e.to_string().contains(FAIL_MARKER) => e.location().map(|l| l.line()),
        _ => None,
    }
}

/// goyaml's error text for a YAML that does not parse: `yaml: line N:
/// <problem>`, with goyaml's idea of the line (the 0-based line of the
/// problem, plus one for scanner errors, else the 0-based line of the
/// context).
fn yaml_error_message(err: &serde_yaml_ng::Error, body: &[u8]) -> String {
    let debug = format!("{err:?}");
    let Some(fields) = debug.strip_prefix("Error { ") else {
        // Not a libyaml error: limits, anchors, explicit tags.
        let text = err.to_string();
        let text = text.split(" at line ").next().unwrap_or(&text).to_string();
        return match text.as_str() {
            "recursion limit exceeded" => "yaml: exceeded max depth of 128".into(),
            "repetition limit exceeded" => "yaml: document contains excessive aliasing".into(),
            "unknown anchor" => {
                let name: String = err
                    .location()
                    .and_then(|l| body.get(l.index()..))
                    .and_then(|rest| rest.strip_prefix(b"*"))
                    .map(|rest| {
                        let end = rest
                            .iter()
                            .position(|b| b.is_ascii_whitespace() || b",[]{}".contains(b))
                            .unwrap_or(rest.len());
                        String::from_utf8_lossy(&rest[..end]).into_owned()
                    })
                    .unwrap_or_default();
                format!("yaml: unknown anchor '{name}' referenced")
            }
            _ => match tag_mismatch(&text) {
                Some(msg) => msg,
                None => format!("yaml: {text}"),
            },
        };
    };
    let kind = field(fields, "kind: ").unwrap_or_default();
    let problem = quoted_field(fields, "problem: ").unwrap_or_default();
    let problem_line = mark_line(fields, "problem_mark: ");
    let context_line = mark_line(fields, "context_mark: ");
    let line = if problem_line != 0 {
        problem_line + usize::from(kind == "SCANNER")
    } else {
        context_line
    };
    let problem = if problem.is_empty() {
        "unknown problem parsing YAML content".to_string()
    } else {
        problem
    };
    if line != 0 {
        format!("yaml: line {line}: {problem}")
    } else {
        format!("yaml: {problem}")
    }
}

/// serde_yaml_ng's `invalid value: string "x", expected an integer` for an
/// explicitly tagged scalar, in goyaml's words:
/// ``yaml: cannot decode !!str `x` as a !!int``.
fn tag_mismatch(text: &str) -> Option<String> {
    let rest = &text[text.find("invalid value: string ")? + "invalid value: string ".len()..];
    let (quoted, expected) = rest.rsplit_once(", expected ")?;
    let tag = match expected {
        "an integer" => "!!int",
        "a float" => "!!float",
        "a boolean" => "!!bool",
        "null" => "!!null",
        _ => return None,
    };
    let value = quoted.strip_prefix('"')?.strip_suffix('"')?;
    Some(format!("yaml: cannot decode !!str `{value}` as a {tag}"))
}

/// The bare word after `name` in serde_yaml_ng's `Debug` of a libyaml error.
fn field(fields: &str, name: &str) -> Option<String> {
    let rest = &fields[fields.find(name)? + name.len()..];
    Some(
        rest.split([',', ' ', '}'])
            .next()
            .unwrap_or_default()
            .to_string(),
    )
}

/// The string after `name` (Debug-quoted).
fn quoted_field(fields: &str, name: &str) -> Option<String> {
    let rest = fields[fields.find(name)? + name.len()..].strip_prefix('"')?;
    let mut out = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => {
                if let Some(n) = chars.next() {
                    out.push(match n {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        other => other,
                    });
                }
            }
            c => out.push(c),
        }
    }
    Some(out)
}

/// The 0-based line of a mark printed as `Mark { line: L, column: C }`
/// (1-based); a mark printed with an index is on line 0.
fn mark_line(fields: &str, name: &str) -> usize {
    let Some(at) = fields.find(name) else {
        return 0;
    };
    let rest = &fields[at + name.len()..];
    let Some(rest) = rest.strip_prefix("Mark { line: ") else {
        return 0;
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse::<usize>().map_or(0, |l| l.saturating_sub(1))
}

const FAIL_MARKER: &str = "kube field validation: duplicate value here";

struct Ctx<'i> {
    input: &'i [u8],
    path: String,
    duplicates: Vec<Dup>,
    /// Duplicates met so far (also past the cap), to find the `fail_at`th.
    seen: usize,
    fail_at: Option<usize>,
    problem: Option<String>,
    /// Where the last key read ends in the input, when it is a scalar
    /// borrowed from it.
    key_end: Option<usize>,
    /// Offsets of the line breaks of the input (computed on first need).
    breaks: Option<Vec<usize>>,
}

impl Ctx<'_> {
    /// Where a string borrowed from the input starts in it.
    fn offset_of(&self, s: &str) -> Option<usize> {
        let offset = (s.as_ptr() as usize).checked_sub(self.input.as_ptr() as usize)?;
        (offset + s.len() <= self.input.len()).then_some(offset)
    }

    /// The 1-based line of the value after the key ending at `key_end`, as
    /// libyaml marks it: its first token (or, for an empty value, the next
    /// token) past the `:`, comments and line breaks. `None` when the key is
    /// not followed by `:`.
    fn value_line(&mut self, key_end: usize) -> Option<usize> {
        let b = self.input;
        let mut i = key_end;
        while i < b.len() && matches!(b[i], b' ' | b'\t') {
            i += 1;
        }
        if b.get(i) != Some(&b':') {
            return None;
        }
        i += 1;
        loop {
            while i < b.len() && matches!(b[i], b' ' | b'\t') {
                i += 1;
            }
            match b.get(i) {
                Some(b'#') => {
                    while i < b.len() && !matches!(b[i], b'\n' | b'\r') {
                        i += 1;
                    }
                }
                Some(b'\n' | b'\r') => i += 1,
                _ => break,
            }
        }
        let breaks = self.breaks.get_or_insert_with(|| line_breaks(b));
        let line = 1 + breaks.partition_point(|&at| at < i);
        // At the end of an input without a final line break libyaml moves
        // to a new line before ending the stream.
        let unterminated = !matches!(b.last(), Some(b'\n' | b'\r') | None);
        Some(if i >= b.len() && unterminated {
            line + 1
        } else {
            line
        })
    }

    fn problem(&mut self, msg: String) {
        if self.problem.is_none() {
            self.problem = Some(msg);
        }
    }

    /// Whether a borrowed string is a plain (unquoted, untagged) scalar of
    /// the input.
    fn is_plain(&self, s: &str) -> bool {
        let Some(offset) = self.offset_of(s) else {
            return false;
        };
        if offset == 0 {
            return true;
        }
        if matches!(self.input[offset - 1], b'"' | b'\'') {
            return false;
        }
        !has_tag_before(self.input, offset)
    }
}

/// The offsets of libyaml's line breaks: `\n`, `\r` (once for `\r\n`),
/// NEL, LS and PS.
fn line_breaks(b: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\n' => out.push(i),
            b'\r' if b.get(i + 1) != Some(&b'\n') => out.push(i),
            0xc2 if b.get(i + 1) == Some(&0x85) => out.push(i),
            0xe2 if b.get(i + 1) == Some(&0x80) && matches!(b.get(i + 2), Some(0xa8 | 0xa9)) => {
                out.push(i)
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Whether the node starting at `offset` carries a tag (`!!str yes`,
/// `!foo &a yes`): looks at up to two properties before it on its line.
fn has_tag_before(input: &[u8], offset: usize) -> bool {
    let mut i = offset;
    for _ in 0..2 {
        let end = i;
        while i > 0 && matches!(input[i - 1], b' ' | b'\t') {
            i -= 1;
        }
        if i == end {
            return false;
        }
        let token_end = i;
        while i > 0 && !matches!(input[i - 1], b' ' | b'\t' | b'\n' | b'\r') {
            i -= 1;
        }
        match input[i..token_end].first() {
            Some(b'!') => return true,
            Some(b'&') => continue,
            _ => return false,
        }
    }
    false
}

/// A plain scalar as goyaml resolves it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scalar {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
}

impl Scalar {
    /// The JSON value it becomes (floats through [`float`]).
    fn value(self) -> Value {
        match self {
            Scalar::Null => Value::Null,
            Scalar::Bool(b) => Value::Bool(b),
            Scalar::Int(i) => Value::Number(i.into()),
            Scalar::Uint(u) => Value::Number(u.into()),
            Scalar::Float(f) => float(f),
        }
    }
}

/// goyaml v2's resolution of a plain scalar that YAML 1.2 (and so
/// serde_yaml_ng) leaves a string. `None` keeps it a string.
fn resolve_plain(s: &str) -> Option<Scalar> {
    match s {
        "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "true" | "True" | "TRUE" => {
            return Some(Scalar::Bool(true))
        }
        "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" | "false" | "False" | "FALSE" => {
            return Some(Scalar::Bool(false))
        }
        "~" | "null" | "Null" | "NULL" => return Some(Scalar::Null),
        _ => {}
    }
    match s.as_bytes().first()? {
        b'.' => s
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map(Scalar::Float),
        b'0'..=b'9' | b'+' | b'-' => {
            let plain: String = s.chars().filter(|&c| c != '_').collect();
            if let Some(i) = go_parse_int(&plain) {
                return Some(Scalar::Int(i));
            }
            if let Some(u) = go_parse_uint(&plain) {
                return Some(Scalar::Uint(u));
            }
            if is_yaml_float(&plain) {
                return plain
                    .parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite())
                    .map(Scalar::Float);
            }
            None
        }
        _ => None,
    }
}

/// `strconv.ParseUint(s, 0, 64)` without the sign.
fn go_parse_uint(s: &str) -> Option<u64> {
    let (radix, digits) = match s.as_bytes() {
        [b'0', b'x' | b'X', ..] => (16, &s[2..]),
        [b'0', b'b' | b'B', ..] => (2, &s[2..]),
        [b'0', b'o' | b'O', ..] => (8, &s[2..]),
        [b'0', _, ..] => (8, &s[1..]),
        _ => (10, s),
    };
    if digits.is_empty() || digits.starts_with(['+', '-']) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// `strconv.ParseInt(s, 0, 64)`.
fn go_parse_int(s: &str) -> Option<i64> {
    let (neg, rest) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let magnitude = go_parse_uint(rest)?;
    if neg {
        if magnitude == 1 << 63 {
            Some(i64::MIN)
        } else {
            i64::try_from(magnitude).ok().map(|m| -m)
        }
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// goyaml's `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn is_yaml_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    if b.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i);
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// A float as it comes back from YAML → JSON → Go: Go prints integral
/// floats below 1e21 without a fraction, so they decode as integers.
fn float(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 1e21 {
        if f >= i64::MIN as f64 && f < i64::MAX as f64 {
            return Value::Number((f as i64).into());
        }
        if f >= 0.0 && f < u64::MAX as f64 {
            return Value::Number((f as u64).into());
        }
    }
    Number::from_f64(f).map_or(Value::Null, Value::Number)
}

struct ValueSeed<'c, 'i> {
    ctx: &'c mut Ctx<'i>,
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_, '_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        de.deserialize_any(ValueVisitor { ctx: self.ctx })
    }
}

struct ValueVisitor<'c, 'i> {
    ctx: &'c mut Ctx<'i>,
}

impl ValueVisitor<'_, '_> {
    fn float(self, f: f64) -> Value {
        if !f.is_finite() {
            self.ctx
                .problem(format!("json: unsupported value: {}", format_float_g(f)));
            return Value::Null;
        }
        float(f)
    }
}

impl<'de> Visitor<'de> for ValueVisitor<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_i128<E>(self, v: i128) -> Result<Value, E> {
        Ok(self.float(v as f64))
    }

    fn visit_u128<E>(self, v: u128) -> Result<Value, E> {
        Ok(self.float(v as f64))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(self.float(v))
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Value, E> {
        if self.ctx.is_plain(v) {
            if let Some(resolved) = resolve_plain(v) {
                return Ok(resolved.value());
            }
        }
        Ok(Value::String(v.to_owned()))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        de.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            let mark = self.ctx.path.len();
            let _ = write!(self.ctx.path, "[{}]", items.len());
            let item = seq.next_element_seed(ValueSeed {
                ctx: &mut *self.ctx,
            })?;
            self.ctx.path.truncate(mark);
            match item {
                Some(v) => items.push(v),
                None => break,
            }
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key_seed(KeySeed {
            ctx: &mut *self.ctx,
        })? {
            match key {
                Key::Merge => {
                    let merged = access.next_value_seed(ValueSeed {
                        ctx: &mut *self.ctx,
                    })?;
                    merge(&mut map, merged, self.ctx);
                }
                Key::Invalid => {
                    access.next_value::<IgnoredAny>()?;
                }
                Key::Name { json, go } => {
                    let mark = self.ctx.path.len();
                    if !self.ctx.path.is_empty() {
                        self.ctx.path.push('.');
                    }
                    self.ctx.path.push_str(&json);
                    // goyaml records a duplicate once its value is decoded,
                    // so duplicates inside the value come first.
                    let mut duplicate = None;
                    if map.contains_key(&json) {
                        let index = self.ctx.seen;
                        self.ctx.seen += 1;
                        if self.ctx.fail_at == Some(index) {
                            access.next_value_seed(FailSeed)?;
                        }
                        let line = self.ctx.key_end.and_then(|end| self.ctx.value_line(end));
                        duplicate = Some(Dup {
                            key: go,
                            line,
                            index,
                        });
                    }
                    let value = access.next_value_seed(ValueSeed {
                        ctx: &mut *self.ctx,
                    })?;
                    if let Some(dup) = duplicate {
                        if self.ctx.duplicates.len() < MAX_DUPLICATES {
                            self.ctx.duplicates.push(dup);
                        }
                    }
                    self.ctx.path.truncate(mark);
                    map.insert(json, value);
                }
            }
        }
        // sigs.k8s.io/yaml goes through a Go map: keys come out sorted.
        map.sort_keys();
        Ok(Value::Object(map))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Value, A::Error> {
        // A local tag (`!foo bar`): goyaml keeps the value and drops the tag.
        let (_, variant) = data.variant::<IgnoredAny>()?;
        variant.newtype_variant_seed(ValueSeed { ctx: self.ctx })
    }
}

/// goyaml's merge key: the entries of a mapping (or of each mapping of a
/// sequence, the earlier ones winning) are set in the mapping being built.
fn merge(target: &mut Map<String, Value>, merged: Value, ctx: &mut Ctx<'_>) {
    let maps = match merged {
        Value::Object(m) => vec![m],
        Value::Array(items) if items.iter().all(Value::is_object) => items
            .into_iter()
            .rev()
            .filter_map(|v| match v {
                Value::Object(m) => Some(m),
                _ => None,
            })
            .collect(),
        _ => {
            ctx.problem("yaml: map merge requires map or sequence of maps as the value".into());
            return;
        }
    };
    for map in maps {
        target.extend(map);
    }
}

enum Key {
    /// A key as it becomes in JSON, and as goyaml prints it (`%#v`).
    Name { json: String, go: String },
    /// `<<`, goyaml's merge key.
    Merge,
    /// A key JSON cannot have (a problem is recorded).
    Invalid,
}

struct KeySeed<'c, 'i> {
    ctx: &'c mut Ctx<'i>,
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_, '_> {
    type Value = Key;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Key, D::Error> {
        self.ctx.key_end = None;
        de.deserialize_any(KeyVisitor { ctx: self.ctx })
    }
}

struct KeyVisitor<'c, 'i> {
    ctx: &'c mut Ctx<'i>,
}

/// The key a scalar becomes (`convertToJSONableObject`) and how goyaml
/// prints it (`%#v`).
fn key_of(scalar: Scalar) -> Option<Key> {
    let (json, go) = match scalar {
        Scalar::Null => return None,
        Scalar::Bool(b) => (b.to_string(), b.to_string()),
        Scalar::Int(i) => (i.to_string(), i.to_string()),
        Scalar::Uint(u) => (u.to_string(), format!("0x{u:x}")),
        Scalar::Float(f) => (format_float_g(f), format_float_g(f)),
    };
    Some(Key::Name { json, go })
}

impl KeyVisitor<'_, '_> {
    fn scalar(self, scalar: Scalar) -> Key {
        key_of(scalar).unwrap_or_else(|| {
            self.ctx
                .problem("unsupported map key of type: %!s(<nil>), key: <nil>".into());
            Key::Invalid
        })
    }

    fn string(v: &str) -> Key {
        Key::Name {
            json: v.to_owned(),
            go: quote(v),
        }
    }
}

impl<'de> Visitor<'de> for KeyVisitor<'_, '_> {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML mapping key")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Key, E> {
        Ok(self.scalar(Scalar::Bool(v)))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Key, E> {
        Ok(self.scalar(Scalar::Int(v)))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Key, E> {
        Ok(match i64::try_from(v) {
            Ok(i) => self.scalar(Scalar::Int(i)),
            Err(_) => self.scalar(Scalar::Uint(v)),
        })
    }

    fn visit_i128<E>(self, v: i128) -> Result<Key, E> {
        Ok(self.scalar(Scalar::Float(v as f64)))
    }

    fn visit_u128<E>(self, v: u128) -> Result<Key, E> {
        Ok(self.scalar(Scalar::Float(v as f64)))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Key, E> {
        Ok(self.scalar(Scalar::Float(v)))
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key, E> {
        if let Some(offset) = self.ctx.offset_of(v) {
            let quoted = offset
                .checked_sub(1)
                .is_some_and(|before| matches!(self.ctx.input[before], b'"' | b'\''));
            self.ctx.key_end = Some(offset + v.len() + usize::from(quoted));
        }
        if self.ctx.is_plain(v) {
            if v == "<<" {
                return Ok(Key::Merge);
            }
            if let Some(resolved) = resolve_plain(v) {
                return Ok(self.scalar(resolved));
            }
        }
        Ok(Self::string(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Key, E> {
        Ok(Self::string(v))
    }

    fn visit_unit<E>(self) -> Result<Key, E> {
        Ok(self.scalar(Scalar::Null))
    }

    fn visit_none<E>(self) -> Result<Key, E> {
        Ok(self.scalar(Scalar::Null))
    }

    fn visit_some<D: Deserializer<'de>>(self, de: D) -> Result<Key, D::Error> {
        de.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Key, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        self.ctx
            .problem("yaml: invalid map key: []interface {}".into());
        Ok(Key::Invalid)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Key, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        self.ctx
            .problem("yaml: invalid map key: map[interface {}]interface {}".into());
        Ok(Key::Invalid)
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Key, A::Error> {
        let (_, variant) = data.variant::<IgnoredAny>()?;
        variant.newtype_variant_seed(KeySeed { ctx: self.ctx })
    }
}

/// Stops the decoding at a value with an error that carries its mark.
struct FailSeed;

impl<'de> DeserializeSeed<'de> for FailSeed {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_any(FailVisitor)
    }
}

struct FailVisitor;

impl<'de> Visitor<'de> for FailVisitor {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(FAIL_MARKER)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_scalars_resolve_like_goyaml() {
        let value = |s: &str| resolve_plain(s).map(Scalar::value);
        assert_eq!(value("yes"), Some(Value::Bool(true)));
        assert_eq!(value("Off"), Some(Value::Bool(false)));
        assert_eq!(value("0755"), Some(Value::Number(493.into())));
        assert_eq!(value("1_000"), Some(Value::Number(1000.into())));
        assert_eq!(value("08"), Some(Value::Number(8.into())));
        assert_eq!(value("-0x1F"), Some(Value::Number((-31).into())));
        assert_eq!(value(".5"), Some(serde_json::json!(0.5)));
        assert_eq!(value("1.5e3"), Some(Value::Number(1500.into())));
        assert_eq!(resolve_plain("1e6"), Some(Scalar::Float(1e6)));
        assert_eq!(resolve_plain("2001-12-14"), None);
        assert_eq!(resolve_plain("1.2.3"), None);
        assert_eq!(resolve_plain("abc"), None);
        assert_eq!(resolve_plain("-"), None);
    }

    #[test]
    fn yaml_float_regex() {
        for ok in ["1", "1.", "1.5", ".5", "+1e3", "-1.5E-3", "08"] {
            assert!(is_yaml_float(ok), "{ok}");
        }
        for bad in ["", ".", "e3", "1e", "1.5.", "+", "1e+"] {
            assert!(!is_yaml_float(bad), "{bad}");
        }
    }

    #[test]
    fn go_ints() {
        assert_eq!(go_parse_int("017"), Some(15));
        assert_eq!(go_parse_int("0"), Some(0));
        assert_eq!(go_parse_int("0b101"), Some(5));
        assert_eq!(go_parse_int("0o17"), Some(15));
        assert_eq!(go_parse_int("-9223372036854775808"), Some(i64::MIN));
        assert_eq!(go_parse_int("9223372036854775808"), None);
        assert_eq!(go_parse_uint("9223372036854775808"), Some(1 << 63));
        assert_eq!(go_parse_int("0x"), None);
        assert_eq!(go_parse_int("+-1"), None);
    }

    #[test]
    fn tags_are_seen() {
        let input = b"a: !!str yes\nb: &x yes\nc: !t &x yes\nd: yes";
        let at = |needle: &str, nth: usize| {
            let s = std::str::from_utf8(input).unwrap();
            s.match_indices(needle).nth(nth).unwrap().0
        };
        assert!(has_tag_before(input, at("yes", 0)));
        assert!(!has_tag_before(input, at("yes", 1)));
        assert!(has_tag_before(input, at("yes", 2)));
        assert!(!has_tag_before(input, at("yes", 3)));
    }
}
