//! OpenAPI v2 (`/openapi/v2`) and v3 (`/openapi/v3`, `/openapi/v3/{gv}`)
//! documents, in kube-apiserver's layout.
//!
//! The paths are generated from the registry by kube's rules (one path per
//! collection, object, subresource and watch URL; kube's operation ids,
//! `x-kubernetes-action`, `x-kubernetes-group-version-kind`, query parameters
//! and content types); the schemas are the upstream definitions from
//! `apimachinery::schema`, limited to those the paths reach. Documentation
//! prose is not served. `/openapi/v2` is also served as gnostic's protobuf
//! `Document`. The documents never change, so they are built once,
//! on first use, and served as shared bytes with a content hash (`?hash=` and
//! `ETag`).
//!
//! Below the state: the handlers take this module's own [`OpenApi`] (the
//! registry and the remotes table), which the router hands them.

mod crd_v2;

use crate::aggregator::{Remote, Remotes};
use crate::discovery::{
    etag_matches, group_versions, has_deletecollection, parse_accept, subresource_kind,
};
use crate::registry::{Connect, Registry, Resource, Row, Subresource};
use crate::version::{KUBE_MAJOR, KUBE_MINOR};
use apimachinery::schema::Schema;
use apimachinery::version::ContentHash;
use apimachinery::Status;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::{self, Read, Write};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

const DEFINITIONS_REF: &str = "#/definitions/";
const SCHEMAS_REF: &str = "#/components/schemas/";
const INT_OR_STRING: &str = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";
const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";

/// A type of `k8s.io/apimachinery/pkg/apis/meta/v1`.
fn meta(kind: &str) -> String {
    format!("io.k8s.apimachinery.pkg.apis.meta.v1.{kind}")
}

const JSON: &str = "application/json";
/// What an object operation produces.
const OBJECT_TYPES: &[&str] = &[
    JSON,
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/cbor",
];
/// What a list or watch operation produces.
const LIST_TYPES: &[&str] = &[
    JSON,
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/cbor",
    "application/json;stream=watch",
    "application/vnd.kubernetes.protobuf;stream=watch",
    "application/cbor-seq",
];
/// What the group and root discovery documents are offered in.
const DISCOVERY_TYPES: &[&str] = &[
    JSON,
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
];
const ANY: &[&str] = &["*/*"];
/// What the pod log produces: text, or a Status in any object format.
const LOG_TYPES: &[&str] = &[
    "text/plain",
    JSON,
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/cbor",
];
/// A response "definition" that stands for `{"type": "string"}` (the body
/// of a connection or a log), not a `$ref`.
const STRING_SCHEMA: &str = "<string>";
const PATCH_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
    "application/apply-patch+cbor",
];

// ---------------------------------------------------------------------------
// The model: paths and operations, rendered to v2 or v3
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum In {
    Path,
    Query,
}

#[derive(Debug, Clone, Copy)]
struct Param {
    name: &'static str,
    location: In,
    ty: &'static str,
}

const fn query(name: &'static str, ty: &'static str) -> Param {
    Param {
        name,
        location: In::Query,
        ty,
    }
}

const NAME: Param = Param {
    name: "name",
    location: In::Path,
    ty: "string",
};
const PATH: Param = Param {
    name: "path",
    location: In::Path,
    ty: "string",
};
const NAMESPACE: Param = Param {
    name: "namespace",
    location: In::Path,
    ty: "string",
};
const PRETTY: Param = query("pretty", "string");
const DRY_RUN: Param = query("dryRun", "string");
const FIELD_MANAGER: Param = query("fieldManager", "string");
const FIELD_VALIDATION: Param = query("fieldValidation", "string");
const FORCE: Param = query("force", "boolean");
const GRACE_PERIOD: Param = query("gracePeriodSeconds", "integer");
const IGNORE_STORE_READ_ERROR: Param = query(
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "boolean",
);
const ORPHAN_DEPENDENTS: Param = query("orphanDependents", "boolean");
const PROPAGATION_POLICY: Param = query("propagationPolicy", "string");
const CONTINUE: Param = query("continue", "string");
const FIELD_SELECTOR: Param = query("fieldSelector", "string");
const LABEL_SELECTOR: Param = query("labelSelector", "string");
const LIMIT: Param = query("limit", "integer");
const RESOURCE_VERSION: Param = query("resourceVersion", "string");
const RESOURCE_VERSION_MATCH: Param = query("resourceVersionMatch", "string");
const SEND_INITIAL_EVENTS: Param = query("sendInitialEvents", "boolean");
const SHARD_SELECTOR: Param = query("shardSelector", "string");
const TIMEOUT_SECONDS: Param = query("timeoutSeconds", "integer");

/// The parameters of a list or watch.
const LIST_PARAMS: &[Param] = &[
    query("allowWatchBookmarks", "boolean"),
    CONTINUE,
    FIELD_SELECTOR,
    LABEL_SELECTOR,
    LIMIT,
    RESOURCE_VERSION,
    RESOURCE_VERSION_MATCH,
    SEND_INITIAL_EVENTS,
    SHARD_SELECTOR,
    TIMEOUT_SECONDS,
    query("watch", "boolean"),
];
const WRITE_PARAMS: &[Param] = &[DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION];
const PATCH_PARAMS: &[Param] = &[DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION, FORCE];
const DELETE_PARAMS: &[Param] = &[
    DRY_RUN,
    GRACE_PERIOD,
    IGNORE_STORE_READ_ERROR,
    ORPHAN_DEPENDENTS,
    PROPAGATION_POLICY,
];
const DELETECOLLECTION_PARAMS: &[Param] = &[
    CONTINUE,
    DRY_RUN,
    FIELD_SELECTOR,
    GRACE_PERIOD,
    IGNORE_STORE_READ_ERROR,
    LABEL_SELECTOR,
    LIMIT,
    ORPHAN_DEPENDENTS,
    PROPAGATION_POLICY,
    RESOURCE_VERSION,
    RESOURCE_VERSION_MATCH,
    SEND_INITIAL_EVENTS,
    SHARD_SELECTOR,
    TIMEOUT_SECONDS,
];

/// A request body: the definition it holds and whether it is required.
#[derive(Debug, Clone)]
struct Body {
    definition: String,
    required: bool,
}

#[derive(Debug, Clone)]
struct Op {
    method: &'static str,
    id: String,
    tag: String,
    action: Option<&'static str>,
    gvk: Option<(String, String, String)>,
    params: Vec<Param>,
    body: Option<Body>,
    consumes: &'static [&'static str],
    produces: &'static [&'static str],
    /// Status code and the definition of the answer (none for 401).
    responses: Vec<(u16, Option<String>)>,
}

#[derive(Debug, Clone)]
struct PathItem {
    path: String,
    params: Vec<Param>,
    ops: Vec<Op>,
}

fn sorted_params(params: &[Param]) -> Vec<Param> {
    let mut out = params.to_vec();
    out.sort_by_key(|p| p.name);
    out
}

/// The camel-case name kube gives a group in operation ids: `Core`,
/// `Apps`, `RbacAuthorization`.
fn group_camel(group: &str) -> String {
    if group.is_empty() {
        return "Core".to_string();
    }
    group
        .strip_suffix(".k8s.io")
        .unwrap_or(group)
        .split('.')
        .map(capitalize)
        .collect()
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_lowercase().chain(c).collect(),
        None => String::new(),
    }
}

/// Path prefix, id prefix and tag of one group-version.
struct GroupVersion {
    prefix: String,
    id: String,
    tag: String,
}

impl GroupVersion {
    fn new(group: &str, version: &str) -> Self {
        let prefix = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let g = group_camel(group);
        GroupVersion {
            prefix,
            id: format!("{g}{}", capitalize(version)),
            tag: format!("{}_{version}", lower_first(&g)),
        }
    }
}

fn status_name(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        401 => "Unauthorized",
        _ => "",
    }
}

fn responses(codes: &[u16], definition: Option<&str>) -> Vec<(u16, Option<String>)> {
    codes
        .iter()
        .map(|c| (*c, definition.map(str::to_string)))
        .chain(std::iter::once((401, None)))
        .collect()
}

/// The operations kube publishes for a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verb {
    ListAllNamespaces,
    DeleteCollection,
    List,
    Create,
    Delete,
    Read,
    Patch,
    Replace,
    WatchListAllNamespaces,
    WatchList,
    Watch,
}

impl Verb {
    fn method(self) -> &'static str {
        match self {
            Verb::DeleteCollection | Verb::Delete => "delete",
            Verb::Create => "post",
            Verb::Patch => "patch",
            Verb::Replace => "put",
            _ => "get",
        }
    }

    fn action(self) -> &'static str {
        match self {
            Verb::ListAllNamespaces | Verb::List => "list",
            Verb::DeleteCollection => "deletecollection",
            Verb::Create => "post",
            Verb::Delete => "delete",
            Verb::Read => "get",
            Verb::Patch => "patch",
            Verb::Replace => "put",
            Verb::WatchListAllNamespaces | Verb::WatchList => "watchlist",
            Verb::Watch => "watch",
        }
    }

    /// Operation-level parameters (watches carry theirs on the path).
    fn params(self) -> &'static [Param] {
        match self {
            Verb::DeleteCollection => DELETECOLLECTION_PARAMS,
            Verb::List => LIST_PARAMS,
            Verb::Create | Verb::Replace => WRITE_PARAMS,
            Verb::Delete => DELETE_PARAMS,
            Verb::Patch => PATCH_PARAMS,
            _ => &[],
        }
    }

    fn produces(self) -> &'static [&'static str] {
        match self {
            Verb::ListAllNamespaces
            | Verb::List
            | Verb::WatchListAllNamespaces
            | Verb::WatchList
            | Verb::Watch => LIST_TYPES,
            _ => OBJECT_TYPES,
        }
    }

    fn codes(self) -> &'static [u16] {
        match self {
            Verb::Create => &[200, 201, 202],
            Verb::Delete => &[200, 202],
            Verb::Patch | Verb::Replace => &[200, 201],
            _ => &[200],
        }
    }

    /// The operation id: `{word}{Group}{Version}{infix}[Namespaced]{Kind}{suffix}`.
    fn id(self, gv: &GroupVersion, r: &Resource, sub: &str) -> String {
        let ns = if r.namespaced { "Namespaced" } else { "" };
        let kind = &r.kind;
        let (word, infix, ns, suffix) = match self {
            Verb::ListAllNamespaces => ("list", "", "", "ForAllNamespaces"),
            Verb::DeleteCollection => ("delete", "Collection", ns, ""),
            Verb::List => ("list", "", ns, ""),
            Verb::Create => ("create", "", ns, ""),
            Verb::Delete => ("delete", "", ns, ""),
            Verb::Read => ("read", "", ns, ""),
            Verb::Patch => ("patch", "", ns, ""),
            Verb::Replace => ("replace", "", ns, ""),
            Verb::WatchListAllNamespaces => ("watch", "", "", "ListForAllNamespaces"),
            Verb::WatchList => ("watch", "", ns, "List"),
            Verb::Watch => ("watch", "", ns, ""),
        };
        format!("{word}{}{infix}{ns}{kind}{sub}{suffix}", gv.id)
    }
}

