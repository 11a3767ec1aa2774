//! API discovery, as kube-apiserver answers it.
//!
//! Legacy (unaggregated) documents: `/api` (`APIVersions`), `/apis`
//! (`APIGroupList`), `/apis/{group}` (`APIGroup`), `/api/v1` and
//! `/apis/{group}/{version}` (`APIResourceList`, one entry per resource and
//! per subresource). Aggregated discovery (`apidiscovery.k8s.io/v2`
//! `APIGroupDiscoveryList`) answers `/api` and `/apis` when the `Accept`
//! header asks for it, with an `ETag` and `304 Not Modified`.
//!
//! Every document is encoded once per registry generation (the registry
//! changes when CRDs are established or removed) and served as shared
//! bytes: JSON when the generation is built, protobuf
//! (`application/vnd.kubernetes.protobuf`, the `k8s\0` envelope around the
//! meta/v1 or apidiscovery/v2 message) on the first request for it.
//!
//! Below the state: it reads the registry and the aggregator's remotes
//! table, nothing above them.

use crate::aggregator::{Remote, Remotes};
use crate::registry::{Registry, Resource, Row, Shared, Str, Subresource};
use apimachinery::request::ApiPath;
pub(crate) use apimachinery::version::{compare_versions, content_hash};
use apimachinery::Status;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{json, Value};
use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

/// The media type of an aggregated discovery response (and the one a client
/// asks for).
pub const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
/// The same in protobuf.
pub const AGGREGATED_PROTOBUF: &str =
    "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// The address `/api` advertises for clients of any network until the server
/// is told its real one with [`Discovery::with_server_address`].
pub const DEFAULT_SERVER_ADDRESS: &str = "127.0.0.1:8080";

/// Media types a discovery document can be encoded in here.
const SUPPORTED: &[&str] = &["application/json", PROTOBUF];

/// The protobuf messages of the documents.
const MSG_API_VERSIONS: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.APIVersions";
const MSG_GROUP_LIST: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.APIGroupList";
const MSG_GROUP: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.APIGroup";
const MSG_RESOURCE_LIST: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.APIResourceList";
const MSG_AGGREGATED: &str = "k8s.io.api.apidiscovery.v2.APIGroupDiscoveryList";

/// The two encodings of a discovery document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    Json,
    Protobuf,
}

impl Wire {
    /// The encoding a clause names (`*/*` and `application/*`: JSON).
    fn of(c: &MediaRange) -> Option<Wire> {
        if c.matches("application", "json") {
            Some(Wire::Json)
        } else if c.matches("application", "vnd.kubernetes.protobuf") {
            Some(Wire::Protobuf)
        } else {
            None
        }
    }
}

/// One document: its JSON, and its protobuf once a client asks for it.
struct Encoded {
    json: Bytes,
    message: &'static str,
    protobuf: std::sync::OnceLock<Option<Bytes>>,
}

impl Encoded {
    fn new(doc: &Value, message: &'static str) -> Self {
        Encoded {
            json: encode(doc),
            message,
            protobuf: std::sync::OnceLock::new(),
        }
    }

    /// The `k8s\0` envelope, typed as the JSON is (`/api`'s APIVersions
    /// carries no apiVersion), around the document's message; `None` (a
    /// bug, logged) when it cannot be encoded.
    fn protobuf(&self) -> Option<&Bytes> {
        self.protobuf
            .get_or_init(|| {
                let doc: Value = serde_json::from_slice(&self.json).ok()?;
                let text = |k: &str| doc.get(k).and_then(Value::as_str).unwrap_or("");
                match k8s_proto::encode_from_json(self.message, &doc) {
                    Ok(raw) => Some(Bytes::from(k8s_proto::encode_unknown(
                        text("apiVersion"),
                        text("kind"),
                        &raw,
                    ))),
                    Err(e) => {
                        tracing::error!(error = %e, message = self.message, "discovery document in protobuf");
                        None
                    }
                }
            })
            .as_ref()
    }

    /// The 200 answer in `wire`, or the 500 of a document that would not
    /// encode.
    fn respond(&self, wire: Wire, aggregated: bool) -> Response {
        let (body, content_type) = match wire {
            Wire::Json if aggregated => (self.json.clone(), AGGREGATED_CONTENT_TYPE),
            Wire::Json => (self.json.clone(), "application/json"),
            Wire::Protobuf => match self.protobuf() {
                Some(body) if aggregated => (body.clone(), AGGREGATED_PROTOBUF),
                Some(body) => (body.clone(), PROTOBUF),
                None => {
                    return crate::error::status_response(&Status::internal(
                        "the discovery document could not be encoded as protobuf",
                    ))
                }
            },
        };
        bytes_response(StatusCode::OK, content_type, body)
    }
}

const RESOURCE_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
const SUBRESOURCE_VERBS: &[&str] = &["get", "patch", "update"];

/// One encoded aggregated document with its (quoted) entity tag, computed
/// from the JSON and shared by both encodings (`Vary: Accept`).
struct Tagged {
    doc: Encoded,
    etag: String,
}

/// Discovery documents of one registry generation, encoded once.
struct Docs {
    /// The registry's generation and the remote APIServices' one.
    generation: (u64, u64),
    /// `/api`, `/api/v1`, `/apis`, `/apis/{group}`, `/apis/{group}/{version}`
    /// keyed by that path.
    legacy: HashMap<String, Encoded>,
    aggregated_core: Tagged,
    aggregated_groups: Tagged,
}

impl Docs {
    fn build(registry: &Registry, server_address: &str, remotes: &Remotes) -> Docs {
        let generation = (registry.generation(), remotes.generation());
        let listed = listed_groups(registry, &remotes.snapshot());
        let mut legacy = HashMap::new();
        legacy.insert(
            "/api".to_string(),
            Encoded::new(&api_versions(registry, server_address), MSG_API_VERSIONS),
        );
        legacy.insert(
            "/apis".to_string(),
            Encoded::new(&group_list(&listed), MSG_GROUP_LIST),
        );
        for g in &listed {
            legacy.insert(
                format!("/apis/{}", g.name),
                Encoded::new(&api_group(g), MSG_GROUP),
            );
        }
        for (group, version) in group_versions(registry) {
            legacy.insert(
                discovery_path(&group, &version),
                Encoded::new(
                    &resource_list(registry, &group, &version),
                    MSG_RESOURCE_LIST,
                ),
            );
        }
        Docs {
            generation,
            legacy,
            aggregated_core: tagged(&aggregated_core(registry)),
            aggregated_groups: tagged(&aggregated_groups(registry, &listed)),
        }
    }
}

