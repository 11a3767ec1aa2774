//! Field paths and sets of them, in structured-merge-diff's model.
//!
//! A [`FieldSet`] is a tree: every node holds the path elements that are
//! *members* (owned fields) and the path elements that have *children*
//! (nested members). A path element can be both, which is what the `"."`
//! entry of the wire format (`FieldsV1`) expresses.
//!
//! Path elements are totally ordered the way structured-merge-diff orders
//! them (field names, then associative-list keys, then set values, then list
//! indices; values compared numerically across ints and floats), and the
//! `FieldsV1` encoding emits them in that order, with `"."` first, so the
//! bytes match what kube-apiserver stores.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value};

/// One step of a field path.
#[derive(Debug, Clone)]
pub enum PathElement {
    /// `f:<name>`: a field of a struct or a key of a map.
    Field(String),
    /// `k:<json object>`: an item of an associative list, selected by the
    /// values of its key fields. Kept sorted by field name.
    Key(Vec<(String, Value)>),
    /// `v:<json>`: an item of a set (a list of scalars).
    Value(Value),
    /// `i:<n>`: an item of a list by position (not produced for Kubernetes
    /// objects, whose non-associative lists are atomic, but accepted).
    Index(i64),
}

impl PathElement {
    /// An associative-list key; the fields are sorted by name as
    /// structured-merge-diff does.
    pub fn key(mut fields: Vec<(String, Value)>) -> PathElement {
        // A stable sort keeps the order of (invalid) duplicate names.
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        PathElement::Key(fields)
    }

    /// The `FieldsV1` spelling of this element (`f:name`, `k:{...}`, ...).
    pub fn to_fields_v1_key(&self) -> String {
        match self {
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Key(fields) => {
                let mut out = String::from("k:{");
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_go_string(&mut out, name, false);
                    out.push(':');
                    write_go_json(&mut out, value);
                }
                out.push('}');
                out
            }
            PathElement::Value(value) => {
                let mut out = String::from("v:");
                write_go_json(&mut out, value);
                out
            }
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    /// Parses a `FieldsV1` key. `Ok(None)` is an element of an unknown type
    /// (`x:...`), which structured-merge-diff drops silently.
    pub fn from_fields_v1_key(key: &str) -> Result<Option<PathElement>, String> {
        let bytes = key.as_bytes();
        if bytes.len() < 2 {
            return Err("key must be 2 characters long:".to_string());
        }
        if bytes[1] != b':' {
            return Err(format!("missing colon: {key}"));
        }
        // bytes[1] is ASCII, so bytes[0] is a whole (ASCII) character and
        // slicing at 2 is on a character boundary.
        let rest = &key[2..];
        match bytes[0] {
            b'f' => Ok(Some(PathElement::Field(rest.to_string()))),
            b'v' => Ok(Some(PathElement::Value(read_leading_json(rest)?))),
            b'k' => {
                if rest.trim().is_empty() {
                    return Err("ReadObjectCB: expect { or n, but found end of input".to_string());
                }
                match read_leading_json(rest)? {
                    Value::Object(map) => {
                        let fields = map.into_iter().collect();
                        Ok(Some(PathElement::key(fields)))
                    }
                    other => Err(format!(
                        "ReadObjectCB: expect {{ or n, but found {}",
                        json_kind_char(&other)
                    )),
                }
            }
            b'i' => parse_go_int(rest).map(|i| Some(PathElement::Index(i))),
            _ => Ok(None),
        }
    }
}

/// Reads the first JSON value of `s`, ignoring anything after it (as
/// json-iterator does); an empty input reads as `null`.
fn read_leading_json(s: &str) -> Result<Value, String> {
    use serde::Deserialize;
    if s.trim().is_empty() {
        return Ok(Value::Null);
    }
    let mut de = serde_json::Deserializer::from_str(s);
    Value::deserialize(&mut de).map_err(|e| e.to_string())
}

fn json_kind_char(v: &Value) -> char {
    match v {
        Value::Null => 'n',
        Value::Bool(true) => 't',
        Value::Bool(false) => 'f',
        Value::Number(_) => '0',
        Value::String(_) => '"',
        Value::Array(_) => '[',
        Value::Object(_) => '{',
    }
}

/// `strconv.Atoi`: optional sign, decimal digits, 64-bit range.
fn parse_go_int(s: &str) -> Result<i64, String> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("strconv.Atoi: parsing \"{s}\": invalid syntax"));
    }
    let trimmed = s.strip_prefix('+').unwrap_or(s);
    trimmed
        .parse::<i64>()
        .map_err(|_| format!("strconv.Atoi: parsing \"{s}\": value out of range"))
}

