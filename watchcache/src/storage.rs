//! The one storage trait. The etcd store (`etcd`) and the watch cache
//! (`cache`) implement it, and the same conformance suite runs against both.
//!
//! Keys are full etcd keys (`/registry/pods/default/web`). Values handed to and
//! returned from storage are JSON objects; `metadata.resourceVersion` is never
//! stored, it is set on the way out from the etcd mod revision.

use apimachinery::read::{ContinueFrom, Freshness, Predicate};
use async_trait::async_trait;
use serde_json::Value;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// etcd revision, the resourceVersion of the API.
pub type Revision = i64;

/// One stored object, shared cheaply between readers: a clone is a
/// reference count, and everything made of the object (its decoded tree,
/// its JSON, protobuf and CBOR encodings) lives in one shared allocation
/// and is made at most once.
///
/// An object is *full* (made from a decoded value: what writes and the etcd
/// store return) or *compact* (what the watch cache keeps): a compact one
/// holds only bytes — the plaintext value as stored in etcd until its JSON
/// is made, then the JSON — and the few fields selectors look at; its tree
/// is decoded on demand. [`Object::value`] keeps the tree it decodes in
/// this handle (a clone), not in what the clones share: a controller or a
/// handler that reads a cached object's fields holds the tree for as long
/// as it holds its handle, and the cache's own handle stays compact.
/// [`Object::with_value`] and [`Object::matches`] keep nothing.
#[derive(Clone)]
pub struct Object {
    /// The etcd mod revision of the key.
    pub revision: Revision,
    inner: Arc<Inner>,
    /// The tree a compact object decoded for this handle.
    decoded: OnceLock<Arc<Value>>,
}

struct Inner {
    /// The decoded object with `metadata.resourceVersion` set to the
    /// revision, for a full object.
    value: Option<Arc<Value>>,
    /// A compact object's stored bytes, until `json` replaces them.
    stored: Mutex<Option<Stored>>,
    /// Whether `stored` may still hold bytes (saves taking the lock on the
    /// hot path once the JSON stands for them).
    has_stored: AtomicBool,
    /// A compact object's labels, when it has any (a tree of
    /// `metadata.labels` alone): what label selectors read.
    labels: Option<Box<Value>>,
    /// The compact JSON of the object: every list response and watch event
    /// that carries this version writes these bytes.
    json: OnceLock<bytes::Bytes>,
    /// The whole protobuf body (`k8s\0` envelope included), or why it has
    /// none: lists take the message out of the envelope, watch events embed
    /// the whole body.
    protobuf: OnceLock<Result<bytes::Bytes, String>>,
    /// The self-described CBOR: watch events embed it whole, lists without
    /// the tag.
    cbor: OnceLock<bytes::Bytes>,
}

/// The plaintext value of a key as etcd stores it (protobuf or JSON,
/// without a resourceVersion).
struct Stored {
    key: Arc<str>,
    data: bytes::Bytes,
}

impl std::fmt::Debug for Object {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Object");
        d.field("revision", &self.revision);
        match self.held() {
            Some(value) => d.field("value", value),
            None => d.field("labels", &self.inner.labels),
        };
        d.finish()
    }
}

impl PartialEq for Object {
    fn eq(&self, other: &Self) -> bool {
        self.revision == other.revision
            && (Arc::ptr_eq(&self.inner, &other.inner)
                || self.with_value(|a| other.with_value(|b| a == b)))
    }
}

impl Object {
    /// An object at `revision` (its `metadata.resourceVersion` must already
    /// say so).
    pub fn new(value: Arc<Value>, revision: Revision) -> Object {
        Object::from_parts(Some(value), None, None, OnceLock::new(), revision)
    }

    fn from_parts(
        value: Option<Arc<Value>>,
        stored: Option<Stored>,
        labels: Option<Box<Value>>,
        json: OnceLock<bytes::Bytes>,
        revision: Revision,
    ) -> Object {
        Object {
            revision,
            decoded: OnceLock::new(),
            inner: Arc::new(Inner {
                value,
                has_stored: AtomicBool::new(stored.is_some()),
                stored: Mutex::new(stored),
                labels,
                json,
                protobuf: OnceLock::new(),
                cbor: OnceLock::new(),
            }),
        }
    }

