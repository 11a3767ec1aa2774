//! Value transformers: how stored bytes differ from an object's JSON.
//!
//! Encryption at rest is one: the API server configures a transformer per
//! resource (by etcd key prefix) and the storage layer applies it to every
//! value it writes (`EtcdStore::create`, `update`) and every raw etcd value
//! it decodes (the etcd store's reads and watches, the watch cache's lists,
//! watch and history backfill). The watch cache therefore holds decoded
//! (decrypted) objects in memory only; etcd sees what the transformer wrote.
//!
//! The storage layer knows nothing of keys or ciphers: a transformer gets
//! the value and the full etcd key (authenticated data for AEAD ciphers,
//! as kube-apiserver binds ciphertext to its key).

use crate::storage::StorageError;
use serde_json::Value;
use std::borrow::Cow;
use std::sync::Arc;

/// Turns an object's JSON into the bytes stored in etcd and back.
pub trait ValueTransformer: Send + Sync + 'static {
    /// The bytes to store at `key` for `data`.
    fn transform_to_storage(&self, key: &str, data: Vec<u8>) -> Result<Vec<u8>, TransformError>;
    /// The object's JSON stored at `key` as `data`.
    fn transform_from_storage<'a>(
        &self,
        key: &str,
        data: &'a [u8],
    ) -> Result<Cow<'a, [u8]>, TransformError>;
    /// Whether `data` is in a form `transform_to_storage` no longer writes (encrypted
    /// with a key that is not the first any more, or plaintext where
    /// values are now encrypted): an unchanged update rewrites it then, so
    /// that rewriting every object completes a key rotation.
    fn is_stale(&self, data: &[u8]) -> bool {
        let _ = data;
        false
    }
}

/// Why a value could not be transformed (for the log: never secret
/// material, never the value).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TransformError(pub String);

/// The transformer of each key prefix; keys under no configured prefix are
/// stored as they are. The longest matching prefix wins.
///
/// Also the storage codec: values under a protobuf prefix
/// ([`Transformers::with_protobuf`]) are written as kube's protobuf
/// (`k8s\0` + `runtime.Unknown`), every other value as JSON, and either
/// is read back whatever the prefix says (the codec goes inside the
/// transformer: kube encrypts the encoded bytes).
#[derive(Clone, Default)]
pub struct Transformers {
    /// Longest prefix first.
    rules: Arc<Vec<(String, Arc<dyn ValueTransformer>)>>,
    /// Key prefixes whose values are written as protobuf.
    protobuf: Arc<Vec<String>>,
}

/// The first bytes of a protobuf value (kube's storage serializer).
pub const PROTOBUF_MAGIC: &[u8] = b"k8s\0";

impl std::fmt::Debug for Transformers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.rules.iter().map(|(p, _)| p))
            .finish()
    }
}

impl Transformers {
    /// Values stored as they are.
    pub fn none() -> Self {
        Self::default()
    }

    /// One transformer per key prefix (a prefix should end in `/`).
    pub fn new(rules: Vec<(String, Arc<dyn ValueTransformer>)>) -> Self {
        let mut rules = rules;
        rules.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        Transformers {
            rules: Arc::new(rules),
            protobuf: Arc::default(),
        }
    }

    /// These transformers, writing values under `prefixes` as protobuf.
    pub fn with_protobuf(mut self, prefixes: Vec<String>) -> Self {
        self.protobuf = Arc::new(prefixes);
        self
    }

    /// Whether values at `key` are written as protobuf.
    pub fn writes_protobuf(&self, key: &str) -> bool {
        self.protobuf.iter().any(|p| key.starts_with(p.as_str()))
    }

    /// The encoded (not yet transformed) value to store at `key` for
    /// `stored`, and the object a read of it gives back: protobuf drops
    /// what it cannot carry (empty maps and lists), and a read of the
    /// value, from etcd or the watch cache, must equal what the write
    /// answered.
    pub fn encode(&self, key: &str, stored: Value) -> Result<(Vec<u8>, Value), StorageError> {
        if self.writes_protobuf(key) {
            let data = k8s_proto::encode_object(&stored).map_err(|e| {
                StorageError::Internal(format!("cannot encode object at {key} as protobuf: {e}"))
            })?;
            let back = decode_plain(key.as_bytes(), &data)?;
            return Ok((data, back));
        }
        let data = serde_json::to_vec(&stored)
            .map_err(|e| StorageError::Internal(format!("cannot encode object: {e}")))?;
        Ok((data, stored))
    }

