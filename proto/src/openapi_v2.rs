//! The OpenAPI v2 document as gnostic's `openapi.v2.Document` protobuf
//! message: the body of `/openapi/v2` in
//! `application/com.github.proto-openapi.spec.v2.v1.0+protobuf`, the form
//! kubectl's client-side validation downloads.
//!
//! The JSON document is walked once with a table per message (JSON key,
//! field number, how the value is written), following how gnostic reads a
//! Swagger 2.0 document into that message:
//! * fields are written in field-number order; proto3 zero scalars (`""`,
//!   `false`, `0`) are left out, except a boolean chosen in a `oneof`;
//! * maps (`paths`, `definitions`, `properties`, `responses`) become
//!   repeated `Named*` pairs in document order; `x-` keys are vendor
//!   extensions (`NamedAny`) wherever the message has them;
//! * free-form values (`default`, `example`, `enum` items, extensions) are an
//!   `Any` whose `yaml` holds the value as text. gnostic writes YAML; this
//!   writes JSON in flow style (`{"k": "v"}`), which is YAML too and reads
//!   back to the same value;
//! * `oneof`s are chosen as gnostic chooses them: a parameter with `$ref` is
//!   a `JsonReference`, `in: body` a `BodyParameter`, any other `in` the
//!   matching sub-schema; `type` and `items` take one value or a list;
//!   `additionalProperties` a schema or a boolean;
//! * keys this table does not know (`securityDefinitions`, `xml`, ...; none
//!   appear in this server's documents) are left out rather than refused.

use crate::wire::{put_len, put_tag, put_varint};
use crate::ProtoError;
use serde_json::{Map, Value};

const WIRE_VARINT: u8 = 0;
const WIRE_FIXED64: u8 = 1;

