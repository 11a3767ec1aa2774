//! Encryption at rest: `--encryption-provider-config`.
//!
//! The file is kube-apiserver's `EncryptionConfiguration`
//! (`apiserver.config.k8s.io/v1`, YAML or JSON). Each `resources[]` entry
//! names resources (`secrets`, `deployments.apps`, `*.apps`, `*.` for every
//! core resource, `*.*` for all) and an ordered list of providers
//! (`aesgcm`, `aescbc`, `secretbox` with `keys[]`, and `identity`). The
//! first entry naming a resource decides for it; resources no entry names
//! are stored as plaintext. Without the flag nothing is encrypted: the
//! configuration alone decides what is (kube-apiserver behaves the same).
//!
//! Within an entry the first provider (its first key) encrypts every write;
//! every provider and key can read, so keys rotate by putting a new key
//! first and rewriting the objects. Stored values carry kube-apiserver's
//! prefix `k8s:enc:<provider>:v1:<key name>:` and its ciphertext layouts, so
//! either server reads the other's data (for resources stored at the same
//! etcd key: core resources such as secrets are):
//!
//! - `aesgcm`: 12-byte random nonce, then AES-GCM ciphertext and tag, with
//!   the etcd key as additional authenticated data (a value copied to
//!   another key does not decrypt);
//! - `aescbc`: 16-byte random IV, then AES-CBC ciphertext with PKCS#7
//!   padding (not authenticated: kube deprecates it too);
//! - `secretbox`: 24-byte random nonce, then the NaCl secretbox (tag, then
//!   XSalsa20 ciphertext).
//!
//! Reading: a value with a provider prefix is decrypted by the provider and
//! key it names; a value without the `k8s:enc:` prefix is plaintext, read as
//! such whatever the providers (data written before encryption was turned
//! on stays readable until rewritten; kube-apiserver reads it only when
//! `identity` is listed). An encrypted value no configured key can decrypt
//! is a storage error the client sees as a 500 `failed to decrypt`, never a
//! panic.
//!
//! The watch cache decodes through the same transformers (see
//! `watchcache::transform`): decrypted objects live in memory only.

use crate::registry::Registry;
use aes_gcm::aead::{Aead, KeyInit, Payload};
use base64::Engine;
use rand::RngCore;
use serde::Deserialize;
use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;
use watchcache::{TransformError, Transformers, ValueTransformer};

/// Every encrypted value starts with this.
pub const ENCRYPTED_PREFIX: &[u8] = b"k8s:enc:";

const API_VERSION: &str = "apiserver.config.k8s.io/v1";
const KIND: &str = "EncryptionConfiguration";

/// Why a configuration is refused (the server does not start).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("encryption provider configuration: {0}")]
pub struct ConfigError(pub String);