impl fmt::Display for PathElement {
    /// structured-merge-diff's human-readable form: `.name`, `[k=v,...]`,
    /// `[=value]`, `[3]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                f.write_str("[")?;
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{name}={}", value_to_string(value))?;
                }
                f.write_str("]")
            }
            PathElement::Value(value) => write!(f, "[={}]", value_to_string(value)),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

fn value_to_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => {
            let mut out = String::new();
            write_go_json(&mut out, other);
            out
        }
    }
}

/// A field path, e.g. `.spec.template.spec.containers[name="nginx"].image`.
pub type Path = Vec<PathElement>;

/// Renders a path the way structured-merge-diff prints it.
pub fn path_to_string(path: &[PathElement]) -> String {
    path.iter().map(|pe| pe.to_string()).collect()
}

impl PartialEq for PathElement {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for PathElement {}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PathElement {
    /// Field names sort before keys, keys before values, values before
    /// indices.
    fn cmp(&self, other: &Self) -> Ordering {
        fn rank(pe: &PathElement) -> u8 {
            match pe {
                PathElement::Field(_) => 0,
                PathElement::Key(_) => 1,
                PathElement::Value(_) => 2,
                PathElement::Index(_) => 3,
            }
        }
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => a.cmp(b),
            (PathElement::Key(a), PathElement::Key(b)) => compare_field_lists(a, b),
            (PathElement::Value(a), PathElement::Value(b)) => compare_values(a, b),
            (PathElement::Index(a), PathElement::Index(b)) => a.cmp(b),
            _ => rank(self).cmp(&rank(other)),
        }
    }
}

/// Lexical order of two key lists: name, then value, pair by pair; a prefix
/// sorts first.
fn compare_field_lists(a: &[(String, Value)], b: &[(String, Value)]) -> Ordering {
    for (x, y) in a.iter().zip(b.iter()) {
        let c = x.0.cmp(&y.0).then_with(|| compare_values(&x.1, &y.1));
        if c != Ordering::Equal {
            return c;
        }
    }
    a.len().cmp(&b.len())
}

/// A JSON number as structured-merge-diff sees it.
enum Num {
    Int(i64),
    Float(f64),
}

fn num(n: &serde_json::Number) -> Num {
    if let Some(i) = n.as_i64() {
        Num::Int(i)
    } else {
        Num::Float(n.as_f64().unwrap_or(0.0))
    }
}

fn float_cmp(a: f64, b: f64) -> Ordering {
    a.partial_cmp(&b).unwrap_or(Ordering::Equal)
}

fn num_cmp(a: &Num, b: &Num) -> Ordering {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => x.cmp(y),
        (Num::Int(x), Num::Float(y)) => float_cmp(*x as f64, *y),
        (Num::Float(x), Num::Int(y)) => float_cmp(*x, *y as f64),
        (Num::Float(x), Num::Float(y)) => float_cmp(*x, *y),
    }
}

/// structured-merge-diff's total order on values: numbers (compared
/// numerically), then strings, booleans, lists, maps, and null last.
pub(crate) fn compare_values(a: &Value, b: &Value) -> Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Number(_) => 0,
            Value::String(_) => 1,
            Value::Bool(_) => 2,
            Value::Array(_) => 3,
            Value::Object(_) => 4,
            Value::Null => 5,
        }
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => num_cmp(&num(x), &num(y)),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (l, r) in x.iter().zip(y.iter()) {
                let c = compare_values(l, r);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => compare_maps(x, y),
        (Value::Null, Value::Null) => Ordering::Equal,
        _ => rank(a).cmp(&rank(b)),
    }
}