/// The definitions one resource's operations refer to.
struct Definitions {
    /// The kind (or a subresource's kind) and its group-version-kind.
    object: Option<String>,
    gvk: (String, String, String),
    list: Option<String>,
}

fn operation(verb: Verb, gv: &GroupVersion, r: &Resource, sub: &str, defs: &Definitions) -> Op {
    let status = meta("Status");
    let watch_event = meta("WatchEvent");
    let delete_options = meta("DeleteOptions");
    let patch = meta("Patch");
    let object = defs.object.as_deref();
    let (body, required) = match verb {
        Verb::Create | Verb::Replace => (object, true),
        Verb::Patch => (Some(patch.as_str()), true),
        Verb::Delete | Verb::DeleteCollection => (Some(delete_options.as_str()), false),
        _ => (None, false),
    };
    let answer = match verb {
        Verb::ListAllNamespaces | Verb::List => defs.list.as_deref(),
        Verb::WatchListAllNamespaces | Verb::WatchList | Verb::Watch => Some(watch_event.as_str()),
        Verb::DeleteCollection => Some(status.as_str()),
        Verb::Delete if !r.delete_returns_object => Some(status.as_str()),
        _ => object,
    };
    Op {
        method: verb.method(),
        id: verb.id(gv, r, sub),
        tag: gv.tag.clone(),
        action: Some(verb.action()),
        gvk: Some(defs.gvk.clone()),
        params: sorted_params(verb.params()),
        body: body.map(|d| Body {
            definition: d.to_string(),
            required,
        }),
        consumes: if verb == Verb::Patch {
            PATCH_TYPES
        } else {
            ANY
        },
        produces: verb.produces(),
        responses: responses(verb.codes(), answer),
    }
}

/// The operations of a connect subresource (`pods/exec`, `nodes/proxy`),
/// or the pod log's read. Their parameters sit on the path.
fn connect_ops(gv: &GroupVersion, r: &Resource, c: &Connect, suffix: &str) -> Vec<Op> {
    let ns = if r.namespaced { "Namespaced" } else { "" };
    let sub = capitalize(c.name);
    c.methods
        .iter()
        .map(|method| {
            let id = if c.read {
                format!("read{}{ns}{}{sub}{suffix}", gv.id, r.kind)
            } else {
                format!(
                    "connect{}{}{ns}{}{sub}{suffix}",
                    gv.id,
                    capitalize(method),
                    r.kind
                )
            };
            Op {
                method,
                id,
                tag: gv.tag.clone(),
                action: Some(if c.read { "get" } else { "connect" }),
                gvk: Some((
                    r.group.to_string(),
                    r.version.to_string(),
                    c.kind.to_string(),
                )),
                params: Vec::new(),
                body: None,
                consumes: ANY,
                produces: if c.read { LOG_TYPES } else { ANY },
                responses: responses(&[200], Some(STRING_SCHEMA)),
            }
        })
        .collect()
}

/// The paths kube serves for one resource.
fn resource_paths(r: &Resource, defs: &DefSource) -> Vec<PathItem> {
    let gv = GroupVersion::new(&r.group, &r.version);
    let def = |g: &str, v: &str, k: &str| defs.name_for_gvk(g, v, k).map(str::to_string);
    let defs = Definitions {
        object: def(&r.group, &r.version, &r.kind),
        gvk: (
            r.group.to_string(),
            r.version.to_string(),
            r.kind.to_string(),
        ),
        list: def(&r.group, &r.version, &r.list_kind()),
    };
    let ops = |verbs: &[Verb], sub: &str, defs: &Definitions| -> Vec<Op> {
        verbs
            .iter()
            .map(|v| operation(*v, &gv, r, sub, defs))
            .collect()
    };
    let scope: &[Param] = if r.namespaced { &[NAMESPACE] } else { &[] };
    let params = |extra: &[Param]| sorted_params(&[scope, extra].concat());
    let watch_params = |extra: &[Param]| params(&[LIST_PARAMS, &[PRETTY], extra].concat());
    let (collection, watch_collection) = if r.namespaced {
        (
            format!("{}/namespaces/{{namespace}}/{}", gv.prefix, r.plural),
            format!("{}/watch/namespaces/{{namespace}}/{}", gv.prefix, r.plural),
        )
    } else {
        (
            format!("{}/{}", gv.prefix, r.plural),
            format!("{}/watch/{}", gv.prefix, r.plural),
        )
    };
    // A path with one operation carries that operation's parameters at the
    // path level, as kube's OpenAPI builder writes it.
    let item = |path: String, params: Vec<Param>, mut ops: Vec<Op>| {
        let params = match ops.as_mut_slice() {
            [only] => sorted_params(&[params, std::mem::take(&mut only.params)].concat()),
            _ => params,
        };
        PathItem { path, params, ops }
    };
    let all_namespaces = |prefix: &str, verb: Verb| {
        let all: Vec<Param> = LIST_PARAMS.iter().copied().chain([PRETTY]).collect();
        item(
            format!("{prefix}/{}", r.plural),
            sorted_params(&all),
            ops(&[verb], "", &defs),
        )
    };

    let mut items = Vec::new();
    if r.virtual_create.is_some() {
        // Create-only kinds: one POST on the collection, its query
        // parameters declared on the path as kube does.
        let mut create = ops(&[Verb::Create], "", &defs);
        for op in &mut create {
            op.params.clear();
        }
        items.push(item(
            collection,
            params(&[WRITE_PARAMS, &[PRETTY]].concat()),
            create,
        ));
        return items;
    }
    if r.computed.is_some() {
        // Computed kinds: list and read, no watch.
        items.push(item(
            collection.clone(),
            params(&[PRETTY]),
            ops(&[Verb::List], "", &defs),
        ));
        items.push(item(
            format!("{collection}/{{name}}"),
            params(&[NAME, PRETTY]),
            ops(&[Verb::Read], "", &defs),
        ));
        return items;
    }
    if r.namespaced {
        items.push(all_namespaces(&gv.prefix, Verb::ListAllNamespaces));
    }
    let collection_verbs: &[Verb] = if has_deletecollection(r) {
        &[Verb::DeleteCollection, Verb::List, Verb::Create]
    } else {
        &[Verb::List, Verb::Create]
    };
    items.push(item(
        collection.clone(),
        params(&[PRETTY]),
        ops(collection_verbs, "", &defs),
    ));
    let object_verbs = [Verb::Delete, Verb::Read, Verb::Patch, Verb::Replace];
    items.push(item(
        format!("{collection}/{{name}}"),
        params(&[NAME, PRETTY]),
        ops(&object_verbs, "", &defs),
    ));
    for sub in r.subresources.iter() {
        if let Subresource::Connect(c) = sub {
            let base = format!("{collection}/{{name}}/{}", c.name);
            let mut extra: Vec<Param> = vec![NAME];
            extra.extend(c.params.iter().map(|(name, ty)| query(name, ty)));
            items.push(item(
                base.clone(),
                params(&extra),
                connect_ops(&gv, r, c, ""),
            ));
            if c.with_path {
                extra.insert(0, PATH);
                items.push(item(
                    format!("{base}/{{path}}"),
                    params(&extra),
                    connect_ops(&gv, r, c, "WithPath"),
                ));
            }
            continue;
        }
        let (g, v, k) = subresource_kind(r, sub);
        let sub_defs = Definitions {
            object: def(g, v, k),
            gvk: (g.to_string(), v.to_string(), k.to_string()),
            list: None,
        };
        items.push(item(
            format!("{collection}/{{name}}/{}", sub.name()),
            params(&[NAME, PRETTY]),
            ops(
                &sub.verbs()
                    .iter()
                    .filter_map(|v| match *v {
                        "get" => Some(Verb::Read),
                        "patch" => Some(Verb::Patch),
                        "update" => Some(Verb::Replace),
                        "create" => Some(Verb::Create),
                        _ => None,
                    })
                    .collect::<Vec<_>>(),
                &capitalize(sub.name()),
                &sub_defs,
            ),
        ));
    }
    if r.namespaced {
        items.push(all_namespaces(
            &format!("{}/watch", gv.prefix),
            Verb::WatchListAllNamespaces,
        ));
    }
    items.push(item(
        watch_collection.clone(),
        watch_params(&[]),
        ops(&[Verb::WatchList], "", &defs),
    ));
    items.push(item(
        format!("{watch_collection}/{{name}}"),
        watch_params(&[NAME]),
        ops(&[Verb::Watch], "", &defs),
    ));
    items
}

/// A GET of a discovery document.
fn discovery_item(
    path: String,
    id: String,
    tag: String,
    types: &'static [&'static str],
    definition: String,
) -> PathItem {
    PathItem {
        path,
        params: Vec::new(),
        ops: vec![Op {
            method: "get",
            id,
            tag,
            action: None,
            gvk: None,
            params: Vec::new(),
            body: None,
            consumes: types,
            produces: types,
            responses: responses(&[200], Some(&definition)),
        }],
    }
}

fn group_version_paths(
    registry: &Registry,
    defs: &DefSource,
    group: &str,
    version: &str,
) -> Vec<PathItem> {
    let gv = GroupVersion::new(group, version);
    let mut items = vec![discovery_item(
        format!("{}/", gv.prefix),
        format!("get{}APIResources", gv.id),
        gv.tag.clone(),
        OBJECT_TYPES,
        meta("APIResourceList"),
    )];
    for r in registry.in_group_version(group, version) {
        items.extend(resource_paths(&r, defs));
    }
    items
}

// ---------------------------------------------------------------------------
// Rendering
// ---------------------------------------------------------------------------

fn param_v2(p: &Param) -> Value {
    let mut m = Map::new();
    m.insert(
        "in".into(),
        json!(if p.location == In::Path {
            "path"
        } else {
            "query"
        }),
    );
    m.insert("name".into(), json!(p.name));
    if p.location == In::Path {
        m.insert("required".into(), json!(true));
    }
    m.insert("type".into(), json!(p.ty));
    m.insert("uniqueItems".into(), json!(true));
    Value::Object(m)
}