fn err(msg: impl Into<String>) -> ConfigError {
    ConfigError(msg.into())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FileConfig {
    api_version: Option<String>,
    kind: Option<String>,
    #[serde(default)]
    resources: Vec<FileResources>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileResources {
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    providers: Vec<FileProvider>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileProvider {
    aesgcm: Option<FileKeys>,
    aescbc: Option<FileKeys>,
    secretbox: Option<FileKeys>,
    identity: Option<serde_json::Value>,
    kms: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileKeys {
    #[serde(default)]
    keys: Vec<FileKey>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileKey {
    name: String,
    secret: String,
}

/// A parsed, validated configuration.
#[derive(Clone)]
pub struct EncryptionConfig {
    entries: Vec<Entry>,
}

impl std::fmt::Debug for EncryptionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never prints key material.
        f.debug_list()
            .entries(self.entries.iter().map(|e| &e.resources))
            .finish()
    }
}

#[derive(Clone)]
struct Entry {
    resources: Vec<String>,
    transformer: Arc<PrefixTransformer>,
}

impl EncryptionConfig {
    /// Reads and parses the file at `path`.
    pub fn load(path: &std::path::Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| err(format!("cannot read {}: {e}", path.display())))?;
        Self::parse(&text)
    }

    /// Parses a configuration (YAML or JSON).
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let file: FileConfig =
            serde_yaml_ng::from_str(text).map_err(|e| err(format!("cannot parse: {e}")))?;
        if file.api_version.as_deref() != Some(API_VERSION) {
            return Err(err(format!(
                "apiVersion must be {API_VERSION:?}, got {:?}",
                file.api_version.unwrap_or_default()
            )));
        }
        if file.kind.as_deref() != Some(KIND) {
            return Err(err(format!(
                "kind must be {KIND:?}, got {:?}",
                file.kind.unwrap_or_default()
            )));
        }
        if file.resources.is_empty() {
            return Err(err("resources: at least one entry is required"));
        }
        let mut entries = Vec::new();
        for (i, r) in file.resources.into_iter().enumerate() {
            let at = format!("resources[{i}]");
            if r.resources.is_empty() {
                return Err(err(format!("{at}.resources: at least one is required")));
            }
            for name in &r.resources {
                validate_resource_name(name)
                    .map_err(|why| err(format!("{at}.resources: {name:?}: {why}")))?;
            }
            if r.providers.is_empty() {
                return Err(err(format!("{at}.providers: at least one is required")));
            }
            let mut providers = Vec::new();
            for (j, p) in r.providers.into_iter().enumerate() {
                providers
                    .push(provider(p).map_err(|why| err(format!("{at}.providers[{j}]: {why}")))?);
            }
            entries.push(Entry {
                resources: r.resources,
                transformer: Arc::new(PrefixTransformer { providers }),
            });
        }
        Ok(EncryptionConfig { entries })
    }

    /// The provider list of `group`'s `resource`: the first entry naming it
    /// (exactly or by wildcard).
    fn for_resource(&self, group: &str, resource: &str) -> Option<&Arc<PrefixTransformer>> {
        self.entries
            .iter()
            .find(|e| e.resources.iter().any(|n| names(n, group, resource)))
            .map(|e| &e.transformer)
    }

    /// The storage transformers of every resource the registry serves, by
    /// etcd key prefix under `prefix` (the `--etcd-prefix`).
    pub fn transformers(&self, prefix: &str, registry: Registry) -> Transformers {
        let prefix = prefix.trim_end_matches('/');
        let mut seen = HashSet::new();
        let mut rules: Vec<(String, Arc<dyn ValueTransformer>)> = Vec::new();
        for r in registry.all().iter() {
            if !seen.insert((r.group.clone(), r.plural.clone())) {
                continue;
            }
            if let Some(t) = self.for_resource(&r.group, &r.plural) {
                let key = format!("{prefix}/{}/", crate::storage_format::segment(&r));
                rules.push((key, Arc::clone(t) as Arc<dyn ValueTransformer>));
            }
        }
        Transformers::new(rules)
    }
}

/// Whether configuration name `name` covers `group`'s `resource`.
fn names(name: &str, group: &str, resource: &str) -> bool {
    let (res, grp) = name.split_once('.').unwrap_or((name, ""));
    match (res, grp) {
        ("*", "*") => true,
        ("*", g) => g == group,
        (r, g) => r == resource && g == group,
    }
}

fn validate_resource_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("must not be empty");
    }
    if name == "*" {
        return Err("use '*.*' for all resources, '*.' for all core resources");
    }
    if name
        .chars()
        .any(|c| c.is_ascii_uppercase() || c.is_whitespace() || c == '/')
    {
        return Err("must be a lowercase resource name, optionally with .group");
    }
    let (res, grp) = name.split_once('.').unwrap_or((name, ""));
    if res != "*" && res.contains('*') || grp != "*" && grp.contains('*') {
        return Err("a wildcard must be a whole resource or group");
    }
    if res != "*" && grp == "*" {
        return Err("'resource.*' is not supported; use '*.*'");
    }
    Ok(())
}