/// Maps compare key by key in lexical key order; a missing key sorts after a
/// present one, and a map that runs out of keys first sorts first.
fn compare_maps(x: &Map<String, Value>, y: &Map<String, Value>) -> Ordering {
    let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
    for (i, key) in keys.into_iter().enumerate() {
        let c = if i == x.len() {
            Ordering::Less
        } else if i == y.len() {
            Ordering::Greater
        } else {
            match (x.get(key), y.get(key)) {
                (None, _) => Ordering::Greater,
                (_, None) => Ordering::Less,
                (Some(l), Some(r)) => compare_values(l, r),
            }
        };
        if c != Ordering::Equal {
            return c;
        }
    }
    Ordering::Equal
}

/// structured-merge-diff's value equality: numbers are equal when they are
/// numerically equal (`1` == `1.0`); everything else is structural.
pub(crate) fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => num_cmp(&num(x), &num(y)) == Ordering::Equal,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(l, r)| values_equal(l, r))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, l)| y.get(k).is_some_and(|r| values_equal(l, r)))
        }
        _ => a == b,
    }
}

/// A set of field paths.
///
/// Invariant: no child set is empty (every branch ends in a member), which is
/// what makes [`FieldSet::is_empty`] cheap and the encoding unambiguous.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    /// The empty set.
    pub fn new() -> FieldSet {
        FieldSet::default()
    }

    /// A set holding the given paths.
    pub fn from_paths<I, P>(paths: I) -> FieldSet
    where
        I: IntoIterator<Item = P>,
        P: AsRef<[PathElement]>,
    {
        let mut set = FieldSet::new();
        for p in paths {
            set.insert(p.as_ref());
        }
        set
    }

    /// Adds a path. Its parents are *not* added. The empty path (the whole
    /// object) is never tracked and is ignored.
    pub fn insert(&mut self, path: &[PathElement]) {
        let Some((last, parents)) = path.split_last() else {
            return;
        };
        let mut node = self;
        for pe in parents {
            node = node.children.entry(pe.clone()).or_default();
        }
        node.members.insert(last.clone());
    }

    /// Whether the path is a member.
    pub fn has(&self, path: &[PathElement]) -> bool {
        let Some((last, parents)) = path.split_last() else {
            return false;
        };
        let mut node = self;
        for pe in parents {
            match node.children.get(pe) {
                Some(child) => node = child,
                None => return false,
            }
        }
        node.members.contains(last)
    }

    /// True when the set has no members at any depth.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.values().all(FieldSet::is_empty)
    }

    /// The number of members at every depth.
    pub fn len(&self) -> usize {
        self.members.len() + self.children.values().map(FieldSet::len).sum::<usize>()
    }

    /// The members directly under this node.
    pub fn members(&self) -> impl Iterator<Item = &PathElement> {
        self.members.iter()
    }

    /// The nodes directly under this node that have members below them.
    pub fn children(&self) -> impl Iterator<Item = (&PathElement, &FieldSet)> {
        self.children.iter()
    }

    /// The subset below `pe` (empty when there is none).
    pub fn with_prefix(&self, pe: &PathElement) -> FieldSet {
        self.children.get(pe).cloned().unwrap_or_default()
    }

    /// Paths in either set.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.union_in_place(other);
        out
    }

    fn union_in_place(&mut self, other: &FieldSet) {
        self.members.extend(other.members.iter().cloned());
        for (pe, child) in &other.children {
            match self.children.get_mut(pe) {
                Some(mine) => mine.union_in_place(child),
                None => {
                    if !child.is_empty() {
                        self.children.insert(pe.clone(), child.clone());
                    }
                }
            }
        }
    }

    /// Paths in both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.intersection(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(pe, mine)| {
                let theirs = other.children.get(pe)?;
                let both = mine.intersection(theirs);
                (!both.is_empty()).then(|| (pe.clone(), both))
            })
            .collect();
        FieldSet { members, children }
    }

    /// Paths in `self` that are not in `other`. Only exact paths are removed:
    /// removing a parent does not remove its children.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(pe, mine)| match other.children.get(pe) {
                Some(theirs) => {
                    let rest = mine.difference(theirs);
                    (!rest.is_empty()).then(|| (pe.clone(), rest))
                }
                None => Some((pe.clone(), mine.clone())),
            })
            .collect();
        FieldSet { members, children }
    }

    /// Paths in `self` that are neither in `other` nor below a member of
    /// `other` (removing `a.b` also removes `a.b.c`).
    pub fn recursive_difference(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(pe, mine)| {
                if other.members.contains(pe) {
                    return None;
                }
                match other.children.get(pe) {
                    Some(theirs) => {
                        let rest = mine.recursive_difference(theirs);
                        (!rest.is_empty()).then(|| (pe.clone(), rest))
                    }
                    None => Some((pe.clone(), mine.clone())),
                }
            })
            .collect();
        FieldSet { members, children }
    }

    /// Only the members that have nothing below them.
    pub fn leaves(&self) -> FieldSet {
        let members = self
            .members
            .iter()
            .filter(|pe| !self.children.contains_key(pe))
            .cloned()
            .collect();
        let children = self
            .children
            .iter()
            .filter_map(|(pe, child)| {
                let l = child.leaves();
                (!l.is_empty()).then(|| (pe.clone(), l))
            })
            .collect();
        FieldSet { members, children }
    }

    /// Every member path, in order (a node's members, then its children).
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        let mut prefix = Vec::new();
        self.collect_paths(&mut prefix, &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        for pe in &self.members {
            let mut p = prefix.clone();
            p.push(pe.clone());
            out.push(p);
        }
        for (pe, child) in &self.children {
            prefix.push(pe.clone());
            child.collect_paths(prefix, out);
            prefix.pop();
        }
    }

    /// The `FieldsV1` JSON object, ordered exactly as kube-apiserver writes
    /// it: `"."` first, then path elements in order.
    pub fn to_fields_v1(&self) -> Value {
        Value::Object(self.emit(false))
    }

    fn emit(&self, include_self: bool) -> Map<String, Value> {
        let mut out = Map::new();
        if include_self && !self.is_empty() {
            out.insert(".".to_string(), Value::Object(Map::new()));
        }
        // Members and children merged in path-element order; an element that
        // is both is written once, as a node with ".".
        let mut members = self.members.iter().peekable();
        let mut children = self.children.iter().peekable();
        loop {
            let next = match (members.peek(), children.peek()) {
                (None, None) => break,
                (Some(m), None) => Step::Member(m),
                (None, Some(_)) => Step::Child,
                (Some(m), Some((c, _))) => match m.cmp(c) {
                    Ordering::Less => Step::Member(m),
                    Ordering::Greater => Step::Child,
                    Ordering::Equal => Step::Both,
                },
            };
            match next {
                Step::Member(pe) => {
                    out.insert(pe.to_fields_v1_key(), Value::Object(Map::new()));
                    members.next();
                }
                Step::Child => {
                    if let Some((pe, child)) = children.next() {
                        out.insert(pe.to_fields_v1_key(), Value::Object(child.emit(false)));
                    }
                }
                Step::Both => {
                    members.next();
                    if let Some((pe, child)) = children.next() {
                        out.insert(pe.to_fields_v1_key(), Value::Object(child.emit(true)));
                    }
                }
            }
        }
        out
    }

    /// Parses a `FieldsV1` JSON object. `null` is the empty set. Unknown
    /// path element types are dropped; malformed keys are an error.
    pub fn from_fields_v1(value: &Value) -> Result<FieldSet, String> {
        match value {
            Value::Null => Ok(FieldSet::new()),
            Value::Object(map) => Ok(read_node(map)?.0.unwrap_or_default()),
            other => Err(format!(
                "ReadMapCB: expect {{ or n, but found {}",
                json_kind_char(other)
            )),
        }
    }

    /// The compact JSON text of [`FieldSet::to_fields_v1`].
    pub fn to_json_string(&self) -> String {
        self.to_fields_v1().to_string()
    }
}