fn param_v3(p: &Param) -> Value {
    let mut m = Map::new();
    m.insert(
        "in".into(),
        json!(if p.location == In::Path {
            "path"
        } else {
            "query"
        }),
    );
    m.insert("name".into(), json!(p.name));
    if p.location == In::Path {
        m.insert("required".into(), json!(true));
    }
    m.insert("schema".into(), json!({"type": p.ty, "uniqueItems": true}));
    Value::Object(m)
}

fn reference(prefix: &str, definition: &str) -> Value {
    json!({ "$ref": format!("{prefix}{definition}") })
}

fn extensions(op: &Op, m: &mut Map<String, Value>) {
    m.insert("tags".into(), json!([op.tag]));
    if let Some(action) = op.action {
        m.insert("x-kubernetes-action".into(), json!(action));
    }
    if let Some((group, version, kind)) = &op.gvk {
        m.insert(
            "x-kubernetes-group-version-kind".into(),
            json!({"group": group, "kind": kind, "version": version}),
        );
    }
}

fn op_v2(op: &Op) -> Value {
    let mut m = Map::new();
    m.insert("consumes".into(), json!(op.consumes));
    m.insert("operationId".into(), json!(op.id));
    let mut params: Vec<(&str, Value)> = op.params.iter().map(|p| (p.name, param_v2(p))).collect();
    if let Some(body) = &op.body {
        let mut b = Map::new();
        b.insert("in".into(), json!("body"));
        b.insert("name".into(), json!("body"));
        if body.required {
            b.insert("required".into(), json!(true));
        }
        b.insert(
            "schema".into(),
            reference(DEFINITIONS_REF, &body.definition),
        );
        params.push(("body", Value::Object(b)));
    }
    params.sort_by(|a, b| a.0.cmp(b.0));
    if !params.is_empty() {
        m.insert(
            "parameters".into(),
            Value::Array(params.into_iter().map(|p| p.1).collect()),
        );
    }
    m.insert("produces".into(), json!(op.produces));
    let mut rs = Map::new();
    for (code, definition) in &op.responses {
        let mut r = Map::new();
        r.insert("description".into(), json!(status_name(*code)));
        match definition.as_deref() {
            Some(STRING_SCHEMA) => {
                r.insert("schema".into(), json!({"type": "string"}));
            }
            Some(d) => {
                r.insert("schema".into(), reference(DEFINITIONS_REF, d));
            }
            None => {}
        }
        rs.insert(code.to_string(), Value::Object(r));
    }
    m.insert("responses".into(), Value::Object(rs));
    m.insert("schemes".into(), json!(["https"]));
    extensions(op, &mut m);
    Value::Object(m)
}

fn content_v3(types: &[&str], definition: &str) -> Value {
    let schema = if definition == STRING_SCHEMA {
        json!({"type": "string"})
    } else {
        reference(SCHEMAS_REF, definition)
    };
    Value::Object(
        types
            .iter()
            .map(|t| (t.to_string(), json!({ "schema": schema.clone() })))
            .collect(),
    )
}

fn op_v3(op: &Op) -> Value {
    let mut m = Map::new();
    m.insert("operationId".into(), json!(op.id));
    if !op.params.is_empty() {
        m.insert(
            "parameters".into(),
            Value::Array(op.params.iter().map(param_v3).collect()),
        );
    }
    if let Some(body) = &op.body {
        let mut b = Map::new();
        b.insert("content".into(), content_v3(op.consumes, &body.definition));
        m.insert("requestBody".into(), Value::Object(b));
    }
    let mut rs = Map::new();
    for (code, definition) in &op.responses {
        let mut r = Map::new();
        if let Some(d) = definition {
            r.insert("content".into(), content_v3(op.produces, d));
        }
        r.insert("description".into(), json!(status_name(*code)));
        rs.insert(code.to_string(), Value::Object(r));
    }
    m.insert("responses".into(), Value::Object(rs));
    extensions(op, &mut m);
    Value::Object(m)
}

/// Every `$ref` target (with `prefix` stripped) under `m`.
fn collect_map_refs(m: &Map<String, Value>, prefix: &str, out: &mut BTreeSet<String>) {
    if let Some(target) = m
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix(prefix))
    {
        out.insert(target.to_string());
    }
    m.values().for_each(|v| collect_refs(v, prefix, out));
}

/// Every `$ref` target (with `prefix` stripped) under `v`.
fn collect_refs(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => collect_map_refs(m, prefix, out),
        Value::Array(a) => a.iter().for_each(|v| collect_refs(v, prefix, out)),
        _ => {}
    }
}

/// The definitions the operations of `items` name (bodies and answers).
fn direct_refs(items: &[PathItem], out: &mut BTreeSet<String>) {
    for op in items.iter().flat_map(|i| &i.ops) {
        out.extend(op.body.iter().map(|b| b.definition.clone()));
        out.extend(
            op.responses
                .iter()
                .filter_map(|(_, d)| d.as_deref())
                .filter(|d| *d != STRING_SCHEMA)
                .map(str::to_string),
        );
    }
}

/// `direct` and every definition they reach through other definitions.
/// (A custom kind's v2 form only drops nodes; the one reference it can
/// drop, `metadata`'s ObjectMeta, every v2 document reaches through the
/// built-in paths, so reading the v3 form finds the same set.)
fn reachable(mut pending: BTreeSet<String>, defs: &DefSource) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    while let Some(name) = pending.pop_first() {
        if seen.contains(&name) {
            continue;
        }
        if let Some(def) = defs.get(&name) {
            let mut found = BTreeSet::new();
            collect_map_refs(def, DEFINITIONS_REF, &mut found);
            pending.extend(found.into_iter().filter(|n| !seen.contains(n)));
        }
        seen.insert(name);
    }
    seen
}

/// Where a document's definitions come from: schemas looked up in order
/// (the first that has a name wins), referred to, never copied.
struct DefSource<'a> {
    schemas: Vec<&'a Schema>,
    /// The custom kinds' own definitions, which `/openapi/v2` publishes in
    /// their v2 form ([`crd_v2::definition_of`]).
    v2_forms: HashSet<&'a str>,
    /// Which schema answers each name and group-version-kind, built on
    /// the first lookup of a source of several schemas: `/openapi/v2`
    /// holds one per custom kind and looks up every reference of every
    /// path, so asking each schema in turn grew with the square of the
    /// number of CRDs.
    index: OnceLock<DefIndex<'a>>,
}

#[derive(Default)]
struct DefIndex<'a> {
    names: HashMap<&'a str, &'a Schema>,
    /// kind → (group, version, definition name), first schema first.
    gvks: HashMap<&'a str, Vec<(&'a str, &'a str, &'a str)>>,
}

impl<'a> DefSource<'a> {
    fn of(schemas: Vec<&'a Schema>) -> Self {
        DefSource {
            schemas,
            v2_forms: HashSet::new(),
            index: OnceLock::new(),
        }
    }

    fn push(&mut self, schema: &'a Schema) {
        self.schemas.push(schema);
        self.index = OnceLock::new();
    }

    /// The index, or `None` for a single schema (asked directly).
    fn index(&self) -> Option<&DefIndex<'a>> {
        if self.schemas.len() < 2 {
            return None;
        }
        Some(self.index.get_or_init(|| {
            let mut ix = DefIndex::default();
            // Earlier schemas first, each its own definitions and then
            // its shared ones: the order of the lookups it replaces.
            for s in self.schemas.iter().copied() {
                for (name, _) in s.all_definitions() {
                    ix.names.entry(name.as_str()).or_insert(s);
                }
                for (g, v, k, def) in s.gvks() {
                    let seen = ix.gvks.entry(k).or_default();
                    if !seen.iter().any(|(sg, sv, _)| (*sg, *sv) == (g, v)) {
                        seen.push((g, v, def));
                    }
                }
            }
            ix
        }))
    }

    fn get(&self, name: &str) -> Option<&'a Map<String, Value>> {
        match self.index() {
            Some(ix) => ix.names.get(name)?.by_name(name).map(|t| t.raw()),
            None => self
                .schemas
                .first()
                .and_then(|s| s.by_name(name))
                .map(|t| t.raw()),
        }
    }

    fn name_for_gvk(&self, group: &str, version: &str, kind: &str) -> Option<&'a str> {
        match self.index() {
            Some(ix) => ix
                .gvks
                .get(kind)?
                .iter()
                .find(|(g, v, _)| (*g, *v) == (group, version))
                .map(|(_, _, def)| *def),
            None => self
                .schemas
                .first()
                .and_then(|s| s.definition_name_for_gvk(group, version, kind)),
        }
    }
}

// ---------------------------------------------------------------------------
// Writing: streamed, every object's keys sorted as Go's encoder sorts a
// map's, nothing copied but one path item or one custom kind's v2 form
// at a time
// ---------------------------------------------------------------------------

/// A JSON value written with its objects' keys in byte order; with `v3`,
/// `#/definitions/` references are written as `#/components/schemas/`.
struct Sorted<'a> {
    v: &'a Value,
    v3: bool,
}

/// [`Sorted`] for an object.
struct SortedMap<'a> {
    m: &'a Map<String, Value>,
    v3: bool,
}

/// A `$ref` of a v3 document.
struct SchemaRef<'a>(&'a str);

impl Serialize for SchemaRef<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{SCHEMAS_REF}{}", self.0))
    }
}

impl Serialize for Sorted<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.v {
            Value::Object(m) => SortedMap { m, v3: self.v3 }.serialize(s),
            Value::Array(a) => s.collect_seq(a.iter().map(|v| Sorted { v, v3: self.v3 })),
            other => other.serialize(s),
        }
    }
}

impl Serialize for SortedMap<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut entries: Vec<(&String, &Value)> = self.m.iter().collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut map = s.serialize_map(Some(entries.len()))?;
        for (k, v) in entries {
            let v3_ref = match (self.v3, k.as_str(), v.as_str()) {
                (true, "$ref", Some(r)) => r.strip_prefix(DEFINITIONS_REF),
                _ => None,
            };
            match v3_ref {
                Some(name) => map.serialize_entry(k, &SchemaRef(name))?,
                None => map.serialize_entry(k, &Sorted { v, v3: self.v3 })?,
            }
        }
        map.end()
    }
}

/// Writes a JSON object an entry at a time.
struct ObjectWriter<'w> {
    w: &'w mut dyn Write,
    first: bool,
}

impl<'w> ObjectWriter<'w> {
    fn open(w: &'w mut dyn Write) -> io::Result<Self> {
        w.write_all(b"{")?;
        Ok(ObjectWriter { w, first: true })
    }

    /// Writes `"key":`; the value is for the caller to write.
    fn key(&mut self, key: &str) -> io::Result<()> {
        if !self.first {
            self.w.write_all(b",")?;
        }
        self.first = false;
        serde_json::to_writer(&mut *self.w, key)?;
        self.w.write_all(b":")
    }