fn provider(p: FileProvider) -> Result<Provider, String> {
    let FileProvider {
        aesgcm,
        aescbc,
        secretbox,
        identity,
        kms,
    } = p;
    let given = [
        aesgcm.is_some(),
        aescbc.is_some(),
        secretbox.is_some(),
        identity.is_some(),
        kms.is_some(),
    ]
    .iter()
    .filter(|b| **b)
    .count();
    if given != 1 {
        return Err(
            "exactly one provider type (aesgcm, aescbc, secretbox, identity) per entry".into(),
        );
    }
    if kms.is_some() {
        return Err("the kms provider is not supported".into());
    }
    if identity.is_some() {
        return Ok(Provider::Identity);
    }
    let (kind, keys) = match (aesgcm, aescbc, secretbox) {
        (Some(k), _, _) => (Kind::AesGcm, k),
        (_, Some(k), _) => (Kind::AesCbc, k),
        (_, _, Some(k)) => (Kind::Secretbox, k),
        _ => return Err("no provider".into()),
    };
    if keys.keys.is_empty() {
        return Err(format!(
            "{}.keys: at least one key is required",
            kind.name()
        ));
    }
    let mut names = HashSet::new();
    let mut out = Vec::new();
    for (i, k) in keys.keys.into_iter().enumerate() {
        let at = format!("{}.keys[{i}]", kind.name());
        if k.name.is_empty() {
            return Err(format!("{at}.name: required"));
        }
        if !names.insert(k.name.clone()) {
            return Err(format!("{at}.name: duplicate key name {:?}", k.name));
        }
        let secret = base64::engine::general_purpose::STANDARD
            .decode(k.secret.trim())
            .map_err(|_| format!("{at}.secret: must be base64"))?;
        let cipher = Cipher::new(kind, &secret).map_err(|why| format!("{at}.secret: {why}"))?;
        out.push(Key {
            prefix: format!("k8s:enc:{}:v1:{}:", kind.name(), k.name).into_bytes(),
            name: k.name,
            cipher,
        });
    }
    Ok(Provider::Keys { kind, keys: out })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    AesGcm,
    AesCbc,
    Secretbox,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::AesGcm => "aesgcm",
            Kind::AesCbc => "aescbc",
            Kind::Secretbox => "secretbox",
        }
    }
}

enum Provider {
    Identity,
    Keys { kind: Kind, keys: Vec<Key> },
}

struct Key {
    name: String,
    /// `k8s:enc:<provider>:v1:<name>:`
    prefix: Vec<u8>,
    cipher: Cipher,
}

enum Cipher {
    Gcm128(Box<aes_gcm::Aes128Gcm>),
    Gcm192(Box<aes_gcm::AesGcm<aes::Aes192, aes_gcm::aead::consts::U12>>),
    Gcm256(Box<aes_gcm::Aes256Gcm>),
    Cbc(Vec<u8>),
    Secretbox(Box<crypto_secretbox::XSalsa20Poly1305>),
}

const GCM_NONCE: usize = 12;
const CBC_BLOCK: usize = 16;
const SECRETBOX_NONCE: usize = 24;

impl Cipher {
    fn new(kind: Kind, secret: &[u8]) -> Result<Cipher, String> {
        let bad_size = |want: &str| {
            format!(
                "a {} key must be {want} bytes, got {}",
                kind.name(),
                secret.len()
            )
        };
        Ok(match kind {
            Kind::AesGcm => match secret.len() {
                16 => Cipher::Gcm128(Box::new(
                    aes_gcm::Aes128Gcm::new_from_slice(secret).map_err(|_| bad_size("16"))?,
                )),
                24 => Cipher::Gcm192(Box::new(
                    aes_gcm::AesGcm::new_from_slice(secret).map_err(|_| bad_size("24"))?,
                )),
                32 => Cipher::Gcm256(Box::new(
                    aes_gcm::Aes256Gcm::new_from_slice(secret).map_err(|_| bad_size("32"))?,
                )),
                _ => return Err(bad_size("16, 24 or 32")),
            },
            // kube-apiserver: 32 bytes for AES-CBC, 16, 24 or 32 for GCM.
            Kind::AesCbc => match secret.len() {
                32 => Cipher::Cbc(secret.to_vec()),
                _ => return Err(bad_size("32")),
            },
            Kind::Secretbox => match secret.len() {
                32 => Cipher::Secretbox(Box::new(
                    crypto_secretbox::XSalsa20Poly1305::new_from_slice(secret)
                        .map_err(|_| bad_size("32"))?,
                )),
                _ => return Err(bad_size("32")),
            },
        })
    }