enum Step<'a> {
    Member(&'a PathElement),
    Child,
    Both,
}

/// Reads one level: the children found (if any) and whether the node itself
/// is a member (a `"."` entry, or no children at all).
fn read_node(map: &Map<String, Value>) -> Result<(Option<FieldSet>, bool), String> {
    let mut children: Option<FieldSet> = None;
    let mut is_member = false;
    for (key, val) in map {
        if key == "." {
            is_member = true;
            continue;
        }
        let pe = match PathElement::from_fields_v1_key(key) {
            Ok(Some(pe)) => pe,
            Ok(None) => continue,
            Err(e) => return Err(format!("parsing key as path element: {e}")),
        };
        let (grandchildren, child_is_member) = match val {
            Value::Object(m) => read_node(m)?,
            Value::Null => (None, true),
            other => {
                return Err(format!(
                    "ReadMapCB: expect {{ or n, but found {}",
                    json_kind_char(other)
                ))
            }
        };
        if child_is_member {
            children
                .get_or_insert_with(FieldSet::new)
                .members
                .insert(pe.clone());
        }
        if let Some(gc) = grandchildren {
            children
                .get_or_insert_with(FieldSet::new)
                .children
                .insert(pe, gc);
        }
    }
    if children.is_none() {
        is_member = true;
    }
    Ok((children, is_member))
}