    fn entry<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> io::Result<()> {
        self.key(key)?;
        serde_json::to_writer(&mut *self.w, value)?;
        Ok(())
    }

    /// An object value under `key`.
    fn object(&mut self, key: &str) -> io::Result<ObjectWriter<'_>> {
        self.key(key)?;
        ObjectWriter::open(&mut *self.w)
    }

    fn close(self) -> io::Result<()> {
        self.w.write_all(b"}")
    }
}

fn info() -> Value {
    json!({"title": "Kubernetes", "version": format!("v{KUBE_MAJOR}.{KUBE_MINOR}.0")})
}

/// One path item as v2 or v3 renders it.
fn render_item(item: &PathItem, v3: bool) -> Value {
    let mut m = Map::new();
    for op in &item.ops {
        m.insert(
            op.method.to_string(),
            if v3 { op_v3(op) } else { op_v2(op) },
        );
    }
    if !item.params.is_empty() {
        let params = item
            .params
            .iter()
            .map(|p| if v3 { param_v3(p) } else { param_v2(p) })
            .collect();
        m.insert("parameters".into(), Value::Array(params));
    }
    Value::Object(m)
}

/// Calls its argument with each set of a document's paths, sets in path
/// order; called twice (the definitions, which come first, are those the
/// paths reach), so a large document's paths are never all held at once.
type PathSets<'s> = &'s dyn Fn(&mut dyn FnMut(Vec<PathItem>));

