//! Encoding objects and lists for the negotiated representation: JSON,
//! YAML, protobuf or CBOR, pretty or compact, the object itself, its
//! PartialObjectMetadata, or a meta.k8s.io Table. Lists in compact JSON,
//! protobuf and CBOR are written item by item from the stored objects'
//! shared encodings (`Object::json`, `Object::protobuf`, `Object::cbor`),
//! without building a combined document.

use crate::error::Result;
use crate::handlers::Scope;
use crate::registry::Resource;
use apimachinery::kinds::print::PrintContext;
use apimachinery::media::{Format, Target};
use apimachinery::Status;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};
use watchcache::{ListResult, Object};

pub use apimachinery::query::IncludeObject;

/// `includeObject` of a Table request (validated in `handlers::dispatch`).
pub fn include_object(scope: &Scope) -> IncludeObject {
    apimachinery::query::table_include_object(&scope.query).unwrap_or_default()
}

fn content_type(format: Format) -> &'static str {
    format.media_type()
}

/// Serializes a document in the scope's format.
pub fn encode(scope: &Scope, v: &Value) -> Result<Vec<u8>> {
    encode_as(scope.out.format, scope.pretty, v)
}

/// The 500 of a document the server made but cannot write as protobuf (a
/// value that does not fit its field): a bug, logged.
fn protobuf_failure(what: &str, e: impl std::fmt::Display) -> crate::error::ApiError {
    tracing::error!(%what, error = %e, "protobuf encoding failed");
    Status::internal(format!("unable to encode {what} as protobuf")).into()
}

/// Serializes a document carrying `kind` and `apiVersion` in `format`.
/// Only protobuf can fail. CBOR is never pretty-printed.
pub fn encode_as(format: Format, pretty: bool, v: &Value) -> Result<Vec<u8>> {
    Ok(match format {
        // kube's YAML is its JSON through sigs.k8s.io/yaml, which sorts the
        // keys of every mapping.
        Format::Yaml => serde_yaml_ng::to_string(&sorted_keys(v))
            .map(String::into_bytes)
            .unwrap_or_default(),
        Format::Protobuf => k8s_proto::encode_object(v).map_err(|e| {
            let kind = v.get("kind").and_then(Value::as_str).unwrap_or("object");
            protobuf_failure(kind, e)
        })?,
        Format::Cbor => apimachinery::cbor::encode_object(v),
        // kube's JSON encoder (`json.NewEncoder(w).Encode`, or its
        // 2-space indent for `?pretty`) ends every body with a newline.
        _ => {
            let mut b = if pretty {
                serde_json::to_vec_pretty(v)
            } else {
                serde_json::to_vec(v)
            }
            .unwrap_or_default();
            b.push(b'\n');
            b
        }
    })
}

/// `v` with the keys of every object in byte order.
fn sorted_keys(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.clone(), sorted_keys(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted_keys).collect()),
        other => other.clone(),
    }
}