    /// Nonce or IV, then ciphertext, as kube-apiserver lays them out.
    fn seal(&self, aad: &[u8], data: &[u8]) -> Result<Vec<u8>, String> {
        let mut rng = rand::rng();
        match self {
            Cipher::Gcm128(_) | Cipher::Gcm192(_) | Cipher::Gcm256(_) => {
                let mut nonce = [0u8; GCM_NONCE];
                rng.fill_bytes(&mut nonce);
                let payload = Payload { msg: data, aad };
                let nonce_ref = aes_gcm::Nonce::from_slice(&nonce);
                let sealed = match self {
                    Cipher::Gcm128(c) => c.encrypt(nonce_ref, payload),
                    Cipher::Gcm192(c) => c.encrypt(nonce_ref, payload),
                    Cipher::Gcm256(c) => c.encrypt(nonce_ref, payload),
                    _ => unreachable_cipher(),
                }
                .map_err(|_| "encryption failed".to_string())?;
                Ok([&nonce[..], &sealed].concat())
            }
            Cipher::Cbc(key) => {
                let mut iv = [0u8; CBC_BLOCK];
                rng.fill_bytes(&mut iv);
                let sealed = cbc_encrypt(key, &iv, data)?;
                Ok([&iv[..], &sealed].concat())
            }
            Cipher::Secretbox(c) => {
                let mut nonce = [0u8; SECRETBOX_NONCE];
                rng.fill_bytes(&mut nonce);
                let sealed = c
                    .encrypt(crypto_secretbox::Nonce::from_slice(&nonce), data)
                    .map_err(|_| "encryption failed".to_string())?;
                Ok([&nonce[..], &sealed].concat())
            }
        }
    }

    fn open(&self, aad: &[u8], data: &[u8]) -> Result<Vec<u8>, String> {
        match self {
            Cipher::Gcm128(_) | Cipher::Gcm192(_) | Cipher::Gcm256(_) => {
                if data.len() < GCM_NONCE {
                    return Err("the stored data was shorter than the required size".into());
                }
                let (nonce, sealed) = data.split_at(GCM_NONCE);
                let payload = Payload { msg: sealed, aad };
                let nonce = aes_gcm::Nonce::from_slice(nonce);
                match self {
                    Cipher::Gcm128(c) => c.decrypt(nonce, payload),
                    Cipher::Gcm192(c) => c.decrypt(nonce, payload),
                    Cipher::Gcm256(c) => c.decrypt(nonce, payload),
                    _ => unreachable_cipher(),
                }
                .map_err(|_| "cipher: message authentication failed".into())
            }
            Cipher::Cbc(key) => {
                if data.len() < CBC_BLOCK {
                    return Err("the stored data was shorter than the required size".into());
                }
                let (iv, sealed) = data.split_at(CBC_BLOCK);
                cbc_decrypt(key, iv, sealed)
            }
            Cipher::Secretbox(c) => {
                if data.len() < SECRETBOX_NONCE {
                    return Err("the stored data was shorter than the required size".into());
                }
                let (nonce, sealed) = data.split_at(SECRETBOX_NONCE);
                c.decrypt(crypto_secretbox::Nonce::from_slice(nonce), sealed)
                    .map_err(|_| "secretbox: message authentication failed".into())
            }
        }
    }
}

