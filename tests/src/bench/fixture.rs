//! The objects the benchmarks write and read: 2 KiB ConfigMaps, and the
//! server's stored form of one, copied straight into etcd when a phase needs
//! many objects in place (loading 100,000 through the server would measure
//! the loading, not the phase).

use super::client::Http;
use super::{Error, Result};
use bytes::Bytes;
use etcd_client::{GetOptions, KvClient, Txn, TxnOp};
use std::sync::OnceLock;

/// The size of a ConfigMap request body.
pub const OBJECT_BYTES: usize = 2048;
/// Puts per etcd transaction when loading (etcd allows 128).
const LOAD_BATCH: u64 = 100;
/// Transactions in flight when loading.
const LOAD_CONCURRENCY: u64 = 8;

/// Incompressible-looking filler, the same for every object.
pub fn filler() -> &'static str {
    static FILLER: OnceLock<String> = OnceLock::new();
    FILLER.get_or_init(|| {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        (0..OBJECT_BYTES)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from(b"abcdefghijklmnopqrstuvwxyz0123456789"[(x % 36) as usize])
            })
            .collect()
    })
}

/// A ConfigMap body of `OBJECT_BYTES`
/// whose `data.seq` is `seq`, written before the filler so that a watcher
/// finds it without scanning the whole event.
pub fn configmap(ns: &str, name: &str, seq: u64, resource_version: Option<&str>) -> Bytes {
    configmap_of(OBJECT_BYTES, ns, name, seq, resource_version)
}