/// A body (`Vec<u8>`, or shared `Bytes`) with its code and `Content-Type`.
pub fn bytes_response(code: StatusCode, ctype: &str, body: impl IntoResponse) -> Response {
    let mut r = (code, body).into_response();
    if let Ok(v) = HeaderValue::from_str(ctype) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

/// Adds one `Warning` header per message, as kube-apiserver does.
pub fn with_warnings(mut resp: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let text = format!("299 - {}", serde_json::to_string(w).unwrap_or_default());
        if let Ok(v) = HeaderValue::from_str(&text) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

pub fn partial_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

fn column_definitions(res: &Resource) -> Value {
    let name = json!({"name": "Name", "type": "string", "format": "name",
        "description": "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
        "priority": 0});
    match res.custom {
        Some(c) => {
            let mut cols = vec![name];
            cols.extend(c.columns.iter().map(|col| {
                json!({"name": col.name, "type": col.type_, "format": col.format,
                       "description": col.description, "priority": col.priority})
            }));
            Value::Array(cols)
        }
        None if !res.rules.columns.is_empty() => {
            Value::Array(res.rules.columns.iter().map(|c| c.definition()).collect())
        }
        None => json!([
            {"name": "Name", "type": "string", "format": "name",
             "description": "Name must be unique within a namespace.", "priority": 0},
            {"name": "Created At", "type": "date", "format": "",
             "description": "CreationTimestamp is a timestamp representing the server time when this object was created.",
             "priority": 0},
        ]),
    }
}

/// One printer-column cell of a custom resource, as kube's CRD table
/// convertor makes it: the first value the path selects, typed by the
/// column (a `date` becomes an age such as `5m`), else null.
fn custom_cell(col: &crate::crd::PrinterColumn, obj: &Value) -> Value {
    let Some(value) = col.path.find(obj).into_iter().next() else {
        return Value::Null;
    };
    match (col.type_.as_str(), value) {
        ("string", Value::String(_)) => value.clone(),
        ("string", Value::Null) => Value::Null,
        ("string", other) => Value::String(other.to_string()),
        ("integer", Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .map_or(Value::Null, Value::from),
        ("number", Value::Number(n)) => n.as_f64().map_or(Value::Null, Value::from),
        ("boolean", Value::Bool(_)) => value.clone(),
        ("date", Value::String(s)) => match chrono::DateTime::parse_from_rfc3339(s) {
            Ok(t) => {
                let age = chrono::Utc::now().signed_duration_since(t).num_seconds();
                Value::String(apimachinery::duration::human(age))
            }
            Err(_) => Value::String("<invalid>".into()),
        },
        _ => Value::Null,
    }
}

fn table_row(res: &Resource, obj: &Value, include: IncludeObject, ctx: &PrintContext) -> Value {
    let meta = obj.get("metadata");
    let name = meta
        .and_then(|m| m.get("name"))
        .cloned()
        .unwrap_or(Value::Null);
    let cells = match res.custom {
        Some(c) => {
            let mut cells = vec![name];
            cells.extend(c.columns.iter().map(|col| custom_cell(col, obj)));
            Value::Array(cells)
        }
        None if !res.rules.columns.is_empty() => Value::Array(
            res.rules
                .columns
                .iter()
                .map(|c| (c.cell)(obj, ctx))
                .collect(),
        ),
        None => {
            let created = meta
                .and_then(|m| m.get("creationTimestamp"))
                .cloned()
                .unwrap_or(Value::Null);
            json!([name, created])
        }
    };
    let mut row = Map::new();
    row.insert("cells".into(), cells);
    match include {
        IncludeObject::None => {}
        IncludeObject::Metadata => {
            row.insert("object".into(), partial_metadata(obj));
        }
        IncludeObject::Object => {
            row.insert("object".into(), obj.clone());
        }
    }
    Value::Object(row)
}

/// A meta.k8s.io/v1 Table of `objs`.
pub fn table<'a>(
    res: &Resource,
    objs: impl Iterator<Item = &'a Value>,
    list_meta: Value,
    include: IncludeObject,
) -> Value {
    let ctx = PrintContext {
        now: chrono::Utc::now().timestamp(),
    };
    let rows: Vec<Value> = objs.map(|o| table_row(res, o, include, &ctx)).collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": column_definitions(res),
        "rows": rows,
    })
}

/// The representation of one object the client asked for.
pub fn represent(scope: &Scope, obj: &Value) -> Option<Value> {
    match scope.out.target {
        Target::Object => None,
        Target::PartialObjectMetadata | Target::PartialObjectMetadataList => {
            Some(partial_metadata(obj))
        }
        Target::Table => {
            let rv = obj
                .pointer("/metadata/resourceVersion")
                .cloned()
                .unwrap_or(Value::Null);
            let mut meta = Map::new();
            if !rv.is_null() {
                meta.insert("resourceVersion".into(), rv);
            }
            Some(table(
                scope.res,
                std::iter::once(obj),
                Value::Object(meta),
                include_object(scope),
            ))
        }
    }
}