/// Writes a v2 (`swagger: 2.0`) or v3 document of the paths `sets` gives
/// and the definitions they reach.
fn write_document(w: &mut dyn Write, v3: bool, defs: &DefSource, sets: PathSets) -> io::Result<()> {
    let mut direct = BTreeSet::new();
    sets(&mut |items| direct_refs(&items, &mut direct));
    let names = reachable(direct, defs);
    let mut doc = ObjectWriter::open(w)?;
    if v3 {
        let mut components = doc.object("components")?;
        let mut schemas = components.object("schemas")?;
        write_definitions(&mut schemas, true, defs, &names)?;
        schemas.close()?;
        components.close()?;
    } else {
        let mut definitions = doc.object("definitions")?;
        write_definitions(&mut definitions, false, defs, &names)?;
        definitions.close()?;
    }
    doc.entry("info", &Sorted { v: &info(), v3 })?;
    if v3 {
        doc.entry("openapi", "3.0.0")?;
    }
    {
        let mut paths = doc.object("paths")?;
        let mut failed = None;
        sets(&mut |mut items| {
            if failed.is_some() {
                return;
            }
            items.sort_by(|a, b| a.path.cmp(&b.path));
            for (i, item) in items.iter().enumerate() {
                // A path named twice: the last one, as a map keeps it.
                if items.get(i + 1).is_some_and(|next| next.path == item.path) {
                    continue;
                }
                let rendered = render_item(item, v3);
                if let Err(e) = paths.entry(
                    &item.path,
                    &Sorted {
                        v: &rendered,
                        v3: false,
                    },
                ) {
                    failed = Some(e);
                    return;
                }
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
        paths.close()?;
    }
    if !v3 {
        doc.entry("swagger", "2.0")?;
    }
    doc.close()
}

/// The definitions `names` (in order) as v2 or v3 publishes them.
fn write_definitions(
    out: &mut ObjectWriter,
    v3: bool,
    defs: &DefSource,
    names: &BTreeSet<String>,
) -> io::Result<()> {
    for name in names {
        let Some(def) = defs.get(name) else { continue };
        match name.as_str() {
            // The two types that are a string or a number on the wire are
            // published as `oneOf` in v3, as kube does.
            INT_OR_STRING if v3 => out.entry(
                name,
                &json!({"format": "int-or-string", "oneOf": [{"type": "integer"}, {"type": "string"}]}),
            )?,
            QUANTITY if v3 => out.entry(
                name,
                &json!({"oneOf": [{"type": "string"}, {"type": "number"}]}),
            )?,
            _ if !v3 && defs.v2_forms.contains(name.as_str()) => {
                let v2 = crd_v2::definition_of(def);
                out.entry(name, &Sorted { v: &v2, v3 })?
            }
            _ => out.entry(name, &SortedMap { m: def, v3 })?,
        }
    }
    Ok(())
}

/// The v3 document of one set of paths.
fn v3_document(items: Vec<PathItem>, defs: &DefSource) -> Doc {
    Doc::write(|w| write_document(w, true, defs, &|f| f(items.clone())))
}

// ---------------------------------------------------------------------------
// The documents, built once
// ---------------------------------------------------------------------------

/// One document, kept gzip-compressed (served as it is to clients that take
/// gzip, which client-go asks for), and the content hash of its JSON.
#[derive(Clone)]
pub(crate) struct Doc {
    gz: Bytes,
    /// The length of the uncompressed document.
    len: usize,
    hash: String,
}

/// What a document is written into: the hash of the bytes and the
/// compressor, so the whole document is never held uncompressed.
struct Sink {
    hash: ContentHash,
    len: usize,
    gz: GzEncoder<Vec<u8>>,
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.gz.write_all(buf)?;
        self.hash.update(buf);
        self.len += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// How many uncompressed bytes one piece of a body sent decompressed holds.
const INFLATE_CHUNK: u64 = 64 * 1024;

impl Doc {
    /// The document `write` writes (it cannot fail but for a bug: then
    /// the error is logged and the document is what was written).
    fn write(write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Self {
        let sink = Sink {
            hash: ContentHash::default(),
            len: 0,
            gz: GzEncoder::new(Vec::new(), Compression::fast()),
        };
        // serde_json writes a token at a time: batch them for the
        // compressor.
        let mut buffered = io::BufWriter::with_capacity(32 * 1024, sink);
        if let Err(e) = write(&mut buffered) {
            tracing::error!(error = %e, "writing an OpenAPI document");
        }
        if let Err(e) = buffered.flush() {
            tracing::error!(error = %e, "writing an OpenAPI document");
        }
        let (sink, _) = buffered.into_parts();
        let mut gz = sink.gz.finish().unwrap_or_default();
        // The buffer doubled as it grew: a document lives until the next
        // CRD change, so it keeps only its length.
        gz.shrink_to_fit();
        Doc {
            gz: Bytes::from(gz),
            len: sink.len,
            hash: sink.hash.finish(),
        }
    }

    /// `doc` as it is (a remote's document keeps its own key order).
    fn new(doc: &Value) -> Self {
        Doc::write(|w| Ok(serde_json::to_writer(w, doc)?))
    }

    /// `doc` with every object's keys sorted, as Go's encoder writes maps.
    fn sorted(doc: &Value) -> Self {
        Doc::write(|w| Ok(serde_json::to_writer(w, &Sorted { v: doc, v3: false })?))
    }

    /// The uncompressed document.
    fn json(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len);
        if let Err(e) = GzDecoder::new(&self.gz[..]).read_to_end(&mut out) {
            tracing::error!(error = %e, "decompressing an OpenAPI document");
        }
        out
    }

    /// The uncompressed document in pieces, decompressed as they are sent.
    fn json_stream(&self) -> axum::body::Body {
        let mut decoder = GzDecoder::new(io::Cursor::new(self.gz.clone()));
        let pieces = std::iter::from_fn(move || {
            let mut piece = Vec::with_capacity(INFLATE_CHUNK as usize);
            match Read::by_ref(&mut decoder)
                .take(INFLATE_CHUNK)
                .read_to_end(&mut piece)
            {
                Ok(0) => None,
                Ok(_) => Some(Ok(Bytes::from(piece))),
                Err(e) => Some(Err(e)),
            }
        });
        axum::body::Body::from_stream(futures_util::stream::iter(pieces))
    }

    fn etag(&self) -> String {
        format!("\"{}\"", self.hash)
    }
}

/// Every OpenAPI document this server publishes.
pub(crate) struct Documents {
    /// `/openapi/v2`, one document of everything: built on first request
    /// when custom resources are served (clients read v3 first).
    v2: OnceLock<Doc>,
    /// `v2` as gnostic's `openapi.v2.Document` protobuf message (under
    /// the JSON's hash), encoded on the first request for it (kubectl's
    /// client-side validation), or why it could not be.
    v2_proto: OnceLock<Result<Doc, String>>,
    /// The registry to build `v2` from, when it is built lazily.
    v2_registry: Option<Registry>,
    v3_root: Doc,
    /// v3 documents by discovery path: `api`, `api/v1`, `apis`,
    /// `apis/{group}`, `apis/{group}/{version}`, `version`.
    v3: HashMap<String, Doc>,
}

impl Documents {
    fn v2(&self) -> &Doc {
        self.v2.get_or_init(|| {
            let registry = self.v2_registry.clone().unwrap_or_default();
            v2_doc(&registry, apimachinery::schema::builtin())
        })
    }

    /// `v2` in protobuf. These documents are replaced as a whole when the
    /// custom resources change, so the bytes live exactly as long as the
    /// JSON they come from.
    fn v2_proto(&self) -> &Result<Doc, String> {
        self.v2_proto.get_or_init(|| {
            let json = self.v2();
            let reader = io::BufReader::new(GzDecoder::new(&json.gz[..]));
            let doc: Value = serde_json::from_reader(reader).map_err(|e| e.to_string())?;
            let pb = k8s_proto::encode_openapi_v2(&doc).map_err(|e| e.to_string())?;
            drop(doc);
            let mut pb = Doc::write(|w| w.write_all(&pb));
            pb.hash = json.hash.clone();
            Ok(pb)
        })
    }
}

/// `/openapi/v2` of `registry`: the built-in definitions plus each custom
/// kind's in its v2 form ([`crd_v2::definition_of`]); they share the
/// ObjectMeta family, which is the same in both.
fn v2_doc(registry: &Registry, builtin: &Schema) -> Doc {
    let all = registry.all();
    // Definitions a CRD's write paths have not built are built for this
    // document alone (`schema_hold`), and dropped with it.
    let holds: Vec<_> = all
        .refs()
        .filter_map(|r| r.custom.as_ref())
        .map(|c| c.schema_hold())
        .collect();
    let mut defs = DefSource::of(vec![builtin]);
    for (hold, name) in &holds {
        let schema = hold.get();
        defs.push(schema);
        if schema.by_name(name).is_some() {
            defs.v2_forms.insert(name);
        }
    }
    let mut sets = path_sets(registry);
    // Each set's paths share the prefix `/{key}/` (a set nested in
    // another's prefix holds only that prefix's own path), so sets in
    // that order are paths in order.
    sets.sort_by_cached_key(|(key, _)| format!("/{key}/"));
    Doc::write(|w| {
        write_document(w, false, &defs, &|f| {
            for (_, set) in &sets {
                f(set.items(registry, &defs));
            }
        })
    })
}

/// What one v3 document's paths are made of.
enum PathSet {
    /// `/api/`, `/apis/` or `/version/`: one discovery path.
    Root {
        path: &'static str,
        id: &'static str,
        tag: &'static str,
        types: &'static [&'static str],
        definition: String,
    },
    /// `/apis/{group}/`.
    Group(String),
    /// A group-version's resources.
    GroupVersion(String, String),
}

impl PathSet {
    fn items(&self, registry: &Registry, defs: &DefSource) -> Vec<PathItem> {
        match self {
            PathSet::Root {
                path,
                id,
                tag,
                types,
                definition,
            } => vec![discovery_item(
                path.to_string(),
                id.to_string(),
                tag.to_string(),
                types,
                definition.clone(),
            )],
            PathSet::Group(group) => vec![group_item(group)],
            PathSet::GroupVersion(group, version) => {
                group_version_paths(registry, defs, group, version)
            }
        }
    }
}

/// The discovery path of a named group.
fn group_item(group: &str) -> PathItem {
    let g = group_camel(group);
    discovery_item(
        format!("/apis/{group}/"),
        format!("get{g}APIGroup"),
        lower_first(&g),
        DISCOVERY_TYPES,
        meta("APIGroup"),
    )
}

/// The v3 documents' path sets by key, in order.
fn path_sets(registry: &Registry) -> Vec<(String, PathSet)> {
    let mut sets = vec![
        (
            "api".to_string(),
            PathSet::Root {
                path: "/api/",
                id: "getCoreAPIVersions",
                tag: "core",
                types: DISCOVERY_TYPES,
                definition: meta("APIVersions"),
            },
        ),
        (
            "apis".to_string(),
            PathSet::Root {
                path: "/apis/",
                id: "getAPIVersions",
                tag: "apis",
                types: DISCOVERY_TYPES,
                definition: meta("APIGroupList"),
            },
        ),
        (
            "version".to_string(),
            PathSet::Root {
                path: "/version/",
                id: "getCodeVersion",
                tag: "version",
                types: &[JSON],
                definition: "io.k8s.apimachinery.pkg.version.Info".to_string(),
            },
        ),
    ];
    let mut seen_groups = BTreeSet::new();
    for (group, version) in group_versions(registry) {
        if group.is_empty() {
            sets.push((
                format!("api/{version}"),
                PathSet::GroupVersion(group.to_string(), version.to_string()),
            ));
            continue;
        }
        if seen_groups.insert(group.clone()) {
            sets.push((format!("apis/{group}"), PathSet::Group(group.to_string())));
        }
        sets.push((
            format!("apis/{group}/{version}"),
            PathSet::GroupVersion(group.to_string(), version.to_string()),
        ));
    }
    sets
}

/// The v3 root document: where each document is, with its hash.
fn root_doc(v3: &HashMap<String, Doc>) -> Doc {
    let root: Map<String, Value> = v3
        .iter()
        .map(|(key, doc)| {
            (
                key.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={}", doc.hash)}),
            )
        })
        .collect();
    Doc::sorted(&json!({ "paths": root }))
}

pub(crate) fn build(registry: &Registry, schema: &Schema) -> Documents {
    let defs = DefSource::of(vec![schema]);
    let v3: HashMap<String, Doc> = path_sets(registry)
        .into_iter()
        .map(|(key, set)| (key, v3_document(set.items(registry, &defs), &defs)))
        .collect();
    let v2 = OnceLock::new();
    let _ = v2.set(v2_doc(registry, schema));
    Documents {
        v2,
        v2_proto: OnceLock::new(),
        v2_registry: None,
        v3_root: root_doc(&v3),
        v3,
    }
}

/// The documents of the built-in kinds, built once.
static BUILTIN: OnceLock<Arc<Documents>> = OnceLock::new();

/// A registry row by identity. A CRD's row is held weakly: the weak
/// reference keeps the row's allocation (never its data), so the address
/// cannot be reused by another row while a key names it, and a cache key
/// never keeps a deleted CRD's schemas alive.
#[derive(Clone)]
struct RowId {
    addr: usize,
    _pin: Option<std::sync::Weak<Resource>>,
}

impl PartialEq for RowId {
    fn eq(&self, other: &Self) -> bool {
        self.addr == other.addr
    }
}

/// The documents of the last set of custom resources seen, keyed by the
/// identity of its registry rows.
type CustomKey = Vec<RowId>;
static CUSTOM: std::sync::Mutex<Option<(CustomKey, Arc<Documents>)>> = std::sync::Mutex::new(None);

/// Each custom group-version's v3 document, keyed by the identity of its
/// rows: a CRD added elsewhere does not rebuild it.
type GvDocs = HashMap<(String, String), (CustomKey, Arc<Doc>)>;
static CUSTOM_GV: std::sync::Mutex<Option<GvDocs>> = std::sync::Mutex::new(None);

/// Each custom group's `apis/{group}` v3 document (it names only the
/// group), kept while the group has a CRD.
static CUSTOM_GROUPS: std::sync::Mutex<Option<HashMap<String, Arc<Doc>>>> =
    std::sync::Mutex::new(None);

fn builtin_documents() -> Arc<Documents> {
    Arc::clone(
        BUILTIN
            .get_or_init(|| Arc::new(build(&Registry::builtin(), apimachinery::schema::builtin()))),
    )
}

fn identity(rows: &[Row]) -> CustomKey {
    rows.iter()
        .map(|r| {
            let weak = match r {
                crate::registry::Shared::Owned(a) => Some(Arc::downgrade(a)),
                crate::registry::Shared::Static(_) => None,
            };
            RowId {
                addr: &**r as *const Resource as usize,
                _pin: weak,
            }
        })
        .collect()
}

/// The v3 document of one custom group-version, from its rows' own
/// definitions only.
fn custom_gv_doc(registry: &Registry, group: &str, version: &str, rows: &[Row]) -> Doc {
    // As in `v2_doc`: built for this document alone when not kept.
    let holds: Vec<_> = rows
        .iter()
        .filter_map(|r| r.custom.as_ref())
        .map(|c| c.schema_hold())
        .collect();
    let defs = DefSource::of(holds.iter().map(|(h, _)| h.get()).collect());
    v3_document(group_version_paths(registry, &defs, group, version), &defs)
}

fn documents_blocking(registry: Registry) -> Arc<Documents> {
    documents_counted(registry).0
}

/// [`documents_blocking`], and how many custom group-version documents
/// it built.
fn documents_counted(registry: Registry) -> (Arc<Documents>, usize) {
    let builtin = builtin_documents();
    let custom = custom_rows(&registry);
    if custom.is_empty() {
        // The documents of CRDs that are gone go with them.
        *CUSTOM.lock().unwrap_or_else(|e| e.into_inner()) = None;
        *CUSTOM_GV.lock().unwrap_or_else(|e| e.into_inner()) = None;
        *CUSTOM_GROUPS.lock().unwrap_or_else(|e| e.into_inner()) = None;
        return (builtin, 0);
    }
    let key = identity(&custom);
    let mut cache = CUSTOM.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((k, d)) = cache.as_ref() {
        if *k == key {
            return (Arc::clone(d), 0);
        }
    }
    // The built-in documents as they are, plus one document per custom
    // group-version (rebuilt only when its own rows changed; usually
    // built ahead by `spawn_warmer`) and per new group.
    let mut v3 = builtin.v3.clone();
    let (gv_docs, built) = custom_gv_docs(&registry, &custom);
    for ((group, version), doc) in gv_docs {
        v3.insert(format!("apis/{group}/{version}"), (*doc).clone());
    }
    for (group, doc) in custom_group_docs(&custom) {
        v3.entry(format!("apis/{group}"))
            .or_insert_with(|| (*doc).clone());
    }
    let docs = Arc::new(Documents {
        v2: OnceLock::new(),
        v2_proto: OnceLock::new(),
        v2_registry: Some(registry.clone()),
        v3_root: root_doc(&v3),
        v3,
    });
    *cache = Some((key, Arc::clone(&docs)));
    (docs, built)
}

/// The registry's rows of custom resources.
fn custom_rows(registry: &Registry) -> Vec<Row> {
    registry
        .all()
        .iter()
        .filter(|r| r.custom.is_some())
        .collect()
}

/// A custom group-version and its v3 document.
type GvDoc = ((String, String), Arc<Doc>);

/// Each custom group-version's v3 document, from [`CUSTOM_GV`] while its
/// rows are the same, else built now and kept there; and how many were
/// built.
fn custom_gv_docs(registry: &Registry, custom: &[Row]) -> (Vec<GvDoc>, usize) {
    let mut by_gv: BTreeMap<(String, String), Vec<Row>> = BTreeMap::new();
    for r in custom {
        by_gv
            .entry((r.group.to_string(), r.version.to_string()))
            .or_default()
            .push(r.clone());
    }
    let mut gv_cache = CUSTOM_GV.lock().unwrap_or_else(|e| e.into_inner());
    let gv_cache = gv_cache.get_or_insert_with(HashMap::new);
    gv_cache.retain(|k, _| by_gv.contains_key(k));
    let mut built = 0;
    let docs = by_gv
        .into_iter()
        .map(|(gv, rows)| {
            let id = identity(&rows);
            let doc = match gv_cache.get(&gv) {
                Some((k, d)) if *k == id => Arc::clone(d),
                _ => {
                    built += 1;
                    let d = Arc::new(custom_gv_doc(registry, &gv.0, &gv.1, &rows));
                    gv_cache.insert(gv.clone(), (id, Arc::clone(&d)));
                    d
                }
            };
            (gv, doc)
        })
        .collect();
    (docs, built)
}

/// Each custom group's `apis/{group}` document, from [`CUSTOM_GROUPS`] or
/// built now and kept there.
fn custom_group_docs(custom: &[Row]) -> Vec<(String, Arc<Doc>)> {
    let groups: BTreeSet<&str> = custom.iter().map(|r| &*r.group).collect();
    let mut cache = CUSTOM_GROUPS.lock().unwrap_or_else(|e| e.into_inner());
    let cache = cache.get_or_insert_with(HashMap::new);
    cache.retain(|g, _| groups.contains(g.as_str()));
    groups
        .into_iter()
        .map(|group| {
            let doc = cache.entry(group.to_string()).or_insert_with(|| {
                let builtin = DefSource::of(vec![apimachinery::schema::builtin()]);
                Arc::new(v3_document(vec![group_item(group)], &builtin))
            });
            (group.to_string(), Arc::clone(doc))
        })
        .collect()
}

/// Builds the documents now (they are otherwise built on first request);
/// takes a moment, so call it from a blocking context.
pub fn warm_up(registry: Registry) {
    built_ahead(documents_counted(registry).1);
}

/// Says (at debug level) that `built` documents were built before any
/// request asked for them.
fn built_ahead(built: usize) {
    if built > 0 {
        tracing::debug!(
            built,
            "OpenAPI v3 documents of custom group-versions built ahead of a request"
        );
    }
}

/// How long the warmer lets changes gather before a round.
const WARM_EVERY: Duration = Duration::from_millis(250);

/// Builds each custom group-version's v3 document as its CRD becomes
/// served or changes, as kube's CRD OpenAPI controller does, so that the
/// first `/openapi/v3` after many CRDs were created finds them built and
/// only writes the root. A round runs at most every [`WARM_EVERY`] and
/// builds only the group-versions whose rows changed; the whole set of
/// documents (and `/openapi/v2`) is still assembled on request.
pub fn spawn_warmer(registry: Registry) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut changes = registry.changes();
        while changes.changed().await.is_ok() {
            tokio::time::sleep(WARM_EVERY).await;
            changes.borrow_and_update();
            let r = registry.clone();
            let round = tokio::task::spawn_blocking(move || {
                let custom = custom_rows(&r);
                if custom.is_empty() {
                    return 0;
                }
                custom_group_docs(&custom);
                custom_gv_docs(&r, &custom).1
            });
            if let Ok(built) = round.await {
                built_ahead(built);
            }
        }
    })
}