    /// The object stored at `key` as `data` (transformed, then protobuf or
    /// JSON by its first bytes).
    pub fn decode(&self, key: &[u8], data: &[u8]) -> Result<Value, StorageError> {
        let data = self.read(key, data)?;
        decode_plain(key, &data)
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The transformer of `key`, if any.
    pub fn for_key(&self, key: &str) -> Option<&dyn ValueTransformer> {
        self.rules
            .iter()
            .find(|(prefix, _)| key.starts_with(prefix.as_str()))
            .map(|(_, t)| t.as_ref())
    }

    /// The bytes to store at `key`.
    pub fn write(&self, key: &str, data: Vec<u8>) -> Result<Vec<u8>, StorageError> {
        match self.for_key(key) {
            None => Ok(data),
            Some(t) => t
                .transform_to_storage(key, data)
                .map_err(|e| StorageError::Transform {
                    key: key.to_string(),
                    message: e.0,
                }),
        }
    }

    /// Whether the value stored at `key` should be rewritten even when the
    /// object did not change (see [`ValueTransformer::is_stale`]).
    pub fn is_stale(&self, key: &str, data: &[u8]) -> bool {
        self.for_key(key).is_some_and(|t| t.is_stale(data))
    }

    /// The object's JSON stored at `key` (a key that is not UTF-8 has no
    /// transformer).
    pub fn read<'a>(&self, key: &[u8], data: &'a [u8]) -> Result<Cow<'a, [u8]>, StorageError> {
        let Ok(key) = std::str::from_utf8(key) else {
            return Ok(Cow::Borrowed(data));
        };
        match self.for_key(key) {
            None => Ok(Cow::Borrowed(data)),
            Some(t) => t
                .transform_from_storage(key, data)
                .map_err(|e| StorageError::Transform {
                    key: key.to_string(),
                    message: e.0,
                }),
        }
    }
}

/// An encoded value (already through its transformer), protobuf or JSON
/// by its first bytes.
pub fn decode_plain(key: &[u8], data: &[u8]) -> Result<Value, StorageError> {
    let corrupt = |message: String| StorageError::Corrupt {
        key: String::from_utf8_lossy(key).into_owned(),
        message,
    };
    if data.starts_with(PROTOBUF_MAGIC) {
        k8s_proto::decode_object(data).map_err(|e| corrupt(e.to_string()))
    } else {
        serde_json::from_slice(data).map_err(|e| corrupt(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Tag(&'static str);

    impl ValueTransformer for Tag {
        fn transform_to_storage(
            &self,
            _: &str,
            mut data: Vec<u8>,
        ) -> Result<Vec<u8>, TransformError> {
            let mut out = self.0.as_bytes().to_vec();
            out.append(&mut data);
            Ok(out)
        }
        fn transform_from_storage<'a>(
            &self,
            _: &str,
            data: &'a [u8],
        ) -> Result<Cow<'a, [u8]>, TransformError> {
            data.strip_prefix(self.0.as_bytes())
                .map(Cow::Borrowed)
                .ok_or_else(|| TransformError("no tag".into()))
        }
    }

    #[test]
    fn longest_prefix_wins_and_other_keys_pass_through() {
        let t = Transformers::new(vec![
            (
                "/r/".into(),
                Arc::new(Tag("all:")) as Arc<dyn ValueTransformer>,
            ),
            ("/r/secrets/".into(), Arc::new(Tag("s:"))),
        ]);
        assert_eq!(
            t.write("/r/secrets/a/b", b"x".to_vec()).ok(),
            Some(b"s:x".to_vec())
        );
        assert_eq!(
            t.write("/r/pods/a/b", b"x".to_vec()).ok(),
            Some(b"all:x".to_vec())
        );
        assert_eq!(t.write("/other", b"x".to_vec()).ok(), Some(b"x".to_vec()));
        assert_eq!(
            t.read(b"/r/secrets/a/b", b"s:x").ok().as_deref(),
            Some(&b"x"[..])
        );
        assert!(matches!(
            t.read(b"/r/secrets/a/b", b"x"),
            Err(StorageError::Transform { .. })
        ));
    }

    #[test]
    fn protobuf_under_its_prefixes_and_both_read_everywhere() {
        let t = Transformers::new(vec![(
            "/r/secrets/".into(),
            Arc::new(Tag("s:")) as Arc<dyn ValueTransformer>,
        )])
        .with_protobuf(vec!["/r/configmaps/".into(), "/r/secrets/".into()]);
        let cm = serde_json::json!({
            "kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"name": "a", "namespace": "n", "labels": {}},
            "data": {"k": "v"},
        });
        let (pb, back) = t.encode("/r/configmaps/n/a", cm.clone()).expect("encodes");
        assert!(pb.starts_with(PROTOBUF_MAGIC));
        // What a read gives back: the empty map is not carried.
        assert!(back["metadata"].get("labels").is_none(), "{back}");
        assert_eq!(back["data"]["k"], "v");
        assert_eq!(t.decode(b"/r/configmaps/n/a", &pb).ok(), Some(back.clone()));
        // JSON where no protobuf prefix applies, and JSON read under one.
        let (json, same) = t.encode("/r/widgets/n/a", cm.clone()).expect("encodes");
        assert_eq!(json.first(), Some(&b'{'));
        assert_eq!(same, cm);
        assert_eq!(t.decode(b"/r/configmaps/n/a", &json).ok(), Some(cm.clone()));
        // The codec goes inside the transformer.
        let (pb, _) = t.encode("/r/secrets/n/a", cm.clone()).expect("encodes");
        let sealed = t.write("/r/secrets/n/a", pb).expect("transforms");
        assert!(sealed.starts_with(b"s:k8s\0"));
        assert_eq!(t.decode(b"/r/secrets/n/a", &sealed).ok(), Some(back));
        // Neither protobuf nor JSON: corrupt, not a panic.
        assert!(matches!(
            t.decode(b"/r/configmaps/n/a", b"k8s\0\xff\xff"),
            Err(StorageError::Corrupt { .. })
        ));
    }
}