    /// A compact object at `revision` holding `data`, the plaintext value
    /// stored at `key`, of which `decoded` is the decoding (read for the
    /// labels, then dropped by the caller).
    pub fn compact(key: Arc<str>, data: &[u8], decoded: &Value, revision: Revision) -> Object {
        let stored = Stored {
            key,
            // An exact-size copy: the etcd response's buffer is not kept.
            data: bytes::Bytes::copy_from_slice(data),
        };
        Object::from_parts(
            None,
            Some(stored),
            labels_of(decoded),
            OnceLock::new(),
            revision,
        )
    }

    /// This object as the cache keeps it: a compact object holding only its
    /// JSON (encoded now if it was not) and its labels. A compact object is
    /// returned as another handle on the same bytes, without the tree this
    /// handle may have decoded (a holder of the result keeps bytes only).
    pub fn compacted(&self) -> Object {
        if self.is_compact() {
            return Object {
                revision: self.revision,
                inner: Arc::clone(&self.inner),
                decoded: OnceLock::new(),
            };
        }
        let json = self.json().clone();
        let labels = self.with_value(labels_of);
        Object::from_parts(None, None, labels, OnceLock::from(json), self.revision)
    }

    /// Whether this is a compact object (what the cache keeps).
    pub fn is_compact(&self) -> bool {
        self.inner.value.is_none()
    }

    /// The tree at hand: a full object's, or the one this handle decoded.
    fn held(&self) -> Option<&Arc<Value>> {
        self.inner.value.as_ref().or_else(|| self.decoded.get())
    }

    /// The decoded object (`metadata.resourceVersion` set). A compact
    /// object decodes it now and keeps it in this handle.
    pub fn value(&self) -> &Value {
        self.value_arc()
    }

    /// [`Object::value`], shared.
    pub fn value_arc(&self) -> &Arc<Value> {
        match &self.inner.value {
            Some(value) => value,
            None => self.decoded.get_or_init(|| Arc::new(self.decode())),
        }
    }

    /// [`Object::value_arc`], taking the handle.
    pub fn into_value(self) -> Arc<Value> {
        self.value_arc().clone()
    }

    /// Runs `f` on the decoded object without keeping a tree a compact
    /// object does not hold (it is decoded for `f` and dropped).
    pub fn with_value<R>(&self, f: impl FnOnce(&Value) -> R) -> R {
        match self.held() {
            Some(value) => f(value),
            None => f(&self.decode()),
        }
    }

    /// The object's `metadata.labels`, without decoding a compact object.
    pub fn labels(&self) -> Option<&serde_json::Map<String, Value>> {
        let tree = match &self.inner.value {
            Some(value) => &**value,
            None => self.inner.labels.as_deref()?,
        };
        tree.get("metadata")?.get("labels")?.as_object()
    }

    /// Whether the object passes `predicate`. A compact object answers a
    /// label selector from its labels, decoding nothing; a field selector
    /// decodes it (without keeping the tree).
    pub fn matches(&self, predicate: &Predicate) -> bool {
        if predicate.is_everything() {
            return true;
        }
        if self.held().is_none() && predicate.field.is_empty() {
            let labels = self
                .inner
                .labels
                .as_deref()
                .and_then(|l| l.pointer("/metadata/labels"))
                .and_then(Value::as_object);
            return match labels {
                Some(labels) => predicate.label.matches(labels),
                None => predicate.label.matches(&serde_json::Map::new()),
            };
        }
        self.with_value(|value| predicate.matches(value))
    }

    /// The key and stored bytes of a compact object that still has them.
    fn stored(&self) -> Option<(Arc<str>, bytes::Bytes)> {
        self.inner
            .stored
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(|s| (s.key.clone(), s.data.clone()))
    }

