//! JSON request bodies: a `serde_json` deserializer driven by our own seed, so
//! the value is built while duplicate keys are recorded, plus an emulation of
//! Go's `encoding/json` scanner to word syntax errors the way kube-apiserver
//! does.

use super::gofmt::quote_char;
use super::{interpret, DecodeError, Decoded, MAX_DUPLICATES};
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt::{self, Write as _};

/// Go's `encoding/json` nesting limit.
const GO_MAX_DEPTH: usize = 10_000;

pub(super) fn decode(body: &[u8]) -> Result<Decoded, DecodeError> {
    // Go replaces invalid UTF-8 in strings with U+FFFD instead of failing;
    // outside strings such bytes are syntax errors, reported below from the
    // original bytes.
    let text = go_lossy_utf8(body);
    match parse(text.as_bytes()) {
        Ok((value, duplicates)) => finish(value, duplicates),
        Err(err) => {
            if let Some(msg) = go_syntax_error(body) {
                return Err(DecodeError::parse(msg));
            }
            // Go accepts the text; see why serde_json did not.
            let detail = err.to_string();
            if detail.starts_with("recursion limit exceeded") {
                return Err(DecodeError::parse(
                    "exceeded max depth of 128 nested objects or arrays".into(),
                ));
            }
            if detail.starts_with("number out of range") {
                let literal = huge_number(text.as_bytes()).unwrap_or_default();
                return Err(DecodeError::unrecognized(format!(
                    "json: cannot unmarshal number {literal} into Go value of type float64"
                )));
            }
            if let Some(fixed) = replace_lone_surrogates(&text) {
                if let Ok((value, duplicates)) = parse(fixed.as_bytes()) {
                    return finish(value, duplicates);
                }
            }
            Err(DecodeError::parse(detail))
        }
    }
}

fn finish(value: Value, duplicates: Vec<String>) -> Result<Decoded, DecodeError> {
    Ok(Decoded {
        value: interpret(value)?,
        duplicates,
    })
}

/// Parses with `serde_json`, recording duplicated keys.
fn parse(text: &[u8]) -> Result<(Value, Vec<String>), serde_json::Error> {
    let mut ctx = Ctx::default();
    let mut de = serde_json::Deserializer::from_slice(text);
    let value = ValueSeed { ctx: &mut ctx }.deserialize(&mut de)?;
    de.end()?;
    Ok((value, ctx.duplicates))
}

/// The field path being decoded and the duplicates found so far.
#[derive(Default)]
struct Ctx {
    path: String,
    duplicates: Vec<String>,
    seen: HashSet<String>,
}

impl Ctx {
    fn push_key(&mut self, key: &str) -> usize {
        let mark = self.path.len();
        if !self.path.is_empty() {
            self.path.push('.');
        }
        self.path.push_str(key);
        mark
    }

    fn push_index(&mut self, i: usize) -> usize {
        let mark = self.path.len();
        let _ = write!(self.path, "[{i}]");
        mark
    }

    fn pop(&mut self, mark: usize) {
        self.path.truncate(mark);
    }

    fn record_duplicate(&mut self) {
        if self.duplicates.len() < MAX_DUPLICATES && self.seen.insert(self.path.clone()) {
            self.duplicates.push(self.path.clone());
        }
    }
}

struct ValueSeed<'c> {
    ctx: &'c mut Ctx,
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        de.deserialize_any(ValueVisitor { ctx: self.ctx })
    }
}

struct ValueVisitor<'c> {
    ctx: &'c mut Ctx,
}

impl<'de> Visitor<'de> for ValueVisitor<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
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

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
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
            let mark = self.ctx.push_index(items.len());
            let item = seq.next_element_seed(ValueSeed {
                ctx: &mut *self.ctx,
            })?;
            self.ctx.pop(mark);
            match item {
                Some(v) => items.push(v),
                None => break,
            }
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        // Once a key repeats: every key in order of occurrence, so the
        // object can follow the last occurrence of each key (where kube
        // reports the duplicate).
        let mut order: Option<Vec<String>> = None;
        while let Some(key) = access.next_key::<String>()? {
            let mark = self.ctx.push_key(&key);
            if map.contains_key(&key) {
                self.ctx.record_duplicate();
                if order.is_none() {
                    order = Some(map.keys().cloned().collect());
                }
            }
            let value = access.next_value_seed(ValueSeed {
                ctx: &mut *self.ctx,
            })?;
            self.ctx.pop(mark);
            if let Some(order) = order.as_mut() {
                order.push(key.clone());
            }
            map.insert(key, value);
        }
        if let Some(order) = order {
            map = in_order_of_last_occurrence(map, &order);
        }
        Ok(Value::Object(map))
    }
}

