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
#[derive(Clone, Default)]
pub struct Transformers {
    /// Longest prefix first.
    rules: Arc<Vec<(String, Arc<dyn ValueTransformer>)>>,
}

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
        }
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
}