    /// The tree of a compact object, from its stored bytes or its JSON.
    fn decode(&self) -> Value {
        let stored = self.stored();
        let decoded: Result<Value, String> = match stored {
            Some((key, data)) => crate::transform::decode_plain(key.as_bytes(), &data)
                .map(|mut value| {
                    set_resource_version(&mut value, self.revision);
                    value
                })
                .map_err(|e| e.to_string()),
            // The stored bytes are dropped only once the JSON is set.
            None => match self.inner.json.get() {
                Some(json) => serde_json::from_slice(json).map_err(|e| e.to_string()),
                None => Err("a compact object without bytes".to_string()),
            },
        };
        decoded.unwrap_or_else(|e| {
            // These bytes decoded when the object was made: not reached.
            tracing::error!(revision = self.revision, error = %e, "cached object no longer decodes");
            let mut value = Value::Object(serde_json::Map::new());
            set_resource_version(&mut value, self.revision);
            value
        })
    }

    /// The object's `apiVersion` and `kind` (empty where absent), read
    /// from its bytes without decoding the rest: a protobuf envelope names
    /// them, JSON is scanned rather than built into a tree. For the
    /// question a LIST asks of every item: is it stored in another version?
    pub fn type_meta(&self) -> (String, String) {
        #[derive(serde::Deserialize)]
        struct TypeMeta {
            #[serde(default, rename = "apiVersion")]
            api_version: Option<String>,
            #[serde(default)]
            kind: Option<String>,
        }
        self.read_part(
            |v| {
                let field = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                (field("apiVersion"), field("kind"))
            },
            |body| {
                k8s_proto::decode_unknown(body)
                    .ok()
                    .map(|u| (u.api_version, u.kind))
            },
            |json| {
                serde_json::from_slice::<TypeMeta>(json).ok().map(|t| {
                    (
                        t.api_version.unwrap_or_default(),
                        t.kind.unwrap_or_default(),
                    )
                })
            },
        )
    }

    /// `{"metadata": …}` of the object: a full object's metadata, or, for a
    /// compact one, only the metadata decoded from its bytes (the rest is
    /// skipped, not built). For readers of metadata alone: the garbage
    /// collector's graph takes every stored object and every change, and
    /// a whole decode per object was most of its cost.
    pub fn metadata_only(&self) -> Value {
        #[derive(serde::Deserialize)]
        struct MetadataOnly {
            #[serde(default)]
            metadata: Value,
        }
        let metadata = self.read_part(
            |v| v.get("metadata").cloned().unwrap_or_default(),
            |body| k8s_proto::decode_object_metadata(body).ok(),
            |json| {
                serde_json::from_slice::<MetadataOnly>(json)
                    .ok()
                    .map(|m| m.metadata)
            },
        );
        let mut top = serde_json::Map::with_capacity(1);
        top.insert("metadata".to_string(), metadata);
        Value::Object(top)
    }

    /// One part of the object: from the tree when this handle holds one,
    /// else read from the bytes by `protobuf` or `json` without building
    /// the rest; bytes that do not give it fall back to the whole decode.
    fn read_part<T>(
        &self,
        of_tree: impl Fn(&Value) -> T,
        protobuf: impl FnOnce(&[u8]) -> Option<T>,
        json: impl FnOnce(&[u8]) -> Option<T>,
    ) -> T {
        if let Some(value) = self.held() {
            return of_tree(value);
        }
        let read = match (self.stored(), self.inner.json.get()) {
            (Some((_, data)), _) if data.starts_with(crate::transform::PROTOBUF_MAGIC) => {
                protobuf(&data)
            }
            (Some((_, data)), _) => json(&data),
            (None, Some(bytes)) => json(bytes),
            (None, None) => None,
        };
        read.unwrap_or_else(|| of_tree(self.value()))
    }

    /// The CBOR of the object (`application/cbor`, self-described tag
    /// included), encoded once and shared.
    pub fn cbor(&self) -> &bytes::Bytes {
        self.inner.cbor.get_or_init(|| {
            let cbor = self.with_value(apimachinery::cbor::encode_object);
            bytes::Bytes::from(cbor.into_boxed_slice())
        })
    }