/// Discovery documents. They are encoded once per registry generation and
/// served as shared bytes; a request that finds the registry changed (a
/// CRD was established or removed) rebuilds them first.
pub struct Discovery {
    registry: Registry,
    /// The remote APIServices (the aggregator's table), merged in.
    remotes: Arc<Remotes>,
    server_address: String,
    docs: std::sync::RwLock<Arc<Docs>>,
    /// Serializes rebuilds so that a burst of requests after a change
    /// builds once.
    rebuilding: std::sync::Mutex<()>,
}

impl Discovery {
    pub fn new(registry: Registry) -> Self {
        let remotes = Arc::new(Remotes::default());
        let docs = Docs::build(&registry, DEFAULT_SERVER_ADDRESS, &remotes);
        Discovery {
            registry,
            remotes,
            server_address: DEFAULT_SERVER_ADDRESS.to_string(),
            docs: std::sync::RwLock::new(Arc::new(docs)),
            rebuilding: std::sync::Mutex::new(()),
        }
    }

    /// Sets the address `/api` advertises in `serverAddressByClientCIDRs`
    /// (kube-apiserver's advertise address, `host:port`).
    pub fn with_server_address(mut self, address: &str) -> Self {
        self.server_address = address.to_string();
        let docs = Docs::build(&self.registry, address, &self.remotes);
        self.docs = std::sync::RwLock::new(Arc::new(docs));
        self
    }

    /// The remote group-versions discovery merges in.
    pub fn remotes(&self) -> &Arc<Remotes> {
        &self.remotes
    }

    /// The documents of the registry's (and the remotes') current
    /// generation.
    fn current(&self) -> Arc<Docs> {
        let generation = (self.registry.generation(), self.remotes.generation());
        let docs = Arc::clone(&self.docs.read().unwrap_or_else(|e| e.into_inner()));
        if docs.generation == generation {
            return docs;
        }
        let _one = self.rebuilding.lock().unwrap_or_else(|e| e.into_inner());
        let docs = Arc::clone(&self.docs.read().unwrap_or_else(|e| e.into_inner()));
        if docs.generation == (self.registry.generation(), self.remotes.generation()) {
            return docs;
        }
        let fresh = Arc::new(Docs::build(
            &self.registry,
            &self.server_address,
            &self.remotes,
        ));
        *self.docs.write().unwrap_or_else(|e| e.into_inner()) = Arc::clone(&fresh);
        fresh
    }

    /// Answers a discovery path; `accept` selects aggregated discovery.
    pub fn serve(&self, path: &ApiPath, accept: Option<&str>) -> Response {
        self.serve_conditional(path, accept, None)
    }

    /// Answers a discovery path from the request headers, honouring
    /// `If-None-Match` on aggregated documents.
    pub fn serve_request(&self, path: &ApiPath, headers: &HeaderMap) -> Response {
        let text = |name| {
            headers
                .get(name)
                .and_then(|v: &HeaderValue| v.to_str().ok())
        };
        self.serve_conditional(path, text(header::ACCEPT), text(header::IF_NONE_MATCH))
    }

    /// Answers a discovery path. `if_none_match` is the request's
    /// `If-None-Match`, which turns a current aggregated document into 304.
    pub fn serve_conditional(
        &self,
        path: &ApiPath,
        accept: Option<&str>,
        if_none_match: Option<&str>,
    ) -> Response {
        let docs = self.current();
        let aggregated = match path {
            ApiPath::LegacyVersions => Some(&docs.aggregated_core),
            ApiPath::Groups => Some(&docs.aggregated_groups),
            _ => None,
        };
        if let Some(doc) = aggregated {
            if let Some(wire) = aggregated_wire(accept) {
                return aggregated_response(doc, wire, if_none_match);
            }
        }
        let key = match path {
            ApiPath::LegacyVersions => "/api".to_string(),
            ApiPath::Groups => "/apis".to_string(),
            ApiPath::Group { group } => format!("/apis/{group}"),
            ApiPath::ResourceList { group, version } => discovery_path(group, version),
            ApiPath::Resource(_) => return not_found(),
        };
        let Some(doc) = docs.legacy.get(&key) else {
            return not_found();
        };
        let Some(wire) = plain_wire(accept) else {
            return crate::error::status_response(&Status::not_acceptable(SUPPORTED));
        };
        doc.respond(wire, false)
    }
}

fn not_found() -> Response {
    crate::error::status_response(&Status::path_not_found())
}

fn bytes_response(code: StatusCode, content_type: &'static str, body: Bytes) -> Response {
    let mut r = (code, body).into_response();
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn aggregated_response(doc: &Tagged, wire: Wire, if_none_match: Option<&str>) -> Response {
    let mut r = if if_none_match.is_some_and(|v| etag_matches(v, &doc.etag)) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let r = doc.doc.respond(wire, true);
        if r.status() != StatusCode::OK {
            return r;
        }
        r
    };
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&doc.etag) {
        h.insert(header::ETAG, v);
    }
    h.insert(header::VARY, HeaderValue::from_static("Accept"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("public"));
    r
}

/// Whether an `If-None-Match` value names `etag` (a quoted tag), or is `*`.
pub(crate) fn etag_matches(if_none_match: &str, etag: &str) -> bool {
    if_none_match.split(',').map(str::trim).any(|candidate| {
        candidate == "*" || candidate.strip_prefix("W/").unwrap_or(candidate) == etag
    })
}

/// Compact JSON with the trailing newline kube's encoder writes.
fn encode(doc: &Value) -> Bytes {
    let mut out = serde_json::to_vec(doc).unwrap_or_default();
    out.push(b'\n');
    Bytes::from(out)
}

fn tagged(doc: &Value) -> Tagged {
    let doc = Encoded::new(doc, MSG_AGGREGATED);
    let etag = format!("\"{}\"", content_hash(&doc.json));
    Tagged { doc, etag }
}

fn discovery_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    }
}

// ---------------------------------------------------------------------------
// Ordering of groups and versions
// ---------------------------------------------------------------------------

/// kube-apiserver's group priorities (`GroupPriorityMinimum` of the built-in
/// APIServices): discovery lists higher priorities first, then by name.
/// `apiregistration.k8s.io` is listed first, as kube's aggregator does.
fn group_priority(group: &str) -> i32 {
    match group {
        "apiregistration.k8s.io" => 20001,
        _ => api_service_priority(group, "").0,
    }
}