/// The GCM arms are matched twice; this is the impossible branch of the
/// inner match (an error, not a panic).
fn unreachable_cipher<T>() -> Result<T, aes_gcm::aead::Error> {
    Err(aes_gcm::aead::Error)
}

/// AES-256-CBC (the key is 32 bytes, checked when parsed).
fn cbc_encrypt(key: &[u8], iv: &[u8], data: &[u8]) -> Result<Vec<u8>, String> {
    use cbc::cipher::{block_padding::Pkcs7, BlockEncryptMut, KeyIvInit};
    Ok(cbc::Encryptor::<aes::Aes256>::new_from_slices(key, iv)
        .map_err(|_| "invalid key or IV size".to_string())?
        .encrypt_padded_vec_mut::<Pkcs7>(data))
}

fn cbc_decrypt(key: &[u8], iv: &[u8], data: &[u8]) -> Result<Vec<u8>, String> {
    use cbc::cipher::{block_padding::Pkcs7, BlockDecryptMut, KeyIvInit};
    if data.is_empty() || data.len() % CBC_BLOCK != 0 {
        return Err("the stored data is not a multiple of the block size".into());
    }
    cbc::Decryptor::<aes::Aes256>::new_from_slices(key, iv)
        .map_err(|_| "invalid key or IV size".to_string())?
        .decrypt_padded_vec_mut::<Pkcs7>(data)
        .map_err(|_| "invalid PKCS7 data (empty or not padded)".to_string())
}

/// One resource entry's ordered providers, as a storage transformer.
pub struct PrefixTransformer {
    providers: Vec<Provider>,
}

impl ValueTransformer for PrefixTransformer {
    fn transform_to_storage(&self, key: &str, data: Vec<u8>) -> Result<Vec<u8>, TransformError> {
        match self.providers.first() {
            None | Some(Provider::Identity) => Ok(data),
            Some(Provider::Keys { keys, .. }) => {
                let Some(k) = keys.first() else {
                    return Err(TransformError("no encryption key configured".into()));
                };
                let sealed = k.cipher.seal(key.as_bytes(), &data).map_err(|why| {
                    TransformError(format!("failed to encrypt with key {:?}: {why}", k.name))
                })?;
                Ok([&k.prefix[..], &sealed].concat())
            }
        }
    }

    fn is_stale(&self, data: &[u8]) -> bool {
        match self.providers.first() {
            None | Some(Provider::Identity) => data.starts_with(ENCRYPTED_PREFIX),
            Some(Provider::Keys { keys, .. }) => {
                !keys.first().is_some_and(|k| data.starts_with(&k.prefix))
            }
        }
    }

