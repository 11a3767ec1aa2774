//! The checker's types, how they print (as cel-go's `FormatCELType`), how a
//! structural schema becomes one (as kube's `SchemaDeclType`), and type
//! unification (cel-go's `isAssignable`, with type parameters bound in a
//! [`Mapping`]).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use serde_json::Value;

/// A CEL type as the checker sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Type {
    /// Anything: matches every overload and every field selection.
    Dyn,
    /// The type of an expression that already failed to check; behaves as
    /// [`Type::Dyn`] so one mistake is reported once.
    Error,
    Null,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Timestamp,
    Duration,
    List(Box<Type>),
    Map(Box<Type>, Box<Type>),
    /// An object of a schema: its fields are the schema's properties.
    Object(Arc<Object>),
    /// A named type with parameters: `optional_type(T)`, `net.IP`,
    /// `kubernetes.Quantity`, the authorizer's types...
    Opaque(&'static str, Vec<Type>),
    /// The type of a type: `type(int)`; `Type(None)` is `type`.
    Type(Option<Box<Type>>),
    /// A type parameter, bound during checking.
    Param(Arc<str>),
}

/// An object type built from a schema's `properties`.
#[derive(Debug, PartialEq)]
pub struct Object {
    /// Its name: where it is in the schema, as kube names it
    /// (`selfType.spec.template`).
    pub name: String,
    /// Its fields, by their CEL names (escaped as kube escapes them).
    pub fields: BTreeMap<String, Type>,
}

pub(crate) const OPTIONAL: &str = "optional_type";

impl Type {
    /// `list(elem)`.
    pub fn list(elem: Type) -> Type {
        Type::List(Box::new(elem))
    }

    /// `map(key, value)`.
    pub fn map(key: Type, value: Type) -> Type {
        Type::Map(Box::new(key), Box::new(value))
    }

    /// `optional_type(t)`.
    pub fn optional(t: Type) -> Type {
        Type::Opaque(OPTIONAL, vec![t])
    }

    /// A parameterless named type (`net.IP`, `kubernetes.Quantity`...).
    pub fn named(name: &'static str) -> Type {
        Type::Opaque(name, Vec::new())
    }

    pub(crate) fn param(name: &str) -> Type {
        Type::Param(Arc::from(name))
    }

    pub(crate) fn is_dyn_or_error(&self) -> bool {
        matches!(self, Type::Dyn | Type::Error)
    }

    /// The optional's value type, if this is an optional.
    pub(crate) fn unwrap_optional(&self) -> Option<&Type> {
        match self {
            Type::Opaque(OPTIONAL, p) if p.len() == 1 => Some(&p[0]),
            _ => None,
        }
    }

    /// Whether the type is fully known: no `dyn`, error or parameter in it.
    pub(crate) fn is_concrete(&self) -> bool {
        match self {
            Type::Dyn | Type::Error | Type::Param(_) => false,
            Type::List(e) => e.is_concrete(),
            Type::Map(k, v) => k.is_concrete() && v.is_concrete(),
            Type::Opaque(_, p) => p.iter().all(Type::is_concrete),
            Type::Type(Some(t)) => t.is_concrete(),
            _ => true,
        }
    }

    /// The type's name for `type(x) == name` comparisons and errors.
    fn kind_name(&self) -> &str {
        match self {
            Type::Dyn => "dyn",
            Type::Error => "!error!",
            Type::Null => "null",
            Type::Bool => "bool",
            Type::Int => "int",
            Type::Uint => "uint",
            Type::Double => "double",
            Type::String => "string",
            Type::Bytes => "bytes",
            Type::Timestamp => "timestamp",
            Type::Duration => "duration",
            Type::List(_) => "list",
            Type::Map(..) => "map",
            Type::Object(o) => &o.name,
            Type::Opaque(n, _) => n,
            Type::Type(_) => "type",
            Type::Param(n) => n,
        }
    }
}

impl fmt::Display for Type {
    /// As cel-go's `FormatCELType`: `int`, `list(string)`,
    /// `map(string, int)`, `optional_type(int)`, `type(int)`, `null`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::List(e) => write!(f, "list({e})"),
            Type::Map(k, v) => write!(f, "map({k}, {v})"),
            Type::Opaque(n, p) if !p.is_empty() => {
                write!(f, "{n}(")?;
                for (i, t) in p.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{t}")?;
                }
                f.write_str(")")
            }
            Type::Type(Some(t)) => write!(f, "type({t})"),
            other => f.write_str(other.kind_name()),
        }
    }
}