async fn documents(registry: &Registry) -> Arc<Documents> {
    if registry.all().refs().all(|r| r.custom.is_none()) {
        if let Some(d) = BUILTIN.get() {
            return Arc::clone(d);
        }
    }
    // Building takes long enough not to run on a runtime thread.
    let r = registry.clone();
    match tokio::task::spawn_blocking(move || documents_blocking(r)).await {
        Ok(d) => d,
        Err(_) => documents_blocking(registry.clone()),
    }
}

// ---------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------

/// Whether the client takes JSON (protobuf, which kube also offers, is not
/// served here).
fn accepts_json(headers: &HeaderMap) -> bool {
    match headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
    {
        None | Some("") => true,
        Some(accept) => parse_accept(accept)
            .iter()
            .any(|c| c.q > 0.0 && c.matches("application", "json")),
    }
}

fn not_acceptable() -> Response {
    crate::error::status_response(&Status::not_acceptable(&[JSON]))
}

fn not_found() -> Response {
    crate::error::status_response(&Status::path_not_found())
}

fn set(r: &mut Response, name: header::HeaderName, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        r.headers_mut().insert(name, v);
    }
}

/// The document, or 304 when the client holds the current one.
fn conditional(doc: &Doc, headers: &HeaderMap) -> Response {
    conditional_as(doc, headers, JSON)
}

/// [`conditional`] for a body of type `content_type`. The stored gzip
/// bytes go as they are to a client that takes gzip (the compression
/// layer leaves a body with a `Content-Encoding` alone); any other gets
/// them decompressed as they are sent. The ETag is the JSON's either way,
/// as kube's is under its gzip filter.
fn conditional_as(doc: &Doc, headers: &HeaderMap, content_type: &str) -> Response {
    let etag = doc.etag();
    let current = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| etag_matches(v, &etag));
    let gzip = apimachinery::media::accepts_gzip(
        headers
            .get(header::ACCEPT_ENCODING)
            .and_then(|v| v.to_str().ok()),
    );
    let mut r = if current {
        StatusCode::NOT_MODIFIED.into_response()
    } else if gzip {
        let mut r = (StatusCode::OK, doc.gz.clone()).into_response();
        set(&mut r, header::CONTENT_TYPE, content_type);
        set(&mut r, header::CONTENT_ENCODING, "gzip");
        r
    } else {
        let mut r = Response::new(doc.json_stream());
        set(&mut r, header::CONTENT_TYPE, content_type);
        set(&mut r, header::CONTENT_LENGTH, &doc.len.to_string());
        r
    };
    set(&mut r, header::ETAG, &etag);
    vary_encoding(&mut r);
    r
}

/// Adds `Accept-Encoding` to `Vary` (after any value already there).
fn vary_encoding(r: &mut Response) {
    r.headers_mut()
        .append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
}

/// Sets `Vary: Accept` first, before `Accept-Encoding`.
fn vary_accept(r: &mut Response) {
    r.headers_mut().remove(header::VARY);
    set(r, header::VARY, "Accept");
    vary_encoding(r);
}

/// The `/openapi/v2` protobuf media type kube answers with; it also takes
/// the older name with `@`.
const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
const V2_PROTOBUF_SUBTYPES: [&str; 2] = [
    "com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "com.github.proto-openapi.spec.v2.v1.0+protobuf",
];

/// The encodings of `/openapi/v2`.
#[derive(Debug, PartialEq, Eq)]
enum V2Format {
    Json,
    Protobuf,
}

/// The first `Accept` clause (most preferred first) that names JSON or one
/// of the protobuf types, by wildcard or exactly; no header means JSON.
fn negotiate_v2(headers: &HeaderMap) -> Option<V2Format> {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .unwrap_or("*/*");
    parse_accept(accept)
        .iter()
        .filter(|c| c.q > 0.0)
        .find_map(|c| {
            if c.matches("application", "json") {
                Some(V2Format::Json)
            } else if V2_PROTOBUF_SUBTYPES
                .iter()
                .any(|sub| c.matches("application", sub))
            {
                Some(V2Format::Protobuf)
            } else {
                None
            }
        })
}

fn serve_v2(docs: &Documents, headers: &HeaderMap) -> Response {
    let mut r = match negotiate_v2(headers) {
        None => crate::error::status_response(&Status::not_acceptable(&[JSON, V2_PROTOBUF])),
        Some(V2Format::Json) => conditional(docs.v2(), headers),
        Some(V2Format::Protobuf) => match docs.v2_proto() {
            // The JSON's ETag, as kube does: `Vary: Accept` tells caches
            // the two apart.
            Ok(doc) => conditional_as(doc, headers, V2_PROTOBUF),
            Err(e) => {
                tracing::error!(error = %e, "encoding /openapi/v2 as protobuf");
                crate::error::status_response(&Status::internal(
                    "the OpenAPI v2 document could not be encoded as protobuf",
                ))
            }
        },
    };
    vary_accept(&mut r);
    r
}

/// The `hash` query parameter.
fn hash_param(query: Option<&str>) -> Option<&str> {
    query?
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == "hash")
        .map(|(_, v)| v)
        .filter(|v| !v.is_empty())
}

fn serve_v3_doc(
    docs: &Documents,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Response {
    let key = path.trim_matches('/');
    let Some(doc) = docs.v3.get(key) else {
        return not_found();
    };
    if !accepts_json(headers) {
        return not_acceptable();
    }
    let hash = hash_param(query);
    if let Some(h) = hash {
        if h != doc.hash {
            let mut r = StatusCode::MOVED_PERMANENTLY.into_response();
            set(
                &mut r,
                header::LOCATION,
                &format!("/openapi/v3/{key}?hash={}", doc.hash),
            );
            return r;
        }
    }
    let mut r = conditional(doc, headers);
    vary_accept(&mut r);
    if hash.is_some() {
        set(&mut r, header::CACHE_CONTROL, "public, immutable");
        if let Some(expires) = chrono::Utc::now().checked_add_days(chrono::Days::new(365)) {
            let expires = expires.format("%a, %d %b %Y %H:%M:%S GMT").to_string();
            set(&mut r, header::EXPIRES, &expires);
        }
    }
    r
}

/// What the OpenAPI endpoints serve: the registry's documents with the
/// remote APIServices' merged in. One per server (the router hands it to
/// [`v2`], [`v3_root`] and [`v3_doc`]); it keeps the last merge.
pub struct OpenApi {
    registry: Registry,
    remotes: Arc<Remotes>,
    /// The documents with the remotes' merged in, and the (registry,
    /// remotes) generations they were made for.
    merged: Mutex<Option<MergedDocs>>,
}

impl OpenApi {
    /// The documents of `registry`, with those of the extension servers in
    /// `remotes` merged in.
    pub fn new(registry: Registry, remotes: Arc<Remotes>) -> Self {
        OpenApi {
            registry,
            remotes,
            merged: Mutex::new(None),
        }
    }
}

/// `/openapi/v2`: JSON or gnostic's protobuf `Document`, else 406.
pub async fn v2(State(s): State<Arc<OpenApi>>, headers: HeaderMap) -> Response {
    serve_v2(&*served(&s).await, &headers)
}

/// `/openapi/v3`: where each group-version's document is, with its hash.
pub async fn v3_root(State(s): State<Arc<OpenApi>>, headers: HeaderMap) -> Response {
    conditional(&served(&s).await.v3_root, &headers)
}

/// Merged documents and the (registry, remotes) generations they are of.
type MergedDocs = ((u64, u64), Arc<Documents>);

/// The documents of this server with the extension servers' merged in
/// (each remote group-version's v3 document, and its v2 paths and
/// definitions), rebuilt when the local documents or the remotes change;
/// `s` keeps the last ones.
async fn served(s: &Arc<OpenApi>) -> Arc<Documents> {
    let local = documents(&s.registry).await;
    let snapshot = s.remotes.snapshot();
    if snapshot
        .values()
        .all(|r| r.openapi.v3.is_none() && r.openapi.v2.is_none())
    {
        return local;
    }
    let key = (s.registry.generation(), s.remotes.generation());
    if let Some((k, d)) = s.merged.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        if *k == key {
            return Arc::clone(d);
        }
    }
    // Merging re-encodes whole documents: off the runtime's threads.
    let fallback = Arc::clone(&local);
    let s = Arc::clone(s);
    tokio::task::spawn_blocking(move || merge(key, &local, &snapshot, &s.merged))
        .await
        .unwrap_or(fallback)
}

