//! Encoding objects and lists for the negotiated representation: JSON,
//! YAML, protobuf or CBOR, pretty or compact, the object itself, its
//! PartialObjectMetadata, or a meta.k8s.io Table. Lists in compact JSON,
//! protobuf and CBOR are written item by item from the stored objects'
//! shared encodings (`Object::json`, `Object::protobuf`, `Object::cbor`),
//! without building a combined document.
//!
//! Below the state: it reads the request's [`RequestScope`] (what was
//! negotiated), never the handlers or the server's state.

use crate::error::Result;
use crate::registry::Resource;
use crate::scope::RequestScope;
use apimachinery::kinds::print::PrintContext;
use apimachinery::media::{Format, Target};
use apimachinery::Status;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};
use watchcache::{ListResult, Object};

pub use apimachinery::query::IncludeObject;

/// `includeObject` of a Table request (validated in `handlers::dispatch`).
pub fn include_object(scope: &RequestScope) -> IncludeObject {
    apimachinery::query::table_include_object(&scope.query).unwrap_or_default()
}

fn content_type(format: Format) -> &'static str {
    format.media_type()
}

/// Serializes a document in the scope's format.
pub fn encode(scope: &RequestScope, v: &Value) -> Result<Vec<u8>> {
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
    match &res.custom {
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
    let cells = match &res.custom {
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
pub fn represent(scope: &RequestScope, obj: &Value) -> Option<Value> {
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
                &scope.res,
                std::iter::once(obj),
                Value::Object(meta),
                include_object(scope),
            ))
        }
    }
}