// ---------------------------------------------------------------------------
// Schemas

/// The CEL names of kube's reserved words, escaped as `__word__`.
const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// A property name as a CEL field name (kube's `Escape`): `__word__` for
/// reserved words, `__dash__`, `__dot__`, `__slash__` and
/// `__underscores__` for `-`, `.`, `/` and `__`; `None` for names CEL
/// cannot spell (kube does not expose those).
pub(crate) fn escape(name: &str) -> Option<String> {
    let first = name.chars().next()?;
    if first.is_ascii_digit() {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
    {
        return None;
    }
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("__") {
            out.push_str("__underscores__");
            rest = &rest[2..];
            continue;
        }
        match c {
            '-' => out.push_str("__dash__"),
            '.' => out.push_str("__dot__"),
            '/' => out.push_str("__slash__"),
            c => out.push(c),
        }
        rest = &rest[c.len_utf8()..];
    }
    Some(out)
}

fn schema_type(s: &Value) -> &str {
    s.get("type").and_then(Value::as_str).unwrap_or("")
}

fn flag(s: &Value, name: &str) -> bool {
    s.get(name).and_then(Value::as_bool).unwrap_or(false)
}

/// The CEL type of a structural schema node, as kube's `SchemaDeclType`
/// builds it, or `None` where kube does not expose the node to CEL (no
/// `type` and not int-or-string, e.g. `x-kubernetes-preserve-unknown-fields`
/// alone; an array or map of such nodes). `resource_root` adds
/// `apiVersion`, `kind` and `metadata.name`/`generateName` (the root of a
/// custom resource, or an embedded resource). `name` names the object
/// types (`selfType`, then `selfType.spec`...).
pub fn schema_type_of(s: &Value, resource_root: bool, name: &str) -> Option<Type> {
    schema_decl(s, resource_root, name).map(|(t, _)| t)
}

/// What kube's `DeclType` knows of the size of a schema node's values,
/// for cost estimates: `MaxElements` (the longest a string or bytes, the
/// most items or entries a list or map can have; 0 for other types, as in
/// kube) and `MinSerializedSize` (the fewest bytes its JSON can take),
/// with the same for its fields, elements and keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sizes {
    /// kube's `MaxElements`.
    pub max_elements: u64,
    /// kube's `MinSerializedSize`.
    pub min_serialized: u64,
    /// An object's fields, by their CEL names.
    pub fields: BTreeMap<String, Sizes>,
    /// A list's items or a map's values.
    pub elem: Option<Box<Sizes>>,
    /// A map's keys.
    pub key: Option<Box<Sizes>>,
}

impl Sizes {
    fn scalar(min_serialized: u64, max_elements: u64) -> Sizes {
        Sizes {
            max_elements,
            min_serialized,
            ..Sizes::default()
        }
    }
}

/// kube's `MaxRequestSizeBytes`, which bounds what no schema bounds.
const MAX_REQUEST: u64 = crate::cost::MAX_REQUEST_SIZE_BYTES;
/// The longest RFC 3339 duration or date-time, quoted (kube's
/// `MaxDurationSizeJSON`, `MaxDatetimeSizeJSON`).
const MAX_DURATION_OR_DATETIME_JSON: u64 = 32;
/// A quoted `YYYY-MM-DD` (kube's `JSONDateSize`).
const JSON_DATE_SIZE: u64 = 12;

fn int(s: &Value, name: &str) -> Option<u64> {
    s.get(name).and_then(Value::as_i64).map(|v| v.max(0) as u64)
}

/// A string's most elements: `maxLength` (times 4: it counts code
/// points, the size bytes), else the longest `enum` value, else what a
/// request can hold (kube's `estimateMaxStringLengthPerRequest`).
fn string_max(s: &Value) -> u64 {
    if let Some(m) = int(s, "maxLength") {
        return m.saturating_mul(4);
    }
    if let Some(values) = s
        .get("enum")
        .and_then(Value::as_array)
        .filter(|e| !e.is_empty())
    {
        return values
            .iter()
            .filter_map(Value::as_str)
            .map(|v| v.len() as u64)
            .max()
            .unwrap_or(0);
    }
    MAX_REQUEST - 2
}