    fn transform_from_storage<'a>(
        &self,
        key: &str,
        data: &'a [u8],
    ) -> Result<Cow<'a, [u8]>, TransformError> {
        if !data.starts_with(ENCRYPTED_PREFIX) {
            return Ok(Cow::Borrowed(data));
        }
        let mut failures = Vec::new();
        for p in &self.providers {
            let Provider::Keys { kind, keys } = p else {
                continue;
            };
            for k in keys {
                if let Some(sealed) = data.strip_prefix(&k.prefix[..]) {
                    match k.cipher.open(key.as_bytes(), sealed) {
                        Ok(plain) => return Ok(Cow::Owned(plain)),
                        Err(why) => {
                            failures.push(format!("{} key {:?}: {why}", kind.name(), k.name))
                        }
                    }
                }
            }
        }
        if failures.is_empty() {
            return Err(TransformError("no matching prefix found".into()));
        }
        Err(TransformError(failures.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    pub(crate) fn config(providers: &str) -> String {
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n\
             resources:\n- resources: [secrets]\n  providers:\n{providers}"
        )
    }

    const K32: &str = "MTIzNDU2Nzg5MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTI="; // 32 bytes
    const K16: &str = "MTIzNDU2Nzg5MDEyMzQ1Ng=="; // 16 bytes

    fn one(kind: &str, secret: &str) -> Arc<PrefixTransformer> {
        let text = config(&format!(
            "  - {kind}:\n      keys:\n      - name: k1\n        secret: {secret}\n"
        ));
        let c = EncryptionConfig::parse(&text).expect("valid config");
        Arc::clone(&c.entries[0].transformer)
    }

    #[test]
    fn prefixes_and_layouts_match_kube() {
        let key = "/registry/secrets/default/s";
        for (kind, secret, overhead) in [
            ("aesgcm", K32, 12 + 16),
            ("aesgcm", K16, 12 + 16),
            ("secretbox", K32, 24 + 16),
        ] {
            let t = one(kind, secret);
            let out = t
                .transform_to_storage(key, b"hello".to_vec())
                .expect("encrypts");
            let prefix = format!("k8s:enc:{kind}:v1:k1:");
            assert!(out.starts_with(prefix.as_bytes()), "{kind}");
            assert_eq!(out.len(), prefix.len() + 5 + overhead, "{kind}");
        }
        let t = one("aescbc", K32);
        let out = t
            .transform_to_storage(key, b"hello".to_vec())
            .expect("encrypts");
        // IV + one padded block.
        assert_eq!(out.len(), "k8s:enc:aescbc:v1:k1:".len() + 16 + 16);
        let out = t
            .transform_to_storage(key, vec![b'x'; 16])
            .expect("encrypts");
        // A full block gains a whole block of padding (PKCS#7).
        assert_eq!(out.len(), "k8s:enc:aescbc:v1:k1:".len() + 16 + 32);
    }

    #[test]
    fn aesgcm_binds_the_ciphertext_to_its_key() {
        let t = one("aesgcm", K32);
        let out = t
            .transform_to_storage("/registry/secrets/a/x", b"{}".to_vec())
            .expect("encrypts");
        assert!(t
            .transform_from_storage("/registry/secrets/a/x", &out)
            .is_ok());
        assert!(t
            .transform_from_storage("/registry/secrets/a/y", &out)
            .is_err());
    }

    #[test]
    fn plaintext_is_read_as_is_and_unknown_keys_fail() {
        let t = one("aesgcm", K32);
        assert_eq!(
            t.transform_from_storage("/k", b"{\"a\":1}")
                .expect("plain")
                .as_ref(),
            b"{\"a\":1}"
        );
        let e =
            t.transform_from_storage("/k", b"k8s:enc:aesgcm:v1:other:xxxxxxxxxxxxxxxxxxxxxxxxxxx");
        assert_eq!(
            e.err().map(|e| e.0),
            Some("no matching prefix found".into())
        );
    }

    #[test]
    fn identity_first_writes_plaintext_and_reads_ciphertext() {
        let text = config(&format!(
            "  - identity: {{}}\n  - aesgcm:\n      keys:\n      - name: k1\n        secret: {K32}\n"
        ));
        let c = EncryptionConfig::parse(&text).expect("valid");
        let t = &c.entries[0].transformer;
        assert_eq!(
            t.transform_to_storage("/k", b"{}".to_vec()).ok(),
            Some(b"{}".to_vec())
        );
        let sealed = one("aesgcm", K32)
            .transform_to_storage("/k", b"{}".to_vec())
            .expect("enc");
        assert_eq!(
            t.transform_from_storage("/k", &sealed).ok().as_deref(),
            Some(&b"{}"[..])
        );
    }

    #[test]
    fn resource_names_and_wildcards() {
        assert!(names("secrets", "", "secrets"));
        assert!(!names("secrets", "apps", "secrets"));
        assert!(names("deployments.apps", "apps", "deployments"));
        assert!(names("*.apps", "apps", "replicasets"));
        assert!(!names("*.apps", "", "pods"));
        assert!(names("*.", "", "pods"));
        assert!(names("*.*", "batch", "jobs"));
        let text = "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n\
                    resources:\n- resources: ['*.apps', configmaps]\n  providers: [{identity: {}}]\n";
        let c = EncryptionConfig::parse(text).expect("valid");
        let t = c.transformers("/registry", Registry::builtin());
        assert!(t.for_key("/registry/deployments/default/x").is_some());
        assert!(t.for_key("/registry/configmaps/default/x").is_some());
        assert!(t.for_key("/registry/secrets/default/x").is_none());
    }

    #[test]
    fn bad_configurations_are_refused() {
        let bad = [
            "kind: EncryptionConfiguration\nresources: []".to_string(),
            config("  - aesgcm:\n      keys: []\n"),
            config("  - aesgcm:\n      keys:\n      - name: a\n        secret: c2hvcnQ=\n"),
            config(&format!("  - secretbox:\n      keys:\n      - name: a\n        secret: {K16}\n")),
            config(&format!("  - aescbc:\n      keys:\n      - name: a\n        secret: {K16}\n")),
            config(&format!(
                "  - aescbc:\n      keys:\n      - name: a\n        secret: {K32}\n      - name: a\n        secret: {K32}\n"
            )),
            config("  - kms: {name: x}\n"),
            config("  - identity: {}\n    aesgcm: {keys: []}\n"),
            config("  - rot13: {}\n"),
        ];
        for text in bad {
            assert!(EncryptionConfig::parse(&text).is_err(), "{text}");
        }
        // JSON is YAML too.
        let json = format!(
            r#"{{"apiVersion":"apiserver.config.k8s.io/v1","kind":"EncryptionConfiguration",
               "resources":[{{"resources":["secrets"],"providers":[{{"aescbc":{{"keys":[{{"name":"k","secret":"{K32}"}}]}}}}]}}]}}"#
        );
        assert!(EncryptionConfig::parse(&json).is_ok());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn round_trip_every_provider(data in proptest::collection::vec(any::<u8>(), 0..300), kind in 0usize..3) {
            let kinds = ["aesgcm", "aescbc", "secretbox"];
            let t = one(kinds[kind], K32);
            let sealed = t.transform_to_storage("/registry/secrets/ns/n", data.clone()).expect("encrypts");
            prop_assert!(sealed.starts_with(ENCRYPTED_PREFIX));
            let opened = t.transform_from_storage("/registry/secrets/ns/n", &sealed).expect("decrypts");
            prop_assert_eq!(opened.as_ref(), &data[..]);
        }

        #[test]
        fn tampered_ciphertext_is_rejected(
            data in proptest::collection::vec(any::<u8>(), 0..200),
            kind in 0usize..2,
            at in any::<prop::sample::Index>(),
            flip in 1u8..=255,
        ) {
            // The authenticated providers (aescbc has no integrity check).
            let kinds = ["aesgcm", "secretbox"];
            let t = one(kinds[kind], K32);
            let mut sealed = t.transform_to_storage("/k", data).expect("encrypts");
            let prefix = format!("k8s:enc:{}:v1:k1:", kinds[kind]).len();
            let i = prefix + at.index(sealed.len() - prefix);
            sealed[i] ^= flip;
            prop_assert!(t.transform_from_storage("/k", &sealed).is_err());
        }

        #[test]
        fn garbage_never_panics(data in proptest::collection::vec(any::<u8>(), 0..100), kind in 0usize..3) {
            let kinds = ["aesgcm", "aescbc", "secretbox"];
            let t = one(kinds[kind], K32);
            let mut value = format!("k8s:enc:{}:v1:k1:", kinds[kind]).into_bytes();
            value.extend(data);
            let _ = t.transform_from_storage("/k", &value);
        }

        #[test]
        fn config_parser_never_panics(text in "\\PC{0,200}") {
            let _ = EncryptionConfig::parse(&text);
        }
    }
}