/// [`served`]'s documents for `key`, built and remembered in `merged`.
fn merge(
    key: (u64, u64),
    local: &Documents,
    snapshot: &BTreeMap<(String, String), Remote>,
    merged: &Mutex<Option<MergedDocs>>,
) -> Arc<Documents> {
    let mut merged = merged.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((k, d)) = merged.as_ref() {
        if *k == key {
            return Arc::clone(d);
        }
    }
    let mut v3 = local.v3.clone();
    let mut v2_extra: Vec<(String, Arc<Value>)> = Vec::new();
    for r in snapshot.values() {
        let key = format!("apis/{}/{}", r.group, r.version);
        if let Some(doc) = &r.openapi.v3 {
            v3.entry(key.clone()).or_insert_with(|| Doc::new(doc));
        }
        if let Some(doc) = &r.openapi.v2 {
            v2_extra.push((format!("/{key}"), Arc::clone(doc)));
        }
    }
    let mut v2: Value = serde_json::from_slice(&local.v2().json()).unwrap_or_default();
    for (prefix, doc) in &v2_extra {
        merge_v2(&mut v2, prefix, doc);
    }
    let docs = Arc::new(Documents {
        v2: OnceLock::from(Doc::sorted(&v2)),
        v2_proto: OnceLock::new(),
        v2_registry: None,
        v3_root: root_doc(&v3),
        v3,
    });
    *merged = Some((key, Arc::clone(&docs)));
    docs
}

/// Adds an extension's v2 paths under `prefix` (its group-version) and the
/// definitions this document does not have already.
fn merge_v2(into: &mut Value, prefix: &str, extension: &Value) {
    if let (Some(paths), Some(theirs)) = (
        into.get_mut("paths").and_then(Value::as_object_mut),
        extension.get("paths").and_then(Value::as_object),
    ) {
        for (path, item) in theirs {
            if path == prefix || path.starts_with(&format!("{prefix}/")) {
                paths.entry(path.clone()).or_insert_with(|| item.clone());
            }
        }
    }
    if let Some(theirs) = extension.get("definitions").and_then(Value::as_object) {
        if let Some(defs) = into
            .as_object_mut()
            .map(|o| o.entry("definitions").or_insert_with(|| json!({})))
            .and_then(Value::as_object_mut)
        {
            for (name, def) in theirs {
                defs.entry(name.clone()).or_insert_with(|| def.clone());
            }
        }
    }
}