/// Responds with one object.
pub fn object(scope: &RequestScope, code: StatusCode, obj: &Value) -> Response {
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

/// Responds with a list read from storage. A long list of objects in
/// compact JSON, protobuf or CBOR is streamed ([`ListStream`]).
pub fn list(scope: &RequestScope, res: &Resource, result: ListResult) -> Response {
    match encode_list(scope, res, result) {
        Ok(body) => bytes_response(StatusCode::OK, content_type(scope.out.format), body),
        Err(e) => crate::error::status_response_as(&e.to_status(), scope.out.format),
    }
}

/// Lists of at least this many items are streamed.
const STREAM_MIN_ITEMS: usize = 256;
/// A streamed list is sent in chunks of at most this size (but for one
/// larger item), each one write.
const STREAM_CHUNK: usize = 256 << 10;

/// A list body written chunk by chunk as the client reads it, from the
/// items' shared encodings, instead of being composed into one buffer
/// first: a list of 300,000 objects is never one 370 MB allocation, the
/// client reads the first items while the last are copied (or, for items
/// not yet encoded in this format, encoded), and memory stays bounded by
/// the chunk. kube streams its list encodings the same way (and its HTTP
/// server sends any body past a few KiB chunked).
///
/// Everything that can fail (a protobuf item that does not encode) fails
/// in [`ListStream::new`], before the status line is written.
pub struct ListStream {
    head: Option<Vec<u8>>,
    items: StreamItems,
    /// An item taken that did not fit the last chunk.
    pending: Option<Item>,
    tail: &'static [u8],
    first: bool,
    done: bool,
    /// The chunk being filled. Each chunk is split off it; once the
    /// connection has written and dropped that chunk, the next `reserve`
    /// takes the same allocation back, so a long list reuses one hot
    /// buffer instead of faulting in fresh pages for every chunk.
    buf: bytes::BytesMut,
    /// A protobuf item's tag and length, before it is copied.
    framing: Vec<u8>,
    /// The whole body's size when it is wanted at once ([`ListStream::concat`]):
    /// one chunk, allocated at its size.
    whole: Option<usize>,
}

enum StreamItems {
    /// Compact JSON items, comma-separated.
    Json(std::vec::IntoIter<Object>),
    /// CBOR items without their self-described tag.
    Cbor(std::vec::IntoIter<Object>),
    /// Protobuf item messages (the `raw` of each item's envelope), each
    /// framed as an `items` field.
    Protobuf(k8s_proto::ListParts, std::vec::IntoIter<bytes::Bytes>),
}

/// One item on its way into a chunk.
enum Item {
    Json(Object),
    Cbor(Object),
    Raw(bytes::Bytes),
}

impl Item {
    /// The bytes the item adds (but for its separator or framing).
    fn bytes(&self) -> &[u8] {
        let tag = apimachinery::cbor::SELF_DESCRIBED.len();
        match self {
            Item::Json(o) => o.json(),
            Item::Cbor(o) => o.cbor().get(tag..).unwrap_or_default(),
            Item::Raw(b) => b,
        }
    }
}

impl ListStream {
    /// The stream of a list of `items` in compact JSON, CBOR or protobuf.
    pub fn new(res: &Resource, meta: &Value, items: Vec<Object>, format: Format) -> Result<Self> {
        use apimachinery::cbor;
        let (head, items, tail) = match format {
            Format::Yaml => {
                return Err(Status::internal("a YAML list is not streamed").into());
            }
            Format::Json => {
                let mut head = Vec::with_capacity(128);
                head.extend_from_slice(b"{\"kind\":");
                let _ = serde_json::to_writer(&mut head, &res.list_kind());
                head.extend_from_slice(b",\"apiVersion\":");
                let _ = serde_json::to_writer(&mut head, &res.api_version());
                head.extend_from_slice(b",\"metadata\":");
                let _ = serde_json::to_writer(&mut head, meta);
                head.extend_from_slice(b",\"items\":[");
                (head, StreamItems::Json(items.into_iter()), &b"]}\n"[..])
            }
            Format::Cbor => {
                let mut head = Vec::with_capacity(128);
                head.extend_from_slice(&cbor::SELF_DESCRIBED);
                cbor::write_map_head(&mut head, 4);
                cbor::write_str(&mut head, "kind");
                cbor::write_str(&mut head, &res.list_kind());
                cbor::write_str(&mut head, "apiVersion");
                cbor::write_str(&mut head, &res.api_version());
                cbor::write_str(&mut head, "metadata");
                cbor::encode_item(&mut head, meta);
                cbor::write_str(&mut head, "items");
                cbor::write_array_head(&mut head, items.len());
                (head, StreamItems::Cbor(items.into_iter()), &[][..])
            }
            Format::Protobuf => {
                // The envelope's length prefix needs every item's length:
                // each item is encoded (once, shared) before the first byte.
                let mut raws = Vec::with_capacity(items.len());
                for item in &items {
                    let body = item
                        .protobuf()
                        .map_err(|e| protobuf_failure(&res.kind, e))?;
                    let unknown = k8s_proto::decode_unknown(body)
                        .map_err(|e| protobuf_failure(&res.kind, e))?;
                    // `raw` lies inside `body`: shared, not copied.
                    raws.push(body.slice_ref(unknown.raw));
                }
                let mut parts = k8s_proto::ListParts::new(
                    &res.api_version(),
                    &res.list_kind(),
                    meta,
                    raws.iter().map(|r| r.len()),
                )
                .map_err(|e| protobuf_failure(&res.list_kind(), e))?;
                let head = parts.take_head();
                (
                    head,
                    StreamItems::Protobuf(parts, raws.into_iter()),
                    k8s_proto::ListParts::TAIL,
                )
            }
        };
        Ok(ListStream {
            head: Some(head),
            items,
            pending: None,
            tail,
            first: true,
            done: false,
            buf: bytes::BytesMut::new(),
            framing: Vec::with_capacity(FRAMING),
            whole: None,
        })
    }

    fn next_item(&mut self) -> Option<Item> {
        match &mut self.items {
            StreamItems::Json(items) => items.next().map(Item::Json),
            StreamItems::Cbor(items) => items.next().map(Item::Cbor),
            StreamItems::Protobuf(_, raws) => raws.next().map(Item::Raw),
        }
    }

    /// Appends one item to the chunk, with its separator or framing.
    fn put(&mut self, item: &Item) {
        let bytes = item.bytes();
        match &self.items {
            StreamItems::Json(_) if !self.first => self.buf.extend_from_slice(b","),
            StreamItems::Protobuf(parts, _) => {
                self.framing.clear();
                parts.put_item_head(&mut self.framing, bytes.len());
                self.buf.extend_from_slice(&self.framing);
            }
            _ => {}
        }
        self.buf.extend_from_slice(bytes);
        self.first = false;
    }

    /// The whole body at once (a short list, or a test), in one buffer of
    /// its size.
    pub fn concat(mut self) -> bytes::Bytes {
        let tag = apimachinery::cbor::SELF_DESCRIBED.len();
        let ends = self.head.as_ref().map_or(0, Vec::len) + self.tail.len();
        let items = match &self.items {
            StreamItems::Json(items) => items.as_slice().iter().map(|o| o.json().len() + 1).sum(),
            StreamItems::Cbor(items) => items
                .as_slice()
                .iter()
                .map(|o| o.cbor().len().saturating_sub(tag))
                .sum(),
            StreamItems::Protobuf(parts, _) => parts.len(),
        };
        self.whole = Some(ends + items);
        self.next()
            .map(|c| c.unwrap_or_else(|e| match e {}))
            .unwrap_or_default()
    }
}

/// Room for an item's separator or framing (a protobuf tag and length).
const FRAMING: usize = 16;

impl Iterator for ListStream {
    type Item = std::result::Result<bytes::Bytes, std::convert::Infallible>;

    /// The next chunk: whole items up to `STREAM_CHUNK` bytes (one larger
    /// item alone).
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let (size, limit) = match self.whole {
            Some(size) => (size, usize::MAX),
            None => (STREAM_CHUNK + FRAMING, STREAM_CHUNK),
        };
        self.buf.reserve(size);
        if let Some(head) = self.head.take() {
            self.buf.extend_from_slice(&head);
        }
        loop {
            let Some(item) = self.pending.take().or_else(|| self.next_item()) else {
                self.buf.extend_from_slice(self.tail);
                self.done = true;
                break;
            };
            let len = item.bytes().len();
            if !self.buf.is_empty() && self.buf.len() + len + FRAMING > limit {
                self.pending = Some(item);
                break;
            }
            self.put(&item);
        }
        Some(Ok(self.buf.split().freeze()))
    }
}