/// Responds with one object.
pub fn object(scope: &Scope, code: StatusCode, obj: &Value) -> Response {
    let body = match represent(scope, obj) {
        Some(v) => encode(scope, &v),
        None => encode(scope, obj),
    };
    match body {
        Ok(body) => bytes_response(code, content_type(scope.out.format), body),
        Err(e) => crate::error::status_response_as(&e.to_status(), scope.out.format),
    }
}

fn list_meta(result: &ListResult) -> Value {
    let mut m = Map::new();
    // Revision 0: a computed list, read from no store (kube's lists of
    // computed kinds carry no resourceVersion).
    if result.revision != 0 {
        m.insert(
            "resourceVersion".into(),
            Value::String(result.revision.to_string()),
        );
    }
    if let Some(c) = &result.continue_token {
        m.insert("continue".into(), Value::String(c.clone()));
    }
    if let Some(n) = result.remaining_item_count {
        m.insert("remainingItemCount".into(), Value::from(n));
    }
    Value::Object(m)
}

/// Responds with a list read from storage.
pub fn list(scope: &Scope, res: &Resource, result: &ListResult) -> Response {
    match encode_list(scope, res, result) {
        Ok(body) => bytes_response(StatusCode::OK, content_type(scope.out.format), body),
        Err(e) => crate::error::status_response_as(&e.to_status(), scope.out.format),
    }
}

fn encode_list(scope: &Scope, res: &Resource, result: &ListResult) -> Result<Vec<u8>> {
    let meta = list_meta(result);
    match scope.out.target {
        Target::Table => {
            let t = table(
                res,
                result.items.iter().map(|o| o.value()),
                meta,
                include_object(scope),
            );
            encode(scope, &t)
        }
        Target::PartialObjectMetadata | Target::PartialObjectMetadataList => {
            let items: Vec<Value> = result
                .items
                .iter()
                .map(|o| partial_metadata(o.value()))
                .collect();
            let doc = json!({
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": meta,
                "items": items,
            });
            encode(scope, &doc)
        }
        Target::Object if scope.out.format == Format::Protobuf => {
            protobuf_list(res, &meta, &result.items)
        }
        Target::Object if scope.out.format == Format::Cbor => {
            Ok(cbor_list(res, &meta, &result.items))
        }
        Target::Object => {
            if scope.pretty || scope.out.format != Format::Json {
                let items: Vec<Value> = result.items.iter().map(|o| o.value().clone()).collect();
                let doc = json!({
                    "kind": res.list_kind(),
                    "apiVersion": res.api_version(),
                    "metadata": meta,
                    "items": items,
                });
                return encode(scope, &doc);
            }
            Ok(compact_list(res, &meta, &result.items))
        }
    }
}

/// A protobuf list body made of the items' shared protobuf encodings (the
/// message inside each item's envelope).
pub fn protobuf_list(res: &Resource, meta: &Value, items: &[Object]) -> Result<Vec<u8>> {
    let mut bodies = Vec::with_capacity(items.len());
    for item in items {
        bodies.push(item.protobuf().map_err(|e| protobuf_failure(res.kind, e))?);
    }
    let mut raws = Vec::with_capacity(bodies.len());
    for body in &bodies {
        let unknown = k8s_proto::decode_unknown(body).map_err(|e| protobuf_failure(res.kind, e))?;
        raws.push(unknown.raw);
    }
    k8s_proto::encode_list(&res.api_version(), &res.list_kind(), meta, raws)
        .map_err(|e| protobuf_failure(&res.list_kind(), e))
}