    /// The Kubernetes protobuf body of the object (envelope included),
    /// encoded once and shared; an error when its kind has no protobuf
    /// message (custom resources) or a value does not fit its field.
    pub fn protobuf(&self) -> Result<&bytes::Bytes, &str> {
        self.inner
            .protobuf
            .get_or_init(|| {
                self.with_value(k8s_proto::encode_object)
                    .map(|b| bytes::Bytes::from(b.into_boxed_slice()))
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(String::as_str)
    }

    /// The compact JSON of the object, encoded once and shared. A compact
    /// object then drops its stored bytes: the JSON stands for them.
    pub fn json(&self) -> &bytes::Bytes {
        let json = self.inner.json.get_or_init(|| {
            let json = self.with_value(serde_json::to_vec).unwrap_or_default();
            // `to_vec` grows by doubling: without the shrink a 2.3 KB object
            // would keep a 4 KiB buffer for as long as it is cached.
            bytes::Bytes::from(json.into_boxed_slice())
        });
        if self.inner.has_stored.load(Ordering::Acquire) {
            self.inner
                .stored
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            self.inner.has_stored.store(false, Ordering::Release);
        }
        json
    }

    /// `value` (as stored, without a resourceVersion) at `revision`: sets
    /// `metadata.resourceVersion` to the revision.
    pub fn at_revision(mut value: Value, revision: Revision) -> Object {
        set_resource_version(&mut value, revision);
        Object::new(Arc::new(value), revision)
    }

    /// A copy of this object carrying `revision` (as a `DELETED` event
    /// carries the last state at the deletion's revision).
    pub fn with_revision(&self, revision: Revision) -> Object {
        let mut value = match self.held() {
            Some(value) => Value::clone(value),
            None => self.decode(),
        };
        set_resource_version(&mut value, revision);
        Object::new(Arc::new(value), revision)
    }

    /// The object of a `Bookmark` event: only `metadata.resourceVersion`.
    pub fn bookmark(revision: Revision) -> Object {
        Object::at_revision(Value::Object(serde_json::Map::new()), revision)
    }
}

/// `{"metadata": {"labels": ...}}` of `value`, when it has labels.
fn labels_of(value: &Value) -> Option<Box<Value>> {
    let labels = value.pointer("/metadata/labels")?.as_object()?;
    if labels.is_empty() {
        return None;
    }
    let mut meta = serde_json::Map::with_capacity(1);
    meta.insert("labels".to_string(), Value::Object(labels.clone()));
    let mut top = serde_json::Map::with_capacity(1);
    top.insert("metadata".to_string(), Value::Object(meta));
    Some(Box::new(Value::Object(top)))
}

fn set_resource_version(value: &mut Value, revision: Revision) {
    if let Value::Object(map) = value {
        let meta = map
            .entry("metadata")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if let Value::Object(meta) = meta {
            // Where kube writes it (not appended): after `uid`.
            k8s_proto::set_resource_version(meta, revision.to_string());
        }
    }
}

#[derive(Debug, Clone)]
pub struct ListOptions {
    pub freshness: Freshness,
    /// Maximum number of matching items; `None` = all.
    pub limit: Option<usize>,
    pub continue_from: Option<ContinueFrom>,
    pub predicate: Predicate,
}

#[derive(Debug, Clone, Default)]
pub struct ListResult {
    pub items: Vec<Object>,
    /// The revision the list was read at (list `metadata.resourceVersion`).
    pub revision: Revision,
    /// Opaque continue token for the next page, if more items may follow.
    pub continue_token: Option<String>,
    /// Set only when the spec says so: a limited list without a selector
    /// predicate that stopped early (count of keys left after this page).
    pub remaining_item_count: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
    Bookmark,
}

/// One change seen by a watcher, already filtered by its predicate.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchEvent {
    pub kind: EventType,
    /// For `Deleted`: the object as it was, with `resourceVersion` set to the
    /// deletion revision. For `Bookmark`: only `revision` matters.
    pub object: Object,
}

pub type WatchStream = Pin<Box<dyn futures_util::Stream<Item = Result<WatchEvent>> + Send>>;

/// Where a watch starts and what it sends first.
///
/// - `initial_events`: synthetic `Added` for every matching object of a
///   snapshot chosen by `initial_freshness`, then one `Bookmark` at the
///   snapshot's revision, then every change after it (`after_revision` is
///   not used).
/// - otherwise: every change after `after_revision`; 0 = after the store's
///   current revision (a consistent read taken when the watch starts).
///
/// A start the store cannot serve for revision reasons (compacted, or a
/// revision not reached in time) is a stream whose only item is the error,
/// so the HTTP layer can send it as an `ERROR` event.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    pub after_revision: Revision,
    pub initial_events: bool,
    /// The snapshot of the initial events:
    /// - `MostRecent`: consistent, not older than etcd's revision read by a
    ///   quorum read after the watch arrived;
    /// - `NotOlderThan(n)`: any state at revision `n` or later; `n = 0` is
    ///   whatever the store has at hand (no quorum read). A store that does
    ///   not reach `n` (the cache waits for it briefly) answers
    ///   `TooLargeResourceVersion`;
    /// - `Exact(n)`: the state at exactly `n` (`Compacted` below etcd's
    ///   compaction).
    pub initial_freshness: Freshness,
    pub predicate: Predicate,
}