fn encode_list(
    scope: &RequestScope,
    res: &Resource,
    result: ListResult,
) -> Result<axum::body::Body> {
    let meta = list_meta(&result);
    let composed = |doc: &Value| encode(scope, doc).map(axum::body::Body::from);
    match scope.out.target {
        Target::Table => {
            let t = table(
                res,
                result.items.iter().map(|o| o.value()),
                meta,
                include_object(scope),
            );
            composed(&t)
        }
        Target::PartialObjectMetadata | Target::PartialObjectMetadataList => {
            let items: Vec<Value> = result
                .items
                .iter()
                .map(|o| partial_metadata(o.value()))
                .collect();
            composed(&json!({
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": meta,
                "items": items,
            }))
        }
        // Pretty JSON and YAML (whose keys kube sorts) are composed whole.
        Target::Object
            if scope.pretty && scope.out.format == Format::Json
                || scope.out.format == Format::Yaml =>
        {
            let items: Vec<Value> = result.items.iter().map(|o| o.value().clone()).collect();
            composed(&json!({
                "kind": res.list_kind(),
                "apiVersion": res.api_version(),
                "metadata": meta,
                "items": items,
            }))
        }
        Target::Object => {
            let long = result.items.len() >= STREAM_MIN_ITEMS;
            let stream = ListStream::new(res, &meta, result.items, scope.out.format)?;
            Ok(if long {
                axum::body::Body::from_stream(futures_util::stream::iter(stream))
            } else {
                axum::body::Body::from(stream.concat())
            })
        }
    }
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
        let bytes = ListStream::new(&res, &json!({"resourceVersion": "3"}), items, Format::Json)
            .unwrap()
            .concat();
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v["kind"], "ConfigMapList");
        assert_eq!(v["apiVersion"], "v1");
        assert_eq!(v["items"][1]["metadata"]["name"], "b");
    }

    #[test]
    fn a_streamed_list_is_the_composed_body_cut_into_chunks() {
        let res = Registry::builtin().lookup("", "v1", "configmaps").unwrap();
        let filler = "y".repeat(3000);
        let items: Vec<Object> = (0..400)
            .map(|i| {
                let v = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("c{i:03}"), "namespace": "d"},
                    "data": {"k": filler}});
                Object::new(Arc::new(v), i + 2)
            })
            .collect();
        let meta = json!({"resourceVersion": "401"});
        for format in [Format::Json, Format::Cbor, Format::Protobuf] {
            let chunks: Vec<bytes::Bytes> = ListStream::new(&res, &meta, items.clone(), format)
                .unwrap()
                .map(|c| c.unwrap())
                .collect();
            // 400 items of 3 KB: several chunks, none past the chunk size.
            assert!(chunks.len() > 3, "{format:?}: {} chunks", chunks.len());
            assert!(chunks.iter().all(|c| c.len() <= STREAM_CHUNK));
            let body = chunks.concat();
            // At once, the same bytes in one buffer of their size.
            let whole = ListStream::new(&res, &meta, items.clone(), format)
                .unwrap()
                .concat();
            assert_eq!(whole, body);
            let names = |v: &Value| -> Vec<String> {
                v["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
                    .collect()
            };
            let want: Vec<String> = (0..400).map(|i| format!("c{i:03}")).collect();
            match format {
                Format::Json => {
                    let v: Value = serde_json::from_slice(&body).unwrap();
                    assert_eq!(v["kind"], "ConfigMapList");
                    assert_eq!(names(&v), want);
                }
                Format::Cbor => {
                    let v = apimachinery::cbor::decode(&body).unwrap();
                    assert_eq!(v["metadata"]["resourceVersion"], "401");
                    assert_eq!(names(&v), want);
                }
                _ => {
                    // The same bytes as the list composed at once.
                    let bodies: Vec<&bytes::Bytes> =
                        items.iter().map(|o| o.protobuf().unwrap()).collect();
                    let raws: Vec<&[u8]> = bodies
                        .iter()
                        .map(|b| k8s_proto::decode_unknown(b).unwrap().raw)
                        .collect();
                    let composed =
                        k8s_proto::encode_list("v1", "ConfigMapList", &meta, raws).unwrap();
                    assert_eq!(body, composed);
                }
            }
        }
    }

    #[test]
    fn cbor_list_is_one_tagged_item_of_shared_items() {
        let res = Registry::builtin().lookup("", "v1", "configmaps").unwrap();
        let items = vec![
            Object::new(Arc::new(json!({"metadata": {"name": "a"}})), 2),
            Object::new(Arc::new(json!({"metadata": {"name": "b"}})), 3),
        ];
        let bytes = ListStream::new(&res, &json!({"resourceVersion": "3"}), items, Format::Cbor)
            .unwrap()
            .concat();
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
        let t = table(
            &res,
            std::iter::once(&o),
            json!({}),
            IncludeObject::Metadata,
        );
        assert_eq!(t["rows"][0]["cells"][0], "x");
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert!(t["rows"][0]["object"].get("data").is_none());
    }
}

/// A response extension that keeps a response out of gzip (watch streams
/// must reach the client event by event).
#[derive(Debug, Clone, Copy)]
pub struct NoCompression;