/// The `groupPriorityMinimum` and `versionPriority` of kube's local
/// APIService for a built-in group/version.
pub fn api_service_priority(group: &str, version: &str) -> (i32, i32) {
    let version_priority = match (group, version) {
        ("", _) => 1,
        ("autoscaling", "v2") => 30,
        _ => 15,
    };
    let group_priority = match group {
        "" | "apiregistration.k8s.io" => 18000,
        "apps" => 17800,
        "events.k8s.io" => 17750,
        "authentication.k8s.io" => 17700,
        "authorization.k8s.io" => 17600,
        "autoscaling" => 17500,
        "batch" => 17400,
        "certificates.k8s.io" => 17300,
        "networking.k8s.io" => 17200,
        "policy" => 17100,
        "rbac.authorization.k8s.io" => 17000,
        "storage.k8s.io" => 16800,
        "apiextensions.k8s.io" | "admissionregistration.k8s.io" => 16700,
        "scheduling.k8s.io" => 16600,
        "coordination.k8s.io" => 16500,
        "node.k8s.io" => 16300,
        "discovery.k8s.io" | "resource.k8s.io" => 16200,
        "flowcontrol.apiserver.k8s.io" => 16100,
        "internal.apiserver.k8s.io" => 16000,
        "storagemigration.k8s.io" => 15800,
        _ => 1000,
    };
    (group_priority, version_priority)
}

/// A named group with its versions, preferred version first.
struct SortedGroup {
    group: Str,
    versions: Vec<Str>,
}

/// Named groups in discovery order.
fn sorted_groups(registry: &Registry) -> Vec<SortedGroup> {
    let mut groups: Vec<SortedGroup> = registry
        .groups()
        .into_iter()
        .map(|g| {
            let mut versions = g.versions;
            versions.sort_by(|a, b| compare_versions(a, b));
            SortedGroup {
                group: g.group,
                versions,
            }
        })
        .collect();
    groups.sort_by(|a, b| {
        group_priority(&b.group)
            .cmp(&group_priority(&a.group))
            .then_with(|| a.group.cmp(&b.group))
    });
    groups
}

/// Every served group-version: the core versions first, then the named
/// groups in discovery order.
pub(crate) fn group_versions(registry: &Registry) -> Vec<(Str, Str)> {
    let mut core: Vec<Str> = Vec::new();
    for r in registry.all().refs().filter(|r| r.group.is_empty()) {
        if !core.contains(&r.version) {
            core.push(r.version.clone());
        }
    }
    core.sort_by(|a, b| compare_versions(a, b));
    let mut out: Vec<(Str, Str)> = core.into_iter().map(|v| (Shared::Static(""), v)).collect();
    for g in sorted_groups(registry) {
        out.extend(g.versions.iter().map(|v| (g.group.clone(), v.clone())));
    }
    out
}

// ---------------------------------------------------------------------------
// Legacy documents
// ---------------------------------------------------------------------------

fn api_versions(registry: &Registry, server_address: &str) -> Value {
    let versions: Vec<Str> = group_versions(registry)
        .into_iter()
        .filter(|(g, _)| g.is_empty())
        .map(|(_, v)| v)
        .collect();
    json!({
        "kind": "APIVersions",
        "versions": versions,
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    })
}

fn version_for_discovery(group: &str, version: &str) -> Value {
    json!({"groupVersion": format!("{group}/{version}"), "version": version})
}

/// One version of a listed group: served here, or by an extension server.
enum ListedVersion {
    Local(Str),
    Remote(Box<Remote>),
}

impl ListedVersion {
    fn name(&self) -> &str {
        match self {
            ListedVersion::Local(v) => v,
            ListedVersion::Remote(r) => &r.version,
        }
    }
}

/// A named group as discovery lists it, preferred version first.
struct Listed {
    name: String,
    versions: Vec<ListedVersion>,
}

/// The registry's groups and the remote APIServices' together, in kube's
/// order: groups by (highest) groupPriorityMinimum then name; a group
/// with remote versions orders its versions by versionPriority, then
/// kube's version order.
fn listed_groups(
    registry: &Registry,
    remotes: &std::collections::BTreeMap<(String, String), Remote>,
) -> Vec<Listed> {
    let mut groups: Vec<(i64, Listed, bool)> = sorted_groups(registry)
        .into_iter()
        .map(|g| {
            (
                i64::from(group_priority(&g.group)),
                Listed {
                    name: g.group.to_string(),
                    versions: g.versions.into_iter().map(ListedVersion::Local).collect(),
                },
                false,
            )
        })
        .collect();
    for r in remotes.values() {
        let at = match groups.iter().position(|(_, g, _)| g.name == r.group) {
            Some(i) => i,
            None => {
                groups.push((
                    i64::MIN,
                    Listed {
                        name: r.group.clone(),
                        versions: Vec::new(),
                    },
                    false,
                ));
                groups.len() - 1
            }
        };
        let (priority, g, mixed) = &mut groups[at];
        *priority = (*priority).max(r.group_priority);
        *mixed = true;
        g.versions.retain(|v| v.name() != r.version);
        g.versions.push(ListedVersion::Remote(Box::new(r.clone())));
    }
    for (_, g, mixed) in &mut groups {
        if *mixed {
            let name = g.name.clone();
            let rank = |v: &ListedVersion| match v {
                ListedVersion::Local(v) => i64::from(api_service_priority(&name, v).1),
                ListedVersion::Remote(r) => r.version_priority,
            };
            g.versions.sort_by(|a, b| {
                rank(b)
                    .cmp(&rank(a))
                    .then_with(|| compare_versions(a.name(), b.name()))
            });
        }
    }
    groups.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.name.cmp(&b.1.name)));
    groups.into_iter().map(|(_, g, _)| g).collect()
}

fn group_entry(g: &Listed) -> Value {
    let versions: Vec<Value> = g
        .versions
        .iter()
        .map(|v| version_for_discovery(&g.name, v.name()))
        .collect();
    let preferred = g
        .versions
        .first()
        .map(|v| version_for_discovery(&g.name, v.name()))
        .unwrap_or(Value::Null);
    json!({"name": g.name, "versions": versions, "preferredVersion": preferred})
}

fn group_list(listed: &[Listed]) -> Value {
    let groups: Vec<Value> = listed.iter().map(group_entry).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

fn api_group(g: &Listed) -> Value {
    let mut doc = serde_json::Map::new();
    doc.insert("kind".into(), json!("APIGroup"));
    doc.insert("apiVersion".into(), json!("v1"));
    if let Value::Object(entry) = group_entry(g) {
        doc.extend(entry);
    }
    Value::Object(doc)
}

/// Whether kube serves a collection delete for the resource.
pub(crate) fn has_deletecollection(r: &Resource) -> bool {
    r.delete.collection
}

/// The verbs of a resource (not a subresource).
fn resource_verbs(r: &Resource) -> Vec<&'static str> {
    if r.virtual_create.is_some() {
        return vec!["create"];
    }
    if r.computed.is_some() {
        return vec!["get", "list"];
    }
    RESOURCE_VERBS
        .iter()
        .copied()
        .filter(|v| *v != "deletecollection" || has_deletecollection(r))
        .collect()
}