/// The type and sizes of a schema node (kube's `SchemaDeclType`).
pub(crate) fn schema_decl(s: &Value, resource_root: bool, name: &str) -> Option<(Type, Sizes)> {
    if flag(s, "x-kubernetes-int-or-string") {
        let max = int(s, "maxLength").map_or(MAX_REQUEST - 2, |m| m.saturating_mul(4));
        return Some((Type::Dyn, Sizes::scalar(1, max)));
    }
    let embedded = |child: &Value| flag(child, "x-kubernetes-embedded-resource");
    match schema_type(s) {
        "array" => {
            let items = s.get("items")?;
            let (elem, elem_sizes) = schema_decl(items, embedded(items), &format!("{name}.@idx"))?;
            let max = int(s, "maxItems")
                .unwrap_or_else(|| (MAX_REQUEST - 2) / (elem_sizes.min_serialized + 1));
            let sizes = Sizes {
                elem: Some(Box::new(elem_sizes)),
                ..Sizes::scalar(2, max)
            };
            Some((Type::list(elem), sizes))
        }
        "object" => {
            if let Some(ap) = s.get("additionalProperties").filter(|v| v.is_object()) {
                let (elem, elem_sizes) = schema_decl(ap, embedded(ap), &format!("{name}.@elem"))?;
                let max = int(s, "maxProperties")
                    .unwrap_or_else(|| (MAX_REQUEST - 2) / (elem_sizes.min_serialized + 6));
                let sizes = Sizes {
                    elem: Some(Box::new(elem_sizes)),
                    key: Some(Box::new(Sizes::scalar(2, 0))),
                    ..Sizes::scalar(2, max)
                };
                return Some((Type::map(Type::String, elem), sizes));
            }
            let required: Vec<&str> = s
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut fields = BTreeMap::new();
            let mut sizes = Sizes::scalar(2, 0);
            if let Some(props) = s.get("properties").and_then(Value::as_object) {
                for (k, p) in props {
                    let Some((t, field_sizes)) =
                        schema_decl(p, embedded(p), &format!("{name}.{k}"))
                    else {
                        continue;
                    };
                    // kube's minimum object: `{}` and every required
                    // property without a default (`"name":value,`).
                    if required.contains(&k.as_str()) && p.get("default").is_none() {
                        sizes.min_serialized += k.len() as u64 + field_sizes.min_serialized + 4;
                    }
                    if let Some(cel_name) = escape(k) {
                        fields.insert(cel_name.clone(), t);
                        sizes.fields.insert(cel_name, field_sizes);
                    }
                }
            }
            if resource_root {
                add_type_and_object_meta(&mut fields, &mut sizes.fields, name);
            }
            let object = Type::Object(Arc::new(Object {
                name: name.to_owned(),
                fields,
            }));
            Some((object, sizes))
        }
        "string" => Some(
            match s.get("format").and_then(Value::as_str).unwrap_or("") {
                "byte" => (
                    Type::Bytes,
                    Sizes::scalar(2, int(s, "maxLength").unwrap_or(MAX_REQUEST - 2)),
                ),
                "duration" => (
                    Type::Duration,
                    Sizes::scalar(3, MAX_DURATION_OR_DATETIME_JSON),
                ),
                "date" => (
                    Type::Timestamp,
                    Sizes::scalar(JSON_DATE_SIZE, JSON_DATE_SIZE),
                ),
                "date-time" => (
                    Type::Timestamp,
                    Sizes::scalar(21, MAX_DURATION_OR_DATETIME_JSON),
                ),
                _ => (Type::String, Sizes::scalar(2, string_max(s))),
            },
        ),
        "boolean" => Some((Type::Bool, Sizes::scalar(4, 0))),
        "number" => Some((Type::Double, Sizes::scalar(1, 0))),
        "integer" => Some((Type::Int, Sizes::scalar(1, 0))),
        _ => None,
    }
}

/// kube's `WithTypeAndObjectMeta`: `kind`, `apiVersion` and a `metadata`
/// with `name` and `generateName`, unless the schema declares them all.
fn add_type_and_object_meta(
    fields: &mut BTreeMap<String, Type>,
    sizes: &mut BTreeMap<String, Sizes>,
    name: &str,
) {
    let declared = matches!(fields.get("kind"), Some(Type::String))
        && matches!(fields.get("apiVersion"), Some(Type::String))
        && matches!(fields.get("metadata"), Some(Type::Object(m))
            if matches!(m.fields.get("name"), Some(Type::String))
                && matches!(m.fields.get("generateName"), Some(Type::String)));
    if declared {
        return;
    }
    let string = || Sizes::scalar(2, MAX_REQUEST - 2);
    fields.insert("kind".into(), Type::String);
    fields.insert("apiVersion".into(), Type::String);
    sizes.insert("kind".into(), string());
    sizes.insert("apiVersion".into(), string());
    let meta = BTreeMap::from([
        ("name".to_owned(), Type::String),
        ("generateName".to_owned(), Type::String),
    ]);
    fields.insert(
        "metadata".into(),
        Type::Object(Arc::new(Object {
            name: format!("{name}.metadata"),
            fields: meta,
        })),
    );
    sizes.insert(
        "metadata".into(),
        Sizes {
            fields: BTreeMap::from([
                ("name".to_owned(), string()),
                ("generateName".to_owned(), string()),
            ]),
            ..Sizes::scalar(2, 0)
        },
    );
}