/// How a JSON value becomes a field.
#[derive(Clone, Copy)]
enum Kind {
    Str,
    Bool,
    Int,
    Double,
    /// `repeated string`
    Strings,
    /// `Any`, the value as YAML text.
    Any,
    /// `repeated Any`
    Anys,
    Msg(&'static Message),
    /// `repeated` message from a JSON array.
    Msgs(&'static Message),
    /// A message whose body a function writes (oneofs and maps).
    Custom(Encoder),
    /// `repeated` of such a message, from a JSON array.
    Customs(Encoder),
}

type Encoder = fn(&Value, usize, &mut Vec<u8>) -> Result<(), ProtoError>;

struct Field {
    key: &'static str,
    number: u32,
    kind: Kind,
}

/// One message: its fields by JSON key, and the field number of its
/// `repeated NamedAny vendor_extension` (0: none).
struct Message {
    name: &'static str,
    fields: &'static [Field],
    vendor: u32,
}

const fn f(key: &'static str, number: u32, kind: Kind) -> Field {
    Field { key, number, kind }
}

/// Encodes an OpenAPI v2 (Swagger 2.0) JSON document as the gnostic
/// `openapi.v2.Document` message.
pub fn encode_openapi_v2(doc: &Value) -> Result<Vec<u8>, ProtoError> {
    let mut out = Vec::new();
    message(&DOCUMENT, doc, 0, &mut out)?;
    Ok(out)
}

use Kind::*;

static DOCUMENT: Message = Message {
    name: "Document",
    fields: &[
        f("swagger", 1, Str),
        f("info", 2, Msg(&INFO)),
        f("host", 3, Str),
        f("basePath", 4, Str),
        f("schemes", 5, Strings),
        f("consumes", 6, Strings),
        f("produces", 7, Strings),
        f("paths", 8, Custom(paths)),
        f("definitions", 9, Custom(named_schemas)),
        f("tags", 14, Msgs(&TAG)),
        f("externalDocs", 15, Msg(&EXTERNAL_DOCS)),
    ],
    vendor: 16,
};

static INFO: Message = Message {
    name: "Info",
    fields: &[
        f("title", 1, Str),
        f("version", 2, Str),
        f("description", 3, Str),
        f("termsOfService", 4, Str),
    ],
    vendor: 7,
};

static TAG: Message = Message {
    name: "Tag",
    fields: &[
        f("name", 1, Str),
        f("description", 2, Str),
        f("externalDocs", 3, Msg(&EXTERNAL_DOCS)),
    ],
    vendor: 4,
};

static EXTERNAL_DOCS: Message = Message {
    name: "ExternalDocs",
    fields: &[f("description", 1, Str), f("url", 2, Str)],
    vendor: 3,
};

static PATH_ITEM: Message = Message {
    name: "PathItem",
    fields: &[
        f("$ref", 1, Str),
        f("get", 2, Msg(&OPERATION)),
        f("put", 3, Msg(&OPERATION)),
        f("post", 4, Msg(&OPERATION)),
        f("delete", 5, Msg(&OPERATION)),
        f("options", 6, Msg(&OPERATION)),
        f("head", 7, Msg(&OPERATION)),
        f("patch", 8, Msg(&OPERATION)),
        f("parameters", 9, Customs(parameters_item)),
    ],
    vendor: 10,
};

static OPERATION: Message = Message {
    name: "Operation",
    fields: &[
        f("tags", 1, Strings),
        f("summary", 2, Str),
        f("description", 3, Str),
        f("externalDocs", 4, Msg(&EXTERNAL_DOCS)),
        f("operationId", 5, Str),
        f("produces", 6, Strings),
        f("consumes", 7, Strings),
        f("parameters", 8, Customs(parameters_item)),
        f("responses", 9, Custom(responses)),
        f("schemes", 10, Strings),
        f("deprecated", 11, Bool),
    ],
    vendor: 13,
};

static JSON_REFERENCE: Message = Message {
    name: "JsonReference",
    fields: &[f("$ref", 1, Str), f("description", 2, Str)],
    vendor: 0,
};

static BODY_PARAMETER: Message = Message {
    name: "BodyParameter",
    fields: &[
        f("description", 1, Str),
        f("name", 2, Str),
        f("in", 3, Str),
        f("required", 4, Bool),
        f("schema", 5, Msg(&SCHEMA)),
    ],
    vendor: 6,
};

/// Query and formData parameters share one layout (with
/// `allowEmptyValue`); header and path parameters another (without it).
static QUERY_PARAMETER: Message = Message {
    name: "QueryParameterSubSchema",
    fields: &[
        f("required", 1, Bool),
        f("in", 2, Str),
        f("description", 3, Str),
        f("name", 4, Str),
        f("allowEmptyValue", 5, Bool),
        f("type", 6, Str),
        f("format", 7, Str),
        f("items", 8, Msg(&PRIMITIVES_ITEMS)),
        f("collectionFormat", 9, Str),
        f("default", 10, Any),
        f("maximum", 11, Double),
        f("exclusiveMaximum", 12, Bool),
        f("minimum", 13, Double),
        f("exclusiveMinimum", 14, Bool),
        f("maxLength", 15, Int),
        f("minLength", 16, Int),
        f("pattern", 17, Str),
        f("maxItems", 18, Int),
        f("minItems", 19, Int),
        f("uniqueItems", 20, Bool),
        f("enum", 21, Anys),
        f("multipleOf", 22, Double),
    ],
    vendor: 23,
};

static PATH_PARAMETER: Message = Message {
    name: "PathParameterSubSchema",
    fields: &[
        f("required", 1, Bool),
        f("in", 2, Str),
        f("description", 3, Str),
        f("name", 4, Str),
        f("type", 5, Str),
        f("format", 6, Str),
        f("items", 7, Msg(&PRIMITIVES_ITEMS)),
        f("collectionFormat", 8, Str),
        f("default", 9, Any),
        f("maximum", 10, Double),
        f("exclusiveMaximum", 11, Bool),
        f("minimum", 12, Double),
        f("exclusiveMinimum", 13, Bool),
        f("maxLength", 14, Int),
        f("minLength", 15, Int),
        f("pattern", 16, Str),
        f("maxItems", 17, Int),
        f("minItems", 18, Int),
        f("uniqueItems", 19, Bool),
        f("enum", 20, Anys),
        f("multipleOf", 21, Double),
    ],
    vendor: 22,
};

static PRIMITIVES_ITEMS: Message = Message {
    name: "PrimitivesItems",
    fields: &[
        f("type", 1, Str),
        f("format", 2, Str),
        f("items", 3, Msg(&PRIMITIVES_ITEMS)),
        f("collectionFormat", 4, Str),
        f("default", 5, Any),
        f("maximum", 6, Double),
        f("exclusiveMaximum", 7, Bool),
        f("minimum", 8, Double),
        f("exclusiveMinimum", 9, Bool),
        f("maxLength", 10, Int),
        f("minLength", 11, Int),
        f("pattern", 12, Str),
        f("maxItems", 13, Int),
        f("minItems", 14, Int),
        f("uniqueItems", 15, Bool),
        f("enum", 16, Anys),
        f("multipleOf", 17, Double),
    ],
    vendor: 18,
};

static RESPONSE: Message = Message {
    name: "Response",
    fields: &[
        f("description", 1, Str),
        f("schema", 2, Custom(schema_item)),
    ],
    vendor: 5,
};

static SCHEMA: Message = Message {
    name: "Schema",
    fields: &[
        f("$ref", 1, Str),
        f("format", 2, Str),
        f("title", 3, Str),
        f("description", 4, Str),
        f("default", 5, Any),
        f("multipleOf", 6, Double),
        f("maximum", 7, Double),
        f("exclusiveMaximum", 8, Bool),
        f("minimum", 9, Double),
        f("exclusiveMinimum", 10, Bool),
        f("maxLength", 11, Int),
        f("minLength", 12, Int),
        f("pattern", 13, Str),
        f("maxItems", 14, Int),
        f("minItems", 15, Int),
        f("uniqueItems", 16, Bool),
        f("maxProperties", 17, Int),
        f("minProperties", 18, Int),
        f("required", 19, Strings),
        f("enum", 20, Anys),
        f("additionalProperties", 21, Custom(additional_properties)),
        f("type", 22, Custom(type_item)),
        f("items", 23, Custom(items_item)),
        f("allOf", 24, Msgs(&SCHEMA)),
        f("properties", 25, Custom(named_schemas)),
        f("discriminator", 26, Str),
        f("readOnly", 27, Bool),
        f("externalDocs", 29, Msg(&EXTERNAL_DOCS)),
        f("example", 30, Any),
    ],
    vendor: 31,
};

fn wrong(message: &str, key: &str, want: &str) -> ProtoError {
    ProtoError::invalid_json(&format!("{message}.{key}"), format!("expected {want}"))
}

fn object<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>, ProtoError> {
    v.as_object()
        .ok_or_else(|| ProtoError::invalid_json(what, "expected an object"))
}

fn deeper(depth: usize) -> Result<usize, ProtoError> {
    if depth >= crate::MAX_DEPTH {
        return Err(ProtoError::TooDeep(crate::MAX_DEPTH));
    }
    Ok(depth + 1)
}

/// Writes `body` as the length-delimited field `number`.
fn nested(
    out: &mut Vec<u8>,
    number: u32,
    depth: usize,
    body: impl FnOnce(usize, &mut Vec<u8>) -> Result<(), ProtoError>,
) -> Result<(), ProtoError> {
    let mut inner = Vec::new();
    body(deeper(depth)?, &mut inner)?;
    put_len(out, number, &inner);
    Ok(())
}

/// The body of a table-described message.
fn message(m: &Message, v: &Value, depth: usize, out: &mut Vec<u8>) -> Result<(), ProtoError> {
    let obj = object(v, m.name)?;
    for field in m.fields {
        if let Some(value) = obj.get(field.key) {
            write_field(m, field, value, depth, out)?;
        }
    }
    if m.vendor != 0 {
        vendor_extensions(obj, m.vendor, depth, out)?;
    }
    Ok(())
}

fn write_field(
    m: &Message,
    field: &Field,
    value: &Value,
    depth: usize,
    out: &mut Vec<u8>,
) -> Result<(), ProtoError> {
    let n = field.number;
    match field.kind {
        Str => {
            let s = value
                .as_str()
                .ok_or_else(|| wrong(m.name, field.key, "a string"))?;
            if !s.is_empty() {
                put_len(out, n, s.as_bytes());
            }
        }
        Bool => {
            let b = value
                .as_bool()
                .ok_or_else(|| wrong(m.name, field.key, "a boolean"))?;
            if b {
                put_tag(out, n, WIRE_VARINT);
                put_varint(out, 1);
            }
        }
        Int => {
            let i = value
                .as_i64()
                .ok_or_else(|| wrong(m.name, field.key, "an integer"))?;
            if i != 0 {
                put_tag(out, n, WIRE_VARINT);
                put_varint(out, i as u64);
            }
        }
        Double => {
            let d = value
                .as_f64()
                .ok_or_else(|| wrong(m.name, field.key, "a number"))?;
            if d != 0.0 {
                put_tag(out, n, WIRE_FIXED64);
                out.extend_from_slice(&d.to_le_bytes());
            }
        }
        Strings => {
            let items = value
                .as_array()
                .ok_or_else(|| wrong(m.name, field.key, "an array of strings"))?;
            for item in items {
                let s = item
                    .as_str()
                    .ok_or_else(|| wrong(m.name, field.key, "an array of strings"))?;
                put_len(out, n, s.as_bytes());
            }
        }
        Any => put_len(out, n, &any(value)),
        Anys => {
            let items = value
                .as_array()
                .ok_or_else(|| wrong(m.name, field.key, "an array"))?;
            for item in items {
                put_len(out, n, &any(item));
            }
        }
        Msg(inner) => nested(out, n, depth, |d, o| message(inner, value, d, o))?,
        Msgs(inner) => {
            let items = value
                .as_array()
                .ok_or_else(|| wrong(m.name, field.key, "an array"))?;
            for item in items {
                nested(out, n, depth, |d, o| message(inner, item, d, o))?;
            }
        }
        Customs(encode) => {
            let items = value
                .as_array()
                .ok_or_else(|| wrong(m.name, field.key, "an array"))?;
            for item in items {
                nested(out, n, depth, |d, o| encode(item, d, o))?;
            }
        }
        Custom(encode) => nested(out, n, depth, |d, o| encode(value, d, o))?,
    }
    Ok(())
}

/// `repeated NamedAny vendor_extension`: every `x-` key, in document order.
fn vendor_extensions(
    obj: &Map<String, Value>,
    number: u32,
    depth: usize,
    out: &mut Vec<u8>,
) -> Result<(), ProtoError> {
    for (k, v) in obj.iter().filter(|(k, _)| k.starts_with("x-")) {
        nested(out, number, depth, |_, o| {
            named_any(k, v, o);
            Ok(())
        })?;
    }
    Ok(())
}

fn named_any(name: &str, v: &Value, out: &mut Vec<u8>) {
    put_len(out, 1, name.as_bytes());
    put_len(out, 2, &any(v));
}

/// An `Any` message: field 2, `yaml`, with the value as flow-style text
/// and a final newline.
fn any(v: &Value) -> Vec<u8> {
    let mut text = Vec::new();
    flow(v, &mut text);
    text.push(b'\n');
    let mut out = Vec::new();
    put_len(&mut out, 2, &text);
    out
}

/// JSON with a space after each `:` and `,`, which YAML parsers read as a
/// flow collection whatever their version.
fn flow(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b", ");
                }
                flow(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b", ");
                }
                out.extend_from_slice(Value::String(k.clone()).to_string().as_bytes());
                out.extend_from_slice(b": ");
                flow(item, out);
            }
            out.push(b'}');
        }
        scalar => out.extend_from_slice(scalar.to_string().as_bytes()),
    }
}