/// `/openapi/v3/{api/v1 | apis/G/V | ...}`. With `?hash=` the answer is
/// immutable; a stale hash is redirected to the current one.
pub async fn v3_doc(
    State(s): State<Arc<OpenApi>>,
    Path(p): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    serve_v3_doc(&*served(&s).await, &p, query.as_deref(), &headers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::to_bytes;

    fn docs() -> Arc<Documents> {
        documents_blocking(Registry::builtin())
    }

    fn parse(doc: &Doc) -> Value {
        serde_json::from_slice(&doc.json()).unwrap()
    }

    fn v3(key: &str) -> Value {
        parse(&docs().v3[key])
    }

    fn param_names(op: &Value) -> Vec<(String, String)> {
        op["parameters"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|p| {
                        (
                            p["in"].as_str().unwrap().to_string(),
                            p["name"].as_str().unwrap().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn root_lists_every_document_with_its_hash() {
        let root = parse(&docs().v3_root);
        let paths = root["paths"].as_object().unwrap();
        let keys: Vec<&str> = paths.keys().map(String::as_str).collect();
        for k in [
            "api",
            "api/v1",
            "apis",
            "apis/apps",
            "apis/apps/v1",
            "apis/autoscaling/v2",
            "version",
        ] {
            assert!(keys.contains(&k), "{k} missing from {keys:?}");
        }
        assert_eq!(keys.len(), docs().v3.len());
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        for (k, v) in paths {
            let url = v["serverRelativeURL"].as_str().unwrap();
            assert_eq!(url, format!("/openapi/v3/{k}?hash={}", docs().v3[k].hash));
        }
    }

    #[test]
    fn deployment_patch_declares_field_validation() {
        let doc = v3("apis/apps/v1");
        assert_eq!(doc["openapi"], "3.0.0");
        assert_eq!(doc["info"]["title"], "Kubernetes");
        let item = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"];
        let patch = &item["patch"];
        assert_eq!(patch["operationId"], "patchAppsV1NamespacedDeployment");
        assert_eq!(patch["x-kubernetes-action"], "patch");
        assert_eq!(
            patch["x-kubernetes-group-version-kind"],
            json!({"group": "apps", "kind": "Deployment", "version": "v1"})
        );
        let q = |n: &str| ("query".to_string(), n.to_string());
        assert_eq!(
            param_names(patch),
            [
                q("dryRun"),
                q("fieldManager"),
                q("fieldValidation"),
                q("force")
            ]
        );
        assert_eq!(
            patch["parameters"][2],
            json!({"in": "query", "name": "fieldValidation", "schema": {"type": "string", "uniqueItems": true}})
        );
        let content = patch["requestBody"]["content"].as_object().unwrap();
        assert!(content.contains_key("application/strategic-merge-patch+json"));
        assert_eq!(
            content["application/apply-patch+yaml"]["schema"]["$ref"],
            "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
        );
        assert_eq!(
            patch["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/io.k8s.api.apps.v1.Deployment"
        );
        assert_eq!(
            patch["responses"]["401"],
            json!({"description": "Unauthorized"})
        );
        let p = |n: &str| ("path".to_string(), n.to_string());
        assert_eq!(param_names(item), [p("name"), p("namespace"), q("pretty")]);
        for method in ["post", "put"] {
            let op = if method == "post" {
                &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments"]["post"]
            } else {
                &item["put"]
            };
            assert_eq!(
                param_names(op),
                [q("dryRun"), q("fieldManager"), q("fieldValidation")]
            );
            assert!(op["requestBody"]["content"]["*/*"].is_object());
        }
        // kubectl takes the first PATCH of a kind it meets: every one must do.
        for (path, item) in doc["paths"].as_object().unwrap() {
            if let Some(patch) = item.get("patch") {
                assert!(param_names(patch).contains(&q("fieldValidation")), "{path}");
            }
        }
        let scale = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"];
        assert_eq!(
            scale["get"]["operationId"],
            "readAppsV1NamespacedDeploymentScale"
        );
        assert_eq!(
            scale["put"]["x-kubernetes-group-version-kind"],
            json!({"group": "autoscaling", "kind": "Scale", "version": "v1"})
        );
    }

    fn assert_refs_resolve(key: &str, doc: &Value, prefix: &str, defs: &Value) {
        let mut refs = BTreeSet::new();
        collect_refs(doc, prefix, &mut refs);
        assert!(!refs.is_empty(), "{key}");
        for r in &refs {
            assert!(defs.get(r).is_some(), "{key}: {r} does not resolve");
        }
        let mut foreign = BTreeSet::new();
        collect_refs(doc, "#/", &mut foreign);
        assert_eq!(foreign.len(), refs.len(), "{key}: a $ref outside {prefix}");
    }

    #[test]
    fn every_reference_resolves() {
        for (key, doc) in &docs().v3 {
            let doc = parse(doc);
            assert_refs_resolve(key, &doc, SCHEMAS_REF, &doc["components"]["schemas"]);
        }
        let v2 = parse(docs().v2());
        assert_eq!(v2["swagger"], "2.0");
        assert_refs_resolve("v2", &v2, DEFINITIONS_REF, &v2["definitions"]);
    }

    /// The index of a source of several schemas answers as asking each
    /// schema in turn does: the first schema that has a name or a
    /// group-version-kind wins, shared definitions after a schema's own.
    #[test]
    fn def_source_index_answers_as_the_schemas_in_order() {
        let kind = |g: &str, v: &str, k: &str, marker: &str| {
            json!({"x-kubernetes-group-version-kind": [{"group": g, "version": v, "kind": k}],
                   "description": marker})
        };
        let map = |v: Value| v.as_object().unwrap().clone();
        let shared = Arc::new(map(json!({"common.Meta": {"description": "shared"},
                                         "a.Widget": {"description": "shared widget"}})));
        let first = Schema::with_shared(
            map(json!({"a.Widget": kind("a", "v1", "Widget", "first"),
                       "b.Gadget": kind("b", "v1", "Gadget", "first")})),
            Some(Arc::clone(&shared)),
        );
        let second = Schema::with_shared(
            map(json!({"a.Widget": kind("a", "v1", "Widget", "second"),
                       "a.Widget2": kind("a", "v2", "Widget", "second"),
                       "common.Meta": {"description": "own"},
                       "b.Gadget.copy": kind("b", "v1", "Gadget", "second")})),
            None,
        );
        let builtin = apimachinery::schema::builtin();
        let schemas = [builtin, &first, &second];
        let mut defs = DefSource::of(vec![builtin]);
        defs.push(&first);
        defs.push(&second);
        let mut names: Vec<&str> = schemas
            .iter()
            .flat_map(|s| s.all_definitions().map(|(n, _)| n.as_str()))
            .collect();
        names.push("no.such.Definition");
        for name in names {
            let in_order = schemas
                .iter()
                .find_map(|s| s.by_name(name))
                .map(|t| t.raw());
            assert_eq!(defs.get(name), in_order, "{name}");
        }
        let mut gvks: Vec<(&str, &str, &str)> = schemas
            .iter()
            .flat_map(|s| s.gvks().map(|(g, v, k, _)| (g, v, k)))
            .collect();
        gvks.push(("a", "v3", "Widget"));
        for (g, v, k) in gvks {
            let in_order = schemas
                .iter()
                .find_map(|s| s.definition_name_for_gvk(g, v, k));
            assert_eq!(defs.name_for_gvk(g, v, k), in_order, "{g}/{v} {k}");
        }
        assert_eq!(defs.get("a.Widget").unwrap()["description"], "first");
        assert_eq!(defs.get("common.Meta").unwrap()["description"], "shared");
        assert_eq!(defs.name_for_gvk("b", "v1", "Gadget"), Some("b.Gadget"));
        assert_eq!(defs.name_for_gvk("a", "v2", "Widget"), Some("a.Widget2"));
    }

    #[test]
    fn schemas_keep_kube_extensions() {
        let doc = v3("apis/apps/v1");
        let schemas = &doc["components"]["schemas"];
        assert_eq!(
            schemas["io.k8s.api.apps.v1.Deployment"]["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
        );
        assert_eq!(
            schemas["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["template"]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.PodTemplateSpec"
        );
        let containers = &schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(containers["x-kubernetes-list-type"], "map");
        assert_eq!(schemas[INT_OR_STRING]["format"], "int-or-string");
        assert!(schemas[INT_OR_STRING].get("type").is_none());
        assert!(schemas[QUANTITY]["oneOf"].is_array());
        // Only what the paths reach.
        assert!(schemas.get("io.k8s.api.batch.v1.Job").is_none());
        // The small documents.
        let version = v3("version");
        assert_eq!(
            version["paths"]["/version/"]["get"]["operationId"],
            "getCodeVersion"
        );
        assert!(
            version["components"]["schemas"]["io.k8s.apimachinery.pkg.version.Info"].is_object()
        );
        let group = v3("apis/rbac.authorization.k8s.io");
        let op = &group["paths"]["/apis/rbac.authorization.k8s.io/"]["get"];
        assert_eq!(op["operationId"], "getRbacAuthorizationAPIGroup");
        assert_eq!(op["tags"], json!(["rbacAuthorization"]));
    }

    /// What `kubectl explain` needs: a collection path with the kind's GVK
    /// and a schema carrying the same GVK.
    #[test]
    fn explain_finds_every_kind() {
        for r in Registry::builtin().all().iter() {
            let key = if r.group.is_empty() {
                format!("api/{}", r.version)
            } else {
                format!("apis/{}/{}", r.group, r.version)
            };
            let doc = v3(&key);
            let prefix = format!("/{key}");
            let candidates = [
                format!("{prefix}/{}", r.plural),
                format!("{prefix}/namespaces/{{namespace}}/{}", r.plural),
            ];
            let gvk = json!({"group": r.group, "kind": r.kind, "version": r.version});
            // Create-only kinds have no list: their POST carries the GVK.
            let verb = if r.virtual_create.is_some() {
                "post"
            } else {
                "get"
            };
            let found = candidates
                .iter()
                .any(|p| doc["paths"][p][verb]["x-kubernetes-group-version-kind"] == gvk);
            assert!(found, "no list path for {} in {key}", r.kind);
            let schema = doc["components"]["schemas"]
                .as_object()
                .unwrap()
                .values()
                .any(|s| {
                    s["x-kubernetes-group-version-kind"]
                        .as_array()
                        .is_some_and(|l| l.contains(&gvk))
                });
            assert!(schema, "no schema for {} in {key}", r.kind);
        }
    }

    /// Drops documentation and resolves shared parameters, for comparison.
    fn normalize(v: &Value, shared: &Value) -> Value {
        match v {
            Value::Object(m) => {
                if let Some(name) = m
                    .get("$ref")
                    .and_then(Value::as_str)
                    .and_then(|r| r.strip_prefix("#/parameters/"))
                {
                    return normalize(&shared[name], shared);
                }
                let mut out = Map::new();
                for (k, v) in m {
                    if k == "description" && v.is_string() {
                        continue;
                    }
                    let mut v = normalize(v, shared);
                    if k == "parameters" {
                        if let Value::Array(a) = &mut v {
                            a.sort_by_key(|p| (p["in"].to_string(), p["name"].to_string()));
                        }
                    }
                    out.insert(k.clone(), v);
                }
                Value::Object(out)
            }
            Value::Array(a) => Value::Array(a.iter().map(|v| normalize(v, shared)).collect()),
            other => other.clone(),
        }
    }

    /// Whether an upstream path belongs to a resource (or subresource) we
    /// serve.
    fn upstream_path_is_ours(path: &str, registry: &Registry) -> bool {
        for (group, version) in group_versions(registry) {
            let gv = GroupVersion::new(&group, &version);
            let Some(rest) = path.strip_prefix(&format!("{}/", gv.prefix)) else {
                continue;
            };
            let rest = rest.strip_prefix("watch/").unwrap_or(rest);
            let rest = rest.strip_prefix("namespaces/{namespace}/").unwrap_or(rest);
            let segs: Vec<&str> = rest.split('/').collect();
            let Some(r) = registry.lookup(&group, &version, segs[0]) else {
                return false;
            };
            return match segs.get(2) {
                None => true,
                Some(sub) => {
                    (segs.len() == 3 || segs.len() == 4 && segs[3] == "{path}")
                        && r.subresource(sub).is_some()
                }
            };
        }
        false
    }

    #[test]
    fn paths_match_upstream_swagger() {
        let file = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/k8s-api/openapi/swagger.json"
        );
        let Ok(text) = std::fs::read_to_string(file) else {
            eprintln!("skipped: {file} is not there");
            return;
        };
        let upstream: Value = serde_json::from_str(&text).unwrap();
        let shared = &upstream["parameters"];
        let ours = parse(docs().v2());
        let ours = ours["paths"].as_object().unwrap();
        let registry = Registry::builtin();
        for (path, item) in ours {
            let theirs = &upstream["paths"][path];
            assert!(theirs.is_object(), "{path} is not upstream");
            assert_eq!(normalize(item, shared), normalize(theirs, shared), "{path}");
        }
        let mut missing = Vec::new();
        for path in upstream["paths"].as_object().unwrap().keys() {
            if upstream_path_is_ours(path, &registry) && !ours.contains_key(path) {
                missing.push(path.clone());
            }
        }
        assert!(missing.is_empty(), "not published: {missing:?}");
    }

    async fn read(r: Response) -> (StatusCode, HeaderMap, Bytes) {
        let (parts, body) = r.into_parts();
        (
            parts.status,
            parts.headers,
            to_bytes(body, usize::MAX).await.unwrap(),
        )
    }

    fn accept(value: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_static(value));
        h
    }

    #[tokio::test]
    async fn v3_document_caching() {
        let d = &*docs();
        let hash = d.v3["apis/apps/v1"].hash.clone();
        let query = format!("hash={hash}");
        let (code, h, body) =
            read(serve_v3_doc(d, "apis/apps/v1", Some(&query), &accept(JSON))).await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(h[header::CONTENT_TYPE], JSON);
        assert_eq!(h[header::CACHE_CONTROL], "public, immutable");
        assert!(h.contains_key(header::EXPIRES));
        assert_eq!(h[header::ETAG], format!("\"{hash}\"").as_str());
        assert_eq!(body, d.v3["apis/apps/v1"].json());
        // Without a hash: no caching promise.
        let (code, h, _) = read(serve_v3_doc(d, "/apis/apps/v1/", None, &HeaderMap::new())).await;
        assert_eq!(code, StatusCode::OK);
        assert!(!h.contains_key(header::CACHE_CONTROL));
        // A stale hash is redirected to the current one.
        let (code, h, _) = read(serve_v3_doc(
            d,
            "apis/apps/v1",
            Some("hash=OLD"),
            &HeaderMap::new(),
        ))
        .await;
        assert_eq!(code, StatusCode::MOVED_PERMANENTLY);
        assert_eq!(
            h[header::LOCATION],
            format!("/openapi/v3/apis/apps/v1?hash={hash}").as_str()
        );
        // Conditional GET.
        let mut inm = accept("application/json");
        inm.insert(
            header::IF_NONE_MATCH,
            HeaderValue::from_str(&format!("\"{hash}\"")).unwrap(),
        );
        let (code, _, body) = read(serve_v3_doc(d, "apis/apps/v1", None, &inm)).await;
        assert_eq!(code, StatusCode::NOT_MODIFIED);
        assert!(body.is_empty());
    }

    #[tokio::test]
    async fn v3_negotiation_and_unknown_documents() {
        let d = &*docs();
        let proto = "application/com.github.proto-openapi.spec.v3@v1.0+protobuf";
        let (code, _, body) = read(serve_v3_doc(d, "api/v1", None, &accept(proto))).await;
        assert_eq!(code, StatusCode::NOT_ACCEPTABLE);
        let status: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status["reason"], "NotAcceptable");
        let both =
            "application/com.github.proto-openapi.spec.v3@v1.0+protobuf, application/json;q=0.9";
        assert_eq!(
            read(serve_v3_doc(d, "api/v1", None, &accept(both))).await.0,
            StatusCode::OK
        );
        assert_eq!(
            read(serve_v3_doc(d, "api/v1", None, &accept("*/*")))
                .await
                .0,
            StatusCode::OK
        );
        for missing in ["apis/apps/v2", "apis/nope", "", "api/v1/pods"] {
            let (code, _, _) = read(serve_v3_doc(d, missing, None, &HeaderMap::new())).await;
            assert_eq!(code, StatusCode::NOT_FOUND, "{missing}");
        }
    }

    #[tokio::test]
    async fn v2_negotiation() {
        let d = &*docs();
        let (code, h, body) = read(serve_v2(d, &accept("application/json"))).await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(h[header::CONTENT_TYPE], JSON);
        let json_etag = h[header::ETAG].clone();
        // Both protobuf names, answered with the newer one and the JSON's
        // ETag; a held ETag gets 304.
        for proto in [
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
            "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf, application/json",
        ] {
            let (code, h, pb) = read(serve_v2(d, &accept(proto))).await;
            assert_eq!(code, StatusCode::OK, "{proto}");
            assert_eq!(h[header::CONTENT_TYPE], V2_PROTOBUF);
            assert_eq!(h[header::ETAG], json_etag);
            assert_eq!(h[header::VARY], "Accept");
            assert!(pb.starts_with(b"\x0a\x032.0"), "swagger: 2.0 first");
        }
        let mut held = accept(V2_PROTOBUF);
        held.insert(header::IF_NONE_MATCH, json_etag);
        assert_eq!(read(serve_v2(d, &held)).await.0, StatusCode::NOT_MODIFIED);
        for other in ["application/yaml", "application/vnd.kubernetes.protobuf"] {
            let (code, _, body) = read(serve_v2(d, &accept(other))).await;
            assert_eq!(code, StatusCode::NOT_ACCEPTABLE, "{other}");
            let status: Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(status["kind"], "Status");
        }
        assert_eq!(
            negotiate_v2(&accept("application/json;q=0.5, application/com.github.proto-openapi.spec.v2.v1.0+protobuf")),
            Some(V2Format::Protobuf)
        );
        assert_eq!(negotiate_v2(&accept("*/*")), Some(V2Format::Json));
        assert_eq!(negotiate_v2(&HeaderMap::new()), Some(V2Format::Json));
        let doc: Value = serde_json::from_slice(&body).unwrap();
        assert!(
            doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/status"]["patch"].is_object()
        );
        assert!(doc["paths"]["/apis/"]["get"].is_object());
        let (code, h, _) = read(conditional(&d.v3_root, &HeaderMap::new())).await;
        assert_eq!(code, StatusCode::OK);
        assert!(h.contains_key(header::ETAG));
    }

    #[test]
    fn names_follow_kube() {
        assert_eq!(group_camel(""), "Core");
        assert_eq!(
            group_camel("rbac.authorization.k8s.io"),
            "RbacAuthorization"
        );
        assert_eq!(
            group_camel("flowcontrol.apiserver.k8s.io"),
            "FlowcontrolApiserver"
        );
        let gv = GroupVersion::new("networking.k8s.io", "v1beta1");
        assert_eq!(gv.id, "NetworkingV1beta1");
        assert_eq!(gv.tag, "networking_v1beta1");
        assert_eq!(gv.prefix, "/apis/networking.k8s.io/v1beta1");
        assert_eq!(hash_param(Some("a=b&hash=XY")), Some("XY"));
        assert_eq!(hash_param(Some("hash=")), None);
        assert_eq!(hash_param(None), None);
    }
}