/// The group, version and kind a subresource answers with: the parent kind
/// for `status`, `autoscaling/v1` `Scale` for `scale`.
pub(crate) fn subresource_kind<'a>(
    r: &'a Resource,
    sub: &'a Subresource,
) -> (&'a str, &'a str, &'a str) {
    match sub {
        Subresource::Status | Subresource::Part(_) => (&r.group, &r.version, &r.kind),
        Subresource::Scale { .. } => ("autoscaling", "v1", "Scale"),
        Subresource::Create {
            group,
            version,
            kind,
            ..
        } => (group, version, kind),
        Subresource::Connect(c) => (&r.group, &r.version, c.kind),
    }
}

/// kube's `storageVersionHash` of a resource (k8s.io/apiserver
/// `discovery.StorageVersionHash`): base64 of the first 8 bytes of the
/// SHA-256 of `<group>/<version>/<kind>` of its storage version, which
/// changes exactly when the storage version does (storage migrators
/// watch it). `None` for a resource without storage.
pub(crate) fn storage_version_hash(r: &Resource) -> Option<String> {
    use base64::Engine;
    let (group, version, kind) = r.storage_gvk()?;
    let gvk = format!("{group}/{version}/{kind}");
    let digest = ring::digest::digest(&ring::digest::SHA256, gvk.as_bytes());
    Some(base64::engine::general_purpose::STANDARD.encode(&digest.as_ref()[..8]))
}

/// A resource's entries in `APIResourceList` order: the resource, then its
/// subresources by name.
fn resource_entries(r: &Resource) -> Vec<(String, Value)> {
    let mut main = serde_json::Map::new();
    main.insert("name".into(), json!(r.plural));
    main.insert("singularName".into(), json!(r.singular));
    main.insert("namespaced".into(), json!(r.namespaced));
    main.insert("kind".into(), json!(r.kind));
    main.insert("verbs".into(), json!(resource_verbs(r)));
    if !r.short_names.is_empty() {
        main.insert("shortNames".into(), json!(r.short_names));
    }
    if !r.categories.is_empty() {
        main.insert("categories".into(), json!(r.categories));
    }
    // Subresources have none: their storage is the parent's.
    if let Some(hash) = storage_version_hash(r) {
        main.insert("storageVersionHash".into(), json!(hash));
    }
    let mut out = vec![(r.plural.to_string(), Value::Object(main))];
    for sub in r.subresources.iter() {
        let name = format!("{}/{}", r.plural, sub.name());
        let (group, version, kind) = subresource_kind(r, sub);
        let mut e = serde_json::Map::new();
        e.insert("name".into(), json!(name));
        e.insert("singularName".into(), json!(""));
        e.insert("namespaced".into(), json!(r.namespaced));
        // Only a kind from another group-version names its group and version.
        if (group, version) != (&r.group, &r.version) {
            e.insert("group".into(), json!(group));
            e.insert("version".into(), json!(version));
        }
        e.insert("kind".into(), json!(kind));
        e.insert("verbs".into(), json!(SUBRESOURCE_VERBS));
        out.push((name, Value::Object(e)));
    }
    out
}

/// Resources of a group-version sorted by name, as kube installs them.
fn sorted_resources(registry: &Registry, group: &str, version: &str) -> Vec<Row> {
    let mut rs: Vec<Row> = registry.in_group_version(group, version);
    rs.sort_by(|a, b| a.plural.cmp(&b.plural));
    rs
}

fn resource_list(registry: &Registry, group: &str, version: &str) -> Value {
    let mut entries: Vec<(String, Value)> = sorted_resources(registry, group, version)
        .into_iter()
        .flat_map(|r| resource_entries(&r))
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let resources: Vec<Value> = entries.into_iter().map(|(_, v)| v).collect();
    let mut doc = serde_json::Map::new();
    doc.insert("kind".into(), json!("APIResourceList"));
    // The core group answers without apiVersion (kube keeps it unversioned).
    if !group.is_empty() {
        doc.insert("apiVersion".into(), json!("v1"));
    }
    doc.insert(
        "groupVersion".into(),
        json!(if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        }),
    );
    doc.insert("resources".into(), Value::Array(resources));
    Value::Object(doc)
}

// ---------------------------------------------------------------------------
// Aggregated discovery (apidiscovery.k8s.io/v2)
// ---------------------------------------------------------------------------

fn response_kind(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "version": version, "kind": kind})
}

fn aggregated_resource(r: &Resource) -> Value {
    let mut e = serde_json::Map::new();
    e.insert("resource".into(), json!(r.plural));
    // kube leaves group and version empty for a kind of the same group-version.
    e.insert("responseKind".into(), response_kind("", "", &r.kind));
    e.insert(
        "scope".into(),
        json!(if r.namespaced {
            "Namespaced"
        } else {
            "Cluster"
        }),
    );
    e.insert("singularResource".into(), json!(r.singular));
    e.insert("verbs".into(), json!(resource_verbs(r)));
    if !r.short_names.is_empty() {
        e.insert("shortNames".into(), json!(r.short_names));
    }
    if !r.categories.is_empty() {
        e.insert("categories".into(), json!(r.categories));
    }
    let mut subs: Vec<&Subresource> = r.subresources.iter().collect();
    subs.sort_by_key(|s| s.name());
    let subs: Vec<Value> = subs
        .into_iter()
        .map(|sub| {
            let (group, version, kind) = subresource_kind(r, sub);
            let (group, version) = if (group, version) == (&r.group, &r.version) {
                ("", "")
            } else {
                (group, version)
            };
            json!({
                "subresource": sub.name(),
                "responseKind": response_kind(group, version, kind),
                "verbs": sub.verbs(),
            })
        })
        .collect();
    if !subs.is_empty() {
        e.insert("subresources".into(), Value::Array(subs));
    }
    Value::Object(e)
}

fn aggregated_version(registry: &Registry, group: &str, version: &str) -> Value {
    let resources: Vec<Value> = sorted_resources(registry, group, version)
        .into_iter()
        .map(|r| aggregated_resource(&r))
        .collect();
    json!({"version": version, "resources": resources, "freshness": "Current"})
}

fn discovery_list(items: Vec<Value>) -> Value {
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

fn aggregated_core(registry: &Registry) -> Value {
    let versions: Vec<Value> = group_versions(registry)
        .into_iter()
        .filter(|(g, _)| g.is_empty())
        .map(|(g, v)| aggregated_version(registry, &g, &v))
        .collect();
    discovery_list(vec![json!({"metadata": {}, "versions": versions})])
}

fn aggregated_groups(registry: &Registry, listed: &[Listed]) -> Value {
    let items = listed
        .iter()
        .map(|g| {
            let versions: Vec<Value> = g
                .versions
                .iter()
                .map(|v| match v {
                    ListedVersion::Local(v) => aggregated_version(registry, &g.name, v),
                    ListedVersion::Remote(r) => crate::aggregator::aggregated_version(r),
                })
                .collect();
            json!({"metadata": {"name": g.name}, "versions": versions})
        })
        .collect();
    discovery_list(items)
}

// ---------------------------------------------------------------------------
// Accept negotiation
// ---------------------------------------------------------------------------

/// One clause of an `Accept` header.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MediaRange {
    pub typ: String,
    pub subtype: String,
    /// Parameters other than `q`, keys lower-cased, values unquoted.
    pub params: Vec<(String, String)>,
    pub q: f32,
}