/// `Paths`: `x-` keys are extensions (field 1), the rest `NamedPathItem`s
/// (field 2).
fn paths(v: &Value, depth: usize, out: &mut Vec<u8>) -> Result<(), ProtoError> {
    let obj = object(v, "Paths")?;
    vendor_extensions(obj, 1, depth, out)?;
    for (path, item) in obj.iter().filter(|(k, _)| k.starts_with('/')) {
        nested(out, 2, depth, |d, o| {
            put_len(o, 1, path.as_bytes());
            nested(o, 2, d, |d, o| message(&PATH_ITEM, item, d, o))
        })?;
    }
    Ok(())
}

/// `Definitions` and `Properties`: `repeated NamedSchema` (field 1).
fn named_schemas(v: &Value, depth: usize, out: &mut Vec<u8>) -> Result<(), ProtoError> {
    for (name, schema) in object(v, "Definitions")? {
        nested(out, 1, depth, |d, o| {
            put_len(o, 1, name.as_bytes());
            nested(o, 2, d, |d, o| message(&SCHEMA, schema, d, o))
        })?;
    }
    Ok(())
}

/// `ParametersItem`: a `$ref` is a `JsonReference` (2); anything else a
/// `Parameter` (1): `BodyParameter` (1) or `NonBodyParameter` (2) holding
/// the sub-schema its `in` names.
fn parameters_item(v: &Value, depth: usize, out: &mut Vec<u8>) -> Result<(), ProtoError> {
    let obj = object(v, "ParametersItem")?;
    if obj.contains_key("$ref") {
        return nested(out, 2, depth, |d, o| message(&JSON_REFERENCE, v, d, o));
    }
    let (number, layout) = match obj.get("in").and_then(Value::as_str) {
        Some("body") => {
            return nested(out, 1, depth, |d, o| {
                nested(o, 1, d, |d, o| message(&BODY_PARAMETER, v, d, o))
            })
        }
        Some("header") => (1, &PATH_PARAMETER),
        Some("formData") => (2, &QUERY_PARAMETER),
        Some("query") => (3, &QUERY_PARAMETER),
        Some("path") => (4, &PATH_PARAMETER),
        _ => {
            return Err(wrong(
                "Parameter",
                "in",
                "body, header, formData, query or path",
            ))
        }
    };
    nested(out, 1, depth, |d, o| {
        nested(o, 2, d, |d, o| {
            nested(o, number, d, |d, o| message(layout, v, d, o))
        })
    })
}