impl Default for WatchOptions {
    /// The changes after the current revision, unfiltered.
    fn default() -> Self {
        WatchOptions {
            after_revision: 0,
            initial_events: false,
            initial_freshness: Freshness::MostRecent,
            predicate: Predicate::everything(),
        }
    }
}

#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum StorageError {
    #[error("key {key} not found")]
    NotFound { key: String },
    #[error("key {key} already exists")]
    AlreadyExists { key: String },
    /// The key's mod revision is not the expected one.
    #[error("key {key} has been modified (current revision {current})")]
    Conflict { key: String, current: Revision },
    /// The requested revision was compacted away.
    #[error("revision {requested} has been compacted (compacted up to {compacted})")]
    Compacted {
        requested: Revision,
        compacted: Revision,
    },
    /// A continue token whose revision was compacted: the caller answers 410
    /// carrying `fresh_token`, which continues from the same key at the latest
    /// revision.
    #[error("continue token expired")]
    ContinueExpired { fresh_token: String },
    #[error("too large resource version: {requested}, current: {current}")]
    TooLargeResourceVersion {
        requested: Revision,
        current: Revision,
    },
    #[error("invalid continue token: {0}")]
    InvalidContinue(String),
    /// etcd could not be reached or did not answer in time.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// A stored value that does not decode.
    #[error("cannot decode stored object at {key}: {message}")]
    Corrupt { key: String, message: String },
    /// A stored value its transformer cannot read (a decryption failure:
    /// wrong or missing key, tampered ciphertext).
    #[error("cannot transform stored value at {key}: {message}")]
    Transform { key: String, message: String },
    #[error("internal storage error: {0}")]
    Internal(String),
}

pub type Result<T, E = StorageError> = std::result::Result<T, E>;