impl fmt::Display for FieldSet {
    /// One path per line, as structured-merge-diff prints sets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self.paths().iter().map(|p| path_to_string(p)).collect();
        f.write_str(&lines.join("\n"))
    }
}

impl serde::Serialize for FieldSet {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_fields_v1().serialize(serializer)
    }
}

impl<'de> serde::Deserialize<'de> for FieldSet {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(deserializer)?;
        FieldSet::from_fields_v1(&v).map_err(serde::de::Error::custom)
    }
}

// ---------------------------------------------------------------------------
// Go-compatible JSON text for the insides of `k:` and `v:` keys.
//
// kube writes key and set values with json-iterator's standard-library
// configuration: strings HTML-escaped (`<` as `\u003c`), map keys sorted,
// floats in Go's shortest form. The key *names* inside `k:{...}` are written
// without HTML escaping.

pub(crate) fn write_go_json(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match num(n) {
            Num::Int(i) => out.push_str(&i.to_string()),
            Num::Float(f) => out.push_str(&go_float(f)),
        },
        Value::String(s) => write_go_string(out, s, true),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_json(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_string(out, k, true);
                out.push(':');
                if let Some(val) = map.get(k) {
                    write_go_json(out, val);
                }
            }
            out.push('}');
        }
    }
}

/// A JSON string as json-iterator writes it: `"`, `\` and control characters
/// escaped (`\n`, `\r`, `\t`, else `\u00xx`); with `html`, also `<`, `>`, `&`,
/// U+2028 and U+2029.
pub(crate) fn write_go_string(out: &mut String, s: &str, html: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            '<' | '>' | '&' if html => out.push_str(&format!("\\u{:04x}", c as u32)),
            '\u{2028}' | '\u{2029}' if html => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `strconv.FormatFloat(f, 'f' or 'e', -1, 64)` with json-iterator's choice
/// of format: exponent form below 1e-6 and from 1e21.
pub(crate) fn go_float(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        // Rust prints the shortest mantissa like Go; only the exponent
        // spelling differs (Go: sign always, at least two digits).
        let s = format!("{f:e}");
        match s.split_once('e') {
            Some((mantissa, exp)) => {
                let (sign, digits) = match exp.strip_prefix('-') {
                    Some(d) => ('-', d),
                    None => ('+', exp),
                };
                let digits = if digits.len() < 2 {
                    format!("0{digits}")
                } else {
                    digits.to_string()
                };
                format!("{mantissa}e{sign}{digits}")
            }
            None => s,
        }
    } else {
        format!("{f}")
    }
}