/// `Responses`: status codes and `default` are `NamedResponseValue`s
/// (field 1), `x-` keys extensions (field 2).
fn responses(v: &Value, depth: usize, out: &mut Vec<u8>) -> Result<(), ProtoError> {
    let obj = object(v, "Responses")?;
    for (code, r) in obj.iter().filter(|(k, _)| !k.starts_with("x-")) {
        nested(out, 1, depth, |d, o| {
            put_len(o, 1, code.as_bytes());
            nested(o, 2, d, |d, o| {
                if object(r, "ResponseValue")?.contains_key("$ref") {
                    nested(o, 2, d, |d, o| message(&JSON_REFERENCE, r, d, o))
                } else {
                    nested(o, 1, d, |d, o| message(&RESPONSE, r, d, o))
                }
            })
        })?;
    }
    vendor_extensions(obj, 2, depth, out)
}

/// `SchemaItem`: gnostic reads any response schema as a `Schema` (1).
fn schema_item(v: &Value, depth: usize, out: &mut Vec<u8>) -> Result<(), ProtoError> {
    nested(out, 1, depth, |d, o| message(&SCHEMA, v, d, o))
}

/// `AdditionalPropertiesItem`: a schema (1) or a boolean (2, written even
/// when false: it is the chosen `oneof`).
fn additional_properties(v: &Value, depth: usize, out: &mut Vec<u8>) -> Result<(), ProtoError> {
    match v {
        Value::Bool(b) => {
            put_tag(out, 2, WIRE_VARINT);
            put_varint(out, u64::from(*b));
            Ok(())
        }
        _ => nested(out, 1, depth, |d, o| message(&SCHEMA, v, d, o)),
    }
}