#[async_trait]
pub trait Storage: Send + Sync + 'static {
    /// Reads one key. `Freshness::Exact` is not used for gets.
    async fn get(&self, key: &str, freshness: Freshness) -> Result<Option<Object>>;

    /// Lists the keys under `prefix` (which ends in `/`), filtered by the
    /// predicate, honouring freshness, limit and continue.
    async fn list(&self, prefix: &str, opts: &ListOptions) -> Result<ListResult>;

    /// Creates `key`; `AlreadyExists` if it is there.
    async fn create(&self, key: &str, value: &Value) -> Result<Object>;

    /// Replaces `key` if its mod revision is `expected`; `Conflict` (with the
    /// current revision) otherwise, `NotFound` if absent.
    async fn update(&self, key: &str, value: &Value, expected: Revision) -> Result<Object>;

    /// Deletes `key`, if its mod revision is `expected` when given. Returns the
    /// object as it was, with `resourceVersion` set to the deletion revision.
    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<Object>;

    /// Watches `key_or_prefix` (a prefix ends in `/`).
    async fn watch(&self, key_or_prefix: &str, opts: WatchOptions) -> Result<WatchStream>;

    /// The latest revision of the store that holds `key_or_prefix` (a
    /// quorum read for etcd). Only a store over several etcd clusters
    /// looks at the key: each cluster has revisions of its own.
    async fn current_revision(&self, key_or_prefix: &str) -> Result<Revision>;

    /// Grants a lease of `ttl_seconds`: keys written with it (see
    /// [`Storage::create_with_lease`]) are deleted by the store when it
    /// expires, with an ordinary delete event (kube's event TTL). The
    /// lease is granted by the etcd cluster that holds `key` (a lease
    /// lives in one cluster), so it serves writes of that key's resource.
    async fn grant_lease(&self, key: &str, ttl_seconds: i64) -> Result<i64> {
        let _ = (key, ttl_seconds);
        Err(StorageError::Internal("this store has no leases".into()))
    }

    /// [`Storage::create`], attached to `lease` (from
    /// [`Storage::grant_lease`]).
    async fn create_with_lease(&self, key: &str, value: &Value, lease: i64) -> Result<Object> {
        let _ = (key, value, lease);
        Err(StorageError::Internal("this store has no leases".into()))
    }

    /// [`Storage::update`], attached to `lease`.
    async fn update_with_lease(
        &self,
        key: &str,
        value: &Value,
        expected: Revision,
        lease: i64,
    ) -> Result<Object> {
        let _ = (key, value, expected, lease);
        Err(StorageError::Internal("this store has no leases".into()))
    }

    /// Whether the value stored at `key` is in a form this store no longer
    /// writes (encrypted with a rotated-out key, or plaintext where values
    /// are now encrypted). An update that changes nothing still rewrites a
    /// stale value, as kube-apiserver's does, so rewriting every object
    /// completes a key rotation.
    async fn is_stale(&self, key: &str) -> Result<bool> {
        let _ = key;
        Ok(false)
    }

    /// `value` encoded once for a write at `key`: the bytes the store would
    /// put (transformed, encrypted where configured) and the object a read
    /// of them gives back (protobuf drops empty maps and lists). A
    /// read-modify-write judges a no-op on `Encoded::stored`, as
    /// kube-apiserver compares encoded bytes, and then writes the same
    /// bytes with [`Storage::update_encoded`] instead of encoding again.
    fn encode(&self, key: &str, value: &Value) -> Result<Encoded>;

    /// [`Storage::update`] of an [`Storage::encode`]d value (attached to
    /// `lease` when given).
    async fn update_encoded(
        &self,
        key: &str,
        value: Encoded,
        expected: Revision,
        lease: Option<i64>,
    ) -> Result<Object>;
}

/// A value encoded for one key by [`Storage::encode`].
#[derive(Debug, Clone)]
pub struct Encoded {
    /// What goes into etcd.
    pub data: Vec<u8>,
    /// What a read of `data` gives back, without a resourceVersion.
    pub stored: Value,
}

