//! Encryption at rest (`--encryption-provider-config`): what etcd holds is
//! kube-apiserver's ciphertext with its prefix, read with etcd-client
//! directly, while the API (through the watch cache: get, list, watch)
//! serves the plaintext; keys rotate; identity-first configurations read
//! old ciphertext; a key that cannot decrypt is a 500 Status.

use crate::common::{configmap, read_lines, unique_prefix, Api};
use apiserver::encryption::EncryptionConfig;
use apiserver::registry::Registry;
use axum::body::Body;
use axum::http::StatusCode;
use serde_json::{json, Value};
use std::time::Duration;
use watchcache::testing::TestEtcd;
use watchcache::Transformers;

const SECRETS: &str = "/api/v1/namespaces/default/secrets";
const CMS: &str = "/api/v1/namespaces/default/configmaps";
/// base64 of "secret-value", the data every test secret carries.
const DATA: &str = "c2VjcmV0LXZhbHVl";
const K1: &str = "MTIzNDU2Nzg5MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTI=";
const K2: &str = "YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY=";

/// A configuration encrypting secrets with `providers` (YAML list items).
fn transformers(prefix: &str, providers: &[String]) -> Transformers {
    let text = format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n\
         resources:\n- resources: [secrets]\n  providers:\n{}",
        providers.concat()
    );
    EncryptionConfig::parse(&text)
        .expect("valid configuration")
        .transformers(prefix, Registry::builtin())
}

fn keyed(kind: &str, keys: &[(&str, &str)]) -> String {
    let mut s = format!("  - {kind}:\n      keys:\n");
    for (name, secret) in keys {
        s.push_str(&format!("      - name: {name}\n        secret: {secret}\n"));
    }
    s
}

fn identity() -> String {
    "  - identity: {}\n".to_string()
}

fn secret(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
           "data": {"password": DATA}})
}

/// The value etcd holds at `key`, read without the API server.
async fn raw(key: &str) -> Vec<u8> {
    let mut kv = TestEtcd::shared().await.store().await.client().kv_client();
    let resp = kv.get(key, None).await.expect("etcd get");
    resp.kvs()
        .first()
        .map(|kv| kv.value().to_vec())
        .unwrap_or_default()
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test]
async fn secrets_are_stored_encrypted_by_each_provider_and_served_decrypted() {
    for kind in ["aesgcm", "aescbc", "secretbox"] {
        let prefix = unique_prefix("enc");
        let api = Api::transformed(
            &prefix,
            transformers(&prefix, &[keyed(kind, &[("key1", K1)])]),
        )
        .await;
        let created = api.post(SECRETS, &secret("s1")).await;
        assert_eq!(
            created.code,
            StatusCode::CREATED,
            "{kind}: {}",
            created.text()
        );
        api.create(CMS, &configmap("c1", &[("k", "plain-value")]))
            .await;

        let stored = raw(&format!("{prefix}/secrets/default/s1")).await;
        let want = format!("k8s:enc:{kind}:v1:key1:");
        assert!(
            stored.starts_with(want.as_bytes()),
            "{kind}: {:?}",
            String::from_utf8_lossy(&stored)
        );
        assert!(
            !contains(&stored, DATA) && !contains(&stored, "\"s1\""),
            "{kind}: plaintext in etcd"
        );
        // Other resources are not encrypted.
        let cm = raw(&format!("{prefix}/configmaps/default/c1")).await;
        assert!(contains(&cm, "plain-value"), "{kind}");

        let got = api.must_get(&format!("{SECRETS}/s1")).await;
        assert_eq!(got["data"]["password"], DATA, "{kind}");
        let list = api.must_get(SECRETS).await;
        assert_eq!(
            list["items"][0]["data"]["password"], DATA,
            "{kind}: list from the cache"
        );
    }
}

#[tokio::test]
async fn the_watch_cache_serves_decrypted_events() {
    let prefix = unique_prefix("encwatch");
    let api = Api::transformed(
        &prefix,
        transformers(&prefix, &[keyed("aesgcm", &[("key1", K1)])]),
    )
    .await;
    let list = api.must_get(SECRETS).await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let resp = api
        .send(
            "GET",
            &format!("{SECRETS}?watch=true&resourceVersion={rv}"),
            &[],
            Body::empty(),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    api.create(SECRETS, &secret("w1")).await;
    let (events, _) = read_lines(resp, 1, Duration::from_secs(20)).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[0]["object"]["data"]["password"], DATA);
    assert!(api.state.cache.as_ref().is_some_and(|c| c.is_ready()));
}

#[tokio::test]
async fn an_update_after_rotation_reencrypts_with_the_new_first_key() {
    let prefix = unique_prefix("encrot");
    let old = Api::transformed(
        &prefix,
        transformers(&prefix, &[keyed("aescbc", &[("key1", K1)])]),
    )
    .await;
    old.create(SECRETS, &secret("r1")).await;
    let key = format!("{prefix}/secrets/default/r1");
    assert!(raw(&key).await.starts_with(b"k8s:enc:aescbc:v1:key1:"));

    // Rotation: the new key first, the old one still there to read with.
    let new = Api::transformed(
        &prefix,
        transformers(
            &prefix,
            &[
                keyed("aesgcm", &[("key2", K2)]),
                keyed("aescbc", &[("key1", K1)]),
            ],
        ),
    )
    .await;
    let got = new.must_get(&format!("{SECRETS}/r1")).await;
    assert_eq!(got["data"]["password"], DATA);
    let updated = new.put(&format!("{SECRETS}/r1"), &got).await;
    assert_eq!(updated.code, StatusCode::OK, "{}", updated.text());
    assert!(raw(&key).await.starts_with(b"k8s:enc:aesgcm:v1:key2:"));
    assert_eq!(
        new.must_get(&format!("{SECRETS}/r1")).await["data"]["password"],
        DATA
    );
}