/// `TypeItem`: one type name or a list of them (field 1).
fn type_item(v: &Value, _depth: usize, out: &mut Vec<u8>) -> Result<(), ProtoError> {
    let names: Vec<&Value> = match v {
        Value::Array(items) => items.iter().collect(),
        one => vec![one],
    };
    for name in names {
        let s = name
            .as_str()
            .ok_or_else(|| wrong("Schema", "type", "a string or an array of strings"))?;
        put_len(out, 1, s.as_bytes());
    }
    Ok(())
}

/// `ItemsItem`: one schema or a list of them (field 1).
fn items_item(v: &Value, depth: usize, out: &mut Vec<u8>) -> Result<(), ProtoError> {
    let schemas: Vec<&Value> = match v {
        Value::Array(items) => items.iter().collect(),
        one => vec![one],
    };
    for s in schemas {
        nested(out, 1, depth, |d, o| message(&SCHEMA, s, d, o))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Reader;
    use serde_json::json;

    /// The fields of one message as (number, raw bytes or varint).
    fn fields(buf: &[u8]) -> Vec<(u32, Vec<u8>)> {
        let mut r = Reader::new(buf);
        let mut out = Vec::new();
        while !r.is_empty() {
            let (n, wt) = r.tag().unwrap();
            let v = match wt {
                0 => r.varint().unwrap().to_le_bytes().to_vec(),
                1 => r.fixed64().unwrap().to_le_bytes().to_vec(),
                2 => r.bytes().unwrap().to_vec(),
                other => panic!("wire type {other}"),
            };
            out.push((n, v));
        }
        out
    }

    fn field(buf: &[u8], n: u32) -> Vec<u8> {
        fields(buf)
            .into_iter()
            .find(|(k, _)| *k == n)
            .unwrap_or_else(|| panic!("field {n} missing"))
            .1
    }

    #[test]
    fn document_layout() {
        let doc = json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": "v1.35.0"},
            "paths": {"/api/": {"get": {
                "operationId": "getCoreAPIVersions",
                "parameters": [
                    {"name": "pretty", "in": "query", "type": "string", "uniqueItems": true},
                    {"$ref": "#/parameters/x"},
                    {"name": "body", "in": "body", "required": true, "schema": {"$ref": "#/definitions/A"}}
                ],
                "responses": {"200": {"description": "OK", "schema": {"type": "string"}}},
                "x-kubernetes-action": "get"
            }}},
            "definitions": {"A": {
                "type": "object",
                "required": ["a"],
                "properties": {"a": {"type": "integer", "format": "int64"}},
                "additionalProperties": false,
                "x-kubernetes-group-version-kind": [{"group": "", "kind": "A", "version": "v1"}]
            }}
        });
        let out = encode_openapi_v2(&doc).unwrap();
        assert_eq!(field(&out, 1), b"2.0");
        assert_eq!(field(&field(&out, 2), 1), b"Kubernetes");
        // definitions → NamedSchema{name, Schema}
        let named = field(&field(&out, 9), 1);
        assert_eq!(field(&named, 1), b"A");
        let schema = field(&named, 2);
        assert_eq!(field(&field(&schema, 22), 1), b"object");
        assert_eq!(field(&schema, 19), b"a");
        // additionalProperties: false is still written (the oneof's choice).
        assert_eq!(field(&schema, 21), [16, 0]);
        let ext = field(&schema, 31);
        assert_eq!(field(&ext, 1), b"x-kubernetes-group-version-kind");
        assert_eq!(
            field(&field(&ext, 2), 2),
            b"[{\"group\": \"\", \"kind\": \"A\", \"version\": \"v1\"}]\n"
        );
        // paths → NamedPathItem{name, PathItem{get: Operation}}
        let path = field(&field(&out, 8), 2);
        assert_eq!(field(&path, 1), b"/api/");
        let op = field(&field(&path, 2), 2);
        assert_eq!(field(&op, 5), b"getCoreAPIVersions");
        let params: Vec<_> = fields(&op).into_iter().filter(|(n, _)| *n == 8).collect();
        assert_eq!(params.len(), 3);
        // query: ParametersItem.parameter.non_body_parameter.query
        let query = field(&field(&field(&params[0].1, 1), 2), 3);
        assert_eq!(field(&query, 4), b"pretty");
        assert_eq!(field(&query, 20), 1u64.to_le_bytes());
        // $ref: ParametersItem.json_reference
        assert_eq!(field(&field(&params[1].1, 2), 1), b"#/parameters/x");
        // body: ParametersItem.parameter.body_parameter.schema
        let body = field(&field(&params[2].1, 1), 1);
        assert_eq!(field(&field(&body, 5), 1), b"#/definitions/A");
        let resp = field(&field(&op, 9), 1);
        assert_eq!(field(&resp, 1), b"200");
        assert_eq!(field(&field(&field(&resp, 2), 1), 1), b"OK");
        assert_eq!(field(&field(&op, 13), 1), b"x-kubernetes-action");
    }

    #[test]
    fn mistyped_values_are_errors() {
        assert!(encode_openapi_v2(&json!([])).is_err());
        assert!(encode_openapi_v2(&json!({"swagger": 2})).is_err());
        let bad_in = json!({"paths": {"/x": {"get": {"parameters": [{"in": "cookie"}]}}}});
        assert!(encode_openapi_v2(&bad_in).is_err());
    }
}