impl Encoded {
    /// Whether a read of this value at `revision` would equal `object`
    /// (what is stored at `revision`): a write of it would change nothing.
    /// Compared in place, without a copy carrying the resourceVersion.
    pub fn same_as(&self, object: &Object) -> bool {
        let (Value::Object(ours), Value::Object(theirs)) = (&self.stored, object.value()) else {
            return false;
        };
        if ours.len() != theirs.len() {
            return false;
        }
        ours.iter().all(|(k, v)| match theirs.get(k) {
            Some(Value::Object(their_meta)) if k == "metadata" => {
                let Value::Object(our_meta) = v else {
                    return false;
                };
                let rv = their_meta.get("resourceVersion");
                let extra = usize::from(rv.is_some());
                our_meta.len() + extra == their_meta.len()
                    && rv.is_none_or(|rv| rv.as_str() == Some(&object.revision.to_string()))
                    && our_meta
                        .iter()
                        .all(|(mk, mv)| mk != "resourceVersion" && their_meta.get(mk) == Some(mv))
            }
            Some(theirs) => theirs == v,
            None => false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_is_the_same_as_a_stored_object_but_for_its_resource_version() {
        use serde_json::json;
        let stored = Object::at_revision(
            json!({"kind": "ConfigMap", "metadata": {"name": "a", "uid": "u"}, "data": {"k": "v"}}),
            7,
        );
        let encoded = |stored: Value| Encoded {
            data: Vec::new(),
            stored,
        };
        let same =
            json!({"kind": "ConfigMap", "metadata": {"uid": "u", "name": "a"}, "data": {"k": "v"}});
        assert!(encoded(same.clone()).same_as(&stored));
        for differs in [
            json!({"kind": "ConfigMap", "metadata": {"name": "a", "uid": "u"}, "data": {"k": "w"}}),
            json!({"kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}}),
            json!({"kind": "ConfigMap", "metadata": {"name": "a", "uid": "u", "labels": {}}, "data": {"k": "v"}}),
            json!({"kind": "ConfigMap", "metadata": {"name": "a", "uid": "u"}}),
            json!({"kind": "ConfigMap", "metadata": {"name": "a", "uid": "u", "resourceVersion": "7"}, "data": {"k": "v"}}),
        ] {
            assert!(!encoded(differs.clone()).same_as(&stored), "{differs}");
        }
        // The object's resourceVersion must be its revision's.
        let moved = Object::new(Arc::clone(stored.value_arc()), 8);
        assert!(!encoded(same).same_as(&moved));
    }

    #[test]
    fn json_is_encoded_once_and_shared_by_clones() {
        let a = Object::at_revision(serde_json::json!({"metadata": {"name": "x"}}), 5);
        let b = a.clone();
        let first = a.json().as_ptr();
        assert_eq!(b.json().as_ptr(), first, "clones share one encoding");
        let back: Value = serde_json::from_slice(b.json()).unwrap();
        assert_eq!(back, *a.value());
        assert_eq!(back["metadata"]["resourceVersion"], "5");
    }

    #[test]
    fn protobuf_is_encoded_once_and_shared_by_clones() {
        let a = Object::at_revision(
            serde_json::json!({"kind": "ConfigMap", "apiVersion": "v1",
                               "metadata": {"name": "x"}, "data": {"k": "v"}}),
            5,
        );
        let b = a.clone();
        let first = a.protobuf().unwrap().as_ptr();
        assert_eq!(b.protobuf().unwrap().as_ptr(), first);
        let back = k8s_proto::decode_object(b.protobuf().unwrap()).unwrap();
        assert_eq!(back["metadata"]["resourceVersion"], "5");
        assert_eq!(back["data"]["k"], "v");
        let cr = Object::at_revision(
            serde_json::json!({"kind": "Foo", "apiVersion": "example.com/v1"}),
            6,
        );
        assert!(cr.protobuf().is_err());
    }

    fn configmap() -> Value {
        serde_json::json!({"kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"name": "x", "namespace": "ns", "uid": "u-1",
                         "labels": {"app": "web"}},
            "data": {"k": "v"}})
    }

    /// A compact object of `value` stored as protobuf, at revision 7.
    fn compact_of(value: &Value) -> Object {
        let full = Object::at_revision(value.clone(), 7);
        let stored = full.protobuf().unwrap().clone();
        Object::compact(Arc::from("/registry/configmaps/ns/x"), &stored, value, 7)
    }

    #[test]
    fn a_compact_object_reads_as_the_full_one() {
        let full = Object::at_revision(configmap(), 7);
        let compact = compact_of(&configmap());
        assert!(compact.is_compact() && !full.is_compact());
        assert_eq!(compact.value(), full.value());
        assert_eq!(compact.value()["metadata"]["resourceVersion"], "7");
        assert_eq!(compact.json(), full.json());
        assert_eq!(compact.protobuf().unwrap(), full.protobuf().unwrap());
        assert_eq!(compact.cbor(), full.cbor());
        assert_eq!(compact, full);
    }

    #[test]
    fn a_compact_object_keeps_one_form_of_bytes_and_no_tree() {
        let compact = compact_of(&configmap());
        let handle = compact.clone();
        assert!(compact.inner.has_stored.load(Ordering::Acquire));
        let json = compact.json().clone();
        // The JSON replaced the stored bytes, and the tree is decoded from it.
        assert!(compact.inner.stored.lock().unwrap().is_none());
        assert!(!compact.inner.has_stored.load(Ordering::Acquire));
        assert!(compact.held().is_none(), "encoding kept no tree");
        assert_eq!(handle.value()["data"]["k"], "v");
        // The tree one handle decoded is that handle's only.
        assert!(handle.held().is_some());
        assert!(compact.held().is_none());
        assert_eq!(compact.json().as_ptr(), json.as_ptr());
        assert_eq!(compact.value(), handle.value());
    }

    #[test]
    fn metadata_only_is_the_decoded_metadata_without_building_the_object() {
        let mut want = configmap()["metadata"].clone();
        let full = Object::at_revision(configmap(), 7);
        // A full object: its own metadata (resourceVersion set).
        want["resourceVersion"] = "7".into();
        assert_eq!(full.metadata_only(), serde_json::json!({"metadata": want}));
        // Compact, from protobuf bytes (here the full object's, so they
        // carry its resourceVersion) and then from its JSON: the same
        // metadata, and no tree kept or built.
        let compact = compact_of(&configmap());
        assert_eq!(compact.metadata_only(), full.metadata_only());
        compact.json();
        assert!(compact.inner.stored.lock().unwrap().is_none());
        let from_json = compact.metadata_only();
        assert_eq!(from_json["metadata"]["uid"], "u-1");
        assert_eq!(from_json["metadata"]["labels"]["app"], "web");
        assert!(from_json.get("data").is_none());
        assert!(compact.held().is_none(), "nothing decoded whole");
    }

    #[test]
    fn type_meta_is_read_without_decoding_the_object() {
        let full = Object::at_revision(configmap(), 7);
        let want = ("v1".to_string(), "ConfigMap".to_string());
        assert_eq!(full.type_meta(), want);
        // From protobuf bytes, then from the JSON that replaced them.
        let compact = compact_of(&configmap());
        assert_eq!(compact.type_meta(), want);
        compact.json();
        assert_eq!(compact.type_meta(), want);
        assert!(compact.held().is_none(), "nothing decoded whole");
        // A custom resource's JSON bytes, kind and apiVersion anywhere.
        let cr = br#"{"spec":{"kind":"no"},"kind":"Widget","metadata":{"name":"w"},"apiVersion":"example.com/v2"}"#;
        let value: Value = serde_json::from_slice(cr).unwrap();
        let compact = Object::compact(Arc::from("/registry/example.com/widgets/w"), cr, &value, 3);
        assert_eq!(
            compact.type_meta(),
            ("example.com/v2".to_string(), "Widget".to_string())
        );
        assert!(compact.held().is_none());
    }

    #[test]
    fn selectors_match_a_compact_object_without_decoding_it() {
        use apimachinery::selector::{FieldSelector, LabelSelector};
        let compact = compact_of(&configmap());
        let with = |label: &str, field: &str| Predicate {
            label: LabelSelector::parse(label).unwrap(),
            field: FieldSelector::parse(field).unwrap(),
            attrs: Default::default(),
        };
        assert!(compact.matches(&with("app=web", "")));
        assert!(!compact.matches(&with("app=db", "")));
        assert!(compact.matches(&with("", "metadata.name=x,metadata.namespace=ns")));
        assert!(!compact.matches(&with("app", "metadata.name=y")));
        assert!(compact.held().is_none(), "nothing decoded");
        assert!(compact.inner.has_stored.load(Ordering::Acquire));
    }

    #[test]
    fn a_written_object_is_compacted_around_its_json() {
        let full = Object::at_revision(configmap(), 9);
        let compact = full.compacted();
        assert!(compact.is_compact());
        assert_eq!(
            compact.json().as_ptr(),
            full.json().as_ptr(),
            "shared bytes"
        );
        assert_eq!(compact.value(), full.value());
        assert_eq!(
            compact.compacted().inner.as_ref() as *const Inner,
            compact.inner.as_ref() as *const Inner
        );
        // `value` left a tree in this handle; a compacted one keeps bytes.
        assert!(compact.held().is_some());
        assert!(compact.compacted().held().is_none());
    }

    #[test]
    fn cbor_is_encoded_once_and_shared_by_clones() {
        // Custom resources too: CBOR needs no message table.
        let a = Object::at_revision(
            serde_json::json!({"kind": "Foo", "apiVersion": "example.com/v1",
                               "metadata": {"name": "x"}, "spec": {"n": 1}}),
            5,
        );
        let b = a.clone();
        let first = a.cbor().as_ptr();
        assert_eq!(b.cbor().as_ptr(), first, "clones share one encoding");
        assert!(b.cbor().starts_with(&apimachinery::cbor::SELF_DESCRIBED));
        let back = apimachinery::cbor::decode(b.cbor()).unwrap();
        assert_eq!(back, *a.value());
        assert_eq!(back["metadata"]["resourceVersion"], "5");
    }
}