impl MediaRange {
    /// Whether this clause accepts `typ/subtype` (with wildcards).
    pub fn matches(&self, typ: &str, subtype: &str) -> bool {
        (self.typ == "*" || self.typ.eq_ignore_ascii_case(typ))
            && (self.subtype == "*" || self.subtype.eq_ignore_ascii_case(subtype))
    }

    pub fn param(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Whether the clause asks for a transformed object (`as`, `g`, `v`).
    fn has_conversion(&self) -> bool {
        ["as", "g", "v"].iter().any(|k| self.param(k).is_some())
    }
}

/// Parses an `Accept` header into clauses, most preferred first: by
/// quality, then concrete types before wildcards, then header order.
pub(crate) fn parse_accept(header: &str) -> Vec<MediaRange> {
    let mut out = Vec::new();
    for clause in header.split(',') {
        let mut parts = clause.split(';');
        let range = parts.next().unwrap_or("").trim();
        if range.is_empty() {
            continue;
        }
        let (typ, subtype) = match range.split_once('/') {
            Some((t, s)) => (t.trim(), s.trim()),
            None => (range, "*"),
        };
        let mut q = 1.0f32;
        let mut params = Vec::new();
        for p in parts {
            let Some((k, v)) = p.split_once('=') else {
                continue;
            };
            let k = k.trim().to_ascii_lowercase();
            let v = v.trim().trim_matches('"').to_string();
            if k == "q" {
                q = v
                    .parse::<f32>()
                    .ok()
                    .filter(|q| q.is_finite())
                    .unwrap_or(1.0);
            } else {
                params.push((k, v));
            }
        }
        out.push(MediaRange {
            typ: typ.to_ascii_lowercase(),
            subtype: subtype.to_ascii_lowercase(),
            params,
            q,
        });
    }
    // A stable sort keeps header order among equals.
    out.sort_by(|a, b| {
        b.q.partial_cmp(&a.q)
            .unwrap_or(Ordering::Equal)
            .then_with(|| (a.typ == "*").cmp(&(b.typ == "*")))
            .then_with(|| (a.subtype == "*").cmp(&(b.subtype == "*")))
    });
    out
}

/// Whether the request asks for aggregated discovery, and in which
/// encoding: the most preferred acceptable JSON or protobuf clause naming
/// `apidiscovery.k8s.io/v2` `APIGroupDiscoveryList` (clients list it
/// first, with a plain document as a fallback).
fn aggregated_wire(accept: Option<&str>) -> Option<Wire> {
    parse_accept(accept?)
        .iter()
        .filter(|c| {
            c.q > 0.0
                && c.param("g") == Some("apidiscovery.k8s.io")
                && c.param("v") == Some("v2")
                && c.param("as") == Some("APIGroupDiscoveryList")
        })
        .find_map(Wire::of)
}

/// Whether the request asks for aggregated discovery.
#[cfg(test)]
fn wants_aggregated(accept: Option<&str>) -> bool {
    aggregated_wire(accept).is_some()
}

/// The encoding of a plain (untransformed) document the client takes
/// most: no `Accept` means JSON.
fn plain_wire(accept: Option<&str>) -> Option<Wire> {
    match accept.map(str::trim) {
        None | Some("") => Some(Wire::Json),
        Some(accept) => parse_accept(accept)
            .iter()
            .filter(|c| c.q > 0.0 && !c.has_conversion())
            .find_map(Wire::of),
    }
}

/// Whether a plain (untransformed) JSON document is acceptable.
#[cfg(test)]
fn accepts_plain_json(accept: Option<&str>) -> bool {
    plain_wire(accept) == Some(Wire::Json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use apimachinery::request::ResourceRequest;
    use proptest::prelude::*;

    const KUBECTL_ACCEPT: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

    fn discovery() -> Discovery {
        Discovery::new(Registry::builtin())
    }

    async fn body_of(r: Response) -> (StatusCode, HeaderMap, Vec<u8>) {
        let (parts, body) = r.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
        (parts.status, parts.headers, bytes.to_vec())
    }

    async fn get(
        path: ApiPath,
        accept: Option<&str>,
        inm: Option<&str>,
    ) -> (StatusCode, HeaderMap, Value) {
        let (code, headers, body) =
            body_of(discovery().serve_conditional(&path, accept, inm)).await;
        let json = if body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&body).unwrap()
        };
        (code, headers, json)
    }

    fn rl(group: &str, version: &str) -> ApiPath {
        ApiPath::ResourceList {
            group: group.into(),
            version: version.into(),
        }
    }