/// [`configmap`] of `size` bytes (at most `OBJECT_BYTES` of filler).
pub fn configmap_of(
    size: usize,
    ns: &str,
    name: &str,
    seq: u64,
    resource_version: Option<&str>,
) -> Bytes {
    let rv = resource_version
        .map(|rv| format!(r#","resourceVersion":"{rv}""#))
        .unwrap_or_default();
    let head = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"{ns}"{rv}}},"data":{{"seq":"{seq:010}","payload":""#
    );
    let tail = r#""}}"#;
    let pad = size
        .min(OBJECT_BYTES)
        .saturating_sub(head.len() + tail.len());
    Bytes::from(format!("{head}{}{tail}", &filler()[..pad]))
}

/// A Deployment body of about `OBJECT_BYTES`: a typical one-container pod
/// template that kube's defaults and validation have work to do on (the
/// padding is an annotation).
pub fn deployment(ns: &str, name: &str, seq: u64) -> Bytes {
    let head = format!(
        r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"{name}","namespace":"{ns}","labels":{{"app":"bench"}},"annotations":{{"seq":"{seq:010}","pad":""#
    );
    let tail = r#""}},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"bench"}},"template":{"metadata":{"labels":{"app":"bench"}},"spec":{"containers":[{"name":"web","image":"nginx:1.27","ports":[{"containerPort":80,"name":"http"}],"env":[{"name":"MODE","value":"bench"}],"resources":{"requests":{"cpu":"100m","memory":"64Mi"},"limits":{"cpu":"500m","memory":"128Mi"}},"readinessProbe":{"httpGet":{"path":"/","port":80}}}]}}}}"#;
    let pad = OBJECT_BYTES.saturating_sub(head.len() + tail.len());
    Bytes::from(format!("{head}{}{tail}", &filler()[..pad]))
}

/// The etcd key of a Deployment (kube's: no group segment).
pub fn deployment_key(prefix: &str, ns: &str, name: &str) -> String {
    format!("{prefix}/deployments/{ns}/{name}")
}

/// The etcd key of a ConfigMap.
pub fn key(prefix: &str, ns: &str, name: &str) -> String {
    format!("{prefix}/configmaps/{ns}/{name}")
}

/// Creates a namespace through the server (an existing one is fine).
pub async fn namespace(http: &Http, name: &str) -> Result<()> {
    let body =
        format!(r#"{{"apiVersion":"v1","kind":"Namespace","metadata":{{"name":"{name}"}}}}"#);
    match http.post("/api/v1/namespaces", Bytes::from(body)).await {
        Ok(_) | Err(Error::Status { status: 409, .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The stored form of one ConfigMap created through the server, to copy:
/// protobuf or JSON, whichever the server stores.
pub struct Template {
    stored: Vec<u8>,
    name: String,
    uid: String,
}

impl Template {
    /// Creates `ns/name` through the server and reads back what it stored.
    pub async fn create(
        http: &Http,
        kv: &mut KvClient,
        prefix: &str,
        ns: &str,
        name: &str,
    ) -> Result<Template> {
        Template::create_from(http, kv, prefix, ns, name, configmap(ns, name, 0, None)).await
    }

    /// Creates the ConfigMap `body` (named `ns/name`) through the server
    /// and reads back what it stored.
    pub async fn create_from(
        http: &Http,
        kv: &mut KvClient,
        prefix: &str,
        ns: &str,
        name: &str,
        body: Bytes,
    ) -> Result<Template> {
        let path = format!("/api/v1/namespaces/{ns}/configmaps");
        let reply = http.post(&path, body).await?;
        let answered: serde_json::Value = serde_json::from_slice(&reply.body)
            .map_err(|e| Error::Setup(format!("create of {ns}/{name} answered no JSON: {e}")))?;
        let uid = answered["metadata"]["uid"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let key = key(prefix, ns, name);
        let resp = kv.get(key.as_str(), None).await?;
        let kv = resp
            .kvs()
            .first()
            .ok_or_else(|| Error::Setup(format!("no etcd key {key}: the key layout changed")))?;
        let stored = kv.value().to_vec();
        let found = |s: &str| memchr::memmem::find(&stored, s.as_bytes()).is_some();
        if uid.len() != 36 || !found(&uid) || !found(name) {
            return Err(Error::Setup(format!("unexpected stored form of {key}")));
        }
        Ok(Template {
            stored,
            name: name.to_string(),
            uid,
        })
    }

    /// The stored bytes as they are.
    pub fn bytes(&self) -> &[u8] {
        &self.stored
    }

    /// The stored form of another object `name` (same length as the
    /// template's name, so a protobuf value stays valid) with a uid of its
    /// own made from `n` and the template's uid.
    pub fn render(&self, name: &str, n: u64) -> Vec<u8> {
        // Objects rendered from different templates get different uids:
        // the first group of the template's own uid is kept.
        let group = self.uid.get(..8).unwrap_or("0000be4c");
        let uid = format!("{group}-0000-4000-8000-{n:012x}");
        let out = replace_first(&self.stored, self.name.as_bytes(), name.as_bytes());
        replace_first(&out, self.uid.as_bytes(), uid.as_bytes())
    }
}

/// `data` with the first `from` replaced by `to`.
fn replace_first(data: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    match memchr::memmem::find(data, from) {
        Some(at) => [&data[..at], to, &data[at + from.len()..]].concat(),
        None => data.to_vec(),
    }
}

/// Copies `template` into etcd as objects `name(1)..name(count - 1)` of
/// `ns` (object 0 is the template itself). Returns the value bytes written.
pub async fn load(
    kv: &KvClient,
    prefix: &str,
    ns: &str,
    template: &Template,
    count: u64,
    name: fn(u64) -> String,
) -> Result<u64> {
    let mut tasks = Vec::new();
    for lane in 0..LOAD_CONCURRENCY {
        let mut kv = kv.clone();
        let (prefix, ns) = (prefix.to_string(), ns.to_string());
        let batches: Vec<(u64, u64)> = (0..count.div_ceil(LOAD_BATCH))
            .filter(|b| b % LOAD_CONCURRENCY == lane)
            .map(|b| ((b * LOAD_BATCH).max(1), ((b + 1) * LOAD_BATCH).min(count)))
            .collect();
        let values: Vec<Vec<(String, Vec<u8>)>> = batches
            .iter()
            .map(|&(from, to)| {
                (from..to)
                    .map(|i| (key(&prefix, &ns, &name(i)), template.render(&name(i), i)))
                    .collect()
            })
            .collect();
        tasks.push(tokio::spawn(async move {
            let mut bytes = 0u64;
            for batch in values {
                if batch.is_empty() {
                    continue;
                }
                bytes += batch.iter().map(|(_, v)| v.len() as u64).sum::<u64>();
                let ops: Vec<TxnOp> = batch
                    .into_iter()
                    .map(|(k, v)| TxnOp::put(k, v, None))
                    .collect();
                kv.txn(Txn::new().and_then(ops)).await?;
            }
            Ok::<u64, Error>(bytes)
        }));
    }
    let mut bytes = template.bytes().len() as u64;
    for t in tasks {
        bytes += t.await.map_err(|e| Error::Setup(e.to_string()))??;
    }
    Ok(bytes)
}

/// The number of keys and value bytes under `ns` (a consistent range).
pub async fn stored(kv: &mut KvClient, prefix: &str, ns: &str) -> Result<(u64, u64)> {
    let dir = format!("{prefix}/configmaps/{ns}/");
    let resp = kv.get(dir, Some(GetOptions::new().with_prefix())).await?;
    let bytes = resp.kvs().iter().map(|kv| kv.value().len() as u64).sum();
    Ok((resp.kvs().len() as u64, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_two_kib_json() {
        let body = configmap("ns", "name-0001", 42, None);
        assert_eq!(body.len(), OBJECT_BYTES);
        let v: serde_json::Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(v["data"]["seq"], "0000000042");
        assert_eq!(configmap_of(1024, "ns", "name-0001", 42, None).len(), 1024);
        let with_rv = configmap("ns", "name-0001", 42, Some("123"));
        assert_eq!(with_rv.len(), OBJECT_BYTES);
        let v: serde_json::Value = serde_json::from_slice(&with_rv).expect("json");
        assert_eq!(v["metadata"]["resourceVersion"], "123");
    }

    #[test]
    fn renders_other_objects_of_the_same_size() {
        let text = r#"{"metadata":{"name":"o-0000000","namespace":"n","uid":"0f0e0d0c-0000-4000-8000-000000000001"},"data":{}}"#;
        let t = Template {
            stored: text.as_bytes().to_vec(),
            name: "o-0000000".into(),
            uid: "0f0e0d0c-0000-4000-8000-000000000001".into(),
        };
        let other = String::from_utf8(t.render("o-0000007", 7)).unwrap();
        assert_eq!(other.len(), text.len());
        assert!(other.contains(r#""name":"o-0000007""#));
        assert!(other.contains("000000000007"));
    }
}