// ---------------------------------------------------------------------------
// Unification

/// Bindings of type parameters found so far.
#[derive(Debug, Clone, Default)]
pub(crate) struct Mapping {
    subs: HashMap<Arc<str>, Type>,
}

impl Mapping {
    fn find(&self, t: &Type) -> Option<&Type> {
        match t {
            Type::Param(n) => self.subs.get(n),
            _ => None,
        }
    }

    fn add(&mut self, param: &Type, t: Type) {
        if let Type::Param(n) = param {
            self.subs.insert(n.clone(), t);
        }
    }
}

fn same_kind(a: &Type, b: &Type) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

/// Whether `t1` is `t2` exactly (objects by name).
fn exact(t1: &Type, t2: &Type) -> bool {
    match (t1, t2) {
        (Type::Object(a), Type::Object(b)) => a.name == b.name,
        _ => t1 == t2,
    }
}

fn is_equal_or_less_specific(t1: &Type, t2: &Type) -> bool {
    if matches!(t1, Type::Dyn | Type::Param(_)) {
        return true;
    }
    if matches!(t2, Type::Dyn | Type::Param(_)) {
        return false;
    }
    if !same_kind(t1, t2) {
        return false;
    }
    match (t1, t2) {
        (Type::Opaque(n1, p1), Type::Opaque(n2, p2)) => {
            n1 == n2
                && p1.len() == p2.len()
                && p1
                    .iter()
                    .zip(p2)
                    .all(|(a, b)| is_equal_or_less_specific(a, b))
        }
        (Type::List(a), Type::List(b)) => is_equal_or_less_specific(a, b),
        (Type::Map(k1, v1), Type::Map(k2, v2)) => {
            is_equal_or_less_specific(k1, k2) && is_equal_or_less_specific(v1, v2)
        }
        (Type::Type(_), Type::Type(_)) => true,
        _ => exact(t1, t2),
    }
}

/// The more general of two types known to unify.
pub(crate) fn most_general(t1: &Type, t2: &Type) -> Type {
    if is_equal_or_less_specific(t1, t2) {
        t1.clone()
    } else {
        t2.clone()
    }
}

fn not_referenced_in(m: &Mapping, t: &Type, within: &Type) -> bool {
    if exact(t, within) {
        return false;
    }
    match within {
        Type::Param(_) => match m.find(within) {
            None => true,
            Some(sub) => not_referenced_in(m, t, sub),
        },
        Type::Opaque(_, p) => p.iter().all(|x| not_referenced_in(m, t, x)),
        Type::List(e) => not_referenced_in(m, t, e),
        Type::Map(k, v) => not_referenced_in(m, t, k) && not_referenced_in(m, t, v),
        Type::Type(Some(x)) => not_referenced_in(m, t, x),
        _ => true,
    }
}

/// Whether `t2` (or its binding) can stand for `t1`, binding it if free;
/// and whether `t2` was bound already.
fn is_valid_substitution(m: &mut Mapping, t1: &Type, t2: &Type) -> (bool, bool) {
    if same_kind(t1, t2) && exact(t1, t2) {
        return (true, true);
    }
    if let Some(sub) = m.find(t2).cloned() {
        if same_kind(t1, &sub) && exact(t1, &sub) {
            return (true, true);
        }
        if assignable_in(m, t1, &sub) {
            let general = most_general(t1, &sub);
            if not_referenced_in(m, t2, &general) {
                m.add(t2, general);
            }
            return (true, true);
        }
        return (false, true);
    }
    if not_referenced_in(m, t2, t1) {
        m.add(t2, t1.clone());
        return (true, false);
    }
    (false, false)
}

fn nullable(t: &Type) -> bool {
    matches!(
        t,
        Type::Null | Type::Opaque(..) | Type::Object(_) | Type::Timestamp | Type::Duration
    )
}