/// Rebuilds an object whose keys repeated so that each member sits where
/// its key last occurred. Linear in the number of keys.
fn in_order_of_last_occurrence(
    mut map: Map<String, Value>,
    order: &[String],
) -> Map<String, Value> {
    let last: HashMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, k)| (k.as_str(), i))
        .collect();
    let mut out = Map::with_capacity(map.len());
    for (i, key) in order.iter().enumerate() {
        if last.get(key.as_str()) == Some(&i) {
            if let Some(v) = map.swap_remove(key) {
                out.insert(key.clone(), v);
            }
        }
    }
    out
}

/// Replaces invalid UTF-8 the way Go's decoder does inside strings: one
/// U+FFFD per offending byte.
fn go_lossy_utf8(body: &[u8]) -> Cow<'_, str> {
    if let Ok(s) = std::str::from_utf8(body) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(body.len() + 16);
    let mut rest = body;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                out.push_str(s);
                break;
            }
            Err(e) => {
                let (valid, after) = rest.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                let bad = e.error_len().unwrap_or(after.len()).max(1);
                for _ in 0..bad.min(after.len()) {
                    out.push('\u{fffd}');
                }
                rest = after.get(bad..).unwrap_or_default();
            }
        }
    }
    Cow::Owned(out)
}

/// Go decodes an unpaired UTF-16 surrogate escape (`\ud800`) as U+FFFD where
/// serde_json refuses it; rewrites such escapes to `\ufffd`. `None` when
/// there are none.
fn replace_lone_surrogates(text: &str) -> Option<String> {
    fn hex4(b: &[u8]) -> Option<u32> {
        let s = std::str::from_utf8(b.get(..4)?).ok()?;
        u32::from_str_radix(s, 16).ok()
    }
    let bytes = text.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    let mut changed = false;
    let mut in_string = false;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if !in_string {
            in_string = c == b'"';
            out.push(c);
            i += 1;
            continue;
        }
        match c {
            b'"' => {
                in_string = false;
                out.push(c);
                i += 1;
            }
            b'\\' if bytes.get(i + 1) == Some(&b'u') => {
                let code = hex4(&bytes[(i + 2).min(bytes.len())..]);
                match code {
                    Some(hi @ 0xd800..=0xdbff) => {
                        let next_is_low = bytes.get(i + 6) == Some(&b'\\')
                            && bytes.get(i + 7) == Some(&b'u')
                            && matches!(
                                hex4(&bytes[(i + 8).min(bytes.len())..]),
                                Some(0xdc00..=0xdfff)
                            );
                        if next_is_low {
                            out.extend_from_slice(&bytes[i..i + 12]);
                            i += 12;
                        } else {
                            let _ = hi;
                            out.extend_from_slice(b"\\ufffd");
                            changed = true;
                            i += 6;
                        }
                    }
                    Some(0xdc00..=0xdfff) => {
                        out.extend_from_slice(b"\\ufffd");
                        changed = true;
                        i += 6;
                    }
                    _ => {
                        let end = (i + 6).min(bytes.len());
                        out.extend_from_slice(&bytes[i..end]);
                        i = end;
                    }
                }
            }
            b'\\' => {
                let end = (i + 2).min(bytes.len());
                out.extend_from_slice(&bytes[i..end]);
                i = end;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    if !changed {
        return None;
    }
    String::from_utf8(out).ok()
}

/// The first number literal that does not fit a float64, as written.
fn huge_number(text: &[u8]) -> Option<String> {
    let mut in_string = false;
    let mut escaped = false;
    let mut i = 0;
    while i < text.len() {
        let c = text[i];
        if in_string {
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_string = false;
            }
            i += 1;
            continue;
        }
        if c == b'"' {
            in_string = true;
            i += 1;
            continue;
        }
        if c == b'-' || c.is_ascii_digit() {
            let start = i;
            while i < text.len()
                && matches!(text[i], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
            {
                i += 1;
            }
            let literal = std::str::from_utf8(&text[start..i]).ok()?;
            if literal.parse::<f64>().is_ok_and(f64::is_infinite) {
                return Some(literal.to_string());
            }
            continue;
        }
        i += 1;
    }
    None
}

// ---------------------------------------------------------------------------
// Go's JSON scanner, for its error messages.

#[derive(Clone, Copy, PartialEq, Eq)]
enum Parse {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum St {
    BeginValueOrEmpty,
    BeginValue,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    EndTop,
    InString,
    InStringEsc,
    /// Inside `\u`, with this many hex digits read.
    InStringEscU(u8),
    Neg,
    One,
    Zero,
    Dot,
    Dot0,
    E,
    ESign,
    E0,
    /// Inside the literal `word`, with `at` bytes matched.
    Literal {
        word: &'static [u8],
        at: usize,
    },
}

struct Scanner {
    step: St,
    stack: Vec<Parse>,
    end_top: bool,
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn invalid(c: u8, context: &str) -> String {
    format!("invalid character {} {context}", quote_char(c))
}

impl Scanner {
    fn new() -> Self {
        Scanner {
            step: St::BeginValue,
            stack: Vec::new(),
            end_top: false,
        }
    }

    fn push(&mut self, c: u8, p: Parse, next: St) -> Result<(), String> {
        self.stack.push(p);
        if self.stack.len() > GO_MAX_DEPTH {
            return Err(invalid(c, "exceeded max depth"));
        }
        self.step = next;
        Ok(())
    }

    fn pop(&mut self) {
        self.stack.pop();
        if self.stack.is_empty() {
            self.step = St::EndTop;
            self.end_top = true;
        } else {
            self.step = St::EndValue;
        }
    }

    fn begin_value(&mut self, c: u8) -> Result<(), String> {
        if is_space(c) {
            return Ok(());
        }
        self.step = match c {
            b'{' => return self.push(c, Parse::ObjectKey, St::BeginStringOrEmpty),
            b'[' => return self.push(c, Parse::ArrayValue, St::BeginValueOrEmpty),
            b'"' => St::InString,
            b'-' => St::Neg,
            b'0' => St::Zero,
            b'1'..=b'9' => St::One,
            b't' => St::Literal {
                word: b"true",
                at: 1,
            },
            b'f' => St::Literal {
                word: b"false",
                at: 1,
            },
            b'n' => St::Literal {
                word: b"null",
                at: 1,
            },
            _ => return Err(invalid(c, "looking for beginning of value")),
        };
        Ok(())
    }

    fn begin_string(&mut self, c: u8) -> Result<(), String> {
        if is_space(c) {
            return Ok(());
        }
        if c == b'"' {
            self.step = St::InString;
            return Ok(());
        }
        Err(invalid(c, "looking for beginning of object key string"))
    }

    fn end_value(&mut self, c: u8) -> Result<(), String> {
        let Some(&top) = self.stack.last() else {
            self.step = St::EndTop;
            self.end_top = true;
            return self.end_top(c);
        };
        if is_space(c) {
            self.step = St::EndValue;
            return Ok(());
        }
        match top {
            Parse::ObjectKey => {
                if c == b':' {
                    if let Some(p) = self.stack.last_mut() {
                        *p = Parse::ObjectValue;
                    }
                    self.step = St::BeginValue;
                    return Ok(());
                }
                Err(invalid(c, "after object key"))
            }
            Parse::ObjectValue => match c {
                b',' => {
                    if let Some(p) = self.stack.last_mut() {
                        *p = Parse::ObjectKey;
                    }
                    self.step = St::BeginString;
                    Ok(())
                }
                b'}' => {
                    self.pop();
                    Ok(())
                }
                _ => Err(invalid(c, "after object key:value pair")),
            },
            Parse::ArrayValue => match c {
                b',' => {
                    self.step = St::BeginValue;
                    Ok(())
                }
                b']' => {
                    self.pop();
                    Ok(())
                }
                _ => Err(invalid(c, "after array element")),
            },
        }
    }

    fn end_top(&mut self, c: u8) -> Result<(), String> {
        if is_space(c) {
            Ok(())
        } else {
            Err(invalid(c, "after top-level value"))
        }
    }

    fn step(&mut self, c: u8) -> Result<(), String> {
        match self.step {
            St::BeginValueOrEmpty => {
                if is_space(c) {
                    Ok(())
                } else if c == b']' {
                    self.end_value(c)
                } else {
                    self.begin_value(c)
                }
            }
            St::BeginValue => self.begin_value(c),
            St::BeginStringOrEmpty => {
                if is_space(c) {
                    Ok(())
                } else if c == b'}' {
                    if let Some(p) = self.stack.last_mut() {
                        *p = Parse::ObjectValue;
                    }
                    self.end_value(c)
                } else {
                    self.begin_string(c)
                }
            }
            St::BeginString => self.begin_string(c),
            St::EndValue => self.end_value(c),
            St::EndTop => self.end_top(c),
            St::InString => {
                match c {
                    b'"' => self.step = St::EndValue,
                    b'\\' => self.step = St::InStringEsc,
                    0..=0x1f => return Err(invalid(c, "in string literal")),
                    _ => {}
                }
                Ok(())
            }
            St::InStringEsc => match c {
                b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => {
                    self.step = St::InString;
                    Ok(())
                }
                b'u' => {
                    self.step = St::InStringEscU(0);
                    Ok(())
                }
                _ => Err(invalid(c, "in string escape code")),
            },
            St::InStringEscU(n) => {
                if !c.is_ascii_hexdigit() {
                    return Err(invalid(c, "in \\u hexadecimal character escape"));
                }
                self.step = if n >= 3 {
                    St::InString
                } else {
                    St::InStringEscU(n + 1)
                };
                Ok(())
            }
            St::Neg => match c {
                b'0' => {
                    self.step = St::Zero;
                    Ok(())
                }
                b'1'..=b'9' => {
                    self.step = St::One;
                    Ok(())
                }
                _ => Err(invalid(c, "in numeric literal")),
            },
            St::One => {
                if c.is_ascii_digit() {
                    Ok(())
                } else {
                    self.zero(c)
                }
            }
            St::Zero => self.zero(c),
            St::Dot => {
                if c.is_ascii_digit() {
                    self.step = St::Dot0;
                    Ok(())
                } else {
                    Err(invalid(c, "after decimal point in numeric literal"))
                }
            }
            St::Dot0 => match c {
                b'0'..=b'9' => Ok(()),
                b'e' | b'E' => {
                    self.step = St::E;
                    Ok(())
                }
                _ => self.end_value(c),
            },
            St::E => {
                if c == b'+' || c == b'-' {
                    self.step = St::ESign;
                    Ok(())
                } else {
                    self.e_sign(c)
                }
            }
            St::ESign => self.e_sign(c),
            St::E0 => {
                if c.is_ascii_digit() {
                    Ok(())
                } else {
                    self.end_value(c)
                }
            }
            St::Literal { word, at } => {
                let expected = word.get(at).copied().unwrap_or(b' ');
                if c != expected {
                    let name = std::str::from_utf8(word).unwrap_or_default();
                    return Err(invalid(
                        c,
                        &format!("in literal {name} (expecting {})", quote_char(expected)),
                    ));
                }
                self.step = if at + 1 >= word.len() {
                    St::EndValue
                } else {
                    St::Literal { word, at: at + 1 }
                };
                Ok(())
            }
        }
    }

    fn zero(&mut self, c: u8) -> Result<(), String> {
        match c {
            b'.' => {
                self.step = St::Dot;
                Ok(())
            }
            b'e' | b'E' => {
                self.step = St::E;
                Ok(())
            }
            _ => self.end_value(c),
        }
    }

    fn e_sign(&mut self, c: u8) -> Result<(), String> {
        if c.is_ascii_digit() {
            self.step = St::E0;
            Ok(())
        } else {
            Err(invalid(c, "in exponent of numeric literal"))
        }
    }

    fn eof(&mut self) -> Result<(), String> {
        if self.end_top {
            return Ok(());
        }
        self.step(b' ')?;
        if self.end_top {
            return Ok(());
        }
        Err("unexpected end of JSON input".into())
    }
}

/// The message Go's `json.Unmarshal` gives for malformed input, or `None` if
/// Go would accept the syntax.
pub(super) fn go_syntax_error(data: &[u8]) -> Option<String> {
    let mut scanner = Scanner::new();
    for &c in data {
        if let Err(e) = scanner.step(c) {
            return Some(e);
        }
    }
    scanner.eof().err()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(s: &str) -> String {
        go_syntax_error(s.as_bytes()).unwrap_or_else(|| "<ok>".into())
    }

    #[test]
    fn scanner_accepts_valid_json() {
        for ok in [
            "{}",
            " [ ] ",
            "{\"a\":[1,-2.5e+3,true,false,null,\"x\\u00e9\\n\"]}",
            "0",
            "\"\u{ff}\"",
        ] {
            assert_eq!(err(ok), "<ok>", "{ok}");
        }
    }

    #[test]
    fn scanner_words_errors_like_go() {
        let cases = [
            ("", "unexpected end of JSON input"),
            ("{", "unexpected end of JSON input"),
            ("{\"a\":1", "unexpected end of JSON input"),
            ("x", "invalid character 'x' looking for beginning of value"),
            ("{\"a\" 1}", "invalid character '1' after object key"),
            (
                "{\"a\":1 \"b\":2}",
                "invalid character '\"' after object key:value pair",
            ),
            ("[1 2]", "invalid character '2' after array element"),
            (
                "{a:1}",
                "invalid character 'a' looking for beginning of object key string",
            ),
            (
                "{\"a\":1,}",
                "invalid character '}' looking for beginning of object key string",
            ),
            (
                "[1,]",
                "invalid character ']' looking for beginning of value",
            ),
            ("{} x", "invalid character 'x' after top-level value"),
            ("\"a\u{1}\"", "invalid character '\\x01' in string literal"),
            ("\"\\q\"", "invalid character 'q' in string escape code"),
            (
                "\"\\u12g4\"",
                "invalid character 'g' in \\u hexadecimal character escape",
            ),
            ("-x", "invalid character 'x' in numeric literal"),
            (
                "1.x",
                "invalid character 'x' after decimal point in numeric literal",
            ),
            (
                "1ex",
                "invalid character 'x' in exponent of numeric literal",
            ),
            (
                "tru",
                "invalid character ' ' in literal true (expecting 'e')",
            ),
            (
                "nul1",
                "invalid character '1' in literal null (expecting 'l')",
            ),
            (
                "fals",
                "invalid character ' ' in literal false (expecting 'e')",
            ),
            ("01", "invalid character '1' after top-level value"),
            ("-", "invalid character ' ' in numeric literal"),
            (
                "\u{feff}{}",
                "invalid character 'ï' looking for beginning of value",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(err(input), want, "input {input:?}");
        }
    }

    #[test]
    fn scanner_depth_limit() {
        let deep = "[".repeat(GO_MAX_DEPTH + 1);
        assert_eq!(err(&deep), "invalid character '[' exceeded max depth");
        let ok = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(err(&ok), "<ok>");
    }

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        assert_eq!(
            replace_lone_surrogates(r#"["\ud800", "\udc00x", "\ud83d\ude00", "\ud800\u0041"]"#)
                .as_deref(),
            Some(r#"["\ufffd", "\ufffdx", "\ud83d\ude00", "\ufffd\u0041"]"#)
        );
        assert_eq!(replace_lone_surrogates(r#"["\u0041"]"#), None);
    }

    #[test]
    fn lossy_utf8_replaces_each_byte() {
        assert_eq!(go_lossy_utf8(b"a\xe2\x82b"), "a\u{fffd}\u{fffd}b");
        assert_eq!(go_lossy_utf8(b"ok"), "ok");
        assert_eq!(go_lossy_utf8(b"\xff"), "\u{fffd}");
    }

    #[test]
    fn finds_the_huge_number() {
        assert_eq!(
            huge_number(br#"{"a":"1e999","b":1e400}"#).as_deref(),
            Some("1e400")
        );
    }
}