#[tokio::test]
async fn identity_first_reads_ciphertext_and_writes_plaintext() {
    let prefix = unique_prefix("encid");
    let enc = Api::transformed(
        &prefix,
        transformers(&prefix, &[keyed("secretbox", &[("key1", K1)])]),
    )
    .await;
    enc.create(SECRETS, &secret("i1")).await;
    let key = format!("{prefix}/secrets/default/i1");
    assert!(raw(&key).await.starts_with(b"k8s:enc:secretbox:v1:key1:"));

    let plain = Api::transformed(
        &prefix,
        transformers(&prefix, &[identity(), keyed("secretbox", &[("key1", K1)])]),
    )
    .await;
    let got = plain.must_get(&format!("{SECRETS}/i1")).await;
    assert_eq!(got["data"]["password"], DATA);
    let updated = plain.put(&format!("{SECRETS}/i1"), &got).await;
    assert_eq!(updated.code, StatusCode::OK, "{}", updated.text());
    let stored = raw(&key).await;
    assert!(
        stored.starts_with(b"{"),
        "{:?}",
        String::from_utf8_lossy(&stored)
    );
    assert!(contains(&stored, DATA));
}

#[tokio::test]
async fn plaintext_written_before_encryption_stays_readable() {
    let prefix = unique_prefix("encmig");
    let before = Api::transformed(&prefix, Transformers::none()).await;
    before.create(SECRETS, &secret("m1")).await;
    let after = Api::transformed(
        &prefix,
        transformers(&prefix, &[keyed("aesgcm", &[("key1", K1)])]),
    )
    .await;
    let got = after.must_get(&format!("{SECRETS}/m1")).await;
    assert_eq!(got["data"]["password"], DATA);
    // An unchanged update rewrites the stale plaintext encrypted.
    let updated = after.put(&format!("{SECRETS}/m1"), &got).await;
    assert_eq!(updated.code, StatusCode::OK, "{}", updated.text());
    let key = format!("{prefix}/secrets/default/m1");
    assert!(raw(&key).await.starts_with(b"k8s:enc:aesgcm:v1:key1:"));
}

#[tokio::test]
async fn a_key_that_cannot_decrypt_is_an_internal_error_status() {
    let prefix = unique_prefix("encbad");
    let good = Api::transformed(
        &prefix,
        transformers(&prefix, &[keyed("aesgcm", &[("key1", K1)])]),
    )
    .await;
    good.create(SECRETS, &secret("b1")).await;
    // Same key name, other secret: authentication fails.
    let wrong = Api::transformed(
        &prefix,
        transformers(&prefix, &[keyed("aesgcm", &[("key1", K2)])]),
    )
    .await;
    let r = wrong.get(&format!("{SECRETS}/b1")).await;
    let (code, reason, message) = r.status();
    assert_eq!((code, reason), (500, "InternalError"), "{}", r.text());
    assert!(
        message.starts_with("Internal error occurred: failed to decrypt secrets \"b1\""),
        "{message}"
    );
    assert!(
        !message.contains(&prefix),
        "no etcd key in the message: {message}"
    );
    // The key is gone from the configuration: no provider matches.
    let gone = Api::transformed(
        &prefix,
        transformers(&prefix, &[keyed("aesgcm", &[("key9", K1)])]),
    )
    .await;
    let r = gone.get(&format!("{SECRETS}/b1")).await;
    assert_eq!(r.status().0, 500, "{}", r.text());
    assert!(
        r.status().2.contains("no matching prefix found"),
        "{}",
        r.text()
    );
    // A list served by the ready watch cache fails the same way instead of
    // leaving the secret out; other secrets come back once it is gone.
    let cache = wrong.state.cache.as_ref().expect("a watch cache");
    assert!(cache.wait_ready(Duration::from_secs(20)).await);
    let r = wrong.get(SECRETS).await;
    let (code, _, message) = r.status();
    assert_eq!(code, 500, "{}", r.text());
    assert!(
        message.starts_with("Internal error occurred: failed to decrypt secrets"),
        "{message}"
    );
    // Reading it first, the API cannot delete it either (as in kube);
    // removed behind the server's back, the cache serves lists again.
    assert_eq!(wrong.delete(&format!("{SECRETS}/b1")).await.code, 500);
    let mut kv = TestEtcd::shared().await.store().await.client().kv_client();
    kv.delete(format!("{prefix}/secrets/default/b1"), None)
        .await
        .expect("etcd delete");
    wrong.create(SECRETS, &secret("b2")).await;
    let list = wrong.must_get(SECRETS).await;
    assert_eq!(crate::common::names(&list), ["b2"]);
}