    fn names(doc: &Value) -> Vec<String> {
        doc["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap().to_string())
            .collect()
    }

    fn find<'a>(doc: &'a Value, name: &str) -> &'a Value {
        doc["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing"))
    }

    #[tokio::test]
    async fn api_versions_document() {
        let (code, h, doc) = get(ApiPath::LegacyVersions, Some("application/json"), None).await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(h[header::CONTENT_TYPE], "application/json");
        assert_eq!(
            doc,
            json!({"kind": "APIVersions", "versions": ["v1"],
                   "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": DEFAULT_SERVER_ADDRESS}]})
        );
        let d = discovery().with_server_address("10.0.0.1:6443");
        let (_, _, body) = body_of(d.serve(&ApiPath::LegacyVersions, None)).await;
        let doc: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            doc["serverAddressByClientCIDRs"][0]["serverAddress"],
            "10.0.0.1:6443"
        );
    }

    #[tokio::test]
    async fn group_list_is_in_priority_order() {
        let (code, _, doc) = get(ApiPath::Groups, None, None).await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(doc["kind"], "APIGroupList");
        assert_eq!(doc["apiVersion"], "v1");
        let groups: Vec<&str> = doc["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            groups,
            [
                "apiregistration.k8s.io",
                "apps",
                "events.k8s.io",
                "authentication.k8s.io",
                "authorization.k8s.io",
                "autoscaling",
                "batch",
                "certificates.k8s.io",
                "networking.k8s.io",
                "policy",
                "rbac.authorization.k8s.io",
                "storage.k8s.io",
                "admissionregistration.k8s.io",
                "apiextensions.k8s.io",
                "scheduling.k8s.io",
                "coordination.k8s.io",
                "node.k8s.io",
                "discovery.k8s.io",
                "resource.k8s.io",
                "flowcontrol.apiserver.k8s.io",
            ]
        );
        assert_eq!(
            doc["groups"][5],
            json!({"name": "autoscaling",
                   "versions": [{"groupVersion": "autoscaling/v2", "version": "v2"},
                                {"groupVersion": "autoscaling/v1", "version": "v1"}],
                   "preferredVersion": {"groupVersion": "autoscaling/v2", "version": "v2"}})
        );
    }

    #[tokio::test]
    async fn one_group_and_unknown_group() {
        let (code, _, doc) = get(
            ApiPath::Group {
                group: "apps".into(),
            },
            None,
            None,
        )
        .await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(
            doc,
            json!({"kind": "APIGroup", "apiVersion": "v1", "name": "apps",
                   "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
                   "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}})
        );
        let (code, _, doc) = get(
            ApiPath::Group {
                group: "nope.example.com".into(),
            },
            None,
            None,
        )
        .await;
        assert_eq!(code, StatusCode::NOT_FOUND);
        assert_eq!(doc["kind"], "Status");
        assert_eq!(doc["reason"], "NotFound");
        for path in [rl("apps", "v2"), rl("", "v2"), rl("nope", "v1")] {
            assert_eq!(get(path, None, None).await.0, StatusCode::NOT_FOUND);
        }
        let resource = ApiPath::Resource(ResourceRequest::default());
        assert_eq!(get(resource, None, None).await.0, StatusCode::NOT_FOUND);
    }

    #[tokio::test]
    async fn core_resource_list() {
        let (code, _, doc) = get(rl("", "v1"), None, None).await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(doc["kind"], "APIResourceList");
        assert!(doc.get("apiVersion").is_none());
        assert_eq!(doc["groupVersion"], "v1");
        let n = names(&doc);
        let mut sorted = n.clone();
        sorted.sort();
        assert_eq!(n, sorted);
        assert!(n.contains(&"pods/status".to_string()));
        assert!(n.contains(&"replicationcontrollers/scale".to_string()));
        assert_eq!(
            find(&doc, "pods"),
            &json!({"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
                    "verbs": RESOURCE_VERBS, "shortNames": ["po"], "categories": ["all"],
                    "storageVersionHash": "xPOwRZ+Yhw8="})
        );
        assert_eq!(
            find(&doc, "pods/status"),
            &json!({"name": "pods/status", "singularName": "", "namespaced": true, "kind": "Pod",
                    "verbs": ["get", "patch", "update"]})
        );
        let ns = find(&doc, "namespaces");
        assert_eq!(ns["namespaced"], false);
        assert_eq!(
            ns["verbs"],
            json!(["create", "delete", "get", "list", "patch", "update", "watch"])
        );
        assert!(find(&doc, "configmaps").get("categories").is_none());
    }

    /// kube's values, from its own table of them (kubernetes
    /// test/integration/etcd `storageversionhashdata`) and discovery
    /// documents of real clusters: the hash names the storage version,
    /// so a kind served in several versions (or groups) has one hash.
    #[tokio::test]
    async fn storage_version_hashes_are_kubes() {
        let kube = [
            ("", "v1", "configmaps", "qFsyl6wFWjQ="),
            ("", "v1", "events", "r2yiGXH7wu8="),
            ("", "v1", "namespaces", "Q3oi5N2YM8M="),
            ("", "v1", "services", "0/CO1lhkEBI="),
            ("", "v1", "replicationcontrollers", "Jond2If31h0="),
            ("events.k8s.io", "v1", "events", "r2yiGXH7wu8="),
            (
                "autoscaling",
                "v1",
                "horizontalpodautoscalers",
                "qwQve8ut294=",
            ),
            (
                "autoscaling",
                "v2",
                "horizontalpodautoscalers",
                "qwQve8ut294=",
            ),
            ("apps", "v1", "deployments", "8aSe+NMegvE="),
            ("apps", "v1", "controllerrevisions", "85nkx63pcBU="),
            ("batch", "v1", "cronjobs", "sd5LIXh4Fjs="),
            (
                "rbac.authorization.k8s.io",
                "v1",
                "clusterroles",
                "bYE5ZWDrJ44=",
            ),
            (
                "flowcontrol.apiserver.k8s.io",
                "v1",
                "flowschemas",
                "GJVAJZSZBIw=",
            ),
            ("networking.k8s.io", "v1", "ingresses", "39NQlfNR+bo="),
            (
                "admissionregistration.k8s.io",
                "v1",
                "validatingadmissionpolicies",
                "6OxvlMmQ6is=",
            ),
            (
                "apiregistration.k8s.io",
                "v1",
                "apiservices",
                "InPBPD7+PqM=",
            ),
        ];
        for (group, version, plural, hash) in kube {
            let (code, _, doc) = get(rl(group, version), None, None).await;
            assert_eq!(code, StatusCode::OK, "{group}/{version}");
            assert_eq!(
                find(&doc, plural)["storageVersionHash"],
                hash,
                "{group}/{version} {plural}"
            );
        }
        // kube stores CRDs as v1beta1 (its hash is `jfWCUB31mvA=`); this
        // server writes them as v1 (`registry::definition::v1beta1`), and
        // the hash says what is written, so a storage migrator moving from
        // kube sees the change.
        let (_, _, doc) = get(rl("apiextensions.k8s.io", "v1"), None, None).await;
        assert_eq!(
            find(&doc, "customresourcedefinitions")["storageVersionHash"],
            "M5uH+AlWATY="
        );
        // kube's `NoStorageVersionHash`: nothing stored, no hash; and no
        // subresource has one.
        let none = [
            ("", "v1", "bindings"),
            ("", "v1", "componentstatuses"),
            ("authentication.k8s.io", "v1", "tokenreviews"),
            ("authentication.k8s.io", "v1", "selfsubjectreviews"),
            ("authorization.k8s.io", "v1", "subjectaccessreviews"),
            ("authorization.k8s.io", "v1", "selfsubjectrulesreviews"),
            ("", "v1", "pods/status"),
            ("", "v1", "pods/binding"),
            ("apps", "v1", "deployments/scale"),
        ];
        for (group, version, name) in none {
            let (_, _, doc) = get(rl(group, version), None, None).await;
            assert!(
                find(&doc, name).get("storageVersionHash").is_none(),
                "{group}/{version} {name}"
            );
        }
        // Every other resource has one.
        for r in Registry::builtin().all().refs() {
            assert_eq!(
                storage_version_hash(r).is_some(),
                r.virtual_create.is_none() && r.computed.is_none(),
                "{}/{} {}",
                r.group,
                r.version,
                r.plural
            );
        }
    }

    #[tokio::test]
    async fn apps_resource_list_has_scale() {
        let (_, _, doc) = get(rl("apps", "v1"), Some("application/json"), None).await;
        assert_eq!(doc["apiVersion"], "v1");
        assert_eq!(doc["groupVersion"], "apps/v1");
        assert_eq!(
            names(&doc),
            [
                "controllerrevisions",
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
                "statefulsets",
                "statefulsets/scale",
                "statefulsets/status",
            ]
        );
        assert_eq!(
            find(&doc, "deployments/scale"),
            &json!({"name": "deployments/scale", "singularName": "", "namespaced": true,
                    "group": "autoscaling", "version": "v1", "kind": "Scale",
                    "verbs": ["get", "patch", "update"]})
        );
        // Field order follows kube's APIResource struct.
        let keys: Vec<&String> = find(&doc, "deployments/scale")
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(
            keys,
            [
                "name",
                "singularName",
                "namespaced",
                "group",
                "version",
                "kind",
                "verbs"
            ]
        );
    }

    #[tokio::test]
    async fn aggregated_core_and_groups() {
        let (code, h, doc) = get(ApiPath::LegacyVersions, Some(KUBECTL_ACCEPT), None).await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(h[header::CONTENT_TYPE], AGGREGATED_CONTENT_TYPE);
        assert_eq!(h[header::VARY], "Accept");
        assert_eq!(h[header::CACHE_CONTROL], "public");
        assert_eq!(doc["kind"], "APIGroupDiscoveryList");
        assert_eq!(doc["apiVersion"], "apidiscovery.k8s.io/v2");
        let items = doc["items"].as_array().unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!(items[0]["metadata"], json!({}));
        let v1 = &items[0]["versions"][0];
        assert_eq!(v1["version"], "v1");
        assert_eq!(v1["freshness"], "Current");
        let pods = v1["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "pods")
            .unwrap();
        assert_eq!(
            pods,
            &json!({"resource": "pods", "responseKind": {"group": "", "version": "", "kind": "Pod"},
                    "scope": "Namespaced", "singularResource": "pod", "verbs": RESOURCE_VERBS,
                    "shortNames": ["po"], "categories": ["all"],
                    "subresources": [
                        {"subresource": "attach",
                         "responseKind": {"group": "", "version": "", "kind": "PodAttachOptions"},
                         "verbs": ["create", "get"]},
                        {"subresource": "binding",
                         "responseKind": {"group": "", "version": "", "kind": "Binding"},
                         "verbs": ["create"]},
                        {"subresource": "ephemeralcontainers",
                         "responseKind": {"group": "", "version": "", "kind": "Pod"},
                         "verbs": ["get", "patch", "update"]},
                        {"subresource": "eviction",
                         "responseKind": {"group": "policy", "version": "v1", "kind": "Eviction"},
                         "verbs": ["create"]},
                        {"subresource": "exec",
                         "responseKind": {"group": "", "version": "", "kind": "PodExecOptions"},
                         "verbs": ["create", "get"]},
                        {"subresource": "log",
                         "responseKind": {"group": "", "version": "", "kind": "Pod"},
                         "verbs": ["get"]},
                        {"subresource": "portforward",
                         "responseKind": {"group": "", "version": "", "kind": "PodPortForwardOptions"},
                         "verbs": ["create", "get"]},
                        {"subresource": "proxy",
                         "responseKind": {"group": "", "version": "", "kind": "PodProxyOptions"},
                         "verbs": ["create", "delete", "get", "patch", "update"]},
                        {"subresource": "resize",
                         "responseKind": {"group": "", "version": "", "kind": "Pod"},
                         "verbs": ["get", "patch", "update"]},
                        {"subresource": "status",
                         "responseKind": {"group": "", "version": "", "kind": "Pod"},
                         "verbs": ["get", "patch", "update"]}]})
        );

        let (code, h, doc) = get(ApiPath::Groups, Some(KUBECTL_ACCEPT), None).await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(h[header::CONTENT_TYPE], AGGREGATED_CONTENT_TYPE);
        let items = doc["items"].as_array().unwrap();
        assert_eq!(
            items[0]["metadata"],
            json!({"name": "apiregistration.k8s.io"})
        );
        assert_eq!(items[1]["metadata"], json!({"name": "apps"}));
        let deploy = items[1]["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "deployments")
            .unwrap();
        assert_eq!(deploy["scope"], "Namespaced");
        assert_eq!(
            deploy["subresources"],
            json!([
                {"subresource": "scale",
                 "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                 "verbs": ["get", "patch", "update"]},
                {"subresource": "status",
                 "responseKind": {"group": "", "version": "", "kind": "Deployment"},
                 "verbs": ["get", "patch", "update"]},
            ])
        );
        let pc = items
            .iter()
            .find(|i| i["metadata"]["name"] == "scheduling.k8s.io")
            .unwrap();
        assert_eq!(pc["versions"][0]["resources"][0]["scope"], "Cluster");
        assert!(pc["versions"][0]["resources"][0]
            .get("subresources")
            .is_none());
    }

    #[tokio::test]
    async fn aggregated_etag_and_not_modified() {
        let (_, h, _) = get(ApiPath::Groups, Some(KUBECTL_ACCEPT), None).await;
        let etag = h[header::ETAG].to_str().unwrap().to_string();
        assert!(etag.starts_with('"') && etag.ends_with('"') && etag.len() == 34);
        let (code, h2, body) = get(ApiPath::Groups, Some(KUBECTL_ACCEPT), Some(&etag)).await;
        assert_eq!(code, StatusCode::NOT_MODIFIED);
        assert_eq!(body, Value::Null);
        assert_eq!(h2[header::ETAG], etag.as_str());
        let (code, _, _) = get(ApiPath::Groups, Some(KUBECTL_ACCEPT), Some("\"other\"")).await;
        assert_eq!(code, StatusCode::OK);
        // The core document has its own tag.
        let (_, hc, _) = get(ApiPath::LegacyVersions, Some(KUBECTL_ACCEPT), None).await;
        assert_ne!(hc[header::ETAG], etag.as_str());
        // Through the header map.
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static(KUBECTL_ACCEPT));
        headers.insert(header::IF_NONE_MATCH, HeaderValue::from_str(&etag).unwrap());
        let r = discovery().serve_request(&ApiPath::Groups, &headers);
        assert_eq!(r.status(), StatusCode::NOT_MODIFIED);
    }

    #[tokio::test]
    async fn negotiation() {
        // Legacy only: v2beta1 is no longer served, plain JSON is the fallback.
        let beta = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        let (code, h, doc) = get(ApiPath::Groups, Some(beta), None).await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(h[header::CONTENT_TYPE], "application/json");
        assert_eq!(doc["kind"], "APIGroupList");
        // Aggregated refused with q=0.
        let refused = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;q=0,application/json";
        assert_eq!(
            get(ApiPath::Groups, Some(refused), None).await.2["kind"],
            "APIGroupList"
        );
        // Wildcards give the legacy document.
        assert_eq!(
            get(ApiPath::Groups, Some("*/*"), None).await.0,
            StatusCode::OK
        );
        // Only a transformation we do not serve: 406.
        let (code, _, doc) = get(
            ApiPath::Groups,
            Some("application/json;as=Table;v=v1;g=meta.k8s.io"),
            None,
        )
        .await;
        assert_eq!(code, StatusCode::NOT_ACCEPTABLE);
        assert_eq!(doc["reason"], "NotAcceptable");
        let (code, _, _) = get(rl("", "v1"), Some("application/yaml"), None).await;
        assert_eq!(code, StatusCode::NOT_ACCEPTABLE);
        // An aggregated Accept on a group-version path is answered with the legacy list.
        let (code, _, doc) = get(rl("apps", "v1"), Some(KUBECTL_ACCEPT), None).await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(doc["kind"], "APIResourceList");
    }

    /// Every document in protobuf decodes (by the table-driven decoder) to
    /// the JSON one; the aggregated one keeps its ETag and content type.
    #[tokio::test]
    async fn protobuf_documents() {
        let d = discovery();
        let paths = [
            ApiPath::LegacyVersions,
            ApiPath::Groups,
            ApiPath::Group {
                group: "apps".into(),
            },
            rl("", "v1"),
            rl("apps", "v1"),
        ];
        for path in paths {
            let (code, h, json) = body_of(d.serve(&path, Some("application/json"))).await;
            assert_eq!(code, StatusCode::OK);
            assert_eq!(h[header::CONTENT_TYPE], "application/json");
            let (code, h, pb) = body_of(d.serve(
                &path,
                Some("application/vnd.kubernetes.protobuf, application/json"),
            ))
            .await;
            assert_eq!(code, StatusCode::OK);
            assert_eq!(h[header::CONTENT_TYPE], PROTOBUF);
            let mut json: Value = serde_json::from_slice(&json).unwrap();
            let unknown = k8s_proto::decode_unknown(&pb).unwrap();
            assert_eq!(unknown.kind, json["kind"].as_str().unwrap());
            assert_eq!(
                unknown.api_version,
                json["apiVersion"].as_str().unwrap_or(""),
                "typed as the JSON is"
            );
            let message = format!("k8s.io.apimachinery.pkg.apis.meta.v1.{}", unknown.kind);
            let decoded = k8s_proto::decode_to_json(&message, unknown.raw).unwrap();
            let doc = json.as_object_mut().unwrap();
            doc.remove("kind");
            doc.remove("apiVersion");
            assert_eq!(decoded, json, "{path:?}");
        }
        // Aggregated, by preference order.
        let both = format!("{AGGREGATED_PROTOBUF},{AGGREGATED_CONTENT_TYPE},application/json");
        let (code, h, pb) = body_of(d.serve_conditional(&ApiPath::Groups, Some(&both), None)).await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(h[header::CONTENT_TYPE], AGGREGATED_PROTOBUF);
        let etag = h[header::ETAG].to_str().unwrap().to_string();
        let decoded = k8s_proto::decode_object(&pb).unwrap();
        assert_eq!(decoded["kind"], "APIGroupDiscoveryList");
        assert_eq!(decoded["apiVersion"], "apidiscovery.k8s.io/v2");
        let (_, h, json) = get(ApiPath::Groups, Some(KUBECTL_ACCEPT), None).await;
        assert_eq!(h[header::ETAG].to_str().unwrap(), etag, "one ETag for both");
        // The decoder drops empty strings (responseKind's `group: ""`).
        fn no_empty_strings(v: &mut Value) {
            match v {
                Value::Object(m) => {
                    m.retain(|_, v| v != "");
                    m.values_mut().for_each(no_empty_strings);
                }
                Value::Array(a) => a.iter_mut().for_each(no_empty_strings),
                _ => {}
            }
        }
        let mut items = json["items"].clone();
        no_empty_strings(&mut items);
        assert_eq!(decoded["items"], items);
        let (code, _, _) =
            body_of(d.serve_conditional(&ApiPath::Groups, Some(&both), Some(&etag))).await;
        assert_eq!(code, StatusCode::NOT_MODIFIED);
        assert_eq!(
            aggregated_wire(Some(&format!(
                "{AGGREGATED_CONTENT_TYPE},{AGGREGATED_PROTOBUF}"
            ))),
            Some(Wire::Json)
        );
        assert_eq!(plain_wire(Some("*/*")), Some(Wire::Json));
        assert_eq!(
            plain_wire(Some("application/vnd.kubernetes.protobuf;q=0")),
            None
        );
    }

    #[test]
    fn accept_parsing() {
        let c = parse_accept(
            "text/html;q=0.5, application/json;g=x;v=\"v1\", */*;q=0.1, application/*",
        );
        let ranges: Vec<String> = c
            .iter()
            .map(|m| format!("{}/{}", m.typ, m.subtype))
            .collect();
        assert_eq!(
            ranges,
            ["application/json", "application/*", "text/html", "*/*"]
        );
        assert_eq!(c[0].param("v"), Some("v1"));
        assert_eq!(c[0].param("g"), Some("x"));
        assert!(parse_accept("").is_empty());
        assert!(parse_accept(" , ;").is_empty());
        assert_eq!(parse_accept("json")[0].subtype, "*");
        assert!(wants_aggregated(Some(KUBECTL_ACCEPT)));
        assert!(!wants_aggregated(None));
        assert!(!wants_aggregated(Some("application/json")));
        assert!(accepts_plain_json(None));
        assert!(accepts_plain_json(Some("application/*")));
        assert!(!accepts_plain_json(Some("application/yaml")));
        assert!(!accepts_plain_json(Some("application/json;q=0")));
    }

    #[test]
    fn version_order() {
        let mut v = vec![
            "v1alpha1", "v1", "v2beta1", "v1beta2", "v2", "foo", "v1beta1", "v10",
        ];
        v.sort_by(|a, b| compare_versions(a, b));
        assert_eq!(
            v,
            ["v10", "v2", "v1", "v2beta1", "v1beta2", "v1beta1", "v1alpha1", "foo"]
        );
    }

    #[test]
    fn hash_is_stable_and_sensitive() {
        assert_eq!(content_hash(b""), "6C62272E07BB014262B821756295C58D");
        assert_eq!(content_hash(b"a"), content_hash(b"a"));
        assert_ne!(content_hash(b"a"), content_hash(b"b"));
        assert!(etag_matches("\"X\", W/\"Y\"", "\"Y\""));
        assert!(etag_matches("*", "\"Y\""));
        assert!(!etag_matches("\"X\"", "\"Y\""));
    }

    proptest! {
        #[test]
        fn accept_parsing_never_panics(h in "\\PC*") {
            let _ = parse_accept(&h);
            let _ = wants_aggregated(Some(&h));
            let _ = accepts_plain_json(Some(&h));
        }
    }
}