/// A CBOR list made of the items' shared CBOR (each without its
/// self-described tag: only the list, the top-level item, carries one).
pub fn cbor_list(res: &Resource, meta: &Value, items: &[Object]) -> Vec<u8> {
    use apimachinery::cbor;
    let tag = cbor::SELF_DESCRIBED.len();
    let items_len: usize = items.iter().map(|o| o.cbor().len() - tag).sum();
    let mut out = Vec::with_capacity(256 + items_len);
    out.extend_from_slice(&cbor::SELF_DESCRIBED);
    cbor::write_map_head(&mut out, 4);
    cbor::write_str(&mut out, "kind");
    cbor::write_str(&mut out, &res.list_kind());
    cbor::write_str(&mut out, "apiVersion");
    cbor::write_str(&mut out, &res.api_version());
    cbor::write_str(&mut out, "metadata");
    cbor::encode_item(&mut out, meta);
    cbor::write_str(&mut out, "items");
    cbor::write_array_head(&mut out, items.len());
    for item in items {
        out.extend_from_slice(item.cbor().get(tag..).unwrap_or_default());
    }
    out
}

/// Compact JSON of a list, each stored item serialized straight into the
/// output buffer.
pub fn compact_list(res: &Resource, meta: &Value, items: &[Object]) -> Vec<u8> {
    // Sized up front: growing by doubling would copy a 20 MiB list about
    // twice over and fault in up to twice its size.
    let items_len: usize = items.iter().map(|o| o.json().len() + 1).sum();
    // Envelope: kind, apiVersion, metadata, items (kube's List order), and
    // the encoder's trailing newline.
    let mut out = Vec::with_capacity(256 + items_len);
    out.extend_from_slice(b"{\"kind\":");
    let _ = serde_json::to_writer(&mut out, &res.list_kind());
    out.extend_from_slice(b",\"apiVersion\":");
    let _ = serde_json::to_writer(&mut out, &res.api_version());
    out.extend_from_slice(b",\"metadata\":");
    let _ = serde_json::to_writer(&mut out, meta);
    out.extend_from_slice(b",\"items\":[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item.json());
    }
    out.extend_from_slice(b"]}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use std::sync::Arc;

    #[test]
    fn compact_list_is_valid_json() {
        let res = Registry::builtin().lookup("", "v1", "configmaps").unwrap();
        let items = vec![
            Object::new(Arc::new(json!({"metadata": {"name": "a"}})), 2),
            Object::new(Arc::new(json!({"metadata": {"name": "b"}})), 3),
        ];
        let bytes = compact_list(res, &json!({"resourceVersion": "3"}), &items);
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v["kind"], "ConfigMapList");
        assert_eq!(v["apiVersion"], "v1");
        assert_eq!(v["items"][1]["metadata"]["name"], "b");
    }

    #[test]
    fn cbor_list_is_one_tagged_item_of_shared_items() {
        let res = Registry::builtin().lookup("", "v1", "configmaps").unwrap();
        let items = vec![
            Object::new(Arc::new(json!({"metadata": {"name": "a"}})), 2),
            Object::new(Arc::new(json!({"metadata": {"name": "b"}})), 3),
        ];
        let bytes = cbor_list(res, &json!({"resourceVersion": "3"}), &items);
        assert!(bytes.starts_with(&apimachinery::cbor::SELF_DESCRIBED));
        let v = apimachinery::cbor::decode(&bytes).unwrap();
        assert_eq!(
            v,
            json!({"kind": "ConfigMapList", "apiVersion": "v1",
                   "metadata": {"resourceVersion": "3"},
                   "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]})
        );
        // The items' tags are not repeated inside the list.
        let tags = bytes
            .windows(3)
            .filter(|w| *w == apimachinery::cbor::SELF_DESCRIBED);
        assert_eq!(tags.count(), 1);
    }

    #[test]
    fn table_rows_carry_name_and_metadata() {
        let o = json!({"metadata": {"name": "x", "creationTimestamp": "2026-01-01T00:00:00Z"}, "data": {}});
        let reg = Registry::builtin();
        let res = reg.lookup("", "v1", "configmaps").unwrap();
        let t = table(res, std::iter::once(&o), json!({}), IncludeObject::Metadata);
        assert_eq!(t["rows"][0]["cells"][0], "x");
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert!(t["rows"][0]["object"].get("data").is_none());
    }
}