/// cel-go's `internalIsAssignable`: whether a value of `t2` may be used
/// where `t1` is expected (and the other way round: CEL's assignability
/// is symmetric but for parameters), binding parameters in `m`.
fn assignable_in(m: &mut Mapping, t1: &Type, t2: &Type) -> bool {
    if let Type::Param(_) = t2 {
        let (valid, has_sub) = is_valid_substitution(m, t1, t2);
        if valid {
            return true;
        }
        if has_sub {
            return false;
        }
    }
    if let Type::Param(_) = t1 {
        return is_valid_substitution(m, t2, t1).0;
    }
    if t1.is_dyn_or_error() || t2.is_dyn_or_error() {
        return true;
    }
    if let Type::Null = t1 {
        return nullable(t2);
    }
    if let Type::Null = t2 {
        return nullable(t1);
    }
    match (t1, t2) {
        (Type::List(a), Type::List(b)) => assignable_in(m, a, b),
        (Type::Map(k1, v1), Type::Map(k2, v2)) => {
            assignable_in(m, k1, k2) && assignable_in(m, v1, v2)
        }
        (Type::Opaque(n1, p1), Type::Opaque(n2, p2)) => {
            n1 == n2
                && p1.len() == p2.len()
                && p1.iter().zip(p2).all(|(a, b)| assignable_in(m, a, b))
        }
        (Type::Type(_), Type::Type(_)) => true,
        _ => exact(t1, t2),
    }
}

/// Whether `t2` is assignable to `t1`; on success the mapping keeps the
/// new bindings, on failure it is unchanged.
pub(crate) fn assignable(m: &mut Mapping, t1: &Type, t2: &Type) -> bool {
    let mut copy = m.clone();
    if assignable_in(&mut copy, t1, t2) {
        *m = copy;
        true
    } else {
        false
    }
}

/// Whether each of `args` is assignable to the parameter at its index.
pub(crate) fn assignable_list(m: &mut Mapping, params: &[Type], args: &[Type]) -> bool {
    if params.len() != args.len() {
        return false;
    }
    let mut copy = m.clone();
    if args
        .iter()
        .zip(params)
        .all(|(a, p)| assignable_in(&mut copy, a, p))
    {
        *m = copy;
        true
    } else {
        false
    }
}

/// `t` with its bound parameters replaced by their bindings; free ones by
/// `dyn` if `free_to_dyn`.
pub(crate) fn substitute(m: &Mapping, t: &Type, free_to_dyn: bool) -> Type {
    if let Some(sub) = m.find(t) {
        return substitute(m, sub, free_to_dyn);
    }
    match t {
        Type::Param(_) if free_to_dyn => Type::Dyn,
        Type::Opaque(n, p) => {
            Type::Opaque(n, p.iter().map(|x| substitute(m, x, free_to_dyn)).collect())
        }
        Type::List(e) => Type::list(substitute(m, e, free_to_dyn)),
        Type::Map(k, v) => Type::map(substitute(m, k, free_to_dyn), substitute(m, v, free_to_dyn)),
        Type::Type(Some(x)) => Type::Type(Some(Box::new(substitute(m, x, free_to_dyn)))),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn escapes_as_kube_does() {
        assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
        assert_eq!(
            escape("a-b.c/d").as_deref(),
            Some("a__dash__b__dot__c__slash__d")
        );
        assert_eq!(escape("a__b").as_deref(), Some("a__underscores__b"));
        assert_eq!(escape("plain_name").as_deref(), Some("plain_name"));
        assert_eq!(escape("1abc"), None);
        assert_eq!(escape("a b"), None);
    }

    #[test]
    fn schemas_become_types() {
        let s = json!({"type": "object", "properties": {
            "n": {"type": "integer"},
            "ios": {"x-kubernetes-int-or-string": true},
            "any": {"x-kubernetes-preserve-unknown-fields": true},
            "when": {"type": "string", "format": "date-time"},
            "m": {"type": "object", "additionalProperties": {"type": "number"}},
            "l": {"type": "array", "items": {"type": "string"}},
        }});
        let Some(Type::Object(o)) = schema_type_of(&s, true, "selfType") else {
            panic!("not an object")
        };
        assert_eq!(o.fields["n"], Type::Int);
        assert_eq!(o.fields["ios"], Type::Dyn);
        assert!(!o.fields.contains_key("any"));
        assert_eq!(o.fields["when"], Type::Timestamp);
        assert_eq!(o.fields["m"].to_string(), "map(string, double)");
        assert_eq!(o.fields["l"].to_string(), "list(string)");
        assert_eq!(o.fields["kind"], Type::String);
        assert_eq!(o.fields["metadata"].to_string(), "selfType.metadata");
    }
}
